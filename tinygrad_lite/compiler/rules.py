"""The rewrite rules: patterns of plain ops that a plan runs as one fused op.

Each rule is a small named entry: what it matches, what it emits, the switch that turns it off (a
name in fast.TRICKS, so `fast.plain()` and `tricks_off(name)` turn it off with the eager fast path
of the same name), and its measured gain. A rule reads the first capture's op records (`Record`:
each op's function, its parents' producers, arguments, shape, and how many ops use its output) and
answers which ops to fuse; the step is then captured again with those ops replaced (capture.py), so
the backward pass and every gradient sum follow the fused op. With its switch off, the plain ops
run: the rule's test oracle (tests/test_compile_rules.py).
"""
from __future__ import annotations

from dataclasses import dataclass

from .. import fast


@dataclass
class Record:
    """One op of a first capture: `parents` holds, per parent, the index of the op that made it (None
    for a leaf or an input); `uses` counts the ops that read the output, and the step's outputs."""
    fn: object
    op: str
    parents: tuple
    args: tuple
    shape: tuple
    dtype: object
    uses: int = 0


class Defer:
    """Make no op here: the fused op that reads this output's inputs stands in for it."""

    def __init__(self, record: Record):
        self.record = record


class Fuse:
    """Run `rule`'s fused op instead of this one; `deferred` is the index of the op it absorbs."""

    def __init__(self, rule, deferred: int):
        self.rule, self.deferred = rule, deferred


class AddDropout:
    """x + dropout(s) -> nn.functional.add_dropout: Add & Norm's residual in one pass (kernels.fused).

    Matches: add(x, dropout(s, p)) or add(dropout(s, p), x), x and s of one shape and dtype, the
    dropout's output read by nothing else. Emits: add_dropout_op(x, s, p, True, s needs grad): one
    mask draw from the same stream, so the masks equal the plain chain's.
    Gain: the eager fast path of the same switch, fused_residual, measured train small 8% (fast.py)."""

    name, switch = "add_dropout", "fused_residual"

    def find(self, records: list) -> dict:
        from ..ops.binary import add_op
        from ..ops.nn import dropout_op
        rewrites = {}
        for i, r in enumerate(records):
            if r is None or r.fn is not add_op or len(r.parents) != 2:
                continue
            for side, j in enumerate(r.parents):
                d = records[j] if j is not None else None
                other = r.parents[1 - side]
                if (d is not None and d.fn is dropout_op and d.uses == 1 and j not in rewrites
                        and d.shape == r.shape and d.dtype == r.dtype
                        and (other is None or records[other].shape == r.shape)):
                    rewrites[j], rewrites[i] = Defer(d), Fuse(self, j)
                    break
        return rewrites

    def emit(self, parents: tuple, args: tuple, deferred_parents: tuple, deferred_args: tuple, placeholder):
        """(fn, op name, parents, args) of the fused op, from the add's and the dropout's."""
        from ..nn.functional import add_dropout_op
        x = parents[1] if parents[0] is placeholder else parents[0]
        (s,), (p, _) = deferred_parents, deferred_args
        if x.shape != s.shape or x.dtype != s.dtype:
            return None
        return add_dropout_op, "add_dropout", (x, s), (p, True, s.requires_grad)


RULES = (AddDropout(),)


def find(records: list) -> dict:
    """{op index: Defer or Fuse} from every rule whose switch is on."""
    rewrites = {}
    for rule in RULES:
        if getattr(fast.TRICKS, rule.switch):
            found = rule.find(records)
            if not set(found) & set(rewrites):
                rewrites.update(found)
    return rewrites
