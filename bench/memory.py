"""Memory over a long run: the toy translator's resident set size (RSS) step by step.

    python3 bench/memory.py                          # 1,600 steps, RSS every 25 steps, bench/memory.png
    python3 bench/memory.py --steps 3000 --every 50 --json rss.jsonl
    python3 bench/memory.py --tracemalloc            # also: what Python-side allocations grew over the last half
    python3 bench/memory.py --quick                  # seconds: a small model, 12 steps (the smoke test)

The run is `python -m transformer train` on the built-in corpus as a Trainer driven from Python:
TrainConfig's toy defaults, 1 thread, no epoch cap, `--steps` steps (177 a epoch), with its
evaluations on dev (loss, greedy BLEU) and checkpoints at each epoch's end. A TrainingReport samples
the process's RSS (psutil) after every `--every` steps. A long run must keep a flat profile: memory
grows while the allocator, Numba and the caches fill up (the first epochs), then stays. The growth
is measured over the last half of the steps as the slope of a least-squares line through the
samples, in MB per 100 steps; above `--max-growth` the script says GROWING and exits 1.
Results: bench/README.md, "Memory".
"""
from __future__ import annotations

import argparse
import ctypes
import functools
import json
import linecache
import os
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

QUICK = {"d_model": 32, "heads": 2, "layers": 1, "d_ff": 64, "max_tokens": 400, "dev_bleu_size": 20}


def rss_mb() -> float:
    import psutil
    return psutil.Process().memory_info().rss / 2**20


class MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks",
                                                     "fsmblks", "uordblks", "fordblks", "keepcost")]


@functools.lru_cache(maxsize=1)
def _mallinfo2():
    try:
        call = ctypes.CDLL(None).mallinfo2  # glibc >= 2.33
    except (AttributeError, OSError):
        return None
    call.restype = MallInfo2
    return call


def malloc_mb() -> dict:
    """glibc malloc's bytes in use (NumPy's arrays among them) and bytes freed but kept for reuse
    (tinygrad_lite.memory keeps up to 1 GiB), in MB, over all arenas; {} without glibc's mallinfo2."""
    call = _mallinfo2()
    if call is None:
        return {}
    info = call()
    return {"malloc_in_use_mb": (info.uordblks + info.hblkhd) / 2**20, "malloc_free_kept_mb": info.fordblks / 2**20}


def sampler(every: int, samples: list, evaluations: list, json_path: str | None, trace_from: int | None):
    """A TrainingReport that records (step, RSS MB, seconds) after every `every` steps and the steps
    that ended an epoch (an evaluation on dev and a checkpoint follow), starts tracemalloc after step
    `trace_from` (None: never), and says nothing else."""
    from transformer.train import TrainingReport

    class Sampler(TrainingReport):
        started = 0.0  # when the first step starts
        epoch = 0

        def step(self, trainer, loss: float, tokens_per_s: float) -> None:
            if trainer.step == trace_from:
                tracemalloc.start()
            if trainer.epoch != self.epoch:  # the previous step ended an epoch: evaluation and checkpoint
                self.epoch = trainer.epoch
                evaluations.append(trainer.step - 1)
            if trainer.step % every:
                return
            row = {"step": trainer.step, "rss_mb": rss_mb(), **malloc_mb(),
                   "seconds": time.perf_counter() - self.started, "epoch": trainer.epoch, "loss": loss}
            samples.append(row)
            kept = f"  malloc: in use {row['malloc_in_use_mb']:6.1f}, kept free {row['malloc_free_kept_mb']:6.1f}" \
                if "malloc_in_use_mb" in row else ""
            print(f"  step {row['step']:6d}  epoch {row['epoch']:3d}  RSS {row['rss_mb']:7.1f} MB{kept}  "
                  f"loss {loss:6.3f}  {row['seconds']:7.0f} s", flush=True)
            if json_path:
                with open(json_path, "a", encoding="utf-8") as f:
                    f.write(json.dumps(row) + "\n")

        def write(self, text: str) -> None:
            pass

    return Sampler()


def train(args, samples: list) -> list:
    """The toy run for args.steps steps, sampling RSS; with --tracemalloc, the Python allocations made
    over the last half and still alive at the end are printed by site. Returns the steps after which
    the run evaluated."""
    from transformer.train import TrainConfig, Trainer
    extra = QUICK if args.quick else {}
    trace_from = args.steps // 2 if args.tracemalloc else None
    with tempfile.TemporaryDirectory() as out:
        cfg = TrainConfig(out=out, epochs=None, max_steps=args.steps, threads=1, progress=False, **extra)
        evaluations = []
        report = sampler(args.every, samples, evaluations, args.json, trace_from)
        trainer = Trainer(cfg, report=report)
        report.started = time.perf_counter()
        samples.append({"step": 0, "rss_mb": rss_mb(), **malloc_mb(), "seconds": 0.0, "epoch": 0, "loss": None})
        trainer.run()
    if trace_from is None:
        return evaluations
    alive = tracemalloc.take_snapshot().statistics("lineno")
    tracemalloc.stop()
    print(f"\nPython allocations made from step {trace_from} on and alive at step {args.steps} "
          f"(tracemalloc; {sum(s.size for s in alive) / 2**20:.2f} MB in all), the largest sites:")
    for stat in alive[:8]:
        frame = stat.traceback[-1]
        where = os.path.relpath(frame.filename, ROOT) if frame.filename.startswith(str(ROOT)) else frame.filename
        print(f"  {stat.size / 2**20:8.2f} MB  {stat.count:7d} blocks  {where}:{frame.lineno}  "
              f"{linecache.getline(frame.filename, frame.lineno).strip()}")
    return evaluations


