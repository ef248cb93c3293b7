"""The embedding's weight gradient (rows of g summed per id): its formula (nn.functional.
embedding_backward) and its Numba twin (kernels.embedding) against a float64 loop and each other, and
F.embedding's gradient on each backend."""
import numpy as np
import pytest

from tinygrad_lite import Tensor, dispatch, kernels
from tinygrad_lite.kernels import embedding as emb
from tinygrad_lite.nn import functional as F

IMPLS = [dispatch.formula("embedding_backward"), emb.embedding_backward_numba]
RTOL = {np.float32: 1e-5, np.float64: 1e-12}


def float64_loop(ids, g, num_rows):
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
    expected = float64_loop(ids, g, num_rows)
    np.testing.assert_allclose(dw, expected, rtol=RTOL[dtype], atol=RTOL[dtype] * np.abs(expected).max())
    unused = np.setdiff1d(np.arange(num_rows), ids)
    np.testing.assert_array_equal(dw[unused], 0)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_twin_equals_the_formula_bit_for_bit_and_ids_seen_once_are_copied_exactly(dtype):
    """Both add the rows of g into their ids' rows in the order of the ids, so every sum rounds alike."""
    rng = np.random.default_rng(3)
    ids = rng.permutation(50)[:30].astype(np.int32)  # no id twice: each row is copied, not summed
    g = rng.standard_normal((30, 5)).astype(dtype)
    a, b = (impl(ids, g, 50) for impl in IMPLS)
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(a[ids], g)
    ids = rng.integers(0, 4, 400)
    g = rng.standard_normal((400, 5)).astype(dtype)
    a, b = (impl(ids, g, 4) for impl in IMPLS)
    np.testing.assert_array_equal(a, b)


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
    expected = float64_loop(ids.reshape(-1), up.reshape(-1, 4), 9)
    expected[3] = 0
    np.testing.assert_allclose(weight.grad, expected, rtol=1e-12, atol=1e-12)


def test_numba_runs_the_registered_twin_and_numpy_the_formula_with_repeated_ids():
    ids, g = np.array([2, 0, 2]), np.arange(6, dtype=np.float64).reshape(3, 2)
    with kernels.use_backend("numba"):
        assert dispatch.TWINS["embedding_backward"] is emb.embedding_backward_numba
    with kernels.use_backend("numpy"):
        np.testing.assert_array_equal(F.embedding_backward(ids, g, 3), [[2, 3], [0, 0], [4, 6]])
