"""The padding skip of a step that is not compiled: what rule skip_padding does inside a compiled step
(tinygrad_lite/compiler/rules/skip_padding.py), for the translator's steps that run op by op: training
with --no-compile, and the loss on dev, which runs eagerly under no_grad. The position-wise layers run on
a right-padded batch's real tokens only (transformer/fast/skip_padding.py, forward_real_tokens): the same
loss as the padded forward, each <pad> row's share of the work saved. Its dropout draws for the rows it
computes, so its masks are not the padded step's (the compiled step's are)."""
from __future__ import annotations

import numpy as np

from tinygrad_lite.nn.functional import cross_entropy

from ..fast.skip_padding import forward_real_tokens, rows_to_skip_padding


def on_real_rows(teacher_forcing_loss):
    """teacher_forcing_loss(model, src, tgt_in, tgt_out, label_smoothing) as the same loss from the real
    tokens' rows where the batch is right-padded (rows_to_skip_padding; the padded forward otherwise)."""
    def loss(model, src, tgt_in, tgt_out, label_smoothing: float):
        pad = model.config.pad_id
        rows = rows_to_skip_padding(src, tgt_in, tgt_out, pad)
        if rows is None:
            return teacher_forcing_loss(model, src, tgt_in, tgt_out, label_smoothing)
        logits, positions = forward_real_tokens(model, src, tgt_in, rows)   # (n, V)
        return cross_entropy(logits, np.take(tgt_out, positions), ignore_index=pad, label_smoothing=label_smoothing)
    return loss
