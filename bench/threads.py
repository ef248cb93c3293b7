"""Threads for training driven from Python: the library's default against 1 and 2 threads, on an
idle machine and beside CPU-bound processes that this script starts (and always stops).

    python3 bench/threads.py --busy 1                # the acceptance run: a notebook's SMALL step
    python3 bench/threads.py --busy 1 --all          # every case: 2 threads with non-spinning wait policies too
    python3 bench/threads.py --mode trainer --busy 1 # the toy translator's Trainer instead
    python3 bench/threads.py --quick                 # seconds, a toy batch (tests/test_threads.py runs it)

Two steps: `notebook` (the default) is train_throughput.py's SMALL step written as a learner would
in a notebook, with no Trainer: Transformer, F.cross_entropy (label smoothing 0.1), Adam, backward();
`trainer` builds transformer.train.Trainer on the built-in corpus and times Trainer.train_step.
A case is a count set first thing (tl.set_num_threads, as a notebook's first cell; the Trainer's
`threads`) or none ("default": the library chooses where work starts, tinygrad_lite.threads). On
this script's 2-core machines case "2" is also what the libraries pick by themselves (a thread per
core), the engine's default before it chose lazily.

Each run of a case is a fresh process, because the wait policies (OMP_WAIT_POLICY, GOMP_SPINCOUNT,
OPENBLAS_THREAD_TIMEOUT, NUMBA_THREADING_LAYER) are read when the libraries load; the thread
variables of this shell (OMP_NUM_THREADS, TINYGRAD_LITE_NUM_THREADS, ...) are removed, so
"default" is what a notebook gets. A run takes `--warmup` steps, then times `--steps` steps on the
same batches every time: target tokens per second. Rounds alternate idle / busy, and the cases run
one after another (in reverse order every other round), so all see the same neighbours; the tables
give medians, and the ratios are medians of each round's ratio. Results: bench/README.md, "Threads".
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time

# threads=None: the Trainer's default; the environment is added to the child's
PASSIVE = {"OMP_WAIT_POLICY": "PASSIVE", "GOMP_SPINCOUNT": "0", "KMP_BLOCKTIME": "0",
           "OPENBLAS_THREAD_TIMEOUT": "4"}
CASES = {
    "default": (None, {}),
    "1": (1, {}),
    "2": (2, {}),                                       # the libraries' defaults: spinning pools
    "2-passive": (2, PASSIVE),                          # OpenMP and OpenBLAS workers sleep at once
    "2-workqueue": (2, {**PASSIVE, "NUMBA_THREADING_LAYER": "workqueue"}),
    "2-blas-1-numba": (2, {"NUMBA_NUM_THREADS": "1"}),  # only BLAS threaded
}
CLEARED = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS",
           "TINYGRAD_LITE_NUM_THREADS", "OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "KMP_BLOCKTIME",
           "OPENBLAS_THREAD_TIMEOUT", "NUMBA_THREADING_LAYER")
CONFIGS = {"toy": {}, "wide": {"d_model": 256, "d_ff": 1024}, "quick": {"d_model": 32, "d_ff": 64,
                                                                        "max_tokens": 400}}
NOTEBOOK_CONFIGS = ("tiny", "small", "base-short", "quick")  # train_throughput.py's
MODES = {"notebook": "small", "trainer": "toy"}               # each step's default config
# a CPU-bound neighbour that also ends itself if this script (pid in argv) dies without stopping it
BUSY = "import os, sys\nwhile os.getppid() == int(sys.argv[1]):\n    for _ in range(10 ** 6): pass\n"


def numba_pool_of_the_case(case: str) -> None:
    """A case's own NUMBA_NUM_THREADS, which set_num_threads overwrote, back before Numba loads."""
    pool = CASES[case][1].get("NUMBA_NUM_THREADS")
    if pool is not None:
        assert "numba" not in sys.modules, "numba loaded before the case could size its pool"
        os.environ["NUMBA_NUM_THREADS"] = pool


def notebook_child(case: str, config: str, warmup: int, steps: int) -> dict:
    """One measurement, in this (fresh) process: the step a learner writes, no Trainer."""
    threads, _ = CASES[case]
    import tinygrad_lite as tl
    if threads is not None:
        tl.set_num_threads(threads)
    numba_pool_of_the_case(case)
    from train_throughput import CONFIGS as SIZES
    from train_throughput import PAD, QUICK, build_ours, random_batches

    from tinygrad_lite.nn import functional as F
    from tinygrad_lite.optim import Adam
    cfg = QUICK if config == "quick" else SIZES[config]
    model = build_ours(cfg)
    optimizer = Adam(model.parameters(), lr=1e-4, betas=(0.9, 0.98), eps=1e-9)
    batches = random_batches(cfg, 4)

    def step(batch):
        logits = model(batch.src, batch.tgt_in)
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), batch.tgt_out.reshape(-1),
                               ignore_index=PAD, label_smoothing=0.1)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return batch.target_tokens
    for i in range(warmup):
        step(batches[i % len(batches)])
    tokens, t0, c0 = 0, time.perf_counter(), time.process_time()
    for i in range(steps):
        tokens += step(batches[i % len(batches)])
    seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
    return {"case": case, "threads": tl.get_num_threads(), "tok_s": tokens / seconds, "seconds": seconds,
            "cpu_seconds": cpu, "steps": steps, **libraries()}


