"""§12-13 of the walkthrough, the decoder's two attentions (the article's Masked Multi-Head
Attention and 交叉注意力; paper §3.2.3): the causal mask lets nothing leak from the future, and
cross-attention maps n decoder queries over m encoder keys."""
from __future__ import annotations

import numpy as np

import tinygrad_lite as tl
from tinygrad_lite import Tensor
from tinygrad_lite.nn import Linear
from transformer import MultiHeadAttention, Transformer, causal_mask, scaled_dot_product_attention
from transformer.walkthrough.example import D_MODEL, SENTENCE, TRANSLATION, H, six_tokens_then_seed
from transformer.walkthrough.printing import check, claim, fmt, heading, matrix_lines, note, show


# ---------------------------------------------------------------- 12. masked self-attention
def section_causal(figures=None) -> dict:
    heading(12, "掩码自注意力", "Masked (causal) self-attention", "Masked Multi-Head Attention")
    claim("逐行 softmax 之前，把 QKᵀ 中对角线以上（即未来位置）的分数改成 −∞",
          "before the row softmax, the scores above QKᵀ's diagonal (the future positions) become −∞")
    x = six_tokens_then_seed(0)
    w_q, w_k = Linear(D_MODEL, 64, bias=False), Linear(D_MODEL, 64, bias=False)
    scores = (w_q(x) @ w_k(x).transpose(-2, -1)).data / 8.0
    mask = causal_mask(6)[0, 0]
    masked = np.where(mask, scores, -np.inf)
    weights = Tensor(scores).softmax(-1, mask=mask).data
    show("QKᵀ/√d_k with the mask")
    matrix_lines(masked, 2, 8)
    show("after the row softmax")
    matrix_lines(weights, 2, 8)
    above = weights[~mask]
    check("weights above the diagonal", f"all exactly {above.max():.0f}", "0", np.all(above == 0))
    check("rows still sum to 1", fmt(weights.sum(-1), 4), "1", np.allclose(weights.sum(-1), 1, atol=1e-5))

    claim("所以答案不会泄露：后面的 token 对前面位置的输出没有任何作用",
          "so nothing leaks: a later token has no effect on the outputs at earlier positions")
    tl.manual_seed(0)
    model = Transformer(30, 30, d_model=32, h=4, N=2, d_ff=64, dropout=0.0)
    src, tgt = np.array([[5, 6, 7, 8, 9, 10]]), np.array([[1, 4, 9, 12, 3, 7]])
    base = model(src, tgt).data
    worst = 0.0
    moved_later = True
    for t in range(tgt.shape[1] - 1):
        changed = tgt.copy()
        changed[0, t + 1] = 29 - changed[0, t + 1]
        out = model(src, changed).data
        worst = max(worst, float(np.abs(out[0, :t + 1] - base[0, :t + 1]).max()))
        moved_later &= bool(np.abs(out[0, t + 1] - base[0, t + 1]).max() > 1e-3)
    check("change target token t+1 (t = 1…5): max change of the decoder's outputs at ≤ t",
          f"{worst:.0e} (while position t+1 itself changes)", "0", worst < 1e-5 and moved_later)
    note("文中说遮住的位置经 softmax 后只是非常接近 0：e^(−∞) = 0，权重恰好为 0",
         "after −∞ the softmax gives exactly 0 (e^−∞ = 0), not merely a tiny value")
    return {"weights": weights, "above_diagonal_max": float(above.max()), "leak": worst,
            "future_position_moves": moved_later}


# ---------------------------------------------------------------- 13. cross-attention
def section_cross(figures=None) -> dict:
    heading(13, "交叉注意力", "Cross-attention, n ≠ m", "交叉注意力")
    claim("Q 来自解码器 [n × d_model]，K、V 来自编码器 [m × d_model]；QKᵀ 是 [n × m]，乘 V 后输出回到 [n × d_model]",
          "Q comes from the decoder [n × d_model], K and V from the encoder [m × d_model]: "
          "[n×d]·[d×m] → [n×m], then ·[m×d] → [n×d]")
    english = TRANSLATION.lower().split()
    n, m = len(english), len(SENTENCE)
    rng = np.random.default_rng(0)
    decoder_x = Tensor(rng.standard_normal((n, D_MODEL)).astype(np.float32))
    memory = Tensor(rng.standard_normal((m, D_MODEL)).astype(np.float32))
    tl.manual_seed(0)
    w_q, w_k, w_v = (Linear(D_MODEL, D_MODEL, bias=False) for _ in range(3))
    q, k, v = w_q(decoder_x), w_k(memory), w_v(memory)
    out, weights = scaled_dot_product_attention(q, k, v, return_weights=True)
    check(f"n = {n} ({' '.join(english)}), m = {m} ({SENTENCE}): Q, Kᵀ", f"{tuple(q.shape)}, {tuple(k.shape[::-1])}",
          "[n×d], [d×m]", tuple(q.shape) == (n, D_MODEL) and tuple(k.shape) == (m, D_MODEL))
    check("QKᵀ → softmax weights", tuple(weights.shape), "[n×m]", tuple(weights.shape) == (n, m))
    check("weights · V", tuple(out.shape), "[n×d]", tuple(out.shape) == (n, D_MODEL))
    mha = MultiHeadAttention(D_MODEL, H, dropout=0.0)
    mha.keep_weights = True
    mh_out = mha(decoder_x.reshape(1, n, D_MODEL), memory.reshape(1, m, D_MODEL), memory.reshape(1, m, D_MODEL))
    check("multi-head: weights per head, output", f"{mha.weights.shape}, {tuple(mh_out.shape)}",
          "(B, h, n, m), (B, n, d)", mha.weights.shape == (1, H, n, m) and tuple(mh_out.shape) == (1, n, D_MODEL))
    note("文中把自注意力里的 Q、K、V 说成方阵：它们是 [T × d_model]，并非方阵；方阵是 QKᵀ（T × T）",
         "Q, K, V are [T × d_model], not square; the square matrix in self-attention is QKᵀ (T × T)")
    return {"n": n, "m": m, "q_shape": tuple(q.shape), "weights_shape": tuple(weights.shape),
            "out_shape": tuple(out.shape), "multihead_weights_shape": mha.weights.shape,
            "multihead_out_shape": tuple(mh_out.shape)}
