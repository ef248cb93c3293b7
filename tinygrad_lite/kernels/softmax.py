"""Softmax and log-softmax over the last axis, forward and backward.

    softmax(x)_j = exp(x_j) / sum_k exp(x_k)        log_softmax(x)_j = x_j - log(sum_k exp(x_k))

Softmax turns the attention scores QK^T / sqrt(d_k) into weights that sum to 1 (the paper's
Eq. 1, "Scaled Dot-Product Attention"); log-softmax feeds the cross-entropy loss. The formulas
are the ops' own, in tinygrad_lite/ops/nn.py (softmax_forward, softmax_backward,
log_softmax_forward, log_softmax_backward); this file holds their Numba twins (``*_numba``, the
same signatures), which kernels.TWINS registers and the numba backend runs (tinygrad_lite.dispatch).

Conventions shared by the formulas and the kernels:

* Stability: each row is shifted by its maximum before ``exp``, so logits of +-1e4 are fine.
* ``mask`` (softmax only) broadcasts against ``x`` and is either ADDITIVE floats (0 keeps a
  position, -inf removes it, any other value is added to the logit) or BOOLEAN where True means
  "may attend" and False becomes -inf. Integer masks are ambiguous: Tensor.softmax rejects
  them (arguments are checked once, where users pass them; the kernels assert their
  preconditions).
* A row whose logits are all -inf (e.g. fully masked) has softmax 0 everywhere and
  log-softmax -inf everywhere; the gradient flowing back through such a row is 0. No NaN.
* A NaN anywhere in a row makes that whole output row NaN: errors are never hidden.
* float32 and float64 are supported; outputs have the input dtype. Inputs that are not
  C-contiguous are copied once; empty arrays give empty results.

The kernels compute the formulas with a vectorisable exp and rows processed in cache-sized chunks.
"""
import functools
import math
from types import SimpleNamespace

import numpy as np

from .backend import (
    FASTMATH,
    lazy_kernels,
    rows_of,
    threads_for,
)

# ---------------------------------------------------------------------------------------------
# Preconditions and mask preparation
# ---------------------------------------------------------------------------------------------

def _trusted(*arrays):
    """The kernels' preconditions (Tensor methods and nn.functional check what users pass):
    float32/float64 arrays, at least 1-D, all of one shape and dtype."""
    first = arrays[0]
    assert first.dtype in (np.float32, np.float64) and first.ndim >= 1, (first.dtype, first.shape)
    assert all(a.shape == first.shape and a.dtype == first.dtype for a in arrays[1:])


def _as_scale(scale, dtype):
    assert math.isfinite(scale), scale
    return dtype.type(scale)


def _trusted_mask(mask, x):
    """The mask's preconditions: boolean or float, and broadcasting to x's shape without growing it."""
    assert mask.dtype == np.bool_ or mask.dtype.kind == "f", mask.dtype
    assert mask.ndim <= x.ndim, (mask.shape, x.shape)
    assert all(m in (1, n) for m, n in zip(mask.shape[::-1], x.shape[::-1])), (mask.shape, x.shape)


def _mask_by_row(additive, x_shape):
    """(mask rows as a C-contiguous (M, N) array, int64 index of the mask row for each x row)."""
    n = x_shape[-1]
    mask = additive.reshape((1,) * (len(x_shape) - additive.ndim) + additive.shape)
    mask_lead = mask.shape[:-1]
    mask_rows = np.array(np.broadcast_to(mask, mask_lead + (n,)), order="C").reshape(-1, n)
    numbering = np.arange(mask_rows.shape[0], dtype=np.int64).reshape(mask_lead)
    row_of = np.array(np.broadcast_to(numbering, x_shape[:-1]), order="C").reshape(-1)
    return mask_rows, row_of


# ---------------------------------------------------------------------------------------------
# Numba kernels: the same arithmetic as the formulas, with the rows cut into cache-sized chunks
# ---------------------------------------------------------------------------------------------

# Rows are processed in chunks of about this many elements: small enough to stay in the L1/L2
# cache between passes, large enough that the exp pass runs as one long SIMD loop.
CHUNK_ELEMS = 4096

