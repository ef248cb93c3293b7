"""Fused elementwise chains of a Transformer layer, each one pass instead of several.

Add & Norm's residual and dropout, and the feed-forward's bias, ReLU and dropout, are chains of
elementwise ops: as separate ops each reads and writes the whole activation and leaves a
temporary. Here each chain is one loop (the plain chain is the NumPy twin, the same float
operations in the same order, so both agree to the last bit):

    add_dropout(x, s, keep, scale)               x + (s·keep)·scale           residual + dropout
    dropout_backward(g, keep, scale)             (g·keep)·scale
    bias_relu_dropout_(y, b, keep, scale)        y ← (max(y + b, 0)·keep)·scale, in place
    relu_dropout_backward(g, h, scale)           (g·scale)·(h > 0), h the output above

keep is the boolean dropout mask (None: no dropout, scale 1). The relu_dropout backward needs
no mask: h > 0 exactly where the unit was kept and positive. Kernels take trusted, C-contiguous
arrays of one float dtype (nn.functional checks what users pass).
"""
import functools
from types import SimpleNamespace

import numpy as np

from .backend import lazy_kernels, threads_for, use_numba

# ---------------------------------------------------------------------------------------------
# NumPy twins: the plain chains
# ---------------------------------------------------------------------------------------------

def add_dropout_numpy(x, s, keep, scale):
    return x + (s if keep is None else s * keep * scale)


def dropout_backward_numpy(g, keep, scale):
    return g if keep is None else g * keep * scale


def bias_relu_dropout_numpy(y, b, keep, scale):
    """Returns the plain chain's result; y (rows, n) gains the bias in place."""
    if b is not None:
        y += b
    h = np.maximum(y, 0)
    return h if keep is None else h * keep * scale


def relu_dropout_backward_numpy(g, h, scale):
    return g * scale * (h > 0)


# ---------------------------------------------------------------------------------------------
# Numba kernels (flat or (rows, n) loops; compiled on first use)
# ---------------------------------------------------------------------------------------------

@lazy_kernels
def _numba_kernels(numba):
    """Compile-on-first-use kernels; `dropped` False means no dropout (keep is then a dummy)."""
    njit = functools.partial(numba.njit, cache=True, parallel=True)
    prange = numba.prange

    @njit
    def add_dropout(x, s, keep, scale, out):
        for i in prange(x.size):
            out[i] = x[i] + s[i] * keep[i] * scale

    @njit
    def dropout_backward(g, keep, scale, out):
        for i in prange(g.size):
            out[i] = g[i] * keep[i] * scale

    @njit
    def bias_relu_dropout(y, b, keep, scale, dropped):
        rows, n = y.shape
        for r in prange(rows):
            for j in range(n):
                v = y[r, j] + b[j]
                if v < 0:
                    v = v - v
                y[r, j] = v * keep[r, j] * scale if dropped else v

    @njit
    def relu_dropout_backward(g, h, scale, out):
        for i in prange(g.size):
            out[i] = g[i] * scale * (h[i] > 0)

    return SimpleNamespace(add_dropout=add_dropout, dropout_backward=dropout_backward,
                           bias_relu_dropout=bias_relu_dropout, relu_dropout_backward=relu_dropout_backward)


# ---------------------------------------------------------------------------------------------
# Entry points: the twin or the kernel, by backend
# ---------------------------------------------------------------------------------------------

def add_dropout(x, s, keep, scale):
    """x + (s·keep)·scale (x + s without a mask), a new array."""
    if keep is None or not use_numba():
        return add_dropout_numpy(x, s, keep, scale)
    assert x.shape == s.shape == keep.shape and x.dtype == s.dtype, (x.shape, s.shape, x.dtype, s.dtype)
    out = np.empty_like(x)
    with threads_for(x.size):
        _numba_kernels().add_dropout(x.reshape(-1), s.reshape(-1), keep.reshape(-1), x.dtype.type(scale),
                                     out.reshape(-1))
    return out


def dropout_backward(g, keep, scale):
    """(g·keep)·scale (g itself without a mask)."""
    if keep is None or not use_numba():
        return dropout_backward_numpy(g, keep, scale)
    out = np.empty_like(g)
    with threads_for(g.size):
        _numba_kernels().dropout_backward(np.ascontiguousarray(g).reshape(-1), keep.reshape(-1), g.dtype.type(scale),
                                          out.reshape(-1))
    return out


def bias_relu_dropout_(y, b, keep, scale):
    """(max(y + b, 0)·keep)·scale of a fresh (rows, n) array y, computed in y (returned)."""
    if b is None or not use_numba():
        return bias_relu_dropout_numpy(y, b, keep, scale)
    assert y.ndim == 2 and y.flags.c_contiguous and b.shape == y.shape[1:] and b.dtype == y.dtype
    dropped = keep is not None
    with threads_for(y.size):
        _numba_kernels().bias_relu_dropout(y, b, keep if dropped else np.ones((1, 1), np.bool_),
                                           y.dtype.type(scale), dropped)
    return y


def relu_dropout_backward(g, h, scale):
    """(g·scale)·(h > 0): the gradient before the bias of bias_relu_dropout_, h its output."""
    if not use_numba():
        return relu_dropout_backward_numpy(g, h, scale)
    out = np.empty_like(h)
    with threads_for(g.size):
        _numba_kernels().relu_dropout_backward(np.ascontiguousarray(g).reshape(-1), h.reshape(-1),
                                               h.dtype.type(scale), out.reshape(-1))
    return out
