"""y = x · Wᵀ + b with W packed once into panels of 32 columns of Wᵀ: a product for weights used many times.

    pack_panels(weight) -> panels                  weight (n, K) as a Linear holds it; panels (P, K, 32)
    panel_product(x, panels, bias, out)            out (R, n) = x (R, K) · weightᵀ + bias, inside a Numba kernel
                                                   (transformer's decoder kernel)
    panel_linear_numba(x, panels, bias) -> y       the same from Python; panel_linear_numpy, its NumPy twin
    panel_matmul_numba(a, b) -> a · b              b packed on the way: for a Linear's training products
    linear_product_numba(a, b) -> a · b            the twin of nn.functional's op linear_product: the panels
                                                   where beats_blas(a, b) says so (trick panel_products), else
                                                   oneMKL where installed (trick mkl_products), else BLAS

Panel p holds columns 32p .. 32p + 31 of Wᵀ, row after row (zeros past column n): the 32 weights a
step of the product needs lie side by side, in the order the product reads them. OpenBLAS packs
its operands into such panels on every call; when the same weights multiply a few rows at a time,
as in every step of decoding, that copy costs a quarter of the product (bench/README.md, "Twelfth
pass"). Packed once, the weights stream straight from memory into the micro-kernel:

    for each panel p, for each block of 8 rows of x:          (16 accumulators of 16 floats)
        acc (8, 32) = Σ_t x[rows, t] ⊗ panels[p, t, :]         one broadcast, two FMAs a row and t
        y[rows, 32p : 32p + 32] = acc + bias[32p : 32p + 32]

The Numba kernel uses 16-float vectors (kernels.simd's wide intrinsics): one AVX-512 register
each, and 16 of them as accumulators; `wide_vectors()` says whether this CPU has them (on AVX2
the kernel is still correct, but its accumulators spill and BLAS is faster). float32 only. The
NumPy twin is the definition and the test oracle; kernels take trusted arrays.
"""
import functools
import os

import numpy as np

from ..fast import TRICKS
from ..threads import ensure_num_threads, get_num_threads
from . import mkl, simd
from .backend import lazy_kernels, load_numba, use_numba

PANEL = 32   # columns of Wᵀ in a panel: two 16-float vectors
ROWS = 8     # rows of x in a block: 8 × 2 accumulators


