"""The tile kernels skip the keys a mask hides from a whole block of queries (a causal mask's future):
forward and backward equal the NumPy twin at a GPT's shape for causal, anti-causal (each block's reach
is the whole row), banded and random masks, with and without dropout; `_reach` reads each mask row's
last kept key; simd_exp's underflow shortcut gives the exact zeros and NaNs it gave before."""
import numpy as np
import pytest

from tinygrad_lite import dispatch, kernels
from tinygrad_lite.kernels import attention as att
from tinygrad_lite.kernels import attention_tiles as tiles

T = 64
MASKS = {
    "causal": lambda rng: np.tril(np.ones((1, 1, T, T), bool)),
    "anti-causal": lambda rng: np.triu(np.ones((1, 1, T, T), bool)),
    "band of 9": lambda rng: np.tril(np.ones((T, T), bool)) & np.triu(np.ones((T, T), bool), -8),
    "random causal per row": lambda rng: (rng.random((3, 1, T, T)) > 0.5) & np.tril(np.ones((T, T), bool)),
    "none": lambda rng: None,
}


@pytest.mark.parametrize("dropout", [False, True])
@pytest.mark.parametrize("mask_name", list(MASKS))
def test_tiles_equal_the_twin_on_masks_that_hide_keys(mask_name, dropout):
    rng = np.random.default_rng(len(mask_name) + dropout)
    B, h, d = 3, 2, 16
    q, k, v, dout = (rng.standard_normal((B, T, h, d)).astype(np.float32) for _ in range(4))
    mask = MASKS[mask_name](rng)
    keep = rng.random((B, h, T, T)) > 0.2 if dropout else None
    args = {"mask": mask, "keep": keep, "keep_scale": 1 / 0.8}
    assert att.tiles_fit(q, k, v)
    out_twin, w_twin = att.attention_forward_numpy(q, k, v, **args)
    grads_twin = att.attention_backward_numpy(q, k, v, w_twin, dout, keep=keep, keep_scale=1 / 0.8)
    with kernels.use_backend("numba"):
        out, w = att.attention_forward(q, k, v, **args)
        grads = att.attention_backward(q, k, v, w, dout, keep=keep, keep_scale=1 / 0.8)
    np.testing.assert_allclose(w, w_twin, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(out, out_twin, rtol=1e-5, atol=1e-5)
    if mask is not None:
        assert not w[np.broadcast_to(~mask, w.shape)].any()          # hidden keys weigh exactly 0
    for got, expected in zip(grads, grads_twin):
        np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5)


def test_reach_is_one_past_the_last_kept_key():
    mask_add = np.zeros((2, 1, 3, 8), np.float32)
    mask_add[0, 0, 0, 3:] = -np.inf          # keys 0..2
    mask_add[0, 0, 1, :] = -np.inf           # nothing
    mask_add[0, 0, 2, :7] = -np.inf          # key 7 only
    mask_add[1, 0, 0, 5] = -np.inf           # a hole: reach still 8
    np.testing.assert_array_equal(tiles._reach(mask_add), [[[3, 0, 8]], [[8, 8, 8]]])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_softmax_exp_underflows_to_exact_zero_and_keeps_nan(dtype):
    x = np.array([[0.0, -np.inf, -1e4, -103.9, -104.0, -745.0, -746.5, np.nan, 3.0]], dtype)
    with kernels.use_backend("numba"):
        y = kernels.softmax_forward(x[:, [0, 1, 2, 3, 4, 5, 6, 8]])
        poisoned = kernels.softmax_forward(x)
    expected = dispatch.formula("softmax_forward")(x[:, [0, 1, 2, 3, 4, 5, 6, 8]])
    np.testing.assert_allclose(y, expected, rtol=1e-6, atol=1e-30)
    assert (y[0, [1, 2]] == 0).all() and np.isnan(poisoned).all()
