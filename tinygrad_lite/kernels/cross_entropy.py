"""The gradient of label-smoothed cross-entropy w.r.t. the logits, in one pass.

With p = softmax(x) = exp(log_softmax(x)) and q the smoothed target distribution of a row (ε/C on
every class, 1 − ε more on the target; it sums to 1), the row's gradient is

    dx = w · (p − q) = w · (exp(logp) − ε/C),  minus w · (1 − ε) at the target,

w being the row's weight (0 for an ignored target, 1/count for a mean). The formula is
nn.functional.cross_entropy_backward; this is its Numba twin, registered in kernels.TWINS and run
by the numba backend (tinygrad_lite.dispatch). Rows that are all -inf (p sums to 0) get a zero
gradient, as log_softmax's backward gives them.

    cross_entropy_backward_numba(logp, targets, weight, eps) -> dx

logp (rows, C) float32/float64, C-contiguous; targets (rows,) integer classes (any class where
w = 0); weight (rows,) in logp's dtype; eps the label smoothing. Equal to the formula to rounding:
tests/test_cross_entropy_gradient.py.
"""
import numpy as np

from . import softmax as _softmax
from .backend import FASTMATH, lazy_kernels, threads_for


@lazy_kernels
def _numba_kernels(numba):
    """The Numba kernel: rows in chunks of about softmax.CHUNK_ELEMS elements, one flat exp pass
    per chunk (the softmax kernels' vectorised exp), then each row scaled."""
    _softmax._numba_kernels()  # registers simd_exp and _chunking
    simd_exp, _chunking = _softmax.simd_exp, _softmax._chunking

    @numba.njit(cache=True, parallel=True, fastmath=FASTMATH)
    def backward(logp, targets, weight, smooth, hit, dx):
        n_rows, n = logp.shape
        step, n_chunks = _chunking(n_rows, n)
        for chunk in numba.prange(n_chunks):
            start, stop = chunk * step, min((chunk + 1) * step, n_rows)
            flat_y, flat_dx = logp[start:stop].reshape((stop - start) * n), dx[start:stop].reshape((stop - start) * n)
            for i in range(flat_y.size):
                flat_dx[i] = simd_exp(flat_y[i])
            for r in range(start, stop):
                w = weight[r]
                total = dx.dtype.type(0)
                for j in range(n):
                    total += dx[r, j]
                if total == 0 or w == 0:
                    for j in range(n):
                        dx[r, j] = 0
                else:
                    for j in range(n):
                        dx[r, j] = w * (dx[r, j] - smooth)
                    dx[r, targets[r]] -= w * hit

    return backward


def cross_entropy_backward_numba(logp, targets, weight, eps):
    """dx = w · (exp(logp) − q) (Numba kernel)."""
    assert logp.ndim == 2 and logp.flags.c_contiguous and weight.dtype == logp.dtype, (logp.shape, weight.dtype)
    assert targets.shape == weight.shape == logp.shape[:1], (targets.shape, weight.shape)
    dx = np.empty(logp.shape, logp.dtype)
    if dx.size:
        dtype = logp.dtype.type
        with threads_for(dx.size):
            _numba_kernels()(logp, targets, weight, dtype(eps / logp.shape[1]), dtype(1.0 - eps), dx)
    return dx

