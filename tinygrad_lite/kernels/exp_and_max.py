"""simd_exp and row_max: the exp and the row maximum the softmax kernels run, written so that LLVM
vectorises them (libm's exp is a scalar call, and float compares that respect NaN do not become SIMD
max instructions). Kernels elsewhere inline them too (attention's tiles, transformer/fast's decoders).

exp(x) = 2^n * exp(r) with n = round(x / ln 2) and r = x - n ln 2 in [-ln2/2, ln2/2], exp(r) by its
Taylor series. Adding 1.5 * 2^52 (2^23 for float32) rounds x / ln 2 to an integer held in the low
bits of the sum, so n is read from those bits without a float->int conversion. 2^n is built from its
bit pattern and applied in two halves, so that subnormal results and overflow to inf come out right.
max/min return their first argument when the other is NaN (Python's rule, which Numba follows), so a
NaN x passes the clamps and makes the result NaN. Below the float's underflow (e^x rounds to 0:
masked -inf logits) the polynomial runs on 0 and the result is set to 0: the same value, without
multiplications by subnormals (slow on x86; a masked attention tile took 1.5x longer to exponentiate).

Importing this module compiles nothing; `numba_exp_and_max()` registers both on first use.
"""
from types import SimpleNamespace

import numpy as np

from .backend import lazy_kernels

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
# Per float type: where e^x underflows to 0 and where it is clamped (overflows to inf), log2(e), ln(2) in two
# parts, the rounding shift and its bits, the Taylor coefficients, the exponent's bias and the mantissa's width.
_EXP_F64 = (-746.0, 710.0, _LOG2E, _LN2_HI_F64, _LN2_LO_F64, _ROUNDING_SHIFT_F64, _ROUNDING_SHIFT_BITS_F64,
            _EXP_COEFFS_F64, 1023, 52)
_EXP_F32 = (np.float32(-104.0), np.float32(89.0), np.float32(_LOG2E), _LN2_HI_F32, _LN2_LO_F32, _ROUNDING_SHIFT_F32,
            _ROUNDING_SHIFT_BITS_F32, _EXP_COEFFS_F32, 127, 23)


# Stubs that only name the helpers: Numba compiles the bodies registered with @overload below.
# Kernels reach them through module-level names like these rather than closure variables, because
# Numba keys its on-disk cache on the pickled closure, which would change from run to run if it
# held jit functions.

def simd_exp(x):
    """exp that LLVM can vectorise (libm's exp is a scalar call)."""
    return np.exp(x)


def row_max(a, r):
    """max of row r of 2-D a, skipping NaNs after the first element."""
    return max(a[r])


@lazy_kernels
def numba_exp_and_max(numba):
    """Register simd_exp's and row_max's Numba bodies, once; returns the compiled exp_f32 and exp_f64."""
    from numba.core import types
    from numba.extending import overload

    casts = _bit_casts(numba)
    exp_f32, exp_f64 = _compile_exp(numba, casts)

    @overload(simd_exp, jit_options={"fastmath": {"contract"}})
    def _simd_exp_typed(x):
        if x == types.float32:
            return lambda x: exp_f32(x)
        if x == types.float64:
            return lambda x: exp_f64(x)
        return None

    _register_row_max(numba, casts)
    return SimpleNamespace(exp_f32=exp_f32, exp_f64=exp_f64)


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
    """(exp_f32, exp_f64): exp written out (see the module docstring), one body compiled for each float type,
    so that LLVM can vectorise the exp pass."""
    return (_compile_exp_of(numba, np.float32, np.int32, casts.float32_from_bits, casts.bits_of_float32, *_EXP_F32),
            _compile_exp_of(numba, np.float64, np.int64, casts.float64_from_bits, casts.bits_of_float64, *_EXP_F64))


def _compile_exp_of(numba, float_type, int_type, from_bits, bits_of, lowest, highest, log2e, ln2_hi, ln2_lo,
                    shift, shift_bits, coeffs, bias, mantissa):
    """exp for one float type, from its constants (_EXP_F32, _EXP_F64)."""
    last = len(coeffs) - 1

    @numba.njit(cache=True, fastmath={"contract"})
    def exp(x):
        underflow = x < lowest
        x = float_type(0.0) if underflow else min(x, highest)
        shifted = x * log2e + shift
        n = shifted - shift
        r = (x - n * ln2_hi) - n * ln2_lo
        p = coeffs[last]
        for k in range(last - 1, -1, -1):
            p = p * r + coeffs[k]
        n_int = bits_of(shifted) - shift_bits
        half = int_type(n_int >> 1)
        rest = int_type(n_int - half)
        value = p * from_bits(int_type((half + bias) << mantissa)) * from_bits(int_type((rest + bias) << mantissa))
        return float_type(0.0) if underflow else value
    return exp


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
