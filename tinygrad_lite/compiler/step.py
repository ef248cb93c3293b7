"""compile(fn): a training step that runs as a replayed plan.

The first call with a new signature (the shapes and dtypes of the array arguments, the values of the
others, grad mode, the speed tricks and the kernel backend) captures `fn` dry (capture.py), keeps the
plan, and runs it; later calls with that signature run the plan. A plan whose assumptions broke (a
leaf changed shape, a module switched between train and eval) is captured again. With any_shape, a
plan also serves the shapes it was seen not to depend on (shapes.py). Under anomaly mode, or
retain_grads(), the step runs eagerly: those look at every op, which a plan does not.
"""
from __future__ import annotations

import functools

import numpy as np

from .. import fast, random
from ..autograd import capturing, is_anomaly_enabled, is_capturing, is_grad_enabled, retains_all_grads
from ..kernels.backend import use_numba
from . import rules
from .capture import Capture, ForwardDone
from .plan import FALLBACK, Plan
from .shapes import SharedPlans, split
from .traced import CompileError


def compile(fn, any_shape: bool = False):
    """`step = compile(fn)`: `step(*args)` gives what `fn(*args)` gives, bit for bit, from a replayed
    plan. `fn` is a training step (forward, loss, backward, optimizer update); its arguments are
    Tensors, arrays (inputs whose values change), tuples of arrays, and plain values (static: a new
    value captures anew). any_shape=True: a plan serves other shapes once a capture at other shapes
    wrote the same program (shapes.py), for steps whose arrays come in many shapes."""
    if not callable(fn):
        raise TypeError(f"compile: expected a function, got {type(fn).__name__}")
    return CompiledStep(fn, any_shape)


