"""Batched matrix multiply with fused transposes, and its backward.

Every projection in the Transformer (W^Q, W^K, W^V, W^O, the two layers of the feed-forward
net) and both products inside attention, Q K^T and softmax(.) V (the paper's Eq. 1), are
matmuls. ``matmul(a, b, trans_a, trans_b)`` computes op(a) @ op(b) where op swaps the last two
axes when its flag is set, so Q K^T needs no transposed copy of K.

Shapes: a is (..., M, K) (or (..., K, M) with trans_a), b is (..., K, N) (or (..., N, K) with
trans_b); the leading batch dims broadcast as in NumPy. Both inputs need at least 2 dims:
reshape a 1-D vector to (1, K) or (K, 1) first. float32 and float64, one dtype for both.

Engine: ``np.matmul`` (OpenBLAS) on both backends. A Numba matmul kernel was measured 2-8x
slower than OpenBLAS at every shape swept and was removed; bench/README.md keeps the numbers.
"""
import numpy as np

from .backend import unbroadcast

# ---------------------------------------------------------------------------------------------
# Argument checks
# ---------------------------------------------------------------------------------------------

def _describe(name, arr, trans):
    return f"{name} {arr.shape}" + (" transposed" if trans else "")


def _check_operands(op, a, b, trans_a, trans_b):
    """(a, b, batch_shape, m, k, n) for op(a) @ op(b), or a ValueError/TypeError naming op."""
    a, b = np.asarray(a), np.asarray(b)
    for name, arr in (("a", a), ("b", b)):
        if arr.dtype not in (np.float32, np.float64):
            raise TypeError(f"{op}: {name} must be a float32 or float64 array, got dtype "
                            f"{arr.dtype}")
        if arr.ndim < 2:
            raise ValueError(f"{op}: {name} must have at least 2 dims, got shape {arr.shape}; "
                             f"reshape a 1-D vector to (1, K) or (K, 1) first")
    if a.dtype != b.dtype:
        raise TypeError(f"{op}: a is {a.dtype} but b is {b.dtype}; pass both in one dtype")
    m, k = a.shape[-2:][::-1] if trans_a else a.shape[-2:]
    k_b, n = b.shape[-2:][::-1] if trans_b else b.shape[-2:]
    if k != k_b:
        raise ValueError(f"{op}: inner dims don't match: {_describe('a', a, trans_a)} @ "
                         f"{_describe('b', b, trans_b)} ({k} vs {k_b})")
    try:
        batch_shape = (a.shape[:-2] if a.shape[:-2] == b.shape[:-2]
                       else np.broadcast_shapes(a.shape[:-2], b.shape[:-2]))
    except ValueError:
        raise ValueError(f"{op}: batch dims don't broadcast: a {a.shape} @ b {b.shape} "
                         f"(batch {a.shape[:-2]} vs {b.shape[:-2]})") from None
    return a, b, batch_shape, m, k, n


def _swap_last(x):
    return np.swapaxes(x, -1, -2)


# ---------------------------------------------------------------------------------------------
# The product and its backward
# ---------------------------------------------------------------------------------------------

def _blas_matmul(a, b, trans_a, trans_b):
    return np.matmul(_swap_last(a) if trans_a else a, _swap_last(b) if trans_b else b)


def matmul(a, b, trans_a=False, trans_b=False):
    """op(a) @ op(b) over the last two axes with broadcast batch dims (np.matmul, both backends).

    op(x) swaps x's last two axes when its trans flag is set (read in place, not copied).
    Raises ValueError naming the shapes when inner or batch dims don't match.
    """
    a, b, *_ = _check_operands("matmul", a, b, trans_a, trans_b)
    return _blas_matmul(a, b, trans_a, trans_b)


def matmul_backward(a, b, dc, trans_a=False, trans_b=False):
    """(da, db) for c = matmul(a, b, trans_a, trans_b), given dc = dLoss/dc.

    For c = A @ B: dA = dc @ B^T and dB = A^T @ dc; with transposed operands the same
    products come out transposed, which the trans flags absorb (no copies). Gradients of
    broadcast batch dims are summed back, so da has a's shape and db has b's shape.
    """
    op = "matmul_backward"
    a, b, batch_shape, m, _, n = _check_operands(op, a, b, trans_a, trans_b)
    dc = np.asarray(dc)
    if dc.shape != batch_shape + (m, n):
        raise ValueError(f"{op}: dc has shape {dc.shape}, expected {batch_shape + (m, n)} "
                         f"(the shape of matmul(a {a.shape}, b {b.shape}))")
    if dc.dtype != a.dtype:
        raise TypeError(f"{op}: dc is {dc.dtype} but a and b are {a.dtype}")
    if trans_a:
        da = _blas_matmul(b, dc, trans_b, True)
    else:
        da = _blas_matmul(dc, b, False, not trans_b)
    if trans_b:
        db = _blas_matmul(dc, a, True, trans_a)
    else:
        db = _blas_matmul(a, dc, not trans_a, False)
    return unbroadcast(da, a.shape), unbroadcast(db, b.shape)
