"""Tensor: n-d autograd on NumPy, with broadcasting and a PyTorch-shaped API.

Every op is defined once, its forward and backward side by side, as a function of arrays:

    def exp(self):
        return self._apply(exp_op, "exp", (self,))

    def exp_op(x):
        out = np.exp(x)
        return out, lambda g: (g * out,)

`_apply` runs it and records the op's name, its inputs and the backward function, which maps
the gradient of the output to one gradient per input; `t.op`, `t.inputs` and `t.vjp(g)` show
them to tools that walk the graph. This file holds the core: the data and its
gradient, `_apply` and `backward`, the constructors, attributes, conversions and how an operand
becomes a Tensor. The ops come in families, one file each, that Tensor inherits:

    ops/unary.py     exp log sqrt sin cos abs tanh sigmoid relu gelu clamp neg
    ops/binary.py    + - * / ** (broadcasting), maximum minimum, comparisons, matmul
    ops/reduce.py    sum mean var std max min argmax argmin logsumexp
    ops/movement.py  reshape permute transpose squeeze expand, t[...], cat stack split chunk
    ops/nn.py        softmax log_softmax layer_norm dropout gather masked_fill where
    ops/shapes.py    the dim, shape and dtype checks they share

Binary ops broadcast as NumPy does and reduce each gradient back to its input's shape
(`unbroadcast`). Each op's formula is NumPy code in its op file; where a Numba kernel computes the
same op faster, one line, `@has_twin(...)`, lets the Numba backend run it (tinygrad_lite.dispatch). A
speedup that spans ops is a rewrite rule of the step compiler (tinygrad_lite/compiler/rules/), never here.
"""
from __future__ import annotations

import numpy as np

from . import autograd
from .ops.binary import BinaryOps
from .ops.movement import MovementOps
from .ops.nn import NNOps, dropout_keep_mask
from .ops.reduce import MaxResult, ReduceOps
from .ops.shapes import FLOAT_DTYPES, broadcast_shape, norm_dim, shape_arg
from .ops.unary import UnaryOps
from .random import rng

__all__ = ["Tensor", "FLOAT_DTYPES", "MaxResult", "as_array", "dropout_keep_mask", "tensor", "zeros", "ones",
           "full", "randn", "rand", "arange", "zeros_like", "ones_like", "cat", "stack", "where"]

_GRAD_STATE = autograd._state  # per-thread grad mode, scope and anomaly flags, read by every op


def as_array(data, dtype=None) -> np.ndarray:
    """`data` (a Tensor, a number, nested lists or an ndarray) as an ndarray in the dtype a Tensor
    made from it would get."""
    if isinstance(data, Tensor):
        data = data.data
    if _GRAD_STATE.capture is not None and _GRAD_STATE.capture.is_traced(data):  # (tinygrad_lite.compiler)
        return data if dtype is None or data.dtype == dtype else data.astype(dtype)
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