class CompiledStep:
    """A compiled step: its plans by signature (see the module docstring)."""

    def __init__(self, fn, any_shape: bool = False):
        self.fn = fn
        self.plans: dict = {}
        self.shared = SharedPlans() if any_shape else None
        self.captures = 0
        self.joined = 0     # captures that wrote a program a family's plan already runs (any_shape)
        self.fallbacks = 0  # calls a guard sent to eager mode
        functools.update_wrapper(self, fn)

    def __call__(self, *args):
        if is_anomaly_enabled() or retains_all_grads() or is_capturing():
            return self.fn(*args)
        key = signature(args)
        plan = self.plan_for(key)
        if plan is None:
            captured = self.capture(args)
            plan = captured if self.shared is None else self.shared.add(key, captured)
            if plan is captured:
                self.plans[key] = plan
            else:
                self.joined += 1
        result = plan(args)
        if result is FALLBACK:
            self.fallbacks += 1
            return self.fn(*args)
        return result

    def plan_for(self, key: tuple) -> Plan | None:
        """The plan that holds for signature `key`: its own, or a shared one (any_shape), if any."""
        plan = self.plans.get(key)
        if (plan is None or not plan.holds()) and self.shared is not None:
            plan = self.shared.find(key)
        return plan if plan is not None and plan.holds() else None

    def serves(self, *args) -> bool:
        """Whether a call on `args` would replay a plan it has, without capturing."""
        return self.plan_for(signature(args)) is not None

    def family(self, *args) -> tuple:
        """The family of a call on `args` (shapes.py): its signature with ranks for shapes (any_shape),
        else the signature itself."""
        key = signature(args)
        return split(key)[0] if self.shared is not None else key

    def sharing(self, family: tuple) -> bool:
        """Whether a capture in `family` may yet share its plan: any_shape, and no capture in it wrote
        another program than its reference."""
        return self.shared is not None and family not in self.shared.differing

    def capture(self, args: tuple) -> Plan:
        """Run fn dry on args and return its plan (nothing the step changes is changed): its forward, up
        to backward(), to record the ops the rewrite rules read; then the whole step, with what they fuse
        (or plain, if they fuse nothing); once more on a padded batch's kept rows, if rule skip_padding
        finds them; rule flat_optimizer then edits the optimizer's step. The rules are those switched on
        now, at the call (the signature's switches), whatever the step switches."""
        switched_on = rules.switched_on()
        skip = fast.TRICKS.skip_padding
        capture = self._capture(args, Capture(forward_only=True))
        rewrites = rules.find(capture.records, switched_on)
        if rewrites:
            capture = self._fused(args, rewrites, capture.backward_reached, switched_on)
        elif capture.backward_reached:  # stopped there: the plan needs the whole step
            capture = self._capture(args, Capture())
        rows = rules.SKIP_PADDING.find(capture.records) if skip else None
        if rows is not None:
            capture = self._capture(args, Capture(capture.rewrites, rows))
            capture.check_rewrites()
        if fast.TRICKS.flat_optimizer:
            rules.FLAT_OPTIMIZER.rewrite(capture)
        self.captures += 1
        return Plan(capture, capture.result)

    def _fused(self, args: tuple, rewrites: dict, from_forward: bool, switched_on: tuple) -> Capture:
        """The whole step captured with `rewrites`. Found on the forward alone (from_forward), they may fuse
        an op whose output the step reads after backward() (returns it, say): that capture then refuses
        after backward(), and the rules read the whole plain step instead. A refusal before backward() is
        the step's own: it ran other ops than its forward-only run did."""
        capture = Capture(rewrites)
        try:
            self._capture(args, capture)
            capture.check_rewrites()
            return capture
        except CompileError:
            if not (from_forward and capture.backward_reached):
                raise
        capture = self._capture(args, Capture())
        rewrites = rules.find(capture.records, switched_on)
        return self._fused(args, rewrites, False, switched_on) if rewrites else capture

    def _capture(self, args: tuple, capture: Capture) -> Capture:
        views = [capture.input(i, a) if _is_array(a) else
                 tuple(capture.input((i, j), x) if _is_array(x) else x for j, x in enumerate(a)) if _holds_arrays(a)
                 else a for i, a in enumerate(args)]
        tensors = [(a, a.data) for a in args if _is_tensor(a)]
        for a, view in zip(args, views):
            if _is_tensor(a):
                a.data = view
        rng_state = random.get_rng_state()
        try:
            with capturing(capture):
                result = self.fn(*[a if _is_tensor(a) else v for a, v in zip(args, views)])
                capture.result = capture.output(result)
                if capture.rows is not None:
                    capture.finish_rows()
        except ForwardDone:
            pass  # a forward-only capture reached backward(): its records are complete
        finally:
            random.set_rng_state(rng_state)
            capture.restore()
            capture.keep.clear()  # the step's tensors, alive while the capture named them by id: a step's activations
            for a, data in tensors:
                a.data = data
        return capture


def _is_tensor(value) -> bool:
    return hasattr(value, "_apply") and hasattr(value, "data")


def _is_array(value) -> bool:
    return isinstance(value, np.ndarray) or _is_tensor(value)


def _holds_arrays(value) -> bool:
    return isinstance(value, tuple) and any(_is_array(x) for x in value)


def signature(args: tuple) -> tuple:
    """What a plan is captured for: the arrays' shapes and dtypes, the other arguments' values, and the
    switches that choose the ops."""
    parts = []
    for i, a in enumerate(args):
        if _holds_arrays(a):
            if any(_is_tensor(x) for x in a):
                raise CompileError(f"compile: argument {i} is a tuple holding a Tensor; pass Tensors as arguments "
                                   "of their own (a tuple may hold arrays and values)")
            parts.append(("tuple", tuple(_part(i, x) for x in a)))
        else:
            parts.append(_part(i, a))
    tricks = tuple(getattr(fast.TRICKS, name) for name in fast.NAMES)
    return tuple(parts), is_grad_enabled(), tricks, use_numba()


def _part(i: int, a) -> tuple:
    if _is_tensor(a):
        return "Tensor", a.data.shape, a.data.dtype.str, a.requires_grad
    if isinstance(a, np.ndarray):
        return "array", a.shape, a.dtype.str
    try:
        hash(a)
    except TypeError:
        raise CompileError(f"compile: argument {i} is a {type(a).__name__}, which is neither an array, a Tensor, "
                           "a tuple of arrays nor a hashable value the plan could be keyed by") from None
    return "value", a
