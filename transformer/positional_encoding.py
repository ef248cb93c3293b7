"""Sinusoidal positional encoding (paper §3.5).

PE(pos, 2i)   = sin(pos / 10000^(2i/d_model))
PE(pos, 2i+1) = cos(pos / 10000^(2i/d_model))

Each pair of dimensions is a rotation at its own frequency, so PE(pos + k) is a fixed
linear function of PE(pos) for every k; wavelengths grow geometrically from 2π to
10000·2π. The table grows on demand, so any sequence length works.
"""
from __future__ import annotations

import numpy as np

from tinygrad_lite import Tensor
from tinygrad_lite.checks import float_dtype
from tinygrad_lite.nn import Dropout, Module


def sinusoidal_table(length: int, d_model: int, dtype=np.float32) -> np.ndarray:
    """The (length, d_model) matrix of the paper's formula."""
    position = np.arange(length, dtype=np.float64)[:, None]                   # (L, 1)
    div_term = np.exp(np.arange(0, d_model, 2) * (-np.log(10000.0) / d_model))  # (ceil(d/2),)
    table = np.zeros((length, d_model))
    table[:, 0::2] = np.sin(position * div_term)
    table[:, 1::2] = np.cos(position * div_term[: d_model // 2])
    return table.astype(dtype)


class PositionalEncoding(Module):
    """Adds PE to token embeddings, then dropout (P_drop, paper §5.4)."""

    def __init__(self, d_model: int, dropout: float = 0.1, max_len: int = 256, dtype=np.float32):
        super().__init__()
        self.d_model = d_model
        self.dropout = Dropout(dropout)
        self._table = sinusoidal_table(max_len, d_model, float_dtype("PositionalEncoding", dtype))

    def table(self, length: int) -> np.ndarray:
        """The first `length` rows, doubling the cached table when it is too short."""
        if length > len(self._table):
            self._table = sinusoidal_table(max(length, 2 * len(self._table)), self.d_model,
                                           self._table.dtype)
        return self._table[:length]

    def forward(self, x: Tensor, start: int = 0) -> Tensor:
        """x: (B, T, d_model) embeddings of positions start .. start+T-1."""
        pe = self.table(start + x.shape[1])[start:]                              # (T, d_model)
        return self.dropout(x + Tensor(pe.astype(x.dtype, copy=False)))

    def extra_repr(self) -> str:
        return f"d_model={self.d_model}"