def growth_per_100_steps(samples: list, key: str = "rss_mb") -> float:
    """Slope of the least-squares line through the samples of the last half, MB per 100 steps."""
    last = samples[-1]["step"]
    half = [s for s in samples if s["step"] >= last / 2 and key in s]
    steps = np.array([s["step"] for s in half], float)
    mb = np.array([s[key] for s in half])
    return float(np.polyfit(steps, mb, 1)[0] * 100) if len(half) > 1 else 0.0


def table(samples: list, rows: int = 17) -> str:
    pick = np.unique(np.linspace(0, len(samples) - 1, min(rows, len(samples))).round().astype(int))
    lines = ["| step | epoch | RSS MB | malloc in use MB | malloc kept free MB |", "|---|---|---|---|---|"]
    for s in (samples[i] for i in pick):
        malloc = [s.get(key, float("nan")) for key in ("malloc_in_use_mb", "malloc_free_kept_mb")]
        lines.append(f"| {s['step']} | {s['epoch']} | {s['rss_mb']:.0f} | {malloc[0]:.0f} | {malloc[1]:.0f} |")
    return "\n".join(lines)


def plot(samples: list, evaluations: list, path: str, title: str) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from tinygrad_lite.files import atomic_write
    fig, ax = plt.subplots(figsize=(7, 3.2))
    for i, step in enumerate(evaluations):
        ax.axvline(step, color="0.7", lw=0.8, ls=":", label="epoch's end: evaluation on dev" if i == 0 else None)
    steps = [s["step"] for s in samples]
    ax.plot(steps, [s["rss_mb"] for s in samples], marker=".", lw=1, label="RSS")
    if "malloc_in_use_mb" in samples[-1]:
        ax.plot(steps, [s.get("malloc_in_use_mb") for s in samples], lw=1, label="malloc: in use")
        ax.plot(steps, [s.get("malloc_free_kept_mb") for s in samples], lw=1, ls="--", label="malloc: freed, kept")
    ax.set_xlabel("training step")
    ax.set_ylabel("MB")
    ax.set_ylim(0, max(s["rss_mb"] for s in samples) * 1.1)
    ax.set_title(title, fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(loc="center right", fontsize=7)
    fig.tight_layout()
    with atomic_write(path, durable=False, op="memory plot", suffix=".png") as temp:
        fig.savefig(temp, format="png", dpi=110)
    plt.close(fig)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=1600)
    parser.add_argument("--every", type=int, default=25, help="sample RSS after every N steps")
    parser.add_argument("--max-growth", type=float, default=2.0,
                        help="MB per 100 steps over the last half above which the profile is not flat")
    parser.add_argument("--plot", default=str(ROOT / "bench" / "memory.png"), help="the figure ('' for none)")
    parser.add_argument("--json", help="append one JSON line per sample to this file")
    parser.add_argument("--tracemalloc", action="store_true", help="trace Python's allocations over the last half")
    parser.add_argument("--quick", action="store_true", help="a small model, 12 steps, no figure")
    args = parser.parse_args(argv)
    if args.quick:
        args.steps, args.every, args.plot = 12, 3, ""
    if args.steps < 2 or args.every < 1:
        parser.error("--steps >= 2, --every >= 1")
    print(f"{time.strftime('%Y-%m-%dT%H:%M%z')}  load average {os.getloadavg()}  cpus {os.cpu_count()}")
    samples = []
    evaluations = train(args, samples)
    growth = growth_per_100_steps(samples)
    first, last = samples[min(1, len(samples) - 1)], samples[-1]
    print(f"\n{table(samples)}\n")
    print(f"RSS: {samples[0]['rss_mb']:.0f} MB with the Trainer built, {first['rss_mb']:.0f} MB at step "
          f"{first['step']}, peak {max(s['rss_mb'] for s in samples):.0f} MB, {last['rss_mb']:.0f} MB at step "
          f"{last['step']}")
    flat = abs(growth) <= args.max_growth
    verdict = "not judged (--quick)" if args.quick else "FLAT" if flat else "GROWING"
    in_use = (f"; malloc in use {growth_per_100_steps(samples, 'malloc_in_use_mb'):+.2f}"
              if "malloc_in_use_mb" in last else "")
    print(f"growth over the last half: RSS {growth:+.2f} MB per 100 steps -> {verdict} "
          f"(limit {args.max_growth:g}){in_use}; load average {os.getloadavg()[0]:.2f}")
    if args.plot:
        plot(samples, evaluations, args.plot, f"toy translator, 1 thread: memory over {args.steps} steps "
                                 f"(RSS over the last half {growth:+.2f} MB / 100 steps)")
        print(f"figure: {args.plot}")
    return 0 if flat or args.quick else 1


if __name__ == "__main__":
    sys.exit(main())
