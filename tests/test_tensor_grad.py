"""Every Tensor op gradchecked in float64 on hypothesis-drawn shapes (broadcasting,
size-1 dims, 0-d tensors), plus the autograd engine's own behaviour."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import array_shapes, mutually_broadcastable_shapes

from tinygrad_lite import GradcheckError, Tensor, gradcheck, no_grad

SETTINGS = settings(max_examples=15, deadline=None)


def rand(shape, seed=0, positive=False):
    x = np.random.default_rng(seed).standard_normal(shape)
    if positive:
        x = np.abs(x) + 0.5
    return Tensor(x, requires_grad=True)


def nudge_from_ties(x: np.ndarray) -> np.ndarray:
    """Spread values apart so max/relu/clamp kinks sit far from the finite-difference step."""
    flat = x.reshape(-1)
    order = np.argsort(flat, kind="stable")
    flat[order] = np.linspace(-2, 2, flat.size) if flat.size > 1 else flat
    return x


UNARY = {
    "neg": lambda x: -x,
    "exp": lambda x: x.exp(),
    "tanh": lambda x: x.tanh(),
    "sigmoid": lambda x: x.sigmoid(),
    "gelu": lambda x: x.gelu(),
    "gelu_tanh": lambda x: x.gelu(approximate="tanh"),
    "sin_cos": lambda x: x.sin() * x.cos(),
    "pow3": lambda x: x ** 3,
    "rsub_rdiv": lambda x: (1 - x) * 2 / (x * x + 1),
}
POSITIVE = {
    "log": lambda x: x.log(),
    "sqrt": lambda x: x.sqrt(),
    "pow_half": lambda x: x ** 0.5,
    "rpow": lambda x: 2.0 ** x,
}
KINKED = {
    "relu": lambda x: x.relu(),
    "clamp": lambda x: x.clamp(-0.5, 0.7),
    "abs": lambda x: x.abs(),
    "max_all": lambda x: x.max(),
}


@SETTINGS
@given(shape=array_shapes(min_dims=0, max_dims=3, min_side=1, max_side=4), name=st.sampled_from(sorted(UNARY)))
def test_unary_ops_gradcheck(shape, name):
    assert gradcheck(UNARY[name], rand(shape))


@SETTINGS
@given(shape=array_shapes(min_dims=0, max_dims=3, min_side=1, max_side=4), name=st.sampled_from(sorted(POSITIVE)))
def test_positive_domain_ops_gradcheck(shape, name):
    assert gradcheck(POSITIVE[name], rand(shape, positive=True))


@SETTINGS
@given(shape=array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=4), name=st.sampled_from(sorted(KINKED)))
def test_kinked_ops_gradcheck(shape, name):
    x = rand(shape)
    x.data = nudge_from_ties(x.data) + 0.013
    assert gradcheck(KINKED[name], x)


BINARY = {
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "mul": lambda a, b: a * b,
    "div": lambda a, b: a / (b * b + 1),
    "maximum": lambda a, b: a.maximum(b),
    "pow": lambda a, b: (a * a + 0.5) ** b,
    "where": lambda a, b: Tensor.where(a.data > 0, a, b),
}


@SETTINGS
@given(shapes=mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=3, max_side=3),
       name=st.sampled_from(sorted(BINARY)))
def test_binary_ops_broadcast_gradcheck(shapes, name):
    a, b = rand(shapes.input_shapes[0], 1), rand(shapes.input_shapes[1], 2)
    if name == "maximum":
        b.data = b.data + 0.37  # no ties between a and b
    out = BINARY[name](a, b)
    assert out.shape == shapes.result_shape
    assert gradcheck(BINARY[name], a, b)


@SETTINGS
@given(shape=array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=4), keepdim=st.booleans(), data=st.data())
def test_reductions_gradcheck(shape, keepdim, data):
    dim = data.draw(st.integers(-len(shape), len(shape) - 1))
    x = rand(shape)
    x.data = nudge_from_ties(x.data)
    assert gradcheck(lambda t: t.sum(dim, keepdim), x)
    assert gradcheck(lambda t: t.mean(dim, keepdim), x)
    assert gradcheck(lambda t: t.amax(dim, keepdim), x)
    assert gradcheck(lambda t: t.logsumexp(dim, keepdim), x)
    assert gradcheck(lambda t: t.softmax(dim), x)
    assert gradcheck(lambda t: t.log_softmax(dim), x)
    if shape[dim] > 1:
        assert gradcheck(lambda t: t.var(dim, keepdim), x)
        assert gradcheck(lambda t: t.var(dim, keepdim, correction=0), x)


def test_reductions_over_several_dims_and_all():
    x = rand((2, 3, 4))
    assert gradcheck(lambda t: t.sum((0, 2)), x)
    assert gradcheck(lambda t: t.mean((-1, 0), keepdim=True), x)
    assert gradcheck(lambda t: t.var(), x)
    assert gradcheck(lambda t: t.sum(), x)


def test_shape_ops_gradcheck():
    x = rand((2, 3, 4))
    assert gradcheck(lambda t: t.reshape(4, 6) * Tensor(np.arange(24.0).reshape(4, 6)), x)
    assert gradcheck(lambda t: t.view(-1, 2)[::2], x)
    assert gradcheck(lambda t: t.transpose(0, 2) @ Tensor(np.ones((2, 1))), x)
    assert gradcheck(lambda t: t.permute(1, 2, 0) * Tensor(np.arange(2.0)), x)
    assert gradcheck(lambda t: t.unsqueeze(1).squeeze(1).squeeze(), x)
    y = rand((3, 1))
    assert gradcheck(lambda t: t.expand(2, 3, 5) * Tensor(np.arange(5.0)), y)
    assert gradcheck(lambda t: t.flatten(1), x)


def test_indexing_gradcheck():
    x = rand((4, 5))
    assert gradcheck(lambda t: t[1], x)
    assert gradcheck(lambda t: t[1:3, ::2], x)
    assert gradcheck(lambda t: t[-1, -2], x)
    assert gradcheck(lambda t: t[[0, 2, 2, 3]], x)  # repeated rows accumulate
    assert gradcheck(lambda t: t[np.array([0, 0, 1]), np.array([4, 4, 0])], x)
    assert gradcheck(lambda t: t[x.data > 0], x)
    assert gradcheck(lambda t: t[Tensor(np.array([[1, 1], [2, 3]]))], x)
    index = Tensor(np.array([[0, 4, 4], [1, 1, 2], [3, 0, 0], [2, 2, 2]]))
    assert gradcheck(lambda t: t.gather(1, index), x)
    assert gradcheck(lambda t: t.gather(0, Tensor(np.array([[0, 3, 3, 1, 0]]))), x)


def test_joining_and_masking_gradcheck():
    a, b = rand((2, 3), 1), rand((2, 2), 2)
    assert gradcheck(lambda p, q: Tensor.cat([p, q, p], dim=1), a, b)
    c = rand((2, 3), 3)
    assert gradcheck(lambda p, q: Tensor.stack([p, q * 2], dim=1), a, c)
    assert gradcheck(lambda p: p.split([1, 2], dim=1)[1] * 3, a)
    assert gradcheck(lambda p: p.split(2, dim=1)[1], a)
    mask = np.array([[True, False, True], [False, False, True]])
    assert gradcheck(lambda p: p.masked_fill(mask, -5.0), a)
    assert gradcheck(lambda p: p.softmax(-1, scale=0.5, mask=~mask), a)


@SETTINGS
@given(shapes=mutually_broadcastable_shapes(signature="(m,k),(k,n)->(m,n)", max_dims=2, max_side=3))
def test_matmul_broadcast_batches_gradcheck(shapes):
    a, b = rand(shapes.input_shapes[0], 1), rand(shapes.input_shapes[1], 2)
    out = a @ b
    assert out.shape == shapes.result_shape
    assert gradcheck(lambda p, q: p @ q, a, b)


def test_matmul_vectors():
    v, m = rand((3,), 1), rand((3, 4), 2)
    assert (v @ m).shape == (4,)
    assert (m.T @ v).shape == (4,)
    assert (v @ rand((3,), 3)).shape == ()
    assert gradcheck(lambda p, q: p @ q, v, m)
    assert gradcheck(lambda p, q: q.T @ p, v, m)
    assert gradcheck(lambda p, q: p @ q, rand((2, 5, 3), 4), v)


def test_layer_norm_and_dropout_gradcheck():
    x, w, b = rand((2, 3, 6)), rand((6,), 1), rand((6,), 2)
    assert gradcheck(lambda p, q, r: p.layer_norm(6, q, r), x, w, b)
    assert gradcheck(lambda p: p.layer_norm((3, 6)), x)
    import tinygrad_lite
    tinygrad_lite.manual_seed(0)
    keep = (x.dropout(0.3).data != 0)
    # the same mask each call: reseed inside fn
    def dropped(p):
        tinygrad_lite.manual_seed(0)
        return p.dropout(0.3)
    assert gradcheck(dropped, x)
    out = dropped(x).data
    assert np.allclose(out[keep], x.data[keep] / 0.7) and np.all(out[~keep] == 0)


def test_gradcheck_reports_the_worst_element():
    def wrong(t):  # forward says x², backward claims 3x
        return t._make(t.data ** 2, "bad_square", (t,), lambda g: (g * 3 * t.data,))
    with pytest.raises(GradcheckError, match=r"input 0 \(shape \(3,\)\): worst element \(\d+,\) analytic"):
        gradcheck(wrong, rand((3,)))
    with pytest.raises(TypeError, match="float64"):
        gradcheck(lambda t: t * 2, Tensor(np.ones(3, np.float32), requires_grad=True))


# ---------------------------------------------------------------- autograd engine
def test_gradients_accumulate_across_reuse_and_backward_calls():
    x = Tensor(np.array([2.0, -1.0]), requires_grad=True)
    y = (x * x + x).sum()  # dy/dx = 2x + 1
    y.backward()
    assert np.allclose(x.grad, [5.0, -1.0])
    (x * 3).sum().backward()
    assert np.allclose(x.grad, [8.0, 2.0])


def test_summed_gradients_are_fresh_arrays_and_exact():
    """A node reached along several paths gets the sum of their gradients, added in place into an
    array the engine made itself: no leaf's gradient shares memory with another's, with a retained
    gradient or with an op's output, and each equals the sum of its paths."""
    a = Tensor(np.array([1.0, 2.0, 3.0]), requires_grad=True)
    b = Tensor(np.array([-1.0, 0.5, 2.0]), requires_grad=True)
    c = a + b                       # add passes the same gradient array on to a and b
    c.retain_grad()
    d = c * 2.0 + c + c * c + a     # c along three paths, a along two
    d.sum().backward()
    dc = 2.0 + 1.0 + 2 * c.data
    assert np.allclose(c.grad, dc)
    assert np.allclose(a.grad, dc + 1.0) and np.allclose(b.grad, dc)
    arrays = [a.grad, b.grad, c.grad]
    assert not any(np.shares_memory(x, y) for i, x in enumerate(arrays) for y in arrays[i + 1:])
    a.grad += 100.0                 # an optimizer's in-place update touches nothing else
    assert np.allclose(b.grad, dc) and np.allclose(c.grad, dc)
    x = Tensor(np.arange(4.0), requires_grad=True)
    (x + x + x + x * 2.0).sum().backward()  # four paths: one sum made, then added to in place
    assert np.array_equal(x.grad, np.full(4, 5.0)) and x.grad.flags.writeable


