"""Kernels: each Numba kernel against its op's NumPy formula (in the op's file, tinygrad_lite/ops), both
against direct NumPy formulas (in float64), backward kernels against central finite differences, edge
cases (huge logits, fully masked rows, NaN, constant rows), PyTorch parity, backend selection and lazy
numba import."""
import importlib
import inspect
import subprocess
import sys
import warnings
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tinygrad_lite import Tensor, dispatch, kernels
from tinygrad_lite.gradcheck import numerical_gradient
from tinygrad_lite.kernels import backend
from tinygrad_lite.kernels import layernorm as ln
from tinygrad_lite.kernels import softmax as sm

FORMULA = SimpleNamespace(**{name: dispatch.formula(name) for name in kernels.TWINS})  # the ops' formulas
RTOL = {np.float32: 1e-5, np.float64: 1e-12}
DTYPES = [np.float32, np.float64]
ROW_SHAPES = [(1, 1), (1, 5000), (7, 1), (3, 7, 5), (2, 3, 4, 6), (64, 16)]


def assert_close(actual, expected, dtype):
    """Equal up to the dtype's rtol, measured against the array's own magnitude near zero."""
    rtol = RTOL[dtype]
    finite = np.abs(expected[np.isfinite(expected)])
    scale = finite.max() if finite.size else 1.0
    np.testing.assert_allclose(actual, expected, rtol=rtol, atol=rtol * max(scale, 1e-30))


def randn(rng, shape, dtype):
    return rng.standard_normal(shape).astype(dtype)


@pytest.fixture
def rng(request):
    return np.random.default_rng(abs(hash(request.node.name)) % 2**32)


# --------------------------------------------------------------- direct formulas (float64)

