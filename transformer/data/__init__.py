"""Data for the toy translator: the built-in corpus, file loaders, tokenizers, vocab, batches.

Pure Python/NumPy; nothing here imports the model, so data can be prepared and inspected
on its own.
"""

from .batching import Batch, bucket_indices, make_batches, pad_batch, target_token_batches
from .corpus import (
    HELD_OUT_ADJ_NOUN,
    HELD_OUT_VERB_OBJECT,
    SPLIT_NAMES,
    builtin_corpus,
    iter_all_pairs,
)
from .loaders import FORMATS, LoadResult, contains_cjk, load_pairs
from .splits import split_pairs
from .tokenizers import detokenize_en, detokenize_zh, tokenize_en, tokenize_zh
from .vocab import BOS, EOS, PAD, SPECIAL_TOKENS, UNK, Vocab

__all__ = [
    "BOS", "EOS", "FORMATS", "HELD_OUT_ADJ_NOUN", "HELD_OUT_VERB_OBJECT", "PAD",
    "SPECIAL_TOKENS", "SPLIT_NAMES", "UNK", "Batch", "LoadResult", "Vocab", "bucket_indices",
    "builtin_corpus", "contains_cjk", "detokenize_en", "detokenize_zh", "iter_all_pairs",
    "load_pairs", "make_batches", "pad_batch", "split_pairs", "target_token_batches", "tokenize_en",
    "tokenize_zh",
]
