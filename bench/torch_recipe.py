"""The PyTorch translation recipe of issue 15, run here, with its dev loss measured two ways.

    python bench/torch_recipe.py --data train.txt --dev dev.txt --steps 1600           # torch, the recipe
    python bench/torch_recipe.py --data train.txt --dev dev.txt --steps 1600 --engine ours
    python bench/torch_recipe.py --quick                                               # seconds (CI smoke)

The recipe, as issue 15 describes it: `torch.nn.Transformer` (post-LN, its closing LayerNorms),
the target embedding tied to the generator, vocabularies of min_freq 2, batches of 64 random
sentences, Adam (0.9, 0.98, 1e-9) on the Noam schedule, dropout 0.1, no clipping, plain
cross-entropy, and the PyTorch tutorial's `xavier_uniform_` on every parameter of 2+ dimensions.
Tokenizers and vocabularies are ours (`transformer.train`), so only the recipe differs from
`python -m transformer train`. `--engine ours` trains our Transformer through the same loop, on
the same batches, from the same weights.

Dev loss, two ways, at every `--eval-every` steps:
- **per token**: the summed NLL over all dev target tokens divided by their count
  (`transformer.train.evaluate_loss`, what our training log prints);
- **tutorial**: the PyTorch translation tutorial's `evaluate`: the mean over dev batches of
  64 pairs, in file order, of each batch's mean loss. Every batch weighs the same however many
  tokens it has, and Tatoeba files are sorted by English length, so the short sentences' batches
  (easier per token) count more than their tokens.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from side_by_side import (  # noqa: E402  (bench/ sits next to this file)
    add_data_args,
    add_model_args,
    add_run_args,
    append_json,
    build_models,
    needs_torch,
    noam,
    ours_engine,
    torch_engine,
    use_quick,
)

SENTENCES = 64


def sentence_batches(src, tgt, steps: int, seed: int):
    """Batches of 64 pairs, a fresh random order each epoch (a DataLoader with shuffle=True)."""
    from transformer.data import Batch, pad_batch

    batches, epoch = [], 0
    while len(batches) < steps:
        order = np.random.default_rng(seed * 100003 + epoch).permutation(len(src))
        batches += [Batch(pad_batch([src[i] for i in order[k:k + SENTENCES]]),
                          pad_batch([tgt[i] for i in order[k:k + SENTENCES]]))
                    for k in range(0, len(order), SENTENCES)]
        epoch += 1
    return batches[:steps]


def dev_losses(batch_loss, src, tgt) -> tuple[float, float]:
    """(per token, tutorial) dev NLL; batch_loss(Batch) -> (mean loss over its tokens, tokens)."""
    from transformer.data import Batch, pad_batch

    means, counts = [], []
    for k in range(0, len(src), SENTENCES):
        mean, n = batch_loss(Batch(pad_batch(src[k:k + SENTENCES]), pad_batch(tgt[k:k + SENTENCES])))
        means.append(mean)
        counts.append(n)
    means, counts = np.array(means), np.array(counts)
    return float(means @ counts / counts.sum()), float(means.mean())


def xavier_uniform_(model, seed: int) -> None:
    """The tutorial's init: xavier_uniform_ on every parameter of 2+ dimensions."""
    rng = np.random.default_rng(seed)
    for p in model.parameters():
        if p.data.ndim > 1:
            bound = np.sqrt(6.0 / (p.data.shape[0] + p.data.shape[1]))
            p.data[...] = rng.uniform(-bound, bound, p.data.shape)


def build(torch, n_src: int, n_tgt: int, args):
    """side_by_side's twin models (tied, float32: the recipe), xavier_uniform_ first if asked."""
    init = (lambda ours: xavier_uniform_(ours, args.seed)) if args.init == "xavier" else None
    return build_models(torch, n_src, n_tgt, args, args.seed, init=init)


def run(args) -> dict:
    from transformer.train import TrainConfig, build_dataset

    torch = needs_torch(args.threads, "torch_recipe: this benchmark needs torch (the reference weights come from it)")
    data = build_dataset(TrainConfig(data=args.data, dev=args.dev, min_freq=2, seed=args.seed))
    (src, tgt), (dev_src, dev_tgt) = data.ids["train"], data.ids["dev"]
    batches = sentence_batches(src, tgt, args.steps, args.seed)
    ours, theirs = build(torch, len(data.src_vocab), len(data.tgt_vocab), args)
    torch.manual_seed(args.seed)
    engine = torch_engine(torch, theirs, args.clip) if args.engine == "torch" else ours_engine(ours, args.clip)
    train_step, eval_loss = engine
    print(f"{args.engine}: {len(src)} train / {len(dev_src)} dev pairs, vocab zh {len(data.src_vocab)} / "
          f"en {len(data.tgt_vocab)}, batches of {SENTENCES} sentences, init {args.init}", flush=True)
    print(f"{'step':>6} {'train loss':>10} {'dev per token':>14} {'dev tutorial':>13} {'seconds':>8}", flush=True)
    rows, recent, t0 = [], [], time.perf_counter()
    schedule = noam(args.d_model, args.warmup)
    for step, batch in enumerate(batches, start=1):
        recent.append(train_step(batch, schedule(step)))
        if step % args.eval_every == 0 or step == len(batches):
            per_token, tutorial = dev_losses(eval_loss, dev_src, dev_tgt)
            rows.append({"step": step, "train_loss": float(np.mean(recent)), "dev_per_token": per_token,
                         "dev_tutorial": tutorial, "seconds": time.perf_counter() - t0})
            recent = []
            print(f"{step:>6} {rows[-1]['train_loss']:>10.3f} {per_token:>14.3f} {tutorial:>13.3f} "
                  f"{rows[-1]['seconds']:>8.0f}", flush=True)
    return {"engine": args.engine, "init": args.init, "seed": args.seed, "clip": args.clip, "curve": rows}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_data_args(p, "built-in corpus, tiny model, 12 steps (seconds)")
    p.add_argument("--engine", choices=["torch", "ours"], default="torch")
    p.add_argument("--steps", type=int, default=1600)
    p.add_argument("--eval-every", type=int, default=400)
    add_model_args(p)
    p.add_argument("--dropout", type=float, default=0.1)
    p.add_argument("--warmup", type=int, default=1000)
    p.add_argument("--clip", type=float, default=0.0, help="gradient-norm clipping (0: none, the recipe)")
    p.add_argument("--init", choices=["xavier", "ours"], default="xavier",
                   help="xavier_uniform_ on 2+-dim parameters (the tutorial) or our constructors' init")
    add_run_args(p, "append the result (the whole curve) here")
    p.set_defaults(tie_embeddings=True, float64=False)  # the recipe's, not flags: build_models reads them
    args = p.parse_args(argv)
    if args.quick:
        use_quick(args, steps=12, eval_every=6, warmup=4)
    append_json(args.json, run(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
