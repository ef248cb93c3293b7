"""compile(fn): a training step that runs as a replayed plan.

The first call with a new signature (the shapes and dtypes of the array arguments, the values of the
others, grad mode, the speed tricks and the kernel backend) captures `fn` dry (capture.py), keeps the
plan, and runs it; later calls with that signature run the plan. A plan whose assumptions broke (a
leaf changed shape, a module switched between train and eval) is captured again. Under anomaly mode,
or retain_grads(), the step runs eagerly: those look at every op, which a plan does not.
"""
from __future__ import annotations

import functools

import numpy as np

from .. import fast, random
from ..autograd import capturing, is_anomaly_enabled, is_capturing, is_grad_enabled, retains_all_grads
from ..kernels.backend import use_numba
from . import rules
from .capture import Capture
from .plan import FALLBACK, Plan
from .traced import CompileError


def compile(fn):
    """`step = compile(fn)`: `step(*args)` gives what `fn(*args)` gives, bit for bit, from a replayed
    plan. `fn` is a training step (forward, loss, backward, optimizer update); its arguments are
    Tensors, arrays (inputs whose values change) and plain values (static: a new value captures anew)."""
    if not callable(fn):
        raise TypeError(f"compile: expected a function, got {type(fn).__name__}")
    return CompiledStep(fn)


class CompiledStep:
    """A compiled step: its plans by signature (see the module docstring)."""

    def __init__(self, fn):
        self.fn = fn
        self.plans: dict = {}
        self.captures = 0
        self.fallbacks = 0  # calls a guard sent to eager mode
        functools.update_wrapper(self, fn)

    def __call__(self, *args):
        if is_anomaly_enabled() or retains_all_grads() or is_capturing():
            return self.fn(*args)
        key = signature(args)
        plan = self.plans.get(key)
        if plan is None or not plan.holds():
            plan = self.plans[key] = self.capture(args)
        result = plan(args)
        if result is FALLBACK:
            self.fallbacks += 1
            return self.fn(*args)
        return result

    def capture(self, args: tuple) -> Plan:
        """Run fn dry on args and return its plan (nothing the step changes is changed): once to
        record its ops, and once more with what the rewrite rules fuse, if they fuse anything. The rules
        are those switched on now, at the call (the signature's switches), whatever the step switches."""
        switched_on = rules.switched_on()
        capture = self._capture(args, Capture())
        rewrites = rules.find(capture.records, switched_on)
        if rewrites:
            capture = self._capture(args, Capture(rewrites))
            capture.check_rewrites()
        self.captures += 1
        return Plan(capture, capture.result)

    def _capture(self, args: tuple, capture: Capture) -> Capture:
        views = [capture.input(i, a) if _is_array(a) else a for i, a in enumerate(args)]
        tensors = [(a, a.data) for a in args if _is_tensor(a)]
        for a, view in zip(args, views):
            if _is_tensor(a):
                a.data = view
        rng_state = random.get_rng_state()
        try:
            with capturing(capture):
                result = self.fn(*[a if _is_tensor(a) else v for a, v in zip(args, views)])
                capture.result = capture.output(result)
        finally:
            random.set_rng_state(rng_state)
            capture.restore()
            for a, data in tensors:
                a.data = data
        return capture


def _is_tensor(value) -> bool:
    return hasattr(value, "_apply") and hasattr(value, "data")


def _is_array(value) -> bool:
    return isinstance(value, np.ndarray) or _is_tensor(value)


def signature(args: tuple) -> tuple:
    """What a plan is captured for: the arrays' shapes and dtypes, the other arguments' values, and the
    switches that choose the ops."""
    parts = []
    for a in args:
        if _is_tensor(a):
            parts.append(("Tensor", a.data.shape, a.data.dtype.str, a.requires_grad))
        elif isinstance(a, np.ndarray):
            parts.append(("array", a.shape, a.dtype.str))
        else:
            try:
                hash(a)
            except TypeError:
                raise CompileError(f"compile: argument {len(parts)} is a {type(a).__name__}, which is neither an "
                                   "array, a Tensor nor a hashable value the plan could be keyed by") from None
            parts.append(("value", a))
    tricks = tuple(getattr(fast.TRICKS, name) for name in fast.NAMES)
    return tuple(parts), is_grad_enabled(), tricks, use_numba()
