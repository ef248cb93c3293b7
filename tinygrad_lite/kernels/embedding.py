"""The gradient of an embedding lookup: the rows of g summed per id.

out = weight[ids] picks one row per id, so the weight's gradient is, for every row r of the
table, the sum of the gradient rows g[i] with ids[i] == r (zero for ids that do not occur):

    embedding_backward(ids, g, num_rows) -> dw        ids (n,) ints in [0, num_rows), g (n, dim)

The NumPy twin sorts the ids and sums each run of equal ids with one `np.add.reduceat` (3x
faster than np.add.at, which handles repeated ids one element at a time); the Numba kernel adds
each row into its id's row in the order of the ids, one pass. Both sum the same rows; the order
of the additions differs (reduceat's own grouping), so they agree to rounding
(tests/test_embedding_kernel.py). nn.functional.embedding checks the ids; the kernels trust them.
"""
import numpy as np

from .backend import lazy_kernels, use_numba


def embedding_backward_numpy(ids, g, num_rows):
    """dw (num_rows, dim): the rows of g summed per id (NumPy twin)."""
    order = np.argsort(ids, kind="stable")
    sorted_ids = ids[order]
    dw = np.zeros((num_rows, g.shape[1]), g.dtype)
    if sorted_ids.size:
        starts = np.flatnonzero(np.concatenate(([True], sorted_ids[1:] != sorted_ids[:-1])))
        dw[sorted_ids[starts]] = np.add.reduceat(g[order], starts, axis=0)
    return dw


@lazy_kernels
def _numba_kernels(numba):
    """Compile-on-first-use kernel; one thread (two rows with one id would race)."""

    @numba.njit(cache=True)
    def scatter_add_rows(ids, g, dw):
        for i in range(ids.size):
            row = dw[ids[i]]
            for j in range(g.shape[1]):
                row[j] += g[i, j]

    return scatter_add_rows


def embedding_backward_numba(ids, g, num_rows):
    """dw (num_rows, dim): the rows of g summed per id (Numba kernel)."""
    assert ids.ndim == 1 and g.ndim == 2 and g.shape[0] == ids.size, (ids.shape, g.shape)
    dw = np.zeros((num_rows, g.shape[1]), g.dtype)
    if ids.size:
        _numba_kernels()(ids, np.ascontiguousarray(g), dw)
    return dw


def embedding_backward(ids, g, num_rows):
    """The rows of g (n, dim) summed per id of ids (n,), as a (num_rows, dim) array, on the
    selected backend."""
    impl = embedding_backward_numba if use_numba() else embedding_backward_numpy
    return impl(ids, g, num_rows)
