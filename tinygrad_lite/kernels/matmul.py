"""Batched matrix multiply with fused transposes, and its backward.

Every projection in the Transformer (W^Q, W^K, W^V, W^O, the two layers of the feed-forward
net) and both products inside attention, Q K^T and softmax(.) V (the paper's Eq. 1), are
matmuls. ``matmul(a, b, trans_a, trans_b)`` computes op(a) @ op(b) where op swaps the last two
axes when its flag is set, so Q K^T needs no transposed copy of K.

Shapes: a is (..., M, K) (or (..., K, M) with trans_a), b is (..., K, N) (or (..., N, K) with
trans_b); the leading batch dims broadcast as in NumPy. Both inputs need at least 2 dims:
reshape a 1-D vector to (1, K) or (K, 1) first. float32 and float64, one dtype for both.

Engines: ``matmul_numpy`` is ``np.matmul`` (OpenBLAS); ``matmul_numba`` is a Numba kernel that
reads transposed operands in place. With the 'numba' backend, :func:`matmul_engine` decides
which engine runs, from crossovers measured by ``bench/kernels.py`` (see bench/README.md).
"""
import functools
import math
from types import SimpleNamespace

import numpy as np

from .backend import FASTMATH, lazy_kernels, threads_for, unbroadcast, use_numba

# Largest product (multiply-adds per matrix, m*k*n) that matmul_engine sends to the Numba
# kernel. Measured on the reference machine (bench/README.md): OpenBLAS's small-matrix path
# won at every shape swept, from 1x1x1 up, so no product goes to Numba by default.
NUMBA_MAX_MULADDS = 0


# ---------------------------------------------------------------------------------------------
# Argument checks shared by both engines
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
# NumPy engine
# ---------------------------------------------------------------------------------------------

def _blas_matmul(a, b, trans_a, trans_b):
    return np.matmul(_swap_last(a) if trans_a else a, _swap_last(b) if trans_b else b)


def matmul_numpy(a, b, trans_a=False, trans_b=False):
    """op(a) @ op(b) with np.matmul (BLAS); transposes are views, never copies."""
    a, b, *_ = _check_operands("matmul", a, b, trans_a, trans_b)
    return _blas_matmul(a, b, trans_a, trans_b)


# ---------------------------------------------------------------------------------------------
# Numba engine
# ---------------------------------------------------------------------------------------------

def _matmul_row(a, a_index, trans_a, b, b_index, trans_b, c_row, i):
    """c_row = row i of op(a[a_index]) @ op(b[b_index]); body compiled by Numba only.

    A module-level stub (typed with @overload below) rather than a closure-held jit function,
    which would make Numba's on-disk cache key change from run to run.
    """
    raise NotImplementedError


@lazy_kernels
def _numba_kernels(numba):
    """Compile-on-first-use Numba kernel; returns a namespace holding it."""
    from numba.extending import overload

    njit = functools.partial(numba.njit, cache=True)
    prange = numba.prange

    # Loop orders keep the innermost loop on contiguous memory: with b untransposed, a row of
    # C is a sum of rows of b (k outer, j inner); with b transposed, each C[i, j] is a dot
    # product of two rows.
    @overload(_matmul_row, jit_options={"fastmath": FASTMATH})
    def _matmul_row_typed(a, a_index, trans_a, b, b_index, trans_b, c_row, i):
        def matmul_row(a, a_index, trans_a, b, b_index, trans_b, c_row, i):
            a_p, b_p = a[a_index], b[b_index]
            if trans_b:
                for j in range(c_row.size):
                    b_row = b_p[j]
                    total = c_row.dtype.type(0)
                    if trans_a:
                        for k in range(b_row.size):
                            total += a_p[k, i] * b_row[k]
                    else:
                        a_row = a_p[i]
                        for k in range(b_row.size):
                            total += a_row[k] * b_row[k]
                    c_row[j] = total
            else:
                c_row[:] = 0
                for k in range(b_p.shape[0]):
                    a_ik = a_p[k, i] if trans_a else a_p[i, k]
                    b_row = b_p[k]
                    for j in range(c_row.size):
                        c_row[j] += a_ik * b_row[j]
        return matmul_row

    @njit(parallel=True)
    def matmul(a, a_of, trans_a, b, b_of, trans_b, out):
        """out[p] = op(a[a_of[p]]) @ op(b[b_of[p]]) for each product p; one task per C row."""
        n_products, m, _ = out.shape
        for task in prange(n_products * m):
            p, i = task // m, task % m
            _matmul_row(a, a_of[p], trans_a, b, b_of[p], trans_b, out[p, i], i)

    return SimpleNamespace(matmul=matmul)


