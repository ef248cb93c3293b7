"""What each speed trick of `tinygrad_lite/fast.py` buys: the same work with the trick on and off.

    python bench/speed_tricks.py                                   # every trick: training tiny, small; decoding
    python bench/speed_tricks.py --tricks fused_ffn,all --train small,base-short --repeats 15
    python bench/speed_tricks.py --tricks fused_attention+skip_padding   # two tricks switched together
    python bench/speed_tricks.py --quick                           # seconds; what the smoke test runs

For each trick (and `all`: every trick at once) two copies of one model are built from one seed,
one with the trick on and one with it off, and
timed in ONE process, alternating sample by sample (so both see the same machine load); the
trick is switched on or off around each sample. Training is bench/train_throughput.py's step
(forward, label-smoothed cross-entropy, backward, Adam; dropout 0.1); decoding is
bench/decode.py's greedy decode of 32 tokens with the key/value cache at batch 1 (dropout off).
Before timing, the two copies must give the same loss (dropout off) and the same tokens.

"off/on" is the median over repeats of (time with the trick off / time with it on), the two
samples of a repeat taken back to back: above 1 the trick pays; the quartiles of those ratios
show the noise, and so does `none`, a control whose two sides run the same code. Times are the
process's CPU time (`--clock cpu`, the default), so time spent waiting for a core on a shared
machine is not counted; `--clock wall` counts it.
"""
from __future__ import annotations

import argparse
import contextlib
import math
import sys
import time
from dataclasses import asdict
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from decode import ours_greedy  # noqa: E402  (bench/ sits next to this file)
from train_throughput import (  # noqa: E402
    CONFIGS,
    QUICK,
    BenchConfig,
    OursTrainer,
    append_json,
    build_ours,
    environment,
    markdown,
    median,
    random_batches,
    set_threads,
)


def switches(trick: str):
    """(context manager for "on", for "off"): `none` flips nothing (the noise control)."""
    from tinygrad_lite import fast
    if trick == "none":
        return contextlib.nullcontext, contextlib.nullcontext
    names = fast.NAMES if trick == "all" else tuple(trick.split("+"))
    return (lambda: fast.tricks_on(*names)), (lambda: fast.tricks_off(*names))


def pair(trick: str, build):
    """(model with the trick on, model with it off), each built under its own setting."""
    on_switch, off_switch = switches(trick)
    with on_switch():
        on = build()
    with off_switch():
        off = build()
    return on, off


CLOCKS = {"cpu": time.process_time, "wall": time.perf_counter}


def alternate(trick: str, run_on, run_off, repeats: int, clock) -> dict:
    """{"on": [seconds], "off": [seconds]}: one sample per side per repeat, order flipping."""
    on_switch, off_switch = switches(trick)
    sides = {"on": (on_switch, run_on), "off": (off_switch, run_off)}
    samples = {"on": [], "off": []}
    for r in range(repeats):
        for side in (("on", "off") if r % 2 == 0 else ("off", "on")):
            switch, run = sides[side]
            with switch():
                start = clock()
                run()
                samples[side].append(clock() - start)
    return samples


def same_loss(trick: str, on: OursTrainer, off: OursTrainer, batch) -> tuple[float, float]:
    import tinygrad_lite as tl
    losses = []
    for trainer, switch in zip((on, off), switches(trick)):
        trainer.model.eval()
        with switch(), tl.no_grad():
            losses.append(trainer.loss(batch).item())
        trainer.model.train()
    return tuple(losses)


def summary(samples: dict, per: int) -> dict:
    """Medians per unit of work, and the median and quartiles of the paired ratios off/on (the
    two samples of one repeat ran back to back, under the same load)."""
    ratios = np.array(samples["off"]) / np.array(samples["on"])
    q1, q2, q3 = np.percentile(ratios, [25, 50, 75])
    return {"ms_on": 1e3 * median(samples["on"]) / per, "ms_off": 1e3 * median(samples["off"]) / per,
            "off_over_on": float(q2), "off_over_on_q1": float(q1), "off_over_on_q3": float(q3)}


def bench_training(trick: str, cfg: BenchConfig, repeats: int, clock) -> dict:
    on, off = pair(trick, lambda: OursTrainer(build_ours(cfg)))
    batches = random_batches(cfg, 4)
    loss_on, loss_off = same_loss(trick, on, off, batches[0])
    cursor = {"on": 0, "off": 0}

    def steps(trainer, side):
        def run():
            for _ in range(cfg.steps):
                trainer.step(batches[cursor[side] % len(batches)])
                cursor[side] += 1
        return run
    run_on, run_off = steps(on, "on"), steps(off, "off")
    alternate(trick, run_on, run_off, 2, clock)  # warm-up: kernels loaded, optimizer state made
    samples = alternate(trick, run_on, run_off, repeats, clock)
    return {"trick": trick, "work": f"train {cfg.name}", **summary(samples, cfg.steps),
            "same": math.isclose(loss_on, loss_off, rel_tol=1e-6), "repeats": repeats,
            "unit": f"ms/step ({cfg.steps} steps a sample)"}


