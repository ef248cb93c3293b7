"""NumPy's own float32 GEMM, callable from Numba kernels.

Numba's np.dot calls SciPy's OpenBLAS; NumPy's wheels bundle their own, newer one (0.3.31 vs
SciPy's 0.3.30 here), whose sgemm is faster on a decode's shapes: 1.4-2.1x at 2-32 rows, 1.2x at
64. `bind()` finds its cblas sgemm (ctypes), names it to LLVM as SGEMM_SYMBOL, and returns the
Numba function that calls it; decoder_kernel's `_linear` calls that with the ROW_MAJOR, NO_TRANS
and TRANS flags of the cblas interface.
"""
from __future__ import annotations

import ctypes
from pathlib import Path

import numpy as np

SGEMM_SYMBOL = "tinygrad_lite_numpy_sgemm"  # bound by bind() to NumPy's cblas sgemm (ILP64)
ROW_MAJOR, NO_TRANS, TRANS = 101, 111, 112


def numpy_sgemm_address() -> int:
    """The address of cblas sgemm in the OpenBLAS NumPy's wheels bundle (numpy.libs), or 0."""
    for path in sorted((Path(np.__file__).parent.parent / "numpy.libs").glob("libscipy_openblas64_*.so")):
        try:
            return ctypes.cast(ctypes.CDLL(str(path)).scipy_cblas_sgemm64_, ctypes.c_void_p).value or 0
        except (OSError, AttributeError):
            continue
    return 0


def _no_numpy_sgemm(*args):
    raise RuntimeError("decoder_kernel: NumPy's sgemm was called but this NumPy build has none")


# what SGEMM_SYMBOL names without NumPy's sgemm: a C function pointer on every platform (kept alive here)
_SGEMM_STAND_IN = ctypes.CFUNCTYPE(None, ctypes.c_int32, ctypes.c_int32, ctypes.c_int32, ctypes.c_int64,
                                   ctypes.c_int64, ctypes.c_int64, ctypes.c_float, ctypes.c_void_p, ctypes.c_int64,
                                   ctypes.c_void_p, ctypes.c_int64, ctypes.c_float, ctypes.c_void_p,
                                   ctypes.c_int64)(_no_numpy_sgemm)


def bind():
    """(sgemm, found): the numba ExternalFunction of SGEMM_SYMBOL, and whether NumPy's sgemm was found.
    The symbol is always bound, so cached kernels link; without NumPy's sgemm, to a stand-in that
    the kernels never call (a stack's numpy_sgemm is False then)."""
    import llvmlite.binding
    from numba import types
    address = numpy_sgemm_address()
    llvmlite.binding.add_symbol(SGEMM_SYMBOL, address or ctypes.cast(_SGEMM_STAND_IN, ctypes.c_void_p).value)
    int32, int64 = types.int32, types.int64
    sgemm = types.ExternalFunction(SGEMM_SYMBOL, types.void(
        int32, int32, int32, int64, int64, int64, types.float32, types.intp, int64, types.intp, int64,
        types.float32, types.intp, int64))
    return sgemm, address != 0
