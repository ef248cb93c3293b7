"""The Numba twin of an embedding's gradient: the rows of g summed per id.

The formula is the op's own, nn.functional.embedding_backward (np.add.at: each g[i] added into row
ids[i], in the order of the ids); kernels.TWINS registers embedding_backward_numba below, which the
numba backend runs instead (tinygrad_lite.dispatch). It adds the rows in the same order, one pass,
so the two agree bit for bit (tests/test_embedding_kernel.py). nn.functional.embedding checks the
ids; the kernel trusts them.
"""
import numpy as np

from .backend import lazy_kernels


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

