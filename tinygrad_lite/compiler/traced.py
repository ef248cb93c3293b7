"""The arrays a step computes on while the compiler captures it.

A `Traced` stand-in holds an op's output during capture: ops read the array in it, but NumPy code
outside an op, or a read into Python (`float(loss)`, `if x > 0`, `t.numpy()[0]`), raises CompileError
naming the line, because a plan replays ops only: such code would run once, at capture, and its result
would be frozen into every later step.

An `Input` stand-in holds a step's input array (token ids, say) or what NumPy makes of it: there NumPy
code is recorded and replayed too (masks like `ids != pad`, `ids.max() < vocab`), as a prologue that
runs before the step's ops. A branch on such a value (`if (ids < 0).any(): raise ...`) becomes a guard:
a replay whose inputs take the other branch runs the step eagerly instead. Only shapes that depend on
values (boolean indexing, np.nonzero) and numbers read into Python (int(), float(), .item()) refuse.
"""
from __future__ import annotations

import os
import sys
import weakref

import numpy as np

_SKIP = (os.path.dirname(os.path.dirname(os.path.abspath(__file__))), os.path.dirname(np.__file__))


class CompileError(RuntimeError):
    """A step the compiler cannot record faithfully: it would replay it wrong, so it refuses it."""


def step_site() -> str:
    """file:line of the innermost frame outside the engine and NumPy: the step's own line."""
    frame = sys._getframe(1)
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(_SKIP):
        frame = frame.f_back
    return "<unknown>" if frame is None else f"{frame.f_code.co_filename}:{frame.f_lineno}"


def read_error(what: str) -> CompileError:
    return CompileError(
        f"compile: the step {what} at {step_site()} while it is captured; a compiled step replays "
        "its Tensor ops only, so that value would be frozen at the captured one. Keep the computation "
        "in Tensor ops, return the value as an output of the step, or run this step eagerly")


class Traced:
    """An array's stand-in that tells its shape and dtype and refuses everything else (see the module
    docstring). Not an ndarray: NumPy reaches its values only through `__array__`, which refuses, so
    np.asarray, ufuncs and indexing are all caught."""

    __slots__ = ("array",)

    def __init__(self, array):
        self.array = array

    shape = property(lambda self: self.array.shape)
    dtype = property(lambda self: self.array.dtype)
    ndim = property(lambda self: self.array.ndim)
    size = property(lambda self: self.array.size)

    def __len__(self):
        return len(self.array)

    def __array__(self, *args, **kwargs):
        raise read_error("hands a tensor's values to NumPy")

    def __getattr__(self, name):
        if name.startswith("_"):  # probes (NumPy's __array_interface__, hasattr(x, "_apply")) find nothing
            raise AttributeError(name)
        raise read_error(f"reads a tensor's values (.{name})")

    def __repr__(self):
        return f"<traced array {self.shape} {self.dtype}>"


READS = {"__float__": "float()", "__int__": "int()", "__index__": "an index", "__bool__": "bool() (a branch)",
         "__iter__": "a loop", "__complex__": "complex()", "item": ".item()", "tolist": ".tolist()"}


def _refuse(name: str):
    def method(self, *args, **kwargs):
        raise read_error(f"reads a value into Python ({READS[name]})" if name in READS
                         else f"reads a tensor's values ({name})")
    method.__name__ = name
    return method


for _name in ("__getitem__", "__setitem__", "__iter__", "__float__", "__int__", "__bool__", "__index__",
              "__complex__", "__add__", "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__", "__truediv__",
              "__rtruediv__", "__floordiv__", "__mod__", "__pow__", "__neg__", "__abs__", "__invert__", "__and__",
              "__or__", "__xor__", "__lt__", "__le__", "__gt__", "__ge__", "__eq__", "__ne__", "__matmul__",
              "__rmatmul__", "__copy__", "__deepcopy__", "__reduce__", "__reduce_ex__", "__format__", "__round__"):
    setattr(Traced, _name, _refuse(_name))
Traced.__hash__ = object.__hash__


