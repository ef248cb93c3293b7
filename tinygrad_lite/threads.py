"""How many threads the engine's heavy lifting may use: NumPy's BLAS and Numba's pool.

On a small shared machine a 2-thread pool collapses whenever another process holds a core,
and the shapes of a small Transformer gain little from threads anyway, so the CLIs default
to 1. `set_num_threads(n)` (or TINYGRAD_LITE_NUM_THREADS=n, read by the CLIs) sets both.
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
    threadpool_limits(limits=n)
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
