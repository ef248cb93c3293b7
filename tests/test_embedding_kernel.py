"""kernels.embedding: the embedding's weight gradient (rows of g summed per id), the Numba kernel
and its NumPy twin against a float64 formula and each other, and F.embedding's gradient on the
selected backend."""
import numpy as np
import pytest

from tinygrad_lite import Tensor, kernels
from tinygrad_lite.kernels import embedding as emb
from tinygrad_lite.nn import functional as F

IMPLS = [emb.embedding_backward_numpy, emb.embedding_backward_numba]
RTOL = {np.float32: 1e-5, np.float64: 1e-12}


def formula(ids, g, num_rows):
    """Each row of g added to its id's row, one at a time, in float64."""
    dw = np.zeros((num_rows, g.shape[1]))
    for i, row in zip(ids, g.astype(np.float64)):
        dw[i] += row
    return dw


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n, num_rows, dim", [(320, 200, 64), (500, 3, 7), (6, 20, 8), (1, 1, 1)])
def test_rows_summed_per_id(impl, dtype, n, num_rows, dim):
    rng = np.random.default_rng(n + dim)
    ids = rng.integers(0, num_rows, n)
    g = rng.standard_normal((n, dim)).astype(dtype)
    dw = impl(ids, g, num_rows)
    assert dw.shape == (num_rows, dim) and dw.dtype == dtype
    expected = formula(ids, g, num_rows)
    np.testing.assert_allclose(dw, expected, rtol=RTOL[dtype], atol=RTOL[dtype] * np.abs(expected).max())
    unused = np.setdiff1d(np.arange(num_rows), ids)
    np.testing.assert_array_equal(dw[unused], 0)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_kernel_and_twin_agree_and_ids_seen_once_are_copied_exactly(dtype):
    rng = np.random.default_rng(3)
    ids = rng.permutation(50)[:30].astype(np.int32)  # no id twice: each row is copied, not summed
    g = rng.standard_normal((30, 5)).astype(dtype)
    a, b = (impl(ids, g, 50) for impl in IMPLS)
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(a[ids], g)
    ids = rng.integers(0, 4, 400)
    g = rng.standard_normal((400, 5)).astype(dtype)
    a, b = (impl(ids, g, 4) for impl in IMPLS)
    np.testing.assert_allclose(a, b, rtol=RTOL[dtype], atol=RTOL[dtype] * np.abs(a).max())


@pytest.mark.parametrize("impl", IMPLS)
def test_no_ids_give_zeros(impl):
    dw = impl(np.zeros(0, np.int64), np.zeros((0, 3), np.float32), 4)
    np.testing.assert_array_equal(dw, np.zeros((4, 3), np.float32))


@pytest.mark.parametrize("backend", ["numba", "numpy"])
def test_functional_embedding_gradient_on_each_backend(backend):
    rng = np.random.default_rng(4)
    weight = Tensor(rng.standard_normal((9, 4)), requires_grad=True)
    ids = rng.integers(0, 9, (5, 7))
    up = rng.standard_normal((5, 7, 4))
    with kernels.use_backend(backend):
        (F.embedding(ids, weight, padding_idx=3) * Tensor(up)).sum().backward()
    expected = formula(ids.reshape(-1), up.reshape(-1, 4), 9)
    expected[3] = 0
    np.testing.assert_allclose(weight.grad, expected, rtol=1e-12, atol=1e-12)
