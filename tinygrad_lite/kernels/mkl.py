"""a @ b on Intel's oneMKL, the BLAS PyTorch's CPU build multiplies with, where the `mkl` wheel is installed
(`pip install "tinygrad-lite[mkl]"`): a Linear's three products 9-11% faster than NumPy's OpenBLAS at the SMALL,
BASE-short and GPT steps' shapes on an AVX-512 Xeon, the same at TINY's (bench/README.md, "Products on oneMKL").
The twin of a Linear's product (kernels.panels.linear_product_numba) calls it behind the trick mkl_products
where `serves(a, b)`: on an Intel CPU (where it was measured), on one thread (MKL runs its sequential layer, no
thread pool of its own beside Numba's and OpenBLAS's), float32 or float64, each operand C-ordered or the
transpose of a C-ordered array (a Linear's wᵀ and gᵀ are), every dimension at least 1. Elsewhere NumPy's `a @ b`
runs.

MKL is told two things before its first product, as it requires: the sequential threading layer, and conditional
numerical reproducibility (MKL_CBWR_AUTO | MKL_CBWR_STRICT: the same bits for the same operands on this CPU
wherever the arrays lie in memory, so that a resumed run stays bit-exact), at no cost measured. If another
library of the process loaded MKL first and fixed another layer, MKL is not used.
"""
from __future__ import annotations

import ctypes
import functools
import importlib.metadata
import platform
import sys
from types import SimpleNamespace

import numpy as np

from ..threads import get_num_threads
from . import cblas
from .backend import lazy_kernels
from .cblas import NO_TRANS, TRANS

THREADING_SEQUENTIAL = 1
INTERFACE_LP64 = 0
FLOATS = (np.dtype(np.float32), np.dtype(np.float64))
CBWR_AUTO_STRICT, CBWR_SUCCESS = 2 | 0x10000, 0
LIBRARY_NAMES = ("libmkl_rt.so.3", "libmkl_rt.so.2", "libmkl_rt.so", "mkl_rt.3.dll", "mkl_rt.2.dll")
_INT_MAX = 2**31 - 1


def library_path() -> str | None:
    """Where the `mkl` distribution put its single dynamic library (libmkl_rt), or None."""
    try:
        distribution = importlib.metadata.distribution("mkl")
    except importlib.metadata.PackageNotFoundError:
        return None
    found = {f.name: f for f in distribution.files or () if f.name in LIBRARY_NAMES}
    for name in LIBRARY_NAMES:
        if name in found:
            return str(distribution.locate_file(found[name]))
    return None


@functools.lru_cache(maxsize=1)
def gemm_addresses() -> dict | None:
    """{dtype: address of cblas_?gemm} in the loaded libmkl_rt, set sequential, LP64 and reproducible;
    None if there is no `mkl` wheel, it does not load, or another library of the process fixed other settings."""
    path = library_path()
    if path is None or sys.platform == "darwin":
        return None
    try:
        lib = ctypes.CDLL(path)
    except OSError:
        return None
    if lib.MKL_Set_Threading_Layer(THREADING_SEQUENTIAL) != THREADING_SEQUENTIAL:
        return None
    if lib.MKL_Set_Interface_Layer(INTERFACE_LP64) != INTERFACE_LP64:
        return None
    if lib.MKL_CBWR_Set(CBWR_AUTO_STRICT) != CBWR_SUCCESS:
        return None
    return {np.dtype(dtype): ctypes.cast(getattr(lib, name), ctypes.c_void_p).value
            for dtype, name in ((np.float32, "cblas_sgemm"), (np.float64, "cblas_dgemm"))}


def available() -> bool:
    """Whether oneMKL's products can run in this process."""
    return gemm_addresses() is not None


def serves(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether product(a, b) can compute a @ b here (see the module docstring). Without the wheel, one cached call."""
    if not available() or get_num_threads() != 1 or not intel_cpu():
        return False
    if a.ndim != 2 or b.ndim != 2 or a.dtype != b.dtype or a.dtype not in FLOATS:
        return False
    if min(a.shape) < 1 or b.shape[1] < 1 or max(a.size, b.size, a.shape[0] * b.shape[1]) > _INT_MAX:
        return False
    if not (a.flags.c_contiguous or a.flags.f_contiguous) or not (b.flags.c_contiguous or b.flags.f_contiguous):
        return False
    return True


@functools.lru_cache(maxsize=1)
def intel_cpu(cpuinfo: str = "/proc/cpuinfo") -> bool:
    """Whether this CPU is Intel's, where oneMKL's products were measured faster than OpenBLAS (bench/README.md).
    On AMD's Zen 4 they were slower (a step's products 0.96-1.26x OpenBLAS's time): OpenBLAS, or kernels.panels
    where it pays, stays."""
    try:
        with open(cpuinfo, encoding="utf-8", errors="replace") as lines:
            for line in lines:
                if line.startswith("vendor_id"):
                    return "GenuineIntel" in line
    except OSError:
        pass
    return "GenuineIntel" in platform.processor()  # Windows: "Intel64 Family 6 Model ..., GenuineIntel"


def product(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a (m, k) @ b (k, n) into a new C-ordered (m, n) array by ?gemm; the caller checked serves(a, b)."""
    out = np.empty((a.shape[0], b.shape[1]), a.dtype)
    _numba_kernels().product(gemm_addresses()[a.dtype], a, b, out)
    return out


def reference_product(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """product's NumPy twin: a @ b on NumPy's BLAS."""
    return a @ b


# ---------------------------------------------------------------------------------------------
# The Numba kernel: ?gemm called through its address (kernels.cblas), LP64.
# ---------------------------------------------------------------------------------------------

@lazy_kernels
def _numba_kernels(numba):
    cblas.register(numba)
    njit = functools.partial(numba.njit, cache=True)

    @njit
    def product(address, a, b, out):
        m, k = a.shape
        n = b.shape[1]
        trans_a, lda = (NO_TRANS, k) if a.flags.c_contiguous else (TRANS, m)
        trans_b, ldb = (NO_TRANS, n) if b.flags.c_contiguous else (TRANS, k)
        cblas.gemm(address, False, trans_a, trans_b, m, n, k, lda, ldb, a, b, out)

    return SimpleNamespace(product=product)
