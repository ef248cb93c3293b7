"""Tensor: n-d autograd on NumPy, with broadcasting and a PyTorch-shaped API.

Every op is defined once, its forward and backward side by side:

    def exp(self):
        out = np.exp(self.data)
        return self._make(out, "exp", (self,), lambda g: (g * out,))

`_make` records the op's name, its inputs and the backward function, which maps
the gradient of the output to one gradient per input. Binary ops broadcast as
NumPy does and reduce each gradient back to its input's shape (`unbroadcast`).
matmul, softmax, log_softmax and layer_norm run through `tinygrad_lite.kernels`
(Numba JIT with NumPy twins). What runs here is the plain version of each op; a speed trick
(tinygrad_lite/fast.py) takes over only behind one visible branch, `if TRICKS.<name>:`.
"""
from __future__ import annotations

import inspect
import math
from collections import namedtuple

import numpy as np

from . import autograd, fast
from . import kernels as K
from .fast import TRICKS
from .kernels.backend import unbroadcast
from .random import rng

FLOAT_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))
_GRAD_STATE = autograd._state  # per-thread grad mode, scope and anomaly flags, read by every op
MaxResult = namedtuple("MaxResult", ["values", "indices"])


def _norm_dim(op: str, dim: int, ndim: int) -> int:
    if not isinstance(dim, (int, np.integer)) or isinstance(dim, bool):
        raise TypeError(f"{op}: dim must be an int, got {type(dim).__name__}")
    lo, hi = -max(ndim, 1), max(ndim, 1) - 1
    if not lo <= dim <= hi:
        raise ValueError(f"{op}: dim {dim} is out of range for a tensor with {ndim} dims "
                         f"(expected a dim in [{lo}, {hi}])")
    return dim % max(ndim, 1)


def _norm_dims(op: str, dim, ndim: int):
    """None -> all axes; int or sequence -> a tuple of non-negative axes."""
    if dim is None:
        return None
    dims = (dim,) if isinstance(dim, (int, np.integer)) else tuple(dim)
    return tuple(sorted(_norm_dim(op, d, ndim) for d in dims))


def _public_signature(fn):
    """Leave parameters named `_...` (the reflected-op flag) out of help() and inspect.signature;
    the function itself is returned unchanged, so calls cost the same."""
    sig = inspect.signature(fn)
    fn.__signature__ = sig.replace(parameters=[p for p in sig.parameters.values()
                                               if not p.name.startswith("_")])
    return fn


def _as_array(data, dtype=None) -> np.ndarray:
    if isinstance(data, Tensor):
        data = data.data
    if dtype is not None:
        return np.asarray(data, dtype=dtype)
    arr = np.asarray(data)
    if arr.dtype == np.float64 and not isinstance(data, (np.ndarray, np.generic)):
        arr = arr.astype(np.float32)  # Python floats and lists default to float32, as in PyTorch
    elif arr.dtype.kind == "f" and arr.dtype not in FLOAT_DTYPES:
        arr = arr.astype(np.float32)
    elif arr.dtype.kind not in "fbiu":
        raise TypeError(f"Tensor: cannot make a tensor from {type(data).__name__} "
                        f"(NumPy dtype {arr.dtype}); expected numbers, nested lists or an ndarray")
    return arr