def softmax_formula(z):
    e = np.exp(z - z.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def layernorm_formula(x, gamma, beta, eps=1e-5):
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * gamma + beta


# --------------------------------------------------------------- softmax family: twins agree

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", ROW_SHAPES)
def test_softmax_forward_twins_and_formula(rng, shape, dtype):
    x = randn(rng, shape, dtype) * 3
    expected = softmax_formula(x.astype(np.float64) * 0.5)
    for impl in (sm.softmax_forward_numba, FORMULA.softmax_forward):
        y = impl(x, scale=0.5)
        assert y.dtype == dtype and y.shape == shape
        assert_close(y, expected, dtype)
    assert_close(sm.softmax_forward_numba(x, 0.5), FORMULA.softmax_forward(x, 0.5), dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", ROW_SHAPES)
def test_softmax_backward_twins_and_formula(rng, shape, dtype):
    y = FORMULA.softmax_forward(randn(rng, shape, dtype))
    dy = randn(rng, shape, dtype)
    y64, dy64 = y.astype(np.float64), dy.astype(np.float64)
    expected = 2.0 * y64 * (dy64 - (dy64 * y64).sum(-1, keepdims=True))
    for impl in (sm.softmax_backward_numba, FORMULA.softmax_backward):
        dx = impl(y, dy, scale=2.0)
        assert dx.dtype == dtype
        assert_close(dx, expected, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", ROW_SHAPES)
def test_log_softmax_twins_and_formula(rng, shape, dtype):
    x = randn(rng, shape, dtype) * 3
    x64 = x.astype(np.float64)
    expected = np.log(softmax_formula(x64))
    dy = randn(rng, shape, dtype)
    dy64 = dy.astype(np.float64)
    expected_dx = dy64 - np.exp(expected) * dy64.sum(-1, keepdims=True)
    for forward, back in ((sm.log_softmax_forward_numba, sm.log_softmax_backward_numba),
                          (FORMULA.log_softmax_forward, FORMULA.log_softmax_backward)):
        y = forward(x)
        assert y.dtype == dtype
        assert_close(y, expected, dtype)
        assert_close(back(y, dy), expected_dx, dtype)


@pytest.mark.parametrize("impl", [sm.softmax_forward_numba, FORMULA.softmax_forward])
@pytest.mark.parametrize("scale", [-0.5, 0.0, 3.0])
def test_softmax_scale_of_any_sign(rng, impl, scale):
    x = randn(rng, (4, 9), np.float64)
    keep = rng.random((4, 9)) < 0.7
    keep[:, 0] = True
    assert_close(impl(x, scale), softmax_formula(x * scale), np.float64)
    assert_close(impl(x, scale, keep), softmax_formula(np.where(keep, x * scale, -np.inf)),
                 np.float64)


@pytest.mark.parametrize("impl", [sm.softmax_forward_numba, FORMULA.softmax_forward])
def test_softmax_non_contiguous_inputs(rng, impl):
    base = randn(rng, (6, 10, 8), np.float64)
    for view in (base.transpose(0, 2, 1), base[:, ::2, 1:7], base[::-1]):
        assert not view.flags.c_contiguous
        assert_close(impl(view), softmax_formula(view), np.float64)


# --------------------------------------------------------------- softmax: masks

@pytest.mark.parametrize("impl", [sm.softmax_forward_numba, FORMULA.softmax_forward])
def test_causal_mask_bool_and_additive_agree(rng, impl):
    x = randn(rng, (2, 3, 5, 5), np.float64)
    keep = np.tril(np.ones((5, 5), dtype=bool))
    additive = np.where(keep, 0.0, -np.inf)
    by_bool, by_add = impl(x, 0.5, keep), impl(x, 0.5, additive)
    np.testing.assert_array_equal(by_bool, by_add)
    assert np.all(by_bool[..., ~keep] == 0)
    assert_close(by_bool, softmax_formula(np.where(keep, x * 0.5, -np.inf)), np.float64)


@pytest.mark.parametrize("impl", [sm.softmax_forward_numba, FORMULA.softmax_forward])
def test_padding_mask_broadcasts_over_heads_and_queries(rng, impl):
    x = randn(rng, (2, 3, 4, 6), np.float32)
    lengths = np.array([6, 2])
    keep = (np.arange(6)[None, :] < lengths[:, None])[:, None, None, :]  # (B, 1, 1, T)
    y = impl(x, 1.0, keep)
    assert np.all(y[1, ..., 2:] == 0)
    assert_close(y.sum(-1), np.ones((2, 3, 4)), np.float32)
    assert_close(y, softmax_formula(np.where(keep, x.astype(np.float64), -np.inf)), np.float32)


@pytest.mark.parametrize("impl", [sm.softmax_forward_numba, FORMULA.softmax_forward])
def test_finite_additive_mask_is_added_to_scaled_logits(rng, impl):
    x, bias = randn(rng, (4, 7), np.float64), randn(rng, (7,), np.float64)
    assert_close(impl(x, 0.25, bias), softmax_formula(x * 0.25 + bias), np.float64)


@pytest.mark.parametrize("impl", [sm.softmax_forward_numba, FORMULA.softmax_forward])
@pytest.mark.parametrize("dtype", DTYPES)
def test_fully_masked_row_is_zero_without_nan(rng, impl, dtype):
    x = randn(rng, (3, 5), dtype)
    keep = np.ones((3, 5), dtype=bool)
    keep[1] = False
    y = impl(x, 1.0, keep)
    assert not np.isnan(y).any()
    np.testing.assert_array_equal(y[1], 0)
    assert_close(y[[0, 2]].sum(-1), np.ones(2), dtype)
    dx = kernels.softmax_backward(y, randn(rng, (3, 5), dtype))
    np.testing.assert_array_equal(dx[1], 0)


# --------------------------------------------------------------- softmax family: edge cases

@pytest.mark.parametrize("forward", [sm.softmax_forward_numba, FORMULA.softmax_forward])
@pytest.mark.parametrize("dtype", DTYPES)
def test_softmax_is_stable_on_huge_logits(forward, dtype):
    x = np.array([[1e4, -1e4, 0.0], [-1e4, -1e4, -1e4], [1e4, 1e4, -1e4]], dtype=dtype)
    y = forward(x)
    expected = np.array([[1, 0, 0], [1 / 3, 1 / 3, 1 / 3], [0.5, 0.5, 0]])
    assert_close(y, expected, dtype)


@pytest.mark.parametrize("forward", [sm.log_softmax_forward_numba, FORMULA.log_softmax_forward])
@pytest.mark.parametrize("dtype", DTYPES)
def test_log_softmax_is_stable_on_huge_logits(forward, dtype):
    x = np.array([[1e4, -1e4, 0.0, 1e4 - 1], [-1e4, -1e4, -1e4, -1e4]], dtype=dtype)
    y = forward(x)
    shifted = x.astype(np.float64) - x.max(axis=-1, keepdims=True)  # exact
    expected = shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))
    np.testing.assert_allclose(y, expected, rtol=RTOL[dtype])  # each entry to full precision


@pytest.mark.parametrize("forward, backward", [
    (sm.log_softmax_forward_numba, sm.log_softmax_backward_numba),
    (FORMULA.log_softmax_forward, FORMULA.log_softmax_backward)])
def test_log_softmax_all_neg_inf_row_gives_neg_inf_and_zero_grad(rng, forward, backward):
    x = randn(rng, (3, 4), np.float64)
    x[1] = -np.inf
    x[2, 0] = -np.inf
    y = forward(x)
    assert np.all(y[1] == -np.inf) and y[2, 0] == -np.inf
    assert np.isfinite(y[[0, 2]][:, 1:]).all()
    dx = backward(y, randn(rng, (3, 4), np.float64))
    assert not np.isnan(dx).any()
    np.testing.assert_array_equal(dx[1], 0)


@pytest.mark.parametrize("impl", [sm.softmax_forward_numba, FORMULA.softmax_forward,
                                  sm.log_softmax_forward_numba, FORMULA.log_softmax_forward])
@pytest.mark.parametrize("bad", [np.nan, -np.nan])
def test_nan_poisons_only_its_row(rng, impl, bad):
    x = randn(rng, (3, 6), np.float64)
    x[1, 4] = bad
    y = impl(x)
    assert np.isnan(y[1]).all()
    assert not np.isnan(y[[0, 2]]).any()


@pytest.mark.parametrize("impl", [sm.softmax_forward_numba, FORMULA.softmax_forward])
def test_nan_is_not_hidden_by_a_fully_masked_row(impl):
    x = np.array([[np.nan, 1.0, 2.0]])
    y = impl(x, 1.0, np.array([True, False, False]))
    assert np.isnan(y).all()


def test_simd_exp_matches_numpy_over_its_whole_range():
    kernels_ns = sm._numba_kernels()
    for dtype, exp, top in ((np.float64, kernels_ns.exp_f64, 720.0),
                            (np.float32, kernels_ns.exp_f32, 95.0)):
        x = np.concatenate([np.linspace(-top * 1.1, top, 4001),
                            [0.0, -0.0, np.inf, -np.inf, np.nan]]).astype(dtype)
        got = np.array([exp(v) for v in x], dtype=dtype)
        with np.errstate(over="ignore"):
            expected = np.exp(x.astype(np.float64))
        tiny = np.finfo(dtype).tiny
        normal = (expected > tiny) & (expected < np.finfo(dtype).max)
        np.testing.assert_allclose(got[normal], expected[normal], rtol=4 * np.finfo(dtype).eps)
        with np.errstate(over="ignore"):
            expected_edges = expected[~normal].astype(dtype)
        np.testing.assert_allclose(got[~normal], expected_edges, atol=tiny)


@pytest.mark.parametrize("impl", [sm.softmax_forward_numba, FORMULA.softmax_forward,
                                  sm.log_softmax_forward_numba, FORMULA.log_softmax_forward])
def test_empty_inputs_give_empty_outputs(impl):
    for shape in [(0, 4), (3, 0)]:
        y = impl(np.zeros(shape, np.float32))
        assert y.shape == shape and y.dtype == np.float32


# --------------------------------------------------------------- finite differences (float64)

def test_softmax_backward_matches_finite_differences(rng):
    x = randn(rng, (2, 3, 5), np.float64)
    keep = np.tril(np.ones((3, 5), dtype=bool))
    weights = randn(rng, x.shape, np.float64)
    for forward, backward in ((sm.softmax_forward_numba, sm.softmax_backward_numba),
                              (FORMULA.softmax_forward, FORMULA.softmax_backward)):
        y = forward(x, 0.7, keep)
        analytic = backward(y, weights, 0.7)
        numeric = numerical_gradient(lambda f=forward: np.sum(weights * f(x, 0.7, keep)), x)
        np.testing.assert_allclose(analytic, numeric, rtol=1e-6, atol=1e-8)
        np.testing.assert_array_equal(analytic[:, ~keep], 0)


def test_log_softmax_backward_matches_finite_differences(rng):
    x = randn(rng, (3, 6), np.float64)
    weights = randn(rng, x.shape, np.float64)
    for forward, backward in ((sm.log_softmax_forward_numba, sm.log_softmax_backward_numba),
                              (FORMULA.log_softmax_forward, FORMULA.log_softmax_backward)):
        analytic = backward(forward(x), weights)
        numeric = numerical_gradient(lambda f=forward: np.sum(weights * f(x)), x)
        np.testing.assert_allclose(analytic, numeric, rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("affine", [True, False])
def test_layernorm_backward_matches_finite_differences(rng, affine):
    x = randn(rng, (2, 3, 5), np.float64)
    gamma = randn(rng, (5,), np.float64) if affine else None
    beta = randn(rng, (5,), np.float64) if affine else None
    weights = randn(rng, x.shape, np.float64)
    for forward, backward in ((ln.layernorm_forward_numba, ln.layernorm_backward_numba),
                              (FORMULA.layernorm_forward, FORMULA.layernorm_backward)):
        def loss(f=forward):
            return np.sum(weights * f(x, gamma, beta)[0])

        _, mean, rstd = forward(x, gamma, beta)
        dx, dgamma, dbeta = backward(weights, x, gamma, mean, rstd)
        np.testing.assert_allclose(dx, numerical_gradient(loss, x), rtol=1e-6, atol=1e-8)
        if affine:
            np.testing.assert_allclose(dgamma, numerical_gradient(loss, gamma), rtol=1e-6, atol=1e-8)
            np.testing.assert_allclose(dbeta, numerical_gradient(loss, beta), rtol=1e-6, atol=1e-8)
        else:
            assert dgamma is None and dbeta is None


# --------------------------------------------------------------- layernorm

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", ROW_SHAPES)
def test_layernorm_twins_and_formula(rng, shape, dtype):
    x = randn(rng, shape, dtype) * 2 + 1
    n = shape[-1]
    gamma, beta = randn(rng, (n,), dtype), randn(rng, (n,), dtype)
    x64 = x.astype(np.float64)
    expected = layernorm_formula(x64, gamma.astype(np.float64), beta.astype(np.float64))
    dy = randn(rng, shape, dtype)
    outputs = {}
    for name, forward, backward in (
            ("numba", ln.layernorm_forward_numba, ln.layernorm_backward_numba),
            ("numpy", FORMULA.layernorm_forward, FORMULA.layernorm_backward)):
        y, mean, rstd = forward(x, gamma, beta)
        assert y.dtype == mean.dtype == rstd.dtype == dtype
        assert mean.shape == rstd.shape == shape[:-1] + (1,)
        assert_close(y, expected, dtype)
        assert_close(mean, x64.mean(-1, keepdims=True), dtype)
        outputs[name] = backward(dy, x, gamma, mean, rstd)
    # dx is a difference of terms of size |dy * gamma * rstd|; rounding is relative to those
    term_size = np.abs(dy).max() * np.abs(gamma).max() * np.abs(rstd).max()
    for got, want in zip(outputs["numba"], outputs["numpy"]):
        assert got.dtype == dtype
        np.testing.assert_allclose(got, want, rtol=10 * RTOL[dtype],
                                   atol=10 * RTOL[dtype] * max(term_size, np.abs(want).max()))


@pytest.mark.parametrize("forward", [ln.layernorm_forward_numba, FORMULA.layernorm_forward])
def test_layernorm_without_affine_params_is_plain_normalisation(rng, forward):
    x = randn(rng, (4, 9), np.float64)
    y, _, _ = forward(x, None, None)
    assert_close(y, layernorm_formula(x, 1.0, 0.0), np.float64)


@pytest.mark.parametrize("forward, backward", [
    (ln.layernorm_forward_numba, ln.layernorm_backward_numba),
    (FORMULA.layernorm_forward, FORMULA.layernorm_backward)])
@pytest.mark.parametrize("dtype", DTYPES)
def test_layernorm_constant_row_is_finite(rng, forward, backward, dtype):
    x = np.full((2, 6), 3.5, dtype=dtype)
    gamma, beta = randn(rng, (6,), dtype), randn(rng, (6,), dtype)
    y, mean, rstd = forward(x, gamma, beta, eps=1e-5)
    np.testing.assert_allclose(y, np.broadcast_to(beta, y.shape), rtol=RTOL[dtype])
    np.testing.assert_allclose(rstd, 1 / np.sqrt(1e-5), rtol=1e-6)
    grads = backward(randn(rng, (2, 6), dtype), x, gamma, mean, rstd)
    assert all(np.isfinite(g).all() for g in grads)


@pytest.mark.parametrize("forward", [ln.layernorm_forward_numba, FORMULA.layernorm_forward])
def test_layernorm_nan_poisons_only_its_row(rng, forward):
    x = randn(rng, (3, 5), np.float32)
    x[2, 1] = np.nan
    y, _, _ = forward(x, None, None)
    assert np.isnan(y[2]).all() and not np.isnan(y[:2]).any()


def test_layernorm_non_contiguous_input(rng):
    x = randn(rng, (8, 6), np.float64).T
    want = layernorm_formula(x, 1.0, 0.0)
    assert_close(ln.layernorm_forward_numba(x, None, None)[0], want, np.float64)


def test_read_only_inputs_are_accepted(rng):
    """Read-only buffers (e.g. memory-mapped weights) work and are not written to."""
    x, gamma = randn(rng, (3, 5), np.float32), randn(rng, (5,), np.float32)
    for arr in (x, gamma):
        arr.setflags(write=False)
    assert_close(sm.softmax_forward_numba(x), softmax_formula(x.astype(np.float64)), np.float32)
    y, _, _ = ln.layernorm_forward_numba(x, gamma, None)
    assert_close(y, layernorm_formula(x.astype(np.float64), gamma, 0.0), np.float32)


# --------------------------------------------------------------- matmul: the op's formula (ops/binary.py)

MATMUL_SHAPES = [((1, 1), (1, 1)), ((3, 7), (7, 5)), ((4, 3, 5), (4, 5, 2)),
                 ((2, 1, 3, 4), (5, 4, 6)), ((6, 16, 8), (8, 16)), ((1, 300), (300, 3))]
TRANSPOSES = [(False, False), (False, True), (True, False), (True, True)]


def stored_as(x, transposed):
    """x, or a transposed view of x's transpose stored contiguously (as K is in Q·Kᵀ)."""
    return np.swapaxes(np.ascontiguousarray(np.swapaxes(x, -1, -2)), -1, -2) if transposed else x


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("trans_a, trans_b", TRANSPOSES)
@pytest.mark.parametrize("a_shape, b_shape", MATMUL_SHAPES)
def test_matmul_agrees_with_float64_on_transposed_views(rng, a_shape, b_shape, trans_a, trans_b, dtype):
    a, b = randn(rng, a_shape, dtype), randn(rng, b_shape, dtype)
    expected = np.matmul(a.astype(np.float64), b.astype(np.float64))
    c = (Tensor(stored_as(a, trans_a)) @ Tensor(stored_as(b, trans_b))).data
    assert c.dtype == dtype and c.shape == expected.shape
    np.testing.assert_allclose(c, expected, rtol=RTOL[dtype] * 10,
                               atol=RTOL[dtype] * 10 * np.sqrt(a.shape[-1]))


@pytest.mark.parametrize("trans_a, trans_b", TRANSPOSES)
def test_matmul_backward_matches_finite_differences(rng, trans_a, trans_b):
    """The op's backward (dA = dC·Bᵀ, dB = Aᵀ·dC, summed over broadcast batch dims) on transposed views."""
    a_stored = randn(rng, (2, 1, 4, 3) if trans_a else (2, 1, 3, 4), np.float64)
    b_stored = randn(rng, (3, 5, 4) if trans_b else (3, 4, 5), np.float64)
    a_op = np.swapaxes(a_stored, -1, -2) if trans_a else a_stored
    b_op = np.swapaxes(b_stored, -1, -2) if trans_b else b_stored
    weights = randn(rng, (2, 3, 3, 5), np.float64)

    def loss():
        return np.sum(weights * (Tensor(a_op) @ Tensor(b_op)).data)

    ta, tb = Tensor(a_op, requires_grad=True), Tensor(b_op, requires_grad=True)
    ((ta @ tb) * Tensor(weights)).sum().backward()
    da = np.swapaxes(ta.grad, -1, -2) if trans_a else ta.grad
    db = np.swapaxes(tb.grad, -1, -2) if trans_b else tb.grad
    np.testing.assert_allclose(da, numerical_gradient(loss, a_stored), rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(db, numerical_gradient(loss, b_stored), rtol=1e-6, atol=1e-8)


def test_matmul_backward_sums_broadcast_batch_dims(rng):
    a, b = randn(rng, (3, 4), np.float64), randn(rng, (5, 2, 4, 6), np.float64)
    dc = randn(rng, (5, 2, 3, 6), np.float64)
    ta, tb = Tensor(a, requires_grad=True), Tensor(b, requires_grad=True)
    (ta @ tb).backward(dc)
    assert_close(ta.grad, np.einsum("zbij,zbkj->ik", dc, b), np.float64)
    assert_close(tb.grad, np.einsum("ik,zbij->zbkj", a, dc), np.float64)


def test_matmul_zero_sized_dims():
    assert (Tensor(np.zeros((2, 0))) @ Tensor(np.zeros((0, 3)))).data.tolist() == [[0.0] * 3] * 2
    assert (Tensor(np.zeros((0, 4))) @ Tensor(np.zeros((4, 3)))).shape == (0, 3)


# --------------------------------------------------------------- hypothesis: random shapes

@settings(max_examples=25, deadline=None)
@given(shape=st.lists(st.integers(1, 9), min_size=1, max_size=3),
       dtype=st.sampled_from(DTYPES), seed=st.integers(0, 2**16))
def test_random_shapes_softmax_and_layernorm_twins_agree(shape, dtype, seed):
    rng = np.random.default_rng(seed)
    x = randn(rng, tuple(shape), dtype) * 4
    assert_close(sm.softmax_forward_numba(x), FORMULA.softmax_forward(x), dtype)
    assert_close(sm.log_softmax_forward_numba(x), FORMULA.log_softmax_forward(x), dtype)
    assert_close(ln.layernorm_forward_numba(x, None, None)[0],
                 FORMULA.layernorm_forward(x, None, None)[0], dtype)


# --------------------------------------------------------------- PyTorch parity

@pytest.mark.parametrize("backend_name", backend.BACKENDS)
def test_softmax_log_softmax_and_layer_norm_match_torch(rng, backend_name):
    torch = pytest.importorskip("torch")
    x = randn(rng, (3, 4, 7), np.float64)
    dy = randn(rng, x.shape, np.float64)
    gamma, beta = randn(rng, (7,), np.float64), randn(rng, (7,), np.float64)
    tx, tdy = torch.tensor(x, requires_grad=True), torch.tensor(dy)
    tg, tb = torch.tensor(gamma, requires_grad=True), torch.tensor(beta, requires_grad=True)
    with kernels.use_backend(backend_name):
        y = kernels.softmax_forward(x, 0.5)
        ty = torch.softmax(tx * 0.5, -1)
        assert_close(y, ty.detach().numpy(), np.float64)
        assert_close(kernels.softmax_backward(y, dy, 0.5),
                     torch.autograd.grad(ty, tx, tdy)[0].numpy(), np.float64)

        y = kernels.log_softmax_forward(x)
        ty = torch.log_softmax(tx, -1)
        assert_close(y, ty.detach().numpy(), np.float64)
        assert_close(kernels.log_softmax_backward(y, dy),
                     torch.autograd.grad(ty, tx, tdy)[0].numpy(), np.float64)

        y, mean, rstd = kernels.layernorm_forward(x, gamma, beta)
        ty = torch.nn.functional.layer_norm(tx, (7,), tg, tb, 1e-5)
        assert_close(y, ty.detach().numpy(), np.float64)
        ours = kernels.layernorm_backward(dy, x, gamma, mean, rstd)
        for got, want in zip(ours, torch.autograd.grad(ty, (tx, tg, tb), tdy)):
            assert_close(got, want.numpy(), np.float64)


# --------------------------------------------------------------- bad input gets clear errors

@pytest.mark.parametrize("call, error, words", [
    # checked at the Tensor boundary (the kernels assert, see below)
    (lambda: Tensor(np.ones((2, 3, 4))) @ Tensor(np.ones((5, 6))), ValueError,
     "matmul: inner dims don't match: (2, 3, 4) @ (5, 6)"),
    (lambda: Tensor(np.ones((2, 3, 4))) @ Tensor(np.ones((3, 4, 5))), ValueError,
     "matmul (batch dims): shapes (2,) and (3,) cannot be broadcast"),
    (lambda: Tensor(np.ones((2, 2), np.float32)) @ Tensor(np.ones((2, 2))), TypeError,
     "matmul: mixing dtypes float32 and float64"),
    (lambda: Tensor(np.ones((2, 2), int)) @ Tensor(np.ones((2, 2), int)), TypeError, "int64"),
    (lambda: Tensor(np.ones((2, 3))).softmax(-1, mask=np.ones((4, 3), bool)), ValueError,
     "softmax: mask of shape (4, 3) cannot broadcast to the input's shape (2, 3)"),
    (lambda: Tensor(np.ones((2, 3))).softmax(-1, mask=np.ones((2, 3), int)), TypeError,
     "softmax: mask must be boolean"),
    (lambda: Tensor(np.ones((2, 3))).softmax(-1, scale=np.inf), ValueError,
     "softmax: scale must be a finite number"),
    (lambda: Tensor(np.ones(3, int)).log_softmax(-1), TypeError,
     "log_softmax: expected a float tensor"),
    (lambda: Tensor(np.ones((2, 3))).layer_norm(3, Tensor(np.ones(4))), ValueError,
     "layer_norm: weight has shape (4,), expected (3,)"),
    (lambda: Tensor(np.ones((2, 3))).layer_norm(3, eps=-1), ValueError, "layer_norm: eps"),
    (lambda: Tensor(np.ones((2, 3))).layer_norm(3, Tensor(np.ones(3, np.float32))), TypeError,
     "layer_norm: weight is float32 but the input is float64"),
])
@pytest.mark.parametrize("backend_name", backend.BACKENDS)
def test_bad_input_raises_a_clear_error(call, error, words, backend_name):
    with kernels.use_backend(backend_name), pytest.raises(error) as info:
        call()
    assert words in str(info.value)


@pytest.mark.parametrize("call", [
    lambda: kernels.softmax_forward(np.ones((2, 3)), mask=np.ones((4, 3), bool)),
    lambda: kernels.softmax_forward(np.ones((2, 3)), mask=np.ones((2, 3), int)),
    lambda: kernels.softmax_backward(np.ones((2, 3)), np.ones((3, 2))),
    lambda: kernels.log_softmax_forward(np.ones(3, int)),
    lambda: kernels.layernorm_forward(np.ones((2, 3)), np.ones(4), None),
    lambda: kernels.layernorm_forward(np.ones((2, 3)), None, None, eps=-1),
    lambda: kernels.layernorm_backward(np.ones((2, 3)), np.ones((2, 3)), None, np.ones(5),
                                       np.ones(2)),
])
def test_kernels_assert_their_preconditions(call):
    """The Numba twins take trusted arrays: the Tensor methods above check what users pass."""
    with kernels.use_backend("numba"), pytest.raises(AssertionError):
        call()


# --------------------------------------------------------------- backend selection

def test_set_get_and_use_backend(monkeypatch):
    monkeypatch.setattr(backend, "_state", backend._State())
    monkeypatch.delenv(backend.ENV_VAR, raising=False)
    assert kernels.get_backend() == "numba"
    with kernels.use_backend("numpy"):
        assert kernels.get_backend() == "numpy"
        with kernels.use_backend("numba"):
            assert kernels.get_backend() == "numba"
        assert kernels.get_backend() == "numpy"
    assert kernels.get_backend() == "numba"
    kernels.set_backend("numpy")
    assert kernels.get_backend() == "numpy"
    with pytest.raises(ValueError, match="'numba', 'numpy'"):
        kernels.set_backend("cuda")


def test_env_var_selects_and_validates(monkeypatch):
    monkeypatch.setattr(backend, "_state", backend._State())
    monkeypatch.setenv(backend.ENV_VAR, "numpy")
    assert kernels.get_backend() == "numpy"
    monkeypatch.setenv(backend.ENV_VAR, "numba")
    assert kernels.get_backend() == "numpy"  # read once per process, on first use
    monkeypatch.setattr(backend, "_state", backend._State())
    monkeypatch.setenv(backend.ENV_VAR, "gpu")
    with pytest.raises(ValueError, match=r"TINYGRAD_LITE_BACKEND: kernel backend must be one of \['numba', 'numpy'\], "
                                         "got 'gpu'"):
        kernels.get_backend()


def test_dispatch_follows_the_backend(monkeypatch, rng):
    x = randn(rng, (2, 3), np.float64)

    def broken_kernels():
        raise AssertionError("the numba kernel ran")

    monkeypatch.setattr(sm, "_numba_kernels", broken_kernels)
    monkeypatch.setattr(ln, "_numba_kernels", broken_kernels)
    with kernels.use_backend("numpy"):
        kernels.softmax_forward(x)
        kernels.layernorm_forward(x, None, None)
    with kernels.use_backend("numba"), pytest.raises(AssertionError, match="numba kernel ran"):
        kernels.softmax_forward(x)


def test_every_twin_has_its_formula_in_an_op_file_with_the_same_parameters():
    for name, where in kernels.TWINS.items():
        formula = dispatch.formula(name)
        module, function = where.split(":")
        twin = getattr(importlib.import_module(f"tinygrad_lite.kernels.{module}"), function)
        assert formula.__module__.split(".")[1] in ("ops", "nn", "optim"), (name, formula.__module__)
        assert list(inspect.signature(twin).parameters) == list(inspect.signature(formula).parameters), name
        assert inspect.signature(dispatch.op(name)) == inspect.signature(formula), name
        with kernels.use_backend("numba"):
            assert dispatch.TWINS[name] is twin
        assert getattr(kernels, name) is dispatch.op(name)


def test_a_formula_with_star_args_is_refused_and_not_registered():
    with pytest.raises(TypeError, match=r"has_twin: spread must take plain parameters"):
        @dispatch.has_twin("spread")
        def spread(*arrays):
            return arrays
    assert "spread" not in dispatch.FORMULAS and "spread" not in dispatch.OPS


def test_missing_numba_falls_back_to_numpy_with_one_warning(monkeypatch, rng):
    monkeypatch.setattr(backend, "_state", backend._State())
    monkeypatch.delenv(backend.ENV_VAR, raising=False)
    monkeypatch.setitem(sys.modules, "numba", None)  # makes `import numba` raise ImportError
    x = randn(rng, (2, 5), np.float64)
    with pytest.warns(RuntimeWarning, match="numba could not be imported") as record:
        y = kernels.softmax_forward(x)
    assert len(record) == 1
    assert_close(y, softmax_formula(x), np.float64)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert kernels.get_backend() == "numpy"
        kernels.layernorm_forward(x, None, None)


def test_small_inputs_stay_on_the_calling_thread():
    """In a fresh process at 2 threads: this one may have sized Numba's pool at 1 (tinygrad_lite.threads)."""
    code = (
        "import numpy as np\n"
        "import tinygrad_lite as tl\n"
        "from tinygrad_lite.kernels import backend, softmax as sm\n"
        "tl.set_num_threads(2)\n"
        "numba = backend.load_numba()\n"
        "assert numba.get_num_threads() == 2\n"
        "backend.PARALLEL_MIN_ELEMENTS = 100\n"
        "with backend.threads_for(99):\n"
        "    assert numba.get_num_threads() == 1\n"
        "assert numba.get_num_threads() == 2\n"
        "with backend.threads_for(100):\n"
        "    assert numba.get_num_threads() == 2\n"
        "assert np.allclose(sm.softmax_forward_numba(np.ones((4, 5))), 0.2)\n"
        "assert numba.get_num_threads() == 2\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 0, result.stderr


def test_import_is_lazy_and_numpy_backend_never_imports_numba():
    code = (
        "import sys\n"
        "import numpy as np\n"
        "import tinygrad_lite, tinygrad_lite.kernels as k\n"
        "assert 'numba' not in sys.modules, 'import tinygrad_lite imported numba'\n"
        "k.set_backend('numpy')\n"
        "k.softmax_forward(np.ones((2, 3)))\n"
        "k.layernorm_forward(np.ones((2, 3)), None, None)\n"
        "k.embedding_backward(np.array([1, 0]), np.ones((2, 3)), 2)\n"
        "assert 'numba' not in sys.modules, 'the numpy backend imported numba'\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=120, check=False)
    assert result.returncode == 0, result.stderr
