"""Plans that serve many shapes: a plan captured at some shapes replays at others once a capture there
wrote the same program.

With compile(fn, any_shape=True) the signatures that differ only in their arrays' shapes (the same ranks,
dtypes, values and switches) form a family. Its first plan is its reference. When a later capture of the
family, at other shapes, writes the same program (the same source, constants equal in value or the same
object, the same leaves and modes), no constant of that program depends on the dims in which the two
captures differ: those dims are free, and a call whose shapes differ from the reference's in free dims
only replays the reference, uncaptured. A program that differs (a constant made from a shape, as a
mean's 1/n or a causal mask's size) keeps a plan of its own, as without any_shape, and from then on its
family shares no plan: its program depends on some shape.

The ops run at replay on the replay's arrays, and choose their kernels there as eager mode does. What
the comparison cannot see is Python outside the ops that branches on a shape and took the same way at
both captures (`if n > 1000`): a step that does so must not use any_shape.
"""
from __future__ import annotations

import types
from dataclasses import dataclass, field

import numpy as np

from .plan import Plan


@dataclass
class Family:
    """A family's reference plan, the dims of the signature it was captured for, and which are free."""

    plan: Plan
    dims: tuple
    free: set = field(default_factory=set)


class SharedPlans:
    """The families of a compiled step's signatures (see the module docstring)."""

    def __init__(self):
        self.families: dict = {}
        self.differing: set = set()  # families a capture of which wrote another program than the reference

    def find(self, key: tuple) -> Plan | None:
        """The reference plan that serves signature `key`, if its dims differ from it in free dims only (and
        no capture of the family wrote another program)."""
        family, dims = split(key)
        shared = self.families.get(family)
        if shared is None or family in self.differing:
            return None
        if any(d != r and i not in shared.free for i, (d, r) in enumerate(zip(dims, shared.dims))):
            return None
        return shared.plan

    def add(self, key: tuple, plan: Plan) -> Plan:
        """The plan to run for `key`, just captured as `plan`: the family's reference if `plan` is the same
        program (the dims where they differ become free), else `plan` (the family's reference if it has
        none that holds). A family one of whose captures wrote another program shares no more: its
        program depends on some shape."""
        family, dims = split(key)
        shared = self.families.get(family)
        if family in self.differing:
            return plan
        if shared is None or not shared.plan.holds():
            self.families[family] = Family(plan, dims)
            return plan
        if not same_program(shared.plan, plan):
            self.differing.add(family)
            return plan
        shared.free.update(i for i, (d, r) in enumerate(zip(dims, shared.dims)) if d != r)
        return shared.plan


def split(key: tuple) -> tuple:
    """(family, dims): the signature with each array's shape replaced by its rank, and all those shapes'
    dims in order."""
    parts, *rest = key
    dims: list = []

    def rank(part):
        if part[0] == "tuple":
            return "tuple", tuple(rank(p) for p in part[1])
        if part[0] in ("Tensor", "array"):
            dims.extend(part[1])
            return (part[0], len(part[1]), *part[2:])
        return part
    family = tuple(rank(p) for p in parts)
    return (family, *rest), tuple(dims)


def same_program(a: Plan, b: Plan) -> bool:
    """Whether two plans run the same program: source, constants, leaves and modules' modes."""
    return (a.source == b.source and a.constants.keys() == b.constants.keys()
            and all(same_value(a.constants[k], b.constants[k]) for k in a.constants)
            and same_value(a.leaves, b.leaves)
            and [(id(m), on) for m, on in a.modes] == [(id(m), on) for m, on in b.modes])


PLAIN = (bool, int, str, bytes, type(None), np.dtype, np.integer, np.bool_)


def same_value(x, y) -> bool:
    """Equal plain values (floats bit for bit), equal arrays, or the same object; and two Tensors that are
    constant scalars of one value (`x * 2.0` makes a new one at each capture), never two parameters."""
    if x is y:
        return True
    if type(x) is not type(y):
        return False
    if isinstance(x, np.ndarray):
        return x.shape == y.shape and x.dtype == y.dtype and x.tobytes() == y.tobytes()
    if isinstance(x, (float, complex, np.floating, np.complexfloating)):
        return np.asarray(x).tobytes() == np.asarray(y).tobytes()
    if isinstance(x, (tuple, list)):
        return len(x) == len(y) and all(same_value(p, q) for p, q in zip(x, y))
    if isinstance(x, dict):
        return list(x) == list(y) and all(same_value(x[k], y[k]) for k in x)
    if isinstance(x, slice):
        return same_value((x.start, x.stop, x.step), (y.start, y.stop, y.step))
    if hasattr(x, "_apply") and hasattr(x, "data"):  # a Tensor: the same one, or a scalar constant of one value
        return (x.ndim == 0 and not x.requires_grad and not y.requires_grad and x.grad is None and y.grad is None
                and same_value(x.data, y.data))
    if isinstance(x, types.MethodType):
        return x.__func__ is y.__func__ and x.__self__ is y.__self__
    return isinstance(x, PLAIN) and x == y