def _stored(x, trans):
    """(C-contiguous stack of matrices holding x's data, flag whether to read it transposed).

    A transposed view (Fortran order in its last two dims) is read in place by flipping the
    flag; any other non-contiguous layout is copied once.
    """
    item, rows = x.itemsize, x.shape[-2]
    if x.strides[-2] == item and x.strides[-1] == rows * item and not x.flags.c_contiguous:
        x, trans = _swap_last(x), not trans
    stack = np.ascontiguousarray(x).reshape((-1,) + x.shape[-2:])
    if not stack.flags.writeable:
        stack = stack.copy()
    return stack, trans


def _batch_index(batch_dims, batch_shape):
    """For each product in batch_shape, the index of the matrix an operand contributes."""
    numbering = np.arange(math.prod(batch_dims), dtype=np.int64)
    if tuple(batch_dims) == tuple(batch_shape):
        return numbering
    padded = (1,) * (len(batch_shape) - len(batch_dims)) + tuple(batch_dims)
    return np.array(np.broadcast_to(numbering.reshape(padded), batch_shape)).reshape(-1)


def matmul_numba(a, b, trans_a=False, trans_b=False):
    """op(a) @ op(b) with the Numba kernel (no BLAS); same contract as matmul_numpy."""
    a, b, batch_shape, m, k, n = _check_operands("matmul", a, b, trans_a, trans_b)
    out = np.empty(batch_shape + (m, n), a.dtype)
    if out.size == 0:
        return out
    if k == 0:
        out[...] = 0
        return out
    if trans_a and trans_b:
        # op(a) @ op(b) = (b @ a)^T: both operands then stream along contiguous rows.
        return np.ascontiguousarray(_swap_last(matmul_numba(b, a)))
    a_stack, trans_a = _stored(a, trans_a)
    b_stack, trans_b = _stored(b, trans_b)
    with threads_for(out.size * k):
        _numba_kernels().matmul(a_stack, _batch_index(a.shape[:-2], batch_shape), trans_a,
                                b_stack, _batch_index(b.shape[:-2], batch_shape), trans_b,
                                out.reshape(-1, m, n))
    return out


# ---------------------------------------------------------------------------------------------
# Dispatch and backward
# ---------------------------------------------------------------------------------------------

def matmul_engine(n_products, m, k, n):
    """'numba' or 'blas': which engine the numba backend uses for n_products (m,k)@(k,n).

    The rule is one threshold, NUMBA_MAX_MULADDS on m*k*n, set from the crossover measured by
    ``python bench/kernels.py`` (recorded in bench/README.md). Below it the Numba kernel's lower
    call overhead wins; above it BLAS's register-blocked AVX-512 micro-kernels win.
    """
    return "numba" if n_products and m * k * n <= NUMBA_MAX_MULADDS else "blas"


def matmul(a, b, trans_a=False, trans_b=False):
    """op(a) @ op(b) over the last two axes with broadcast batch dims, on the selected backend.

    op(x) swaps x's last two axes when its trans flag is set (read in place, not copied).
    Raises ValueError naming the shapes when inner or batch dims don't match.
    """
    a, b, batch_shape, m, k, n = _check_operands("matmul", a, b, trans_a, trans_b)
    if use_numba() and matmul_engine(math.prod(batch_shape), m, k, n) == "numba":
        return matmul_numba(a, b, trans_a, trans_b)
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
        da = matmul(b, dc, trans_a=trans_b, trans_b=True)
    else:
        da = matmul(dc, b, trans_a=False, trans_b=not trans_b)
    if trans_b:
        db = matmul(dc, a, trans_a=True, trans_b=trans_a)
    else:
        db = matmul(a, dc, trans_a=not trans_a, trans_b=False)
    return unbroadcast(da, a.shape), unbroadcast(db, b.shape)
