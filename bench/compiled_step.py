"""The step compiler against eager mode: the same training step, side by side in one process.

    python bench/compiled_step.py                        # 1 thread: mlp, gpt, tiny, small
    python bench/compiled_step.py --workloads gpt --repeats 9 --json out.jsonl
    python bench/compiled_step.py --quick                # seconds

Each workload builds one model twice from the same seed, one for each side, and steps both on the same
batches: "eager" calls the step function as a learner's loop does; "compiled" calls
`tinygrad_lite.compiler.compile(step)`, which captures it once and then replays the plan (no Tensor,
graph or check per op). Before timing, both sides run the same steps with the rules off (the same plain
ops) and the script checks that their weights agree bit for bit ("bit-exact"); the timed compiled side
runs with its rules on (the rules fuse in another order: --rules checks them within 1e-4). Sides
alternate repeat by repeat (train_throughput's `alternate`); the table gives the median time per step and
eager/compiled (> 1: the compiled step is faster).

    python bench/compiled_step.py --memory               # and each side's memory

adds each side's peak resident memory over --memory-steps steps (a compiled side's captures among them)
above what the process held after building the model, each side in a fresh process (peak_memory).

The translator's compiled side runs every rule, skip_padding included, as the trainers do; its eager side
is the plain padded step (`--no-compile`), the compiled step's oracle. Both keep freed memory in the
process (tinygrad_lite.memory), as the trainers do.

    python bench/compiled_step.py --rules --workloads tiny,small,gpt

measures the rewrite rules (tinygrad_lite/compiler/rules) instead: the paper's boxes, plain, compiled
with the rules on against off ("rules off/on" > 1: the rules gain; until e79312f a third side timed the
boxes calling the fused ops themselves, which they no longer do). Before timing, the rules-off side is
checked bit-exact against eager, and the rules-on side's losses within 1e-4 of it ("agrees").
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from train_throughput import (  # noqa: E402
    CLOCKS,
    CONFIGS,
    QUICK,
    alternate,
    append_json,
    markdown,
    median,
    random_batches,
    reset_peak,
    start,
    status_kb,
)

WORKLOADS = ("mlp", "gpt", "tiny", "small")
SIDES = ("eager", "compiled")
MEMORY = ("eager MiB", "compiled MiB", "compiled/eager MiB")  # --memory's columns


def mlp(quick: bool):
    """A 784-256-10 MLP (ReLU, cross-entropy) on random digits-shaped batches, SGD with momentum."""
    import tinygrad_lite as tl
    from tinygrad_lite import nn
    from tinygrad_lite.nn import functional as F
    from tinygrad_lite.optim import SGD

    def build():
        tl.manual_seed(0)
        model = nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 10))
        opt = SGD(model.parameters(), lr=0.05, momentum=0.9)

        def step(x, y):
            loss = F.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            return loss
        return model, step
    r = np.random.default_rng(0)
    rows = 16 if quick else 64
    data = [(tl.Tensor(r.standard_normal((rows, 784)).astype(np.float32)), r.integers(0, 10, rows)) for _ in range(8)]
    return build, data


def gpt(quick: bool):
    """nanoGPT's CPU recipe (bench/gpt.py: 4 layers, 4 heads, 128 wide, block 64, batch 12), AdamW, clip 1."""
    from gpt import ADAMW, BATCH, CLIP, QUICK_BATCH, RECIPE
    from gpt import QUICK as QUICK_GPT

    import tinygrad_lite as tl
    from tinygrad_lite.optim import AdamW, clip_grad_norm_
    from transformer.gpt import GPT, GPTConfig

    shape = QUICK_GPT if quick else RECIPE
    batch = QUICK_BATCH if quick else BATCH

    def build():
        tl.manual_seed(0)
        model = GPT(GPTConfig(vocab_size=65, **shape))
        params = list(model.parameters())
        decay = [p for p in params if p.ndim >= 2]
        keep = [p for p in params if p.ndim < 2]
        opt = AdamW([{"params": decay, "weight_decay": ADAMW["weight_decay"]}, {"params": keep, "weight_decay": 0.0}],
                    lr=ADAMW["lr"], betas=ADAMW["betas"])

        def step(x, y):
            loss = model.loss(x, y)
            opt.zero_grad()
            loss.backward()
            clip_grad_norm_(params, CLIP)
            opt.step()
            return loss
        return model, step
    r = np.random.default_rng(0)
    T = shape["block_size"]
    data = [(r.integers(0, 65, (batch, T)), r.integers(0, 65, (batch, T))) for _ in range(8)]
    return build, data


