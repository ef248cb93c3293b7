"""Layer normalisation over the last axis, forward and backward.

The Transformer wraps every sub-layer as LayerNorm(x + Sublayer(x)) (the paper, section 3.1;
the article's "Add & Norm"). For each row: y = (x - mean) * rstd * gamma + beta with
rstd = 1 / sqrt(var + eps) and the biased variance (divide by N), as in PyTorch.

The formulas are the op's own, in tinygrad_lite/ops/nn.py (layernorm_forward, layernorm_backward);
this file holds their Numba twins (``*_numba``, the same signatures), which kernels.TWINS
registers and the numba backend runs (tinygrad_lite.dispatch). float32 and float64 are supported
and outputs keep the input dtype; the Numba forward sums each row in float64 for the mean (large offsets would
otherwise lose digits) and the squared deviations in the input dtype (two-pass variance), and
dgamma/dbeta are summed in float64 across chunks of rows. ``mean`` and ``rstd`` have
shape (..., 1) so they broadcast against x. A constant row has var 0 and stays finite thanks
to eps; a NaN in a row makes that row's outputs NaN.
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

# Rows per parallel chunk are chosen so a chunk holds about this many elements; dgamma/dbeta
# get one partial sum per chunk, so the result does not depend on the thread count.
CHUNK_ELEMS = 8192


# ---------------------------------------------------------------------------------------------
# Preconditions (Tensor.layer_norm checks what users pass; the kernels assert)
# ---------------------------------------------------------------------------------------------

def _assert_affine(param, x):
    assert param is None or (param.shape == x.shape[-1:] and param.dtype == x.dtype), \
        (param.shape, param.dtype, x.shape, x.dtype)


def _forward_args(x, gamma, beta, eps):
    assert x.dtype in (np.float32, np.float64) and x.ndim >= 1, (x.dtype, x.shape)
    _assert_affine(gamma, x)
    _assert_affine(beta, x)
    assert math.isfinite(eps) and eps >= 0, eps
    return x, gamma, beta, float(eps)


def _row_stat(stat, x):
    """mean or rstd as a flat C-contiguous array, one value per row of x."""
    assert stat.shape in (x.shape[:-1], x.shape[:-1] + (1,)) and stat.dtype == x.dtype, stat.shape
    return np.ascontiguousarray(stat).reshape(x.size // x.shape[-1] if x.shape[-1] else 0)


def _backward_args(dy, x, gamma, mean, rstd):
    assert dy.shape == x.shape and dy.dtype == x.dtype in (np.float32, np.float64), dy.shape
    _assert_affine(gamma, x)
    return dy, x, gamma, _row_stat(mean, x), _row_stat(rstd, x)


# ---------------------------------------------------------------------------------------------
# Numba kernels
# ---------------------------------------------------------------------------------------------

# The per-chunk bodies of the kernels. These stubs only name them: Numba compiles the bodies
# registered with @overload in _numba_kernels (module-level names keep Numba's on-disk cache
# key stable, which closure-held jit helpers would not).

def _layernorm_rows(x, gamma, beta, eps, y, mean, rstd):
    """Layer norm of a block of rows into y, mean, rstd (Numba only)."""
    raise NotImplementedError


def _layernorm_backward_rows(dy, x, gamma, mean, rstd, dx, dgamma, dbeta):
    """dx of a block of rows; adds the block's dgamma and dbeta sums (Numba only)."""
    raise NotImplementedError


@lazy_kernels
def _numba_kernels(numba):
    """Compile-on-first-use Numba kernels; returns a namespace of them."""
    _register_chunk_bodies(numba)
    return _compile_drivers(numba)


def _register_chunk_bodies(numba):
    """Compile the chunk bodies: rows arrive as views indexed from 0, so LLVM can vectorise the
    row loops."""
    from numba.extending import overload

    @overload(_layernorm_rows, jit_options={"fastmath": FASTMATH})
    def _layernorm_rows_typed(x, gamma, beta, eps, y, mean, rstd):
        def layernorm_rows(x, gamma, beta, eps, y, mean, rstd):
            n = x.shape[1]
            size = x.dtype.type(n)
            for r in range(x.shape[0]):
                total = 0.0
                for j in range(n):
                    total += x[r, j]
                mu = x.dtype.type(total / n)
                squares = x.dtype.type(0)
                for j in range(n):
                    d = x[r, j] - mu
                    squares += d * d
                inv_std = x.dtype.type(1.0 / np.sqrt(squares / size + eps))
                mean[r] = mu
                rstd[r] = inv_std
                for j in range(n):
                    y[r, j] = (x[r, j] - mu) * inv_std * gamma[j] + beta[j]
        return layernorm_rows

    @overload(_layernorm_backward_rows, jit_options={"fastmath": FASTMATH})
    def _layernorm_backward_rows_typed(dy, x, gamma, mean, rstd, dx, dgamma, dbeta):
        def layernorm_backward_rows(dy, x, gamma, mean, rstd, dx, dgamma, dbeta):
            n = x.shape[1]
            for r in range(x.shape[0]):
                mu = mean[r]
                inv_std = rstd[r]
                sum_g = x.dtype.type(0)
                sum_g_xhat = x.dtype.type(0)
                for j in range(n):
                    xhat = (x[r, j] - mu) * inv_std
                    g = dy[r, j] * gamma[j]
                    sum_g += g
                    sum_g_xhat += g * xhat
                    dgamma[j] += dy[r, j] * xhat
                    dbeta[j] += dy[r, j]
                mean_g = x.dtype.type(sum_g / n)
                mean_g_xhat = x.dtype.type(sum_g_xhat / n)
                for j in range(n):
                    xhat = (x[r, j] - mu) * inv_std
                    dx[r, j] = inv_std * (dy[r, j] * gamma[j] - mean_g - xhat * mean_g_xhat)
        return layernorm_backward_rows


