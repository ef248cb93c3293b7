"""Position-wise feed-forward network (paper §3.3): FFN(x) = max(0, x·W1 + b1)·W2 + b2."""
from __future__ import annotations

import numpy as np

from tinygrad_lite import Tensor
from tinygrad_lite.nn import Dropout, Linear, Module


class PositionwiseFeedForward(Module):
    """d_model -> d_ff -> d_model with ReLU, applied to each position separately and
    identically. At the base config (512 -> 2048 -> 512) it holds about 2/3 of an
    encoder layer's parameters."""

    def __init__(self, d_model: int, d_ff: int, dropout: float = 0.1, dtype=np.float32):
        super().__init__()
        self.w_1 = Linear(d_model, d_ff, dtype=dtype)
        self.w_2 = Linear(d_ff, d_model, dtype=dtype)
        self.dropout = Dropout(dropout)

    def forward(self, x: Tensor) -> Tensor:
        return self.w_2(self.dropout(self.w_1(x).relu()))  # (B, T, d_ff) -> (B, T, d_model)
