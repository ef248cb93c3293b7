"""Deterministic train/dev/test split for loaded pairs when no dev/test file is given."""

from __future__ import annotations

import random


def split_pairs(pairs, dev_frac: float = 0.05, test_frac: float = 0.05,
                seed: int = 0) -> dict[str, list[tuple[str, str]]]:
    """Split (zh, en) pairs into ``train``/``dev``/``test``.

    Duplicate pairs are dropped, and all translations of one Chinese sentence go to the
    same split, so no test source sentence is ever seen in training. The result depends
    only on the set of pairs and ``seed`` — not on input order or ``PYTHONHASHSEED``.
    """
    for name, frac in (("dev_frac", dev_frac), ("test_frac", test_frac)):
        if not isinstance(frac, (int, float)) or not 0.0 <= frac < 1.0:
            raise ValueError(f"split_pairs: {name} must be a number in [0, 1), got {frac!r}")
    if dev_frac + test_frac >= 1.0:
        raise ValueError(f"split_pairs: dev_frac + test_frac must be < 1 to leave training "
                         f"data, got {dev_frac} + {test_frac}")

    by_source: dict[str, list[str]] = {}
    for pair in pairs:
        if not (isinstance(pair, tuple) and len(pair) == 2
                and all(isinstance(side, str) for side in pair)):
            raise TypeError(f"split_pairs: expected (zh, en) tuples of str, got {pair!r:.80}")
        targets = by_source.setdefault(pair[0], [])
        if pair[1] not in targets:
            targets.append(pair[1])
    if not by_source:
        raise ValueError("split_pairs: got no pairs")

    sources = sorted(by_source)
    random.Random(seed).shuffle(sources)
    n_test = round(test_frac * len(sources))
    n_dev = round(dev_frac * len(sources))
    if n_test + n_dev >= len(sources):
        raise ValueError(f"split_pairs: {len(sources)} distinct source sentences are too few "
                         f"for dev_frac={dev_frac}, test_frac={test_frac}")
    groups = {
        "test": sources[:n_test],
        "dev": sources[n_test:n_test + n_dev],
        "train": sources[n_test + n_dev:],
    }
    return {name: [(zh, en) for zh in groups[name] for en in sorted(by_source[zh])]
            for name in ("train", "dev", "test")}
