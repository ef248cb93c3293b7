"""Add & Norm: the residual connection around each sub-layer, then LayerNorm (paper §3.1).

Post-LN, as in the paper:  LayerNorm(x + Dropout(Sublayer(x)))
Pre-LN (norm_first=True):  x + Dropout(Sublayer(LayerNorm(x)))  — trains more stably deep.
"""
from __future__ import annotations

import numpy as np

from tinygrad_lite import Tensor
from tinygrad_lite.nn import Dropout, LayerNorm, Module


class AddNorm(Module):
    """Wraps one sub-layer (attention or the FFN): (B, T, d_model) -> (B, T, d_model)."""

    def __init__(self, d_model: int, dropout: float = 0.1, norm_first: bool = False, dtype=np.float32):
        super().__init__()
        self.norm = LayerNorm(d_model, dtype=dtype)
        self.dropout = Dropout(dropout)
        self.norm_first = norm_first

    def forward(self, x: Tensor, sublayer) -> Tensor:
        if self.norm_first:
            return self.residual(x, sublayer(self.norm(x)))
        return self.norm(self.residual(x, sublayer(x)))

    def residual(self, x: Tensor, s: Tensor) -> Tensor:
        """x + Dropout(s): the residual connection around a sub-layer's output s."""
        return x + self.dropout(s)

    def extra_repr(self) -> str:
        return "pre-LN" if self.norm_first else "post-LN"
