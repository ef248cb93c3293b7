"""The fused attention op and the other fused pieces of the training step.

Attention: the Numba kernel against its NumPy twin and against the BLAS composition the numba
backend dispatches to (forward and backward, float32/float64, every mask layout, dropout, keys
shared across the batch, a cache buffer read in place), the Tensor-level op against the unfused
composition matmul -> softmax -> dropout -> matmul and against PyTorch, float64 gradcheck through
the op (MultiHeadAttention reaches it through the compiler's rule: test_compile_rules_attention.py).
Also: the dropout mask generator, the one-pass Adam kernel against its formula (optim.adam), and the
leaf-gradient hand-over of the backward pass.
"""
import numpy as np
import pytest

import tinygrad_lite as tl
from tinygrad_lite import Tensor, gradcheck, kernels
from tinygrad_lite.kernels import adam as kernel_adam
from tinygrad_lite.kernels import attention as att
from tinygrad_lite.kernels import attention_args, attention_composed, attention_per_query, attention_tiles
from tinygrad_lite.nn import fused as fused_ops
from tinygrad_lite.optim import adam as adam_module
from tinygrad_lite.tensor import dropout_keep_mask
from transformer.attention import scaled_dot_product_attention

TOL = {np.float32: {"rtol": 2e-5, "atol": 2e-6}, np.float64: {"rtol": 1e-11, "atol": 1e-12}}
DTYPES = [np.float32, np.float64]


def qkv(rng, B=3, T_q=4, T_k=6, h=2, d_k=5, d_v=7, dtype=np.float64, kv_batch=None):
    kv_batch = B if kv_batch is None else kv_batch
    return (rng.standard_normal((B, T_q, h, d_k)).astype(dtype),
            rng.standard_normal((kv_batch, T_k, h, d_k)).astype(dtype),
            rng.standard_normal((kv_batch, T_k, h, d_v)).astype(dtype))


def composed_forward(q, k, v, scale=None, mask=None, keep=None, keep_scale=1.0):
    """The numba backend's BLAS path (matmul, Numba softmax, matmul), called directly."""
    weights_shape = (q.shape[0], q.shape[2], q.shape[1], k.shape[1])
    prepared = attention_args.mask_in(mask, weights_shape, q.dtype)
    return attention_composed.forward_composed(q, k, v, attention_args.scale_factor(scale, q.shape[3], q.dtype),
                                               attention_args.additive(prepared, q.dtype), keep, keep_scale,
                                               kernels.softmax_forward)


def composed_backward(q, k, v, weights, dout, scale=None, keep=None, keep_scale=1.0):
    return attention_composed.backward_composed(q, k, v, weights, dout,
                                                attention_args.scale_factor(scale, q.shape[3], q.dtype),
                                                keep, keep_scale, kernels.softmax_backward)


MASKS = {
    "none": lambda rng, B, h, T_q, T_k: None,
    "padding (B,1,1,T_k)": lambda rng, B, h, T_q, T_k: rng.random((B, 1, 1, T_k)) > 0.3,
    "target (B,1,T_q,T_k)": lambda rng, B, h, T_q, T_k: (rng.random((B, 1, T_q, T_k)) > 0.3)
    & np.tril(np.ones((T_q, T_k), bool), T_k - T_q),
    "causal (1,1,T_q,T_k)": lambda rng, B, h, T_q, T_k: np.tril(np.ones((1, 1, T_q, T_k), bool)),
    "per head (B,h,T_q,T_k)": lambda rng, B, h, T_q, T_k: rng.random((B, h, T_q, T_k)) > 0.5,
    "keys only (T_k,)": lambda rng, B, h, T_q, T_k: rng.random(T_k) > 0.3,
    "additive floats": lambda rng, B, h, T_q, T_k: rng.standard_normal((B, 1, T_q, T_k)),
}