def _compile_drivers(numba):
    """The two kernels: chunks of rows go to threads (the wrappers keep small inputs on one
    thread, see backend.threads_for)."""
    njit = functools.partial(numba.njit, cache=True)
    prange = numba.prange

    @njit(parallel=True)
    def forward(x, gamma, beta, eps, y, mean, rstd):
        """Fill y, mean, rstd (per row) for 2-D x."""
        step = max(1, CHUNK_ELEMS // x.shape[1])
        n_chunks = (x.shape[0] + step - 1) // step
        for c in prange(n_chunks):
            rows = slice(c * step, (c + 1) * step)
            _layernorm_rows(x[rows], gamma, beta, eps, y[rows], mean[rows], rstd[rows])

    @njit(parallel=True)
    def backward(dy, x, gamma, mean, rstd, dx):
        """Fill dx; return per-chunk partial sums (n_chunks, N) of dgamma and dbeta."""
        step = max(1, CHUNK_ELEMS // x.shape[1])
        n_chunks = (x.shape[0] + step - 1) // step
        dgamma_parts = np.zeros((n_chunks, x.shape[1]), dtype=x.dtype)
        dbeta_parts = np.zeros((n_chunks, x.shape[1]), dtype=x.dtype)
        for c in prange(n_chunks):
            rows = slice(c * step, (c + 1) * step)
            _layernorm_backward_rows(dy[rows], x[rows], gamma, mean[rows], rstd[rows],
                                     dx[rows], dgamma_parts[c], dbeta_parts[c])
        return dgamma_parts, dbeta_parts

    return SimpleNamespace(forward=forward, backward=backward)


# ---------------------------------------------------------------------------------------------
# Numba entry points (the formulas' signatures)
# ---------------------------------------------------------------------------------------------

def layernorm_forward_numba(x, gamma, beta, eps=1e-5):
    """(y, mean, rstd) of layer norm over the last axis (Numba kernel)."""
    x, gamma, beta, eps = _forward_args(x, gamma, beta, eps)
    n = x.shape[-1]
    y = np.empty(x.shape, x.dtype)
    mean = np.empty(x.shape[:-1] + (1,), x.dtype)
    rstd = np.empty(x.shape[:-1] + (1,), x.dtype)
    if x.size:
        gamma = np.ones(n, x.dtype) if gamma is None else np.ascontiguousarray(gamma)
        beta = np.zeros(n, x.dtype) if beta is None else np.ascontiguousarray(beta)
        with threads_for(x.size):
            _numba_kernels().forward(rows_of(x), gamma, beta, eps, y.reshape(-1, n),
                                     mean.reshape(-1), rstd.reshape(-1))
    return y, mean, rstd


def layernorm_backward_numba(dy, x, gamma, mean, rstd):
    """(dx, dgamma, dbeta) of layer norm; dgamma, dbeta are None if gamma is None (Numba)."""
    dy, x, gamma_checked, mean, rstd = _backward_args(dy, x, gamma, mean, rstd)
    n = x.shape[-1]
    dx = np.empty(x.shape, x.dtype)
    if x.size:
        weight = np.ones(n, x.dtype) if gamma_checked is None else np.ascontiguousarray(gamma)
        with threads_for(x.size):
            dgamma_parts, dbeta_parts = _numba_kernels().backward(
                rows_of(dy), rows_of(x), weight, mean, rstd, dx.reshape(-1, n))
    else:
        dgamma_parts = dbeta_parts = np.zeros((0, n), x.dtype)
    if gamma_checked is None:
        return dx, None, None
    dgamma = dgamma_parts.sum(axis=0, dtype=np.float64).astype(x.dtype)
    dbeta = dbeta_parts.sum(axis=0, dtype=np.float64).astype(x.dtype)
    return dx, dgamma, dbeta

