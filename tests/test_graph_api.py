"""The engine's public graph API, what viz walks: a node's `inputs`, its `op` and its `vjp(upstream)`
(the op's local backward rule), on a scalar Value and on a Tensor. Backpropagating by hand through
that API gives exactly what backward() gives, and it leaves every .grad alone."""
import numpy as np
import pytest

from tinygrad_lite.scalar import Value
from tinygrad_lite.tensor import Tensor


def by_hand(root, upstream, key=id):
    """Gradients of every node, by walking `inputs` and summing `vjp` (no backward())."""
    order, seen = [], set()

    def visit(node):
        if key(node) not in seen:
            seen.add(key(node))
            for p in node.inputs:
                visit(p)
            order.append(node)
    visit(root)
    grads = {key(root): upstream}
    for node in reversed(order):
        g = grads.get(key(node))
        if g is None or not node.inputs:
            continue
        for p, pg in zip(node.inputs, node.vjp(g)):
            if pg is not None:
                grads[key(p)] = pg if key(p) not in grads else grads[key(p)] + pg
    return grads


def test_a_value_names_its_inputs_op_and_local_rule():
    a, b, c = Value(2.0), Value(-3.0), Value(10.0)
    e = a * b
    d = e + c
    assert d.inputs == (e, c) and d.op == "+" and e.inputs == (a, b) and e.op == "*"
    assert a.inputs == () and a.op == "" and a.vjp(5.0) == ()
    assert e.vjp(1.0) == (b.data, a.data)
    assert e.vjp(0.5) == (0.5 * b.data, 0.5 * a.data)
    assert (a.grad, b.grad, e.grad) == (0.0, 0.0, 0.0)


def test_backprop_through_value_vjps_matches_backward():
    x, y = Value(0.7), Value(-1.3)
    out = ((x * y).tanh() + x ** 2 - y.exp() / (x + 3.0)) * (x * x).sigmoid() + (y - 1.0).relu()
    grads = by_hand(out, 1.0)
    out.backward()
    assert grads[id(x)] == pytest.approx(x.grad, rel=1e-12) and grads[id(y)] == pytest.approx(y.grad, rel=1e-12)
    assert x.grad != 0 and y.grad != 0


def test_a_tensor_names_its_inputs_op_and_backward_rule():
    x = Tensor(np.arange(6, dtype=np.float64).reshape(2, 3), requires_grad=True)
    w = Tensor(np.linspace(-1, 1, 12).reshape(3, 4), requires_grad=True)
    y = x @ w
    assert y.inputs == (x, w) and y.op == "matmul"
    assert x.inputs == () and x.op == "" and x.vjp(np.ones(3)) == ()
    g = np.arange(8, dtype=np.float64).reshape(2, 4)
    gx, gw = y.vjp(g)
    np.testing.assert_allclose(gx, g @ w.data.T)
    np.testing.assert_allclose(gw, x.data.T @ g)
    assert x.grad is None and w.grad is None and y.grad is None


def test_backprop_through_tensor_vjps_matches_backward():
    x = Tensor(np.array([[0.5, -1.0, 2.0], [1.5, 0.25, -0.75]]), requires_grad=True)
    w = Tensor(np.array([[1.0, -2.0], [0.5, 0.3], [-1.2, 0.7]]), requires_grad=True)
    loss = ((x @ w).tanh() * x.sum(dim=1, keepdim=True) + x.exp().mean()).sum()
    grads = by_hand(loss, np.ones(()))
    loss.backward()
    np.testing.assert_allclose(grads[id(x)], x.grad, rtol=1e-12)
    np.testing.assert_allclose(grads[id(w)], w.grad, rtol=1e-12)


def test_a_tensor_vjp_refuses_a_freed_graph_and_a_wrong_shape():
    x = Tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = x.exp()
    with pytest.raises(ValueError, match=r"vjp: upstream has shape \(2,\), expected \(3,\) \(op 'exp'\)"):
        y.vjp(np.ones(2, dtype=np.float32))
    s = y.sum()
    s.backward()
    with pytest.raises(RuntimeError, match="vjp: the graph through op 'exp' was freed"):
        y.vjp(np.ones(3, dtype=np.float32))


def test_the_explorer_says_when_backward_freed_the_graph():
    from tinygrad_lite import retain_grads
    from viz.explorer.trace import NOTE_NO_GRAPH, trace

    w = Tensor(np.arange(4, dtype=np.float32).reshape(2, 2), requires_grad=True)

    def loss_after_backward(retain_graph):
        loss = (w * w).sum() * 2.0
        with retain_grads():
            loss.backward(retain_graph=retain_graph)
        return trace(loss)
    freed, kept = loss_after_backward(False), loss_after_backward(True)
    assert NOTE_NO_GRAPH in freed.notes and not any(n["from"] for n in freed.nodes)
    assert NOTE_NO_GRAPH not in kept.notes
    to_w = kept.nodes[kept.index()[id(w)]]["from"]
    assert [f["arg"] for f in to_w] == [0, 1]  # w * w: w is both inputs, each sent 2 * w
    for f in to_w:
        np.testing.assert_array_equal(f["grad"]["head"], (2 * w.data).ravel())


def test_a_tensor_names_the_modules_whose_forward_made_it():
    from tinygrad_lite import nn

    class Outer(nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = nn.Linear(3, 2)

        def forward(self, x):
            return self.inner(x).relu()

    model, x = Outer(), Tensor(np.ones((1, 3), dtype=np.float32))
    y = model(x)
    assert y.scope == (model,) and y.inputs[0].scope == (model, model.inner) and x.scope == ()
