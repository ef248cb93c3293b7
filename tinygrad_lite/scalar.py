"""Scalar autograd: a `Value` is one number that remembers how it was computed.

Every operation on Values adds a node to a computation graph; `backward()` walks
that graph from the output back to the inputs and applies the chain rule (the
article's "损失函数 与 反向传播": run the network, measure the loss, send the error
back to every parameter). `Neuron`, `Layer` and `MLP` build the article's
multilayer perceptron out of Values, with micrograd's API.

Each node stores its local derivatives (d out / d input) when it is created, so
backward needs no per-op code at all: it is one loop of the chain rule.
"""
import math
import numbers
import random

from .checks import activation


class Value:
    """A scalar in a computation graph, together with the gradient flowing into it.

    Attributes:
        data: the number, a float.
        grad: d(root)/d(self) after `root.backward()`; 0.0 until then.
        label: an optional name ("w1", "loss"), shown by the graph renderer.
        inputs, op, vjp: the graph, for tools that walk it (viz); see each.
    """

    __slots__ = ("_local_grads", "_op", "_prev", "data", "grad", "label")
    __array_ufunc__ = None  # make NumPy scalars defer to our reflected ops: np.float64(2) * v

    def __init__(self, data, _prev=(), _op="", _local_grads=(), label=""):
        self.data = data if type(data) is float else _as_float(data)
        self.grad = 0.0
        self.label = label
        self._prev = _prev
        self._op = _op
        self._local_grads = _local_grads  # d(self)/d(input) for each input, same order

    @property
    def inputs(self):
        """The Values the op that made this one read, in argument order; () for a leaf."""
        return self._prev

    @property
    def op(self):
        """That op's name ("+", "*", "**2", "tanh", ...); "" for a leaf."""
        return self._op

    def vjp(self, upstream):
        """The chain rule's local step: given upstream = d(root)/d(self), d(root)/d(input) for
        each of `inputs`, as a tuple. Pure: no .grad changes (vjp(1.0) gives the local slopes)."""
        return tuple(local * upstream for local in self._local_grads)

    def __add__(self, other):
        other = other if isinstance(other, Value) else Value(other)
        return Value(self.data + other.data, (self, other), "+", (1.0, 1.0))

    def __sub__(self, other):
        other = other if isinstance(other, Value) else Value(other)
        return Value(self.data - other.data, (self, other), "-", (1.0, -1.0))

    def __mul__(self, other):
        other = other if isinstance(other, Value) else Value(other)
        return Value(self.data * other.data, (self, other), "*", (other.data, self.data))

    def __truediv__(self, other):
        other = other if isinstance(other, Value) else Value(other)
        a, b = self.data, other.data
        if b == 0:
            raise ZeroDivisionError(f"Value division: cannot divide {a} by a Value equal to 0")
        return Value(a / b, (self, other), "/", (1.0 / b, -a / (b * b)))

    def __pow__(self, exponent):
        """self ** exponent, where exponent is a number or a Value."""
        base = self.data
        if isinstance(exponent, Value):
            out = _power(base, exponent.data)
            slopes = (_power_slope(base, exponent.data), _exponent_slope(base, out))
            return Value(out, (self, exponent), "**", slopes)
        if not isinstance(exponent, numbers.Real):
            raise TypeError(f"Value **: expected a real exponent, got {type(exponent).__name__}")
        return Value(_power(base, exponent), (self,), f"**{exponent}",
                     (_power_slope(base, exponent),))

    def __neg__(self):
        return Value(-self.data, (self,), "neg", (-1.0,))

    def __radd__(self, other):  # other + self, where other is a plain number
        return Value(other) + self

    def __rsub__(self, other):
        return Value(other) - self

    def __rmul__(self, other):
        return Value(other) * self

    def __rtruediv__(self, other):
        return Value(other) / self

    def __rpow__(self, other):
        return Value(other) ** self

    def exp(self):
        try:
            out = math.exp(self.data)
        except OverflowError:
            raise OverflowError(f"Value.exp: exp({self.data}) overflows a float") from None
        return Value(out, (self,), "exp", (out,))

    def log(self):
        """Natural logarithm; defined only for positive values."""
        if self.data <= 0:
            raise ValueError(f"Value.log: expected a positive value, got {self.data}")
        return Value(math.log(self.data), (self,), "log", (1.0 / self.data,))

    def tanh(self):
        t = math.tanh(self.data)
        return Value(t, (self,), "tanh", (1.0 - t * t,))

    def relu(self):
        positive = self.data > 0
        return Value(self.data if positive else 0.0, (self,), "relu", (1.0 if positive else 0.0,))

    def sigmoid(self):
        e = math.exp(-abs(self.data))  # never overflows
        s = 1.0 / (1.0 + e) if self.data >= 0 else e / (1.0 + e)
        return Value(s, (self,), "sigmoid", (s * (1.0 - s),))

    def gelu(self):
        """x·Φ(x), Φ the standard normal CDF (the exact GELU, as Tensor.gelu's default)."""
        x = self.data
        cdf = 0.5 * (1.0 + math.erf(x / math.sqrt(2.0)))
        pdf = math.exp(-0.5 * x * x) / math.sqrt(2.0 * math.pi)
        return Value(x * cdf, (self,), "gelu", (cdf + x * pdf,))

    def backward(self):
        """Set `grad` on every Value this one depends on: d(self)/d(that Value).

        Semantics, as in PyTorch: `self.grad` is set to 1; interior nodes (made by
        an op) are reset, so they hold this call's gradient; leaves (inputs and
        parameters) *accumulate*, so a second call adds the same gradients again.
        Call `zero_grad()` (or set `p.grad = 0`) between training steps.
        """
        order = self.topological_order()
        self.grad = 1.0
        for node in reversed(order):
            for child, local_grad in zip(node._prev, node._local_grads):
                child.grad += local_grad * node.grad

    def topological_order(self):
        """Every node reachable from self, each after all of its inputs.

        Iterative depth-first search (a recursive one dies past ~1,000 nodes);
        interior nodes get `grad = 0` on the way, ready to accumulate.
        """
        order, visited = [], {self}
        stack = [(self, iter(self._prev))]
        while stack:
            node, inputs = stack[-1]
            for child in inputs:
                if child not in visited:
                    visited.add(child)
                    stack.append((child, iter(child._prev)))
                    break
            else:  # all inputs done
                stack.pop()
                if node._prev:
                    node.grad = 0.0
                order.append(node)
        return order

    def __repr__(self):
        label = f", label={self.label!r}" if self.label else ""
        return f"Value(data={self.data}, grad={self.grad}{label})"


