"""Greedy decoding speed: tinygrad-lite with its key/value cache vs PyTorch's nn.Transformer and CTranslate2.

    python bench/decode.py                      # 1 thread, SMALL model, batch 1 and 64
    python bench/decode.py --threads 2 --configs small,base-short --json out.jsonl
    python bench/decode.py --quick              # seconds; what the smoke test runs
    python bench/decode.py --clock cpu          # this process's CPU time: steadier on a loaded machine
    python bench/decode.py --no-pin             # 1 thread without pinning the process to one CPU

Both sides decode 32 new tokens for the same random source sentences with identical weights
(ours copied into `transformer.interop.torch_reference`). Ours is
`transformer.decoding.greedy_decode` with the steps the translator picks (transformer.fast's
decoder_steps: the decoder kernels) (incremental: each step feeds only the newest token and
reuses the cached keys/values of earlier positions and of the encoder memory). PyTorch's
nn.Transformer has no cache, so its users re-run the decoder on the whole prefix every step;
that is the PyTorch column, run under `torch.inference_mode()`. Our no-cache mode is shown too.
<eos> is set to an id that never occurs, so every row decodes exactly 32 tokens.

CTranslate2 (an inference engine in C++, with its own key/value cache) runs the same weights:
ours converted through its spec API (`bench/ctranslate2_model.py`), float32 on the CPU, greedy
(beam_size 1), intra_threads = --threads, inter_threads 1, no end token (`end_token=[]`) and
max_decoding_length 32, so it too decodes exactly 32 tokens per row. Its Python API takes and
returns token strings: turning our ids into strings and back is inside its timing (microseconds).
Without ctranslate2 installed (it is in the `bench` extra) its columns say "missing".

"1 thread" is made real for every side: with --threads 1 the whole process (every thread it has
and will start: CTranslate2's worker, BLAS, Numba, torch) is pinned to one CPU
(os.sched_setaffinity) unless --no-pin, so no library can spend a second core, asked or not.
Each repeat is timed by both clocks; "cores" is a side's CPU seconds per wall second over its
repeats (1.0 = one busy core; below 1 = it waited or was preempted, above 1 = it ran threads in
parallel), printed for every side with both clocks' ratios.

Timing alternates the sides repeat by repeat in one process and reports medians. "sent/s" is
source sentences fully decoded per second; "ours/torch" > 1 means we are faster. "same tokens"
is the fraction of decoded tokens on which two engines agree (float rounding may flip a
near-tie argmax, after which a row diverges). For CTranslate2, every row that parts from ours
is checked: "near ties" counts the rows whose first differing token was within 1e-3 in log-prob
of ours under our model (teacher-forced), i.e. a rounding flip, not a conversion error.
"""
from __future__ import annotations

import argparse
import contextlib
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from train_throughput import (  # bench/ sits next to this file
    CLOCKS,
    CONFIGS,
    QUICK,
    BenchConfig,
    append_json,
    build_ours,
    build_torch,
    markdown,
    median,
    pick_configs,
    random_batches,
    start,
)

BOS = 2
NEVER = -1  # an <eos> id that is never produced, so every row runs the full length
CORES = {"ours": "ours (cache)", "torch": "torch (prefix)", "ct2": "ctranslate2"}  # row key -> runner


def ours_greedy(model, src: np.ndarray, new_tokens: int, use_cache: bool = True) -> np.ndarray:
    from transformer.decoding import greedy_decode
    from transformer.fast.decoder_steps import decoder_steps
    tokens, _ = greedy_decode(model, src, BOS, NEVER, max_len=new_tokens, use_cache=use_cache,
                              steps=decoder_steps(model))
    return tokens


def torch_greedy(model, src: np.ndarray, new_tokens: int) -> np.ndarray:
    """What nn.Transformer users write: encode once, then re-run the decoder on the prefix."""
    import torch
    with torch.inference_mode():
        src_t = torch.from_numpy(src)
        memory = model.encode(src_t)
        prefix = torch.full((src.shape[0], 1), BOS, dtype=torch.long)
        for _ in range(new_tokens):
            logits = model.decode(memory, src_t, prefix)
            nxt = logits[:, -1].argmax(-1, keepdim=True)
            prefix = torch.cat([prefix, nxt], dim=1)
    return prefix[:, 1:].numpy()


