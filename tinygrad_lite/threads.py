"""How many threads the engine's heavy lifting may use: NumPy's BLAS and Numba's pool.

One, unless you say otherwise, wherever the engine is used: Tensor ops, nn, a notebook, a Trainer or
the CLIs. The count is chosen lazily, where heavy work first starts (ensure_num_threads: the first
product, nn.functional._product or Tensor.matmul, or the first Numba kernel, where kernels.backend
loads Numba), never on import: importing changes no thread setting and compiles nothing. The count:
the one this process chose with set_num_threads (the CLIs' --threads, TrainConfig.threads), else
TINYGRAD_LITE_NUM_THREADS, else 1. The libraries' own variables (OMP_NUM_THREADS,
OPENBLAS_NUM_THREADS, NUMBA_NUM_THREADS) do not choose it: set_num_threads overrides them, as the
Trainer always did.

Why 1, measured (bench/threads.py; bench/README.md, "Threads"): the libraries default to one thread
per core, and their idle workers spin (OpenBLAS for up to 2^28 cycles, libgomp for GOMP_SPINCOUNT),
so on a shared 2-core machine a SMALL step written by hand (no Trainer) ran at 0.09-0.21x of 1
thread beside one CPU-bound process; chosen here, the default runs as 1 thread (0.96x beside it,
1.05x without: noise). Non-spinning waits (OMP_WAIT_POLICY=passive, OPENBLAS_THREAD_TIMEOUT=4,
Numba's workqueue layer) help but do not beat 1 thread (0.31-1.03x beside it, 0.10-0.15x with other
jobs about): a step split in two still waits for the half whose core is taken; and they must be set
before NumPy and Numba load, too early for a library to choose them. Small kernels already stay on
one thread (kernels.backend.threads_for). With idle cores of your own, opt in:
TINYGRAD_LITE_NUM_THREADS=N or set_num_threads(N) before the first op.

Numba sizes its pool when it is first imported: a process whose count was 1 when Numba loaded keeps
Numba at 1 (BLAS still follows later counts), so choose before the first op.
"""
from __future__ import annotations

import os
import sys

from .checks import positive_int

ENV_VAR = "TINYGRAD_LITE_NUM_THREADS"
_requested: int | None = None


def set_num_threads(n: int) -> None:
    """Limit BLAS (via threadpoolctl) and Numba to `n` threads for the rest of the process."""
    global _requested
    _requested = n = positive_int("set_num_threads", "n", n)
    from threadpoolctl import threadpool_limits
    threadpool_limits(limits=n)  # the BLAS libraries loaded so far; those loaded later read these:
    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):  # e.g. SciPy's OpenBLAS,
        os.environ[var] = str(n)  # loaded when a Numba kernel first calls np.dot (transformer.fast.decoder_kernel)
    numba = sys.modules.get("numba")
    if numba is not None:
        numba.set_num_threads(min(n, numba.config.NUMBA_NUM_THREADS))
    else:
        os.environ["NUMBA_NUM_THREADS"] = str(n)  # read when numba is first imported


def get_num_threads() -> int | None:
    """The count in force: set by set_num_threads or, once work started, by ensure_num_threads;
    None before either (the libraries' defaults)."""
    return _requested


def ensure_num_threads() -> None:
    """Where heavy work starts (the first product, the first Numba kernel): set the default count
    unless this process chose one. One global read after the first call."""
    if _requested is None:
        set_num_threads(default_num_threads())


def default_num_threads(fallback: int = 1) -> int:
    """TINYGRAD_LITE_NUM_THREADS if set, else `fallback` (what the CLIs and the Trainer use)."""
    text = os.environ.get(ENV_VAR, "").strip()
    if not text:
        return fallback
    try:
        n = int(text)
    except ValueError:
        n = text  # not a whole number: positive_int says so
    return positive_int("environment", ENV_VAR, n)


def use_num_threads(threads: int | None = None, op: str = "train") -> int:
    """Where training or decoding starts (the Trainer's constructor), not at import: `threads` if
    given; else the count this process already chose with set_num_threads (the CLIs' --threads);
    else default_num_threads(), i.e. TINYGRAD_LITE_NUM_THREADS or 1. Sets it and returns it."""
    if threads is not None:
        n = positive_int(op, "threads", threads)
    elif _requested is not None:
        return _requested
    else:
        n = default_num_threads()
    set_num_threads(n)
    return n
