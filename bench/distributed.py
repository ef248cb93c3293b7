"""Data-parallel throughput: 1 rank against K ranks side by side, and what the all-reduce costs.

    python bench/distributed.py                       # SMALL config, 1 thread per rank, K = 1 and 2
    python bench/distributed.py --ranks 2 --threads 1 --repeats 9 --json out.jsonl
    python bench/distributed.py --quick               # seconds, a toy model (what the tests run)

The script starts itself as ONE job, `mpiexec -n K`, and alternates two phases repeat by repeat
(their order flipping), so both see the same machine load:

    K = 1   rank 0 trains alone; the other ranks sleep in a barrier (no CPU)
    K = K   every rank trains on its own batch of the same shape, with one all-reduce of the
            (token-weighted) gradients per step: tinygrad_lite.distributed, as `train` does

A step is bench/train_throughput.py's (forward, label-smoothed cross-entropy, backward, Adam; dropout
0.1 on) on its configs and random batches. "tok/s" counts target tokens of all ranks per second.
"all-reduce ms/step" is the time a training step spends in its two collectives (the gradients'
all-reduce and the 2-flag one that lets every rank stop after the same step): the transfer plus
waiting for the slower rank. "wire ms" is the same call right after a barrier (the transfer alone),
for the flat buffer and for the plain one-Allreduce-per-tensor version.

Then a paper estimate: the all-reduce of the paper's base model across machines (ring all-reduce:
each rank sends and receives 2(K-1)/K x 4 bytes x parameters a step) over 10 and 100 Gb/s links,
against the compute of one step measured here on the base model, and when overlap would pay.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from train_throughput import (  # noqa: E402  (its configs, random batches and training step)
    CONFIGS,
    QUICK,
    ROOT,
    OursTrainer,
    append_json,
    build_ours,
    cpu_model,
    markdown,
    median,
    random_batches,
)

PAPER_BASE_PARAMETERS = 65e6       # Vaswani et al. 2017, Table 3: base model
PAPER_TOKENS_PER_STEP = 25_000     # §5.1: ~25,000 source + 25,000 target tokens a step (8 GPUs)
PAPER_STEP_SECONDS = 0.4           # §5.2: a base step took about 0.4 s on 8 P100 GPUs
PAPER_VOCAB = 37_000               # §5.1: shared source-target BPE vocabulary (English-German)
LINKS_GBIT = (10, 100)


# --------------------------------------------------------------------------------- one rank's work

def set_threads(threads: int):
    """The engine's thread count (BLAS + Numba), Numba's pool sized before numba is imported."""
    os.environ["NUMBA_NUM_THREADS"] = str(threads)
    import tinygrad_lite as tl
    from tinygrad_lite.kernels.backend import load_numba
    load_numba()
    tl.set_num_threads(threads)


class Stepper:
    """One training step of train_throughput's OursTrainer, with the all-reduce between backward
    and the optimizer when `together`; records the seconds spent in the all-reduce."""

    def __init__(self, cfg, seed: int):
        from tinygrad_lite import distributed as dist
        self.dist = dist
        self.trainer = OursTrainer(build_ours(cfg, seed=0))
        self.params = list(self.trainer.model.parameters())
        dist.broadcast_parameters(self.params)
        import tinygrad_lite as tl
        tl.manual_seed(dist.rank_seed(seed))
        self.batches = random_batches(cfg, 4, seed=seed + dist.rank())
        self.comm, self.cursor = [], 0

    def step(self, together: bool) -> float:
        """One step; returns the target tokens it trained on, all ranks together."""
        batch = self.batches[self.cursor % len(self.batches)]
        self.cursor += 1
        loss = self.trainer.loss(batch)
        self.trainer.optimizer.zero_grad()
        loss.backward()
        tokens = batch.target_tokens
        if together:  # train's two collectives: the gradients, then whether any rank must stop
            t0 = time.perf_counter()
            tokens, = self.dist.all_reduce_gradients(self.params, weight=batch.target_tokens)
            self.dist.any_rank(False, False)
            self.comm.append(time.perf_counter() - t0)
        self.trainer.optimizer.step()
        return tokens

    def wire_ms(self, flat: bool, repeats: int) -> float:
        """Median ms of the all-reduce alone: every rank enters it together, right after a tiny
        blocking all-reduce (the sleeping barrier would let the ranks leave milliseconds apart)."""
        times = []
        for _ in range(repeats):
            self.dist.any_rank(False)
            t0 = time.perf_counter()
            self.dist.all_reduce_gradients(self.params, weight=1.0, flat=flat)
            times.append(time.perf_counter() - t0)
        return 1e3 * median(times)


def phases(stepper: Stepper, steps: int, repeats: int) -> tuple[dict, dict]:
    """({1: [s/step per repeat], K: [...]}, {1: tokens/step, K: ...}), the phases alternating;
    rank 0's clock (the all-reduce keeps the ranks in step)."""
    dist, K = stepper.dist, stepper.dist.world_size()
    for _ in range(2):  # warm-up: kernels loaded, optimizer state allocated
        stepper.step(together=True)
    stepper.comm.clear()
    samples, tokens = {1: [], K: []}, {1: [], K: []}
    for r in range(repeats):
        for k in ((1, K) if r % 2 == 0 else (K, 1)):
            dist.barrier()
            start = time.perf_counter()
            if k == K or dist.is_main():
                tokens[k] += [stepper.step(together=k > 1) for _ in range(steps)]
            samples[k].append((time.perf_counter() - start) / steps)
    return samples, {k: float(np.mean(v)) if v else 0.0 for k, v in tokens.items()}