# ---------------------------------------------------------------- kernel vs twin vs composition
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("mask_name", list(MASKS))
@pytest.mark.parametrize("dropout", [False, True])
def test_numba_kernel_matches_numpy_twin_and_blas_composition(dtype, mask_name, dropout):
    rng = np.random.default_rng(7)
    q, k, v = qkv(rng, dtype=dtype)
    B, T_q, h, _ = q.shape
    T_k = k.shape[1]
    mask = MASKS[mask_name](rng, B, h, T_q, T_k)
    keep = rng.random((B, h, T_q, T_k)) > 0.25 if dropout else None
    args = {"mask": mask, "keep": keep, "keep_scale": 1 / 0.75}
    out_twin, w_twin = att.attention_forward_numpy(q, k, v, **args)
    out_numba, w_numba = att.attention_forward_numba(q, k, v, **args)
    out_blas, w_blas = composed_forward(q, k, v, **args)
    for out, w in ((out_numba, w_numba), (out_blas, w_blas)):
        np.testing.assert_allclose(w, w_twin, **TOL[dtype])
        np.testing.assert_allclose(out, out_twin, **TOL[dtype])
        assert out.dtype == w.dtype == dtype and out.flags.c_contiguous
    dout = rng.standard_normal(out_twin.shape).astype(dtype)
    grads_twin = att.attention_backward_numpy(q, k, v, w_twin, dout, keep=keep, keep_scale=1 / 0.75)
    for grads in (att.attention_backward_numba(q, k, v, w_twin, dout, keep=keep, keep_scale=1 / 0.75),
                  composed_backward(q, k, v, w_twin, dout, keep=keep, keep_scale=1 / 0.75)):
        for got, expected in zip(grads, grads_twin):
            np.testing.assert_allclose(got, expected, **TOL[dtype])