def ct2_runner(ours, src: np.ndarray, new_tokens: int, threads: int, workdir: str):
    """CTranslate2's greedy decode of `src` with ours's weights, or None when it is not installed."""
    try:
        import ctranslate2  # noqa: F401
    except ImportError:
        return None
    import ctranslate2_model as ct2m
    path = ct2m.convert(ours, workdir, max_positions=max(1024, new_tokens + 1, src.shape[1]))
    translator = ct2m.translator(path, threads)
    tokens = ct2m.default_tokens(ours.config.tgt_vocab)
    return lambda: ct2m.greedy(translator, src, new_tokens, tokens, pad_id=ours.config.pad_id)


def parting_gaps(model, src: np.ndarray, ours: np.ndarray, theirs: np.ndarray) -> list:
    """For each row where `theirs` parts from `ours`: how much more log-prob our model gives our
    token than theirs at the first differing step (teacher-forced on our tokens)."""
    from tinygrad_lite import no_grad
    rows = [r for r in range(len(ours)) if (ours[r] != theirs[r]).any()]
    if not rows:
        return []
    tgt_in = np.concatenate([np.full((len(rows), 1), BOS), ours[rows, :-1]], axis=1)
    with no_grad():
        logits = model(src[rows], tgt_in).data.astype(np.float64)
    gaps = []
    for i, r in enumerate(rows):
        step = int(np.flatnonzero(ours[r] != theirs[r])[0])
        gaps.append(float(logits[i, step, ours[r, step]] - logits[i, step, theirs[r, step]]))
    return gaps


def ct2_columns(by_clock: dict, clock: str, outputs: dict, ours, src: np.ndarray, batch: int) -> dict:
    """The CTranslate2 fields of a row: speed, ratios (sent/s over sent/s; by `clock`, and by
    each clock as ratio_ours_over_ct2_<clock>) and token agreement."""
    samples = by_clock[clock]
    if "ctranslate2" not in samples:
        return {"ctranslate2": "missing"}
    t_ct2 = median(samples["ctranslate2"])
    t_ours, t_torch = median(samples["ours (cache)"]), median(samples["torch (prefix)"])
    gaps = parting_gaps(ours, src, outputs["ours (cache)"], outputs["ctranslate2"])
    each_clock = {f"ratio_ours_over_ct2_{c}": median(by_clock[c]["ctranslate2"]) / median(by_clock[c]["ours (cache)"])
                  for c in by_clock}
    return {"sent_s_ct2": batch / t_ct2, "ms_ct2": 1e3 * t_ct2, **each_clock,
            "ratio_ours_over_ct2": t_ct2 / t_ours, "ratio_torch_over_ct2": t_ct2 / t_torch,
            "same_tokens_ct2": float(np.mean(outputs["ours (cache)"] == outputs["ctranslate2"])),
            "ct2_rows_parting": len(gaps), "ct2_rows_parting_near_tie": sum(g < 1e-3 for g in gaps)}