def worker(args) -> None:
    """Runs on every rank of the mpiexec job; rank 0 prints and writes the results."""
    set_threads(args.threads)
    from tinygrad_lite import distributed as dist
    cfg = QUICK if args.quick else CONFIGS[args.config]
    stepper = Stepper(cfg, seed=0)
    samples, tokens = phases(stepper, cfg.steps if args.steps is None else args.steps, args.repeats)
    K = dist.world_size()
    wire = {flat: stepper.wire_ms(flat, args.repeats * 2) for flat in (True, False)}
    if not dist.is_main():
        return
    tokens_1, tokens_k = tokens[1], tokens[K]
    t1, tk = median(samples[1]), median(samples[K])
    comm_ms = 1e3 * median(stepper.comm)
    n_params = sum(p.data.size for p in stepper.params)
    row = {"config": cfg.name, "ranks": K, "threads_per_rank": args.threads,
           "model": f"d_model {cfg.d_model}, h {cfg.h}, N {cfg.N}+{cfg.N}, d_ff {cfg.d_ff}, vocab {cfg.vocab}",
           "batch_per_rank": f"{cfg.batch} x {cfg.tokens}", "parameters": n_params,
           "allreduce_mb": 4 * n_params / 1e6, "tensors": len(stepper.params),
           "tok_s_1": tokens_1 / t1, f"tok_s_{K}": tokens_k / tk, "speedup": (tokens_k / tk) / (tokens_1 / t1),
           "ms_per_step_1": 1e3 * t1, f"ms_per_step_{K}": 1e3 * tk, "allreduce_ms_per_step": comm_ms,
           "wire_ms_flat": wire[True], "wire_ms_per_tensor": wire[False],
           "spread_1_pct": 100 * (max(samples[1]) - min(samples[1])) / t1,
           f"spread_{K}_pct": 100 * (max(samples[K]) - min(samples[K])) / tk,
           "steps_per_sample": cfg.steps if args.steps is None else args.steps, "repeats": args.repeats,
           "cpu": f"{cpu_model()} ({os.cpu_count()} logical cores)",
           "load_average": " ".join(f"{x:.2f}" for x in os.getloadavg()),
           "date": time.strftime("%Y-%m-%dT%H:%M%z")}
    if not args.quick and not args.no_base:
        row["base_ms_per_target_token"] = base_ms_per_token(args.repeats)
    print(json.dumps(row), flush=True)


