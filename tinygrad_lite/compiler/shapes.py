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

Constants that grow with a shape are shared too: a causal mask (T, T) or a table's first T rows. Where
two captures' programs differ only in such arrays, each a leading slice of the other's, every axis that
grew is bound to the signature's dims that moved with it (dim - offset = its length at both captures;
later captures drop the candidates that disagree). The family's plan then holds the largest array seen
and slices it, at each replay, to the length its dim gives (merged()): it serves every call whose bound
dims fit in it and agree with each other; a longer one is captured, and its arrays become the largest.
"""
from __future__ import annotations

import re
import types
from dataclasses import dataclass, field

import numpy as np

from .plan import Plan


@dataclass
class Family:
    """A family's reference plan, the dims of the signature it was captured for, and which of them later
    captures showed to vary; with growing constants, the plan that slices them (merged), the largest of
    each, and each grown axis's candidate (dim, offset) pairs. A dim that varied and follows no growing
    axis is free: the program does not depend on it."""
    plan: Plan
    dims: tuple
    varied: set = field(default_factory=set)
    served: Plan = None
    largest: dict = field(default_factory=dict)   # constant name -> its largest value seen
    bound: dict = field(default_factory=dict)     # (constant name, axis) -> {(dim index, offset)}

    def bound_dims(self) -> set:
        return {j for pairs in self.bound.values() for j, _ in pairs}


class SharedPlans:
    """The families of a compiled step's signatures (see the module docstring)."""
    def __init__(self):
        self.families: dict = {}
        self.differing: set = set()  # families a capture of which wrote another program than the reference

    def find(self, key: tuple) -> Plan | None:
        """The plan that serves signature `key`, if its dims differ from the reference's in free dims, and in
        bound dims that agree and fit the largest constants, only (and no capture of the family wrote
        another program)."""
        family, dims = split(key)
        shared = self.families.get(family)
        if shared is None or family in self.differing:
            return None
        moving = shared.varied | shared.bound_dims()  # the free dims and the bound ones
        if any(d != r and i not in moving for i, (d, r) in enumerate(zip(dims, shared.dims))):
            return None
        for (name, axis), pairs in shared.bound.items():
            lengths = {dims[j] - offset for j, offset in pairs}
            if len(lengths) != 1 or not 0 <= lengths.pop() <= _array(shared.largest[name]).shape[axis]:
                return None
        return shared.served or shared.plan

    def add(self, key: tuple, plan: Plan) -> Plan:
        """The plan to run for `key`, just captured as `plan`: the family's plan if `plan` is the same
        program but for growing constants (the dims where they differ vary), else `plan` (the family's
        reference if it has none that holds). A family one of whose captures wrote another program shares
        no more: its program depends on some shape."""
        family, dims = split(key)
        shared = self.families.get(family)
        if family in self.differing:
            return plan
        if shared is None or not shared.plan.holds():
            self.families[family] = Family(plan, dims)
            return plan
        grown = growing_constants(shared.plan, plan)
        if grown is None or not _bind(shared, grown, dims, plan.constants):
            self.differing.add(family)
            return plan
        shared.varied.update(i for i, (d, r) in enumerate(zip(dims, shared.dims)) if d != r)
        if shared.bound:  # a capture may grow a constant, or narrow which dim an axis follows
            shared.served = merged(shared.plan, shared.largest, shared.bound, key)
        return shared.served or shared.plan


def _bind(shared: Family, grown: dict, dims: tuple, constants: dict) -> bool:
    """Keep, for each bound axis, the candidate dims that give its length in this capture's `constants` too;
    bind each axis of a grown constant that differs from the reference's to the dims that moved with it; keep
    the largest of each constant. False where an axis has no dim left, or neither of two arrays holds the
    other."""
    for (name, axis), pairs in shared.bound.items():
        length = _array(constants[name]).shape[axis]
        shared.bound[(name, axis)] = pairs = {(j, offset) for j, offset in pairs if dims[j] - offset == length}
        if not pairs:
            return False
    for name, (ref, new) in grown.items():
        for axis, (a, b) in enumerate(zip(_array(ref).shape, _array(new).shape)):
            if a != b and (name, axis) not in shared.bound:
                pairs = {(j, r - a) for j, (r, d) in enumerate(zip(shared.dims, dims)) if r - a == d - b}
                if not pairs:
                    return False
                shared.bound[(name, axis)] = pairs
        bigger = _holding(shared.largest.get(name, ref), new)
        if bigger is None:
            return False
        shared.largest[name] = bigger
    return True


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