def test_twin_is_the_paper_formula_written_with_einsum():
    rng = np.random.default_rng(1)
    q, k, v = qkv(rng)
    mask = rng.random((3, 1, 4, 6)) > 0.3
    scores = np.einsum("bihd,bjhd->bhij", q, k) / np.sqrt(q.shape[-1])
    scores = np.where(mask, scores, -np.inf)
    e = np.exp(scores - scores.max(-1, keepdims=True))
    weights = np.nan_to_num(e / e.sum(-1, keepdims=True))
    expected = np.einsum("bhij,bjhd->bihd", weights, v)
    out, w = att.attention_forward_numpy(q, k, v, mask=mask)
    np.testing.assert_allclose(w, weights, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(out, expected, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("impl", [att.attention_forward_numpy, att.attention_forward_numba,
                                  att.attention_forward])
def test_fully_masked_query_gets_zero_weights_and_output_not_nan(impl):
    rng = np.random.default_rng(2)
    q, k, v = qkv(rng, dtype=np.float32)
    mask = np.ones((3, 1, 4, 6), bool)
    mask[1, 0, 2] = False
    out, w = impl(q, k, v, mask=mask)
    assert np.isfinite(out).all() and np.isfinite(w).all()
    assert not w[1, :, 2].any() and not out[1, 2].any()
    np.testing.assert_allclose(w.sum(-1)[mask.all(-1).repeat(2, 1)], 1, rtol=1e-6)


@pytest.mark.parametrize("impl", [att.attention_forward_numpy, att.attention_forward_numba])
def test_nan_in_a_query_makes_its_row_nan_and_nothing_else(impl):
    rng = np.random.default_rng(3)
    q, k, v = qkv(rng)
    q[0, 1, 0, 2] = np.nan
    out, w = impl(q, k, v)
    assert np.isnan(w[0, 0, 1]).all() and np.isnan(out[0, 1, 0]).all()
    w[0, 0, 1] = 0
    out[0, 1, 0] = 0
    assert np.isfinite(w).all() and np.isfinite(out).all()


@pytest.mark.parametrize("dtype", DTYPES)
def test_keys_shared_by_the_batch_broadcast_forward_and_sum_backward(dtype):
    rng = np.random.default_rng(4)
    q, k, v = qkv(rng, dtype=dtype, kv_batch=1)
    expanded = [np.repeat(x, 3, axis=0) for x in (k, v)]
    out_ref, w_ref = att.attention_forward_numpy(q, *expanded)
    dout = rng.standard_normal(out_ref.shape).astype(dtype)
    dq_ref, dk_ref, dv_ref = att.attention_backward_numpy(q, *expanded, w_ref, dout)
    for forward, backward in ((att.attention_forward_numpy, att.attention_backward_numpy),
                              (att.attention_forward_numba, att.attention_backward_numba),
                              (composed_forward, composed_backward)):
        out, w = forward(q, k, v)
        np.testing.assert_allclose(out, out_ref, **TOL[dtype])
        dq, dk, dv = backward(q, k, v, w, dout)
        assert dk.shape == k.shape and dv.shape == v.shape
        np.testing.assert_allclose(dq, dq_ref, **TOL[dtype])
        np.testing.assert_allclose(dk, dk_ref.sum(0, keepdims=True), **TOL[dtype])
        np.testing.assert_allclose(dv, dv_ref.sum(0, keepdims=True), **TOL[dtype])


def test_a_growing_cache_buffer_is_read_in_place():
    rng = np.random.default_rng(5)
    q, k, v = qkv(rng, B=2, T_q=1, T_k=5)
    buffer_k, buffer_v = (np.zeros((2, 16) + x.shape[2:]) for x in (k, v))
    buffer_k[:, :5], buffer_v[:, :5] = k, v
    view_k, view_v = buffer_k[:, :5], buffer_v[:, :5]
    assert not view_k.flags.c_contiguous
    whole, n = attention_per_query.leading_keys(view_k)
    assert whole is not view_k and n == 5 and np.shares_memory(whole, buffer_k)
    out, w = att.attention_forward_numba(q, view_k, view_v)
    out_ref, w_ref = att.attention_forward_numpy(q, k, v)
    np.testing.assert_allclose(out, out_ref, rtol=1e-12)
    np.testing.assert_allclose(w, w_ref, rtol=1e-12)
    odd = np.asfortranarray(k)  # another layout: copied, still right
    np.testing.assert_allclose(att.attention_forward_numba(q, odd, v)[0], out_ref, rtol=1e-12)


def test_engine_rule_sends_decoding_steps_to_the_kernel_and_the_rest_to_blas():
    assert att.attention_engine(queries=1) == "numba"
    assert att.attention_engine(queries=16) == "blas"


# ---------------------------------------------------------------- the tile kernels (float32 training shapes)
def test_tiles_take_float32_training_shapes_only():
    rng = np.random.default_rng(0)
    assert att.tiles_fit(*qkv(rng, T_q=4, d_k=8, d_v=16, dtype=np.float32))
    assert not att.tiles_fit(*qkv(rng, T_q=4, d_k=8, d_v=16, dtype=np.float64))   # float64: BLAS
    assert not att.tiles_fit(*qkv(rng, T_q=1, d_k=8, d_v=16, dtype=np.float32))   # one query: the fused kernel
    assert not att.tiles_fit(*qkv(rng, T_q=4, d_k=5, d_v=16, dtype=np.float32))   # d_k not a multiple of 8
    assert not att.tiles_fit(*qkv(rng, T_q=4, d_k=8, d_v=16, dtype=np.float32, kv_batch=1))  # shared keys


@pytest.mark.parametrize("mask_name", list(MASKS))
@pytest.mark.parametrize("dropout", [False, True])
@pytest.mark.parametrize("shape", [(3, 4, 6, 2, 8, 16), (2, 16, 16, 4, 32, 32), (2, 5, 13, 3, 24, 40),
                                   (1, 9, 9, 1, 64, 8)])
def test_tile_kernels_match_the_numpy_twin(mask_name, dropout, shape):
    """Forward and backward of the numba backend's dispatch on shapes the tile kernels take: key counts
    that are and are not multiples of 8, every mask layout, dropout on and off."""
    B, T_q, T_k, h, d_k, d_v = shape
    rng = np.random.default_rng(sum(shape))
    q, k, v = qkv(rng, B, T_q, T_k, h, d_k, d_v, dtype=np.float32)
    assert att.tiles_fit(q, k, v)
    mask = MASKS[mask_name](rng, B, h, T_q, T_k)
    keep = rng.random((B, h, T_q, T_k)) > 0.25 if dropout else None
    args = {"mask": None if mask is None else mask.astype(np.float32) if mask.dtype.kind == "f" else mask,
            "keep": keep, "keep_scale": 1 / 0.75}
    out_twin, w_twin = att.attention_forward_numpy(q, k, v, **args)
    with kernels.use_backend("numba"):
        out, w = att.attention_forward(q, k, v, **args)
    np.testing.assert_allclose(w, w_twin, **TOL[np.float32])
    np.testing.assert_allclose(out, out_twin, **TOL[np.float32])
    assert out.dtype == w.dtype == np.float32 and out.flags.c_contiguous and w.shape == w_twin.shape
    dout = rng.standard_normal(out.shape).astype(np.float32)
    grads_twin = att.attention_backward_numpy(q, k, v, w_twin, dout, keep=keep, keep_scale=1 / 0.75)
    with kernels.use_backend("numba"):
        for weights in (w, np.ascontiguousarray(w)):  # the forward's padded view, or any other array
            grads = att.attention_backward(q, k, v, weights, dout, keep=keep, keep_scale=1 / 0.75)
            for got, expected in zip(grads, grads_twin):
                assert got.shape == expected.shape
                np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5)


def test_row_starts_follow_the_masks_content():
    """Each batch row's first row among the real tokens; None if a row's real tokens are not its prefix.
    Looked up by the mask's bytes, so a mask changed in place gets its own answer."""
    real = np.array([[True, True, False], [True, False, False], [True, True, True]])
    np.testing.assert_array_equal(att._row_starts(real), [0, 2, 3, 6])
    real[1, 1] = True
    np.testing.assert_array_equal(att._row_starts(real), [0, 2, 4, 7])
    real[0, 0] = False                     # row 0's real token is not first
    assert att._row_starts(real) is None
    starts = att._row_starts(np.ones((2, 4), bool))
    starts[:] = -1                         # the caller's copy: the next answer is unchanged
    np.testing.assert_array_equal(att._row_starts(np.ones((2, 4), bool)), [0, 4, 8])


def test_tiles_give_a_fully_masked_query_zeros_and_keep_nan_in_its_row():
    rng = np.random.default_rng(8)
    q, k, v = qkv(rng, B=2, T_q=4, T_k=11, h=2, d_k=8, d_v=8, dtype=np.float32)
    mask = np.ones((2, 1, 4, 11), bool)
    mask[1, 0, 2] = False
    q[0, 1, 0, 3] = np.nan
    with kernels.use_backend("numba"):
        out, w = att.attention_forward(q, k, v, mask=mask)
    assert not w[1, :, 2].any() and not out[1, 2].any()
    assert np.isnan(w[0, 0, 1]).all() and np.isnan(out[0, 1, 0]).all()
    w, out = w.copy(), out.copy()
    w[0, 0, 1], out[0, 1, 0] = 0, 0
    assert np.isfinite(w).all() and np.isfinite(out).all()


@pytest.mark.parametrize("n_rows, count, width", [(16, 32, 16), (5, 7, 40), (3, 12, 24), (1, 1, 8), (7, 32, 64),
                                                  (16, 16, 32), (2, 3, 72)])
def test_simd_rows_product_matches_its_numpy_reference(n_rows, count, width):
    """kernels.simd.rows_product, the micro-kernels under the tile kernels, on strided operands anywhere
    in flat arrays; columns it does not own stay untouched."""
    from numba import njit

    from tinygrad_lite.kernels import simd
    from tinygrad_lite.kernels.backend import load_numba
    simd.register(load_numba())

    @njit
    def run(out, o, o_row, coef, c, c_row, c_step, count, x, xo, x_step, n_rows, width):
        simd.rows_product(out, o, o_row, coef, c, c_row, c_step, count, x, xo, x_step, n_rows, width)
    rng = np.random.default_rng(n_rows * count + width)
    coef, x = rng.standard_normal(6000).astype(np.float32), rng.standard_normal(9000).astype(np.float32)
    out = np.full(4000, 7.0, np.float32)
    expected = out.copy()
    args = (3, width + 5, coef, 2, count + 1, 1, count, x, 7, width + 3, n_rows, width)
    run(out, *args)
    simd.reference_rows_product(expected, *args)
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-5)
    assert (out == 7.0).sum() == (expected == 7.0).sum()


