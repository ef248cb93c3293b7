"""Scaled dot-product attention and multi-head attention (paper §3.2).

Attention(Q, K, V) = softmax(Q·Kᵀ / √d_k) · V                                    (Eq. 1)

Dividing by √d_k keeps the dot products at unit variance: for q, k with independent
mean-0, variance-1 components, q·k has variance d_k, and a softmax of such large
scores saturates to one-hot with vanishing gradients. Masks follow the package
convention (transformer.masks): True = may attend.
"""
from __future__ import annotations

import math

import numpy as np

from tinygrad_lite import Tensor
from tinygrad_lite.checks import head_size
from tinygrad_lite.nn import Dropout, Linear, Module


def scaled_dot_product_attention(q: Tensor, k: Tensor, v: Tensor, mask=None, dropout=None,
                                 return_weights: bool = False):
    """Eq. 1 on q (..., T_q, d_k), k (..., T_k, d_k), v (..., T_k, d_v) -> (..., T_q, d_v).

    mask (True = may attend) broadcasts to the scores (..., T_q, T_k); a query whose keys are
    all masked gets zero weights, not NaN. return_weights=True also returns the weights.
    """
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])          # (..., T_q, T_k)
    weights = scores.softmax(-1, mask=mask)                              # masked keys get 0
    attended = weights if dropout is None else dropout(weights)
    out = attended @ v                                                   # (..., T_q, d_v)
    return (out, weights) if return_weights else out


class MultiHeadAttention(Module):
    """MultiHead(Q, K, V) = Concat(head_1, ..., head_h)·W^O, head_i = Attention(Q·W^Q_i, K·W^K_i, V·W^V_i).

    The h heads split d_model by feature dimension: d_k = d_v = d_model / h. The same
    module serves encoder self-attention, masked decoder self-attention, and
    cross-attention (Q from the decoder; K, V from the encoder memory).

    `forward` is the formula: split heads, Eq. 1, merge heads. A compiled training step runs
    these ops as one fused kernel for all h heads (tinygrad_lite/compiler/rules/attention.py).
    """

    def __init__(self, d_model: int, h: int, dropout: float = 0.1, bias: bool = True, dtype=np.float32):
        super().__init__()
        self.d_model, self.h, self.d_k = d_model, h, head_size("MultiHeadAttention", d_model, h)
        self.w_q = Linear(d_model, d_model, bias=bias, dtype=dtype)  # bias: as torch.nn.MultiheadAttention's
        self.w_k = Linear(d_model, d_model, bias=bias, dtype=dtype)
        self.w_v = Linear(d_model, d_model, bias=bias, dtype=dtype)
        self.w_o = Linear(d_model, d_model, bias=bias, dtype=dtype)
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

        `cache`: see `project_keys_values` (incremental decoding, `transformer.decoding`).
        """
        q = self.w_q(query)                                              # (B, T_q, d_model)
        k, v = self.project_keys_values(key, value, cache, static_kv)    # (B, T_k, d_model)
        q, k, v = self.split_heads(q), self.split_heads(k), self.split_heads(v)  # (B, h, T, d_k)
        heads, weights = scaled_dot_product_attention(q, k, v, mask, self.dropout, return_weights=True)
        self.remember(weights.data)                                      # (B, h, T_q, T_k)
        return self.w_o(self.merge_heads(heads))                         # (B, T_q, d_model)

    def remember(self, weights: np.ndarray) -> None:
        if self.keep_weights:
            self.weights = weights

    def project_keys_values(self, key: Tensor, value: Tensor, cache: dict | None, static_kv: bool):
        """K = key·W^K, V = value·W^V, (B, T_k, d_model).

        With a `cache` (a dict), decoding feeds one new token per step: for self-attention
        (static_kv=False) the new K, V go after the cached ones, by the cache's own `extend`
        if it has one (`transformer.kv_cache.KeyValueBuffer` grows in place), else by
        Tensor.cat; for cross-attention (static_kv=True) the memory's K, V are projected once
        and reused.
        """
        if cache is not None and static_kv and "k" in cache:
            return cache["k"], cache["v"]
        k, v = self.w_k(key), self.w_v(value)
        if cache is not None:
            if not static_kv and "k" in cache:
                extend = getattr(cache, "extend", None)
                k, v = extend(k, v) if extend is not None else \
                    (Tensor.cat([cache["k"], k], dim=1), Tensor.cat([cache["v"], v], dim=1))
            cache["k"], cache["v"] = k, v
        return k, v

    def extra_repr(self) -> str:
        return f"d_model={self.d_model}, h={self.h}, d_k={self.d_k}"
