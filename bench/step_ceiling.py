"""The ceiling of a training config against PyTorch: its step with every op free but the products and Adam.

    python bench/step_ceiling.py                          # BASE-short, 1 thread, CPU clock
    python bench/step_ceiling.py --configs small,base-short --repeats 6 --json out.jsonl
    python bench/step_ceiling.py --quick                  # seconds, a toy config (the smoke test)

One process alternates three things, repeat by repeat: PyTorch's step, our compiled step (the trainers'
default, a Linear on its formula) with its matrix products timed inside it (every call of nn.functional's
_product, where a Linear multiplies, and the fused FFN's), and the optimizer's update alone (Adam's plain loop over the
same parameters). PyTorch's step over (products + Adam) is the ratio we would reach if every other op
cost nothing: a target above it is past this machine's bound, unless the products themselves get
faster. The products inside a step read their weights from memory where the model is larger than the
cache (BASE-short: 56M parameters), which train_throughput.py's BLAS bound, run on operands reused from
cache, does not; Adam streams 28 bytes a parameter (p, m, v read and written, the gradient read), which
the streaming copy printed beside it bounds.
"""
from __future__ import annotations

import argparse
import time

import numpy as np
from train_throughput import (
    CONFIGS,
    QUICK,
    OursTrainer,
    TorchTrainer,
    append_json,
    build_ours,
    build_torch,
    median,
    pick_configs,
    random_batches,
    start,
)

ADAM_BYTES = 28  # a parameter's bytes per Adam step, float32: p, m, v read and written, the gradient read


def streaming_copy_gbs(megabytes: int = 256) -> float:
    """GB/s of one thread's copy of a large float32 array (bytes read plus bytes written)."""
    a = np.ones(megabytes << 18, np.float32)
    b = np.empty_like(a)
    best = min(_seconds(lambda: np.copyto(b, a)) for _ in range(5))
    return 2 * a.nbytes / best / 1e9


def _seconds(fn) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def products_timed(module_names=("tinygrad_lite.nn.functional", "tinygrad_lite.nn.fused")):
    """Wrap `_product` where our Linears call it; returns a one-element list that accumulates its CPU seconds. The
    op `linear` runs its formula from here on: its Numba twin (kernels.linear_layer) multiplies on the same BLAS
    with the same calls, but inside one Numba function, where no wrapper sees them."""
    import importlib

    from tinygrad_lite import dispatch
    dispatch.TWINS["linear"] = dispatch.formula("linear")
    spent = [0.0]
    for name in module_names:
        module = importlib.import_module(name)
        product = module._product

        def timed(a, b, product=product):
            t = time.process_time()
            out = product(a, b)
            spent[0] += time.process_time() - t
            return out
        module._product = timed
    return spent


def ceiling(cfg, repeats: int) -> dict:
    from tinygrad_lite.optim import Adam
    ours_model = build_ours(cfg)
    import torch
    torch.manual_seed(0)
    ours, theirs = OursTrainer(ours_model), TorchTrainer(build_torch(ours_model))
    batches = random_batches(cfg, 2)
    spent = products_timed()
    for batch in batches * 2:  # captures, kernels and optimizer state made
        ours.step(batch)
        theirs.step(batch)
    params = list(ours_model.parameters())
    adam = Adam(params, lr=1e-12, betas=(0.9, 0.98), eps=1e-9)  # the step's update, on its gradients (lr: barely moves)
    adam.step()
    samples = {"torch": [], "ours": [], "products": [], "adam": []}
    for r in range(repeats):
        for batch in batches if r % 2 == 0 else batches[::-1]:
            t = time.process_time()
            theirs.step(batch)
            samples["torch"].append(time.process_time() - t)
            spent[0] = 0.0
            t = time.process_time()
            ours.step(batch)
            samples["ours"].append(time.process_time() - t)
            samples["products"].append(spent[0])
            t = time.process_time()
            adam.step()
            samples["adam"].append(time.process_time() - t)
    ms = {k: 1e3 * median(v) for k, v in samples.items()}
    n = sum(p.data.size for p in params)
    return {"config": cfg.name, "parameters_M": round(n / 1e6, 2), **{f"{k}_ms": round(v, 1) for k, v in ms.items()},
            "adam_GBs": round(ADAM_BYTES * n / ms["adam"] / 1e6, 1),
            "ours_over_torch": round(ms["torch"] / ms["ours"], 2),
            "ceiling": round(ms["torch"] / (ms["products"] + ms["adam"]), 2)}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--configs", default="base-short", help=f"comma list of {sorted(CONFIGS)}")
    parser.add_argument("--repeats", type=int, default=4, help="alternations (each runs both batches)")
    parser.add_argument("--quick", action="store_true", help="a toy config, one alternation: a smoke run")
    parser.add_argument("--json", help="append one JSON row per config to this file")
    args = parser.parse_args(argv)
    configs = [QUICK] if args.quick else pick_configs(parser, args.configs)
    _, env = start(parser, 1)
    copy = streaming_copy_gbs(16 if args.quick else 256)
    print(f"streaming copy, 1 thread: {copy:.1f} GB/s")
    for cfg in configs:
        row = ceiling(cfg, 1 if args.quick else args.repeats)
        append_json(args.json, {**env, **row, "copy_GBs": round(copy, 1)})
        print(f"{row['config']}: PyTorch {row['torch_ms']} ms, ours {row['ours_ms']} ms ({row['ours_over_torch']}x); "
              f"inside ours the products {row['products_ms']} ms; Adam alone {row['adam_ms']} ms "
              f"({row['parameters_M']}M parameters, {row['adam_GBs']} GB/s); ceiling with every other op free: "
              f"{row['ceiling']}x")


if __name__ == "__main__":
    main()