class Tensor:
    """An n-d array with autograd, like torch.Tensor: the values are a NumPy ndarray (`.data`),
    and `backward()` fills `.grad` of every tensor made with requires_grad=True that the result
    depends on.

    dtypes: Python floats (and lists of them) become float32, as in PyTorch; a float32 or float64
    ndarray keeps its dtype; integer and bool data keep theirs (Python ints give int64) and cannot
    require grad. A Python number operand takes the tensor's dtype, and ops refuse to mix float32
    with float64 rather than silently promote: convert one side with .float() or .double().

    >>> x = Tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    >>> (x * x).sum().backward()
    >>> x.grad
    array([[2., 4.],
           [6., 8.]], dtype=float32)
    """

    __slots__ = {  # a dict: help() shows the values as the attributes' docstrings
        "data": "The values: a NumPy ndarray (what .numpy() returns, shared, not copied).",
        "grad": "The gradient (an ndarray of the tensor's shape) once backward() reached it, "
                "else None.",
        "requires_grad": "Whether ops record this tensor so backward() reaches it "
                         "(torch's .requires_grad).",
        "_op": "Name of the op that made the tensor; '' for a leaf.",
        "_prev": "The op's inputs, in order (empty unless the op was recorded).",
        "_backward": "Maps the output's gradient to one gradient per input (None for a leaf).",
        "_scope": "The module scope the tensor was made in (graph drawings group by it).",
        "_site": "Where the tensor was made, recorded under detect_anomaly().",
        "_retains_grad": "retain_grad() was called: keep .grad although the tensor is no leaf.",
        "name": "An optional label; graph drawings show it.",
        "__weakref__": None,
    }
    __array_priority__ = 1000  # ndarray (op) Tensor defers to Tensor's reflected op

    def __init__(self, data, requires_grad: bool = False, dtype=None, name: str | None = None):
        """Wraps `data` (a number, nested lists, an ndarray or a Tensor), cast to `dtype` if
        given."""
        self.data = _as_array(data, dtype)
        if requires_grad and self.data.dtype not in FLOAT_DTYPES:
            raise TypeError(f"Tensor: only float32/float64 tensors can require grad, got {self.data.dtype}")
        self.grad = None
        self.requires_grad = bool(requires_grad)
        self._op = ""
        self._prev = ()
        self._backward = None
        self._scope = autograd.current_scope()
        self._site = None
        self._retains_grad = False
        self.name = name

    # ------------------------------------------------------------ graph recording

    def _make(self, data: np.ndarray, op: str, parents: tuple, backward) -> "Tensor":
        """Wrap an op's output; record op, inputs and backward when any input needs grad."""
        state = _GRAD_STATE
        out = Tensor.__new__(Tensor)
        out.data, out.grad, out.name = data, None, None
        out._scope, out._site, out._retains_grad = state.scope, None, False
        needs = False
        if state.grad_enabled:
            for p in parents:
                if p.requires_grad:
                    needs = True
                    break
        out.requires_grad = needs
        out._op = op
        out._prev = parents if needs else ()
        out._backward = backward if needs else None
        if state.anomaly:
            out._site = autograd.creation_site()
            autograd.check_finite(out, "output", data)
        return out

    def backward(self, grad=None, retain_graph: bool = False) -> None:
        """Accumulate d(self)/d(leaf) into every leaf's `.grad`. Without `grad` the tensor
        must hold one element. The graph's buffers are freed unless retain_graph=True."""
        if not self.requires_grad:
            raise RuntimeError("backward: this tensor does not require grad and has no graph "
                               "(was it made under no_grad(), or from tensors with requires_grad=False?)")
        if grad is None:
            if self.data.size != 1:
                raise ValueError(f"backward: grad can be implicitly created only for a tensor with one "
                                 f"element, got shape {self.shape}; pass grad= of that shape")
            grad = np.ones_like(self.data)
        else:
            grad = _as_array(grad, self.dtype)
            if grad.shape != self.shape:
                raise ValueError(f"backward: grad has shape {grad.shape}, expected {self.shape}")
        autograd.run_backward(self, grad, retain_graph)

    def retain_grad(self) -> "Tensor":
        """Keep `.grad` on this intermediate tensor after backward, as in PyTorch."""
        self._retains_grad = True
        return self

    # ------------------------------------------------------------ construction

    @staticmethod
    def zeros(*shape, dtype=np.float32, requires_grad=False):
        """Returns a tensor of `shape` filled with 0 (float32 unless `dtype`), like torch.zeros."""
        return Tensor(np.zeros(_shape_arg(shape), dtype=dtype), requires_grad=requires_grad)

    @staticmethod
    def ones(*shape, dtype=np.float32, requires_grad=False):
        """Returns a tensor of `shape` filled with 1 (float32 unless `dtype`), like torch.ones."""
        return Tensor(np.ones(_shape_arg(shape), dtype=dtype), requires_grad=requires_grad)

    @staticmethod
    def full(shape, fill_value, dtype=np.float32, requires_grad=False):
        """Returns a tensor of `shape` filled with `fill_value`, like torch.full."""
        return Tensor(np.full(_shape_arg((shape,)), fill_value, dtype=dtype), requires_grad=requires_grad)

    @staticmethod
    def randn(*shape, dtype=np.float32, requires_grad=False):
        """Returns standard-normal samples of `shape` from the engine's rng (see manual_seed), like
        torch.randn."""
        return Tensor(rng().standard_normal(_shape_arg(shape)).astype(dtype), requires_grad=requires_grad)

    @staticmethod
    def rand(*shape, dtype=np.float32, requires_grad=False):
        """Returns uniform samples in [0, 1) of `shape` from the engine's rng, like torch.rand."""
        return Tensor(rng().random(_shape_arg(shape)).astype(dtype), requires_grad=requires_grad)

    @staticmethod
    def uniform(*shape, low=0.0, high=1.0, dtype=np.float32, requires_grad=False):
        """Returns uniform samples in [low, high) of `shape` (torch's uniform_, as a
        constructor)."""
        return Tensor(rng().uniform(low, high, _shape_arg(shape)).astype(dtype), requires_grad=requires_grad)

    @staticmethod
    def arange(start, stop=None, step=1, dtype=None):
        """Returns start, start + step, ... below stop (0, step, ... below start when stop is None),
        like torch.arange; ints give int64 and floats float64 (NumPy's dtypes) unless `dtype`."""
        if stop is None:
            start, stop = 0, start
        arr = np.arange(start, stop, step)
        return Tensor(arr if dtype is None else arr.astype(dtype))

    @staticmethod
    def zeros_like(t, requires_grad=False):
        """Returns zeros of `t`'s shape and dtype, like torch.zeros_like."""
        return Tensor(np.zeros_like(t.data), requires_grad=requires_grad)

    @staticmethod
    def ones_like(t, requires_grad=False):
        """Returns ones of `t`'s shape and dtype, like torch.ones_like."""
        return Tensor(np.ones_like(t.data), requires_grad=requires_grad)

    # ------------------------------------------------------------ attributes

    @property
    def shape(self) -> tuple:
        """The shape as a tuple of ints (torch: torch.Size)."""
        return self.data.shape

    @property
    def dtype(self) -> np.dtype:
        """The NumPy dtype of the data, e.g. np.float32."""
        return self.data.dtype

    @property
    def ndim(self) -> int:
        """The number of dims, like torch's .ndim."""
        return self.data.ndim

    @property
    def T(self):
        """The last two dims swapped (0-d and 1-d tensors as they are): torch's .mT, which is .T
        for a matrix."""
        return self.transpose(-2, -1) if self.ndim >= 2 else self

    @property
    def is_leaf(self):
        """True unless a recorded op made this tensor (parameters and inputs are leaves), like
        torch's .is_leaf."""
        return not self._prev

    def size(self, dim=None):
        """Returns the shape, or the size of dim `dim`, like torch.Tensor.size."""
        return self.shape if dim is None else self.shape[_norm_dim("size", dim, self.ndim)]

    def numel(self) -> int:
        """Returns the number of elements, like torch.numel."""
        return int(self.data.size)

    def dim(self) -> int:
        """Returns the number of dims, like torch.Tensor.dim."""
        return self.ndim

    def __len__(self):
        """len(t): the size of dim 0; a 0-d tensor has no len(), as in PyTorch."""
        if self.ndim == 0:
            raise TypeError("len() of a 0-d tensor")
        return self.shape[0]

    def numpy(self) -> np.ndarray:
        """Returns the data as an ndarray, shared rather than copied, like torch.Tensor.numpy."""
        return self.data

    def item(self):
        """Returns the value of a one-element tensor as a Python number, like torch.Tensor.item."""
        if self.data.size != 1:
            raise ValueError(f"item: only one-element tensors can be converted, got shape {self.shape}")
        return self.data.item()

    def tolist(self):
        """Returns the data as (nested) Python lists of numbers, like torch.Tensor.tolist."""
        return self.data.tolist()

    def detach(self) -> "Tensor":
        """Returns a new tensor on the same data, outside the graph (no grad), like
        torch.Tensor.detach."""
        return Tensor(self.data)

    def clone(self) -> "Tensor":
        """Returns a copy of the data that stays in the graph (gradients flow back), like
        torch.clone."""
        return self._make(self.data.copy(), "clone", (self,), lambda g: (g,))

    def contiguous(self) -> "Tensor":
        """Returns self: NumPy handles any memory layout (kept so PyTorch code runs)."""
        return self

    def to(self, dtype) -> "Tensor":
        """Returns the tensor cast to `dtype` (self if it has it already); the gradient is cast
        back, like torch.Tensor.to(dtype)."""
        dtype = np.dtype(dtype)
        if dtype == self.dtype:
            return self
        src = self.dtype
        return self._make(self.data.astype(dtype), "cast", (self,), lambda g: (g.astype(src),))

    def float(self):
        """Returns the tensor as float32 (in the graph), like torch.Tensor.float."""
        return self.to(np.float32)

    def double(self):
        """Returns the tensor as float64 (in the graph), like torch.Tensor.double."""
        return self.to(np.float64)

    def long(self):
        """Returns an int64 copy outside the graph, like torch.Tensor.long."""
        return Tensor(self.data.astype(np.int64))

    def __bool__(self):
        """bool(t) of a one-element tensor; a larger tensor is ambiguous and raises, as in
        PyTorch."""
        if self.data.size != 1:
            raise ValueError(f"bool: the truth value of a tensor with shape {self.shape} is ambiguous")
        return bool(self.data)

    def __float__(self):
        """float(t) of a one-element tensor."""
        return float(self.item())

    def __int__(self):
        """int(t) of a one-element tensor."""
        return int(self.item())

    __hash__ = object.__hash__

    def __repr__(self):
        """Shows the values (4 digits), shape, dtype and, with grad, the op that made it."""
        body = np.array2string(self.data, precision=4, separator=", ", threshold=60, edgeitems=3,
                               prefix="Tensor(")
        extras = [f"shape={self.shape}", f"dtype={self.dtype}"]
        if self.requires_grad:
            extras.append(f"op={self._op}" if self._op else "requires_grad=True")
        return f"Tensor({body}, {', '.join(extras)})"

    # ------------------------------------------------------------ operand coercion

    def _coerce(self, other, op: str) -> "Tensor":
        """A Python number takes this tensor's dtype; floats must agree (no silent float64)."""
        if isinstance(other, Tensor):
            t = other
        elif isinstance(other, (int, float, bool, np.number)) and np.ndim(other) == 0:
            dtype = self.dtype if self.dtype in FLOAT_DTYPES else np.float32
            if isinstance(other, (int, bool, np.integer)) and self.dtype.kind in "iub":
                dtype = self.dtype
            return Tensor(np.asarray(other, dtype=dtype))
        else:
            t = Tensor(_as_array(other, other.dtype if isinstance(other, np.ndarray) else None))
        a, b = self.dtype, t.dtype
        if a != b:
            if a in FLOAT_DTYPES and b in FLOAT_DTYPES:
                raise TypeError(f"{op}: mixing dtypes {a} and {b} would silently give float64; "
                                f"convert one side first with .float() or .double()")
            if a in FLOAT_DTYPES and b.kind in "iub":
                return Tensor(t.data.astype(a))
        return t

    def _binary_inputs(self, other, op, reflected=False):
        other = self._coerce(other, op)
        if other.dtype in FLOAT_DTYPES and self.dtype.kind in "iub":
            self_ = Tensor(self.data.astype(other.dtype))
            a, b = (other, self_) if reflected else (self_, other)
        else:
            a, b = (other, self) if reflected else (self, other)
        _broadcast_shape(op, a.shape, b.shape)
        return a, b

    # ------------------------------------------------------------ arithmetic

    @_public_signature
    def add(self, other, _reflected=False):
        """Returns self + other elementwise, broadcasting; other may be a Tensor, a number or an
        ndarray, like torch.add."""
        if TRICKS.scalar_operand and fast.is_scalar_operand(self, other):
            return self._make(self.data + self.data.dtype.type(other), "add", (self,), None)
        a, b = self._binary_inputs(other, "add", _reflected)
        return a._make(a.data + b.data, "add", (a, b),
                       lambda g: (unbroadcast(g, a.shape) if a.requires_grad else None,
                                  unbroadcast(g, b.shape) if b.requires_grad else None))

    @_public_signature
    def sub(self, other, _reflected=False):
        """Returns self - other elementwise, broadcasting, like torch.sub."""
        a, b = self._binary_inputs(other, "sub", _reflected)
        return a._make(a.data - b.data, "sub", (a, b),
                       lambda g: (unbroadcast(g, a.shape) if a.requires_grad else None,
                                  unbroadcast(-g, b.shape) if b.requires_grad else None))

    @_public_signature
    def mul(self, other, _reflected=False):
        """Returns self * other elementwise, broadcasting, like torch.mul."""
        if TRICKS.scalar_operand and fast.is_scalar_operand(self, other):
            return self._make(self.data * self.data.dtype.type(other), "mul", (self,), None)
        a, b = self._binary_inputs(other, "mul", _reflected)
        return a._make(a.data * b.data, "mul", (a, b),
                       lambda g: (unbroadcast(g * b.data, a.shape) if a.requires_grad else None,
                                  unbroadcast(g * a.data, b.shape) if b.requires_grad else None))

    @_public_signature
    def div(self, other, _reflected=False):
        """Returns self / other elementwise (true division), broadcasting, like torch.div."""
        a, b = self._binary_inputs(other, "div", _reflected)
        out = a.data / b.data
        return a._make(out, "div", (a, b),
                       lambda g: (unbroadcast(g / b.data, a.shape) if a.requires_grad else None,
                                  unbroadcast(-g * out / b.data, b.shape) if b.requires_grad else None))

    @_public_signature
    def pow(self, exponent, _reflected=False):
        """x ** p for a number p (the common case) or a Tensor exponent (d/dp = x^p · ln x)."""
        if not _reflected and isinstance(exponent, (int, float)) and not isinstance(exponent, bool):
            p, x = exponent, self.data
            out = x ** p
            return self._make(out, "pow", (self,), lambda g: (g * p * x ** (p - 1),))
        a, b = self._binary_inputs(exponent, "pow", _reflected)
        out = a.data ** b.data

        def backward(g):
            ga = unbroadcast(g * b.data * a.data ** (b.data - 1), a.shape) if a.requires_grad else None
            gb = None
            if b.requires_grad:
                with np.errstate(divide="ignore", invalid="ignore"):
                    log_a = np.where(a.data > 0, np.log(np.where(a.data > 0, a.data, 1)), 0)
                gb = unbroadcast(g * out * log_a, b.shape)
            return ga, gb
        return a._make(out, "pow", (a, b), backward)

    def neg(self):
        """Returns -self, like torch.neg."""
        return self._make(-self.data, "neg", (self,), lambda g: (-g,))

    __add__ = add
    __sub__ = sub
    __mul__ = mul
    __truediv__ = div
    __pow__ = pow
    __neg__ = neg

    def __radd__(self, other):
        """other + self, for a number or an ndarray on the left."""
        return self.add(other, _reflected=True)

    def __rsub__(self, other):
        """other - self, for a number or an ndarray on the left."""
        return self.sub(other, _reflected=True)

    def __rmul__(self, other):
        """other * self, for a number or an ndarray on the left."""
        return self.mul(other, _reflected=True)

    def __rtruediv__(self, other):
        """other / self, for a number or an ndarray on the left."""
        return self.div(other, _reflected=True)

    def __rpow__(self, other):
        """other ** self, for a number or an ndarray as the base."""
        return self.pow(other, _reflected=True)

    # ------------------------------------------------------------ comparisons (no grad)

    def _compare(self, other, fn, op):
        a, b = self._binary_inputs(other, op)
        return Tensor(fn(a.data, b.data))

    def __lt__(self, other):
        """self < other elementwise, broadcasting, as a bool tensor (no grad), like torch.lt."""
        return self._compare(other, np.less, "lt")

    def __le__(self, other):
        """self <= other elementwise, broadcasting, as a bool tensor (no grad), like torch.le."""
        return self._compare(other, np.less_equal, "le")

    def __gt__(self, other):
        """self > other elementwise, broadcasting, as a bool tensor (no grad), like torch.gt."""
        return self._compare(other, np.greater, "gt")

    def __ge__(self, other):
        """self >= other elementwise, broadcasting, as a bool tensor (no grad), like torch.ge."""
        return self._compare(other, np.greater_equal, "ge")

    def eq(self, other):
        """Returns self == other elementwise as a bool tensor (no grad), like torch.eq; or `==`."""
        return self._compare(other, np.equal, "eq")

    def ne(self, other):
        """Returns self != other elementwise as a bool tensor (no grad), like torch.ne; or `!=`."""
        return self._compare(other, np.not_equal, "ne")

    __eq__ = eq
    __ne__ = ne

    def __invert__(self):
        """~t of a bool tensor: elementwise logical not (no grad)."""
        if self.dtype != np.bool_:
            raise TypeError(f"invert: expected a bool tensor, got {self.dtype}")
        return Tensor(~self.data)

    def __and__(self, other):
        """t & other: elementwise logical and, as a bool tensor (no grad)."""
        return Tensor(np.logical_and(self.data, _as_array(other)))

    def __or__(self, other):
        """t | other: elementwise logical or, as a bool tensor (no grad)."""
        return Tensor(np.logical_or(self.data, _as_array(other)))

    # ------------------------------------------------------------ elementwise

    def exp(self):
        """Returns e ** x elementwise, like torch.exp."""
        out = np.exp(self.data)
        return self._make(out, "exp", (self,), lambda g: (g * out,))

    def log(self):
        """Returns the natural logarithm elementwise, like torch.log."""
        x = self.data
        return self._make(np.log(x), "log", (self,), lambda g: (g / x,))

    def sqrt(self):
        """Returns the square root elementwise, like torch.sqrt."""
        out = np.sqrt(self.data)
        return self._make(out, "sqrt", (self,), lambda g: (g / (2 * out),))

    def sin(self):
        """Returns the sine elementwise (radians), like torch.sin."""
        x = self.data
        return self._make(np.sin(x), "sin", (self,), lambda g: (g * np.cos(x),))

    def cos(self):
        """Returns the cosine elementwise (radians), like torch.cos."""
        x = self.data
        return self._make(np.cos(x), "cos", (self,), lambda g: (-g * np.sin(x),))

    def abs(self):
        """Returns |x| elementwise (gradient 0 at 0), like torch.abs."""
        x = self.data
        return self._make(np.abs(x), "abs", (self,), lambda g: (g * np.sign(x),))

    def tanh(self):
        """Returns the hyperbolic tangent elementwise, like torch.tanh."""
        out = np.tanh(self.data)
        return self._make(out, "tanh", (self,), lambda g: (g * (1 - out * out),))

    def sigmoid(self):
        """Returns 1 / (1 + e ** -x) elementwise, stable for large |x|, like torch.sigmoid."""
        x = self.data
        out = np.exp(-np.logaddexp(0, -x)).astype(x.dtype)  # stable for large |x|
        return self._make(out, "sigmoid", (self,), lambda g: (g * out * (1 - out),))

    def relu(self):
        """Returns max(x, 0) elementwise (gradient 0 at 0), like torch.relu."""
        x = self.data
        return self._make(np.maximum(x, 0), "relu", (self,), lambda g: (g * (x > 0),))

    def gelu(self, approximate: str = "none"):
        """GELU as in PyTorch: exact x·Φ(x) by default, or the tanh approximation."""
        x = self.data
        if approximate == "tanh":
            c = math.sqrt(2 / math.pi)
            inner = c * (x + 0.044715 * x ** 3)
            t = np.tanh(inner)
            out = 0.5 * x * (1 + t)
            return self._make(out, "gelu", (self,), lambda g: (
                g * (0.5 * (1 + t) + 0.5 * x * (1 - t * t) * c * (1 + 3 * 0.044715 * x * x)),))
        if approximate != "none":
            raise ValueError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")
        cdf = (0.5 * (1 + _erf(x / math.sqrt(2)))).astype(x.dtype)
        pdf = np.exp(-0.5 * x * x) / math.sqrt(2 * math.pi)
        return self._make(x * cdf, "gelu", (self,), lambda g: (g * (cdf + x * pdf),))

    def maximum(self, other):
        """Returns the elementwise max of self and other, broadcasting; a tie splits the gradient in
        half, like torch.maximum."""
        a, b = self._binary_inputs(other, "maximum")
        out = np.maximum(a.data, b.data)
        a_wins = (a.data > b.data) + 0.5 * (a.data == b.data)
        return a._make(out, "maximum", (a, b),
                       lambda g: (unbroadcast(g * a_wins, a.shape), unbroadcast(g * (1 - a_wins), b.shape)))

    def minimum(self, other):
        """Returns the elementwise min of self and other, broadcasting, like torch.minimum."""
        return -((-self).maximum(-self._coerce(other, "minimum")))

    def clamp(self, min=None, max=None):
        """Returns x limited to [min, max] (either may be None); the gradient is 0 outside, like
        torch.clamp. `clip` is the same."""
        x = self.data
        out = np.clip(x, min, max)
        inside = np.ones(x.shape, dtype=bool)
        if min is not None:
            inside &= x >= min
        if max is not None:
            inside &= x <= max
        return self._make(out, "clamp", (self,), lambda g: (g * inside,))

    clip = clamp

    # ------------------------------------------------------------ reductions

    def sum(self, dim=None, keepdim: bool = False):
        """Returns the sum over `dim` (an int or a tuple; all dims if None); keepdim keeps reduced
        dims as size 1, like torch.sum."""
        axes = _norm_dims("sum", dim, self.ndim)
        shape = self.shape
        out = np.asarray(self.data.sum(axis=axes, keepdims=keepdim))

        def backward(g):
            if not keepdim and axes is not None:
                g = np.expand_dims(g, axes)
            return (np.broadcast_to(g, shape),)
        return self._make(out, "sum", (self,), backward)

    def mean(self, dim=None, keepdim: bool = False):
        """Returns the mean over `dim` (an int or a tuple; all dims if None); keepdim keeps reduced
        dims as size 1, like torch.mean."""
        axes = _norm_dims("mean", dim, self.ndim)
        count = self.data.size if axes is None else int(np.prod([self.shape[a] for a in axes]))
        if count == 0:
            raise ValueError(f"mean: reducing over zero elements (shape {self.shape}, dim {dim})")
        return self.sum(dim, keepdim) * (1.0 / count)

    def var(self, dim=None, keepdim: bool = False, correction: int = 1, unbiased: bool | None = None):
        """Variance as in PyTorch: divides by N - correction (unbiased by default)."""
        if unbiased is not None:
            correction = 1 if unbiased else 0
        axes = _norm_dims("var", dim, self.ndim)
        count = self.data.size if axes is None else int(np.prod([self.shape[a] for a in axes]))
        if count - correction <= 0:
            raise ValueError(f"var: needs more than {correction} element(s) per reduction, "
                             f"got {count} (shape {self.shape}, dim {dim})")
        centered = self - self.mean(dim, keepdim=True)
        return (centered * centered).sum(dim, keepdim) * (1.0 / (count - correction))

    def std(self, dim=None, keepdim: bool = False, correction: int = 1):
        """Returns sqrt(var(dim, keepdim, correction)), unbiased by default, like torch.std."""
        return self.var(dim, keepdim, correction).sqrt()

    def amax(self, dim=None, keepdim: bool = False):
        """Max values; the gradient is shared equally among tied maxima (as torch.amax)."""
        axes = _norm_dims("max", dim, self.ndim)
        if self.data.size == 0:
            raise ValueError(f"max: cannot reduce an empty tensor of shape {self.shape}")
        x = self.data
        out_keep = x.max(axis=axes, keepdims=True)
        out = out_keep if keepdim else np.asarray(x.max(axis=axes))

        def backward(g):
            if not keepdim and axes is not None:
                g = np.expand_dims(g, axes)
            hit = (x == out_keep)
            return (g * hit / hit.sum(axis=axes, keepdims=True),)
        return self._make(out, "max", (self,), backward)

    def max(self, dim=None, keepdim: bool = False):
        """Like torch.max: over all elements a tensor; with `dim`, (values, indices)."""
        if dim is None:
            return self.amax()
        values = self.amax(dim, keepdim)
        return MaxResult(values, self.argmax(dim, keepdim))

    def min(self, dim=None, keepdim: bool = False):
        """Like torch.min: over all elements a tensor; with `dim`, (values, indices)."""
        if dim is None:
            return -((-self).amax())
        return MaxResult(-((-self).amax(dim, keepdim)), self.argmin(dim, keepdim))

    def argmax(self, dim=None, keepdim: bool = False):
        """Returns the index of the max along `dim` (of the flattened tensor if None) as an int64
        tensor without grad, like torch.argmax."""
        if dim is None:
            return Tensor(np.asarray(self.data.argmax()))
        d = _norm_dim("argmax", dim, self.ndim)
        return Tensor(np.argmax(self.data, axis=d, keepdims=keepdim))

    def argmin(self, dim=None, keepdim: bool = False):
        """Returns the index of the min along `dim` (of the flattened tensor if None) as an int64
        tensor without grad, like torch.argmin."""
        if dim is None:
            return Tensor(np.asarray(self.data.argmin()))
        d = _norm_dim("argmin", dim, self.ndim)
        return Tensor(np.argmin(self.data, axis=d, keepdims=keepdim))

    def logsumexp(self, dim=-1, keepdim: bool = False):
        """log Σ exp(x), stable: the max is subtracted first. A row of all -inf gives -inf."""
        d = _norm_dim("logsumexp", dim, self.ndim)
        x = self.data
        m = np.max(x, axis=d, keepdims=True)
        m = np.where(np.isfinite(m), m, 0)
        with np.errstate(divide="ignore"):
            lse_keep = np.log(np.exp(x - m).sum(axis=d, keepdims=True)) + m
        out = lse_keep if keepdim else np.squeeze(lse_keep, d)

        def backward(g):
            if not keepdim:
                g = np.expand_dims(g, d)
            with np.errstate(invalid="ignore"):
                p = np.exp(x - lse_keep)
            return (g * np.nan_to_num(p, nan=0.0),)
        return self._make(out, "logsumexp", (self,), backward)

    # ------------------------------------------------------------ softmax family (kernels)

    def softmax(self, dim: int = -1, scale: float = 1.0, mask=None):
        """softmax(x·scale + mask) along `dim`, stable. `mask` is boolean (True = keep) or
        additive; a fully masked row gives zeros, never NaN (see kernels.softmax)."""
        d = _norm_dim("softmax", dim, self.ndim)
        if self.dtype not in FLOAT_DTYPES:
            raise TypeError(f"softmax: expected a float tensor, got {self.dtype}")
        last = d == self.ndim - 1 or self.ndim == 0
        x = self.data if last else np.moveaxis(self.data, d, -1)
        if not math.isfinite(scale):
            raise ValueError(f"softmax: scale must be a finite number, got {scale!r}")
        m = _mask_array("softmax", mask, self.shape, d)
        y = K.softmax_forward(x.reshape(1) if x.ndim == 0 else x, scale, m).reshape(x.shape)

        def backward(g):
            gl = g if last else np.moveaxis(g, d, -1)
            dx = K.softmax_backward(y, np.ascontiguousarray(gl), scale)
            return (dx if last else np.moveaxis(dx, -1, d),)
        return self._make(y if last else np.moveaxis(y, -1, d), "softmax", (self,), backward)

    def log_softmax(self, dim: int = -1):
        """Returns log(softmax(x)) along `dim`, computed stably in one kernel, like
        torch.log_softmax."""
        d = _norm_dim("log_softmax", dim, self.ndim)
        if self.dtype not in FLOAT_DTYPES:
            raise TypeError(f"log_softmax: expected a float tensor, got {self.dtype}")
        last = d == self.ndim - 1 or self.ndim == 0
        x = self.data if last else np.moveaxis(self.data, d, -1)
        y = K.log_softmax_forward(x.reshape(1) if x.ndim == 0 else x).reshape(x.shape)

        def backward(g):
            gl = g if last else np.moveaxis(g, d, -1)
            dx = K.log_softmax_backward(y, np.ascontiguousarray(gl))
            return (dx if last else np.moveaxis(dx, -1, d),)
        return self._make(y if last else np.moveaxis(y, -1, d), "log_softmax", (self,), backward)

    # ------------------------------------------------------------ matmul (kernels)

    def matmul(self, other):
        """Matrix product with NumPy's rules: 1-D operands are promoted, batch dims broadcast."""
        a, b = self, self._coerce(other, "matmul")
        if a.ndim == 0 or b.ndim == 0:
            raise ValueError(f"matmul: both operands need at least 1 dim, got shapes {a.shape} and {b.shape}")
        if a.dtype not in FLOAT_DTYPES or b.dtype not in FLOAT_DTYPES:
            raise TypeError(f"matmul: expected float tensors, got {a.dtype} and {b.dtype}")
        ad = a.data[None, :] if a.ndim == 1 else a.data
        bd = b.data[:, None] if b.ndim == 1 else b.data
        if ad.shape[-1] != bd.shape[-2]:
            raise ValueError(f"matmul: inner dims don't match: {a.shape} @ {b.shape} "
                             f"({ad.shape[-1]} != {bd.shape[-2]})")
        _broadcast_shape("matmul (batch dims)", ad.shape[:-2], bd.shape[:-2])
        out = K.matmul(ad, bd)
        final = out[..., 0, :] if a.ndim == 1 else out
        final = final[..., 0] if b.ndim == 1 else final

        def backward(g):
            g = g.reshape(out.shape)
            da, db = K.matmul_backward(ad, bd, g)
            return (da.reshape(a.shape) if a.requires_grad else None,
                    db.reshape(b.shape) if b.requires_grad else None)
        return self._make(final, "matmul", (a, b), backward)

    __matmul__ = matmul

    def __rmatmul__(self, other):
        """other @ self, for an ndarray on the left."""
        return self._coerce(other, "matmul").matmul(self)

    # ------------------------------------------------------------ shape

    def reshape(self, *shape):
        """Returns the elements in a new shape (one dim may be -1), like torch.reshape. `view` is
        the same."""
        shape = _shape_arg(shape)
        src = self.shape
        try:
            out = self.data.reshape(shape)
        except ValueError:
            raise ValueError(f"reshape: cannot reshape a tensor of shape {src} ({self.numel()} elements) "
                             f"into {shape}") from None
        return self._make(out, "reshape", (self,), lambda g: (g.reshape(src),))

    view = reshape

    def flatten(self, start_dim: int = 0, end_dim: int = -1):
        """Returns dims start_dim .. end_dim merged into one (a 0-d tensor becomes 1-d), like
        torch.flatten."""
        if self.ndim == 0:
            return self.reshape(1)
        s = _norm_dim("flatten", start_dim, self.ndim)
        e = _norm_dim("flatten", end_dim, self.ndim)
        return self.reshape(self.shape[:s] + (-1,) + self.shape[e + 1:])

    def permute(self, *dims):
        """Returns the dims reordered as `dims`, like torch.permute."""
        dims = _shape_arg(dims)
        if len(dims) != self.ndim:
            raise ValueError(f"permute: got {len(dims)} dims {dims} for a tensor with {self.ndim} dims")
        dims = tuple(_norm_dim("permute", d, self.ndim) for d in dims)
        if sorted(dims) != list(range(self.ndim)):
            raise ValueError(f"permute: {dims} is not a permutation of the {self.ndim} dims")
        inverse = tuple(np.argsort(dims))
        return self._make(self.data.transpose(dims), "permute", (self,), lambda g: (g.transpose(inverse),))

    def transpose(self, dim0: int = -2, dim1: int = -1):
        """Returns dims dim0 and dim1 swapped (the last two by default), like torch.transpose."""
        d0, d1 = _norm_dim("transpose", dim0, self.ndim), _norm_dim("transpose", dim1, self.ndim)
        out = np.swapaxes(self.data, d0, d1)
        return self._make(out, "transpose", (self,), lambda g: (np.swapaxes(g, d0, d1),))

    def t(self):
        """Returns a 2-d tensor transposed; other tensors as they are (torch.t refuses more than 2
        dims)."""
        return self.transpose(0, 1) if self.ndim == 2 else self

    def unsqueeze(self, dim: int):
        """Returns the tensor with a size-1 dim inserted at `dim`, like torch.unsqueeze."""
        d = _norm_dim("unsqueeze", dim, self.ndim + 1)
        return self.reshape(self.shape[:d] + (1,) + self.shape[d:])

    def squeeze(self, dim=None):
        """Returns the tensor without its size-1 dims (only `dim` if given, when it has size 1),
        like torch.squeeze."""
        if dim is None:
            return self.reshape(tuple(n for n in self.shape if n != 1))
        d = _norm_dim("squeeze", dim, self.ndim)
        if self.shape[d] != 1:
            return self
        return self.reshape(self.shape[:d] + self.shape[d + 1:])

    def expand(self, *shape):
        """Returns size-1 dims broadcast to `shape` without copying (-1 keeps a size), like
        torch.Tensor.expand."""
        shape = _shape_arg(shape)
        if len(shape) < self.ndim:
            raise ValueError(f"expand: target {shape} has fewer dims than the tensor's {self.shape}")
        full = tuple(self.shape[i - (len(shape) - self.ndim)] if n == -1 else n for i, n in enumerate(shape))
        try:
            out = np.broadcast_to(self.data, full)
        except ValueError:
            raise ValueError(f"expand: cannot expand shape {self.shape} to {shape}; only size-1 dims "
                             "can grow") from None
        src = self.shape
        return self._make(out, "expand", (self,), lambda g: (unbroadcast(g, src),))

    # ------------------------------------------------------------ indexing

    def __getitem__(self, index):
        """t[index] with NumPy's basic and advanced indexing (ints, slices, None, lists, int or bool
        tensors); repeated indices add their gradients."""
        idx = _index_arg(index)
        try:
            out = self.data[idx]
        except IndexError as e:
            raise IndexError(f"getitem: index {_describe_index(index)} is out of bounds for a tensor "
                             f"of shape {self.shape} ({e})") from None
        shape, dtype = self.shape, self.dtype
        advanced = _is_advanced(idx)

        def backward(g):
            full = np.zeros(shape, dtype=dtype)
            if advanced:
                np.add.at(full, idx, g)
            else:
                full[idx] = g
            return (full,)
        return self._make(np.asarray(out) if not isinstance(out, np.ndarray) else out,
                          "getitem", (self,), backward)

    def gather(self, dim: int, index):
        """out[i][j] = self[index[i][j]][j] for dim=0 (torch.gather semantics)."""
        d = _norm_dim("gather", dim, self.ndim)
        idx = _as_array(index)
        if idx.dtype.kind not in "iu":
            raise TypeError(f"gather: index must be an integer tensor, got {idx.dtype}")
        if idx.ndim != self.ndim:
            raise ValueError(f"gather: index has {idx.ndim} dims, the input {self.ndim} (shape {self.shape})")
        n = self.shape[d]
        if idx.size and (idx.min() < -n or idx.max() >= n):
            raise IndexError(f"gather: index values must be in [{-n}, {n - 1}] along dim {d} of shape "
                             f"{self.shape}, got min {idx.min()} max {idx.max()}")
        out = np.take_along_axis(self.data, idx, axis=d)
        shape, dtype = self.shape, self.dtype

        def backward(g):
            full = np.zeros(shape, dtype=dtype)
            grid = list(np.indices(idx.shape, sparse=True))
            grid[d] = idx
            np.add.at(full, tuple(grid), g)
            return (full,)
        return self._make(out, "gather", (self,), backward)

    def masked_fill(self, mask, value):
        """Set entries where `mask` is True to `value` (mask broadcasts to the tensor)."""
        m = _as_array(mask)
        if m.dtype != np.bool_:
            raise TypeError(f"masked_fill: mask must be bool, got {m.dtype}")
        _broadcast_shape("masked_fill", self.shape, m.shape)
        if np.broadcast_shapes(self.shape, m.shape) != self.shape:
            raise ValueError(f"masked_fill: mask of shape {m.shape} would grow the tensor of shape {self.shape}")
        out = np.where(m, np.asarray(value, dtype=self.dtype), self.data)
        return self._make(out, "masked_fill", (self,), lambda g: (np.where(m, 0, g).astype(g.dtype),))

    @staticmethod
    def where(condition, x, y):
        """x where condition is True, else y; all three broadcast."""
        c = _as_array(condition)
        if c.dtype != np.bool_:
            raise TypeError(f"where: condition must be bool, got {c.dtype}")
        if not isinstance(x, Tensor):
            x = (y if isinstance(y, Tensor) else Tensor(0.0))._coerce(x, "where")
        y = x._coerce(y, "where")
        _broadcast_shape("where", c.shape, x.shape, y.shape)
        out = np.where(c, x.data, y.data)
        return x._make(out, "where", (x, y),
                       lambda g: (unbroadcast(np.where(c, g, 0).astype(g.dtype), x.shape),
                                  unbroadcast(np.where(c, 0, g).astype(g.dtype), y.shape)))

    # ------------------------------------------------------------ joining

    @staticmethod
    def cat(tensors, dim: int = 0):
        """Returns `tensors` joined along the existing dim `dim`, like torch.cat."""
        tensors = list(tensors)
        if not tensors:
            raise ValueError("cat: expected a non-empty list of tensors")
        d = _norm_dim("cat", dim, tensors[0].ndim)
        shapes = [t.shape for t in tensors]
        for s in shapes:
            if len(s) != len(shapes[0]) or any(a != b for i, (a, b) in enumerate(zip(s, shapes[0])) if i != d):
                raise ValueError(f"cat: shapes {shapes} must match except in dim {d}")
        _check_same_dtype("cat", tensors)
        out = np.concatenate([t.data for t in tensors], axis=d)
        cuts = np.cumsum([s[d] for s in shapes])[:-1]
        return tensors[0]._make(out, "cat", tuple(tensors), lambda g: tuple(np.split(g, cuts, axis=d)))

    @staticmethod
    def stack(tensors, dim: int = 0):
        """Returns `tensors` (all of one shape) joined along a new dim `dim`, like torch.stack."""
        tensors = list(tensors)
        if not tensors:
            raise ValueError("stack: expected a non-empty list of tensors")
        shapes = {t.shape for t in tensors}
        if len(shapes) != 1:
            raise ValueError(f"stack: all tensors must have the same shape, got {sorted(shapes)}")
        d = _norm_dim("stack", dim, tensors[0].ndim + 1)
        return Tensor.cat([t.unsqueeze(d) for t in tensors], dim=d)

    def split(self, split_size_or_sections, dim: int = 0):
        """Like torch.split: chunks of a given size, or a list of sizes."""
        d = _norm_dim("split", dim, self.ndim)
        n = self.shape[d]
        if isinstance(split_size_or_sections, int):
            if split_size_or_sections <= 0:
                raise ValueError(f"split: split size must be positive, got {split_size_or_sections}")
            sizes = [split_size_or_sections] * (n // split_size_or_sections)
            if n % split_size_or_sections:
                sizes.append(n % split_size_or_sections)
        else:
            sizes = list(split_size_or_sections)
            if sum(sizes) != n or any(s < 0 for s in sizes):
                raise ValueError(f"split: sizes {sizes} must be non-negative and sum to {n} (dim {d})")
        out, start = [], 0
        for s in sizes:
            index = (slice(None),) * d + (slice(start, start + s),)
            out.append(self[index])
            start += s
        return tuple(out)

    def chunk(self, chunks: int, dim: int = 0):
        """Returns up to `chunks` pieces of ceil(size / chunks) along `dim` (the last may be
        smaller), like torch.chunk."""
        n = self.shape[_norm_dim("chunk", dim, self.ndim)]
        return self.split(-(-n // chunks), dim)

    # ------------------------------------------------------------ nn-flavoured ops

    def dropout(self, p: float = 0.5, training: bool = True):
        """Inverted dropout: zero with probability p, scale the rest by 1/(1-p)."""
        if not 0 <= p <= 1:
            raise ValueError(f"dropout: p must be in [0, 1], got {p}")
        if not training or p == 0:
            return self
        if p == 1:
            return self * 0.0
        keep = dropout_keep_mask(self.shape, p)
        scale = self.dtype.type(1.0 / (1.0 - p)) if self.dtype in FLOAT_DTYPES else 1.0 / (1.0 - p)
        return self._make(self.data * keep * scale, "dropout", (self,), lambda g: (g * keep * scale,))

    def layer_norm(self, normalized_shape, weight=None, bias=None, eps: float = 1e-5):
        """LayerNorm over the trailing `normalized_shape` dims, biased variance (as PyTorch)."""
        normalized_shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
        shape = self.data.shape
        k = len(normalized_shape)
        if shape[len(shape) - k:] != normalized_shape or k == 0:
            raise ValueError(f"layer_norm: normalized_shape {normalized_shape} does not match the trailing "
                             f"dims of input shape {self.shape}")
        if self.dtype not in FLOAT_DTYPES:
            raise TypeError(f"layer_norm: expected a float tensor, got {self.dtype}")
        if not (math.isfinite(eps) and eps >= 0):
            raise ValueError(f"layer_norm: eps must be a finite number >= 0, got {eps!r}")
        parents = (self,)
        for name, t in (("weight", weight), ("bias", bias)):
            if t is not None:
                if t.data.shape != normalized_shape:
                    raise ValueError(f"layer_norm: {name} has shape {t.shape}, expected {normalized_shape}")
                if t.dtype != self.dtype:
                    raise TypeError(f"layer_norm: {name} is {t.dtype} but the input is "
                                    f"{self.dtype}; pass both in one dtype")
                parents += (t,)
        feat = math.prod(normalized_shape)
        x2 = self.data.reshape(-1, feat)
        gamma = None if weight is None else weight.data if k == 1 else weight.data.reshape(feat)
        beta = None if bias is None else bias.data if k == 1 else bias.data.reshape(feat)
        y, mean, rstd = K.layernorm_forward(x2, gamma, beta, eps)

        def backward(g):
            dx, dgamma, dbeta = K.layernorm_backward(np.ascontiguousarray(g.reshape(-1, feat)), x2, gamma,
                                                     mean, rstd)
            grads = [dx.reshape(shape)]
            if weight is not None:
                grads.append(dgamma.reshape(normalized_shape))
            if bias is not None:
                grads.append(dbeta.reshape(normalized_shape) if dbeta is not None
                             else g.reshape(-1, feat).sum(0).reshape(normalized_shape))
            return tuple(grads)
        return self._make(y.reshape(shape), "layer_norm", parents, backward)


# ---------------------------------------------------------------- helpers

def _broadcast_shape(op: str, *shapes) -> tuple:
    if TRICKS.equal_shapes and fast.equal_shapes(shapes):
        return tuple(shapes[0])
    try:
        return np.broadcast_shapes(*shapes)
    except ValueError:
        raise ValueError(f"{op}: shapes {' and '.join(str(tuple(s)) for s in shapes)} "
                         "cannot be broadcast together (NumPy broadcasting rules)") from None


def _shape_arg(shape) -> tuple:
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = tuple(shape[0])
    for n in shape:
        if not isinstance(n, (int, np.integer)) or isinstance(n, bool):
            raise TypeError(f"shape entries must be ints, got {shape}")
    return tuple(int(n) for n in shape)


def _index_arg(index):
    if isinstance(index, Tensor):
        return index.data
    if isinstance(index, tuple):
        return tuple(i.data if isinstance(i, Tensor) else (np.asarray(i) if isinstance(i, list) else i)
                     for i in index)
    if isinstance(index, list):
        return np.asarray(index)
    return index


def _is_advanced(idx) -> bool:
    parts = idx if isinstance(idx, tuple) else (idx,)
    return any(isinstance(p, np.ndarray) for p in parts)


def _describe_index(index) -> str:
    if isinstance(index, Tensor):
        return f"tensor(shape={index.shape}, min={index.data.min() if index.data.size else None}, " \
               f"max={index.data.max() if index.data.size else None})"
    return repr(index)


def _check_same_dtype(op, tensors):
    dtypes = {t.dtype for t in tensors}
    if len(dtypes) > 1:
        raise TypeError(f"{op}: tensors have mixed dtypes {sorted(map(str, dtypes))}; convert them first")


def _mask_array(op, mask, shape, d):
    """The mask as an array laid out like the input with `d` moved last; it may broadcast
    to the input's shape but never grow it."""
    if mask is None:
        return None
    m = _as_array(mask)
    if m.dtype != np.bool_ and m.dtype.kind != "f":
        raise TypeError(f"{op}: mask must be boolean (True = may attend) or float (added to the "
                        f"logits, -inf = masked), got dtype {m.dtype}")
    try:
        bshape = np.broadcast_shapes(m.shape, shape)
    except ValueError:
        raise ValueError(f"{op}: mask of shape {m.shape} cannot broadcast to the input's shape {shape}") from None
    if bshape != shape:
        raise ValueError(f"{op}: mask of shape {m.shape} would grow the input's shape {shape}")
    if d != len(shape) - 1 and len(shape) > 0:
        m = np.moveaxis(np.broadcast_to(m, shape), d, -1)
    return m


def dropout_keep_mask(shape, p: float) -> np.ndarray:
    """A boolean array of `shape`, each entry True (kept) with probability 1 - p, drawn from the
    engine's rng (so manual_seed makes dropout repeatable)."""
    if TRICKS.dropout_bits:
        return fast.keep_mask_from_bits(shape, p)
    return rng().random(shape) >= p


def _erf(x: np.ndarray) -> np.ndarray:
    return np.vectorize(math.erf, otypes=[np.float64])(x)


# ---------------------------------------------------------------- module-level API

def tensor(data, requires_grad=False, dtype=None) -> Tensor:
    """Returns Tensor(data, requires_grad=requires_grad, dtype=dtype), like torch.tensor."""
    return Tensor(data, requires_grad=requires_grad, dtype=dtype)


zeros, ones, full, randn, rand = Tensor.zeros, Tensor.ones, Tensor.full, Tensor.randn, Tensor.rand
arange, zeros_like, ones_like = Tensor.arange, Tensor.zeros_like, Tensor.ones_like
cat, stack, where = Tensor.cat, Tensor.stack, Tensor.where
