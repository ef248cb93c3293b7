"""The Transformer's training forward on a batch's real tokens only (tinygrad_lite.fast, skip_padding).

Everything but attention is position-wise (§3.3: "applied to each position separately and
identically"): the embeddings, projections, FFNs, norms and generator run on the real tokens' rows
alone, (n, d_model), so a batch padded by a quarter costs about a quarter fewer multiply-adds. The
paper's boxes (AddNorm, PositionwiseFeedForward, Linear) take those rows as they are; attention
alone needs to know where each row sits, and runs among each sentence's real tokens, read in place
by nn.fused.fused_attention's `real`. A <pad> position is never a key, so leaving it out changes nothing at
a real one: the same logits as Transformer.forward at the real tokens (tests/test_skip_padding.py),
with dropout drawn for the rows computed (the real ones, and the <pad> rows that make up a count).

This is machinery, not the textbook: it walks the model's own modules in the order of their
forward methods (transformer/encoder.py, decoder.py, attention.py), with one attention call of
its own.
"""
from __future__ import annotations

import numpy as np

from tinygrad_lite import Tensor
from tinygrad_lite.fast import TRICKS, padding_worth_skipping
from tinygrad_lite.nn import fused

from ..masks import target_mask


def forward_real_tokens(model, src, tgt, counts: tuple | None = None) -> tuple[Tensor, np.ndarray]:
    """model(src, tgt)'s logits at tgt's real (non-pad) tokens: (n, tgt_vocab) for its n real tokens,
    row-major, and their flat positions in tgt (n,). With `counts` = (source rows, target rows), at least
    the real tokens' counts, the first <pad> positions make up the rows to those fixed counts: a
    compiled step (tinygrad_lite.compiler) then sees the same shapes for every batch of a bucket
    (`bucketed_counts`). A <pad> row's logits are extra, and the loss ignores its target (<pad>)."""
    pad = model.config.pad_id
    src_ids, src_mask = model._source(src, None)                             # (B, S), (B, 1, 1, S)
    tgt_ids = model._check_tokens("tgt", tgt, model.config.tgt_vocab)
    src_real, tgt_real = src_ids != pad, tgt_ids != pad                     # (B, S), (B, T)
    if counts is None:
        counts = (int(src_real.sum()), int(tgt_real.sum()))
    src_rows, tgt_rows = present_rows(src_real, counts[0]), present_rows(tgt_real, counts[1])  # (n_src,), (n_tgt,)
    src_present, tgt_present = _mask(src_rows, src_real.shape), _mask(tgt_rows, tgt_real.shape)
    x = _positions(model.positional_encoding, model.src_embed(np.take(src_ids, src_rows)), src_rows, src_ids.shape)
    memory = encode(model.encoder, x, src_mask, src_present)                 # (n_src, d_model)
    y = _positions(model.positional_encoding, model.tgt_embed(np.take(tgt_ids, tgt_rows)), tgt_rows, tgt_ids.shape)
    y = decode(model.decoder, y, memory, src_mask, target_mask(tgt_ids, pad), tgt_present, src_present)
    return model.generator(y), tgt_rows                                      # (n_tgt, tgt_vocab)


ROW_BUCKETS = 64  # a batch shape's row counts fall in 64 buckets: at most 1/64 of its positions extra


def rows_to_skip_padding(src, tgt_in, tgt_out, pad: int) -> tuple[int, int] | None:
    """The row counts (bucketed_counts) a training step on this batch runs forward_real_tokens with, or
    None for the padded forward: TRICKS.skip_padding's choice, made from the batch outside a compiled
    step (fast.padding_worth_skipping), so eager and compiled steps make the same rows and draw the same
    dropout masks."""
    if not (TRICKS.skip_padding and padding_worth_skipping(src, tgt_in, tgt_out, pad)):
        return None
    return bucketed_counts(src, tgt_in, pad, -(-max(src.size, tgt_in.size) // ROW_BUCKETS))


def bucketed_counts(src, tgt, pad: int, multiple: int) -> tuple[int, int]:
    """The real tokens' counts of src and tgt, each rounded up to a multiple of `multiple` (at most
    the array's size): the rows forward_real_tokens computes, so batches of one shape share a few plans."""
    def bucket(ids):
        n = int(np.count_nonzero(ids != pad))
        return min(ids.size, -(-n // multiple) * multiple)
    return bucket(np.asarray(src)), bucket(np.asarray(tgt))


def present_rows(real: np.ndarray, count: int) -> np.ndarray:
    """The flat positions of real's True entries and, to make up `count`, of its first False ones,
    sorted: (count,). Made of NumPy calls a compiled step records and replays (no boolean indexing,
    whose shape would depend on the values)."""
    if real.sum() > count:
        raise ValueError(f"forward_real_tokens: counts must cover every real token: got {count} rows for a "
                         f"batch of {real.shape} with more real tokens")
    order = np.argsort(~real.reshape(-1), kind="stable")                    # real ones first, each group in order
    return np.sort(order[:count])


def _mask(rows: np.ndarray, shape: tuple) -> np.ndarray:
    """The (B, T) bool mask that is True at the flat positions `rows`."""
    return np.bincount(rows, minlength=shape[0] * shape[1]).astype(bool).reshape(shape)


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


def _positions(encoding, x: Tensor, rows: np.ndarray, shape: tuple) -> Tensor:
    """PositionalEncoding.forward for rows x (n, d_model) at the flat positions `rows` of a (B, T) batch."""
    positions = (rows % shape[1])[:, None]                                   # (n, 1)
    pe = np.take_along_axis(encoding.table(shape[1]), positions, axis=0)    # (n, d_model)
    return encoding.dropout(x + Tensor(pe.astype(x.dtype, copy=False)))