def bench_decoding(trick: str, cfg: BenchConfig, repeats: int, clock, new_tokens: int) -> dict:
    def build():
        model = build_ours(cfg, dropout=0.0)
        model.eval()
        return model
    on, off = pair(trick, build)
    src = random_batches(BenchConfig(**{**asdict(cfg), "batch": 1}), 1, seed=1)[0].src
    outputs = {}

    def decode(model, side):
        def run():
            outputs[side] = ours_greedy(model, src, new_tokens)
        return run
    run_on, run_off = decode(on, "on"), decode(off, "off")
    alternate(trick, run_on, run_off, 2, clock)
    samples = alternate(trick, run_on, run_off, repeats, clock)
    return {"trick": trick, "work": f"decode {cfg.name} b1", **summary(samples, 1),
            "same": bool(np.array_equal(outputs["on"], outputs["off"])), "repeats": repeats,
            "unit": f"ms/decode of {new_tokens} tokens"}


def main(argv=None):
    from tinygrad_lite.fast import NAMES
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tricks", default=",".join(("none",) + NAMES + ("all",)),
                        help=f"comma list of {list(NAMES)} (a+b: switched together), all (every trick) "
                             "and none (a control)")
    parser.add_argument("--train", default="tiny,small", help=f"training configs, comma list of {sorted(CONFIGS)}"
                        " (empty: none)")
    parser.add_argument("--decode", default="small", help="decoding configs at batch 1 (empty: none)")
    parser.add_argument("--repeats", type=int, default=15, help="timed samples per side")
    parser.add_argument("--decode-repeats", type=int, default=31, help="timed decodes per side")
    parser.add_argument("--new-tokens", type=int, default=32)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--clock", choices=sorted(CLOCKS), default="cpu", help="process CPU time or wall time")
    parser.add_argument("--json", help="append one JSON line per row to this file")
    parser.add_argument("--quick", action="store_true", help="a seconds-long run on a toy config (smoke test)")
    args = parser.parse_args(argv)
    tricks = [t.strip() for t in args.tricks.split(",") if t.strip()]
    unknown = sorted({n for t in tricks for n in t.split("+")} - set(NAMES) - {"all", "none"})
    if unknown:
        parser.error(f"--tricks: unknown {unknown}; choose from {list(NAMES)}, all or none")
    for flag in ("train", "decode"):
        bad = sorted({c.strip() for c in getattr(args, flag).split(",") if c.strip()} - set(CONFIGS))
        if bad:
            parser.error(f"--{flag}: unknown {bad}; choose from {sorted(CONFIGS)}")
    if min(args.repeats, args.decode_repeats, args.new_tokens, args.threads) < 1:
        parser.error("--repeats, --decode-repeats, --new-tokens and --threads must be >= 1")
    torch = set_threads(args.threads)
    import tinygrad_lite as tl  # both sides are ours: time them as a Trainer runs them, without page faults
    env = {**environment(args.threads, torch), "keep_freed_memory": tl.keep_freed_memory()}
    print("\n".join(f"- {k}: {v}" for k, v in env.items()), flush=True)
    if args.quick:
        train, decode, repeats, decode_repeats, new_tokens = [QUICK], [QUICK], 1, 1, 4
    else:
        train = [CONFIGS[c.strip()] for c in args.train.split(",") if c.strip()]
        decode = [CONFIGS[c.strip()] for c in args.decode.split(",") if c.strip()]
        repeats, decode_repeats, new_tokens = args.repeats, args.decode_repeats, args.new_tokens
    rows = []
    for trick in tricks:
        jobs = [(bench_training, cfg, repeats) for cfg in train]
        jobs += [(lambda t, c, r, k: bench_decoding(t, c, r, k, new_tokens), cfg, decode_repeats) for cfg in decode]
        for fn, cfg, n in jobs:
            row = {**fn(trick, cfg, n, CLOCKS[args.clock]), "clock": args.clock, **env}
            rows.append(row)
            print(f"  {trick:>16} {row['work']:>18}: on {row['ms_on']:.2f} ms, off {row['ms_off']:.2f} ms, "
                  f"off/on {row['off_over_on']:.3f} ({row['off_over_on_q1']:.3f}-{row['off_over_on_q3']:.3f})"
                  f"{'' if row['same'] else '  RESULTS DIFFER'}", flush=True)
            append_json(args.json, row)
    print()
    print(markdown(["trick", "work", "on ms", "off ms", "off/on", "quartiles", "same result"],
                   [[r["trick"], r["work"], r["ms_on"], r["ms_off"], f"{r['off_over_on']:.3f}",
                     f"{r['off_over_on_q1']:.3f}-{r['off_over_on_q3']:.3f}", "yes" if r["same"] else "NO"]
                    for r in rows]))
    if not all(r["same"] for r in rows):
        print("WARNING: a trick changed a result: on and off must compute the same thing")


if __name__ == "__main__":
    main()
