"""Tensor behaviour beyond single ops: the Value bridge, fully masked rows, memory over a
training loop, and clear errors for bad input."""
import gc
import resource

import numpy as np
import pytest

from tinygrad_lite import Tensor, Value


# ---------------------------------------------------------------- the bridge to Value
def mlp_in_values(x, w1, b1, w2, b2, y):
    """A 2-layer tanh MLP and its squared-error loss, one scalar at a time."""
    loss = Value(0.0)
    for xi, yi in zip(x, y):
        hidden = [sum((w1[i][j] * xi[i] for i in range(len(xi))), b1[j]).tanh() for j in range(len(b1))]
        out = sum((w2[j][0] * hidden[j] for j in range(len(hidden))), b2[0])
        loss = loss + (out - yi) ** 2
    return loss / len(x)


def test_same_mlp_in_values_and_tensors_gives_same_loss_and_grads():
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((5, 3)), rng.standard_normal((5, 1))
    params = {"w1": rng.standard_normal((3, 4)), "b1": rng.standard_normal(4),
              "w2": rng.standard_normal((4, 1)), "b2": rng.standard_normal(1)}

    vals = {k: np.vectorize(Value, otypes=[object])(v) for k, v in params.items()}
    v_loss = mlp_in_values(x.tolist(), vals["w1"].tolist(), vals["b1"].tolist(), vals["w2"].tolist(),
                           vals["b2"].tolist(), y[:, 0].tolist())
    v_loss.backward()

    ts = {k: Tensor(v, requires_grad=True) for k, v in params.items()}
    hidden = (Tensor(x) @ ts["w1"] + ts["b1"]).tanh()
    t_loss = ((hidden @ ts["w2"] + ts["b2"] - Tensor(y)) ** 2).mean()
    t_loss.backward()

    assert t_loss.dtype == np.float64
    assert abs(t_loss.item() - v_loss.data) < 1e-9
    for k in params:
        v_grads = np.vectorize(lambda v: v.grad, otypes=[float])(vals[k])
        np.testing.assert_allclose(ts[k].grad, v_grads, rtol=0, atol=1e-9)


# ---------------------------------------------------------------- numerics
def test_fully_masked_rows_give_zeros_not_nan():
    x = Tensor(np.random.default_rng(0).standard_normal((2, 4)), requires_grad=True)
    mask = np.array([[True, True, False, True], [False, False, False, False]])
    p = x.softmax(-1, mask=mask)
    assert np.isfinite(p.data).all()
    np.testing.assert_array_equal(p.data[1], 0.0)
    assert np.isclose(p.data[0].sum(), 1.0) and p.data[0, 2] == 0
    p.sum().backward()
    assert np.isfinite(x.grad).all()
    # the same rule for -inf logits written in directly
    q = Tensor(np.full((1, 3), -np.inf)).softmax(-1)
    np.testing.assert_array_equal(q.data, 0.0)


def test_log_softmax_and_logsumexp_of_all_minus_inf_row():
    x = Tensor(np.array([[-np.inf, -np.inf], [0.0, 1.0]]), requires_grad=True)
    lse = x.logsumexp(-1)
    assert lse.data[0] == -np.inf and np.isfinite(lse.data[1])
    lse[1].backward()
    assert np.isfinite(x.grad).all()


def _rss_kib() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def test_training_loop_memory_does_not_grow():
    rng = np.random.default_rng(0)
    x = Tensor(rng.standard_normal((64, 32)).astype(np.float32))
    y = Tensor(rng.standard_normal((64, 1)).astype(np.float32))
    w1 = Tensor(rng.standard_normal((32, 64)).astype(np.float32) * 0.1, requires_grad=True)
    w2 = Tensor(rng.standard_normal((64, 1)).astype(np.float32) * 0.1, requires_grad=True)
    rss = {}
    for step in range(1, 1001):
        loss = (((x @ w1).relu() @ w2 - y) ** 2).mean()
        loss.backward()
        for w in (w1, w2):
            w.data -= 0.01 * w.grad
            w.grad = None
        if step in (100, 1000):
            gc.collect()
            rss[step] = _rss_kib()
    assert rss[1000] <= rss[100] * 1.05, rss


