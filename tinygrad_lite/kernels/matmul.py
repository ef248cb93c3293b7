"""Batched matrix multiply with fused transposes, and its backward.

Every projection in the Transformer (W^Q, W^K, W^V, W^O, the two layers of the feed-forward
net) and both products inside attention, Q K^T and softmax(.) V (the paper's Eq. 1), are
matmuls. ``matmul(a, b, trans_a, trans_b)`` computes op(a) @ op(b) where op swaps the last two
axes when its flag is set, so Q K^T needs no transposed copy of K.

Shapes: a is (..., M, K) (or (..., K, M) with trans_a), b is (..., K, N) (or (..., N, K) with
trans_b); the leading batch dims broadcast as in NumPy. Both inputs need at least 2 dims:
reshape a 1-D vector to (1, K) or (K, 1) first. float32 and float64, one dtype for both.
The operands are trusted; asserts state the preconditions. Tensor.matmul does not call this: matmul's
formula and its backward are in tinygrad_lite/ops/binary.py, and no Numba twin computes a general
product faster. These fused-transpose products serve bench/kernels.py and the kernel tests.

Engine: ``np.matmul`` (OpenBLAS) on both backends: a general Numba matmul kernel measured 2-8x
slower than OpenBLAS at every shape swept (bench/README.md keeps the numbers). Products with a
known shape have their own kernels where those measured faster: attention's per-head products
(kernels.attention_tiles, on kernels.simd) and a Linear's three training products on AVX-512 CPUs
whose OpenBLAS runs 8-float kernels (kernels.panels; the branch is nn.functional._product).
"""
import numpy as np

from ..threads import ensure_num_threads


def _swap_last(x):
    return np.swapaxes(x, -1, -2)


def _blas_matmul(a, b, trans_a, trans_b):
    ensure_num_threads()
    return np.matmul(_swap_last(a) if trans_a else a, _swap_last(b) if trans_b else b)


def matmul(a, b, trans_a=False, trans_b=False):
    """op(a) @ op(b) over the last two axes with broadcast batch dims (np.matmul, both backends).

    op(x) swaps x's last two axes when its trans flag is set (read in place, not copied).
    np.matmul raises if inner or batch dims don't match.
    """
    assert a.dtype == b.dtype and a.ndim >= 2 and b.ndim >= 2, (a.dtype, b.dtype, a.shape, b.shape)
    return _blas_matmul(a, b, trans_a, trans_b)


def matmul_backward(a, b, dc, trans_a=False, trans_b=False):
    """(da, db) for c = matmul(a, b, trans_a, trans_b), given dc = dLoss/dc.

    For c = A @ B: dA = dc @ B^T and dB = A^T @ dc; with transposed operands the same
    products come out transposed, which the trans flags absorb (no copies). Gradients of
    broadcast batch dims are summed back, so da has a's shape and db has b's shape.
    """
    from ..ops.binary import unbroadcast  # here, not on top: kernels load while the ops are importing
    assert dc.dtype == a.dtype == b.dtype and dc.ndim >= 2, (dc.dtype, a.dtype, b.dtype, dc.shape)
    if trans_a:
        da = _blas_matmul(b, dc, trans_b, True)
    else:
        da = _blas_matmul(dc, b, False, not trans_b)
    if trans_b:
        db = _blas_matmul(dc, a, True, trans_a)
    else:
        db = _blas_matmul(a, dc, not trans_a, False)
    return unbroadcast(da, a.shape), unbroadcast(db, b.shape)