def growing_constants(a: Plan, b: Plan) -> dict | None:
    """{constant name: (a's value, b's value)} where two plans of the same source, leaves and modes differ
    only in arrays one of which is a leading slice of the other (constant tensors' arrays too); {} for the
    same program, None for another one."""
    if (a.source != b.source or a.constants.keys() != b.constants.keys()
            or [(id(m), on) for m, on in a.modes] != [(id(m), on) for m, on in b.modes]):
        return None
    grown = {}
    for name in a.constants:
        x, y = a.constants[name], b.constants[name]
        if same_value(x, y):
            continue
        if _holding(x, y) is None or not _sliceable(a.source, name, x):
            return None
        grown[name] = (x, y)
    others = [[(t, rest) for t, *rest in plan.leaves if not any(t is g[k] for g in grown.values())]
              for k, plan in enumerate((a, b))]
    return grown if same_value(*others) else None


def _array(value):
    return value.data if hasattr(value, "_apply") else value


def _holding(x, y):
    """The one of x, y that holds the other as its leading slice (arrays, or constant tensors of them),
    or None."""
    if hasattr(x, "_apply") != hasattr(y, "_apply"):
        return None
    if hasattr(x, "_apply") and (x.requires_grad or y.requires_grad or x.grad is not None or y.grad is not None):
        return None
    a, b = _array(x), _array(y)
    if not (isinstance(a, np.ndarray) and isinstance(b, np.ndarray)) or a.ndim != b.ndim or a.ndim == 0 \
            or a.dtype != b.dtype:
        return None
    small, big = (a, b) if all(m <= n for m, n in zip(a.shape, b.shape)) else (b, a)
    if not all(m <= n for m, n in zip(small.shape, big.shape)):
        return None
    if not np.array_equal(big[tuple(slice(0, n) for n in small.shape)], small):
        return None
    return x if big is a else y


def _sliceable(source: str, name: str, value) -> bool:
    """Whether a plan reads constant `name` only where a slice of it may stand: a tensor's as `name.data`."""
    uses = re.findall(rf"\b{name}\b(\.\w+)?", source)
    return all(attribute == (".data" if hasattr(value, "_apply") else "") for attribute in uses)


def merged(plan: Plan, largest: dict, bound: dict, key: tuple) -> Plan:
    """`plan` with each growing constant its largest value, sliced at each replay to the lengths its bound
    dims give (the first candidate of each axis; find() checks that they agree)."""
    dims = dim_expressions(key)
    source = plan.source
    for name, value in largest.items():
        parts = []
        for axis in range(_array(value).ndim):
            pairs = sorted(bound.get((name, axis), ()))
            parts.append(f":{dims[pairs[0][0]]} - {pairs[0][1]}" if pairs else ":")
        attribute = ".data" if hasattr(value, "_apply") else ""
        source = re.sub(rf"\b{name}\b{re.escape(attribute)}", f"{name}{attribute}[{', '.join(parts)}]", source)
    return plan.with_constants(source, dict(plan.constants, **largest),
                               {id(t): largest[name] for name, t in plan.constants.items() if name in largest})


def dim_expressions(key: tuple) -> list:
    """Where each of split(key)'s dims is read at replay: ARGS[i].shape[a] and the like."""
    out = []

    def walk(part, where):
        if part[0] == "tuple":
            for j, p in enumerate(part[1]):
                walk(p, f"{where}[{j}]")
        elif part[0] in ("Tensor", "array"):
            array = f"{where}.data" if part[0] == "Tensor" else where
            out.extend(f"{array}.shape[{a}]" for a in range(len(part[1])))
    for i, part in enumerate(key[0]):
        walk(part, f"ARGS[{i}]")
    return out


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