# ---------------------------------------------------------------- bad input
@pytest.mark.parametrize("fn, exc, pattern", [
    (lambda: Tensor(np.ones((2, 3))) + Tensor(np.ones((4,))), ValueError, r"add: shapes \(2, 3\) and \(4,\)"),
    (lambda: Tensor(np.ones((2, 3))) @ Tensor(np.ones((2, 3))), ValueError, r"matmul: inner dims.*\(2, 3\) @ \(2, 3\)"),
    (lambda: Tensor(np.ones((2, 2, 3))) @ Tensor(np.ones((3, 3, 1))), ValueError, r"matmul \(batch dims\)"),
    (lambda: Tensor(np.ones((2, 3)), requires_grad=True).exp().backward(), ValueError, r"backward.*shape \(2, 3\)"),
    (lambda: Tensor(np.ones((2, 3))).sum(dim=2), ValueError, r"sum: dim 2 is out of range.*2 dims"),
    (lambda: Tensor(np.ones((2, 3))).softmax(dim=-3), ValueError, r"softmax: dim -3 is out of range"),
    (lambda: Tensor(np.ones((2, 3)))[5], IndexError, r"getitem: index 5 is out of bounds.*\(2, 3\)"),
    (lambda: Tensor(np.ones((2, 3)))[Tensor(np.array([0, 7]))], IndexError, r"getitem.*max=7.*\(2, 3\)"),
    (lambda: Tensor(np.ones(3, np.float32)) * Tensor(np.ones(3, np.float64)), TypeError, r"mul: mixing dtypes"),
    (lambda: Tensor(np.ones((2, 3))).reshape(4, 2), ValueError, r"reshape: cannot reshape.*\(2, 3\).*\(4, 2\)"),
    (lambda: Tensor(np.ones((2, 3))).gather(1, Tensor(np.array([[0], [3]]))), IndexError, r"gather: index values"),
    (lambda: Tensor(np.ones((2, 3))).softmax(-1, mask=np.ones((3, 3), bool)), ValueError, r"softmax: mask of shape"),
    (lambda: Tensor.cat([Tensor(np.ones((2, 3))), Tensor(np.ones((3, 2)))], 0), ValueError, r"cat: shapes"),
    (lambda: Tensor("abc"), TypeError, r"Tensor: cannot make a tensor from str"),
    (lambda: Tensor(np.ones(2)).layer_norm(3), ValueError, r"layer_norm: normalized_shape \(3,\)"),
])
def test_bad_input_gets_a_clear_error(fn, exc, pattern):
    with pytest.raises(exc, match=pattern):
        fn()



@pytest.mark.parametrize("args, kwargs, want", [
    ((5,), {}, [0, 1, 2, 3, 4]),
    ((5,), {"step": 2}, [0, 2, 4]),
    ((1, 7, 3), {}, [1, 4]),
    ((0.0, 1.0, 0.25), {}, [0.0, 0.25, 0.5, 0.75]),
])
def test_arange_like_torch_including_step_without_stop(args, kwargs, want):
    np.testing.assert_array_equal(Tensor.arange(*args, **kwargs).data, want)


def test_toposort_puts_every_input_before_its_node_and_a_shared_leaf_gets_all_its_gradients():
    from tinygrad_lite.autograd import toposort
    rng = np.random.default_rng(0)
    w = Tensor(rng.standard_normal((3, 3)), requires_grad=True)  # used early and late in the graph
    b = Tensor(rng.standard_normal(3), requires_grad=True)
    x = Tensor(rng.standard_normal((2, 3)))
    h = (x @ w + b).tanh()
    y = (h * (h @ w) + b).sum() + (w * w).sum()
    order = toposort(y)
    position = {id(t): i for i, t in enumerate(order)}
    assert len(position) == len(order)
    for node in order:
        for parent in node._prev:
            if parent.requires_grad:
                assert position[id(parent)] < position[id(node)], node._op
    assert order[-1] is y and {id(w), id(b)} <= set(position)
    y.backward()
    eps, numeric = 1e-6, np.zeros_like(w.data)
    for i in np.ndindex(*w.shape):
        for sign in (1, -1):
            wd = w.data.copy()
            wd[i] += sign * eps
            hd = np.tanh(x.data @ wd + b.data)
            numeric[i] += sign * ((hd * (hd @ wd) + b.data).sum() + (wd * wd).sum()) / (2 * eps)
    np.testing.assert_allclose(w.grad, numeric, rtol=1e-6, atol=1e-8)