def bench_case(cfg: BenchConfig, batch: int, new_tokens: int, repeats: int, threads: int,
               with_no_cache: bool, clock: str = "wall") -> dict:
    import warnings

    import torch
    warnings.filterwarnings("ignore", message=".*nested tensors.*")
    ours = build_ours(cfg, dropout=0.0)
    theirs = build_torch(ours)
    ours.eval()
    theirs.eval()
    src = random_batches(BenchConfig(**{**cfg.__dict__, "batch": batch}), 1, seed=1)[0].src
    runners = {"ours (cache)": lambda: ours_greedy(ours, src, new_tokens),
               "torch (prefix)": lambda: torch_greedy(theirs, src, new_tokens)}
    if with_no_cache:
        runners["ours (no cache)"] = lambda: ours_greedy(ours, src, new_tokens, use_cache=False)
    with tempfile.TemporaryDirectory() as workdir:
        ct2 = ct2_runner(ours, src, new_tokens, threads, workdir)
        if ct2 is not None:
            runners["ctranslate2"] = ct2
        by_clock, outputs = time_runners(runners, repeats)
    samples = by_clock[clock]
    cores = {f"cores_{key}": sum(by_clock["cpu"][name]) / sum(by_clock["wall"][name])
             for key, name in CORES.items() if name in samples}
    same = float(np.mean(outputs["ours (cache)"] == outputs["torch (prefix)"]))
    t_ours, t_torch = median(samples["ours (cache)"]), median(samples["torch (prefix)"])
    row = {"config": cfg.name, "threads": threads, "batch": batch, "new_tokens": new_tokens,
           "sent_s_ours_cache": batch / t_ours, "sent_s_torch": batch / t_torch,
           "ratio_ours_over_torch": t_torch / t_ours, "same_tokens": same,
           "ms_ours_cache": 1e3 * t_ours, "ms_torch": 1e3 * t_torch, "repeats": repeats, "clock": clock,
           **cores, **ct2_columns(by_clock, clock, outputs, ours, src, batch)}
    if with_no_cache:
        t_plain = median(samples["ours (no cache)"])
        row.update(sent_s_ours_no_cache=batch / t_plain, ms_ours_no_cache=1e3 * t_plain)
    del torch
    return row


def time_runners(runners: dict, repeats: int) -> tuple:
    """Each runner once (warm-up, and the tokens to compare), then `repeats` timed rounds,
    alternating the order round by round. Returns ({clock: seconds per runner}, tokens per runner),
    each repeat timed by every clock in CLOCKS ("cpu" is this process's CPU time, every thread's)."""
    outputs = {name: fn() for name, fn in runners.items()}
    samples = {clock: {name: [] for name in runners} for clock in CLOCKS}
    order = list(runners)
    for r in range(repeats):
        for name in (order if r % 2 == 0 else order[::-1]):
            wall, cpu = time.perf_counter(), time.process_time()
            runners[name]()
            samples["cpu"][name].append(time.process_time() - cpu)
            samples["wall"][name].append(time.perf_counter() - wall)
    return samples, outputs


