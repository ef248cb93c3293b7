"""kernels.gelu: the Numba kernels against the op's NumPy formulas (ops/unary.py), value and slope, exact and
tanh GELU, float32 and float64, odd sizes, extreme values, NaN and inf; the float32 erf against SciPy's;
Tensor.gelu gradchecked in float64 on both backends and against PyTorch."""
import math

import numpy as np
import pytest

from tinygrad_lite import Tensor, dispatch, gradcheck, kernels, no_grad
from tinygrad_lite.kernels import gelu as kg

gelu_forward_formula, gelu_and_slope_formula = dispatch.formula("gelu_forward"), dispatch.formula("gelu_and_slope")

APPROXIMATIONS = ["none", "tanh"]
DTYPES = [np.float32, np.float64]
SHAPES = [(), (1,), (7,), (3, 5, 7), (1001,), (96, 130)]
RTOL = {np.float32: 2e-6, np.float64: 1e-13}


def assert_close(actual, expected, dtype):
    """Equal to the dtype's rounding, measured against the array's largest finite magnitude."""
    assert actual.dtype == expected.dtype == dtype and actual.shape == expected.shape
    finite = np.abs(expected[np.isfinite(expected)])
    scale = max(finite.max() if finite.size else 1.0, 1.0)
    np.testing.assert_allclose(actual, expected, rtol=4 * RTOL[dtype], atol=RTOL[dtype] * scale)


def inputs(shape, dtype, seed=0):
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal(shape) * 3).astype(dtype)
    return x, rng.standard_normal(shape).astype(dtype)


@pytest.mark.parametrize("approximate", APPROXIMATIONS)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES)
def test_kernel_matches_its_twin(shape, dtype, approximate):
    x, _ = inputs(shape, dtype)
    y, slope = kg.gelu_and_slope_numba(x, approximate)
    y_twin, slope_twin = gelu_and_slope_formula(x, approximate)
    assert_close(y, y_twin, dtype)
    assert_close(slope, slope_twin, dtype)
    assert_close(kg.gelu_forward_numba(x, approximate), y_twin, dtype)
    np.testing.assert_array_equal(gelu_forward_formula(x, approximate), y_twin)


@pytest.mark.parametrize("approximate", APPROXIMATIONS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_extreme_values_nan_and_inf(dtype, approximate):
    x = np.array([-50, -20, -9, -4.5, -1e-30, 0, 1e-30, 4.5, 9, 20, 50, np.nan, np.inf, -np.inf], dtype)
    (y, dx), (y_twin, dx_twin) = kg.gelu_and_slope_numba(x, approximate), gelu_and_slope_formula(x, approximate)
    finite = np.isfinite(x)
    assert_close(y[finite], y_twin[finite], dtype)
    assert_close(dx[finite], dx_twin[finite], dtype)
    np.testing.assert_array_equal(y[~finite], y_twin[~finite])  # NaN, inf, and -inf·0 = NaN, as the formula
    assert np.isnan(dx[np.isnan(x)]).all()
    far = finite & (np.abs(x) >= 9)  # GELU is x or 0 there, to the dtype's precision
    np.testing.assert_allclose(y[far], np.where(x > 0, x, 0)[far], rtol=RTOL[dtype], atol=1e-20)


@pytest.mark.parametrize("dtype", DTYPES)
def test_nan_stays_in_its_place(dtype):
    x, _ = inputs((40,), dtype)
    x[[0, 17, 39]] = np.nan
    for approximate in APPROXIMATIONS:
        for out in (kg.gelu_forward_numba(x, approximate), *kg.gelu_and_slope_numba(x, approximate)):
            np.testing.assert_array_equal(np.isnan(out), np.isnan(x))


def test_float32_exact_gelu_is_within_a_few_ulps():
    """The float32 kernel's x·Φ(x) (Eigen's erf) against float64 SciPy: within 4 ulps of max(|x|, 1), as
    PyTorch's float32 GELU (2 ulps here; x·½(1 + erf) loses digits near erf = -1 in any float32 code)."""
    from scipy.special import erf
    x = np.linspace(-7, 7, 200_001).astype(np.float32)
    exact = x.astype(np.float64) * 0.5 * (1 + erf(x.astype(np.float64) / math.sqrt(2)))
    error = np.abs(kg.gelu_forward_numba(x, "none") - exact)
    assert (error <= 4 * np.spacing(np.maximum(np.abs(x), np.float32(1)))).all()


@pytest.mark.parametrize("approximate", APPROXIMATIONS)
def test_non_contiguous_and_integer_inputs(approximate):
    x, _ = inputs((6, 9), np.float32)
    for y, y_twin in zip(kg.gelu_and_slope_numba(x.T, approximate), gelu_and_slope_formula(x.T, approximate)):
        assert_close(y, y_twin, np.float32)
    assert_close(kg.gelu_forward_numba(x.T, approximate), gelu_forward_formula(x.T, approximate), np.float32)
    ints = np.arange(-3, 4)                # the formula's NumPy rules: no kernel for integers
    np.testing.assert_array_equal(kg.gelu_forward_numba(ints, approximate), gelu_forward_formula(ints, approximate))


def test_no_slope_without_a_gradient():
    x = Tensor(np.linspace(-3, 3, 12).astype(np.float32))
    assert x.gelu("tanh")._backward is None
    with no_grad():
        assert Tensor(x.data, requires_grad=True).gelu()._backward is None


@pytest.mark.parametrize("backend_name", ["numba", "numpy"])
@pytest.mark.parametrize("approximate", APPROXIMATIONS)
def test_tensor_gelu_gradchecks_in_float64(backend_name, approximate):
    x = Tensor(np.linspace(-5, 5, 23).reshape(23, 1) + np.linspace(0, 0.4, 3), requires_grad=True)
    with kernels.use_backend(backend_name):
        assert gradcheck(lambda t: t.gelu(approximate), x)


@pytest.mark.parametrize("approximate", APPROXIMATIONS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_both_backends_match_torch(dtype, approximate):
    torch = pytest.importorskip("torch")
    x, g = inputs((5, 33), dtype, seed=3)
    theirs = torch.tensor(x, requires_grad=True)
    torch.nn.functional.gelu(theirs, approximate=approximate).backward(torch.tensor(g))
    expected = torch.nn.functional.gelu(torch.tensor(x), approximate=approximate).numpy()
    for backend_name in ("numba", "numpy"):
        with kernels.use_backend(backend_name):
            ours = Tensor(x, requires_grad=True)
            y = ours.gelu(approximate)
            y.backward(g)
        assert_close(y.data, expected, dtype)
        assert_close(ours.grad, theirs.grad.numpy(), dtype)
