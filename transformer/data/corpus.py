"""The built-in Chinese→English corpus: a small, exact, deterministic toy language.

The toy translator needs data whose right answer is unambiguous, so this module generates
it from the word table in :mod:`transformer.data.lexicon` and a few sentence templates
(one small function each). Every Chinese sentence has exactly one English translation, so
exact-match accuracy is a meaningful score; and the templates make word order differ
between the languages, so the model must reorder, not copy (the article's point about
attention learning alignments).

Normal form
    Chinese: characters with no spaces, ending in full-width 。 or ？.
    English: lower case, tokens separated by single spaces, the final . or ? a separate
    token: 这是一个苹果。 → ``this is an apple .``

Grammar
    The word orders, tense, negation, questions, agreement, noun phrases and adjectives of
    :mod:`transformer.data.grammar`. Sentences longer than :data:`MAX_ZH_CHARS` characters
    or :data:`MAX_EN_TOKENS` English tokens are left out.

Splits
    ``novel`` holds every sentence that uses a held-out adjective–noun or verb–object
    combination (:data:`HELD_OUT_ADJ_NOUN`, :data:`HELD_OUT_VERB_OBJECT`); such sentences
    never appear in train/dev/test, while each of their words does appear in train in other
    combinations, so ``novel`` measures compositional generalisation. ``dev`` and ``test``
    are drawn at random from the rest and never share a Chinese sentence with ``train``.

Everything is driven by :class:`random.Random` with fixed seeds and ordered tuples, so the
output does not depend on ``PYTHONHASHSEED``.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from functools import lru_cache

from .grammar import Sentence, generate_sentences

MAX_ZH_CHARS = 16
MAX_EN_TOKENS = 14

#: (adjective key, noun) pairs that appear only in the ``novel`` split.
HELD_OUT_ADJ_NOUN: tuple[tuple[str, str], ...] = (
    ("绿色", "苹果"), ("小", "狗"), ("新", "自行车"), ("贵", "手机"), ("热", "牛奶"),
)
#: (verb, noun) pairs that appear only in the ``novel`` split.
HELD_OUT_VERB_OBJECT: tuple[tuple[str, str], ...] = (
    ("喝", "果汁"), ("吃", "香蕉"), ("喂", "马"), ("看", "杂志"), ("洗", "车"),
)

SPLIT_NAMES = ("train", "dev", "test", "novel")

_HELD_OUT = frozenset(
    [("adj",) + combo for combo in HELD_OUT_ADJ_NOUN]
    + [("verb",) + combo for combo in HELD_OUT_VERB_OBJECT]
)


@lru_cache(maxsize=1)
def _language() -> tuple[Sentence, ...]:
    """All sentences, deduplicated by Chinese; checks that zh → en is a function."""
    by_zh: dict[str, Sentence] = {}
    for sentence in generate_sentences():
        if len(sentence.zh) > MAX_ZH_CHARS or sentence.en.count(" ") + 1 > MAX_EN_TOKENS:
            continue
        seen = by_zh.get(sentence.zh)
        if seen is not None and seen.en != sentence.en:
            raise RuntimeError(
                f"builtin corpus: {sentence.zh!r} has two translations "
                f"{seen.en!r} and {sentence.en!r}; the grammar must be a function")
        by_zh.setdefault(sentence.zh, sentence)
    return tuple(by_zh.values())


def iter_all_pairs() -> Iterator[tuple[str, str]]:
    """Every (Chinese, English) pair of the toy language, in a fixed order."""
    for sentence in _language():
        yield sentence.zh, sentence.en


def _uses_held_out(combos) -> bool:
    return any(combo in _HELD_OUT for combo in combos)


def builtin_corpus(seed: int = 0, dev_size: int = 800, test_size: int = 800,
                   novel_size: int = 800) -> dict[str, list[tuple[str, str]]]:
    """The toy language split into train/dev/test/novel (see the module docstring).

    ``seed`` chooses which sentences go to dev/test/novel; the language itself is fixed.
    """
    for name, size in (("dev_size", dev_size), ("test_size", test_size),
                       ("novel_size", novel_size)):
        if not isinstance(size, int) or size < 0:
            raise ValueError(f"builtin_corpus: {name} must be an int >= 0, got {size!r}")
    sentences = _language()
    held_out = [s for s in sentences if _uses_held_out(s.combos)]
    seen = [s for s in sentences if not _uses_held_out(s.combos)]
    if dev_size + test_size >= len(seen):
        raise ValueError(
            f"builtin_corpus: dev_size + test_size = {dev_size + test_size} leaves no "
            f"training data; the language has {len(seen)} sentences outside novel")
    rng = random.Random(seed)
    rng.shuffle(seen)
    novel = rng.sample(held_out, min(novel_size, len(held_out)))
    parts = {
        "train": seen[dev_size + test_size:],
        "dev": seen[:dev_size],
        "test": seen[dev_size:dev_size + test_size],
        "novel": novel,
    }
    return {name: [(s.zh, s.en) for s in parts[name]] for name in SPLIT_NAMES}