def child(case: str, config: str, warmup: int, steps: int) -> dict:
    """One measurement, in this (fresh) process: Trainer construction, warm-up, timed steps."""
    from transformer.train import TrainConfig, Trainer, epoch_batches
    threads, _ = CASES[case]
    with tempfile.TemporaryDirectory() as out:
        cfg = TrainConfig(out=out, progress=False, threads=threads, **CONFIGS[config])
        trainer = Trainer(cfg)
        numba_pool_of_the_case(case)
        batches = epoch_batches(trainer.data, cfg, 0)
        batches = (batches * (1 + (warmup + steps) // len(batches)))[:warmup + steps]
        for batch in batches[:warmup]:
            trainer.train_step(batch)
        tokens, t0, c0 = 0, time.perf_counter(), time.process_time()
        for batch in batches[warmup:]:
            tokens += trainer.train_step(batch)[1]
        seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
    return {"case": case, "threads": trainer.threads, "tok_s": tokens / seconds, "seconds": seconds,
            "cpu_seconds": cpu, "steps": steps, **libraries()}


def libraries() -> dict:
    from threadpoolctl import threadpool_info
    info = {"blas": [f"{i['internal_api']} {i.get('version')} {i.get('threading_layer', '')} "
                     f"{i['num_threads']} threads" for i in threadpool_info()]}
    numba = sys.modules.get("numba")
    if numba is not None:
        info["numba"] = numba.__version__
        info["numba_threads"] = f"{numba.get_num_threads()} of a pool of {numba.config.NUMBA_NUM_THREADS}"
        try:
            info["numba_layer"] = numba.threading_layer()
        except ValueError:  # no parallel kernel ran yet
            info["numba_layer"] = None
    return info


def run_case(case: str, args) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in CLEARED}
    env.update(CASES[case][1])
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    cmd = [sys.executable, os.path.abspath(__file__), "--child", case, "--mode", args.mode,
           "--config", args.config, "--warmup", str(args.warmup), "--steps", str(args.steps)]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False, timeout=args.timeout)
    if done.returncode != 0:
        raise RuntimeError(f"case {case} failed ({done.returncode}):\n{done.stdout[-2000:]}{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


class Busy:
    """`count` CPU-bound processes, stopped on leaving the block (error, Ctrl-C or SIGTERM too)."""

    def __init__(self, count: int):
        self.count, self.procs = count, []

    def __enter__(self):
        try:
            for _ in range(self.count):
                self.procs.append(subprocess.Popen([sys.executable, "-c", BUSY, str(os.getpid())],
                                                   stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL))
            if self.procs:
                print(f"  busy pids {' '.join(str(p.pid) for p in self.procs)}", flush=True)
                time.sleep(0.3)
        except BaseException:  # Ctrl-C while starting: __exit__ would not run
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc):
        for p in self.procs:
            p.kill()
        for p in self.procs:
            p.wait()
        self.procs = []
        return False


def measure(args) -> list:
    """Rounds of every case, idle then beside --busy processes; one row per run."""
    rows = []
    for repeat in range(args.repeats):
        for busy in ([0, args.busy] if args.busy else [0]):
            with Busy(busy):
                load = os.getloadavg()[0]
                for case in args.cases if repeat % 2 == 0 else args.cases[::-1]:  # no case always first
                    row = {**run_case(case, args), "busy": busy, "repeat": repeat, "load1": load}
                    rows.append(row)
                    print(f"  round {repeat + 1}/{args.repeats}  busy {busy}  {case:<15} "
                          f"{row['tok_s']:8.0f} tok/s  {1e3 * row['seconds'] / row['steps']:7.1f} ms/step  "
                          f"(threads {row['threads']}, numba {row.get('numba_threads')}, load {load:.2f})",
                          flush=True)
                    if args.json:
                        with open(args.json, "a", encoding="utf-8") as f:
                            f.write(json.dumps({**row, "mode": args.mode, "config": args.config}) + "\n")
    return rows


