"""Tests for the scalar autograd engine `tinygrad_lite.scalar`.

Gradients are checked against central finite differences in float64 (and against
PyTorch where it is installed); the MLP is checked against micrograd, whose API it
copies, by running micrograd's moons demo with our imports.
"""
import math
import random

import numpy as np
import pytest

from tinygrad_lite.scalar import MLP, Layer, Neuron, Value

STEP = 1e-6


def numeric_grads(f, xs):
    """Central finite differences of the float function f at the point xs."""
    grads = []
    for i in range(len(xs)):
        up, down = list(xs), list(xs)
        up[i] += STEP
        down[i] -= STEP
        grads.append((f(*up) - f(*down)) / (2 * STEP))
    return grads


def autograd(f, xs):
    """f's value and gradient at xs, computed by building a Value graph."""
    leaves = [Value(x) for x in xs]
    out = f(*leaves)
    out.backward()
    return out.data, [leaf.grad for leaf in leaves]


def float_of(f):
    """f evaluated with Values, returning a float (so the same f serves both sides)."""
    return lambda *xs: f(*(Value(x) for x in xs)).data


CASES = {
    "add": (lambda a, b: a + b, [1.3, -0.7]),
    "sub": (lambda a, b: a - b, [1.3, -0.7]),
    "mul": (lambda a, b: a * b, [1.3, -0.7]),
    "div": (lambda a, b: a / b, [1.3, -0.7]),
    "pow_int": (lambda a: a**3, [-1.4]),
    "pow_fraction": (lambda a: a**0.5, [2.3]),
    "pow_negative": (lambda a: a**-2, [0.8]),
    "pow_zero": (lambda a: a**0, [0.8]),
    "pow_value_exponent": (lambda a, b: a**b, [1.7, 2.4]),
    "neg": (lambda a: -a, [0.4]),
    "exp": (lambda a: a.exp(), [0.9]),
    "log": (lambda a: a.log(), [0.35]),
    "tanh": (lambda a: a.tanh(), [0.6]),
    "relu_positive": (lambda a: a.relu(), [0.6]),
    "relu_negative": (lambda a: a.relu(), [-0.6]),
    "sigmoid_positive": (lambda a: a.sigmoid(), [1.2]),
    "sigmoid_negative": (lambda a: a.sigmoid(), [-3.5]),
    "gelu_positive": (lambda a: a.gelu(), [0.7]),
    "gelu_negative": (lambda a: a.gelu(), [-1.3]),
    "radd": (lambda a: 3 + a, [0.2]),
    "rsub": (lambda a: 1 - a, [0.2]),
    "rmul": (lambda a: 2 * a, [0.2]),
    "rtruediv": (lambda a: 2 / a, [0.7]),
    "rpow": (lambda a: 2**a, [0.7]),
    "composite": (lambda a, b, c: ((a * b).tanh() + (c**2 + 1).log() - b / (a.exp() + c.sigmoid()))
                  .relu() * 3, [0.5, -1.2, 0.8]),
}


@pytest.mark.parametrize("name", CASES)
def test_gradient_matches_central_differences(name):
    f, xs = CASES[name]
    _, grads = autograd(f, xs)
    assert grads == pytest.approx(numeric_grads(float_of(f), xs), rel=1e-6, abs=1e-8)


def test_values_match_python_math():
    a, b = Value(1.5), Value(-0.25)
    assert (a / b).data == 1.5 / -0.25
    assert (a**b).data == 1.5**-0.25
    assert a.exp().data == math.exp(1.5)
    assert b.tanh().data == math.tanh(-0.25)
    assert b.relu().data == 0.0 and a.relu().data == 1.5
    assert Value(-800.0).sigmoid().data == pytest.approx(0.0) and Value(800.0).sigmoid().data == 1.0


def test_gradients_match_torch():
    torch = pytest.importorskip("torch")
    xs = [0.5, -1.2, 0.8]
    f = CASES["composite"][0]
    data, grads = autograd(f, xs)

    def torch_f(a, b, c):
        return torch.relu(torch.tanh(a * b) + torch.log(c**2 + 1)
                          - b / (torch.exp(a) + torch.sigmoid(c))) * 3

    leaves = [torch.tensor(x, dtype=torch.float64, requires_grad=True) for x in xs]
    out = torch_f(*leaves)
    out.backward()
    assert data == pytest.approx(out.item(), rel=1e-12)
    assert grads == pytest.approx([leaf.grad.item() for leaf in leaves], rel=1e-12)