def test_simd_transpose_writes_each_head_as_columns_padded_with_zeros():
    x = np.arange(3 * 13 * 2 * 16, dtype=np.float32).reshape(3, 13, 2, 16)       # (B, T, h, d)
    with kernels.use_backend("numba"):
        attention_tiles._numba_kernels()
    from numba import njit
    into = njit(attention_tiles.tokens_last_into)
    out = np.full(16 * 16, -1.0, np.float32)
    into(out, x.reshape(-1), (1 * 13 * 2 + 1) * 16, 2 * 16, 13, 16, 16)           # batch row 1, head 1
    expected = np.zeros((16, 16), np.float32)
    expected[:, :13] = x[1, :, 1, :].T
    np.testing.assert_array_equal(out.reshape(16, 16), expected)


def fused(q, k, v, **kw):
    return fused_ops.fused_attention(Tensor(q), Tensor(k), Tensor(v), **kw)


@pytest.mark.parametrize("call, exc, pattern", [
    (lambda q, k, v: fused(q[0], k, v), ValueError, r"q must be 4-D \(B, T, h, d\)"),
    (lambda q, k, v: fused(q, k[:, :, :1], v), ValueError, r"k \(3, 6, 1, 5\) does not fit q"),
    (lambda q, k, v: fused(q, k, v[:, :2]), ValueError, r"v \(3, 2, 2, 7\) does not fit k"),
    (lambda q, k, v: fused(q, k.astype(np.float32), v), TypeError, "share a dtype"),
    (lambda q, k, v: fused(q.astype(int), k, v), TypeError, "q must be a float32 or float64"),
    (lambda q, k, v: fused(q, k, v, mask=np.ones((3, 1, 4, 5), bool)), ValueError,
     r"mask of shape \(3, 1, 4, 5\) cannot broadcast to the weights' shape .* \(3, 2, 4, 6\)"),
    (lambda q, k, v: fused(q, k, v, mask=np.ones((3, 1, 4, 6), int)), TypeError,
     "mask must be boolean"),
    (lambda q, k, v: fused(q, k, v, scale=float("inf")), ValueError,
     "scale must be a finite number"),
])
def test_bad_input_names_the_op_and_what_it_expected(call, exc, pattern):
    """fused_attention checks what users pass, once; the kernels below it trust it."""
    q, k, v = qkv(np.random.default_rng(0))
    with pytest.raises(exc, match=pattern):
        call(q, k, v)


