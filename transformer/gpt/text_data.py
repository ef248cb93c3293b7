"""The GPT's training text: read from a file (or the built-in text), tokenized, split into train and
validation ids as nanoGPT splits them, and the random (x, y) batches of block_size tokens a step reads."""
from __future__ import annotations

import hashlib

import numpy as np

from .text import builtin_text, split
from .tokenizers import train_tokenizer
from .train_config import GPTTrainConfig, GPTTrainingError


def get_batch(ids: np.ndarray, block_size: int, batch_size: int, rng: np.random.Generator):
    """nanoGPT's get_batch: batch_size windows at random starts; y is x shifted by one token."""
    starts = rng.integers(0, len(ids) - block_size, size=batch_size)
    x = np.stack([ids[i:i + block_size] for i in starts])
    y = np.stack([ids[i + 1:i + 1 + block_size] for i in starts])
    return x, y


# ---------------------------------------------------------------- data
def read_text(path, what: str = "data file") -> str:
    """A UTF-8 text file's contents, or a GPTTrainingError saying why it cannot be trained on."""
    try:
        with open(path, encoding="utf-8", newline="") as f:
            text = f.read()
    except FileNotFoundError:
        raise GPTTrainingError(f"{what} {path} does not exist") from None
    except IsADirectoryError:
        raise GPTTrainingError(f"{what} {path} is a directory; expected a text file") from None
    except UnicodeDecodeError as e:
        raise GPTTrainingError(f"{what} {path} is not UTF-8 text (byte {e.start}: {e.reason})") from None
    if not text.strip():
        raise GPTTrainingError(f"{what} {path} is empty; there is nothing to learn")
    return text


def fingerprint(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class TextData:
    """The run's text, its tokenizer and the two splits as token ids.

    `tokenizer` None: one is trained on all the text read (data, and val if given), as nanoGPT's
    char vocabulary covers both splits; resuming passes the checkpoint's."""

    def __init__(self, cfg: GPTTrainConfig, tokenizer=None):
        self.text = builtin_text() if cfg.data is None else read_text(cfg.data)
        self.source = "the built-in text" if cfg.data is None else cfg.data
        if cfg.val is None:
            train_text, val_text = split(self.text, 0.9)
            self.val_source = f"the last 10% of {self.source}"
        else:
            train_text, val_text = self.text, read_text(cfg.val, "validation file")
            self.val_source = cfg.val
        self.tokenizer = tokenizer or train_tokenizer(cfg.tokenizer, self.text + ("" if cfg.val is None else
                                                                                   val_text), cfg.vocab_size)
        self.characters = {"train": len(train_text), "val": len(val_text)}
        self.ids = {"train": self.encode(train_text, "train"), "val": self.encode(val_text, "val")}
        for name, ids in self.ids.items():
            if len(ids) <= cfg.block_size:
                raise GPTTrainingError(f"the {name} split ({self.source if name == 'train' else self.val_source}) "
                                       f"has {len(ids):,} tokens, too few for block_size {cfg.block_size}: a window "
                                       f"needs {cfg.block_size + 1}; lower --block-size or give more text")

    def encode(self, text: str, name: str) -> np.ndarray:
        try:
            return self.tokenizer.encode(text)
        except ValueError as e:
            raise GPTTrainingError(f"the {name} split: {e}") from None

    def describe(self) -> dict:
        """What the checkpoint records about the data, so resume and eval can find and check it."""
        return {"source": self.source, "sha256": fingerprint(self.text), "characters": len(self.text)}
