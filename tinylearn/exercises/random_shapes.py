"""The project's own implementation on random shapes: a few seeded shapes per exercise, appended to its
hand-picked inputs smallest first, so a function tuned to the hand-picked shapes is still caught."""
from __future__ import annotations

import math

import numpy as np

COUNT = 4


def shapes(seed: int, ndims=(1, 3), sizes=(1, 5), count: int = COUNT) -> list[tuple]:
    """`count` shapes of ndims[0]..ndims[1] axes, each of sizes[0]..sizes[1], smallest first."""
    rng = np.random.default_rng(seed)
    found = [tuple(int(n) for n in rng.integers(sizes[0], sizes[1] + 1, rng.integers(ndims[0], ndims[1] + 1)))
             for _ in range(count)]
    return sorted(found, key=lambda s: (math.prod(s), len(s)))


def rng_for(seed: int) -> np.random.Generator:
    return np.random.default_rng(1000 + seed)