class Rows(Traced):
    """An op's output at a padded batch's kept rows (compiler/rules/skip_padding.py): it holds (n, ...) and
    tells the padded shape (B, T, ...) that the step's own code expects."""

    __slots__ = ("padded",)

    def __init__(self, array, padded: tuple):
        self.array, self.padded = array, tuple(padded)

    shape = property(lambda self: self.padded)
    ndim = property(lambda self: len(self.padded))
    size = property(lambda self: int(np.prod(self.padded)))

    def __len__(self):
        return self.padded[0]


def traced(array) -> Traced:
    """`array` (an ndarray or a NumPy scalar) behind a Traced stand-in."""
    return Traced(array)


def plain(value):
    """The array behind a Traced stand-in (other values as they are)."""
    return value.array if isinstance(value, Traced) else value


DYNAMIC_SHAPES = {"nonzero", "flatnonzero", "argwhere", "unique", "extract", "compress", "trim_zeros", "where_1"}
METHODS = {"reshape", "astype", "sum", "any", "all", "min", "max", "mean", "prod", "cumsum", "argmax", "argmin",
           "transpose", "swapaxes", "squeeze", "ravel", "flatten", "copy", "clip", "round", "repeat"}
OPERATORS = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "truediv": np.true_divide,
             "floordiv": np.floor_divide, "mod": np.remainder, "pow": np.power, "and": np.bitwise_and,
             "or": np.bitwise_or, "xor": np.bitwise_xor, "lt": np.less, "le": np.less_equal, "gt": np.greater,
             "ge": np.greater_equal, "eq": np.equal, "ne": np.not_equal, "matmul": np.matmul}


class Input(Traced):
    """A step input's stand-in, on which NumPy code is recorded into the plan (see the module docstring).
    It holds its capture weakly: the capture holds it, and a cycle would keep the capture's arrays (every
    activation of the step) alive until Python's cycle collector ran, long after the plan was made."""

    __slots__ = ("_capture", "var")

    def __init__(self, array, capture, var: str):
        self.array, self._capture, self.var = array, weakref.ref(capture), var

    @property
    def capture(self):
        capture = self._capture()
        if capture is None:
            raise CompileError("compile: a step's input stand-in was used after its capture ended; a step must not "
                               "keep the values it computes from its inputs for a later call")
        return capture

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        if "out" in kwargs:
            raise read_error(f"writes NumPy's {ufunc.__name__} into an array (out=)")
        return self.capture.numpy(getattr(ufunc, method) if method != "__call__" else ufunc, inputs, kwargs)

    def __array_function__(self, func, types, args, kwargs):
        name = func.__name__ + ("_1" if func.__name__ == "where" and len(args) + len(kwargs) == 1 else "")
        if name in DYNAMIC_SHAPES:
            raise read_error(f"calls NumPy's {func.__name__}, whose shape depends on the values,")
        return self.capture.numpy(func, args, kwargs)

    def __getattr__(self, name):
        if name in METHODS:
            return lambda *args, **kwargs: self.capture.numpy(getattr(np.ndarray, name), (self, *args), kwargs)
        return Traced.__getattr__(self, name)

    @property
    def T(self):
        return self.capture.numpy(np.transpose, (self,), {})

    def __getitem__(self, key):
        parts = key if isinstance(key, tuple) else (key,)
        if any(isinstance(k, Traced) and k.dtype == bool for k in parts):
            raise read_error("indexes with a boolean mask of the values (a shape that depends on them)")
        return self.capture.numpy(_getitem, (self, key), {})

    def __bool__(self):
        return self.capture.guard(self)

    def __neg__(self):
        return self.capture.numpy(np.negative, (self,), {})

    def __invert__(self):
        return self.capture.numpy(np.invert, (self,), {})


def _getitem(array, key):
    return array[key]


def _operator(name, ufunc, reflected):
    def method(self, other):
        return self.capture.numpy(ufunc, (other, self) if reflected else (self, other), {})
    method.__name__ = f"__{'r' if reflected else ''}{name}__"
    return method


for _name, _ufunc in OPERATORS.items():
    setattr(Input, f"__{_name}__", _operator(_name, _ufunc, False))
    if _name not in ("lt", "le", "gt", "ge", "eq", "ne"):
        setattr(Input, f"__r{_name}__", _operator(_name, _ufunc, True))
Input.__hash__ = object.__hash__
