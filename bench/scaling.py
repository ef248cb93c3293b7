"""How a training step grows with sequence length: tinygrad-lite vs PyTorch, time and memory.

    python bench/scaling.py                          # 1 thread, T = 16 .. 512, writes bench/scaling.png
    python bench/scaling.py --lengths 16,64,256 --out /tmp/s.png --json s.jsonl
    python bench/scaling.py --quick --out /tmp/q.png # seconds; what the smoke test runs

Model: d_model 128, h 4, N 2+2, d_ff 512, vocabulary 1000 (the SMALL config), a fixed batch of
8 sentence pairs whose source and target both have T tokens (no padding). One step is the same
as in train_throughput.py: forward, label-smoothed cross-entropy, backward, Adam. Time is the
median per step with the two engines alternating in one process; peak memory is the resident
high-water mark of a fresh process per engine and length (see train_throughput.py).

Per step the feed-forward nets and projections cost O(T·d_model²) and attention O(T²·d_model),
so the time exponent moves from ~1 towards 2 as T grows; the script fits log(time) against
log(T) over all lengths and over the longest three, and prints both exponents per engine. The
picture has both axes logarithmic, so a power law is a straight line.
"""
from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from train_throughput import (  # bench/ sits next to this file
    CONFIGS,
    OursTrainer,
    TorchTrainer,
    alternate,
    append_json,
    build_ours,
    build_torch,
    markdown,
    measure_memory,
    median,
    random_batches,
    start,
)

BASE = replace(CONFIGS["small"], name="scaling", batch=8)
LENGTHS = (16, 32, 64, 128, 256, 512)


def steps_for(tokens: int) -> tuple[int, int]:
    """(steps per timed sample, samples): fewer of both as steps get longer."""
    if tokens <= 64:
        return 4, 7
    if tokens <= 256:
        return 2, 5
    return 1, 3


def fit_exponent(lengths, values) -> float:
    """Slope of log(value) against log(length), least squares; NaN unless all values are > 0."""
    values = np.asarray(values, dtype=float)
    if len(values) < 2 or not (values > 0).all():
        return float("nan")
    return float(np.polyfit(np.log(lengths), np.log(values), 1)[0])


def measure(length: int, threads: int, torch, with_memory: bool, quick: bool) -> dict:
    cfg = replace(BASE, tokens=length)
    if quick:
        cfg = replace(cfg, vocab=50, d_model=16, h=2, N=1, d_ff=32, batch=2)
    ours_model = build_ours(cfg)
    torch.manual_seed(0)
    ours, theirs = OursTrainer(ours_model), TorchTrainer(build_torch(ours_model))
    batches = random_batches(cfg, 2, ragged=False)
    steps, repeats = (1, 1) if quick else steps_for(length)
    samples = alternate({"ours": ours.step, "torch": theirs.step}, batches, steps, repeats, warmup=1)
    row = {"tokens": length, "batch": cfg.batch, "ms_ours": 1e3 * median(samples["ours"]),
           "ms_torch": 1e3 * median(samples["torch"])}
    row["ratio_ours_over_torch"] = row["ms_torch"] / row["ms_ours"]
    if with_memory:
        memory = measure_memory(cfg, threads, steps=1, ragged=False)
        for side in ("ours", "torch"):
            row[f"peak_rss_mb_{side}"] = memory[side]["peak_rss_mb"]
            row[f"train_delta_mb_{side}"] = memory[side]["train_delta_mb"]
    return row


def plot(rows: list, out: Path) -> Path:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    lengths = [r["tokens"] for r in rows]
    panels = [("ms", "time per training step (ms)")]
    if "train_delta_mb_ours" in rows[0]:
        panels.append(("train_delta_mb", "memory added by training (MB)"))
    fig, axes = plt.subplots(1, len(panels), figsize=(6 * len(panels), 4.5), squeeze=False)
    for ax, (key, title) in zip(axes[0], panels):
        for side, style in (("ours", "o-"), ("torch", "s--")):
            values = [r[f"{key}_{side}"] for r in rows]
            label = "tinygrad-lite" if side == "ours" else "PyTorch"
            if len(lengths) > 1:
                label += f" (slope {fit_exponent(lengths, values):.2f})"
            ax.plot(lengths, values, style, label=label)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("sequence length T (source = target)")
        ax.set_title(title)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend()
    fig.suptitle(f"d_model {BASE.d_model}, h {BASE.h}, N {BASE.N}+{BASE.N}, d_ff {BASE.d_ff}, batch {rows[0]['batch']}")
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--lengths", default=",".join(map(str, LENGTHS)), help="comma list of T")
    parser.add_argument("--out", default=str(Path(__file__).resolve().parent / "scaling.png"), help="PNG path")
    parser.add_argument("--json", help="append one JSON line per length to this file")
    parser.add_argument("--no-memory", action="store_true", help="skip the peak-RSS subprocesses")
    parser.add_argument("--quick", action="store_true", help="two tiny lengths on a toy model (smoke test)")
    args = parser.parse_args(argv)
    lengths = [16, 32] if args.quick else sorted(int(t) for t in args.lengths.split(",") if t.strip())
    if args.threads < 1 or not lengths or min(lengths) < 2:
        parser.error("--threads must be >= 1 and --lengths a list of ints >= 2")
    torch, env = start(parser, args.threads)
    rows = []
    for length in lengths:
        row = measure(length, args.threads, torch, not args.no_memory, args.quick)
        rows.append(row)
        print(f"  T={length}: ours {row['ms_ours']:.1f} ms, torch {row['ms_torch']:.1f} ms", flush=True)
        append_json(args.json, {**row, **env})
    header = ["T", "ours ms/step", "torch ms/step", "ours/torch"]
    body = [[r["tokens"], r["ms_ours"], r["ms_torch"], r["ratio_ours_over_torch"]] for r in rows]
    if not args.no_memory:
        header += ["peak RSS ours MB", "peak RSS torch MB", "train delta ours MB", "train delta torch MB"]
        for line, r in zip(body, rows):
            line += [r["peak_rss_mb_ours"], r["peak_rss_mb_torch"], r["train_delta_mb_ours"],
                     r["train_delta_mb_torch"]]
    print()
    print(markdown(header, body))
    if len(lengths) > 1:
        print()
        for side in ("ours", "torch"):
            times = [r[f"ms_{side}"] for r in rows]
            tail = f", longest three {fit_exponent(lengths[-3:], times[-3:]):.2f}" if len(lengths) > 3 else ""
            line = f"fitted time exponent ({side}): all lengths {fit_exponent(lengths, times):.2f}{tail}"
            if not args.no_memory:
                line += f"; memory exponent {fit_exponent(lengths, [r[f'train_delta_mb_{side}'] for r in rows]):.2f}"
            print(line)
    print(f"\nwrote {plot(rows, Path(args.out))}")


if __name__ == "__main__":
    main()