def test_graph_is_freed_unless_retained():
    x = Tensor(np.ones(3), requires_grad=True)
    y = (x.exp() * 2).sum()
    y.backward(retain_graph=True)
    y.backward()
    assert np.allclose(x.grad, 4 * np.e)
    with pytest.raises(RuntimeError, match="already freed"):
        y.backward()


def test_deep_chain_backprops_iteratively():
    x = Tensor(np.array(1.0), requires_grad=True)
    y = x
    for _ in range(20000):
        y = y * 1.0001
    y.backward()
    assert np.isclose(x.grad, 1.0001 ** 20000)


def test_no_grad_records_nothing():
    x = Tensor(np.ones(2), requires_grad=True)
    with no_grad():
        y = x * 2
    assert not y.requires_grad and y._prev == ()

    @no_grad()
    def f(t):
        return t + 1
    assert not f(x).requires_grad
    assert (x * 2).requires_grad


def test_nodes_remember_op_and_inputs():
    a, b = Tensor(np.ones(2), requires_grad=True), Tensor(np.ones(2), requires_grad=True)
    c = a * b
    d = c + a
    assert d._op == "add" and d._prev == (c, a)
    assert c._op == "mul" and c._prev == (a, b)


def test_dtypes_are_kept():
    for dt in (np.float32, np.float64):
        x = Tensor(np.ones((2, 3), dt), requires_grad=True)
        outs = [x + 1, x * 2.5, x.exp(), x.softmax(-1), x @ Tensor(np.ones((3, 2), dt)), x.layer_norm(3),
                x.mean(), x ** 2, 1 / (x + 1), x.gelu(), x.sigmoid()]
        assert all(o.dtype == dt for o in outs), [o.dtype for o in outs]
        sum(o.sum() for o in outs).backward()
        assert x.grad.dtype == dt
    assert Tensor([1.0, 2.0]).dtype == np.float32
    assert Tensor(np.arange(3)).dtype.kind == "i"


def test_construction_helpers():
    import tinygrad_lite as tl
    assert tl.zeros(2, 3).shape == (2, 3) and tl.ones((4,)).data.sum() == 4
    assert tl.full((2,), 7.0).data.tolist() == [7.0, 7.0]
    tl.manual_seed(3)
    a = tl.randn(5).data
    tl.manual_seed(3)
    assert np.array_equal(a, tl.randn(5).data)
    assert tl.arange(4).data.tolist() == [0, 1, 2, 3]
    t = Tensor([[1.0, 2.0]], requires_grad=True)
    assert t.ndim == 2 and t.numpy() is t.data and Tensor([3.5]).item() == 3.5
    assert t.detach().requires_grad is False
    assert "shape=(1, 2)" in repr(t) and "float32" in repr(t)
