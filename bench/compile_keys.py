"""How many captures a compiled translator run makes: its batches' shapes, and the captures of the one plan
family they form.

    python bench/compile_keys.py --epochs 1 10                     # the built-in corpus
    D=../shared/data/tatoeba-cmn-eng
    python bench/compile_keys.py --data $D/train.txt --dev $D/dev.txt --epochs 1 8   # the real-data recipe

Counts only, no training: the batches `train` makes (its own argument parsing, so the real-data recipe
applies under --data), each epoch's shuffle, widened as the trainer widens them (train_data.widened).

The trainer's step is the plain padded forward, compiled with any_shape (tinygrad_lite/compiler/shapes.py):
its program depends on a batch's shape only through three constants that grow with it, each a leading
slice of the longer one (the positional table's S and T rows, the causal mask (T, T)). A batch is captured
when the family's plan does not serve it: a dim it has not seen vary, or a length past the largest
captured, or bound dims that disagree (the table's rows may follow S or T+1 until two captures tell them
apart). `captures` replays that rule on the batches' dims; a run's summary line reports its own count.
"""
from __future__ import annotations

import argparse


def batches_of(argv: list, epochs: int) -> list:
    """The widened batches of the first `epochs` epochs of `python -m transformer train ARGV`."""
    from transformer.__main__ import build_parser, train_config
    from transformer.train_data import build_dataset, epoch_batches
    cfg = train_config(build_parser().parse_args(["train", *argv]))
    data = build_dataset(cfg)
    return [b for epoch in range(epochs) for b in epoch_batches(data, cfg, epoch)]


def lengths(dims: tuple) -> dict:
    """The growing constants' lengths in a batch of dims (B, S, B, T + 1)."""
    return {"source table": dims[1], "target table": dims[3] - 1, "causal mask": dims[3] - 1}


def captures(keys: list) -> int:
    """The captures shapes.SharedPlans makes of a family whose signatures have these dims."""
    reference, bound, largest, varied, count = None, {}, {}, set(), 0

    def served(dims) -> bool:
        bound_dims = {j for pairs in bound.values() for j, _ in pairs}
        if any(d != r and j not in varied | bound_dims for j, (d, r) in enumerate(zip(dims, reference))):
            return False
        return all(len({dims[j] - o for j, o in pairs}) == 1 and dims[min(pairs)[0]] - min(pairs)[1] <= largest[name]
                   for name, pairs in bound.items())

    for dims in keys:
        if reference is not None and served(dims):
            continue
        count += 1
        if reference is None:
            reference, largest = dims, lengths(dims)
            continue
        new, old = lengths(dims), lengths(reference)
        for name, length in new.items():
            if name in bound:
                bound[name] = {(j, o) for j, o in bound[name] if dims[j] - o == length}
            elif length != old[name]:
                bound[name] = {(j, r - old[name]) for j, (r, d) in enumerate(zip(reference, dims))
                               if r - old[name] == d - length}
            largest[name] = max(largest[name], length)
        varied |= {j for j, (d, r) in enumerate(zip(dims, reference)) if d != r}
    return count


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, nargs="+", default=[1, 10], help="epoch counts to report")
    args, rest = parser.parse_known_args()
    print("epochs  batches  shapes  captures")
    for epochs in args.epochs:
        batches = batches_of(rest, epochs)
        keys = [(*b.src.shape, *b.tgt.shape) for b in batches]
        print(f"{epochs:>6}  {len(batches):>7}  {len(set(keys)):>6}  {captures(keys):>8}")


if __name__ == "__main__":
    main()