def base_ms_per_token(repeats: int) -> float:
    """Compute of the base model on this CPU: ms per target token of train_throughput's base-short
    step (d_model 512, 6+6 layers, vocab 8000, 16 x 16 tokens), median of a few steps."""
    cfg = CONFIGS["base-short"]
    trainer = OursTrainer(build_ours(cfg))
    batches = random_batches(cfg, 2)
    trainer.step(batches[0])
    times = []
    for i in range(max(2, min(repeats, 3))):
        t0 = time.perf_counter()
        trainer.step(batches[i % 2])
        times.append((time.perf_counter() - t0) / batches[i % 2].target_tokens)
    return 1e3 * median(times)


# --------------------------------------------------------------------------------- the report

def base_parameters(vocab: int) -> dict:
    """Our Transformer at the paper's base size: parameters with separate source/target embeddings
    and generator, and with the target embedding tied to the generator (--tie-embeddings)."""
    from transformer.model import Transformer
    layers = Transformer(1, 1, 512, 8, 6, 2048).num_parameters() - 3 * 512 - 1  # without the vocab parts
    return {"untied": layers + 3 * vocab * 512 + vocab, "tied": layers + 2 * vocab * 512 + vocab}


def paper_estimate(row: dict, ranks: int = 8) -> str:
    """The all-reduce of the base model over real links, against the compute of a step."""
    ours = base_parameters(PAPER_VOCAB)
    rows = []
    ms_per_token = row.get("base_ms_per_target_token")
    tokens_per_rank = PAPER_TOKENS_PER_STEP / ranks
    compute_cpu = None if ms_per_token is None else ms_per_token * tokens_per_rank / 1e3
    for name, params in (("paper's base (shared embeddings)", PAPER_BASE_PARAMETERS),
                         ("ours, tied target embedding", ours["tied"]), ("ours, untied", ours["untied"])):
        sent = 2 * (ranks - 1) / ranks * 4 * params  # bytes each rank sends (and receives) in a ring
        for gbit in LINKS_GBIT:
            seconds = sent / (gbit * 1e9 / 8)
            cpu = "-" if compute_cpu is None else f"{100 * seconds / compute_cpu:.1f}%"
            rows.append([name, f"{params / 1e6:.0f}M", f"{sent / 1e6:.0f} MB", f"{gbit} Gb/s",
                         f"{1e3 * seconds:.0f} ms", cpu, f"{100 * seconds / PAPER_STEP_SECONDS:.0f}%"])
    header = ["model", "parameters", "sent per rank a step", "link", "all-reduce", "vs our CPU step",
              "vs a 0.4 s GPU step"]
    lines = [f"Paper estimate: {ranks} ranks, a step of {PAPER_TOKENS_PER_STEP:,} target tokens "
             f"({tokens_per_rank:,.0f} per rank), ring all-reduce, float32 gradients, bandwidth only "
             f"(latency adds 2(K-1) x ~50 us on Ethernet).", markdown(header, rows)]
    if compute_cpu is not None:
        lines.append(f"Our compute per step: {ms_per_token:.2f} ms per target token (base model, 1 rank, "
                     f"measured above) x {tokens_per_rank:,.0f} tokens = {compute_cpu:.1f} s.")
    return "\n".join(lines)