@pytest.mark.parametrize("call", [
    lambda q, k, v: att.attention_forward(q, k.astype(np.float32), v),
    lambda q, k, v: att.attention_forward(q, k, v, keep=np.ones((3, 2, 4, 6))),
    lambda q, k, v: att.attention_forward_numpy(q, k, v, mask=np.ones((3, 1, 4, 5), bool)),
    lambda q, k, v: att.attention_backward(q, k, v, np.zeros((3, 2, 4, 5)), np.zeros((3, 4, 2, 7))),
])
def test_kernels_assert_their_preconditions(call):
    q, k, v = qkv(np.random.default_rng(0))
    with pytest.raises(AssertionError):
        call(q, k, v)


# ---------------------------------------------------------------- the Tensor-level op
def tensors(rng, dtype=np.float64, **kw):
    return [Tensor(x, requires_grad=True) for x in qkv(rng, dtype=dtype, **kw)]


def unfused(q, k, v, mask=None, dropout=None):
    """The same computation as separate ops, on (B, h, T, d) heads."""
    heads = [t.transpose(1, 2) for t in (q, k, v)]
    return scaled_dot_product_attention(*heads, mask, dropout).transpose(1, 2)


@pytest.mark.parametrize("backend", ["numba", "numpy"])
def test_op_matches_the_unfused_composition_in_value_and_gradient(backend):
    rng = np.random.default_rng(11)
    q, k, v = tensors(rng)
    mask = rng.random((3, 1, 4, 6)) > 0.3
    g = rng.standard_normal((3, 4, 2, 7))
    results = []
    with kernels.use_backend(backend):
        for fn in (lambda: fused_ops.fused_attention(q, k, v, mask), lambda: unfused(q, k, v, mask)):
            for t in (q, k, v):
                t.grad = None
            out = fn()
            out.backward(g)
            results.append([out.data] + [t.grad for t in (q, k, v)])
    for fused, plain in zip(*results):
        np.testing.assert_allclose(fused, plain, rtol=1e-11, atol=1e-13)


