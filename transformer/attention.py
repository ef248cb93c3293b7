"""Scaled dot-product attention and multi-head attention (paper §3.2).

Attention(Q, K, V) = softmax(Q·Kᵀ / √d_k + mask) · V

Dividing by √d_k keeps the dot products at unit variance: for q, k with independent
mean-0, variance-1 components, q·k has variance d_k, and a softmax of such large
scores saturates to one-hot with vanishing gradients. Masks follow the package
convention (transformer.masks): True = may attend.
"""
from __future__ import annotations

import math

import numpy as np

from tinygrad_lite import Tensor
from tinygrad_lite.nn import Dropout, Linear, Module


def _check_mask(mask, scores_shape: tuple):
    if mask is None:
        return None
    m = mask.data if isinstance(mask, Tensor) else np.asarray(mask)
    if m.dtype != np.bool_:
        raise TypeError(f"attention: mask must be bool (True = may attend), got dtype {m.dtype}")
    try:
        grown = np.broadcast_shapes(m.shape, scores_shape)
    except ValueError:
        grown = None
    if grown != tuple(scores_shape):
        raise ValueError(f"attention: mask of shape {m.shape} cannot broadcast to the scores' shape "
                         f"(B, h, T_q, T_k) = {tuple(scores_shape)}")
    return m


def scaled_dot_product_attention(q: Tensor, k: Tensor, v: Tensor, mask=None, dropout=None,
                                 return_weights: bool = False):
    """q: (..., T_q, d_k), k: (..., T_k, d_k), v: (..., T_k, d_v) -> (..., T_q, d_v).

    With return_weights=True also returns the attention weights (..., T_q, T_k).
    A query row whose keys are all masked gets zero weights (no NaN).
    """
    d_k = q.shape[-1]
    if k.shape[-1] != d_k or k.shape[-2] != v.shape[-2]:
        raise ValueError(f"attention: q {q.shape}, k {k.shape}, v {v.shape} don't fit: need q and k to "
                         "share d_k, and k and v to share T_k")
    scores = q @ k.transpose(-2, -1)                                     # (..., T_q, T_k)
    m = _check_mask(mask, scores.shape)
    weights = scores.softmax(-1, scale=1.0 / math.sqrt(d_k), mask=m)     # (..., T_q, T_k)
    attended = weights if dropout is None else dropout(weights)
    out = attended @ v                                                   # (..., T_q, d_v)
    return (out, weights) if return_weights else out


class MultiHeadAttention(Module):
    """MultiHead(Q, K, V) = Concat(head_1, ..., head_h)·W^O, head_i = Attention(Q·W^Q_i, K·W^K_i, V·W^V_i).

    The h heads split d_model by feature dimension: d_k = d_v = d_model / h. The same
    module serves encoder self-attention, masked decoder self-attention, and
    cross-attention (Q from the decoder; K, V from the encoder memory).
    """

    def __init__(self, d_model: int, h: int, dropout: float = 0.1, dtype=None):
        super().__init__()
        if h <= 0 or d_model % h:
            raise ValueError(f"MultiHeadAttention: d_model ({d_model}) must be divisible by h ({h})")
        kw = {} if dtype is None else {"dtype": dtype}
        self.d_model, self.h, self.d_k = d_model, h, d_model // h
        self.w_q = Linear(d_model, d_model, **kw)
        self.w_k = Linear(d_model, d_model, **kw)
        self.w_v = Linear(d_model, d_model, **kw)
        self.w_o = Linear(d_model, d_model, **kw)
        self.dropout = Dropout(dropout)
        self.keep_weights = False
        self.weights = None  # the last attention weights (B, h, T_q, T_k) when keep_weights is set

    def split_heads(self, x: Tensor) -> Tensor:
        B, T, _ = x.shape
        return x.reshape(B, T, self.h, self.d_k).transpose(1, 2)        # (B, h, T, d_k)

    def merge_heads(self, x: Tensor) -> Tensor:
        B, _, T, _ = x.shape
        return x.transpose(1, 2).reshape(B, T, self.d_model)             # (B, T, d_model)

    def forward(self, query: Tensor, key: Tensor, value: Tensor, mask=None, cache: dict | None = None,
                static_kv: bool = False) -> Tensor:
        """query: (B, T_q, d_model); key, value: (B, T_k, d_model) -> (B, T_q, d_model).

        `cache` (incremental decoding): for self-attention (static_kv=False) the new
        keys/values are appended to the cached ones; for cross-attention
        (static_kv=True) the memory's projected K, V are computed once and reused.
        """
        q = self.split_heads(self.w_q(query))                            # (B, h, T_q, d_k)
        if cache is not None and static_kv and "k" in cache:
            k, v = cache["k"], cache["v"]
        else:
            k = self.split_heads(self.w_k(key))                          # (B, h, T_k, d_k)
            v = self.split_heads(self.w_v(value))                        # (B, h, T_k, d_k)
            if cache is not None:
                if not static_kv and "k" in cache:
                    k = Tensor.cat([cache["k"], k], dim=2)
                    v = Tensor.cat([cache["v"], v], dim=2)
                cache["k"], cache["v"] = k, v
        out, weights = scaled_dot_product_attention(q, k, v, mask, self.dropout, return_weights=True)
        if self.keep_weights:
            self.weights = weights.data
        return self.w_o(self.merge_heads(out))

    def extra_repr(self) -> str:
        return f"d_model={self.d_model}, h={self.h}, d_k={self.d_k}"