def pin_to_one_cpu() -> int:
    """Pin every thread of this process, and so every thread it starts later, to one CPU of the
    ones it may use; returns that CPU."""
    cpu = min(os.sched_getaffinity(0))
    for task in os.listdir("/proc/self/task"):
        with contextlib.suppress(ProcessLookupError):
            os.sched_setaffinity(int(task), {cpu})
    return cpu


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--configs", default="small", help=f"comma list of {sorted(CONFIGS)}")
    parser.add_argument("--batches", default="1,64", help="comma list of batch sizes")
    parser.add_argument("--new-tokens", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--no-cache-column", action="store_true", help="also time ours without the cache")
    parser.add_argument("--json", help="append one JSON line per row to this file")
    parser.add_argument("--quick", action="store_true", help="a seconds-long run on a toy config (smoke test)")
    parser.add_argument("--clock", choices=sorted(CLOCKS), default="wall",
                        help="wall time, or this process's CPU time (steadier on a shared machine; 1 thread)")
    parser.add_argument("--pin", action=argparse.BooleanOptionalAction, default=None,
                        help="pin the whole process to one CPU (default: on with --threads 1)")
    args = parser.parse_args(argv)
    if args.threads < 1 or args.new_tokens < 1 or args.repeats < 1:
        parser.error("--threads, --new-tokens and --repeats must be >= 1")
    if args.pin and args.threads > 1:
        parser.error(f"--pin keeps the process on one CPU, so it needs --threads 1, got --threads {args.threads}")
    if args.quick:
        configs, batches, new_tokens, repeats = [QUICK], [1, 4], 4, 1
    else:
        configs, new_tokens, repeats = pick_configs(parser, args.configs), args.new_tokens, args.repeats
        batches = [int(b) for b in args.batches.split(",") if b.strip()]
    _, env = start(parser, args.threads)
    env["ctranslate2"] = ct2_version()
    env["pinned"] = f"to CPU {pin_to_one_cpu()}" if args.pin or (args.pin is None and args.threads == 1) else "no"
    print(f"- ctranslate2: {env['ctranslate2']}\n- pinned: {env['pinned']}", flush=True)
    rows = []
    for cfg in configs:
        for batch in batches:
            row = {**bench_case(cfg, batch, new_tokens, repeats, args.threads,
                                args.no_cache_column or args.quick, args.clock), **env}
            rows.append(row)
            ct2 = (f", ctranslate2 {row['sent_s_ct2']:.1f} sent/s, ours/ct2 {row['ratio_ours_over_ct2']:.2f}"
                   if "sent_s_ct2" in row else ", ctranslate2 missing")
            print(f"  {cfg.name} batch {batch}: ours {row['sent_s_ours_cache']:.1f} sent/s, torch "
                  f"{row['sent_s_torch']:.1f} sent/s, ratio {row['ratio_ours_over_torch']:.2f}{ct2}", flush=True)
            print("    " + clocks_line(row), flush=True)
            append_json(args.json, row)
    print()
    print(markdown(*speed_table(rows)))
    print()
    print(markdown(*per_sentence_table(rows)))


def clocks_line(row: dict) -> str:
    """Each side's cores (CPU s per wall s) and ours/ct2 by each clock."""
    cores = ", ".join(f"{key} {row[f'cores_{key}']:.2f}" for key in CORES if f"cores_{key}" in row)
    ratios = ", ".join(f"{c} {row[f'ratio_ours_over_ct2_{c}']:.2f}" for c in CLOCKS
                       if f"ratio_ours_over_ct2_{c}" in row)
    return f"cores (CPU s / wall s): {cores}" + (f"; ours/ct2 by clock: {ratios}" if ratios else "")


def ct2_version() -> str:
    try:
        import ctranslate2
    except ImportError:
        return "missing (pip install -e '.[bench]')"
    return f"{ctranslate2.__version__} (float32, greedy, intra_threads = --threads, inter_threads 1)"


def _ct2_agreement(r: dict) -> str:
    if "same_tokens_ct2" not in r:
        return "missing"
    parting = r["ct2_rows_parting"]
    return f"{100 * r['same_tokens_ct2']:.1f}%" + (f" ({r['ct2_rows_parting_near_tie']}/{parting} rows part "
                                                     "at a near-tie)" if parting else "")


def speed_table(rows: list) -> tuple:
    """Sentences per second and ratios of sent/s (> 1: the first engine is faster)."""
    header = ["config", "threads", "batch", "new tokens", "ours (cache) sent/s", "torch (prefix) sent/s",
              "ours/torch", "ours ms", "torch ms", "same tokens", "ct2 sent/s", "ours/ct2", "torch/ct2",
              "same tokens ct2"]
    body = [[r["config"], r["threads"], r["batch"], r["new_tokens"], r["sent_s_ours_cache"], r["sent_s_torch"],
             r["ratio_ours_over_torch"], r["ms_ours_cache"], r["ms_torch"], f"{100 * r['same_tokens']:.1f}%",
             r.get("sent_s_ct2", "missing"), r.get("ratio_ours_over_ct2", "-"), r.get("ratio_torch_over_ct2", "-"),
             _ct2_agreement(r)] for r in rows]
    if any("sent_s_ours_no_cache" in r for r in rows):
        header.append("ours (no cache) sent/s")
        for line, r in zip(body, rows):
            line.append(r.get("sent_s_ours_no_cache", "-"))
    return header, body


def per_sentence_table(rows: list) -> tuple:
    """Milliseconds per sentence (a batch's decode time over its sentences)."""
    header = ["config", "threads", "batch", "ours ms/sent", "torch ms/sent", "ct2 ms/sent"]
    body = [[r["config"], r["threads"], r["batch"], r["ms_ours_cache"] / r["batch"], r["ms_torch"] / r["batch"],
             r["ms_ct2"] / r["batch"] if "ms_ct2" in r else "missing"] for r in rows]
    return header, body


if __name__ == "__main__":
    main()
