"""GELU, forward and backward: a Numba kernel of each formula. The formulas are the op's own, in
tinygrad_lite/ops/unary.py (gelu_forward, gelu_and_slope); kernels.TWINS registers these kernels
against them and the numba backend runs them (tinygrad_lite.dispatch).

GELU(x) = x·Φ(x), Φ the standard normal CDF (Hendrycks & Gimpel 2016, "Gaussian Error Linear Units");
GPT-2 uses its tanh approximation:

    exact:  x·Φ(x) = ½·x·(1 + erf(x/√2)),        d/dx = Φ(x) + x·φ(x),  φ(x) = exp(−x²/2)/√(2π)
    tanh:   ½·x·(1 + tanh(u)),  u = √(2/π)·(x + 0.044715·x³),
            d/dx = ½·(1 + tanh u) + ½·x·(1 − tanh² u)·u′,  u′ = √(2/π)·(1 + 3·0.044715·x²)

The tanh kernel writes ½·(1 + tanh u) as the logistic σ(2u) = 1/(1 + exp(−2u)), so one exp that LLVM
vectorises (softmax.simd_exp) does the work: x·σ(2u), and d/dx = σ·(1 + 2·x·(1 − σ)·u′). The exact
kernel's erf is, in float32, the rational approximation of Eigen and XLA (vectorised too; erf is ±1 in
float32 beyond |x| = 4) and, in float64, libm's (one element at a time). The kernels agree with the
formulas to float rounding (tests/test_gelu_kernel.py); a NaN stays NaN.

    gelu_forward_numba(x, approximate="none") -> y             approximate "none" (exact) or "tanh"
    gelu_and_slope_numba(x, approximate="none") -> (y, dy/dx)  for training: the backward is g·slope

Computing the slope with the value shares the exp (or erf) between them, and the backward becomes one
multiply (as PyTorch's tanh GELU would keep tanh u for its backward).

Arrays of any shape; the kernels take float32 and float64 (other dtypes go to the formula). Tensor.gelu
checks `approximate`.
"""
import functools
import math
from types import SimpleNamespace

import numpy as np

from .. import dispatch
from ..ops.unary import CUBIC, SQRT_2_OVER_PI
from . import softmax
from .backend import FASTMATH, lazy_kernels, threads_for

# ---------------------------------------------------------------------------------------------
# Numba kernels (flat loops; compiled on first use). Constants come in the array's dtype, so
# float32 stays float32.
# ---------------------------------------------------------------------------------------------

# erf(x) ≈ x·P(x²)/Q(x²) on [-4, 4] in float32 (Eigen's generic_fast_erf_float, also XLA's): P's
# coefficients of x⁰, x², .., x¹², then Q's of x⁰, .., x⁸
_ERF_P_F32 = tuple(np.float32(c) for c in (-1.60960333262415e-02, -2.95459980854025e-03, -7.34990630326855e-04,
                                           -5.69250639462346e-05, -2.10102402082508e-06, 2.77068142495902e-08,
                                           -2.72614225801306e-10))
_ERF_Q_F32 = tuple(np.float32(c) for c in (-1.42647390514189e-02, -7.37332916720468e-03, -1.68282697438203e-03,
                                           -2.13374055278905e-04, -1.45660718464996e-05))


def simd_erf(x):
    """erf, vectorisable in float32 (a stub: Numba compiles the overload registered below)."""
    return math.erf(x)


