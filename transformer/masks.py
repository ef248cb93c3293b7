"""Attention masks. One convention across the package: True = may attend.

Masks broadcast to the attention scores' shape (B, h, T_q, T_k):
- a padding mask hides the keys that are <pad> tokens:  (B, 1, 1, T_k)
- a causal (subsequent) mask hides the future:          (1, 1, T, T), lower-triangular
The decoder's self-attention uses both, ANDed together (paper §3.2.3: "masking out
(setting to −∞) all values in the input of the softmax which correspond to illegal
connections"). A query row with no allowed key gives zero attention, never NaN.
"""
from __future__ import annotations

import numpy as np

from tinygrad_lite.tensor import as_array


def _ids(tokens) -> np.ndarray:
    return as_array(tokens)


def padding_mask(tokens, pad_id: int = 0) -> np.ndarray:
    """(B, T) token ids -> (B, 1, 1, T) bool, True where the key is a real token."""
    ids = _ids(tokens)
    if ids.ndim != 2:
        raise ValueError(f"padding_mask: expected token ids of shape (B, T), got shape {ids.shape}")
    return (ids != pad_id)[:, None, None, :]


def causal_mask(size: int) -> np.ndarray:
    """(1, 1, T, T) bool: position i may attend to positions j <= i."""
    return np.tril(np.ones((size, size), dtype=bool))[None, None]


def target_mask(tokens, pad_id: int = 0) -> np.ndarray:
    """The decoder self-attention mask: padding AND causal, (B, 1, T, T)."""
    return padding_mask(tokens, pad_id) & causal_mask(_ids(tokens).shape[1])