def translator(name: str):
    def workload(quick: bool):
        """The encoder-decoder's training step of bench/train_throughput.py (Adam, label smoothing 0.1)."""
        from train_throughput import build_ours

        import tinygrad_lite as tl
        from tinygrad_lite.optim import Adam
        from transformer.train import teacher_forcing_loss
        cfg = QUICK if quick else CONFIGS[name]

        def build():
            model = build_ours(cfg)
            opt = Adam(model.parameters(), lr=1e-4, betas=(0.9, 0.98), eps=1e-9)

            def step(src, tgt_in, tgt_out):
                loss = teacher_forcing_loss(model, src, tgt_in, tgt_out, 0.1)
                opt.zero_grad()
                loss.backward()
                opt.step()
                return loss
            return model, step
        data = [(b.src, b.tgt_in, b.tgt_out) for b in random_batches(cfg, 8)]
        tl.manual_seed(0)
        return build, data
    return workload


BUILDERS = {"mlp": mlp, "gpt": gpt, "tiny": translator("tiny"), "small": translator("small")}


def bit_exact(build, data, steps: int, plain_tricks) -> bool:
    """Whether eager and compiled runs of `steps` steps from the same seed end with identical weights."""
    import tinygrad_lite as tl
    from tinygrad_lite.compiler import compile
    with plain_tricks():
        tl.manual_seed(1)
        eager_model, eager = build()
        tl.manual_seed(1)
        compiled_model, compiled = build()
        compiled = compile(compiled)
        tl.manual_seed(2)
        for i in range(steps):
            eager(*data[i % len(data)])
        tl.manual_seed(2)
        for i in range(steps):
            compiled(*data[i % len(data)])
    return all(np.array_equal(a.data, b.data) for a, b in zip(eager_model.parameters(), compiled_model.parameters()))


def side_step(build, side: str):
    """step(batch) -> loss of one side (SIDES), on a model of its own."""
    from tinygrad_lite.compiler import compile
    _, step = build()
    if side == "eager":
        return lambda batch: float(step(*batch).data)
    compiled = compile(step)
    return lambda batch: float(compiled(*batch).data)


def sides(build) -> dict:
    """{side: step(batch)}, each side on its own model."""
    return {side: side_step(build, side) for side in SIDES}


def off(*names: str):
    """The named tricks off, and none if none is named (fast.tricks_off() would switch every trick off)."""
    import contextlib

    from tinygrad_lite import fast
    return fast.tricks_off(*names) if names else contextlib.nullcontext()


def rule_sides(build, per_rule: bool) -> dict:
    """{side: step(batch)}: the step compiled with the rules off and on (and, per_rule, with each rule
    alone on)."""
    from tinygrad_lite import fast
    from tinygrad_lite.compiler import compile
    from tinygrad_lite.compiler.rules import FLAT_OPTIMIZER, RULES, SWITCHES
    _, step = build()  # one model for every side: each its own compiled step (a model's arrays' alignment
    # alone moves a step's time by a few %, which side-by-side copies would book to the rules)
    rules_off, rules_on = compile(step), compile(step)

    def side(compiled, switched, names):
        def run(batch):
            with switched(*names):
                return float(compiled(*batch).data)
        return run
    out = {"rules off": side(rules_off, fast.tricks_off, SWITCHES),
           "rules on": side(rules_on, fast.tricks_on, SWITCHES)}
    if per_rule:
        for rule in (*RULES, FLAT_OPTIMIZER):
            only = compile(step)
            others = tuple(s for s in SWITCHES if s != rule.switch)

            def run(batch, only=only, others=others, switch=rule.switch):
                with off(*others), fast.tricks_on(switch):
                    return float(only(*batch).data)
            out[f"{rule.name} only"] = run
    return out


