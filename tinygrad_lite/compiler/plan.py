"""Plan: a captured step as one straight-line Python function, and what it assumed.

The capture's program becomes the body of `replay(ARGS)`: bind the inputs' and leaves' arrays, call
each op's function on arrays, each backward, each gradient sum and each recorded call, in the
captured order, and build the step's return value. No Tensor, graph or check is made per op: what
eager mode spends on them per call is gone. A plan holds while what it assumed holds: the leaves'
shapes, dtypes and requires_grad, and the train/eval mode of every module the step ran.
"""
from __future__ import annotations

import copy
import re
from dataclasses import replace

import numpy as np

from .capture import Capture

NAMES = re.compile(r"\b[vb]\d+\b")  # the program's arrays and backward closures (capture.py)
FALLBACK = object()  # what replay returns when a guard sees its inputs branch another way


class Plan:
    """The replayable program of one captured step."""

    def __init__(self, capture: Capture, result: str):
        self.leaves = [(t, t.data.shape, t.data.dtype, t.requires_grad) for t, _ in capture.leaves]
        self.modes = [(m, m.training) for m in capture.modules.values() if hasattr(m, "training")]
        self.source = _source(capture, result)
        self.constants = capture.constants  # c<n> -> value (shapes.py compares two plans' programs)
        namespace = dict(capture.constants, np=np, FALLBACK=FALLBACK)
        exec(compile(self.source, "<compiled step>", "exec"), namespace)
        self.replay = namespace["replay"]
        self.records = [None if r is None else replace(r, args=(), leaves=()) for r in capture.records]  # each
        # op's rules.Record (None where a rule absorbed it), without arguments and leaves: they may hold arrays
        self.fusions = capture.fusions    # op index -> (rule name, the plain ops' names it replaced)
        self.rows = frozenset(capture.rows.ops) if capture.rows is not None else frozenset()  # ops on kept rows
        self.call_rules = list(capture.call_rules)  # (rule name, the recorded call it rewrote), e.g. flat_optimizer
        self.op_names = [r.op for r in capture.records if r is not None]  # the ops it runs, in order
        self.ops = len(self.op_names)

    def with_constants(self, source: str, constants: dict, leaves: dict) -> Plan:
        """This plan's program as `source` (the same, its growing constants sliced: shapes.merged), with
        `constants`; `leaves` maps id(leaf) -> the constant tensor that stands for it now."""
        plan = copy.copy(self)
        plan.source, plan.constants = source, constants
        plan.leaves = [(leaves[id(t)], leaves[id(t)].data.shape, *rest) if id(t) in leaves else (t, shape, *rest)
                       for t, shape, *rest in self.leaves]
        namespace = dict(constants, np=np, FALLBACK=FALLBACK)
        exec(compile(source, "<compiled step>", "exec"), namespace)
        plan.replay = namespace["replay"]
        return plan

    def holds(self) -> bool:
        """Whether the leaves and modules are as captured."""
        for t, shape, dtype, requires_grad in self.leaves:
            data = t.data
            if data.shape != shape or data.dtype != dtype or t.requires_grad != requires_grad:
                return False
        return all(m.training == training for m, training in self.modes)

    def __call__(self, args: tuple):
        return self.replay(args)


def _source(capture: Capture, result: str) -> str:
    body = []
    for var, index, is_tensor in capture.inputs:
        where = "".join(f"[{i}]" for i in (index if isinstance(index, tuple) else (index,)))
        body.append(f"{var} = ARGS{where}.data" if is_tensor else f"{var} = ARGS{where}")
    for tensor, var in capture.leaves:
        body.append(f"{var} = {capture.const(tensor)}.data")
    body += capture.prologue
    body += capture.lines
    body.append(f"return {result}")
    return "def replay(ARGS):\n" + "".join(f"    {line}\n" for line in _freeing(body))


def _freeing(body: list) -> list:
    """The body with `del` after each name's last use, so that arrays, and the backward closures that
    hold a forward's arrays, are freed as the step goes on, as eager mode frees its graph."""
    last = {}
    for i, line in enumerate(body):
        for name in NAMES.findall(line):
            last[name] = i
    dying = {}
    for name, i in last.items():
        dying.setdefault(i, []).append(name)
    out = []
    for i, line in enumerate(body):
        out.append(line)
        if i in dying and not line.startswith("return "):
            out.append("del " + ", ".join(sorted(dying[i])))
    return out