@pytest.mark.parametrize("x", [-2.5, -0.3, 0.0, 1.1])
def test_gelu_matches_torch_exact_gelu(x):
    torch = pytest.importorskip("torch")
    ours = Value(x)
    out = ours.gelu()
    out.backward()
    theirs = torch.tensor(x, dtype=torch.float64, requires_grad=True)
    torch.nn.functional.gelu(theirs).backward()
    assert out.data == pytest.approx(torch.nn.functional.gelu(theirs).item(), rel=1e-12, abs=1e-15)
    assert ours.grad == pytest.approx(theirs.grad.item(), rel=1e-12)


def test_reused_node_accumulates_gradient():
    a = Value(3.0)
    out = a * a + a
    out.backward()
    assert a.grad == 2 * 3.0 + 1


def test_value_exponent_gradients():
    base, exponent = Value(2.0), Value(3.0)
    out = base**exponent
    out.backward()
    assert out.data == 8.0
    assert base.grad == pytest.approx(3.0 * 2.0**2)
    assert exponent.grad == pytest.approx(8.0 * math.log(2.0))
    assert out._prev == (base, exponent) and out._op == "**"


def test_value_exponent_at_zero_and_negative_base():
    exponent = Value(2.0)
    (Value(0.0) ** exponent).backward()
    assert exponent.grad == 0.0
    exponent = Value(2.0)
    out = Value(-3.0) ** exponent
    out.backward()
    assert out.data == 9.0 and math.isnan(exponent.grad)


def test_reflected_ops_keep_operand_order():
    v = Value(4.0)
    cases = [(2 + v, 2, 6.0), (1 - v, 1, -3.0), (3 * v, 3, 12.0), (2 / v, 2, 0.5), (2**v, 2, 16.0)]
    for out, number, expected in cases:
        assert out.data == expected
        constant, same = out._prev
        assert constant.data == number and constant._prev == () and same is v


def test_numpy_scalars_defer_to_value():
    v = Value(3.0)
    out = np.float64(2.0) * v - np.int64(1)
    assert isinstance(out, Value) and out.data == 5.0
    out.backward()
    assert v.grad == 2.0


def test_graph_attributes():
    a, b = Value(2.0, label="a"), Value(3.0, label="b")
    c = a * b
    d = c**2
    assert c._prev == (a, b) and c._op == "*"
    assert d._prev == (c,) and d._op == "**2"
    assert a._prev == () and a._op == "" and a.label == "a" and c.label == ""
    assert repr(a) == "Value(data=2.0, grad=0.0, label='a')"
    assert repr(c) == "Value(data=6.0, grad=0.0)"


def test_long_chain_backpropagates_without_recursion_error():
    x = Value(0.5)
    y = x
    for _ in range(100_000):
        y = y + x
    y.backward()
    assert x.grad == 100_001
    assert y.data == pytest.approx(0.5 * 100_001)


def test_backward_twice_accumulates_leaves_and_resets_interior():
    a, b = Value(2.0), Value(-3.0)
    inner = a * b
    out = inner + a
    out.backward()
    once = (a.grad, b.grad, inner.grad, out.grad)
    assert once == (b.data + 1, a.data, 1.0, 1.0)
    out.backward()
    assert (a.grad, b.grad) == (2 * once[0], 2 * once[1])
    assert (inner.grad, out.grad) == (1.0, 1.0)


def test_backward_on_a_leaf_sets_its_grad_to_one():
    leaf = Value(5.0)
    leaf.backward()
    leaf.backward()
    assert leaf.grad == 1.0


@pytest.mark.parametrize("bad", ["abc", None, 1 + 2j, [1.0]])
def test_non_number_is_a_type_error_naming_it(bad):
    with pytest.raises(TypeError, match=type(bad).__name__):
        Value(bad)


def test_non_number_operand_is_a_type_error():
    with pytest.raises(TypeError, match="str"):
        Value(1.0) + "2"
    with pytest.raises(TypeError, match="exponent"):
        Value(1.0) ** "2"


@pytest.mark.parametrize("x", [0.0, -2.5])
def test_log_of_non_positive_is_a_value_error_naming_it(x):
    with pytest.raises(ValueError, match=f"log.*{x}"):
        Value(x).log()


