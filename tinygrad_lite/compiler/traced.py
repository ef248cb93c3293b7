"""The arrays a step computes on while the compiler captures it. A `Traced` array is the value of a
step's input or of an op's output during capture: ops read it, but NumPy code outside an op, or a
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


class Traced(np.ndarray):
    """An ndarray view that refuses every computation made outside an op (see the module docstring)."""

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        raise read_error(f"computes NumPy's {ufunc.__name__} on a tensor's values")

    def __array_function__(self, func, types, args, kwargs):
        raise read_error(f"calls NumPy's {func.__name__} on a tensor's values")

    def __repr__(self):
        return f"<traced array {self.shape} {self.dtype}>"

    __str__ = __repr__


def _refuse(name: str):
    def method(self, *args, **kwargs):
        raise read_error(f"reads a tensor's values ({name})")
    method.__name__ = name
    return method


for _name in ("__getitem__", "__setitem__", "__iter__", "__float__", "__int__", "__bool__", "__index__",
              "__complex__", "item", "tolist", "tobytes", "astype", "copy", "reshape", "transpose", "ravel",
              "flatten", "fill", "__copy__", "__deepcopy__", "__reduce__", "__reduce_ex__"):
    setattr(Traced, _name, _refuse(_name))


def traced(array) -> Traced:
    """`array` (an ndarray or a NumPy scalar) as a Traced view of the same memory."""
    return np.asarray(array).view(Traced)


def plain(array):
    """The ndarray under a Traced view (other values as they are)."""
    return np.ndarray.view(array, np.ndarray) if type(array) is Traced else array
