"""The GPT's tokenizers: text <-> token ids, trained on the data, saved as JSON in a checkpoint.

    char   one token per character, the vocabulary the sorted characters of the training text
           (nanoGPT's shakespeare_char); Chinese works as it is, one character a token
    bpe    byte-level BPE (Sennrich et al. 2016; GPT-2's byte-level variant, Radford et al. 2019):
           the 256 byte values, then the most frequent adjacent pair merged, again and again, until
           the requested vocabulary size. Any text encodes, and decodes back exactly.

Which BPE and why (HuggingFace `tokenizers`, measured against sentencepiece and a BPE of our own):
docs/gpt.md, "Tokenizers: which and why". The library is imported only when a bpe tokenizer is
trained or loaded, so importing transformer.gpt stays cheap.
"""
from __future__ import annotations

import codecs
import json
from functools import cache

import numpy as np

from tinygrad_lite.checks import int_at_least, is_int, one_of

TOKENIZERS = ("char", "bpe")
BYTES = 256  # a byte-level BPE starts from one token per byte value; each merge adds one
INSTALL_HINT = "pip install 'tokenizers>=0.15' (HuggingFace's tokenizers, a dependency of tinygrad-lite)"


def _require_text(op: str, text) -> str:
    if not isinstance(text, str):
        raise TypeError(f"{op}: expected text (str), got {type(text).__name__}")
    return text


def _ids_list(op: str, ids, vocab_size: int) -> list[int]:
    """ids (a list, tuple or 1-D int array) as a list of ints, each in [0, vocab_size)."""
    array = np.asarray(ids)
    if array.ndim != 1 or (array.size and not np.issubdtype(array.dtype, np.integer)):
        raise ValueError(f"{op}: expected a 1-D sequence of int token ids, got {_describe(ids)}")
    bad = (array < 0) | (array >= vocab_size)
    if bad.any():
        raise ValueError(f"{op}: token ids must be in [0, {vocab_size}) for this vocabulary, "
                         f"got {int(array[bad][0])} at position {int(np.argmax(bad))}")
    return array.tolist()


def _describe(ids) -> str:
    array = np.asarray(ids)
    return f"{type(ids).__name__} of shape {array.shape} and dtype {array.dtype}"


class CharTokenizer:
    """One token per character: id i is the i-th of the training text's sorted characters."""

    kind = "char"

    def __init__(self, chars):
        chars = list(chars)
        if not chars or any(not isinstance(c, str) or len(c) != 1 for c in chars) or len(set(chars)) != len(chars):
            raise ValueError("CharTokenizer: expected a non-empty sequence of distinct single characters")
        self.chars = chars
        self.index = {c: i for i, c in enumerate(chars)}

    @classmethod
    def train(cls, text: str) -> CharTokenizer:
        """The vocabulary of `text`: its distinct characters, sorted (by code point)."""
        if not _require_text("CharTokenizer.train", text):
            raise ValueError("CharTokenizer.train: the training text is empty; there is no character to learn")
        return cls(sorted(set(text)))

    @property
    def vocab_size(self) -> int:
        """The number of token ids: the number of distinct characters learned."""
        return len(self.chars)

    def encode(self, text: str) -> np.ndarray:
        """The ids of `text`'s characters (int64); a character not learned is a ValueError."""
        _require_text("CharTokenizer.encode", text)
        index = self.index
        try:
            return np.fromiter((index[c] for c in text), dtype=np.int64, count=len(text))
        except KeyError:
            raise ValueError(self._unknown_message(text)) from None

    def _unknown_message(self, text: str) -> str:
        first: dict[str, int] = {}
        for position, c in enumerate(text):
            if c not in self.index and c not in first:
                first[c] = position
        shown = ", ".join(f"{c!r} (U+{ord(c):04X}) at position {p}" for c, p in list(first.items())[:5])
        more = f" and {len(first) - 5} more" if len(first) > 5 else ""
        return (f"CharTokenizer.encode: {len(first)} character(s) not in the vocabulary of {self.vocab_size} "
                f"learned from the training text: {shown}{more}. Train the char tokenizer on text that contains "
                f"them, remove them from the input, or use the bpe tokenizer, which encodes any text")

    def decode(self, ids) -> str:
        """The text of token ids: their characters, joined."""
        chars = self.chars
        return "".join(chars[i] for i in _ids_list("CharTokenizer.decode", ids, self.vocab_size))

    def decoder(self) -> CharStreamDecoder:
        """A streaming decoder: push one id at a time, get its character back."""
        return CharStreamDecoder(self)

    def to_dict(self) -> dict:
        """{"kind": "char", "chars": the vocabulary as one string}; JSON-serialisable."""
        return {"kind": "char", "chars": "".join(self.chars)}

    @classmethod
    def from_dict(cls, d: dict) -> CharTokenizer:
        """The tokenizer `to_dict` described."""
        chars = d.get("chars")
        if not isinstance(chars, str) or not chars or len(set(chars)) != len(chars):
            raise ValueError("tokenizer_from_dict: a char tokenizer's 'chars' must be a non-empty string of "
                             f"distinct characters, got {chars!r:.80}")
        return cls(chars)

    def __repr__(self) -> str:
        return f"CharTokenizer(vocab_size={self.vocab_size})"


