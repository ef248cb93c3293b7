"""The Transformer's training forward on a batch's real tokens only (tinygrad_lite.fast, skip_padding).

Everything but attention is position-wise (§3.3: "applied to each position separately and
identically"): the embeddings, projections, FFNs, norms and generator run on the real tokens' rows
alone, (n, d_model), so a batch padded by a quarter costs about a quarter fewer multiply-adds. The
paper's boxes (AddNorm, PositionwiseFeedForward, Linear) take those rows as they are; attention
alone needs to know where each row sits, and runs among each sentence's real tokens, read in place
by nn.fused.fused_attention's `real`. A <pad> position is never a key, so leaving it out changes nothing at
a real one: the same logits as Transformer.forward at the real tokens (tests/test_skip_padding.py),
with dropout drawn for the rows computed (the real ones).

This is machinery, not the textbook: it walks the model's own modules in the order of their
forward methods (transformer/encoder.py, decoder.py, attention.py), with one attention call of
its own.
"""
from __future__ import annotations

import numpy as np

from tinygrad_lite import Tensor
from tinygrad_lite.fast import TRICKS
from tinygrad_lite.nn import fused


def forward_real_tokens(model, src, tgt, rows: tuple | None = None) -> tuple[Tensor, np.ndarray]:
    """model(src, tgt)'s logits at tgt's real (non-pad) tokens: (n, tgt_vocab) for its n real tokens,
    row-major, and their flat positions in tgt (n,). `rows` = (real_rows(src), real_rows(tgt)), found
    before a compiled step (tinygrad_lite.compiler), which takes them as inputs: nothing here then
    depends on the batch's shape or its count of real tokens, so one plan serves every batch
    (compile(any_shape=True)). Without them they are found here, eagerly."""
    pad = model.config.pad_id
    src_ids, src_mask = model._source(src, None)                             # (B, S), (B, 1, 1, S)
    tgt_ids = model._check_tokens("tgt", tgt, model.config.tgt_vocab)
    src_real, tgt_real = src_ids != pad, tgt_ids != pad                     # (B, S), (B, T)
    src_rows, tgt_rows = (real_rows(src_ids, pad), real_rows(tgt_ids, pad)) if rows is None else rows
    _check_rows(src_rows, src_real)
    _check_rows(tgt_rows, tgt_real)
    src_columns, tgt_columns = _columns(src_real), _columns(tgt_real)        # (B, S), (B, T)
    x = _positions(model.positional_encoding, model.src_embed(np.take(src_ids, src_rows)), src_columns, src_rows)
    memory = encode(model.encoder, x, src_mask, src_real)                    # (n_src, d_model)
    y = _positions(model.positional_encoding, model.tgt_embed(np.take(tgt_ids, tgt_rows)), tgt_columns, tgt_rows)
    y = decode(model.decoder, y, memory, src_mask, _target_mask(tgt_real, tgt_columns), tgt_real, src_real)
    return model.generator(y), tgt_rows                                      # (n_tgt, tgt_vocab)


def rows_to_skip_padding(src, tgt_in, tgt_out, pad: int) -> tuple[np.ndarray, np.ndarray] | None:
    """The rows (real_rows of src and tgt_in) a training step on this batch runs forward_real_tokens
    with, or None for the padded forward: TRICKS.skip_padding's choice, made from the batch outside a
    compiled step, so eager and compiled steps make the same rows and draw the same dropout masks. Every
    right-padded batch takes the rows, whatever its share of <pad>, so a compiled step has one plan family
    (tinygrad_lite/fast.py, skip_padding)."""
    if not (TRICKS.skip_padding and right_padded(tgt_in, tgt_out, pad)):
        return None
    return real_rows(src, pad), real_rows(tgt_in, pad)


def right_padded(tgt_in, tgt_out, pad: int) -> bool:
    """Whether every real target follows a real input token, as in a right-padded batch: else the loss on
    the input's real rows would leave that target out."""
    return not np.not_equal(tgt_out, pad)[np.equal(tgt_in, pad)].any()


def real_rows(ids, pad: int) -> np.ndarray:
    """The flat positions of the real (non-pad) tokens of ids (B, T), in order: (n,) int64."""
    return np.flatnonzero(np.not_equal(ids, pad)).astype(np.int64, copy=False)


def _check_rows(rows, real) -> None:
    """rows must be real_rows' positions: each real, ascending (the attention checks their count)."""
    if rows.ndim != 1 or not (np.take(real.reshape(-1), rows).all() and (np.diff(rows) > 0).all()):
        raise ValueError("forward_real_tokens: rows must be the flat positions of the real tokens in order "
                         "(real_rows)")


def _columns(real) -> np.ndarray:
    """Each position's column, (B, T) int64, made from the mask itself: no constant holds T."""
    return np.cumsum(np.ones_like(real, dtype=np.int64), axis=1) - 1


def _target_mask(real, columns) -> np.ndarray:
    """masks.target_mask (padding AND causal, (B, 1, T, T)) from the real mask and the columns."""
    return real[:, None, None, :] & (columns[:, None, :, None] >= columns[:, None, None, :])


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
    out, weights = fused.fused_attention(q, k, v, mask, attention.dropout.p, attention.dropout.training,
                                         need_weights=True, heads=attention.h, real=real)
    attention.remember(weights)
    return attention.w_o(out)                                                # (n_q, d_model)


def _positions(encoding, x: Tensor, columns: np.ndarray, rows: np.ndarray) -> Tensor:
    """PositionalEncoding.forward for rows x (n, d_model) at the flat positions `rows` of a batch whose
    positions' columns are `columns` (B, T). The cached table is read whole, so no constant holds T; a
    compiled step on a batch longer than it runs eagerly (a guard), where table(T) grows it."""
    positions = np.take(columns, rows)                                       # (n,)
    encoding.table(columns.shape[1])
    table = encoding._table
    if (positions >= len(table)).any():
        raise ValueError(f"forward_real_tokens: a position past the table's {len(table)} rows")
    pe = np.take_along_axis(table, positions[:, None], axis=0)               # (n, d_model)
    return encoding.dropout(x + Tensor(pe.astype(x.dtype, copy=False)))
