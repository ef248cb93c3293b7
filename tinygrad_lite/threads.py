"""How many threads the engine's heavy lifting may use: NumPy's BLAS and Numba's pool.

One, unless you say otherwise. The count is set where work starts, never on import (importing
changes no thread setting and compiles nothing): the CLIs set `--threads N` or 1, and a Trainer
built from Python calls use_num_threads: its `threads` argument (TrainConfig.threads), else a
count this process already chose with set_num_threads, else TINYGRAD_LITE_NUM_THREADS, else 1.

Why 1, measured (bench/threads.py; bench/README.md, "Threads"): the libraries default to one
thread per core, and their idle workers spin (OpenBLAS for up to 2^28 cycles, libgomp for
GOMP_SPINCOUNT), so on a shared 2-core machine a 2-thread Trainer beside one CPU-bound process
ran at 0.18x of 1 thread. Non-spinning waits (OMP_WAIT_POLICY=passive, OPENBLAS_THREAD_TIMEOUT=4,
Numba's workqueue layer) help but stay below 1 thread (0.24-0.58x): a step split in two still
waits for the half whose core is taken. They also must be set before NumPy and Numba load, too
early for a library to choose them. The 1-thread default beside a busy process: 0.92x of an
explicit 1 thread (noise; the same code). On an idle machine 2 threads train 1.2x (SMALL) to 1.5x
(BASE) faster: opt in with TINYGRAD_LITE_NUM_THREADS=2 when the cores are yours.

Numba sizes its pool when it is first imported: a process that started at 1 thread keeps Numba
at 1 (BLAS still follows later counts).
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
    """The count set by set_num_threads, or None if the libraries' defaults apply."""
    return _requested


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