def test_op_with_dropout_draws_what_the_unfused_dropout_would():
    rng = np.random.default_rng(12)
    q, k, v = tensors(rng)
    tl.manual_seed(3)
    fused = fused_ops.fused_attention(q, k, v, dropout_p=0.4, training=True)
    tl.manual_seed(3)
    plain = unfused(q, k, v, dropout=lambda w: w.dropout(0.4))
    np.testing.assert_allclose(fused.data, plain.data, rtol=1e-12, atol=1e-14)
    evaluated = fused_ops.fused_attention(q, k, v, dropout_p=0.4, training=False)
    np.testing.assert_allclose(evaluated.data, unfused(q, k, v).data, rtol=1e-12)


@pytest.mark.parametrize("backend", ["numba", "numpy"])
@pytest.mark.parametrize("case", ["mask", "dropout", "heads", "shared keys", "one query"])
def test_gradcheck_through_the_op(backend, case):
    rng = np.random.default_rng(13)
    shapes = {"kv_batch": 1} if case == "shared keys" else {"T_q": 1} if case == "one query" else {}
    q, k, v = tensors(rng, B=2, T_q=shapes.get("T_q", 3), T_k=4, h=2, d_k=3, d_v=3,
                      kv_batch=shapes.get("kv_batch"))
    mask = np.tril(np.ones((1, 1, q.shape[1], 4), bool), 1) if case == "mask" else None

    def fn(a, b, c):
        if case == "dropout":
            tl.manual_seed(0)  # the same dropout draws on every call
            return fused_ops.fused_attention(a, b, c, dropout_p=0.3)
        if case == "heads":
            merged = [t.reshape(t.shape[0], t.shape[1], -1) for t in (a, b, c)]
            return fused_ops.fused_attention(*merged, heads=2)
        return fused_ops.fused_attention(a, b, c, mask)
    with kernels.use_backend(backend):
        assert gradcheck(fn, q, k, v)


def test_op_matches_pytorch_scaled_dot_product_attention():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(14)
    q, k, v = tensors(rng, d_v=5)
    mask = rng.random((3, 1, 4, 6)) > 0.2
    mask[..., 0] = True  # torch gives NaN for a fully masked row; ours gives zeros
    g = rng.standard_normal((3, 4, 2, 5))
    out = fused_ops.fused_attention(q, k, v, mask)
    out.backward(g)
    tq, tk, tv = (torch.tensor(t.data.transpose(0, 2, 1, 3), requires_grad=True) for t in (q, k, v))
    ref = torch.nn.functional.scaled_dot_product_attention(tq, tk, tv, attn_mask=torch.from_numpy(mask))
    ref.backward(torch.from_numpy(g.transpose(0, 2, 1, 3).copy()))
    np.testing.assert_allclose(out.data, ref.detach().numpy().transpose(0, 2, 1, 3), rtol=1e-10)
    for ours, theirs in zip((q, k, v), (tq, tk, tv)):
        np.testing.assert_allclose(ours.grad, theirs.grad.numpy().transpose(0, 2, 1, 3), rtol=1e-9, atol=1e-12)


def test_op_returns_inspection_weights_and_checks_its_arguments():
    rng = np.random.default_rng(15)
    q, k, v = tensors(rng)
    _, weights = fused_ops.fused_attention(q, k, v, need_weights=True)
    assert isinstance(weights, np.ndarray) and weights.shape == (3, 2, 4, 6)
    np.testing.assert_allclose(weights.sum(-1), 1)
    with pytest.raises(TypeError, match="q, k, v must be Tensors"):
        fused_ops.fused_attention(q.data, k, v)
    with pytest.raises(ValueError, match=r"dropout_p must be in \[0, 1\]"):
        fused_ops.fused_attention(q, k, v, dropout_p=1.5)
    with pytest.raises(ValueError, match=r"with heads=3, q must be \(B, T, heads·d\)"):
        fused_ops.fused_attention(*(t.reshape(t.shape[0], t.shape[1], -1) for t in (q, k, v)), heads=3)



