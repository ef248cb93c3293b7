"""nanoGPT's CPU recipe run to the end, ours and the PyTorch twin side by side in one process.

    python bench/gpt_recipe.py                        # 2,000 iterations, evaluations every 250, 1 thread
    python bench/gpt_recipe.py --iters 6000 --json out.jsonl
    python bench/gpt_recipe.py --quick                # seconds: a toy model (the smoke test)
    python bench/gpt_recipe.py --minutes 10 --side torch   # `gpt train`'s defaults, 10 minutes, the twin alone

The recipe (nanoGPT's README, "I only have a macbook"): 4 layers, 4 heads, n_embd 128, block_size 64,
batch 12, dropout 0, bias False; AdamW lr 1e-3, betas (0.9, 0.99), weight decay 0.1 on the matrices,
warmup 100 iterations, cosine decay to 1e-4 at the last iteration (lr_decay_iters = max_iters),
gradient clipping at 1.0. The data: --data split 90/10 by characters, as nanoGPT's prepare.py.

Both sides start from the same weights and take the same batches (nanoGPT's get_batch, one seeded
stream) with the same learning rate (transformer.gpt.training.get_lr). They alternate in blocks of
--block iterations, the order flipping each block, so both see the same machine; the speed is the
median seconds per iteration over the blocks, ours/torch > 1 meaning we are faster. Every
--eval-interval iterations both are scored on the WHOLE validation split
(transformer.gpt.training.evaluate_split: consecutive windows, every token predicted once).

--minutes M runs one --side alone for M minutes with `python -m transformer gpt train`'s defaults
(GPTTrainConfig: model, batch, lr and its cosine ending with the budget, Muon beside AdamW; the twin's
Muon is torch_twin.SplitMuon, float32 products as ours), as that command does, then scores the whole
validation split: the PyTorch reference given the same minutes.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from gpt import DATA, build, char_ids, settings, steppers  # noqa: E402
from train_throughput import CLOCKS, append_json, markdown, median, start  # noqa: E402


class TorchSide:
    """The twin seen through the interface evaluate_split uses (config, training, eval/train, loss on
    NumPy ids), so both sides are scored by the same code."""

    def __init__(self, model, torch):
        self.model, self.torch, self.config = model, torch, model.config

    @property
    def training(self) -> bool:
        return self.model.training

    def eval(self):
        self.model.eval()

    def train(self, mode: bool = True):
        self.model.train(mode)

    def loss(self, x, y):
        with self.torch.no_grad():
            return self.model.loss(self.torch.from_numpy(np.ascontiguousarray(x)),
                                   self.torch.from_numpy(np.ascontiguousarray(y)))


def run(args, torch) -> dict:
    from dataclasses import replace

    from transformer.gpt.training import evaluate_split, get_batch, get_lr

    ids, vocab = char_ids(args.data)
    n = int(0.9 * len(ids))
    train, val = ids[:n], ids[n:]
    config, batch, recipe = settings("quick" if args.quick else "recipe", vocab)
    iters = 20 if args.quick else args.iters
    interval = 10 if args.quick else args.eval_interval
    schedule = replace(recipe, min_lr=1e-4, warmup_iters=min(100, iters // 4), lr_decay_iters=iters, max_iters=iters,
                       minutes=None)
    ours, theirs = build(config)
    sides = {"ours": ours, "torch": TorchSide(theirs, torch)}
    step = steppers(ours, theirs, torch, schedule)
    rng = np.random.default_rng(args.seed)
    seconds = {"ours": [], "torch": []}
    train_loss = {"ours": 0.0, "torch": 0.0}
    evaluations = []
    clock = CLOCKS[args.clock]
    it = 0
    while True:
        if it % interval == 0 or it == iters:
            scores = {side: evaluate_split(m, val, config.block_size, 64) for side, m in sides.items()}
            evaluations.append([it, train_loss["ours"], train_loss["torch"], scores["ours"], scores["torch"],
                                abs(scores["ours"] - scores["torch"])])
            print(f"iter {it}: val ours {scores['ours']:.4f}, torch {scores['torch']:.4f}", flush=True)
        if it == iters:
            break
        count = min(args.block, iters - it, interval - it % interval)
        block = [get_batch(train, config.block_size, batch, rng) for _ in range(count)]
        lrs = [get_lr(it + i, schedule) for i in range(count)]
        for side in (("ours", "torch") if (it // args.block) % 2 == 0 else ("torch", "ours")):
            began = clock()
            for b, lr in zip(block, lrs):
                train_loss[side] = step[side](b, lr)
            seconds[side].append((clock() - began) / count)
        it += count
    t_ours, t_torch = median(seconds["ours"]), median(seconds["torch"])
    tokens = batch * config.block_size
    return {"config": "quick" if args.quick else "nanogpt-cpu", "iters": iters, **config.to_dict(),
            "batch": batch, "it_s_ours": 1 / t_ours, "it_s_torch": 1 / t_torch, "tok_s_ours": tokens / t_ours,
            "tok_s_torch": tokens / t_torch, "ratio_ours_over_torch": t_torch / t_ours,
            "evaluations": evaluations, "max_val_difference": max(row[-1] for row in evaluations),
            "final_val_ours": evaluations[-1][3], "final_val_torch": evaluations[-1][4]}


def timed_run(args, torch) -> dict:
    """One side alone for --minutes with gpt train's defaults; the lr's cosine follows the clock."""
    import time

    import tinygrad_lite as tl
    from transformer.gpt import GPT
    from transformer.gpt.interop import to_nanogpt_state_dict, torch_gpt
    from transformer.gpt.training import GPTTrainConfig, evaluate_split, get_batch, get_lr

    ids, vocab = char_ids(args.data)
    n = int(0.9 * len(ids))
    train, val = ids[:n], ids[n:]
    cfg = GPTTrainConfig(minutes=args.minutes)
    tl.manual_seed(cfg.seed)
    ours = GPT(cfg.model_config(vocab))
    model = ours
    if args.side == "torch":
        model = torch_gpt(ours.config)
        model.load_state_dict(to_nanogpt_state_dict(ours))
    sides = (None, model) if args.side == "torch" else (ours, None)
    step = steppers(*sides, torch, cfg)[args.side]
    rng = np.random.default_rng(args.seed)
    budget, began, it = 60 * args.minutes, time.perf_counter(), 0
    while time.perf_counter() - began < budget:
        lr = get_lr(it, cfg, (time.perf_counter() - began) / budget)
        step(get_batch(train, cfg.block_size, cfg.batch_size, rng), lr)
        it += 1
    seconds = time.perf_counter() - began
    scored = TorchSide(model, torch) if args.side == "torch" else model
    return {"config": f"gpt train defaults, {args.minutes:g} min", "side": args.side, "iters": it,
            "seconds": seconds, "it_s": it / seconds, "val_loss": evaluate_split(scored, val, cfg.block_size, 64),
            "train_config": cfg.to_dict()}


def report(row: dict) -> None:
    print()
    print(markdown(["iter", "train ours", "train torch", "val ours", "val torch", "|difference|"],
                   row["evaluations"]))
    print()
    print(markdown(["config", "iters", "ours it/s", "torch it/s", "ours/torch", "final val ours", "final val torch"],
                   [[row["config"], row["iters"], row["it_s_ours"], row["it_s_torch"], row["ratio_ours_over_torch"],
                     row["final_val_ours"], row["final_val_torch"]]]))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=str(DATA), help="a text file (default: the shared tinyshakespeare)")
    parser.add_argument("--iters", type=int, default=2000, help="iterations (the cosine ends here; default 2000)")
    parser.add_argument("--eval-interval", type=int, default=250, help="score both sides every N iterations")
    parser.add_argument("--block", type=int, default=10, help="iterations per timed block (sides alternate)")
    parser.add_argument("--threads", type=int, default=1, help="threads for both sides (default 1)")
    parser.add_argument("--clock", choices=sorted(CLOCKS), default="wall",
                        help="wall time, or this process's CPU time (steadier on a shared machine; 1 thread)")
    parser.add_argument("--seed", type=int, default=1337, help="the batches' stream (nanoGPT's seed)")
    parser.add_argument("--json", help="append the result as one JSON line to this file")
    parser.add_argument("--quick", action="store_true", help="a seconds-long run on a toy model (smoke test)")
    parser.add_argument("--minutes", type=float, default=0.0,
                        help="instead: train --side alone this long with gpt train's defaults, then score it")
    parser.add_argument("--side", choices=("torch", "ours"), default="torch", help="with --minutes: which side")
    args = parser.parse_args(argv)
    if min(args.threads, args.iters, args.eval_interval, args.block) < 1:
        parser.error("--threads, --iters, --eval-interval and --block must be >= 1")
    if not Path(args.data).is_file():
        parser.error(f"--data: {args.data} is not a file")
    torch, env = start(parser, args.threads)
    from tinygrad_lite.threads import use_num_threads
    use_num_threads(args.threads, op="bench/gpt_recipe.py")
    if args.minutes:
        row = {**timed_run(args, torch), **env}
        print(f"{row['side']}: {row['iters']} iterations in {row['seconds']:.0f} s ({row['it_s']:.2f} it/s); "
              f"val loss {row['val_loss']:.4f} (the whole split)")
    else:
        row = {**run(args, torch), **env}
        report(row)
    append_json(args.json, row)


if __name__ == "__main__":
    main()
