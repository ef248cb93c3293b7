"""fused_cross_entropy: cross-entropy's gradient in one pass (nn.functional.cross_entropy_backward, its Numba
twin kernels.cross_entropy) against the plain backward (a full dy, then log_softmax's backward), its oracle:
equal to rounding, float64 to 1e-10."""
import numpy as np
import pytest
import trick_switches

import tinygrad_lite as tl
from tinygrad_lite import Tensor, fast
from tinygrad_lite.kernels import log_softmax_forward, use_backend
from tinygrad_lite.nn import functional as F
from transformer import Transformer

BACKENDS = ["numba", "numpy"]


@pytest.fixture(autouse=True)
def tricks_restored():
    before = repr(fast.TRICKS)
    yield
    assert repr(fast.TRICKS) == before


def both(fn):
    return trick_switches.both(fn, "fused_cross_entropy")


def assert_close(on, off, dtype):
    rtol, atol = (1e-10, 1e-12) if dtype == np.float64 else (2e-5, 1e-7)
    assert len(on) == len(off)
    for a, b in zip(on, off):
        np.testing.assert_allclose(a, b, rtol=rtol, atol=atol)


def loss_and_grad(logits, target, dtype, **kwargs):
    x = Tensor(logits.astype(dtype), requires_grad=True)
    loss = F.cross_entropy(x, target, **kwargs)
    (loss.sum() * 1.5).backward()
    return [loss.data, x.grad]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("kwargs", [dict(ignore_index=0, label_smoothing=0.1), dict(label_smoothing=0.0),
                                    dict(ignore_index=2, label_smoothing=0.3, reduction="sum"),
                                    dict(ignore_index=1, label_smoothing=0.1, reduction="none")])
def test_the_one_pass_gradient_is_the_plain_one(backend, dtype, kwargs):
    rng = np.random.default_rng(0)
    logits, target = rng.standard_normal((37, 11)) * 3, rng.integers(0, 11, size=37)
    if "ignore_index" in kwargs:
        target[::5] = kwargs["ignore_index"]
    with use_backend(backend):
        on, off = both(lambda: loss_and_grad(logits, target, dtype, **kwargs))
    assert_close(on, off, dtype)
    assert np.abs(on[1]).max() > 0.01


@pytest.mark.parametrize("backend", BACKENDS)
def test_class_dim_one_layout_all_ignored_and_dead_rows(backend):
    rng = np.random.default_rng(1)
    logits, target = rng.standard_normal((3, 7, 4)), rng.integers(0, 7, size=(3, 4))
    with use_backend(backend):
        assert_close(*both(lambda: loss_and_grad(logits, target, np.float64, label_smoothing=0.2)), np.float64)
        on, off = both(lambda: loss_and_grad(logits[:, :, 0], np.full(3, 5), np.float64, ignore_index=5))
        assert_close(on, off, np.float64)
        assert not on[1].any()
        dead = rng.standard_normal((4, 6))
        dead[2] = -np.inf
        with np.errstate(all="ignore"):
            on, off = both(lambda: loss_and_grad(dead, np.array([1, 2, 3, 4]), np.float64, ignore_index=3))
    np.testing.assert_array_equal(on[1], off[1])
    assert not on[1][2].any() and on[1][0].any()


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_the_kernel_matches_the_formula(backend, dtype):
    rng = np.random.default_rng(2)
    logp = log_softmax_forward((rng.standard_normal((300, 50)) * 4).astype(dtype))  # several row chunks
    targets, weight = rng.integers(0, 50, size=300), rng.random(300).astype(dtype)
    weight[::3] = 0
    with use_backend(backend):
        got = F.cross_entropy_backward(logp, targets, weight, 0.1)
    want = F.cross_entropy_backward.formula(logp, targets, weight, 0.1)
    assert got.dtype == dtype
    np.testing.assert_allclose(got, want, rtol=1e-12 if dtype == np.float64 else 1e-5, atol=1e-7)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_training_step_is_the_plain_one_to_rounding(backend):
    def step():
        tl.manual_seed(0)
        model = Transformer(src_vocab=11, tgt_vocab=13, d_model=16, h=2, N=2, d_ff=32, dropout=0.0,
                            dtype=np.float64)
        rng = np.random.default_rng(1)
        src, tgt = rng.integers(1, 11, size=(3, 6)), rng.integers(1, 13, size=(3, 5))
        src[0, 4:] = 0
        logits = model(src, tgt[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, 13), tgt[:, 1:].reshape(-1), ignore_index=0,
                               label_smoothing=0.1)
        loss.backward()
        return [loss.data] + [p.grad for p in model.parameters()]
    with use_backend(backend):
        on, off = both(step)
    np.testing.assert_array_equal(on[0], off[0])
    assert_close(on, off, np.float64)