def rules_agree(build, data, steps: int) -> tuple:
    """(rules off bit-exact with eager; rules on within 1e-4 of rules off), loss by loss over `steps`
    steps from one seed."""
    import tinygrad_lite as tl
    from tinygrad_lite import fast
    from tinygrad_lite.compiler import compile
    from tinygrad_lite.compiler.rules import SWITCHES
    losses = {}
    for side, switched, wrap in (("eager", fast.tricks_off, lambda s: s), ("off", fast.tricks_off, compile),
                                 ("on", fast.tricks_on, compile)):
        tl.manual_seed(1)
        _, step = build()
        step = wrap(step)
        tl.manual_seed(2)
        with switched(*SWITCHES):
            losses[side] = [float(step(*data[i % len(data)]).data) for i in range(steps)]
    return (losses["eager"] == losses["off"],
            bool(np.allclose(losses["on"], losses["off"], rtol=1e-4, atol=0)))


def measure_rules(args, name: str, build, data) -> dict:
    """One row of --rules: medians per side and their ratios."""
    exact, agrees = rules_agree(build, data, 3)
    steps, repeats = (1, 1) if args.quick else (args.steps, args.repeats)
    samples = alternate(rule_sides(build, args.per_rule), data, steps, repeats, clock=CLOCKS[args.clock])
    ms = {side: 1e3 * median(times) for side, times in samples.items()}
    spread = {side: (1e3 * min(times), 1e3 * max(times)) for side, times in samples.items()}
    return {"workload": name, "threads": args.threads, "clock": args.clock, "bit_exact": exact, "agrees": agrees,
            **{f"{side} ms": round(v, 3) for side, v in ms.items()},
            **{f"{side} range ms": [round(a, 3), round(b, 3)] for side, (a, b) in spread.items()},
            "rules off/on": round(ms["rules off"] / ms["rules on"], 3),
            **{f"rules off/{side}": round(ms["rules off"] / v, 3) for side, v in ms.items() if side.endswith(" only")}}


def peak_memory(name: str, side: str, quick: bool, steps: int) -> dict:
    """In this process: every side of the workload run once on models of their own (so Numba's kernels
    are compiled or loaded), their freed memory handed back to the OS (glibc's malloc_trim), then one side
    built and the peak RSS reset (Linux's clear_refs) before it runs `steps` steps, a compiled side's
    captures among them. Returns the RSS after building and its peak since, in MiB. Freed memory then
    stays in the process, as in training runs (tinygrad_lite.memory)."""
    import ctypes
    import gc

    from tinygrad_lite.memory import keep_freed_memory
    build, data = BUILDERS[name](quick)
    for warm in SIDES:
        side_step(build, warm)(data[0])
    gc.collect()
    ctypes.CDLL(None).malloc_trim(0)
    keep_freed_memory()
    run = side_step(build, side)
    if not reset_peak():
        raise RuntimeError("peak_memory: the peak RSS cannot be reset here (Linux's /proc/self/clear_refs)")
    base = status_kb("VmRSS")
    for i in range(steps):
        run(data[i % len(data)])
    peak = status_kb("VmHWM")
    if base is None or peak is None:
        raise RuntimeError("peak_memory: no VmRSS or VmHWM in /proc/self/status")
    return {"base": base / 1024, "peak": peak / 1024}