def test_division_by_zero_value_has_a_clear_message():
    with pytest.raises(ZeroDivisionError, match="divide 1.5 by a Value equal to 0"):
        Value(1.5) / Value(0.0)
    with pytest.raises(ZeroDivisionError, match="divide 2.0"):
        2 / Value(0)
    with pytest.raises(ZeroDivisionError, match="negative power -1"):
        Value(0.0) ** -1


def test_power_and_exp_domain_errors_are_clear():
    with pytest.raises(ValueError, match="negative base -8.0 with non-integer exponent 0.5"):
        Value(-8.0) ** 0.5
    with pytest.raises(OverflowError, match="exp"):
        Value(1000.0).exp()


def test_neuron_rejects_bad_act_and_wrong_input_count():
    with pytest.raises(ValueError, match="Neuron: act must be one of .*'gelu', 'linear'.*, got 'swish'"):
        Neuron(2, act="swish")
    with pytest.raises(ValueError, match="expected 2 inputs, got 3"):
        Neuron(2)([1.0, 2.0, 3.0])


@pytest.mark.parametrize("act, f", [("relu", lambda z: max(z, 0.0)), ("tanh", math.tanh),
                                    ("sigmoid", lambda z: 1 / (1 + math.exp(-z))),
                                    ("gelu", lambda z: z * (1 + math.erf(z / math.sqrt(2))) / 2),
                                    ("linear", lambda z: z)])
def test_neuron_computes_act_of_weighted_sum(act, f):
    neuron = Neuron(3, act=act, rng=random.Random(0))
    neuron.b.data = 0.1
    x = [0.5, -1.0, 2.0]
    z = neuron.b.data + sum(w.data * xi for w, xi in zip(neuron.w, x))
    assert neuron(x).data == pytest.approx(f(z), rel=1e-12)
    assert Neuron(3, nonlin=False, act=act, rng=random.Random(0))(x).data == pytest.approx(z - 0.1)


def test_mlp_shapes_seed_and_zero_grad():
    model = MLP(2, [16, 16, 1], seed=7)
    assert len(model.parameters()) == (2 * 16 + 16) + (16 * 16 + 16) + (16 + 1)
    assert [p.data for p in MLP(2, [16, 16, 1], seed=7).parameters()] == \
        [p.data for p in model.parameters()]
    assert [p.data for p in MLP(2, [16, 16, 1], seed=8).parameters()] != \
        [p.data for p in model.parameters()]
    out = model([0.3, -0.2])
    assert isinstance(out, Value)
    out.backward()
    assert any(p.grad != 0 for p in model.parameters())
    model.zero_grad()
    assert all(p.grad == 0 for p in model.parameters())


def test_mlp_without_seed_uses_global_random_like_micrograd():
    random.seed(3)
    first = [p.data for p in MLP(2, [4, 1]).parameters()]
    random.seed(3)
    assert [p.data for p in MLP(2, [4, 1]).parameters()] == first


def test_mlp_act_applies_to_hidden_layers_only():
    model = MLP(2, [3, 2], act="tanh", seed=0)
    assert repr(model) == ("MLP of [Layer of [TanhNeuron(2), TanhNeuron(2), TanhNeuron(2)], "
                           "Layer of [LinearNeuron(3), LinearNeuron(3)]]")
    assert repr(MLP(2, [1], seed=0)) == "MLP of [Layer of [LinearNeuron(2)]]"
    assert isinstance(Layer(2, 3)([1.0, 2.0]), list)
    assert isinstance(MLP(1, [1, 1], seed=0)([Value(0.5)]), Value)