def panel_count(n: int) -> int:
    return -(-n // PANEL)


def pack_columns(b: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """b (K, n) → panels (P, K, 32): panels[p, t, c] = b[t, 32p + c], 0 past column n."""
    K, n = b.shape
    P = panel_count(n)
    panels = np.empty((P, K, PANEL), b.dtype) if out is None else out
    full = n // PANEL
    panels[:full] = b[:, :full * PANEL].reshape(K, full, PANEL).transpose(1, 0, 2)
    if full < P:
        panels[full] = 0
        panels[full, :, :n - full * PANEL] = b[:, full * PANEL:]
    return panels


def pack_panels(weight: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """weight (n, K) → panels (P, K, 32) of weightᵀ: panels[p, t, c] = weight[32p + c, t], 0 past row n."""
    return pack_columns(weight.T, out)


def panel_linear_numpy(x, panels, bias):
    """x · Wᵀ + bias, Wᵀ read back from its panels (NumPy twin)."""
    P, K, _ = panels.shape
    w_t = panels.transpose(1, 0, 2).reshape(K, P * PANEL)[:, :bias.shape[0]]
    return x @ w_t + bias


def panel_product(x, panels, bias, out):
    """out (R, n) = x (R, K) · Wᵀ + bias on the wide micro-kernel (Numba only; register_jitable)."""
    R, K = x.shape
    n = out.shape[1]
    flat_x, flat_w, flat_out = x.reshape(R * K), panels.reshape(panels.size), out.reshape(R * n)
    for p in range(panels.shape[0]):
        w0, c0 = p * K * PANEL, p * PANEL
        for r0 in range(0, R, ROWS):
            rows = min(ROWS, R - r0)
            # rows past R repeat the last one and are not stored, so the loop has no branch
            x0, x1 = r0 * K, (r0 + min(1, rows - 1)) * K
            x2, x3 = (r0 + min(2, rows - 1)) * K, (r0 + min(3, rows - 1)) * K
            x4, x5 = (r0 + min(4, rows - 1)) * K, (r0 + min(5, rows - 1)) * K
            x6, x7 = (r0 + min(6, rows - 1)) * K, (r0 + min(7, rows - 1)) * K
            acc = simd.wide_lanes()
            for a in range(0, simd.WIDE_SCRATCH, simd.WIDE):
                simd.w_zero(acc, a)
            for t in range(K):
                w = w0 + t * PANEL
                simd.w_fma2(acc, 0, flat_x, x0 + t, flat_w, w)
                simd.w_fma2(acc, 32, flat_x, x1 + t, flat_w, w)
                simd.w_fma2(acc, 64, flat_x, x2 + t, flat_w, w)
                simd.w_fma2(acc, 96, flat_x, x3 + t, flat_w, w)
                simd.w_fma2(acc, 128, flat_x, x4 + t, flat_w, w)
                simd.w_fma2(acc, 160, flat_x, x5 + t, flat_w, w)
                simd.w_fma2(acc, 192, flat_x, x6 + t, flat_w, w)
                simd.w_fma2(acc, 224, flat_x, x7 + t, flat_w, w)
            if c0 + PANEL <= n:
                for a in range(rows):
                    o = (r0 + a) * n + c0
                    simd.w_add(flat_out, o, acc, a * PANEL, bias, c0)
                    simd.w_add(flat_out, o + simd.WIDE, acc, a * PANEL + simd.WIDE, bias, c0 + simd.WIDE)
            else:
                for a in range(rows):
                    for c in range(n - c0):
                        flat_out[(r0 + a) * n + c0 + c] = acc[a * PANEL + c] + bias[c0 + c]


@lazy_kernels
def _numba_kernels(numba):
    """Compile-on-first-use: panel_product made jitable (for other kernels, e.g. the decoder's)
    and a kernel that calls it."""
    from numba.extending import register_jitable
    simd.register(numba)
    register_jitable(panel_product)

    @numba.njit(cache=True)
    def linear(x, panels, bias, out):
        panel_product(x, panels, bias, out)

    return linear


def register_numba() -> None:
    """Compile this module's kernels on first use, registering panel_product as Numba functions that
    kernels elsewhere inline (transformer/fast/decoder_kernel.py)."""
    _numba_kernels()


def panel_linear_numba(x, panels, bias):
    """x · Wᵀ + bias on the wide micro-kernel (Numba kernel)."""
    assert x.dtype == panels.dtype == bias.dtype == np.float32, (x.dtype, panels.dtype, bias.dtype)
    assert x.ndim == 2 and panels.ndim == 3 and x.shape[1] == panels.shape[1], (x.shape, panels.shape)
    assert panel_count(bias.shape[0]) == panels.shape[0] and panels.shape[2] == PANEL, (bias.shape, panels.shape)
    out = np.empty((x.shape[0], bias.shape[0]), np.float32)
    if out.size:
        _numba_kernels()(np.ascontiguousarray(x), np.ascontiguousarray(panels), np.ascontiguousarray(bias), out)
    return out


def panel_matmul_numpy(a, b):
    """a · b (NumPy twin: BLAS)."""
    return a @ b


def panel_matmul_numba(a, b):
    """a (M, K) · b (K, n) on the wide micro-kernel, b packed into panels on the way (float32): for
    products whose operands change at every call, as a training step's (packing costs 3-10% of them)."""
    return panel_linear_numba(a, pack_columns(b), _zeros(b.shape[1]))


def linear_product_numba(a, b):
    """a @ b, a Linear's product (the twin of nn.functional's linear_product), on product_engine(a, b)."""
    engine = product_engine(a, b)
    if engine == "panels":
        return panel_matmul_numba(a, b)
    if engine == "mkl":
        return mkl.product(a, b)
    return a @ b


def product_engine(a, b) -> str:
    """What linear_product_numba multiplies a @ b on: "panels", the panel micro-kernel, where beats_blas(a, b)
    says it is faster and the trick panel_products is on; else "mkl", oneMKL, where it is installed and serves
    these operands (trick mkl_products, kernels.mkl); else "blas", NumPy's BLAS. (kernels.linear_layer asks it
    of a Linear's three products.)"""
    ensure_num_threads()  # before beats_blas and mkl.serves read the count (tinygrad_lite.threads)
    if TRICKS.panel_products and beats_blas(a, b):
        return "panels"
    if TRICKS.mkl_products and mkl.serves(a, b):
        return "mkl"
    return "blas"


@functools.lru_cache(maxsize=8)
def _zeros(n: int) -> np.ndarray:
    zeros = np.zeros(n, np.float32)
    zeros.flags.writeable = False
    return zeros


NARROW_OPENBLAS = ("haswell", "zen", "sandybridge")   # OpenBLAS kernels of 8-float vectors or fewer


def beats_blas(a, b) -> bool:
    """Whether panel_matmul_numba(a, b) should replace BLAS's a @ b: float32 products of 32+ rows and
    columns, on one thread, with Numba on an AVX-512 CPU whose OpenBLAS runs 8-float kernels. There
    the panel kernel multiplies ~2x faster (230 against 110 GFLOP/s at a SMALL step's shapes on
    AMD Zen 5 with OPENBLAS_CORETYPE=Haswell; a SMALL step 1.35x faster; bench/README.md, "Thirteenth
    pass"). OpenBLAS's own AVX-512 kernels are as fast as the panels and need no packing (the same step
    0.89x with panels), and at 2 threads BLAS uses both cores: BLAS stays there."""
    if a.dtype != np.float32 or a.shape[0] < ROWS * 4 or b.shape[1] < PANEL:
        return False
    return use_numba() and get_num_threads() == 1 and wide_vectors() and narrow_blas()


@functools.lru_cache(maxsize=1)
def narrow_blas() -> bool:
    """True if NumPy's BLAS is OpenBLAS running kernels of 8-float vectors or fewer (AVX2 and older):
    its choice on a CPU it does not know, or one forced by OPENBLAS_CORETYPE."""
    from threadpoolctl import threadpool_info
    numpy_dir = os.path.dirname(np.__file__)
    for lib in threadpool_info():
        if lib.get("internal_api") == "openblas" and lib.get("filepath", "").startswith(numpy_dir):
            return str(lib.get("architecture", "")).lower() in NARROW_OPENBLAS
    return False


@functools.lru_cache(maxsize=1)
def wide_vectors() -> bool:
    """True if the CPU that Numba compiles for has AVX-512 (16-float registers, 32 of them)."""
    numba = load_numba()
    if numba is None:
        return False
    features = numba.config.CPU_FEATURES
    if not features:
        import llvmlite.binding
        features = llvmlite.binding.get_host_cpu_features().flatten()
    return "+avx512f" in features.split(",")