def memory(args, name: str) -> dict:
    """{"<side> MiB": the peak RSS over --memory-steps steps above the RSS after building}, each side in a
    fresh process (one process's freed memory would serve the next side)."""
    out = {}
    for side in SIDES:
        command = [sys.executable, __file__, "--peak-of", side, "--workloads", name, "--threads", str(args.threads),
                   "--memory-steps", str(args.memory_steps), *(["--quick"] if args.quick else [])]
        done = subprocess.run(command, capture_output=True, text=True, check=True)
        measured = json.loads(done.stdout.strip().splitlines()[-1])
        out[f"{side} MiB"] = round(measured["peak"] - measured["base"], 1)
    out["compiled/eager MiB"] = round(out["compiled MiB"] / out["eager MiB"], 2)
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--workloads", default=",".join(WORKLOADS), help=f"comma-separated, of {WORKLOADS}")
    parser.add_argument("--steps", type=int, default=5, help="steps per timed sample")
    parser.add_argument("--repeats", type=int, default=7, help="samples per side")
    parser.add_argument("--clock", choices=sorted(CLOCKS), default="cpu")
    parser.add_argument("--quick", action="store_true", help="tiny shapes, 1 repeat: a smoke run")
    parser.add_argument("--json", help="append one JSON row per workload to this file")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--rules", action="store_true", help="measure the rewrite rules: the step compiled with "
                        "the rules on against off (see the docstring)")
    parser.add_argument("--per-rule", action="store_true", help="with --rules, also each rule alone on "
                        "('rules off/<rule> only': that rule's gain)")
    parser.add_argument("--memory", action="store_true", help="also each side's memory: the peak RSS over "
                        "--memory-steps steps above the RSS after building, each side in a fresh process")
    parser.add_argument("--memory-steps", type=int, default=8, help="steps a --memory process runs (default 8)")
    parser.add_argument("--peak-of", help=argparse.SUPPRESS)  # a --memory process: one side's peak, as JSON
    args = parser.parse_args(argv)
    threads = args.threads
    start(parser, threads)
    if args.peak_of:
        print(json.dumps(peak_memory(args.workloads, args.peak_of, args.quick, args.memory_steps)))
        return
    from tinygrad_lite.compiler.rules import SWITCHES
    from tinygrad_lite.memory import keep_freed_memory
    keep_freed_memory()  # as the trainers: without it the GPT recipe's step takes ~1,000 page faults (3 ms)
    rows = []
    for name in [w.strip() for w in args.workloads.split(",") if w.strip()]:
        if name not in BUILDERS:
            parser.error(f"--workloads: unknown workload {name!r}; choose from {', '.join(WORKLOADS)}")
        build, data = BUILDERS[name](args.quick)
        if args.rules:
            row = measure_rules(args, name, build, data)
            rows.append(row)
            append_json(args.json, row)
            print(f"{name}: " + ", ".join(f"{k} {v}" for k, v in row.items() if k != "workload"), flush=True)
            continue
        exact = bit_exact(build, data, 3, lambda: off(*SWITCHES))
        steps, repeats = (1, 1) if args.quick else (args.steps, args.repeats)
        samples = alternate(sides(build), data, steps, repeats, clock=CLOCKS[args.clock])
        ms = {side: 1e3 * median(times) for side, times in samples.items()}
        row = {"workload": name, "threads": threads, "clock": args.clock, "bit_exact": exact,
               **{f"{side} ms": round(v, 3) for side, v in ms.items()},
               "eager/compiled": round(ms["eager"] / ms["compiled"], 3),
               **(memory(args, name) if args.memory else {})}
        rows.append(row)
        append_json(args.json, row)
        print(f"{name}: " + ", ".join(f"{k} {v}" for k, v in row.items() if k != "workload"), flush=True)
    if args.rules:
        singles = [k for k in rows[0] if k.startswith("rules off/") and k.endswith(" only")] if rows else []
        print(markdown(["workload", "bit-exact", "agrees", "rules off ms", "rules on ms", "rules off/on", *singles],
                       [[r["workload"], "yes" if r["bit_exact"] else "NO", "yes" if r["agrees"] else "NO",
                         r["rules off ms"], r["rules on ms"], r["rules off/on"], *[r[k] for k in singles]]
                        for r in rows]))
        return
    header = ["workload", "bit-exact", "eager ms", "compiled ms", "eager/compiled", *(MEMORY if args.memory else ())]
    print(markdown(header, [[r["workload"], "yes" if r["bit_exact"] else "NO", r["eager ms"], r["compiled ms"],
                            r["eager/compiled"], *(r.get(k, "-") for k in MEMORY if args.memory)]
                            for r in rows]))


if __name__ == "__main__":
    main()