def make_moons(n_samples, noise=0.1, seed=0):
    """Two interleaving half circles with 0/1 labels, like sklearn.datasets.make_moons."""
    rng = np.random.default_rng(seed)
    angles = np.linspace(0, np.pi, n_samples // 2)
    outer = np.c_[np.cos(angles), np.sin(angles)]
    inner = np.c_[1 - np.cos(angles), 0.5 - np.sin(angles)]
    X = np.r_[outer, inner] + rng.normal(scale=noise, size=(2 * len(angles), 2))
    y = np.r_[np.zeros(len(angles), dtype=int), np.ones(len(angles), dtype=int)]
    return X, y


def moons_loss(model, X, y, value_cls):
    """The loss function of micrograd's demo notebook, with `value_cls` for Value."""
    inputs = [list(map(value_cls, xrow)) for xrow in X]
    scores = list(map(model, inputs))
    losses = [(1 + -yi * scorei).relu() for yi, scorei in zip(y, scores)]
    data_loss = sum(losses) * (1.0 / len(losses))
    alpha = 1e-4
    reg_loss = alpha * sum(p * p for p in model.parameters())
    total_loss = data_loss + reg_loss
    accuracy = [(yi > 0) == (scorei.data > 0) for yi, scorei in zip(y, scores)]
    return total_loss, sum(accuracy) / len(accuracy)


def test_micrograd_moons_demo_runs_with_our_imports():
    random.seed(1337)
    np.random.seed(1337)
    X, y = make_moons(40)
    y = y * 2 - 1
    model = MLP(2, [16, 16, 1])
    assert str(model).startswith("MLP of [Layer of [ReLUNeuron(2), ReLUNeuron(2)")
    losses = []
    for k in range(8):
        total_loss, acc = moons_loss(model, X, y, Value)
        model.zero_grad()
        total_loss.backward()
        learning_rate = 1.0 - 0.9 * k / 100
        for p in model.parameters():
            p.data -= learning_rate * p.grad
        losses.append(total_loss.data)
    assert losses[-1] < 0.8 * losses[0]
    assert 0.5 <= acc <= 1.0


def test_same_weights_give_same_loss_and_grads_as_micrograd():
    pytest.importorskip("micrograd")
    from micrograd.engine import Value as MicroValue
    from micrograd.nn import MLP as MicroMLP

    ours, theirs = MLP(2, [16, 16, 1], seed=0), MicroMLP(2, [16, 16, 1])
    for p_ours, p_theirs in zip(ours.parameters(), theirs.parameters(), strict=True):
        p_theirs.data = p_ours.data
    X, y = make_moons(30)
    y = y * 2 - 1
    our_loss, our_acc = moons_loss(ours, X, y, Value)
    their_loss, their_acc = moons_loss(theirs, X, y, MicroValue)
    our_loss.backward()
    their_loss.backward()
    assert our_loss.data == their_loss.data and our_acc == their_acc
    assert [p.grad for p in ours.parameters()] == \
        pytest.approx([p.grad for p in theirs.parameters()], rel=1e-12, abs=1e-15)


def test_the_scalar_classes_live_in_scalar_and_the_top_level_has_no_ambiguous_mlp():
    import tinygrad_lite
    from tinygrad_lite import nn

    assert tinygrad_lite.Value is Value and tinygrad_lite.scalar.MLP is MLP
    assert not {"MLP", "Layer", "Neuron"} & set(tinygrad_lite.__all__)
    with pytest.raises(AttributeError, match=r"tinygrad_lite.scalar.MLP \(on Values\), or tinygrad_lite.nn.MLP"):
        tinygrad_lite.MLP  # noqa: B018
    with pytest.raises(AttributeError, match="use tinygrad_lite.scalar.Neuron"):
        tinygrad_lite.Neuron  # noqa: B018
    assert nn.MLP is not MLP


def test_activation_names_are_one_list_shared_by_every_floor():
    """One list of names (checks.ACTIVATIONS) and one message for a name not in it, whether the
    scalar MLP or the tensor MLP is asked for it."""
    from tinygrad_lite import nn
    from tinygrad_lite.checks import ACTIVATIONS
    from tinygrad_lite.nn.activation import ACTIVATION_MODULES
    from tinygrad_lite.tensor import Tensor

    assert set(ACTIVATIONS) == set(ACTIVATION_MODULES) | {"linear"}
    for name in set(ACTIVATIONS) - {"linear"}:
        assert callable(getattr(Value, name)) and callable(getattr(Tensor, name))
        assert isinstance(MLP(2, [2, 1], act=name, seed=0)([0.3, -0.2]), Value)
        assert [type(m).__name__.lower() for m in nn.MLP([2, 2, 1], act=name)] == ["linear", name, "linear"]
    assert [type(m).__name__ for m in nn.MLP([2, 3, 1], act="linear")] == ["Linear", "Linear"]
    messages = []
    for make in (lambda: MLP(2, [1], act="swish"), lambda: nn.MLP([2, 1], act="swish")):
        with pytest.raises(ValueError) as info:
            make()
        messages.append(str(info.value).split(": ", 1)[1])
    assert messages[0] == messages[1] == f"act must be one of {list(ACTIVATIONS)}, got 'swish'"
