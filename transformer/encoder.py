"""The encoder stack (paper §3.1, Figure 1 left): N identical layers of
self-attention and feed-forward, each wrapped in Add & Norm.

    x = AddNorm(x, SelfAttention(x, x, x))      every source position attends to every other
    x = AddNorm(x, FFN(x))
"""
from __future__ import annotations

import numpy as np

from tinygrad_lite import Tensor
from tinygrad_lite.nn import LayerNorm, Module, ModuleList

from .add_norm import AddNorm
from .attention import MultiHeadAttention
from .feed_forward import PositionwiseFeedForward


class EncoderLayer(Module):
    """One encoder layer: (B, S, d_model) -> (B, S, d_model)."""

    def __init__(self, d_model: int, h: int, d_ff: int, dropout: float = 0.1, norm_first: bool = False,
                 dtype=np.float32):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, h, dropout, dtype=dtype)
        self.add_norm1 = AddNorm(d_model, dropout, norm_first, dtype=dtype)
        self.feed_forward = PositionwiseFeedForward(d_model, d_ff, dropout, dtype=dtype)
        self.add_norm2 = AddNorm(d_model, dropout, norm_first, dtype=dtype)

    def forward(self, x: Tensor, src_mask=None) -> Tensor:
        x = self.add_norm1(x, lambda y: self.self_attn(y, y, y, src_mask))  # (B, S, d_model)
        return self.add_norm2(x, self.feed_forward)


class Encoder(Module):
    """N encoder layers; `final_norm` adds the closing LayerNorm that torch.nn.Transformer
    always has (and pre-LN needs)."""

    def __init__(self, N: int, d_model: int, h: int, d_ff: int, dropout: float = 0.1,
                 norm_first: bool = False, final_norm: bool = False, dtype=np.float32):
        super().__init__()
        self.layers = ModuleList([EncoderLayer(d_model, h, d_ff, dropout, norm_first, dtype=dtype)
                                  for _ in range(N)])
        self.norm = LayerNorm(d_model, dtype=dtype) if final_norm else None

    def forward(self, x: Tensor, src_mask=None) -> Tensor:
        """x: (B, S, d_model) embedded source -> memory (B, S, d_model)."""
        for layer in self.layers:
            x = layer(x, src_mask)
        return self.norm(x) if self.norm is not None else x
