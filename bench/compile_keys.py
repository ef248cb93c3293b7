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
apart). `captures` runs the compiler's own SharedPlans on stand-ins of those programs; a run's summary
line reports its own count.
"""
from __future__ import annotations

import argparse

import numpy as np


def batches_of(argv: list, epochs: int) -> list:
    """The widened batches of the first `epochs` epochs of `python -m transformer train ARGV`."""
    from transformer.__main__ import build_parser, train_config
    from transformer.train_data import build_dataset, epoch_batches
    cfg = train_config(build_parser().parse_args(["train", *argv]))
    data = build_dataset(cfg)
    return [b for epoch in range(epochs) for b in epoch_batches(data, cfg, epoch)]


class Program:
    """A stand-in for a captured plan of the translator's step at dims (B, S, B, T + 1): its program as
    tinygrad_lite/compiler/shapes.py compares it, the same source and three constants that grow with the
    batch (the positional table's S and T rows, the causal mask (T, T))."""

    source = "def replay(ARGS):\n    return c1, c2, c3\n"
    leaves, modes = [], []

    def __init__(self, constants: dict):
        self.constants = constants

    @classmethod
    def at(cls, dims: tuple):
        S, T = dims[1], dims[3] - 1
        return cls({"c1": np.zeros((S, 1)), "c2": np.zeros((T, 1)), "c3": np.zeros((1, 1, T, T), bool)})

    def holds(self) -> bool:
        return True

    def with_constants(self, source: str, constants: dict, leaves: dict):
        return Program(constants)


def captures(keys: list) -> int:
    """The captures the compiler's own shapes.SharedPlans makes of the batches with these dims: a batch is
    captured when no plan it holds serves it."""
    from tinygrad_lite.compiler.shapes import SharedPlans
    shared, count = SharedPlans(), 0
    for dims in keys:
        key = (tuple(("array", shape, "<i8") for shape in (dims[:2], dims[2:])), True, (), False)
        if shared.find(key) is None:
            count += 1
            shared.add(key, Program.at(dims))
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
