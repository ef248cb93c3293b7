"""Each forward op of a compiled training step, timed at its place in the step and again at once.

    python bench/first_calls.py                          # TINY and SMALL, 1 thread
    python bench/first_calls.py --configs small --steps 50 --json out.jsonl
    python bench/first_calls.py --quick                  # seconds, a toy config (the smoke test)

The translator's step as `train_throughput.py` builds it (compiled, every rule on) is captured, then its
plan's program is run with each forward op's line twice in a row: the first call is the op where the step
calls it, after the ops before it; the second runs the same op on the same arrays at once, its code, branch
history and data fresh from the first. "first / again" above 1 is what an op pays for starting cold at its
place in the step (the second call's results go on; its dropout draws another mask, which changes nothing
timed). A step of many small ops pays it at each one. Wall clock, medians over --steps steps.
"""
from __future__ import annotations

import argparse
import re
import time
from collections import defaultdict

import numpy as np
from train_throughput import (
    CONFIGS,
    QUICK,
    OursTrainer,
    append_json,
    build_ours,
    markdown,
    pick_configs,
    random_batches,
    start,
)

FORWARD = re.compile(r"^(\s*)(v\d+, b\d+) = (c\d+)\((.*)\)$")  # a forward op's line in a plan: outputs, backward


def op_name(plan, constant: str) -> str:
    fn = plan.constants[constant]
    return getattr(fn, "__qualname__", None) or type(fn).__name__


def twice(plan, timings: dict):
    """plan's replay with each forward op run twice, appending (first, again) seconds to timings[(op, line)]."""
    lines = plan.source.splitlines()
    body = [lines[0]]
    for i, line in enumerate(lines[1:]):
        match = FORWARD.match(line)
        if match is None:
            body.append(line)
            continue
        indent, key = match.group(1), (op_name(plan, match.group(3)), i)
        body += [f"{indent}_t0 = _clock()", line, f"{indent}_t1 = _clock()", line,
                 f"{indent}_TIMES[{key!r}].append((_t1 - _t0, _clock() - _t1))"]
    constants = {**plan.constants, "_clock": time.perf_counter, "_TIMES": timings}
    return plan.with_constants("\n".join(body), constants, leaves={}).replay


def first_calls(cfg, steps: int) -> list:
    """[{op, calls a step, first µs, again µs, first/again}], summed over an op's calls in one step."""
    from tinygrad_lite.compiler.step import signature
    ours = OursTrainer(build_ours(cfg))
    batch = random_batches(cfg, 1)[0]
    for _ in range(3):
        ours.step(batch)
    plan = ours.update.plan_for(signature((batch.src, batch.tgt_in, batch.tgt_out)))
    timings = defaultdict(list)
    plan.replay = twice(plan, timings)
    for _ in range(2):
        ours.step(batch)
    timings.clear()
    for _ in range(steps):
        ours.step(batch)
    by_op = defaultdict(lambda: [0, 0.0, 0.0])
    for (op, _), pairs in timings.items():
        first, again = np.median(np.array(pairs), axis=0)
        by_op[op][0] += 1
        by_op[op][1] += first
        by_op[op][2] += again
    rows = [{"config": cfg.name, "op": op, "calls": calls, "first_us": round(1e6 * first, 1),
             "again_us": round(1e6 * again, 1), "first_over_again": round(first / again, 2)}
            for op, (calls, first, again) in by_op.items()]
    return sorted(rows, key=lambda r: -r["first_us"])


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--configs", default="tiny,small", help=f"comma list of {sorted(CONFIGS)}")
    parser.add_argument("--steps", type=int, default=100, help="steps timed (medians over them)")
    parser.add_argument("--quick", action="store_true", help="a toy config, a few steps: a smoke run")
    parser.add_argument("--json", help="append one JSON row per (config, op) to this file")
    args = parser.parse_args(argv)
    configs = [QUICK] if args.quick else pick_configs(parser, args.configs)
    _, env = start(parser, 1)
    for cfg in configs:
        rows = first_calls(cfg, 3 if args.quick else args.steps)
        for row in rows:
            append_json(args.json, {**env, **row})
        print(f"\n{cfg.name}:")
        print(markdown(["op", "calls a step", "first µs", "again µs", "first / again"],
                       [[r["op"], r["calls"], r["first_us"], r["again_us"], r["first_over_again"]] for r in rows]))


if __name__ == "__main__":
    main()
