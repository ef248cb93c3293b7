"""Greedy decoding speed: tinygrad-lite with its key/value cache vs PyTorch's nn.Transformer.

    python bench/decode.py                      # 1 thread, SMALL model, batch 1 and 64
    python bench/decode.py --threads 2 --configs small,base-short --json out.jsonl
    python bench/decode.py --quick              # seconds; what the smoke test runs

Both sides decode 32 new tokens for the same random source sentences with identical weights
(ours copied into `transformer.interop.torch_reference`). Ours is
`transformer.decoding.greedy_decode` (incremental: each step feeds only the newest token and
reuses the cached keys/values of earlier positions and of the encoder memory). PyTorch's
nn.Transformer has no cache, so its users re-run the decoder on the whole prefix every step;
that is the PyTorch column, run under `torch.inference_mode()`. Our no-cache mode is shown too.
<eos> is set to an id that never occurs, so every row decodes exactly 32 tokens.

Timing alternates the sides repeat by repeat in one process and reports medians. "sent/s" is
source sentences fully decoded per second; "ours/torch" > 1 means we are faster. "same tokens"
is the fraction of decoded tokens on which the two engines agree (float rounding may flip a
near-tie argmax, after which a row diverges).
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from train_throughput import (  # bench/ sits next to this file
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


def ours_greedy(model, src: np.ndarray, new_tokens: int, use_cache: bool = True) -> np.ndarray:
    from transformer.decoding import greedy_decode
    tokens, _ = greedy_decode(model, src, BOS, NEVER, max_len=new_tokens, use_cache=use_cache)
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


def bench_case(cfg: BenchConfig, batch: int, new_tokens: int, repeats: int, threads: int,
               with_no_cache: bool) -> dict:
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
    outputs = {name: fn() for name, fn in runners.items()}  # warm-up, and the tokens to compare
    samples = {name: [] for name in runners}
    order = list(runners)
    for r in range(repeats):
        for name in (order if r % 2 == 0 else order[::-1]):
            start = time.perf_counter()
            runners[name]()
            samples[name].append(time.perf_counter() - start)
    same = float(np.mean(outputs["ours (cache)"] == outputs["torch (prefix)"]))
    t_ours, t_torch = median(samples["ours (cache)"]), median(samples["torch (prefix)"])
    row = {"config": cfg.name, "threads": threads, "batch": batch, "new_tokens": new_tokens,
           "sent_s_ours_cache": batch / t_ours, "sent_s_torch": batch / t_torch,
           "ratio_ours_over_torch": t_torch / t_ours, "same_tokens": same,
           "ms_ours_cache": 1e3 * t_ours, "ms_torch": 1e3 * t_torch, "repeats": repeats}
    if with_no_cache:
        t_plain = median(samples["ours (no cache)"])
        row.update(sent_s_ours_no_cache=batch / t_plain, ms_ours_no_cache=1e3 * t_plain)
    del torch
    return row


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
    args = parser.parse_args(argv)
    if args.threads < 1 or args.new_tokens < 1 or args.repeats < 1:
        parser.error("--threads, --new-tokens and --repeats must be >= 1")
    if args.quick:
        configs, batches, new_tokens, repeats = [QUICK], [1, 4], 4, 1
    else:
        configs, new_tokens, repeats = pick_configs(parser, args.configs), args.new_tokens, args.repeats
        batches = [int(b) for b in args.batches.split(",") if b.strip()]
    _, env = start(parser, args.threads)
    rows = []
    for cfg in configs:
        for batch in batches:
            row = {**bench_case(cfg, batch, new_tokens, repeats, args.threads,
                                args.no_cache_column or args.quick), **env}
            rows.append(row)
            print(f"  {cfg.name} batch {batch}: ours {row['sent_s_ours_cache']:.1f} sent/s, torch "
                  f"{row['sent_s_torch']:.1f} sent/s, ratio {row['ratio_ours_over_torch']:.2f}", flush=True)
            append_json(args.json, row)
    header = ["config", "threads", "batch", "new tokens", "ours (cache) sent/s", "torch (prefix) sent/s",
              "ours/torch", "ours ms", "torch ms", "same tokens"]
    body = [[r["config"], r["threads"], r["batch"], r["new_tokens"], r["sent_s_ours_cache"], r["sent_s_torch"],
             r["ratio_ours_over_torch"], r["ms_ours_cache"], r["ms_torch"], f"{100 * r['same_tokens']:.1f}%"]
            for r in rows]
    if any("sent_s_ours_no_cache" in r for r in rows):
        header.append("ours (no cache) sent/s")
        for line, r in zip(body, rows):
            line.append(r.get("sent_s_ours_no_cache", "-"))
    print()
    print(markdown(header, body))


if __name__ == "__main__":
    main()
