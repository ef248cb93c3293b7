"""The Transformer (paper Figure 1): embeddings + positional encoding, N encoder layers,
N decoder layers, and the generator (Linear, then softmax over the target vocabulary).

    memory = Encoder(PE(Embed(src)·√d_model))                       (B, S, d_model)
    logits = Generator(Decoder(PE(Embed(tgt)·√d_model), memory))     (B, T, tgt_vocab)

`TransformerConfig` holds the hyper-parameters and checks them; `Transformer(config)` builds
the model from it (as nanoGPT's `GPT(config)`), and a checkpoint stores `config.to_dict()`.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, replace

import numpy as np

from tinygrad_lite import Tensor
from tinygrad_lite.checks import head_size, positive_int, probability
from tinygrad_lite.nn import Embedding, Linear, Module
from tinygrad_lite.tensor import as_array

from .decoder import Decoder
from .encoder import Encoder
from .masks import padding_mask, target_mask
from .positional_encoding import PositionalEncoding


@dataclass
class TransformerConfig:
    """The paper's hyper-parameters (Table 3, base model by default), checked once, here."""
    src_vocab: int
    tgt_vocab: int
    d_model: int = 512
    h: int = 8
    N: int = 6
    d_ff: int = 2048
    dropout: float = 0.1
    norm_first: bool = False
    final_norm: bool = False
    tie_embeddings: bool = False
    pad_id: int = 0

    def __post_init__(self):
        for name in ("src_vocab", "tgt_vocab", "d_model", "h", "N", "d_ff"):
            setattr(self, name, positive_int("Transformer", name, getattr(self, name)))
        head_size("Transformer", self.d_model, self.h)
        self.dropout = probability("Transformer", "dropout", self.dropout, allow_one=False)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, values: dict) -> TransformerConfig:
        """The inverse of to_dict (what a checkpoint stores)."""
        return cls(**values)


class Embeddings(Module):
    """Token embedding scaled by √d_model (paper §3.4)."""

    def __init__(self, vocab: int, d_model: int, padding_idx: int | None = None, dtype=np.float32):
        super().__init__()
        self.lut = Embedding(vocab, d_model, padding_idx=padding_idx, dtype=dtype)
        self.vocab, self.d_model = vocab, d_model

    def forward(self, tokens) -> Tensor:
        return self.lut(tokens) * math.sqrt(self.d_model)               # (B, T, d_model)


