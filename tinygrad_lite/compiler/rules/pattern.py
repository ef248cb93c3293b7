"""What a rewrite rule reads and what it answers.

A rule reads the first capture's op records (`Record`) and answers groups of ops to fuse, each a
dict {role: op index} (the rule's names for its ops, "linear", "relu", ...). Every op of a group but
the last to run is deferred: the second capture makes a placeholder instead (`Defer`), which only ops
of the group read. The last op (the group's root) runs the rule's fused op instead (`Fuse`): the rule's
`emit` gets what each op of the group was called with (`Ran`) and returns the fused op (`Fused`), whose
inputs are the group's outer inputs. So the backward pass and every gradient sum follow the fused op.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple


@dataclass
class Record:
    """One op of a first capture: `parents` holds, per parent, the index of the op that made it (None
    for a leaf or an input), and `leaves` the parent Tensor itself where it is a leaf or an input (None
    where an op made it); `uses` counts the ops that read the output, and the step's outputs."""
    fn: object
    op: str
    parents: tuple
    args: tuple
    shape: tuple
    dtype: object
    uses: int = 0
    leaves: tuple = ()


class Ran(NamedTuple):
    """An op of a group as the second capture calls it: its name, parent Tensors and arguments, and
    the placeholder it returned (None for the root)."""
    op: str
    parents: tuple
    args: tuple
    out: object = None


class Fused(NamedTuple):
    """A rule's fused op: `fn(*parents' arrays, *args)`, named `op`. `assumed` holds (leaf Tensor,
    value) pairs the rule folded into `args`: each replay checks them, and runs the step eagerly if a
    leaf's value moved."""
    fn: object
    op: str
    parents: tuple
    args: tuple
    assumed: tuple = ()


class Defer:
    """Make no op here: the fused op at the group's root stands in for it."""

    def __init__(self, record: Record):
        self.record = record


class Fuse:
    """Run `rule`'s fused op instead of this one (`record`), the root of the group `roles` ({role: op index})."""

    def __init__(self, rule, roles: dict, record: Record):
        self.rule, self.roles, self.record = rule, roles, record


def producer(records: list, i: int, slot: int, fn) -> int | None:
    """The index of the op that made parent `slot` of op i, if it is an op of function `fn`."""
    parents = records[i].parents
    j = parents[slot] if slot < len(parents) else None
    return j if j is not None and records[j] is not None and records[j].fn is fn else None


def is_group(records: list, roles: dict, draws: tuple = ()) -> bool:
    """Whether `roles` can run as one op at its root (its last op): every other op's output is read by
    ops of the group only, and no op outside the group runs between an op that draws random numbers
    (the roles in `draws`) and the root, so the fused op draws in the plain ops' order."""
    group, root = set(roles.values()), max(roles.values())
    if len(group) != len(roles):
        return False
    for j in group - {root}:
        if records[j].uses != sum(records[i].parents.count(j) for i in group):
            return False
    return all(set(range(roles[d], root + 1)) <= group for d in draws if d in roles)
