"""The decoder stack (paper §3.1, Figure 1 right): N identical layers of masked
self-attention, cross-attention over the encoder memory, and feed-forward.

    x = AddNorm(x, SelfAttention(x, x, x, causal mask))   position t sees targets ≤ t only
    x = AddNorm(x, CrossAttention(x, memory, memory))      queries from x, keys/values from the encoder
    x = AddNorm(x, FFN(x))
"""
from __future__ import annotations

import numpy as np

from tinygrad_lite import Tensor
from tinygrad_lite.nn import LayerNorm, Module, ModuleList

from .add_norm import AddNorm
from .attention import MultiHeadAttention
from .feed_forward import PositionwiseFeedForward


class DecoderLayer(Module):
    """One decoder layer: (B, T, d_model) targets and (B, S, d_model) memory -> (B, T, d_model)."""

    def __init__(self, d_model: int, h: int, d_ff: int, dropout: float = 0.1, norm_first: bool = False,
                 dtype=np.float32):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, h, dropout, dtype=dtype)
        self.add_norm1 = AddNorm(d_model, dropout, norm_first, dtype=dtype)
        self.cross_attn = MultiHeadAttention(d_model, h, dropout, dtype=dtype)
        self.add_norm2 = AddNorm(d_model, dropout, norm_first, dtype=dtype)
        self.feed_forward = PositionwiseFeedForward(d_model, d_ff, dropout, dtype=dtype)
        self.add_norm3 = AddNorm(d_model, dropout, norm_first, dtype=dtype)

    def forward(self, x: Tensor, memory: Tensor, src_mask=None, tgt_mask=None,
                cache: dict | None = None) -> Tensor:
        """x: (B, T, d_model) targets so far; memory: (B, S, d_model) from the encoder.
        `cache` holds this layer's self-attention K/V and the memory's projected K/V."""
        self_cache = None if cache is None else cache.setdefault("self", {})
        cross_cache = None if cache is None else cache.setdefault("cross", {})
        x = self.add_norm1(x, lambda y: self.self_attn(y, y, y, tgt_mask, cache=self_cache))
        x = self.add_norm2(x, lambda y: self.cross_attn(y, memory, memory, src_mask, cache=cross_cache,
                                                        static_kv=True))  # (B, T, d_model)
        return self.add_norm3(x, self.feed_forward)


class Decoder(Module):
    """N decoder layers; `final_norm` as in the Encoder. `cache`: one dict per layer
    (`Transformer.new_cache()`) for decoding one token at a time."""

    def __init__(self, N: int, d_model: int, h: int, d_ff: int, dropout: float = 0.1,
                 norm_first: bool = False, final_norm: bool = False, dtype=np.float32):
        super().__init__()
        self.layers = ModuleList([DecoderLayer(d_model, h, d_ff, dropout, norm_first, dtype=dtype)
                                  for _ in range(N)])
        self.norm = LayerNorm(d_model, dtype=dtype) if final_norm else None

    def forward(self, x: Tensor, memory: Tensor, src_mask=None, tgt_mask=None,
                cache: list | None = None) -> Tensor:
        """x: (B, T, d_model) embedded targets -> (B, T, d_model), for the generator."""
        for i, layer in enumerate(self.layers):
            x = layer(x, memory, src_mask, tgt_mask, cache=None if cache is None else cache[i])
        return self.norm(x) if self.norm is not None else x
