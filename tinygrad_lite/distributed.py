"""Data-parallel training on MPI, the way DDP and Horovod do it.

`mpiexec -n K python train.py` starts K processes (ranks). Each holds the whole model; a step is

    every rank r:  g_r = gradient of the loss on its own batch       (no communication)
    together:      g = sum_r w_r g_r / sum_r w_r                      (one Allreduce)
    every rank:    optimizer.step() with g                            (the same update everywhere)

With w_r = 1 this is DDP's mean; with w_r = the rank's target tokens, g is exactly the gradient of
the token-mean loss over the K batches taken together, as one process would compute it. The
weights start equal (`broadcast_parameters` sends rank 0's) and stay equal, because every rank
applies the same update to the same numbers. Each rank draws its own dropout (`rank_seed`) and
takes its own batches (the training loop gives rank r the r-th of every K).

    model = ...; dist.broadcast_parameters(model.parameters())
    for step ...:
        loss.backward()
        dist.all_reduce_gradients(model.parameters(), weight=n_tokens)
        optimizer.step()

The plain all-reduce is one Allreduce per parameter (`flat=False`, the tests' oracle); the fast
path packs every gradient into one flat buffer per dtype, so a step pays the link's latency once
instead of once per tensor.

One process (not started by mpiexec, or by `mpiexec -n 1`) is one rank: every function is then a
no-op that touches nothing, and mpi4py is never imported, so it need not be installed (under
`mpiexec -n K` it must be: K lone runs writing the same files would be worse than an error).
Under mpiexec, an error on one rank must stop the others (they would wait forever in their next
collective): `abort` calls MPI_Abort, and a watchdog thread aborts a rank whose collective has not
completed within the timeout (TINYGRAD_LITE_DIST_TIMEOUT seconds, default 1800, like PyTorch's).
"""
from __future__ import annotations

import contextlib
import json
import os
import sys
import tempfile
import threading
import time

import numpy as np

from .checks import int_at_least, number