@lazy_kernels
def _numba_kernels(numba):
    """Compile-on-first-use kernels, in a namespace."""
    softmax._numba_kernels()  # registers simd_exp
    _register_erf(numba)
    njit = functools.partial(numba.njit, cache=True, parallel=True, fastmath=FASTMATH, error_model="numpy")
    prange = numba.prange

    @njit
    def tanh_forward(x, minus_2c, cubic, one, out):
        for i in prange(x.size):
            v = x[i]
            out[i] = v / (one + softmax.simd_exp(minus_2c * (v + cubic * v * v * v)))

    @njit
    def tanh_and_slope(x, minus_2c, cubic, two_c, three_cubic, one, out, slope):
        for i in prange(x.size):
            v = x[i]
            s = one / (one + softmax.simd_exp(minus_2c * (v + cubic * v * v * v)))
            out[i] = v * s
            slope[i] = s * (one + two_c * v * (one - s) * (one + three_cubic * v * v))

    @njit
    def exact_forward(x, inv_sqrt2, half, out):
        for i in prange(x.size):
            v = x[i]
            out[i] = v * (half + half * simd_erf(v * inv_sqrt2))

    @njit
    def exact_and_slope(x, inv_sqrt2, half, inv_sqrt_2pi, out, slope):
        for i in prange(x.size):
            v = x[i]
            cdf = half + half * simd_erf(v * inv_sqrt2)
            out[i] = v * cdf
            slope[i] = cdf + v * (softmax.simd_exp(-half * v * v) * inv_sqrt_2pi)

    return SimpleNamespace(tanh_forward=tanh_forward, tanh_and_slope=tanh_and_slope,
                           exact_forward=exact_forward, exact_and_slope=exact_and_slope)


def _register_erf(numba):
    from numba.core import types
    from numba.extending import overload

    @numba.njit(cache=True, fastmath={"contract"}, error_model="numpy")
    def erf_f32(x):
        x = min(max(x, np.float32(-4.0)), np.float32(4.0))  # max/min keep a NaN x: it comes first
        x2 = x * x
        p0, p1, p2, p3, p4, p5, p6 = _ERF_P_F32
        q0, q1, q2, q3, q4 = _ERF_Q_F32
        num = (((((p6 * x2 + p5) * x2 + p4) * x2 + p3) * x2 + p2) * x2 + p1) * x2 + p0
        den = (((q4 * x2 + q3) * x2 + q2) * x2 + q1) * x2 + q0
        return x * num / den

    @overload(simd_erf, jit_options={"fastmath": {"contract"}})
    def _simd_erf_typed(x):
        if x == types.float32:
            return lambda x: erf_f32(x)
        if x == types.float64:
            return lambda x: math.erf(x)
        return None


def _contiguous(a):
    """a itself if C-contiguous, else a C-contiguous copy (np.ascontiguousarray makes a 0-d array 1-d)."""
    return a if a.flags.c_contiguous else np.array(a, order="C")


def gelu_forward_numba(x, approximate="none"):
    """GELU(x) in one pass (Numba kernel); dtypes other than float32 and float64 go to the formula."""
    if x.dtype not in (np.float32, np.float64):
        return dispatch.formula("gelu_forward")(x, approximate)
    t = x.dtype.type
    x = _contiguous(x)
    out = np.empty_like(x)
    flat, flat_out = x.reshape(-1), out.reshape(-1)
    kernels = _numba_kernels()
    with threads_for(x.size):
        if approximate == "tanh":
            kernels.tanh_forward(flat, t(-2 * SQRT_2_OVER_PI), t(CUBIC), t(1), flat_out)
        else:
            kernels.exact_forward(flat, t(1 / math.sqrt(2)), t(0.5), flat_out)
    return out


def gelu_and_slope_numba(x, approximate="none"):
    """(GELU(x), GELU′(x)) in one pass (Numba kernel); dtypes other than float32 and float64 go to the formula."""
    if x.dtype not in (np.float32, np.float64):
        return dispatch.formula("gelu_and_slope")(x, approximate)
    t = x.dtype.type
    x = _contiguous(x)
    out, slope = np.empty_like(x), np.empty_like(x)
    flat, flat_out, flat_slope = x.reshape(-1), out.reshape(-1), slope.reshape(-1)
    kernels = _numba_kernels()
    with threads_for(x.size):
        if approximate == "tanh":
            kernels.tanh_and_slope(flat, t(-2 * SQRT_2_OVER_PI), t(CUBIC), t(2 * SQRT_2_OVER_PI), t(3 * CUBIC), t(1),
                                   flat_out, flat_slope)
        else:
            kernels.exact_and_slope(flat, t(1 / math.sqrt(2)), t(0.5), t(1 / math.sqrt(2 * math.pi)), flat_out,
                                    flat_slope)
    return out, slope
