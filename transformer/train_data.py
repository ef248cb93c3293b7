"""The translator's training data: sentence pairs from a file (or the built-in corpus) split into
train/dev/test, tokenized and id-encoded with vocabularies built on the training split, and each
epoch's shuffled batches (transformer.data)."""
from __future__ import annotations

import numpy as np

from tinygrad_lite.fast import TRICKS

from .data import PAD, Batch, Vocab, builtin_corpus, load_pairs, make_batches, split_pairs, tokenize_en, tokenize_zh
from .data.loaders import FormatNotDetected
from .train_config import TrainConfig
from .translator import TranslatorError


class Dataset:
    """Tokenized, id-encoded splits plus the vocabularies."""

    def __init__(self, splits: dict, src_vocab: Vocab, tgt_vocab: Vocab, lowercase: bool):
        self.splits, self.src_vocab, self.tgt_vocab, self.lowercase = splits, src_vocab, tgt_vocab, lowercase
        self.ids = {name: self.encode(pairs) for name, pairs in splits.items()}

    def encode(self, pairs):
        src = [self.src_vocab.encode(tokenize_zh(zh)) for zh, _ in pairs]
        tgt = [self.tgt_vocab.encode(tokenize_en(en, lowercase=self.lowercase), add_bos=True, add_eos=True)
               for _, en in pairs]
        return src, tgt

    @property
    def max_src_len(self) -> int:
        return max(len(s) for s in self.ids["train"][0])


def read_pairs(path):
    """load_pairs(path) with its malformed lines reported; a file whose layout can't be told
    apart gets an error saying what its lines must look like."""
    try:
        result = load_pairs(path)
    except FormatNotDetected:
        raise TranslatorError(f"{path}: cannot tell its columns apart: each line must be "
                              f"'Chinese<TAB>English', 'English<TAB>Chinese' or Tatoeba's "
                              f"'English<TAB>Chinese<TAB>attribution'") from None
    report_bad_lines(path, result)
    return result


def read_splits(cfg: TrainConfig) -> dict:
    """The built-in corpus' fixed split, or the user's file(s) with a deterministic split."""
    if cfg.data is None:
        return builtin_corpus()
    result = read_pairs(cfg.data)
    given = {name: read_pairs(getattr(cfg, name)).pairs for name in ("dev", "test") if getattr(cfg, name)}
    held_out = {zh for pairs in given.values() for zh, _ in pairs}
    pairs = [pair for pair in result.pairs if pair[0] not in held_out]  # dev/test never trained on
    if "dev" in given:  # the user chose dev (and maybe test): train on everything else
        return {"train": list(dict.fromkeys(pairs)), "test": [], **given}
    if not pairs:
        raise TranslatorError(f"train: every pair of {cfg.data} has its Chinese side in --test")
    splits = split_pairs(pairs, seed=cfg.seed, test_frac=0.0 if "test" in given else 0.05)
    if not splits["dev"]:
        n = len({zh for zh, _ in pairs})
        print(f"note: {cfg.data} has only {n} distinct Chinese sentence(s) after removing "
              f"duplicates, too few to hold out a dev split (5%); training without dev: no dev "
              f"loss or BLEU, and the last model is saved as the best (pass --dev FILE to evaluate)")
    return {**splits, **given}


def report_bad_lines(path, result):
    if result.bad_lines:
        shown = ", ".join(str(n) for n, _ in result.bad_lines[:10])
        more = "" if len(result.bad_lines) <= 10 else f" and {len(result.bad_lines) - 10} more"
        print(f"{path}: skipped {len(result.bad_lines)} malformed line(s): {shown}{more} "
              f"(first reason: {result.bad_lines[0][1]})")


def build_dataset(cfg: TrainConfig, vocabs: tuple | None = None) -> Dataset:
    splits = read_splits(cfg)
    if not splits.get("train"):
        raise TranslatorError("train: the training split is empty")
    if vocabs is None:
        train = splits["train"]
        src_vocab = Vocab.build((tokenize_zh(zh) for zh, _ in train), min_freq=cfg.min_freq)
        tgt_vocab = Vocab.build((tokenize_en(en, lowercase=cfg.lowercase) for _, en in train),
                                min_freq=cfg.min_freq)
    else:
        src_vocab, tgt_vocab = vocabs
    return Dataset(splits, src_vocab, tgt_vocab, cfg.lowercase)


WIDTH = 8  # a compiled step's batches, with skip_padding, are widened to a multiple of 8 columns (widened)


def epoch_batches(data: Dataset, cfg: TrainConfig, epoch: int):
    """The epoch's shuffled batches; widened for a compiled step (cfg.compile) whose rule skip_padding is on."""
    src, tgt = data.ids["train"]
    batches = make_batches(src, tgt, cfg.max_tokens, shuffle=True, seed=cfg.seed * 100003 + epoch,
                           count=cfg.batch_by, pool=cfg.bucket_pool)
    return [widened(b) for b in batches] if TRICKS.skip_padding and cfg.compile else batches


def widened(batch: Batch, multiple: int = WIDTH) -> Batch:
    """The batch with <pad> columns on the right: src to a multiple of `multiple` columns, tgt to one more
    (so that its teacher-forcing input tgt[:, :-1] is a multiple). The loss ignores <pad> targets, so the
    batch trains the same sentences, and a compiled step's rule skip_padding (the position-wise layers on the
    rows that matter only) makes the added columns cost little.
    But batches come in fewer shapes (on the real-data recipe over 8 epochs, 422 -> 275), and the lengths
    that grow a compiled plan's constants are fewer (tinygrad_lite/compiler/shapes.py; bench/compile_keys.py)."""
    def wide(ids, columns):
        out = np.full((ids.shape[0], columns), PAD, dtype=ids.dtype)
        out[:, :ids.shape[1]] = ids
        return out
    return Batch(wide(batch.src, -(-batch.src.shape[1] // multiple) * multiple),
                 wide(batch.tgt, -(-(batch.tgt.shape[1] - 1) // multiple) * multiple + 1))
