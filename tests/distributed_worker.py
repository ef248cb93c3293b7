"""What tests/test_distributed*.py run under `mpiexec -n 2 python tests/distributed_worker.py MODE ...`.

    collectives             all_reduce_gradients (flat and plain) against sum_r w_r g_r / sum_r w_r
                            computed here from every rank's seed; broadcast, any_rank, gather_json,
                            shared_file
    train ARGS...           `python -m transformer train ARGS` after writing this rank's pid to
                            OUT/rank<r>.pid (so a test can kill one rank)
    fail-at STEP ARGS...    the same, but rank 1 raises at STEP
    hang-at STEP ARGS...    the same, but rank 1 stops answering at STEP
"""
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tinygrad_lite import Tensor  # noqa: E402
from tinygrad_lite import distributed as dist  # noqa: E402

SHAPES = [((3, 4), np.float32), ((5,), np.float32), ((2, 2), np.float64), ((7,), np.float32), ((1,), np.float32)]
NONE_ON_RANK_1, NONE_EVERYWHERE = 3, 4


def grads_of(rank: int) -> list:
    """Rank `rank`'s gradients, the same on whichever rank computes them."""
    rng = np.random.default_rng(100 + rank)
    grads = [rng.standard_normal(shape).astype(dtype) for shape, dtype in SHAPES]
    if rank == 1:
        grads[NONE_ON_RANK_1] = None
    grads[NONE_EVERYWHERE] = None
    return grads


def check_collectives():
    r, k = dist.rank(), dist.world_size()
    weights = [float(i + 1) for i in range(k)]
    expected = []
    for i, (shape, dtype) in enumerate(SHAPES):
        parts = [(w, grads_of(j)[i]) for j, w in enumerate(weights)]
        if all(g is None for _, g in parts):
            expected.append(None)
        else:
            total = sum(w * (np.zeros(shape) if g is None else g.astype(np.float64)) for w, g in parts)
            expected.append(total / sum(weights))
    for flat in (True, False):
        params = [Tensor(np.zeros(shape, dtype), requires_grad=True) for shape, dtype in SHAPES]
        for p, g in zip(params, grads_of(r)):
            p.grad = g
        sums = dist.all_reduce_gradients(params, weight=weights[r], extra=[r, 10.0], flat=flat)
        assert sums == (sum(weights), sum(range(k)), 10.0 * k), sums
        for i, (p, e) in enumerate(zip(params, expected)):
            if e is None:
                assert p.grad is None, (flat, i)
            else:
                assert p.grad.dtype == SHAPES[i][1] and p.grad.shape == SHAPES[i][0], (flat, i)
                np.testing.assert_allclose(p.grad, e, rtol=1e-6, atol=1e-6, err_msg=f"flat={flat} #{i}")
    params = [Tensor(np.full(shape, r + 1.0, dtype), requires_grad=True) for shape, dtype in SHAPES]
    dist.broadcast_parameters(params)
    assert all((p.data == 1.0).all() for p in params)
    assert dist.any_rank(r == 1, False) == (True, False)
    assert len({dist.rank_seed(0)} | {dist.rank_seed(0, 5)}) == (1 if r == 0 else 2)
    state = {"rank": r, "big": 2 ** 127 + r, "text": "汉" * (r + 1)}  # ragged sizes, a 128-bit int
    gathered = dist.gather_json(state)
    assert gathered == ([{"rank": j, "big": 2 ** 127 + j, "text": "汉" * (j + 1)} for j in range(k)]
                        if r == 0 else None), gathered
    path = os.path.join(sys.argv[2], "shared.bin") if r == 0 else "/nonexistent/elsewhere"
    if r == 0:
        Path(path).write_bytes(b"rank 0's bytes")
    with dist.shared_file(path) as local:
        assert Path(local).read_bytes() == b"rank 0's bytes"
    with dist.shared_file("/nonexistent/file") as local:
        assert local is None
    dist.barrier()
    if r == 0:  # every rank got here: a failed check aborts the job
        print(f"collectives ok on {k} ranks", flush=True)


def train(argv, fault=None, at_step=0):
    """The CLI's train command on this rank; rank 1 fails or hangs at `at_step` if asked."""
    from transformer import __main__ as cli
    from transformer.train import Trainer
    dist.init()
    out = argv[argv.index("--out") + 1]
    os.makedirs(out, exist_ok=True)
    Path(out, f"rank{dist.rank()}.pid").write_text(str(os.getpid()))
    if fault and dist.rank() == 1:
        build_step = Trainer.build_step

        def faulty_build_step(self):
            step = build_step(self)

            def faulty_step(batch):
                if self.step + 1 == at_step:
                    if fault == "fail-at":
                        raise RuntimeError(f"injected failure at step {at_step}")
                    time.sleep(3600)
                return step(batch)
            return faulty_step
        Trainer.build_step = faulty_build_step
    return cli.main(["train", *argv])


def main():
    mode = sys.argv[1]
    try:
        if mode == "collectives":
            return check_collectives()
        if mode == "train":
            return train(sys.argv[2:])
        return train(sys.argv[3:], fault=mode, at_step=int(sys.argv[2]))
    except BaseException:
        import traceback
        traceback.print_exc()
        dist.abort(1, "the worker failed")
        raise


if __name__ == "__main__":
    sys.exit(main())
