"""The arrays a step computes on while the compiler captures it. A `Traced` stand-in holds the value of
a step's input or of an op's output during capture: ops read the array in it, but NumPy code outside an op, or a
read into Python (`float(loss)`, `if x > 0`, `t.numpy()[0]`), raises CompileError naming the line,
because a plan replays ops only: such code would run once, at capture, and its result would be
frozen into every later step."""
from __future__ import annotations

import os
import sys

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
        if name.startswith("__"):  # protocol probes (NumPy's __array_interface__ ...) find nothing
            raise AttributeError(name)
        raise read_error(f"reads a tensor's values (.{name})")

    def __repr__(self):
        return f"<traced array {self.shape} {self.dtype}>"


def _refuse(name: str):
    def method(self, *args, **kwargs):
        raise read_error(f"reads a tensor's values ({name})")
    method.__name__ = name
    return method


for _name in ("__getitem__", "__setitem__", "__iter__", "__float__", "__int__", "__bool__", "__index__",
              "__complex__", "__add__", "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__", "__truediv__",
              "__rtruediv__", "__floordiv__", "__mod__", "__pow__", "__neg__", "__abs__", "__invert__", "__and__",
              "__or__", "__xor__", "__lt__", "__le__", "__gt__", "__ge__", "__eq__", "__ne__", "__matmul__",
              "__rmatmul__", "__copy__", "__deepcopy__", "__reduce__", "__reduce_ex__", "__format__", "__round__"):
    setattr(Traced, _name, _refuse(_name))
Traced.__hash__ = object.__hash__


def traced(array) -> Traced:
    """`array` (an ndarray or a NumPy scalar) behind a Traced stand-in."""
    return Traced(array)


def plain(value):
    """The array behind a Traced stand-in (other values as they are)."""
    return value.array if type(value) is Traced else value