TIMEOUT_ENV = "TINYGRAD_LITE_DIST_TIMEOUT"
DEFAULT_TIMEOUT = 1800.0
# what the common launchers export to each process they start: MPICH/Intel MPI, Open MPI, MVAPICH
LAUNCHER_SIZE_VARS = ("PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "MV2_COMM_WORLD_SIZE")

_comm = None          # MPI.COMM_WORLD once init() found more than one rank
_MPI = None
_initialized = False
_watchdog = None


def launched_size() -> int:
    """How many processes the launcher says it started (1 when not under mpiexec)."""
    for name in LAUNCHER_SIZE_VARS:
        text = os.environ.get(name, "").strip()
        if text.isdigit():
            return int(text)
    return 1


def init(timeout: float | None = None) -> None:
    """Join the MPI job if this process was started by mpiexec with more than one rank; else
    stay a single rank without importing mpi4py. Safe to call more than once."""
    global _comm, _MPI, _initialized, _watchdog
    if _initialized:
        return
    timeout = _timeout(timeout)
    size = launched_size()
    if size > 1:
        try:
            from mpi4py import MPI
        except ImportError:
            raise RuntimeError(f"distributed: mpiexec started {size} processes but mpi4py is not installed, so "
                               f"each would train alone; pip install 'tinygrad-lite[distributed]' (mpi4py, "
                               f"mpich) or run one process") from None
        if MPI.COMM_WORLD.Get_size() != size:
            raise RuntimeError(f"distributed: the launcher started {size} processes but MPI sees "
                               f"{MPI.COMM_WORLD.Get_size()}: mpiexec and mpi4py's MPI library differ "
                               f"(use the mpiexec of the MPI that mpi4py was built with)")
        _MPI, _comm = MPI, MPI.COMM_WORLD
        _watchdog = _Watchdog(timeout)
    _initialized = True


def _timeout(timeout) -> float:
    if timeout is None:
        text = os.environ.get(TIMEOUT_ENV, "").strip()
        try:
            timeout = float(text) if text else DEFAULT_TIMEOUT
        except ValueError:
            raise ValueError(f"{TIMEOUT_ENV} must be a number of seconds, got {text!r}") from None
    if not timeout > 0:
        raise ValueError(f"distributed.init: timeout must be > 0 seconds, got {timeout}")
    return float(timeout)


def active() -> bool:
    """Whether this process has joined an MPI job of more than one rank (asks nothing, starts nothing)."""
    return _comm is not None


def rank() -> int:
    """This process's index, 0 .. world_size() - 1."""
    init()
    return 0 if _comm is None else _comm.Get_rank()


def world_size() -> int:
    """How many ranks train together (1 without mpiexec)."""
    init()
    return 1 if _comm is None else _comm.Get_size()


def is_main() -> bool:
    """Rank 0: the one that writes checkpoints, logs and plots."""
    return rank() == 0


def rank_seed(seed: int, *salt: int) -> int:
    """This rank's seed for its own random stream (dropout): `seed` itself on rank 0, so one process
    and rank 0 draw exactly what they drew without MPI; on rank r > 0 a seed from
    SeedSequence([seed, r, *salt]), independent of every other rank's."""
    seed = int_at_least("rank_seed", "seed", seed, 0)
    r = rank()
    if r == 0:
        return seed
    return int(np.random.SeedSequence([seed, r, *salt]).generate_state(1, np.uint64)[0])


# ---------------------------------------------------------------- gradients and weights

def all_reduce_gradients(parameters, weight: float = 1.0, extra=(), flat: bool = True) -> tuple:
    """Replace every parameter's .grad by sum_r weight_r * grad_r / sum_r weight_r over the ranks.

    `extra` numbers ride along and come back summed over the ranks (a loss sum, say), so a step
    needs no second collective. Returns (sum of weights, *sums of extra). A grad that is None on
    every rank stays None; None on some ranks counts as zeros there. One rank: grads untouched.
    """
    weight = number("all_reduce_gradients", "weight", weight, low=0)
    head = [weight, *(number("all_reduce_gradients", "extra", x) for x in extra)]
    if world_size() == 1:
        return tuple(head)
    params = list(parameters)
    head += [float(p.grad is not None) for p in params]  # which grads exist on some rank
    if flat:
        sums = _all_reduce_flat(params, weight, head)
    else:  # the plain version: one Allreduce per tensor
        sums = _all_reduce(np.array(head), "all_reduce_gradients")
        _check_total(sums[0])
        for p, present in zip(params, sums[len(head) - len(params):]):
            if present:
                p.grad = _all_reduce(_weighted(p, weight), "all_reduce_gradients") / p.data.dtype.type(sums[0])
    return tuple(float(s) for s in sums[: len(head) - len(params)])


def _check_total(total: float) -> None:
    if not total > 0:
        raise ValueError(f"all_reduce_gradients: the weights of all ranks sum to {total}; expected > 0")


def _weighted(p, weight) -> np.ndarray:
    return np.zeros_like(p.data) if p.grad is None else p.grad * p.data.dtype.type(weight)


def _all_reduce_flat(params, weight, head) -> np.ndarray:
    """One buffer per dtype (a float32 model: one), [head, every grad x weight], reduced in place;
    the grads become views of it, divided by the summed weight. Returns the summed head."""
    sums = None
    for dtype, group in _by_dtype(params).items():
        leading = head if sums is None else []
        start = len(leading)
        buffer = np.empty(start + sum(p.data.size for p in group), dtype)
        buffer[:start] = leading
        views, offset = [], start
        for p in group:
            views.append(buffer[offset: offset + p.data.size])
            if p.grad is None:
                views[-1][...] = 0
            else:
                np.multiply(p.grad.reshape(-1), dtype.type(weight), out=views[-1])
            offset += p.data.size
        _all_reduce(buffer, "all_reduce_gradients")
        if sums is None:
            sums = buffer[: len(head)].astype(np.float64)
            _check_total(sums[0])
            present = dict(zip(map(id, params), sums[len(head) - len(params):]))
        buffer[start:] /= dtype.type(sums[0])
        for p, view in zip(group, views):
            if present[id(p)]:
                p.grad = view.reshape(p.data.shape)
    return sums


def _by_dtype(params) -> dict:
    groups = {}
    for p in params:
        groups.setdefault(p.data.dtype, []).append(p)
    return groups


def broadcast_parameters(parameters, root: int = 0) -> None:
    """Overwrite every parameter's values, in place, with rank `root`'s: the ranks start equal."""
    root = int_at_least("broadcast_parameters", "root", root, 0)
    if root >= world_size():
        raise ValueError(f"broadcast_parameters: root must be a rank below {world_size()}, got {root}")
    if world_size() == 1:
        return
    for dtype, group in _by_dtype(list(parameters)).items():
        buffer = np.concatenate([p.data.ravel() for p in group]).astype(dtype, copy=False)
        with _watchdog.watch("broadcast_parameters"):
            _comm.Bcast(buffer, root=root)
        offset = 0
        for p in group:
            p.data[...] = buffer[offset: offset + p.data.size].reshape(p.data.shape)
            offset += p.data.size


def _all_reduce(array: np.ndarray, what: str, op=None) -> np.ndarray:
    array = np.ascontiguousarray(array)
    with _watchdog.watch(what):
        _comm.Allreduce(_MPI.IN_PLACE, array, op=op or _MPI.SUM)
    return array


# ---------------------------------------------------------------- agreeing and waiting

def any_rank(*flags) -> tuple:
    """For each flag, whether it is true on any rank (one small Allreduce): lets every rank stop
    after the same step when one of them was interrupted or ran out of time."""
    if world_size() == 1:
        return tuple(bool(f) for f in flags)
    values = _all_reduce(np.array([bool(f) for f in flags], np.int32), "any_rank", _MPI.MAX)
    return tuple(bool(v) for v in values)


def barrier(what: str = "barrier") -> None:
    """Wait until every rank gets here, sleeping (a blocking MPI wait spins a core at 100%, which
    would slow down rank 0 while it evaluates on a small machine)."""
    if world_size() == 1:
        return
    request = _comm.Ibarrier()
    with _watchdog.watch(what):
        while not request.Test():
            time.sleep(0.005)


def gather_json(value) -> list | None:
    """Every rank's JSON-able `value`, in rank order, on rank 0; None on the others. For what each
    rank holds alone, such as its random state for rank 0's checkpoint. The values travel as UTF-8
    JSON bytes, never pickled. One rank: [value]."""
    text = json.dumps(value)
    if world_size() == 1:
        return [json.loads(text)]
    data = np.frombuffer(text.encode("utf-8"), np.uint8)
    main = is_main()
    sizes = np.zeros(world_size(), np.int64) if main else None
    with _watchdog.watch("gather_json"):
        _comm.Gather(np.array([data.size], np.int64), sizes, root=0)
        if not main:
            _comm.Gatherv(data, None, root=0)
            return None
        offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]])
        buffer = np.empty(int(sizes.sum()), np.uint8)
        _comm.Gatherv(data, [buffer, sizes.tolist(), offsets.tolist(), _MPI.BYTE], root=0)
    return [json.loads(buffer[start: start + size].tobytes().decode("utf-8"))
            for start, size in zip(offsets.tolist(), sizes.tolist())]


