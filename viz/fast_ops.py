"""The ops that only the fast paths record, each with what it computes in the paper's terms.

A graph recorded under `tinygrad_lite.fast.plain()` (what `python -m viz` draws by default) has
none of them: it shows the formula one op at a time. With the tricks on (`python -m viz
transformer --fast`, and training) a block of that formula runs as one op; `draw_graph` labels
each such node with the formula it stands for, from this table.
"""

FAST_OPS = {
    "fused_attention": "softmax(Q·Kᵀ/√d_k + mask)·V, dropout, all h heads",  # TRICKS.fused_attention
    "add_dropout": "x + dropout(s)",                                          # TRICKS.fused_residual
    "linear_relu_dropout": "dropout(relu(x·W1ᵀ + b1))",                      # TRICKS.fused_ffn
    "unpad": "only the real tokens' rows (padding skipped)",                  # TRICKS.skip_padding
    "repad": "rows back to (B, T), zeros at the padding",                     # TRICKS.skip_padding
}
