"""Keep freed memory in the process, so that the next training step reuses it instead of faulting it in.

A training step allocates and frees tens to hundreds of MB of activations and gradients. glibc's
malloc, by default, serves large blocks with fresh mmaps and gives the free top of its heap back to
the OS once more than M_TRIM_THRESHOLD of it is free (both thresholds adapt, 128 KiB at the start),
so each step takes that memory back as page faults, zero-filled by the kernel page by page. A SMALL
step of `bench/train_throughput.py` run alone took ~2,000 faults and 5-6 ms of system time, and
ran 124-135 ms against 111-119 ms with the thresholds below (bench/README.md, "Fifth pass").

Like the thread count (tinygrad_lite.threads) this is set where work starts, never on import: the
Trainer and the `python -m transformer` commands call keep_freed_memory(). It changes the whole
process's malloc, and memory freed stays with the process, up to its peak use (as PyTorch's caching
allocators keep theirs). TINYGRAD_LITE_KEEP_FREED_MEMORY=0 leaves malloc alone. Elsewhere than Linux
with glibc it does nothing.
"""
from __future__ import annotations

import ctypes
import functools
import platform
import sys

from .checks import switched_off

ENV_VAR = "TINYGRAD_LITE_KEEP_FREED_MEMORY"
M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3   # glibc's <malloc.h>
MMAP_THRESHOLD = 32 << 20                     # larger blocks still get their own mmap (glibc's own ceiling)
TRIM_THRESHOLD = 1 << 30                      # free heap kept before any goes back to the OS

_done = False


@functools.lru_cache(maxsize=1)
def has_glibc() -> bool:
    """True on Linux with glibc, whose malloc these thresholds belong to (asked once: platform.libc_ver
    reads the Python executable)."""
    return sys.platform.startswith("linux") and platform.libc_ver()[0] == "glibc"


def keep_freed_memory() -> bool:
    """Fix glibc's malloc thresholds (MMAP_THRESHOLD, TRIM_THRESHOLD) for this process. Returns
    True if they are set (now or by an earlier call), False where there is no glibc or the
    environment variable opts out."""
    global _done
    if _done:
        return True
    if switched_off(ENV_VAR):
        return False
    if not has_glibc():
        return False
    mallopt = ctypes.CDLL(None).mallopt
    mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
    _done = mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD) == 1 and mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD) == 1
    return _done