# exp(r) for |r| <= ln(2)/2 by its Taylor series; truncation error is below the dtype's epsilon
# (r^14/14! < 5e-18 for float64, r^8/8! < 6e-9 for float32).
_INV_FACTORIALS = tuple(1.0 / float(np.prod(np.arange(1, k + 1))) for k in range(14))
_EXP_COEFFS_F64 = _INV_FACTORIALS
_EXP_COEFFS_F32 = tuple(np.float32(c) for c in _INV_FACTORIALS[:8])
_LOG2E = 1.4426950408889634
# ln(2) split so that n * _LN2_HI is exact (Cody-Waite range reduction).
_LN2_HI_F64, _LN2_LO_F64 = 6.93147180369123816490e-01, 1.90821492927058770002e-10
_LN2_HI_F32, _LN2_LO_F32 = np.float32(0.693359375), np.float32(-2.12194440e-4)
_ROUNDING_SHIFT_F64, _ROUNDING_SHIFT_F32 = 1.5 * 2.0**52, np.float32(1.5 * 2.0**23)
_ROUNDING_SHIFT_BITS_F64 = np.int64(np.float64(_ROUNDING_SHIFT_F64).view(np.int64))
_ROUNDING_SHIFT_BITS_F32 = np.int32(_ROUNDING_SHIFT_F32.view(np.int32))


# Stubs that only name the helpers and per-chunk bodies: Numba compiles the bodies registered
# with @overload below. Kernels reach helpers through module-level names like these rather than
# closure variables, because Numba keys its on-disk cache on the pickled closure, which would
# change from run to run if it held jit functions.

def simd_exp(x):
    """exp that LLVM can vectorise (libm's exp is a scalar call)."""
    return np.exp(x)


def row_max(a, r):
    """max of row r of 2-D a, skipping NaNs after the first element."""
    return max(a[r])


