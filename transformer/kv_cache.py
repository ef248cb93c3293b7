"""A self-attention layer's key/value cache for decoding one token at a time, shared by the translator's
decoding (transformer.decoding) and the GPT (transformer.gpt.model).

MultiHeadAttention.project_keys_values takes any dict as a cache and appends each step's keys/values
to "k", "v" by Tensor.cat; a KeyValueBuffer does the same append without copying the prefix.
"""
from __future__ import annotations

import numpy as np

from tinygrad_lite import Tensor, is_grad_enabled


class KeyValueBuffer(dict):
    """One self-attention layer's cache: "k", "v" hold the keys/values of the positions so far.

    `MultiHeadAttention` calls `extend` with each step's new keys/values. Tensor.cat would copy
    the whole prefix every step (quadratic in the length); here the arrays grow inside a buffer
    with spare room, doubling when full, so a step copies only its new token, and "k" is a view
    of the buffer's filled part (the attention kernel reads it in place). If "k" was replaced
    (beam search reorders the rows), the buffer is rebuilt from it. With autograd, Tensor.cat.
    """

    def extend(self, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        old_k, old_v = self["k"], self["v"]
        if is_grad_enabled() and (k.requires_grad or v.requires_grad or old_k.requires_grad
                                  or old_v.requires_grad):
            return Tensor.cat([old_k, k], dim=1), Tensor.cat([old_v, v], dim=1)
        return self._grow("k", old_k, k), self._grow("v", old_v, v)

    def _grow(self, name: str, old: Tensor, fresh: Tensor) -> Tensor:
        start, new = old.shape[1], fresh.shape[1]
        buffer = self.get(f"_{name}_buffer")
        if (buffer is None or old.data.base is not buffer or buffer.shape[1] < start + new
                or buffer.shape[0] != old.shape[0] or buffer.dtype != fresh.dtype):
            capacity = max(2 * (start + new), 16)
            buffer = np.empty((old.shape[0], capacity) + old.shape[2:], dtype=fresh.dtype)
            buffer[:, :start] = old.data
            self[f"_{name}_buffer"] = buffer
        buffer[:, start:start + new] = fresh.data
        return Tensor(buffer[:, :start + new])
