"""cblas_?gemm called from a Numba kernel through its address: oneMKL's (kernels.mkl) or NumPy's own OpenBLAS
(kernels.linear_layer). A ctypes call spends ~5 µs converting its 14 arguments; through its address a call costs what
Numba's own dispatch costs, and the compiled code names no address of this process, which Numba's on-disk cache
could not keep.

    gemm(address, ilp64, trans_a, trans_b, m, n, k, lda, ldb, a, b, out)   (Numba only)

computes out (m, n, row-major, leading dimension n) = op(a) · op(b), op a transpose where trans_? is TRANS,
through the function at `address`: its integers 64-bit where `ilp64` (NumPy's OpenBLAS, `scipy_openblas64_`),
32-bit otherwise (oneMKL's LP64 layer). The caller sizes and orders the arrays: nothing is checked here.
"""
from __future__ import annotations

import ctypes
import functools
import os

import numpy as np

ROW_MAJOR, NO_TRANS, TRANS = 101, 111, 112
OPENBLAS_GEMMS = (("scipy_cblas_{}gemm64_", True), ("cblas_{}gemm64_", True), ("scipy_cblas_{}gemm", False),
                  ("cblas_{}gemm", False))  # NumPy's wheels: ILP64 scipy_openblas64_; other builds, other names


def gemm(address, ilp64, trans_a, trans_b, m, n, k, lda, ldb, a, b, out):
    """cblas_?gemm(row-major, trans_a, trans_b, m, n, k, 1, a, lda, b, ldb, 0, out, n) at `address` (Numba only)."""
    raise NotImplementedError


@functools.lru_cache(maxsize=1)
def numpy_gemms() -> tuple[dict, bool] | None:
    """({dtype: address of cblas_?gemm}, ilp64) in the OpenBLAS that NumPy itself loaded, or None where NumPy
    multiplies on another BLAS or its symbols have other names."""
    from threadpoolctl import threadpool_info
    numpy_dir = os.path.dirname(np.__file__)  # its libraries sit in numpy.libs beside it
    for lib in threadpool_info():
        path = lib.get("filepath", "")
        if lib.get("internal_api") != "openblas" or not path.startswith(numpy_dir):
            continue
        library = ctypes.CDLL(path)
        for pattern, ilp64 in OPENBLAS_GEMMS:
            try:
                return {np.dtype(dtype): ctypes.cast(getattr(library, pattern.format(letter)), ctypes.c_void_p).value
                        for dtype, letter in ((np.float32, "s"), (np.float64, "d"))}, ilp64
            except AttributeError:
                continue
    return None


@functools.lru_cache(maxsize=1)
def register(numba) -> None:
    """Give `gemm` its compiled body (once; kernels that call it run this before they compile)."""
    from llvmlite import ir
    from numba.core import types
    from numba.extending import intrinsic, overload

    def intrinsic_of(bits):
        @intrinsic
        def call(typingctx, address, trans_a, trans_b, m, n, k, lda, ldb, a, b, out):
            def codegen(context, builder, signature, args):
                address, trans_a, trans_b, m, n, k, lda, ldb, a, b, out = args
                int32, integer, pointer = ir.IntType(32), ir.IntType(bits), ir.IntType(8).as_pointer()
                real = context.get_value_type(signature.args[8].dtype)
                function = ir.FunctionType(ir.VoidType(), [int32] * 3 + [integer] * 3 + [
                    real, pointer, integer, pointer, integer, real, pointer, integer])
                call_at = builder.inttoptr(address, function.as_pointer())

                def data(array_type, value):
                    return builder.bitcast(context.make_array(array_type)(context, builder, value).data, pointer)

                def fit(value, width):
                    return builder.trunc(value, width) if width.width < 64 else value
                array_types = signature.args[8:]
                builder.call(call_at, [ir.Constant(int32, ROW_MAJOR), fit(trans_a, int32), fit(trans_b, int32),
                                       fit(m, integer), fit(n, integer), fit(k, integer), ir.Constant(real, 1.0),
                                       data(array_types[0], a), fit(lda, integer), data(array_types[1], b),
                                       fit(ldb, integer), ir.Constant(real, 0.0), data(array_types[2], out),
                                       fit(n, integer)])
                return context.get_dummy_value()
            return types.void(*(types.intp,) * 8, a, b, out), codegen
        return call

    lp64, ilp64 = intrinsic_of(32), intrinsic_of(64)

    @overload(gemm, inline="always")
    def gemm_typed(address, ilp64_, trans_a, trans_b, m, n, k, lda, ldb, a, b, out):
        def body(address, ilp64_, trans_a, trans_b, m, n, k, lda, ldb, a, b, out):
            if ilp64_:
                ilp64(address, trans_a, trans_b, m, n, k, lda, ldb, a, b, out)
            else:
                lp64(address, trans_a, trans_b, m, n, k, lda, ldb, a, b, out)
        return body