def report(rows: list, args) -> None:
    def runs(case, busy):
        return [r["tok_s"] for r in rows if r["case"] == case and r["busy"] == busy]
    busy_levels = sorted({r["busy"] for r in rows})
    head = " | ".join(f"busy {b}: median tok/s (runs)" for b in busy_levels)
    print(f"\n{args.mode} step, config {args.config}, {args.steps} steps after {args.warmup}, "
          f"{args.repeats} round(s)\n")
    print(f"| case | threads | {head} |")
    print("|---|---|" + "---|" * len(busy_levels))
    for case in args.cases:
        threads = next(r["threads"] for r in rows if r["case"] == case)
        cells = [f"{statistics.median(runs(case, b)):.0f} ({', '.join(f'{v:.0f}' for v in runs(case, b))})"
                 for b in busy_levels]
        print(f"| {case} | {threads} | {' | '.join(cells)} |")
    if "default" in args.cases and "1" in args.cases:
        print()
        for b in busy_levels:
            ratios = [d / o for d, o in zip(runs("default", b), runs("1", b))]
            print(f"default / 1 thread, {b} busy process(es): {statistics.median(ratios):.2f} "
                  f"(median of {len(ratios)} round ratios; target >= 0.9 with 1 busy)")
        by = {(r["case"], r["busy"], r["repeat"]): r["tok_s"] * r["seconds"] / r["cpu_seconds"]  # tokens per CPU s
              for r in rows if r["threads"] == 1}
        ratios = [by[("default", b, n)] / by[("1", b, n)] for (case, b, n) in by
                  if case == "default" and ("1", b, n) in by]
        if ratios:  # one thread each: CPU time is the work done, whatever the neighbours do
            print(f"default / 1 thread in CPU time: {statistics.median(ratios):.2f} (median of {len(ratios)})")
    if "2" in args.cases and "1" in args.cases:
        for b in busy_levels:
            ratios = [d / o for d, o in zip(runs("2", b), runs("1", b))]
            print(f"2 threads / 1 thread, {b} busy process(es): {statistics.median(ratios):.2f}")
    for case in args.cases:
        row = next(r for r in rows if r["case"] == case)
        print(f"{case}: {'; '.join(row['blas'])}; numba {row.get('numba')} threads {row.get('numba_threads')} "
              f"(layer {row.get('numba_layer')})")
    print(f"cpus {os.cpu_count()}, load average during the rounds "
          f"{min(r['load1'] for r in rows):.2f}-{max(r['load1'] for r in rows):.2f}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--busy", type=int, default=1, help="CPU-bound processes in the busy rounds (0: idle only)")
    parser.add_argument("--cases", help=f"comma list of {list(CASES)} (default: default,1,2; --quick: default,1)")
    parser.add_argument("--all", action="store_true", help="every case")
    parser.add_argument("--mode", default="notebook", choices=list(MODES),
                        help="notebook: the SMALL step written by hand; trainer: the toy translator's Trainer")
    parser.add_argument("--config", help=f"notebook: one of {NOTEBOOK_CONFIGS} (default small); trainer: "
                                         f"toy (TrainConfig's defaults) or wide (d_model 256, d_ff 1024)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--timeout", type=float, default=600, help="seconds per run")
    parser.add_argument("--quick", action="store_true", help="toy sizes, 1 round, 2 steps: checks that it runs")
    parser.add_argument("--json", help="append one JSON line per run to this file")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        run = notebook_child if args.mode == "notebook" else child
        print(json.dumps(run(args.child, args.config, args.warmup, args.steps)))
        return 0
    args.config = "quick" if args.quick else args.config or MODES[args.mode]
    if args.config not in (NOTEBOOK_CONFIGS if args.mode == "notebook" else CONFIGS):
        parser.error(f"--config {args.config} is not a config of the {args.mode} step")
    spec = args.cases or ("default,1" if args.quick else "default,1,2")
    args.cases = list(CASES) if args.all else [c.strip() for c in spec.split(",") if c.strip()]
    unknown = [c for c in args.cases if c not in CASES]
    if unknown or args.busy < 0 or args.repeats < 1 or args.steps < 1 or args.warmup < 0:
        parser.error(f"unknown case(s) {unknown}" if unknown else "--busy, --warmup >= 0; --repeats, --steps >= 1")
    if args.quick:
        args.repeats, args.warmup, args.steps = 1, 1, 2
    # so Busy's __exit__ stops the neighbours; Ctrl-C too when started from a shell that ignores SIGINT (`&`)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    signal.signal(signal.SIGINT, signal.default_int_handler)
    print(f"{time.strftime('%Y-%m-%dT%H:%M%z')}  load average {os.getloadavg()}  cpus {os.cpu_count()}")
    report(measure(args), args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
