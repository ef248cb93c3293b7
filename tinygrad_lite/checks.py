"""Argument checks shared by every floor of the stack, so the same mistake gets the same words
wherever it is made ("Linear: in_features must be a positive int, got 0"). Each check returns the
value in its plain Python type and raises an error that names the operation and the argument."""
from __future__ import annotations

import math
import os
import re
from numbers import Real

import numpy as np

ACTIVATIONS = ("relu", "tanh", "sigmoid", "gelu", "linear")
"""The activations every floor offers by name: a method of that name on Value and on Tensor, and
"linear", no activation at all."""


OFF_WORDS = ("0", "false", "off", "no")
ON_WORDS = ("1", "true", "on", "yes")

_CODE_NAME = re.compile(r"^(?=[^:\s]*[._])[A-Za-z_][\w.]*: ")


def message_for_user(exc: BaseException) -> str:
    """The one line a command line prints for `exc`: its text, white space folded, without a leading
    code name such as `checkpoint.load: ` or `CharTokenizer.encode: `, which names a function the
    user never called. The exception itself keeps it, for a reader of the library's tracebacks."""
    text = " ".join(str(exc).split())
    return _CODE_NAME.sub("", text, count=1) or type(exc).__name__


def switched_off(env_var: str) -> bool:
    """True if the environment variable is set to 0, false, off or no (any case): how the engine's
    on-by-default switches (TINYGRAD_LITE_FAST, TINYGRAD_LITE_KEEP_FREED_MEMORY) are turned off."""
    return os.environ.get(env_var, "").strip().lower() in OFF_WORDS


def switched_on(env_var: str) -> bool:
    """True if the environment variable is set to 1, true, on or yes (any case): how an off-by-default
    switch (TINYGRAD_LITE_COMPILE for the translator) is turned on."""
    return os.environ.get(env_var, "").strip().lower() in ON_WORDS


def is_int(value) -> bool:
    """True for a Python or NumPy integer, never a bool (True is an int to Python)."""
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool)


def is_real(value) -> bool:
    """True for a Python or NumPy real number (int or float), never a bool."""
    return isinstance(value, Real) and not isinstance(value, bool)


def positive_int(op: str, name: str, value) -> int:
    """value as an int if it is a positive integer (Python or NumPy, never a bool), else a
    ValueError naming the operation and the argument."""
    return int_at_least(op, name, value, 1)


def head_size(op: str, d_model, h) -> int:
    """d_k = d_model / h (paper §3.2.2), once d_model and h are positive ints and h divides d_model;
    else a ValueError naming the operation."""
    d_model, h = positive_int(op, "d_model", d_model), positive_int(op, "h", h)
    if d_model % h:
        raise ValueError(f"{op}: d_model ({d_model}) must be divisible by h ({h}); d_k = d_model / h")
    return d_model // h


def int_at_least(op: str, name: str, value, low: int) -> int:
    """value as an int if it is an integer >= low, else a ValueError ("must be a positive int"
    when low is 1)."""
    if not is_int(value) or value < low:
        expected = "a positive int" if low == 1 else f"an int >= {low}"
        raise ValueError(f"{op}: {name} must be {expected}, got {value!r}")
    return int(value)


def number(op: str, name: str, value, low: float | None = None, high: float | None = None, *,
           low_open: bool = False, high_open: bool = False, allow_inf: bool = False) -> float:
    """value as a float if it is a real number (never a bool), finite unless `allow_inf`, and within
    [low, high] (an end is left out with low_open/high_open; None means unbounded). A non-number is
    a TypeError, a number out of range a ValueError: "lr must be finite and >= 0, got -0.1"."""
    if not is_real(value):
        raise TypeError(f"{op}: {name} must be a number, got {type(value).__name__}")
    value = float(value)
    too_low = low is not None and (value <= low if low_open else value < low)
    too_high = high is not None and (value >= high if high_open else value > high)
    if math.isnan(value) or (math.isinf(value) and not allow_inf) or too_low or too_high:
        raise ValueError(f"{op}: {name} must be {_expected(low, high, low_open, high_open, allow_inf)}, "
                         f"got {value!r}")
    return value


def _expected(low, high, low_open, high_open, allow_inf) -> str:
    """What `number` accepts, in words: "finite and in [0, 1)", "finite and > 0", ">= 0" (inf
    allowed), "a finite number" (no bounds)."""
    if low is not None and high is not None:
        bounds = f"in {'(' if low_open else '['}{low:g}, {high:g}{')' if high_open else ']'}"
    elif low is not None:
        bounds = f"{'>' if low_open else '>='} {low:g}"
    elif high is not None:
        bounds = f"{'<' if high_open else '<='} {high:g}"
    else:
        return "a number" if allow_inf else "a finite number"
    return bounds if allow_inf else f"finite and {bounds}"


def probability(op: str, name: str, value, *, allow_one: bool = True) -> float:
    """value as a float in [0, 1] ([0, 1) without `allow_one`, for a rate whose 1 means nothing
    is kept or nothing is forgotten), else a ValueError: "p must be in [0, 1], got 1.5"."""
    if is_real(value) and 0 <= value <= 1 and (allow_one or value < 1):
        return float(value)
    raise ValueError(f"{op}: {name} must be in [0, 1{']' if allow_one else ')'}, got {value!r}")


def one_of(op: str, name: str, value, choices):
    """value if it is one of `choices`, else a ValueError listing them."""
    if value not in choices:
        raise ValueError(f"{op}: {name} must be one of {list(choices)}, got {value!r}")
    return value


def activation(op: str, act) -> str:
    """act if it names one of ACTIVATIONS; the one check (and message) for activation names."""
    return one_of(op, "act", act, ACTIVATIONS)


def float_dtype(op: str, dtype) -> np.dtype:
    """The parameters' dtype: float32 for None (PyTorch's default dtype), else a NumPy floating
    dtype; anything else is a TypeError naming the operation."""
    resolved = np.dtype(np.float32 if dtype is None else dtype)
    if resolved.kind != "f":
        raise TypeError(f"{op}: dtype must be a floating dtype (float32 or float64), got {resolved}")
    return resolved
