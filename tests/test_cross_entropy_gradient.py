"""Cross-entropy's gradient w.r.t. the logits, w·(softmax − q) (nn.functional.cross_entropy_backward, the article's
"softmax minus one-hot" with label smoothing), against three oracles: log_softmax's backward of dy = −w·q written
here (float64 to 1e-10), central finite differences of the loss in float64, and, for its Numba twin
(kernels.cross_entropy), the NumPy formula; with ignored targets, label smoothing, all-ignored and −inf rows."""
import numpy as np
import pytest

from tinygrad_lite import Tensor, dispatch
from tinygrad_lite.gradcheck import numerical_gradient
from tinygrad_lite.kernels import use_backend
from tinygrad_lite.nn import functional as F

BACKENDS = ["numba", "numpy"]
KWARGS = [dict(ignore_index=0, label_smoothing=0.1), dict(label_smoothing=0.0),
          dict(ignore_index=2, label_smoothing=0.3, reduction="sum"),
          dict(ignore_index=1, label_smoothing=0.1, reduction="none")]
LOG_SOFTMAX_FORWARD, LOG_SOFTMAX_BACKWARD = dispatch.formula("log_softmax_forward"), dispatch.formula(
    "log_softmax_backward")


def loss_and_grad(logits, target, dtype, **kwargs):
    """The loss and d(1.5 · Σ loss)/dlogits (1.5: an output gradient other than 1)."""
    x = Tensor(logits.astype(dtype), requires_grad=True)
    loss = F.cross_entropy(x, target, **kwargs)
    (loss.sum() * 1.5).backward()
    return loss.data, x.grad


def through_log_softmax(logits, target, ignore_index=-100, label_smoothing=0.0, reduction="mean"):
    """The same gradient the long way: dy = −w·q, then log_softmax's backward dy − softmax·Σdy (rows, C)."""
    valid = target != ignore_index
    w = 1.5 * valid / (max(valid.sum(), 1) if reduction == "mean" else 1.0)
    n_classes = logits.shape[1]
    dy = -w[:, None] * np.full(logits.shape, label_smoothing / n_classes)
    dy[np.arange(len(target)), np.where(valid, target, 0)] -= w * (1.0 - label_smoothing)
    return LOG_SOFTMAX_BACKWARD(LOG_SOFTMAX_FORWARD(logits), dy)


def targets(rng, n, n_classes, ignore_index=None):
    target = rng.integers(0, n_classes, size=n)
    if ignore_index is not None:
        target[::5] = ignore_index
    return target


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("kwargs", KWARGS)
def test_the_gradient_is_log_softmaxs_backward_of_minus_w_q(backend, dtype, kwargs):
    rng = np.random.default_rng(0)
    logits, target = rng.standard_normal((37, 11)) * 3, targets(rng, 37, 11, kwargs.get("ignore_index"))
    with use_backend(backend):
        _, grad = loss_and_grad(logits, target, dtype, **kwargs)
    want = through_log_softmax(logits.astype(dtype).astype(np.float64), target, **kwargs)
    rtol, atol = (1e-10, 1e-12) if dtype == np.float64 else (2e-5, 1e-7)
    assert grad.dtype == dtype
    np.testing.assert_allclose(grad, want, rtol=rtol, atol=atol)
    assert np.abs(grad).max() > 0.01


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("kwargs", KWARGS)
def test_the_gradient_is_the_losss_finite_differences(backend, kwargs):
    rng = np.random.default_rng(1)
    logits, target = rng.standard_normal((9, 6)) * 2, targets(rng, 9, 6, kwargs.get("ignore_index"))
    with use_backend(backend):
        _, grad = loss_and_grad(logits, target, np.float64, **kwargs)
        numeric = numerical_gradient(lambda: 1.5 * F.cross_entropy(Tensor(logits), target, **kwargs).data.sum(),
                                     logits)
    np.testing.assert_allclose(grad, numeric, rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("backend", BACKENDS)
def test_class_dim_one_layout_all_ignored_and_dead_rows(backend):
    rng = np.random.default_rng(1)
    logits, target = rng.standard_normal((3, 7, 4)), rng.integers(0, 7, size=(3, 4))
    with use_backend(backend):
        _, grad = loss_and_grad(logits, target, np.float64, label_smoothing=0.2)
        rows = np.moveaxis(logits, 1, -1).reshape(-1, 7)
        want = through_log_softmax(rows, target.reshape(-1), label_smoothing=0.2)
        np.testing.assert_allclose(np.moveaxis(grad, 1, -1).reshape(-1, 7), want, rtol=1e-10, atol=1e-12)
        loss, grad = loss_and_grad(logits[:, :, 0], np.full(3, 5), np.float64, ignore_index=5)
        assert loss == 0 and grad.shape == (3, 7) and not grad.any()
        dead = rng.standard_normal((4, 6))
        dead[2] = -np.inf
        with np.errstate(all="ignore"):
            _, grad = loss_and_grad(dead, np.array([1, 2, 3, 4]), np.float64, ignore_index=3)
    assert not grad[2].any() and grad[0].any()                       # the −inf row's target is ignored
    live = [0, 1, 3]
    np.testing.assert_allclose(grad[live], through_log_softmax(dead[live], np.array([1, 2, 4])), rtol=1e-10,
                               atol=1e-12)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("eps", [0.0, 0.1])
def test_the_kernel_matches_the_formula(backend, dtype, eps):
    rng = np.random.default_rng(2)
    logp = LOG_SOFTMAX_FORWARD((rng.standard_normal((300, 50)) * 4).astype(dtype))  # several row chunks
    logp[7] = -np.inf                                                               # a dead row
    targets_, weight = rng.integers(0, 50, size=300), rng.random(300).astype(dtype)
    weight[::3] = 0                                                                 # ignored targets
    with use_backend(backend):
        got = F.cross_entropy_backward(logp, targets_, weight, eps)
    want = F.cross_entropy_backward.formula(logp, targets_, weight, eps)
    assert got.dtype == dtype and not got[7].any() and not got[::3].any()
    np.testing.assert_allclose(got, want, rtol=1e-12 if dtype == np.float64 else 1e-5, atol=1e-7)
