"""A token ↔ id table with the four special tokens every seq2seq model needs.

``<pad>`` fills batches to a common length (and is masked out of attention and loss),
``<unk>`` stands for tokens never seen in training, ``<bos>`` starts the decoder's input
and ``<eos>`` ends every target sentence (the paper's decoder stops when it emits it).
The table is plain data (:meth:`Vocab.to_dict`) so it can travel as JSON inside a
safetensors checkpoint's metadata.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence

PAD, UNK, BOS, EOS = 0, 1, 2, 3
SPECIAL_TOKENS: tuple[str, ...] = ("<pad>", "<unk>", "<bos>", "<eos>")
_FORMAT = "tinygrad_lite.vocab/1"


class Vocab:
    """Ids 0–3 are the special tokens; the rest are ordered by frequency, then by token."""

    pad_id, unk_id, bos_id, eos_id = PAD, UNK, BOS, EOS

    def __init__(self, tokens: Sequence[str]):
        """``tokens`` lists the ordinary tokens in id order (ids start after the specials)."""
        if isinstance(tokens, str):
            raise TypeError("Vocab: expected a sequence of tokens, got a str")
        self._id_to_token: list[str] = list(SPECIAL_TOKENS)
        self._token_to_id: dict[str, int] = {tok: i for i, tok in enumerate(SPECIAL_TOKENS)}
        for token in tokens:
            if not isinstance(token, str) or not token:
                raise ValueError(f"Vocab: tokens must be non-empty str, got {token!r}")
            if token in self._token_to_id:
                raise ValueError(f"Vocab: token {token!r} appears twice (or is a special token)")
            self._token_to_id[token] = len(self._id_to_token)
            self._id_to_token.append(token)

    @classmethod
    def build(cls, token_lists: Iterable[Sequence[str]], min_freq: int = 1,
              max_size: int | None = None) -> Vocab:
        """Count tokens over sentences; keep those seen at least ``min_freq`` times.

        ``max_size`` caps the total size including the four specials.
        """
        if not isinstance(min_freq, int) or min_freq < 1:
            raise ValueError(f"Vocab.build: min_freq must be an int >= 1, got {min_freq!r}")
        too_small = isinstance(max_size, int) and max_size < len(SPECIAL_TOKENS)
        if max_size is not None and (not isinstance(max_size, int) or too_small):
            raise ValueError(f"Vocab.build: max_size must be None or an int >= "
                             f"{len(SPECIAL_TOKENS)}, got {max_size!r}")
        counts: Counter[str] = Counter()
        for tokens in token_lists:
            if isinstance(tokens, str):
                raise TypeError("Vocab.build: expected token lists, got a str "
                                "(tokenize sentences first)")
            counts.update(tok for tok in tokens if tok not in SPECIAL_TOKENS)
        ordered = sorted((tok for tok, n in counts.items() if n >= min_freq),
                         key=lambda tok: (-counts[tok], tok))
        if max_size is not None:
            ordered = ordered[: max_size - len(SPECIAL_TOKENS)]
        return cls(ordered)

    def __len__(self) -> int:
        return len(self._id_to_token)

    def __contains__(self, token: object) -> bool:
        return token in self._token_to_id

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Vocab) and self._id_to_token == other._id_to_token

    def __repr__(self) -> str:
        return f"Vocab({len(self)} tokens)"

    @property
    def tokens(self) -> list[str]:
        """All tokens in id order, specials first."""
        return list(self._id_to_token)

    def token_to_id(self, token: str) -> int:
        return self._token_to_id.get(token, UNK)

    def id_to_token(self, index: int) -> str:
        return self._id_to_token[self._check_id("Vocab.id_to_token", index)]

    def encode(self, tokens: Sequence[str], add_bos: bool = False,
               add_eos: bool = False) -> list[int]:
        """Token ids; unseen tokens become ``<unk>``."""
        if isinstance(tokens, str):
            raise TypeError("Vocab.encode: expected a sequence of tokens, got a str")
        ids = [self._token_to_id.get(tok, UNK) for tok in tokens]
        return [BOS] * add_bos + ids + [EOS] * add_eos

    def decode(self, ids: Iterable[int], strip_special: bool = True) -> list[str]:
        """Tokens for ids. With ``strip_special``, stop at the first ``<eos>`` and drop
        ``<pad>``/``<bos>`` (a decoder's output after ``<eos>`` is meaningless); ``<unk>``
        stays visible."""
        tokens = []
        for index in ids:
            index = self._check_id("Vocab.decode", index)
            if strip_special:
                if index == EOS:
                    break
                if index in (PAD, BOS):
                    continue
            tokens.append(self._id_to_token[index])
        return tokens

    def unknown_tokens(self, tokens: Iterable[str]) -> list[str]:
        """The distinct tokens this vocabulary lacks, in order of first appearance."""
        missing = dict.fromkeys(tok for tok in tokens if tok not in self._token_to_id)
        return list(missing)

    def to_dict(self) -> dict:
        """JSON-serialisable form, e.g. for safetensors metadata (``json.dumps`` it)."""
        return {"format": _FORMAT, "specials": list(SPECIAL_TOKENS),
                "tokens": self._id_to_token[len(SPECIAL_TOKENS):]}

    @classmethod
    def from_dict(cls, data: dict) -> Vocab:
        """Inverse of :meth:`to_dict`; rejects data written for other special tokens."""
        if not isinstance(data, dict):
            raise TypeError(f"Vocab.from_dict: expected a dict, got {type(data).__name__}")
        if data.get("format") != _FORMAT:
            raise ValueError(f"Vocab.from_dict: expected format {_FORMAT!r}, "
                             f"got {data.get('format')!r}")
        if list(data.get("specials", ())) != list(SPECIAL_TOKENS):
            raise ValueError(f"Vocab.from_dict: expected specials {list(SPECIAL_TOKENS)}, "
                             f"got {data.get('specials')!r}")
        tokens = data.get("tokens")
        if not isinstance(tokens, list):
            raise TypeError("Vocab.from_dict: expected a list of str under 'tokens', "
                             f"got {type(tokens).__name__}")
        return cls(tokens)

    def _check_id(self, operation: str, index) -> int:
        try:
            as_int = int(index)
        except (TypeError, ValueError):
            raise TypeError(f"{operation}: expected an integer id, got {index!r}") from None
        if as_int != index or not 0 <= as_int < len(self._id_to_token):
            raise ValueError(f"{operation}: expected an integer id in 0..{len(self) - 1}, "
                             f"got {index!r}")
        return as_int