class CharStreamDecoder:
    """Decodes a char tokenizer's ids one at a time, as sampling produces them."""

    def __init__(self, tokenizer: CharTokenizer):
        self.tokenizer = tokenizer

    def push(self, token_id) -> str:
        """The character of `token_id`."""
        return self.tokenizer.decode([token_id])

    def flush(self) -> str:
        """Nothing is ever held back: ""."""
        return ""


@cache
def byte_symbols() -> tuple[str, ...]:
    """GPT-2's printable stand-in for each byte value (bytes_to_unicode in its encoder.py): the
    printable Latin-1 bytes stand for themselves, the rest are shifted to code points 256 and up, so
    that every token of a byte-level BPE is a printable string."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    symbols, shifted = {}, 0
    for b in range(BYTES):
        if b in printable:
            symbols[b] = chr(b)
        else:
            symbols[b] = chr(BYTES + shifted)
            shifted += 1
    return tuple(symbols[b] for b in range(BYTES))


def _tokenizers_library():
    try:
        import tokenizers
    except ImportError:
        raise ImportError(f"the bpe tokenizer needs HuggingFace's tokenizers library: {INSTALL_HINT}") from None
    return tokenizers


class SubwordTokenizer:
    """Byte-level BPE: text -> UTF-8 bytes -> the learned merges (HuggingFace `tokenizers` applies
    them); decoding joins the tokens' bytes and reads them as UTF-8."""

    kind = "bpe"

    def __init__(self, vocab: dict[str, int], merges: list[tuple[str, str]]):
        self.vocab = dict(vocab)
        self.merges = [tuple(m) for m in merges]
        _check_bpe("SubwordTokenizer", self.vocab, self.merges)
        symbol_byte = {s: b for b, s in enumerate(byte_symbols())}
        by_id = sorted(self.vocab.items(), key=lambda item: item[1])
        self.token_bytes = [bytes(symbol_byte[s] for s in token) for token, _ in by_id]
        self._backend = _backend(self.vocab, self.merges)

    @classmethod
    def train(cls, text: str, vocab_size: int = 1024) -> SubwordTokenizer:
        """Learn vocab_size - 256 merges from `text` (vocab_size >= 256: the bytes come first); fewer
        if the text runs out of pairs to merge."""
        _require_text("SubwordTokenizer.train", text)
        vocab_size = int_at_least("SubwordTokenizer.train", "vocab_size", vocab_size, BYTES)
        lib = _tokenizers_library()
        trainer = lib.trainers.BpeTrainer(vocab_size=vocab_size, show_progress=False, special_tokens=[],
                                          initial_alphabet=list(byte_symbols()))
        tok = lib.Tokenizer(lib.models.BPE())
        tok.pre_tokenizer = lib.pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
        tok.train_from_iterator(text.splitlines(keepends=True) or [""], trainer)
        model = json.loads(tok.to_str())["model"]
        return cls(model["vocab"], [m.split(" ", 1) if isinstance(m, str) else m for m in model["merges"]])

    @property
    def vocab_size(self) -> int:
        """The number of token ids: 256 bytes plus the merges learned."""
        return len(self.vocab)

    def encode(self, text: str) -> np.ndarray:
        """The token ids of `text` (int64); any text encodes."""
        _require_text("SubwordTokenizer.encode", text)
        try:
            return np.asarray(self._backend.encode(text).ids, dtype=np.int64)
        except TypeError:
            surrogates = [(i, c) for i, c in enumerate(text) if "\ud800" <= c <= "\udfff"]
            if not surrogates:
                raise
            position, char = surrogates[0]
            raise ValueError(f"SubwordTokenizer.encode: the text holds {len(surrogates)} lone surrogate(s), the "
                             f"first U+{ord(char):04X} at position {position}: not characters, they have no UTF-8 "
                             "bytes (read the file with errors='replace' rather than 'surrogateescape')") from None

    def decode(self, ids) -> str:
        """The text of token ids: their bytes joined, read as UTF-8 (an invalid sequence, which a
        sampled id sequence can be, reads as U+FFFD)."""
        pieces = self.token_bytes
        return b"".join(pieces[i] for i in _ids_list("SubwordTokenizer.decode", ids, self.vocab_size)).decode(
            "utf-8", errors="replace")

    def decoder(self) -> ByteStreamDecoder:
        """A streaming decoder that never emits half a UTF-8 character."""
        return ByteStreamDecoder(self)

    def to_dict(self) -> dict:
        """{"kind": "bpe", "vocab": token -> id, "merges": [[a, b], ...]}; JSON-serialisable."""
        return {"kind": "bpe", "vocab": dict(self.vocab), "merges": [list(m) for m in self.merges]}

    @classmethod
    def from_dict(cls, d: dict) -> SubwordTokenizer:
        """The tokenizer `to_dict` described."""
        return cls(d.get("vocab"), d.get("merges"))

    def __repr__(self) -> str:
        return f"SubwordTokenizer(vocab_size={self.vocab_size})"