def when_overlap_pays(row: dict, ranks: int = 8) -> str:
    """The step length below which overlapping the all-reduce with backward is worth building."""
    ms_per_token = row.get("base_ms_per_target_token")
    sent = 2 * (ranks - 1) / ranks * 4 * PAPER_BASE_PARAMETERS
    lines = ["When bucketing + overlap would pay: one flat buffer after backward adds the whole all-reduce "
             "to every step; buckets sent while backward still runs hide up to the backward's share "
             "(about 2/3 of a step). Worth building once the all-reduce is over ~10% of a step:"]
    for gbit in LINKS_GBIT:
        seconds = sent / (gbit * 1e9 / 8)
        tokens = "" if ms_per_token is None else \
            f" (below {10 * seconds / (ms_per_token / 1e3):,.0f} target tokens per rank a step on this CPU)"
        lines.append(f"- {gbit} Gb/s: steps shorter than {10 * seconds:.1f} s{tokens}")
    if ms_per_token is not None:
        compute = ms_per_token * PAPER_TOKENS_PER_STEP / ranks / 1e3
        share = sent / (LINKS_GBIT[0] * 1e9 / 8) / compute
        lines.append(f"Here a base step of {PAPER_TOKENS_PER_STEP / ranks:,.0f} tokens per rank computes for "
                     f"{compute:.1f} s, so even at {LINKS_GBIT[0]} Gb/s the all-reduce adds {100 * share:.1f}%: "
                     f"{'not worth it on this CPU' if share < 0.1 else 'worth it'}.")
    lines.append(f"A GPU step is another matter: the paper's {PAPER_STEP_SECONDS} s step would wait about as long "
                 f"again for a {LINKS_GBIT[0]} Gb/s all-reduce, which is why DDP and Horovod overlap buckets "
                 f"with backward. Bucketing without overlap only bounds the flat buffer's extra memory "
                 f"(4 bytes per parameter).")
    return "\n".join(lines)


def report(row: dict) -> None:
    K = row["ranks"]
    print(markdown(["config", "ranks", "threads/rank", "batch/rank", "tok/s 1 rank", f"tok/s {K} ranks",
                    "speed-up", "ms/step 1", f"ms/step {K}", "all-reduce ms/step", "wire ms flat",
                    "wire ms per tensor", "gradient MB", "tensors"],
                   [[row["config"], K, row["threads_per_rank"], row["batch_per_rank"], row["tok_s_1"],
                     row[f"tok_s_{K}"], row["speedup"], row["ms_per_step_1"], row[f"ms_per_step_{K}"],
                     row["allreduce_ms_per_step"], row["wire_ms_flat"], row["wire_ms_per_tensor"],
                     row["allreduce_mb"], row["tensors"]]]))
    target = "MET" if row["speedup"] >= 1.7 else "NOT MET"
    print(f"\n{target}: {K} ranks reach {row['speedup']:.2f}x the target tokens/s of 1 rank (goal >= 1.7x at K=2 "
          f"on an idle machine; load average during the run {row['load_average']})\n")
    print(paper_estimate(row))
    print()
    print(when_overlap_pays(row))


def launch(args) -> dict:
    """Run this script as `mpiexec -n K ... --worker` and return rank 0's JSON row."""
    search = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    mpiexec = shutil.which("mpiexec", path=search)
    if mpiexec is None:
        sys.exit("bench/distributed.py: no mpiexec found; pip install -e '.[distributed]' (mpi4py, mpich)")
    command = [mpiexec, "-n", str(args.ranks), sys.executable, __file__, "--worker", *sys.argv[1:]]
    env = {**os.environ, "OMP_NUM_THREADS": str(args.threads), "OPENBLAS_NUM_THREADS": str(args.threads),
           "MKL_NUM_THREADS": str(args.threads)}
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    if done.returncode:
        sys.exit(f"bench/distributed.py: {' '.join(command)} failed:\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=2, help="K, the ranks of the data-parallel phase (default 2)")
    parser.add_argument("--threads", type=int, default=1, help="threads per rank (BLAS + Numba; default 1)")
    parser.add_argument("--config", default="small", choices=sorted(CONFIGS), help="model + batch (default small)")
    parser.add_argument("--steps", type=int, help="steps per timed sample (default: the config's)")
    parser.add_argument("--repeats", type=int, default=9, help="timed samples per phase (default 9)")
    parser.add_argument("--json", help="append the result row (JSON) to this file")
    parser.add_argument("--no-base", action="store_true", help="skip measuring the base model's compute")
    parser.add_argument("--quick", action="store_true", help="a seconds-long run on a toy config (smoke test)")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.ranks < 2 or args.threads < 1 or args.repeats < 1:
        parser.error("--ranks must be >= 2, --threads and --repeats >= 1")
    if args.quick:
        args.repeats = min(args.repeats, 2)
    if args.worker:
        return worker(args)
    row = launch(args)
    report(row)
    append_json(args.json, row)


if __name__ == "__main__":
    main()