def _as_float(data):
    if isinstance(data, numbers.Real):
        return float(data)
    raise TypeError(f"Value expects a real number (int or float), "
                    f"got {type(data).__name__}: {data!r}")


def _power(base, exponent):
    """base ** exponent as a float, with errors that say what went wrong."""
    if base < 0 and not float(exponent).is_integer():
        raise ValueError(f"Value **: negative base {base} with non-integer exponent {exponent} "
                         f"has no real result")
    try:
        out = base ** exponent
    except ZeroDivisionError:
        raise ZeroDivisionError(f"Value **: 0 cannot be raised to the negative power {exponent}") \
            from None
    except OverflowError:
        raise OverflowError(f"Value **: {base} ** {exponent} overflows a float") from None
    return out


def _power_slope(base, exponent):
    """d(base ** exponent)/d(base); infinite at base 0 when 0 < exponent < 1 (e.g. sqrt)."""
    if exponent == 0:
        return 0.0
    if base == 0 and exponent < 1:
        return math.inf
    return exponent * base ** (exponent - 1)


def _exponent_slope(base, out):
    """d(base ** exponent)/d(exponent) = out * ln(base); 0 at base 0, NaN (undefined) below."""
    if base > 0:
        return out * math.log(base)
    return 0.0 if base == 0 else math.nan


_DISPLAY_NAMES = {"relu": "ReLU", "tanh": "Tanh", "sigmoid": "Sigmoid", "gelu": "GELU", "linear": "Linear"}


class Module:
    """Anything with parameters (micrograd's base class for Neuron, Layer, MLP)."""

    def zero_grad(self):
        for p in self.parameters():
            p.grad = 0.0

    def parameters(self):
        return []


class Neuron(Module):
    """act(w · x + b): a weighted sum of the inputs plus a bias, then a non-linearity.

    `act` names a Value method (one of `checks.ACTIVATIONS`); `nonlin=False` (or
    `act="linear"`) leaves out the non-linearity. Weights start uniform in [-1, 1) from
    `rng` (default: the global `random`, as in micrograd).
    """

    def __init__(self, nin, nonlin=True, act="relu", rng=None):
        activation("Neuron", act)
        rng = rng or random
        self.w = [Value(rng.uniform(-1, 1), label=f"w{i}") for i in range(nin)]
        self.b = Value(0.0, label="b")
        self.nonlin = nonlin and act != "linear"
        self.act = act if self.nonlin else "linear"

    def __call__(self, x):
        if isinstance(x, Value):
            x = [x]
        if len(x) != len(self.w):
            raise ValueError(f"Neuron: expected {len(self.w)} inputs, got {len(x)}")
        out = sum((wi * xi for wi, xi in zip(self.w, x)), self.b)
        return getattr(out, self.act)() if self.nonlin else out

    def parameters(self):
        return self.w + [self.b]

    def __repr__(self):
        return f"{_DISPLAY_NAMES[self.act]}Neuron({len(self.w)})"


class Layer(Module):
    """`nout` neurons reading the same inputs; returns a list (or one Value if nout == 1)."""

    def __init__(self, nin, nout, **kwargs):
        self.neurons = [Neuron(nin, **kwargs) for _ in range(nout)]

    def __call__(self, x):
        out = [n(x) for n in self.neurons]
        return out[0] if len(out) == 1 else out

    def parameters(self):
        return [p for n in self.neurons for p in n.parameters()]

    def __repr__(self):
        return f"Layer of [{', '.join(str(n) for n in self.neurons)}]"


class MLP(Module):
    """Multilayer perceptron: layers of sizes `nouts`, `act` between them, linear output.

    MLP(2, [16, 16, 1]) is micrograd's moons classifier. `act` is "relu" (default,
    like micrograd), "tanh", "sigmoid", "gelu" or "linear"; `seed` makes the init reproducible.
    """

    def __init__(self, nin, nouts, act="relu", seed=None):
        rng = random if seed is None else random.Random(seed)
        sizes = [nin] + list(nouts)
        self.layers = [Layer(sizes[i], sizes[i + 1], nonlin=i != len(nouts) - 1, act=act, rng=rng)
                       for i in range(len(nouts))]

    def __call__(self, x):
        for layer in self.layers:
            x = layer(x)
        return x

    def parameters(self):
        return [p for layer in self.layers for p in layer.parameters()]

    def __repr__(self):
        return f"MLP of [{', '.join(str(layer) for layer in self.layers)}]"
