"""One op, two implementations: its formula, written in NumPy in the op's own file, and a faster twin
that a backend may run instead.

An op file marks its formula with one visible line, `@has_twin("softmax_forward")`, and calls it by
its name. Under the numba backend (kernels.backend: TINYGRAD_LITE_BACKEND, set_backend, use_backend;
fast.plain() picks numpy) a call runs the Numba kernel that kernels.TWINS registers under that
name: the same single op, computed faster, tested against the formula. Under numpy, or for an op
with no twin, the formula runs. Twins are imported on their first call, so importing the engine
imports no Numba and compiles nothing.
"""
from __future__ import annotations

import contextlib
import functools
import importlib
import inspect

from .kernels.backend import use_numba
from .kernels.twins import TWINS as KERNEL_TWINS

FORMULAS = {}  # op name -> its NumPy formula, as its op file wrote it
OPS = {}       # op name -> the function its op file calls: the twin or the formula, by backend


class _Twins(dict):
    """op name -> its Numba twin, looked up in kernels.TWINS on first use (the formula if it has none)."""

    def __missing__(self, name):
        where = KERNEL_TWINS.get(name)
        if where is None:
            twin = FORMULAS[name]
        else:
            module, function = where.split(":")
            twin = getattr(importlib.import_module(f"{__package__}.kernels.{module}"), function)
        self[name] = twin
        return twin


TWINS = _Twins()


def has_twin(name: str):
    """Decorator for an op's NumPy formula: calls run the Numba twin registered as `name` in
    kernels.TWINS while the numba backend is on, else the formula. One dictionary lookup a call."""
    def mark(plain):
        dispatched = functools.wraps(plain)(_caller(name, plain))
        FORMULAS[name] = plain
        dispatched.formula = plain
        OPS[name] = dispatched
        return dispatched
    return mark


def _caller(name, plain):
    """`def op(<plain's parameters>): return (TWINS[name] if use_numba() else plain)(<the same>)`, built
    with the formula's own parameters: one call and one backend check, as the kernels' own
    dispatchers cost before, plus one dictionary lookup (`*args, **kwargs` would add ~60 ns a call)."""
    params = list(inspect.signature(plain).parameters.values())
    if any(p.kind is not p.POSITIONAL_OR_KEYWORD for p in params):
        raise TypeError(f"has_twin: {plain.__name__} must take plain parameters (no *args, keyword-only)")
    defaults = {f"default_{p.name}": p.default for p in params if p.default is not p.empty}
    header = ", ".join(p.name if p.default is p.empty else f"{p.name}=default_{p.name}" for p in params)
    names = ", ".join(p.name for p in params)
    scope = {"TWINS": TWINS, "use_numba": use_numba, "plain": plain, "name": name, **defaults}
    exec(f"def op({header}):\n    return (TWINS[name] if use_numba() else plain)({names})\n", scope)
    return scope["op"]


def formula(name: str):
    """The NumPy formula of op `name`, whatever the backend: the plain version a twin is tested against."""
    return FORMULAS[name]


def op(name: str):
    """Op `name` as its op file calls it (twin or formula, by backend), for callers outside the op files."""
    return OPS[name]


@contextlib.contextmanager
def substitute(name: str, fn):
    """Context manager: op `name` calls `fn` in place of its formula inside the block, in this process only,
    then the formula again (also after an error). `fn` takes the formula's parameters. It replaces the
    formula where the op's caller looks it up at call time, so calls cost the same; the formula path
    (fast.plain(), or the numpy backend) runs it, a twin does not. For tinylearn's checks: a learner's
    own softmax, run by the engine's Tensor.softmax."""
    if name not in OPS:
        raise KeyError(f"substitute: no op named {name!r}; the ops with a formula are {sorted(OPS)}")
    if not callable(fn):
        raise TypeError(f"substitute: expected a function for op {name!r}, got {type(fn).__name__}")
    scope = OPS[name].__globals__
    before = scope["plain"]
    scope["plain"] = fn
    try:
        yield fn
    finally:
        scope["plain"] = before