def _check_bpe(op: str, vocab, merges) -> None:
    """A byte-level BPE's vocabulary: token (a string of byte symbols) -> ids 0..n-1, each once,
    every byte a token; merges: pairs of tokens whose join is a token."""
    if not isinstance(vocab, dict) or not all(isinstance(t, str) and t and is_int(i) for t, i in vocab.items()):
        raise ValueError(f"{op}: 'vocab' must map token strings to int ids, got {vocab!r:.80}")
    if sorted(vocab.values()) != list(range(len(vocab))):
        raise ValueError(f"{op}: the vocabulary's ids must be 0..{len(vocab) - 1}, each once")
    symbols = set(byte_symbols())
    if not symbols <= vocab.keys() or any(set(t) - symbols for t in vocab):
        raise ValueError(f"{op}: not a byte-level vocabulary: every byte must be a token, and every token a "
                         "string of byte symbols")
    if not isinstance(merges, list) or not all(
            isinstance(m, (list, tuple)) and len(m) == 2 and all(isinstance(p, str) and p in vocab for p in m)
            and m[0] + m[1] in vocab for m in merges):
        raise ValueError(f"{op}: 'merges' must be a list of [a, b] token pairs whose join a + b is a token")


def _backend(vocab: dict[str, int], merges: list[tuple[str, str]]):
    """A HuggingFace Tokenizer applying these merges after GPT-2's byte-level split."""
    lib = _tokenizers_library()
    tok = lib.Tokenizer(lib.models.BPE(vocab, merges))
    tok.pre_tokenizer = lib.pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    return tok


class ByteStreamDecoder:
    """Decodes a byte-level BPE's ids one at a time: a character split across tokens is held back
    until its last byte arrives, so a stream of pushes never shows half a character."""

    def __init__(self, tokenizer: SubwordTokenizer):
        self.tokenizer = tokenizer
        self._utf8 = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def push(self, token_id) -> str:
        """The text that became complete with `token_id` ("" while a character is unfinished)."""
        (i,) = _ids_list("ByteStreamDecoder.push", [token_id], self.tokenizer.vocab_size)
        return self._utf8.decode(self.tokenizer.token_bytes[i])

    def flush(self) -> str:
        """The end of the stream: an unfinished character left over reads as U+FFFD."""
        return self._utf8.decode(b"", final=True)


def train_tokenizer(kind: str, text: str, vocab_size: int | None = None):
    """A tokenizer of `kind` ("char" or "bpe") trained on `text`; vocab_size is bpe's (default 1024)
    and must be None for char, whose vocabulary is the text's characters."""
    one_of("train_tokenizer", "kind", kind, TOKENIZERS)
    if kind == "char":
        if vocab_size is not None:
            raise ValueError(f"train_tokenizer: a char tokenizer's vocabulary is the text's characters; "
                             f"vocab_size must be None, got {vocab_size!r}")
        return CharTokenizer.train(text)
    return SubwordTokenizer.train(text, 1024 if vocab_size is None else vocab_size)


def tokenizer_from_dict(d):
    """The tokenizer a `to_dict()` described (read from JSON; nothing in it is executed)."""
    if not isinstance(d, dict) or "kind" not in d:
        raise ValueError(f"tokenizer_from_dict: expected a dict with a 'kind' key (from a tokenizer's to_dict()), "
                         f"got {d!r:.80}")
    kind = one_of("tokenizer_from_dict", "kind", d["kind"], TOKENIZERS)
    return (CharTokenizer if kind == "char" else SubwordTokenizer).from_dict(d)