# ---------------------------------------------------------------- dropout masks
@pytest.mark.parametrize("p", [0.1, 0.5, 0.3, 0.01, 1e-6, 0.999999])
def test_dropout_mask_keeps_one_minus_p(p):
    tl.manual_seed(0)
    n = 400_000
    kept = dropout_keep_mask((n,), p).mean()
    sigma = np.sqrt(p * (1 - p) / n)
    assert abs((1 - kept) - p) < 6 * sigma + 1e-4 * min(p, 1 - p)


def test_dropout_mask_is_repeatable_and_fresh():
    tl.manual_seed(4)
    a = dropout_keep_mask((3, 50), 0.5)
    b = dropout_keep_mask((3, 50), 0.5)
    tl.manual_seed(4)
    assert np.array_equal(dropout_keep_mask((3, 50), 0.5), a) and not np.array_equal(a, b)
    assert a.dtype == np.bool_ and a.shape == (3, 50)
    assert dropout_keep_mask((0, 4), 0.5).shape == (0, 4)


# ---------------------------------------------------------------- fused Adam
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("weight_decay, decoupled", [(0.0, False), (0.1, False), (0.1, True)])
def test_one_pass_adam_kernel_equals_the_formula_bit_for_bit(dtype, weight_decay, decoupled):
    rng = np.random.default_rng(17)
    arrays = [rng.standard_normal((33, 7)).astype(dtype) for _ in range(3)]
    arrays.append(np.abs(rng.standard_normal((33, 7))).astype(dtype))
    twin, kernel = [a.copy() for a in arrays], [a.copy() for a in arrays]
    for step in (1, 2, 3):
        adam_module.adam_update.formula(*twin, 1e-3, 0.9, 0.98, 1e-9, weight_decay, decoupled, step)
        kernel_adam.adam_update_numba(*kernel, 1e-3, 0.9, 0.98, 1e-9, weight_decay, decoupled, step)
    for a, b in zip(twin, kernel):
        assert np.array_equal(a, b)
    assert not np.array_equal(twin[0], arrays[0])


def test_adam_kernel_hands_odd_layouts_to_the_formula():
    rng = np.random.default_rng(18)
    param = np.asfortranarray(rng.standard_normal((5, 4)))
    grad = rng.standard_normal((5, 4))
    expected = param.copy()
    state = [np.zeros((5, 4)), np.zeros((5, 4))]
    adam_module.adam_update.formula(expected, grad, *[s.copy() for s in state], 0.1, 0.9, 0.98, 1e-9, 0, False, 1)
    kernel_adam.adam_update_numba(param, grad, *state, 0.1, 0.9, 0.98, 1e-9, 0, False, 1)
    np.testing.assert_array_equal(param, expected)


# ---------------------------------------------------------------- leaf gradients
def test_leaves_take_fresh_gradients_but_never_share_one():
    a = Tensor(np.ones(3), requires_grad=True)
    b = Tensor(np.ones(3), requires_grad=True)
    (a + b).backward(np.ones(3))  # add hands the same array to both inputs
    assert not np.shares_memory(a.grad, b.grad)
    a.grad *= 2
    np.testing.assert_array_equal(b.grad, np.ones(3))
    user = np.full(3, 2.0)
    c = Tensor(np.ones(3), requires_grad=True)
    (c * 1.0).backward(user)
    c.grad += 1
    np.testing.assert_array_equal(user, np.full(3, 2.0))
    constant = np.full(3, 5.0)
    d = Tensor(np.ones(3), requires_grad=True)
    d._make(d.data, "keeps_a_constant", (d,), lambda g: (constant,)).backward(np.ones(3))
    d.grad *= 0
    np.testing.assert_array_equal(constant, np.full(3, 5.0))