@contextlib.contextmanager
def shared_file(path):
    """Yields a path to rank 0's file `path` on every rank (None if rank 0 has no such file): rank 0
    its own path, the others a private temporary copy of its bytes, so no shared filesystem is
    needed (a --resume on several machines)."""
    if world_size() == 1:
        yield path if os.path.isfile(path) else None
        return
    main = is_main()
    data = np.fromfile(path, np.uint8) if main and os.path.isfile(path) else None
    size = np.array([-1 if data is None else data.size], np.int64)
    with _watchdog.watch("shared_file"):
        _comm.Bcast(size, root=0)
        if size[0] >= 0:
            data = data if main else np.empty(int(size[0]), np.uint8)
            _comm.Bcast(data, root=0)
    if size[0] < 0 or main:
        yield None if size[0] < 0 else path
        return
    handle, copy = tempfile.mkstemp(suffix="-" + os.path.basename(path))
    try:
        with os.fdopen(handle, "wb") as f:
            f.write(data.tobytes())
        yield copy
    finally:
        os.remove(copy)


def abort(code: int, reason: str = "failed") -> None:
    """Stop every rank now (MPI_Abort) with exit status `code`, saying which rank gave up and why.
    A rank that leaves on its own would leave the others waiting forever in their next collective.
    No-op in one process."""
    if _comm is None:
        return
    print(f"rank {rank()} of {world_size()}: {reason}; stopping all {world_size()} ranks (MPI_Abort)",
          file=sys.stderr, flush=True)
    time.sleep(0.5)  # MPI_Abort tears the launcher down at once: give it time to pass our stderr on
    _comm.Abort(code)


class _Watchdog:
    """Aborts the job when one collective has waited longer than `timeout` seconds: a rank that
    hangs (a deadlock, a machine gone from the network) must not hang the others forever. A
    killed rank is the launcher's job: mpiexec then kills the rest within a second."""

    def __init__(self, timeout: float):
        self.timeout, self.waiting = timeout, None
        threading.Thread(target=self._run, name="distributed-watchdog", daemon=True).start()

    @contextlib.contextmanager
    def watch(self, what: str):
        self.waiting = (what, time.monotonic())
        try:
            yield
        finally:
            self.waiting = None

    def _run(self):
        while True:
            time.sleep(min(1.0, self.timeout / 10))
            waiting = self.waiting
            if waiting and time.monotonic() - waiting[1] > self.timeout:
                abort(3, f"{waiting[0]} got no answer from the other ranks for {self.timeout:g} s "
                         f"(a rank hangs or is unreachable; {TIMEOUT_ENV} sets the limit)")
