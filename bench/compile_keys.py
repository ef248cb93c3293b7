"""How many plans a compiled translator run needs: its batches' compile keys, before and after bucketing.

    python bench/compile_keys.py --epochs 1 10                     # the built-in corpus
    D=../shared/data/tatoeba-cmn-eng
    python bench/compile_keys.py --data $D/train.txt --dev $D/dev.txt --epochs 1 8   # the real-data recipe

Counts only, no training: the batches `train` makes (its own argument parsing, so the real-data recipe
applies under --data) and each epoch's shuffle, with TRICKS.skip_padding as the process has it.

"before": the batches as make_batches cuts them, each keyed by its shape and its row counts rounded up
to 1/64 of the batch (the keys of commit a0d8cfd's compiled step); a key is captured on its second sighting.
"after": the batches widened (train_data.widened); a batch on the padded forward is keyed by its shape,
and the batches that skip <pad> rows form one family whose plan serves every shape and row count once two
captures at different shapes wrote the same program (tinygrad_lite/compiler/shapes.py). Its captures are
counted as CompiledGradients makes them, assuming the programs agree (tests/test_compile_shapes.py and a
run's own summary line check that).
"""
from __future__ import annotations

import argparse
from collections import Counter

import numpy as np


def batches_of(argv: list, epochs: int) -> list:
    """The (unwidened) batches of the first `epochs` epochs of `python -m transformer train ARGV`."""
    from transformer.__main__ import build_parser, train_config
    from transformer.data import make_batches
    from transformer.train_data import build_dataset
    cfg = train_config(build_parser().parse_args(["train", *argv]))
    data = build_dataset(cfg)
    src, tgt = data.ids["train"]
    return [b for epoch in range(epochs) for b in make_batches(
        src, tgt, cfg.max_tokens, shuffle=True, seed=cfg.seed * 100003 + epoch, count=cfg.batch_by,
        pool=cfg.bucket_pool)]


def skips(batch) -> bool:
    from transformer.data import PAD
    from transformer.fast.skip_padding import rows_to_skip_padding
    return rows_to_skip_padding(batch.src, batch.tgt[:, :-1], batch.tgt[:, 1:], PAD) is not None


def before(batches: list) -> dict:
    """Keys as shape and row counts rounded up to 1/64 of the batch's positions."""
    from transformer.data import PAD
    keys = Counter()
    for b in batches:
        counts = None
        if skips(b):
            tgt_in = b.tgt[:, :-1]
            multiple = -(-max(b.src.size, tgt_in.size) // 64)
            counts = tuple(min(ids.size, -(-int(np.count_nonzero(ids != PAD)) // multiple) * multiple)
                           for ids in (b.src, tgt_in))
        keys[(b.src.shape, b.tgt.shape, counts)] += 1
    return {"shapes": len({k[:2] for k in keys}), "keys": len(keys), "captures": sum(n >= 2 for n in keys.values())}


def after(batches: list) -> dict:
    """Keys of the widened batches, and the captures CompiledGradients(any_shape=True) makes of them."""
    from transformer.train_data import widened
    wide = [widened(b) for b in batches]
    rows = [(*b.src.shape, *b.tgt.shape) for b in wide if skips(b)]
    padded = [(*b.src.shape, *b.tgt.shape) for b in wide if not skips(b)]
    return {"shapes": len({(b.src.shape, b.tgt.shape) for b in wide}), "padded_batches": len(padded),
            "padded_shapes": len(set(padded)), "rows_batches": len(rows),
            "captures": captures(rows, shares=True) + captures(padded, shares=False)}


def captures(keys: list, shares: bool) -> int:
    """The captures of one family's keys (their dims) under CompiledGradients' rule: a key that no plan
    serves is captured, the first time it comes. `shares`: whether its captures write one program (the
    row-skipping forward) or one per shape (the padded forward's constants)."""
    plans, reference, free = set(), None, set()

    def served(dims):
        return dims in plans or reference is not None and all(
            d == r or i in free for i, (d, r) in enumerate(zip(dims, reference)))
    count = 0
    for dims in keys:
        if served(dims):
            continue
        count += 1
        if reference is None:
            reference = dims
        elif shares:
            free.update(i for i, (d, r) in enumerate(zip(dims, reference)) if d != r)
        else:
            plans.add(dims)
    return count


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, nargs="+", default=[1, 10], help="epoch counts to report")
    args, rest = parser.parse_known_args()
    print("epochs  batches | before: shapes  keys (shape, row counts)  captures | after: shapes  "
          "padded-forward batches (shapes)  row-skipping batches (1 family)  captures")
    for epochs in args.epochs:
        batches = batches_of(rest, epochs)
        b, a = before(batches), after(batches)
        print(f"{epochs:>6}  {len(batches):>7} | {b['shapes']:>14}  {b['keys']:>24}  {b['captures']:>8} | "
              f"{a['shapes']:>13}  {a['padded_batches']:>22} ({a['padded_shapes']})  {a['rows_batches']:>31}  "
              f"{a['captures']:>8}")


if __name__ == "__main__":
    main()
