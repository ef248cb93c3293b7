"""The rewrite rules: patterns of plain ops that a plan runs as one fused op.

Each rule is a small named entry, one file each: what it matches, what it emits, the switch that
turns it off (a name in fast.TRICKS, so `fast.plain()` and `tricks_off(name)` turn it off with the
eager fast path of the same name), and its measured gain. A rule reads the first capture's op records
and answers groups of ops to fuse (pattern.py); the step is then captured again with each group run
as the rule's fused op (capture.py). With its switch off, the plain ops run: the rule's test oracle
(tests/test_compile_rules*.py). The switches are read when the compiled step is called (they are part
of the plan's signature), not while the step runs: a step may run a box plain inside
`tricks_off(...)` and still have the rule fuse it. One rule is not a group: skip_padding.py reads the
fused program and names the ops a third capture runs on a padded batch's kept rows; flat_optimizer.py
edits the finished program's optimizer step.

A rule's "Gain" is its step's time with all rules off over the time with it alone on, the boxes plain
(`python bench/compiled_step.py --rules --per-rule`: medians of 15 alternating samples, 1 thread, CPU
clock), as ranges over 3 to 7 runs on 2026-12-06 (2-core Xeon, AVX-512, shared: load 2.8 to 6); three
runs on 2026-12-07 (7 samples, load under 1) fell within them, but for add_dropout on SMALL at 1-4%. On
an MLP that harness read about 2% in favour of "rules off" even for rules that match nothing: a gain
below 2-3% is none.
"""
from __future__ import annotations

from ... import fast
from .add_dropout import AddDropout
from .attention import Attention
from .flat_optimizer import FlatOptimizer
from .linear_relu_dropout import LinearReluDropout
from .pattern import Defer, Fuse, Fused, Ran, Record, is_group
from .skip_padding import SkipPadding

RULES = (Attention(), LinearReluDropout(), AddDropout())  # an op goes to the first rule that matches it
SKIP_PADDING = SkipPadding()  # after them: the position-wise ops of a padded batch on its kept rows
FLAT_OPTIMIZER = FlatOptimizer()  # on the finished program: the optimizer's step over flat arrays
SWITCHES = tuple(sorted({rule.switch for rule in (*RULES, SKIP_PADDING, FLAT_OPTIMIZER)}))  # fast.TRICKS: off = plain

__all__ = ["FLAT_OPTIMIZER", "RULES", "SKIP_PADDING", "SWITCHES", "Defer", "Fuse", "Fused", "Ran", "Record", "find",
           "switched_on"]


def switched_on() -> tuple:
    """The rules whose switch is on now."""
    return tuple(rule for rule in RULES if getattr(fast.TRICKS, rule.switch))


def find(records: list, rules: tuple) -> dict:
    """{op index: Defer or Fuse}: each group that `rules` match, in the table's order, and that runs as
    one op (pattern.is_group), unless an earlier group took one of its ops."""
    rewrites = {}
    for rule in rules:
        for roles in rule.find(records):
            if set(roles.values()) & set(rewrites) or not is_group(records, roles, rule.draws):
                continue
            root = max(roles.values())
            rewrites.update({i: Defer(records[i]) for i in roles.values() if i != root})
            rewrites[root] = Fuse(rule, roles, records[root])
    return rewrites
