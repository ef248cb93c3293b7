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

from tinygrad_lite import Tensor, is_grad_enabled
from tinygrad_lite.nn import Dropout, Linear, Module
from tinygrad_lite.nn import functional as F


def _check_mask(mask, scores_shape: tuple):
    if mask is None:
        return None
    m = mask.data if isinstance(mask, Tensor) else np.asarray(mask)
    if m.dtype != np.bool_:
        raise TypeError(f"attention: mask must be bool (True = may attend), got dtype {m.dtype}")
    fits = m.ndim <= len(scores_shape)
    for n, s in zip(m.shape[::-1], scores_shape[::-1]):  # a loop: this runs on every decoding step
        fits = fits and (n == 1 or n == s)
    if not fits:
        raise ValueError(f"attention: mask of shape {m.shape} cannot broadcast to the scores' shape "
                         f"(B, h, T_q, T_k) = {tuple(scores_shape)}")
    return m


def _append_to_cache(cache: dict, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
    """The cached keys/values followed by the new ones, along T (dim 1).

    Without autograd the arrays grow inside a buffer with spare room (doubling when full), so a
    decoding step copies only its new token instead of the whole prefix; cache["k"] is then a
    view of the buffer's filled part. If someone replaced cache["k"] (beam search reorders the
    batch), the buffer is rebuilt from it. With autograd, Tensor.cat keeps the graph.
    """
    old_k, old_v = cache["k"], cache["v"]
    if is_grad_enabled() and (k.requires_grad or v.requires_grad or old_k.requires_grad or old_v.requires_grad):
        return Tensor.cat([old_k, k], dim=1), Tensor.cat([old_v, v], dim=1)
    start, new = old_k.shape[1], k.shape[1]
    grown = []
    for name, old, fresh in (("k", old_k, k), ("v", old_v, v)):
        buffer = cache.get(f"_{name}_buffer")
        if (buffer is None or old.data.base is not buffer or buffer.shape[1] < start + new
                or buffer.shape[0] != old.shape[0] or buffer.dtype != fresh.dtype):
            capacity = max(2 * (start + new), 16)
            buffer = np.empty((old.shape[0], capacity) + old.shape[2:], dtype=fresh.dtype)
            buffer[:, :start] = old.data
            cache[f"_{name}_buffer"] = buffer
        buffer[:, start:start + new] = fresh.data
        grown.append(Tensor(buffer[:, :start + new]))
    return grown[0], grown[1]


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

    `fused` (class attribute, default True): run the h heads as one fused op. Set it to False
    to run `scaled_dot_product_attention` on split heads instead, so that graph pictures show
    Q·Kᵀ, the softmax and ·V as separate nodes (same numbers, slower).
    """

    fused = True

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
        Cached K, V are the projections, (B, T_k, d_model).

        All h heads run as one fused op (`tinygrad_lite.nn.functional.fused_attention`) on the
        projections as they come, (B, T, h·d_k), with no split-heads copies;
        `scaled_dot_product_attention` above is the same computation written as separate ops.
        """
        B, T_q = query.shape[0], query.shape[1]
        q = self.w_q(query)                                              # (B, T_q, h·d_k)
        if cache is not None and static_kv and "k" in cache:
            k, v = cache["k"], cache["v"]
        else:
            k, v = self.w_k(key), self.w_v(value)                        # (B, T_k, h·d_k)
            if cache is not None:
                if not static_kv and "k" in cache:
                    k, v = _append_to_cache(cache, k, v)
                cache["k"], cache["v"] = k, v
        m = None if mask is None else _check_mask(mask, (B, self.h, T_q, k.shape[1]))
        dropout = self.dropout
        if self.fused:
            out, weights = F.fused_attention(q, k, v, m, dropout.p, dropout.training, need_weights=True,
                                             heads=self.h)               # (B, T_q, h·d_k)
        else:
            heads, weights = scaled_dot_product_attention(self.split_heads(q), self.split_heads(k),
                                                          self.split_heads(v), m, dropout, return_weights=True)
            out, weights = self.merge_heads(heads), weights.data
        if self.keep_weights:
            self.weights = weights
        return self.w_o(out)

    def extra_repr(self) -> str:
        return f"d_model={self.d_model}, h={self.h}, d_k={self.d_k}"
