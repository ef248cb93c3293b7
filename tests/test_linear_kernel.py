"""The Numba twin of a Linear (kernels.linear_layer): its forward and backward each one call, on the BLAS the formula's
products use, the same bits as the formula (nn.functional.linear_op); the formula wherever the twin stands aside."""
import numpy as np
import pytest

pytest.importorskip("numba")

from tinygrad_lite import dispatch, fast  # noqa: E402
from tinygrad_lite.kernels import cblas  # noqa: E402
from tinygrad_lite.kernels import linear_layer as linear  # noqa: E402

SHAPES = [((240, 64), 64), ((768, 128), 1000), ((3, 5, 7), 4), ((2, 3), 2), ((64, 512), 128)]


def operands(x_shape, n_out, dtype, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(x_shape).astype(dtype)
    w = rng.standard_normal((n_out, x_shape[-1])).astype(dtype)
    b = rng.standard_normal(n_out).astype(dtype)
    g = rng.standard_normal(x_shape[:-1] + (n_out,)).astype(dtype)
    return x, w, b, g


def engine(x2, w):
    """kernels.linear_layer's choice for these rows and weights (its forward's output allocated as it does)."""
    return linear._engine(x2, w, np.empty((x2.shape[0], w.shape[0]), x2.dtype))


def both(x, w, b, g, needs):
    """(forward, gradients) of the twin and of the formula."""
    formula = dispatch.formula("linear")
    y, backward = linear.linear_op_numba(x, w, b, needs)
    y_ref, backward_ref = formula(x, w, b, needs)
    return (y, backward(g)), (y_ref, backward_ref(g))


def assert_same(ours, theirs):
    (y, grads), (y_ref, grads_ref) = ours, theirs
    assert y.shape == y_ref.shape and np.array_equal(y, y_ref)
    assert len(grads) == len(grads_ref)
    for a, b in zip(grads, grads_ref):
        assert (a is None) == (b is None)
        if a is not None:
            assert a.shape == b.shape and a.dtype == b.dtype and np.array_equal(a, b)


def test_numpy_s_own_blas_is_found():
    found = cblas.numpy_gemms()
    if found is None:
        pytest.skip("NumPy multiplies on a BLAS other than OpenBLAS here")
    addresses, _ = found
    assert set(addresses) == {np.dtype(np.float32), np.dtype(np.float64)} and all(addresses.values())


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("x_shape,n_out", SHAPES)
def test_the_twin_gives_the_formula_s_bits(x_shape, n_out, dtype):
    x, w, b, g = operands(x_shape, n_out, dtype)
    assert engine(x.reshape(-1, x_shape[-1]), w) is not None or cblas.numpy_gemms() is None
    for bias, needs in ((b, (True, True, True)), (None, (True, True)), (b, (False, True, True)),
                        (b, (True, False, False)), (None, (False, True))):
        assert_same(*both(x, w, bias, g, needs))


def test_what_the_twin_leaves_to_the_formula_comes_out_the_same():
    x, w, b, g = operands((1, 16), 8, np.float32)          # one row: NumPy multiplies by ?gemv
    assert engine(x, w) is None
    assert_same(*both(x, w, b, g, (True, True, True)))
    _, w, b, g = operands((40, 16), 8, np.float32)
    x = operands((40, 32), 8, np.float32)[0][:, :16]        # rows not contiguous
    assert engine(x, w) is None
    assert_same(*both(x, w, b, g, (True, True, True)))
    x, w, b, g = operands((40, 16), 8, np.float16)
    assert engine(x, w) is None


def test_a_gradient_that_is_not_contiguous_is_read_as_its_values():
    x, w, b, _ = operands((32, 16), 24, np.float64)
    g = np.asfortranarray(np.random.default_rng(1).standard_normal((32, 24)))
    (y, grads), (y_ref, grads_ref) = both(x, w, b, g, (True, True, True))
    for a, b_ref in zip(grads, grads_ref):
        np.testing.assert_allclose(a, b_ref, rtol=1e-12, atol=1e-12)


def test_the_panel_kernel_s_products_stay_with_the_formula(monkeypatch):
    from tinygrad_lite.kernels import panels
    x, w, b, g = operands((64, 32), 32, np.float32)
    monkeypatch.setattr(panels, "beats_blas", lambda a, b: True)
    with fast.tricks_on("panel_products"):
        assert engine(x, w) is None
        assert_same(*both(x, w, b, g, (True, True, True)))
    with fast.tricks_off("panel_products"):
        assert engine(x, w) is not None or cblas.numpy_gemms() is None


def test_a_linear_layer_runs_its_twin_on_the_numba_backend(monkeypatch):
    from tinygrad_lite import Tensor
    from tinygrad_lite.kernels.backend import use_backend
    from tinygrad_lite.nn.functional import linear as linear_fn
    calls = []
    twin = linear.linear_op_numba
    monkeypatch.setitem(dispatch.TWINS, "linear", lambda *args: calls.append(1) or twin(*args))
    x, w, b, _ = operands((6, 5), 3, np.float64)
    with use_backend("numba"):
        y = linear_fn(Tensor(x, requires_grad=True), Tensor(w, requires_grad=True), Tensor(b, requires_grad=True))
    with use_backend("numpy"):
        y_plain = linear_fn(Tensor(x), Tensor(w), Tensor(b))
    assert calls == [1] and np.array_equal(y.data, y_plain.data)
