"""A Linear, y = x·Wᵀ + b, as one Numba call each way: the twin of nn.functional's op `linear` (linear_op).

The formula multiplies through the op linear_product three times, adds the bias and sums its gradient with
NumPy, each a call and a pass of its own. Here the forward (x·Wᵀ, then + b) and the backward (g·W, gᵀ·x and g's
column sums, those that `needs` asks for) each run as one Numba function calling cblas_?gemm through its address
(kernels.cblas), on the BLAS the formula's product would use: oneMKL where kernels.mkl serves the operands (trick
mkl_products), else NumPy's own OpenBLAS. The same library and call, the bias added and summed in the formula's
order: the same bits. The formula runs where the panel micro-kernel would multiply (trick panel_products), where
an operand is a single row or column (NumPy then calls ?gemv), where x's rows or W are not contiguous, or where
no ?gemm is found. A gradient that is not contiguous is copied first.

Forward / backward, µs, the formula against this (Zen 4, 1 thread, float32, medians): 240 × 64 -> 64 (TINY)
30.0 / 45.6 against 29.3 / 38.8; 768 × 128 -> 512 (SMALL's FFN) 1,406 / 2,523 against 1,284 / 2,315;
192 × 512 -> 2,048 (BASE-short's) 5,543 / 9,456 against 5,205 / 9,216.

    linear_op_numba(x, w, b, needs) -> (y, backward)      nn.functional.linear_op's contract
"""
from __future__ import annotations

import functools
from types import SimpleNamespace

import numpy as np

from .. import dispatch
from . import cblas, mkl, panels
from .backend import lazy_kernels
from .cblas import NO_TRANS, TRANS

FLOATS = (np.dtype(np.float32), np.dtype(np.float64))
_INT32_MAX = 2**31 - 1


def linear_op_numba(x, w, b, needs):
    """nn.functional.linear_op with its forward and its backward each one Numba call (see the module docstring)."""
    n_out, n_in = w.shape
    x2 = x.reshape(-1, n_in)
    out = np.empty((x2.shape[0], n_out), x.dtype)  # g, the backward's, has its shape and layout
    engine = _engine(x2, w, out)
    if engine is None:
        return dispatch.formula("linear")(x, w, b, needs)
    address, ilp64 = engine
    kernels = _numba_kernels()
    bias = _NO_BIAS[x.dtype] if b is None else b
    kernels.forward(address, ilp64, x2, w, bias, b is not None, out)

    def backward(g):
        g2 = np.ascontiguousarray(g.reshape(-1, n_out))
        dx = np.empty(x2.shape, x.dtype) if needs[0] else _NO_MATRIX[x.dtype]
        dw = np.empty(w.shape, x.dtype) if needs[1] else _NO_MATRIX[x.dtype]
        db = np.empty(n_out, x.dtype) if b is not None and needs[2] else _NO_BIAS[x.dtype]
        kernels.backward(address, ilp64, g2, x2, w, dx, dw, db)
        grads = (dx.reshape(x.shape) if needs[0] else None, dw if needs[1] else None)
        return grads if b is None else grads + (db if needs[2] else None,)
    return out.reshape(x.shape[:-1] + (n_out,)), backward


_NO_MATRIX = {dtype: np.empty((0, 0), dtype) for dtype in FLOATS}
_NO_BIAS = {dtype: np.empty(0, dtype) for dtype in FLOATS}


def _engine(x2, w, out):
    """(address of cblas_?gemm, ilp64) for a Linear's three products, x2·wᵀ, g·w and gᵀ·x2 (g shaped and laid out
    as `out`), where the formula's would all run on one BLAS (panels.product_engine); None where the formula runs."""
    m, n_in = x2.shape
    n_out = w.shape[0]
    if x2.dtype not in FLOATS or min(m, n_in, n_out) < 2 or not (x2.flags.c_contiguous and w.flags.c_contiguous):
        return None
    engines = {panels.product_engine(a, b) for a, b in ((x2, w.T), (out, w), (out.T, x2))}
    if engines == {"mkl"}:
        return mkl.gemm_addresses()[x2.dtype], False
    found = cblas.numpy_gemms()
    if engines != {"blas"} or found is None:
        return None
    addresses, ilp64 = found
    if not ilp64 and max(x2.size, w.size, out.size) > _INT32_MAX:
        return None
    return addresses[x2.dtype], ilp64


@lazy_kernels
def _numba_kernels(numba):
    """Compile-on-first-use: the forward and the backward, in a namespace."""
    cblas.register(numba)
    njit = functools.partial(numba.njit, cache=True)  # no fastmath: the formula's order of additions

    @njit
    def forward(address, ilp64, x, w, bias, has_bias, out):
        """out = x·wᵀ (+ bias on every row)."""
        m, k = x.shape
        n = w.shape[0]
        cblas.gemm(address, ilp64, NO_TRANS, TRANS, m, n, k, k, k, x, w, out)
        if has_bias:
            for i in range(m):
                for j in range(n):
                    out[i, j] += bias[j]

    @njit
    def backward(address, ilp64, g, x, w, dx, dw, db):
        """dx = g·w, dw = gᵀ·x, db = g's column sums, row by row from row 0 (NumPy's order); each only where
        its array is not empty."""
        m, n = g.shape
        k = x.shape[1]
        if dx.size:
            cblas.gemm(address, ilp64, NO_TRANS, NO_TRANS, m, k, n, n, k, g, w, dx)
        if dw.size:
            cblas.gemm(address, ilp64, TRANS, NO_TRANS, n, k, m, n, k, g, x, dw)
        if db.size:
            for j in range(n):
                db[j] = g[0, j]
            for i in range(1, m):
                for j in range(n):
                    db[j] += g[i, j]

    return SimpleNamespace(forward=forward, backward=backward)