class Tensor(UnaryOps, BinaryOps, ReduceOps, MovementOps, NNOps):
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
        capture = _GRAD_STATE.capture
        traced = None if capture is None else capture.tensor_data(data)
        self.data = as_array(data, dtype) if traced is None else traced if dtype is None else traced.astype(dtype)
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

    def _apply(self, fn, op: str, parents: tuple, *args) -> "Tensor":
        """Run op `op`: `out, backward = fn(*arrays, *args)`, the parents' arrays first, then what else
        the op needs (dims, scales, index arrays); `backward` maps out's gradient to one per parent.
        An op that is a function of arrays alone can be recorded and run again on new arrays: the
        step compiler (tinygrad_lite.compiler) replays a training step from such records."""
        capture = _GRAD_STATE.capture
        if capture is not None:
            return capture.apply(fn, op, parents, args)
        if len(parents) == 1:
            data, backward = fn(parents[0].data, *args)
        else:
            data, backward = fn(*[p.data for p in parents], *args)
        return self._node(data, op, parents, backward)

    def _make(self, data: np.ndarray, op: str, parents: tuple, backward) -> "Tensor":
        """Wrap an op's output, computed outside `_apply`; record op, inputs and backward when any
        input needs grad. The step compiler cannot replay such an op, so it refuses it."""
        if _GRAD_STATE.capture is not None:
            _GRAD_STATE.capture.refuse_op(op)
        return self._node(data, op, parents, backward)

    @staticmethod
    def _node(data: np.ndarray, op: str, parents: tuple, backward) -> "Tensor":
        """A Tensor holding an op's output; it records op, inputs and backward when any input needs grad."""
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
            grad = np.ones(self.shape, self.dtype)
        else:
            grad = as_array(grad, self.dtype)
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
        return Tensor(np.zeros(shape_arg(shape), dtype=dtype), requires_grad=requires_grad)

    @staticmethod
    def ones(*shape, dtype=np.float32, requires_grad=False):
        """Returns a tensor of `shape` filled with 1 (float32 unless `dtype`), like torch.ones."""
        return Tensor(np.ones(shape_arg(shape), dtype=dtype), requires_grad=requires_grad)

    @staticmethod
    def full(shape, fill_value, dtype=np.float32, requires_grad=False):
        """Returns a tensor of `shape` filled with `fill_value`, like torch.full."""
        return Tensor(np.full(shape_arg((shape,)), fill_value, dtype=dtype), requires_grad=requires_grad)

    @staticmethod
    def randn(*shape, dtype=np.float32, requires_grad=False):
        """Returns standard-normal samples of `shape` from the engine's rng (see manual_seed), like
        torch.randn."""
        return Tensor(rng().standard_normal(shape_arg(shape)).astype(dtype), requires_grad=requires_grad)

    @staticmethod
    def rand(*shape, dtype=np.float32, requires_grad=False):
        """Returns uniform samples in [0, 1) of `shape` from the engine's rng, like torch.rand."""
        return Tensor(rng().random(shape_arg(shape)).astype(dtype), requires_grad=requires_grad)

    @staticmethod
    def uniform(*shape, low=0.0, high=1.0, dtype=np.float32, requires_grad=False):
        """Returns uniform samples in [low, high) of `shape` (torch's uniform_, as a
        constructor)."""
        return Tensor(rng().uniform(low, high, shape_arg(shape)).astype(dtype), requires_grad=requires_grad)

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
    def is_leaf(self):
        """True unless a recorded op made this tensor (parameters and inputs are leaves), like
        torch's .is_leaf."""
        return not self._prev

    @property
    def inputs(self) -> tuple:
        """The tensors the op that made this one read, in argument order; () for a leaf and for
        an op that was not recorded (no input required grad, or no_grad())."""
        return self._prev

    @property
    def op(self) -> str:
        """The name of the op that made this tensor ("matmul", "exp", ...); "" for a leaf."""
        return self._op

    @property
    def scope(self) -> tuple:
        """The Modules whose forward was running when this tensor was made, outermost first."""
        return self._scope

    def vjp(self, upstream) -> tuple:
        """The op's backward rule: given upstream = d(root)/d(self), of self's shape, the gradient
        d(root)/d(input) for each of `inputs` (None where the op sends none). Pure: no .grad
        changes. Raises RuntimeError once backward() has freed the graph (see retain_graph)."""
        if not self._prev:
            return ()
        if self._backward is None:
            raise RuntimeError(f"vjp: the graph through op '{self._op}' was freed by backward(); "
                               "call backward(retain_graph=True) to keep it")
        upstream = as_array(upstream, self.dtype)
        if upstream.shape != self.shape:
            raise ValueError(f"vjp: upstream has shape {upstream.shape}, expected {self.shape} (op '{self._op}')")
        return tuple(self._backward(upstream))

    def size(self, dim=None):
        """Returns the shape, or the size of dim `dim`, like torch.Tensor.size."""
        return self.shape if dim is None else self.shape[norm_dim("size", dim, self.ndim)]

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
        return self._unrecorded(detach_op, "detach", (self,))

    def clone(self) -> "Tensor":
        """Returns a copy of the data that stays in the graph (gradients flow back), like
        torch.clone."""
        return self._apply(clone_op, "clone", (self,))

    def contiguous(self) -> "Tensor":
        """Returns self: NumPy handles any memory layout (kept so PyTorch code runs)."""
        return self

    def to(self, dtype) -> "Tensor":
        """Returns the tensor cast to `dtype` (self if it has it already); the gradient is cast
        back, like torch.Tensor.to(dtype)."""
        dtype = np.dtype(dtype)
        if dtype == self.dtype:
            return self
        return self._apply(cast_op, "cast", (self,), dtype)

    def float(self):
        """Returns the tensor as float32 (in the graph), like torch.Tensor.float."""
        return self.to(np.float32)

    def double(self):
        """Returns the tensor as float64 (in the graph), like torch.Tensor.double."""
        return self.to(np.float64)

    def long(self):
        """Returns an int64 copy outside the graph, like torch.Tensor.long."""
        return self._unrecorded(cast_op, "cast", (self,), np.dtype(np.int64))

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
            t = Tensor(as_array(other, other.dtype if isinstance(other, np.ndarray) else None))
        a, b = self.dtype, t.dtype
        if a != b:
            if a in FLOAT_DTYPES and b in FLOAT_DTYPES:
                raise TypeError(f"{op}: mixing dtypes {a} and {b} would silently give float64; "
                                f"convert one side first with .float() or .double()")
            if a in FLOAT_DTYPES and b.kind in "iub":
                return t._unrecorded(cast_op, "cast", (t,), a)
        return t

    def _binary_inputs(self, other, op, reflected=False):
        other = self._coerce(other, op)
        if other.dtype in FLOAT_DTYPES and self.dtype.kind in "iub":
            self_ = self._unrecorded(cast_op, "cast", (self,), other.dtype)
            a, b = (other, self_) if reflected else (self_, other)
        else:
            a, b = (other, self) if reflected else (self, other)
        broadcast_shape(op, a.shape, b.shape)
        return a, b


# ---------------------------------------------------------------- the ops: output, and its backward

def detach_op(x):
    return x, None


def clone_op(x):
    return x.copy(), lambda g: (g,)


def cast_op(x, dtype):
    return x.astype(dtype), lambda g: (g.astype(x.dtype),)


# ---------------------------------------------------------------- module-level API

def tensor(data, requires_grad=False, dtype=None) -> Tensor:
    """Returns Tensor(data, requires_grad=requires_grad, dtype=dtype), like torch.tensor."""
    return Tensor(data, requires_grad=requires_grad, dtype=dtype)


zeros, ones, full, randn, rand = Tensor.zeros, Tensor.ones, Tensor.full, Tensor.randn, Tensor.rand
arange, zeros_like, ones_like = Tensor.arange, Tensor.zeros_like, Tensor.ones_like
cat, stack, where = Tensor.cat, Tensor.stack, Tensor.where
