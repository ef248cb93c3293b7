"""The Transformer's training forward on a batch's real tokens only (tinygrad_lite.fast, skip_padding).

Everything but attention is position-wise (§3.3: "applied to each position separately and
identically"): the embeddings, projections, FFNs, norms and generator run on the real tokens' rows
alone, (n, d_model), so a batch padded by a quarter costs about a quarter fewer multiply-adds. The
paper's boxes (AddNorm, PositionwiseFeedForward, Linear) take those rows as they are; attention
alone needs to know where each row sits, and runs among each sentence's real tokens, read in place
by F.fused_attention's `real`. A <pad> position is never a key, so leaving it out changes nothing at
a real one: the same logits as Transformer.forward at the real tokens (tests/test_skip_padding.py),
with dropout drawn for the real rows only.

This is machinery, not the textbook: it walks the model's own modules in the order of their
forward methods (transformer/encoder.py, decoder.py, attention.py), with one attention call of
its own.
"""
from __future__ import annotations

import numpy as np

from tinygrad_lite import Tensor
from tinygrad_lite.nn import functional as F

from ..masks import target_mask


def forward_real_tokens(model, src, tgt) -> tuple[Tensor, np.ndarray]:
    """model(src, tgt)'s logits at tgt's real (non-pad) tokens: (n, tgt_vocab) for its n real
    tokens, row-major, and the (B, T) bool mask of where they sit."""
    pad = model.config.pad_id
    src_ids, src_mask = model._source(src, None)                             # (B, S), (B, 1, 1, S)
    tgt_ids = model._check_tokens("tgt", tgt, model.config.tgt_vocab)
    src_real, tgt_real = src_ids != pad, tgt_ids != pad                     # (B, S), (B, T)
    x = _positions(model.positional_encoding, model.src_embed(src_ids[src_real]), src_real)
    memory = encode(model.encoder, x, src_mask, src_real)                    # (n_src, d_model)
    y = _positions(model.positional_encoding, model.tgt_embed(tgt_ids[tgt_real]), tgt_real)
    y = decode(model.decoder, y, memory, src_mask, target_mask(tgt_ids, pad), tgt_real, src_real)
    return model.generator(y), tgt_real                                      # (n_tgt, tgt_vocab)


def encode(encoder, x: Tensor, src_mask, real: np.ndarray) -> Tensor:
    """Encoder.forward on the real rows x (n, d_model); `real` (B, S) says where they sit."""
    for layer in encoder.layers:
        attention = layer.self_attn
        x = layer.add_norm1(x, lambda y: attend(attention, y, y, src_mask, (real, real)))
        x = layer.add_norm2(x, layer.feed_forward)
    return encoder.norm(x) if encoder.norm is not None else x


def decode(decoder, y: Tensor, memory: Tensor, src_mask, tgt_mask, tgt_real, src_real) -> Tensor:
    """Decoder.forward on the real target rows y (n_tgt, d_model) and memory rows (n_src, d_model)."""
    for layer in decoder.layers:
        own, cross = layer.self_attn, layer.cross_attn
        y = layer.add_norm1(y, lambda z: attend(own, z, z, tgt_mask, (tgt_real, tgt_real)))
        y = layer.add_norm2(y, lambda z: attend(cross, z, memory, src_mask, (tgt_real, src_real)))
        y = layer.add_norm3(y, layer.feed_forward)
    return decoder.norm(y) if decoder.norm is not None else y


def attend(attention, query: Tensor, memory: Tensor, mask, real: tuple) -> Tensor:
    """MultiHeadAttention.forward on rows: query (n_q, d_model), key = value = memory (n_k, d_model),
    real = (query_real (B, T_q), key_real (B, T_k)); all h heads in one kernel."""
    q, k, v = attention.w_q(query), attention.w_k(memory), attention.w_v(memory)  # (n, h·d_k)
    out, weights = F.fused_attention(q, k, v, mask, attention.dropout.p, attention.dropout.training,
                                     need_weights=True, heads=attention.h, real=real)
    attention.remember(weights)
    return attention.w_o(out)                                                # (n_q, d_model)


def _positions(encoding, x: Tensor, real: np.ndarray) -> Tensor:
    """PositionalEncoding.forward for rows x (n, d_model) at the positions of real's True entries."""
    positions = np.nonzero(real)[1]                                          # (n,)
    pe = encoding.table(real.shape[1])[positions]                            # (n, d_model)
    return encoding.dropout(x + Tensor(pe.astype(x.dtype, copy=False)))