def _chunking(n_rows, n_cols):
    """(rows per chunk, number of chunks) for chunks of about CHUNK_ELEMS elements."""
    step = max(1, CHUNK_ELEMS // n_cols)
    return step, (n_rows + step - 1) // step


def _softmax_rows(x, scale, mask, mask_row_of, out):
    """out = softmax(x * scale + mask[mask_row_of]) for a block of rows (Numba only)."""
    raise NotImplementedError


def _softmax_backward_rows(y, dy, scale, dx):
    """dx = scale * y * (dy - sum(dy * y)) for a block of rows (Numba only)."""
    raise NotImplementedError


def _log_softmax_rows(x, out):
    """out = log_softmax(x) for a block of rows (Numba only)."""
    raise NotImplementedError


def _log_softmax_backward_rows(y, dy, dx):
    """dx = dy - exp(y) * sum(dy) for a block of rows, 0 on all -inf rows (Numba only)."""
    raise NotImplementedError


@lazy_kernels
def _numba_kernels(numba):
    """Compile-on-first-use Numba kernels; returns a namespace of them."""
    from numba.core import types
    from numba.extending import overload, register_jitable

    casts = _bit_casts(numba)
    exp_f32, exp_f64 = _compile_exp(numba, casts)

    @overload(simd_exp, jit_options={"fastmath": {"contract"}})
    def _simd_exp_typed(x):
        if x == types.float32:
            return lambda x: exp_f32(x)
        if x == types.float64:
            return lambda x: exp_f64(x)
        return None

    register_jitable(_chunking)
    _register_row_max(numba, casts)
    _register_softmax_rows(numba)
    _register_log_softmax_rows(numba)
    return SimpleNamespace(**_compile_drivers(numba), exp_f32=exp_f32, exp_f64=exp_f64)


def register_numba() -> None:
    """Compile this module's kernels on first use, registering simd_exp and row_max as Numba functions that
    kernels elsewhere inline (transformer/fast/decoder_kernel.py)."""
    _numba_kernels()


def _bit_casts(numba):
    """Intrinsics reinterpreting a float's bits as an int and back (free in machine code)."""
    from llvmlite import ir
    from numba.core import types
    from numba.extending import intrinsic

    def bitcast(name, from_type, to_type, to_ir):
        def typer(typingctx, value):
            def codegen(context, builder, signature, args):
                return builder.bitcast(args[0], to_ir)
            return to_type(from_type), codegen
        typer.__name__ = name
        return intrinsic(typer)

    return SimpleNamespace(
        float64_from_bits=bitcast("float64_from_bits", types.int64, types.float64, ir.DoubleType()),
        bits_of_float64=bitcast("bits_of_float64", types.float64, types.int64, ir.IntType(64)),
        float32_from_bits=bitcast("float32_from_bits", types.int32, types.float32, ir.FloatType()),
        bits_of_float32=bitcast("bits_of_float32", types.float32, types.int32, ir.IntType(32)))


def _compile_exp(numba, casts):
    """(exp_f32, exp_f64): exp written out, so that LLVM can vectorise the exp pass.

    exp(x) = 2^n * exp(r) with n = round(x / ln 2) and r = x - n ln 2 in [-ln2/2, ln2/2].
    Adding 1.5 * 2^52 (2^23 for float32) rounds x / ln 2 to an integer held in the low bits of
    the sum, so n is read from those bits without a float->int conversion. 2^n is built from its
    bit pattern and applied in two halves, so that subnormal results and overflow to inf come
    out right. max/min return their first argument when the other is NaN (Python's rule, which
    Numba follows), so a NaN x passes the clamps and makes the result NaN. Below the float's
    underflow (e^x rounds to 0: masked -inf logits) the polynomial runs on 0 and the result is
    set to 0: the same value, without multiplications by subnormals (slow on x86; a masked
    attention tile took 1.5x longer to exponentiate).
    """
    njit = functools.partial(numba.njit, cache=True)
    float64_from_bits, bits_of_float64 = casts.float64_from_bits, casts.bits_of_float64
    float32_from_bits, bits_of_float32 = casts.float32_from_bits, casts.bits_of_float32

    @njit(fastmath={"contract"})
    def exp_f64(x):
        underflow = x < -746.0
        x = 0.0 if underflow else min(x, 710.0)
        shifted = x * _LOG2E + _ROUNDING_SHIFT_F64
        n = shifted - _ROUNDING_SHIFT_F64
        r = (x - n * _LN2_HI_F64) - n * _LN2_LO_F64
        c = _EXP_COEFFS_F64
        p = c[13]
        for k in range(12, -1, -1):
            p = p * r + c[k]
        n_int = bits_of_float64(shifted) - _ROUNDING_SHIFT_BITS_F64
        half = n_int >> 1
        rest = n_int - half
        value = p * float64_from_bits((half + 1023) << 52) * float64_from_bits((rest + 1023) << 52)
        return 0.0 if underflow else value

    @njit(fastmath={"contract"})
    def exp_f32(x):
        underflow = x < np.float32(-104.0)
        x = np.float32(0.0) if underflow else min(x, np.float32(89.0))
        shifted = x * np.float32(_LOG2E) + _ROUNDING_SHIFT_F32
        n = shifted - _ROUNDING_SHIFT_F32
        r = (x - n * _LN2_HI_F32) - n * _LN2_LO_F32
        c = _EXP_COEFFS_F32
        p = c[7]
        for k in range(6, -1, -1):
            p = p * r + c[k]
        n_int = bits_of_float32(shifted) - _ROUNDING_SHIFT_BITS_F32
        half = np.int32(n_int >> 1)
        rest = np.int32(n_int - half)
        value = p * float32_from_bits(np.int32((half + 127) << 23)) * float32_from_bits(np.int32((rest + 127) << 23))
        return np.float32(0.0) if underflow else value

    return exp_f32, exp_f64


def _register_row_max(numba, casts):
    """Compile row_max.

    Short rows: four running maxima instead of one, so the compares of a row do not wait on each
    other. Long rows: compare the floats' bit patterns as integers, which LLVM turns into SIMD
    max instructions (it cannot for float compares that must respect NaN). Flipping the
    magnitude bits of negative numbers makes the integer order match the float order. Either
    way max skips a NaN z (unless it comes first); the NaN still reaches every output of its row
    through exp(z - top) and the row sum.
    """
    from numba.core import types
    from numba.extending import overload

    @overload(row_max)
    def _row_max_typed(a, r):
        if a.dtype == types.float32:
            to_bits, from_bits, int_type = casts.bits_of_float32, casts.float32_from_bits, np.int32
        else:
            to_bits, from_bits, int_type = casts.bits_of_float64, casts.float64_from_bits, np.int64
        sign_shift = int_type(8 * np.dtype(int_type).itemsize - 1)
        magnitude = int_type(np.iinfo(int_type).max)

        @numba.njit(inline="always")
        def ordered(bits):
            return bits ^ ((bits >> sign_shift) & magnitude)

        def row_max_of(a, r):
            n = a.shape[1]
            if n >= 64:
                key = ordered(to_bits(a[r, 0]))
                for j in range(1, n):
                    key = max(key, ordered(to_bits(a[r, j])))
                return from_bits(ordered(key))
            m0 = m1 = m2 = m3 = a[r, 0]
            full = n - n % 4
            for j in range(0, full, 4):
                m0 = max(m0, a[r, j])
                m1 = max(m1, a[r, j + 1])
                m2 = max(m2, a[r, j + 2])
                m3 = max(m3, a[r, j + 3])
            for j in range(full, n):
                m0 = max(m0, a[r, j])
            return max(max(m0, m1), max(m2, m3))
        return row_max_of


# Chunk bodies. Rows arrive as views indexed from 0, so LLVM can prove indices non-negative and
# vectorise; exp runs as one long loop over the whole chunk instead of one per row.

def _register_softmax_rows(numba):
    """Compile _softmax_rows and _softmax_backward_rows."""
    from numba.extending import overload

    @overload(_softmax_rows, jit_options={"fastmath": FASTMATH})
    def _softmax_rows_typed(x, scale, mask, mask_row_of, out):
        def softmax_rows(x, scale, mask, mask_row_of, out):
            n = x.shape[1]
            for r in range(x.shape[0]):
                if mask_row_of.size:
                    m = mask_row_of[r]
                    for j in range(n):
                        out[r, j] = x[r, j] * scale + mask[m, j]
                    top = row_max(out, r)
                    if top != -np.inf:
                        for j in range(n):
                            out[r, j] -= top
                else:  # max(x * scale) = max(x) * scale exactly, as scale >= 0 here
                    top = row_max(x, r) * scale
                    top = x.dtype.type(0) if top == -np.inf else top
                    for j in range(n):
                        out[r, j] = x[r, j] * scale - top
            flat = out.reshape(out.size)
            for i in range(flat.size):
                flat[i] = simd_exp(flat[i])
            for r in range(x.shape[0]):
                total = x.dtype.type(0)
                for j in range(n):
                    total += out[r, j]
                if total != 0:
                    inv = x.dtype.type(1) / total
                    for j in range(n):
                        out[r, j] *= inv
        return softmax_rows

    @overload(_softmax_backward_rows, jit_options={"fastmath": FASTMATH})
    def _softmax_backward_rows_typed(y, dy, scale, dx):
        def softmax_backward_rows(y, dy, scale, dx):
            n = y.shape[1]
            for r in range(y.shape[0]):
                dot = y.dtype.type(0)
                for j in range(n):
                    dot += dy[r, j] * y[r, j]
                for j in range(n):
                    dx[r, j] = scale * y[r, j] * (dy[r, j] - dot)
        return softmax_backward_rows


def _register_log_softmax_rows(numba):
    """Compile _log_softmax_rows and _log_softmax_backward_rows.

    log_softmax keeps its two subtractions apart, (x - max) - log(sum): folding max + log(sum)
    into one offset first would round it to the precision of max, which costs float32 results
    near 0 most of their digits when max is ~1e4. So x - max stays in out and the exps go to a
    scratch buffer.
    """
    from numba.extending import overload

    @overload(_log_softmax_rows, jit_options={"fastmath": FASTMATH})
    def _log_softmax_rows_typed(x, out):
        def log_softmax_rows(x, out):
            n = x.shape[1]
            for r in range(x.shape[0]):
                top = row_max(x, r)
                top = x.dtype.type(0) if top == -np.inf else top
                for j in range(n):
                    out[r, j] = x[r, j] - top
            exps = np.empty(x.shape, dtype=x.dtype)
            flat_out, flat_exps = out.reshape(out.size), exps.reshape(exps.size)
            for i in range(flat_out.size):
                flat_exps[i] = simd_exp(flat_out[i])
            for r in range(x.shape[0]):
                total = x.dtype.type(0)
                for j in range(n):
                    total += exps[r, j]
                if total != 0:
                    log_total = np.log(total)
                    for j in range(n):
                        out[r, j] -= log_total
        return log_softmax_rows

    @overload(_log_softmax_backward_rows, jit_options={"fastmath": FASTMATH})
    def _log_softmax_backward_rows_typed(y, dy, dx):
        def log_softmax_backward_rows(y, dy, dx):
            n = y.shape[1]
            flat_y, flat_dx = y.reshape(y.size), dx.reshape(dx.size)
            for i in range(flat_y.size):
                flat_dx[i] = simd_exp(flat_y[i])
            for r in range(y.shape[0]):
                total_p = y.dtype.type(0)
                total_dy = y.dtype.type(0)
                for j in range(n):
                    total_p += dx[r, j]
                    total_dy += dy[r, j]
                if total_p == 0:
                    for j in range(n):
                        dx[r, j] = 0
                else:
                    for j in range(n):
                        dx[r, j] = dy[r, j] - dx[r, j] * total_dy
        return log_softmax_backward_rows


def _compile_drivers(numba):
    """The four kernels: each hands chunks of rows to threads (prange) and runs a chunk body on
    each (the wrappers keep small inputs on one thread, see backend.threads_for)."""
    njit = functools.partial(numba.njit, cache=True, parallel=True)
    prange = numba.prange

    @njit
    def softmax_forward(x, scale, mask, mask_row_of, out):
        """out[r] = softmax(x[r] * scale + mask[mask_row_of[r]]); no mask if mask_row_of is empty.

        Needs scale >= 0 (the wrapper flips the signs of x and scale otherwise).
        """
        step, n_chunks = _chunking(x.shape[0], x.shape[1])
        masked = mask_row_of.size > 0
        for c in prange(n_chunks):
            rows = slice(c * step, (c + 1) * step)
            _softmax_rows(x[rows], scale, mask, mask_row_of[rows] if masked else mask_row_of,
                          out[rows])

    @njit
    def softmax_backward(y, dy, scale, dx):
        """dx[r] = scale * y[r] * (dy[r] - <dy[r], y[r]>)."""
        step, n_chunks = _chunking(y.shape[0], y.shape[1])
        for c in prange(n_chunks):
            rows = slice(c * step, (c + 1) * step)
            _softmax_backward_rows(y[rows], dy[rows], scale, dx[rows])

    @njit
    def log_softmax_forward(x, out):
        """out[r] = (x[r] - max) - log(sum(exp(x[r] - max))); all -inf rows stay -inf."""
        step, n_chunks = _chunking(x.shape[0], x.shape[1])
        for c in prange(n_chunks):
            rows = slice(c * step, (c + 1) * step)
            _log_softmax_rows(x[rows], out[rows])

    @njit
    def log_softmax_backward(y, dy, dx):
        """dx[r] = dy[r] - exp(y[r]) * sum(dy[r]); 0 on rows where y is all -inf."""
        step, n_chunks = _chunking(y.shape[0], y.shape[1])
        for c in prange(n_chunks):
            rows = slice(c * step, (c + 1) * step)
            _log_softmax_backward_rows(y[rows], dy[rows], dx[rows])

    return {"softmax_forward": softmax_forward, "softmax_backward": softmax_backward,
            "log_softmax_forward": log_softmax_forward,
            "log_softmax_backward": log_softmax_backward}


# ---------------------------------------------------------------------------------------------
# Numba entry points (the formulas' signatures)
# ---------------------------------------------------------------------------------------------

def softmax_forward_numba(x, scale=1.0, mask=None):
    """softmax(x * scale + mask) over the last axis (Numba kernel)."""
    _trusted(x)
    scale = _as_scale(scale, x.dtype)
    additive = None
    if mask is not None:
        from ..ops.nn import additive_mask  # here, not on top: the kernels load before the ops
        _trusted_mask(mask, x)
        additive = additive_mask(mask, x.dtype)
    out = np.empty(x.shape, x.dtype)
    if x.size == 0:
        return out
    n = x.shape[-1]
    if additive is None:
        mask_rows, row_of = np.zeros((1, n), x.dtype), np.zeros(0, np.int64)
    else:
        mask_rows, row_of = _mask_by_row(additive, x.shape)
    if scale < 0:
        x, scale = -x, -scale
    with threads_for(x.size):
        _numba_kernels().softmax_forward(rows_of(x), scale, mask_rows, row_of, out.reshape(-1, n))
    return out


def softmax_backward_numba(y, dy, scale=1.0):
    """dx = scale * y * (dy - sum(dy * y)) over the last axis (Numba kernel)."""
    _trusted(y, dy)
    scale = _as_scale(scale, y.dtype)
    dx = np.empty(y.shape, y.dtype)
    if y.size:
        with threads_for(y.size):
            _numba_kernels().softmax_backward(rows_of(y), rows_of(dy), scale,
                                              dx.reshape(-1, y.shape[-1]))
    return dx


def log_softmax_forward_numba(x):
    """log(softmax(x)) over the last axis (Numba kernel)."""
    _trusted(x)
    out = np.empty(x.shape, x.dtype)
    if x.size:
        with threads_for(x.size):
            _numba_kernels().log_softmax_forward(rows_of(x), out.reshape(-1, x.shape[-1]))
    return out


def log_softmax_backward_numba(y, dy):
    """dx = dy - exp(y) * sum(dy) over the last axis; 0 on all -inf rows (Numba kernel)."""
    _trusted(y, dy)
    dx = np.empty(y.shape, y.dtype)
    if y.size:
        with threads_for(y.size):
            _numba_kernels().log_softmax_backward(rows_of(y), rows_of(dy),
                                                  dx.reshape(-1, y.shape[-1]))
    return dx