class Transformer(Module):
    """model(src, tgt) -> logits (B, T, tgt_vocab), for src (B, S) and tgt (B, T) token ids.

    Build it from a config, `Transformer(TransformerConfig(src_vocab, tgt_vocab, d_model=...))`,
    or with the config's arguments directly, `Transformer(src_vocab, tgt_vocab, d_model=...)`;
    `Transformer(config, dropout=0.0)` changes some of a config's values. `dtype` (float32 by
    default, or float64) is the parameters' dtype. Without explicit masks the model builds the
    source padding mask and the target padding+causal mask from `pad_id` (True = may attend,
    see transformer.masks).
    """

    def __init__(self, *args, dtype=np.float32, **kwargs):
        super().__init__()
        given = args[0] if len(args) == 1 and isinstance(args[0], TransformerConfig) else None
        self.config = c = TransformerConfig(*args, **kwargs) if given is None else replace(given, **kwargs)
        self.src_embed = Embeddings(c.src_vocab, c.d_model, padding_idx=c.pad_id, dtype=dtype)
        self.tgt_embed = Embeddings(c.tgt_vocab, c.d_model, padding_idx=c.pad_id, dtype=dtype)
        self.positional_encoding = PositionalEncoding(c.d_model, c.dropout, dtype=dtype)
        layers = (c.N, c.d_model, c.h, c.d_ff, c.dropout, c.norm_first, c.final_norm)
        self.encoder = Encoder(*layers, dtype=dtype)
        self.decoder = Decoder(*layers, dtype=dtype)
        self.generator = Linear(c.d_model, c.tgt_vocab, dtype=dtype)
        self._init_weights()
        if c.tie_embeddings:
            self.generator.weight = self.tgt_embed.lut.weight

    def _init_weights(self):
        """Xavier-uniform for every matrix (as torch.nn.Transformer and the Annotated
        Transformer); embeddings keep N(0,1)·d_model^-0.5 so that ×√d_model gives unit scale."""
        from tinygrad_lite.random import rng
        for name, p in self.named_parameters():
            if p.ndim == 2 and "lut" not in name:
                bound = math.sqrt(6.0 / (p.shape[0] + p.shape[1]))
                p.data[...] = rng().uniform(-bound, bound, p.shape)
            elif "lut" in name:
                p.data[...] = rng().standard_normal(p.shape) * self.config.d_model ** -0.5
                if self.config.pad_id is not None and 0 <= self.config.pad_id < p.shape[0]:
                    p.data[self.config.pad_id] = 0

    # ------------------------------------------------------------ checks
    def _check_tokens(self, name: str, tokens, vocab: int) -> np.ndarray:
        ids = as_array(tokens)
        if ids.ndim != 2:
            raise ValueError(f"Transformer: {name} must be token ids of shape (B, T), got shape {ids.shape}")
        if ids.dtype.kind not in "iu":
            raise TypeError(f"Transformer: {name} must be integer token ids, got dtype {ids.dtype}")
        if ids.shape[0] == 0 or ids.shape[1] == 0:
            raise ValueError(f"Transformer: {name} is an empty sequence (shape {ids.shape}); "
                             "need at least one token per row")
        if ids.min() < 0 or ids.max() >= vocab:
            bad = ids[(ids < 0) | (ids >= vocab)]
            raise ValueError(f"Transformer: {name} has token id {int(bad[0])} outside the vocabulary "
                             f"[0, {vocab - 1}]")
        return ids

    def _source(self, src, src_mask):
        """Checked source ids and their mask: padding_mask from pad_id unless one is given."""
        ids = self._check_tokens("src", src, self.config.src_vocab)
        if src_mask is None:
            src_mask = padding_mask(ids, self.config.pad_id)                 # (B, 1, 1, S)
        return ids, src_mask

    # ------------------------------------------------------------ the three passes
    def forward(self, src, tgt, src_mask=None, tgt_mask=None) -> Tensor:
        """Figure 1 end to end: logits = decode(encode(src), tgt), (B, T, tgt_vocab)."""
        src_ids, src_mask = self._source(src, src_mask)
        return self.decode(self._encode(src_ids, src_mask), src_mask, tgt, tgt_mask)

    def encode(self, src, src_mask=None) -> Tensor:
        """src: (B, S) ids -> memory (B, S, d_model)."""
        return self._encode(*self._source(src, src_mask))

    def _encode(self, src_ids: np.ndarray, src_mask) -> Tensor:
        return self.encoder(self.positional_encoding(self.src_embed(src_ids)), src_mask)  # (B, S, d_model)

    def decode(self, memory: Tensor, src_mask, tgt, tgt_mask=None, cache: list | None = None,
               start: int = 0) -> Tensor:
        """tgt: (B, T) ids at positions start.. -> logits (B, T, tgt_vocab).

        With a `cache` (from `new_cache()`), only the new tokens are passed in, and
        earlier positions' keys/values are reused: see `transformer.decoding`.
        """
        ids = self._check_tokens("tgt", tgt, self.config.tgt_vocab)
        if tgt_mask is None and cache is None:
            tgt_mask = target_mask(ids, self.config.pad_id)                  # (B, 1, T, T)
        x = self.positional_encoding(self.tgt_embed(ids), start=start)      # (B, T, d_model)
        x = self.decoder(x, memory, src_mask, tgt_mask, cache)
        return self.generator(x)                                             # (B, T, tgt_vocab)

    def new_cache(self) -> list:
        """An empty key/value cache, one dict per decoder layer."""
        return [{} for _ in range(self.config.N)]

    def extra_repr(self) -> str:
        c = self.config
        return f"d_model={c.d_model}, h={c.h}, N={c.N}, d_ff={c.d_ff}, P_drop={c.dropout}"
