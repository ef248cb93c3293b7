"""§3-5 of the walkthrough, the article's Input Embedding and 自注意力机制: the sentence as a
6 × 512 matrix, softmax(QKᵀ/√d_k)·V on its 6 tokens (paper §3.2.1), and attention read as a
key-value lookup, against the article's own weights."""
from __future__ import annotations

import math

import numpy as np

import tinygrad_lite as tl
from tinygrad_lite import Tensor
from tinygrad_lite.nn import Embedding, Linear
from transformer import EncoderLayer, PositionalEncoding, scaled_dot_product_attention
from transformer.data import tokenize_zh
from transformer.walkthrough.example import D_FF, D_MODEL, SENTENCE, H, six_token_input, softmax64, toy_vocab
from transformer.walkthrough.printing import (
    FIGURE_NAMES,
    check,
    claim,
    fmt,
    heading,
    matches_printed,
    matrix_lines,
    note,
    show,
)

# The article's printed numbers, kept as printed so the comparison uses their precision.
ARTICLE_LOOKUP_SCORES = (5, -4, 3, 2, 2.5)
ARTICLE_LOOKUP_SOFTMAX = ("0.789", "0.0001", "0.1068", "0.0393", "0.0648")


# ---------------------------------------------------------------- 3. input embedding
def section_embedding(figures=None) -> dict:
    heading(3, "输入嵌入", "Input embedding", "Input Embedding")
    claim("“这是一个苹果”按字切分是 6 个 token；嵌入维度取 512 时，整句成为 6 × 512 的矩阵",
          "这是一个苹果 is 6 tokens, one per character; with 512-dimensional embeddings the sentence "
          "becomes a 6 × 512 matrix")
    tokens = tokenize_zh(SENTENCE)
    first, second = "苹果很好吃。", "他在树下捡到一个苹果。"
    vocab = toy_vocab(SENTENCE, first, second)
    ids = np.array(vocab.encode(tokens))
    tl.manual_seed(0)
    embedding = Embedding(len(vocab), D_MODEL)
    matrix = embedding(ids)
    show("tokens → ids", f"{' '.join(tokens)} → {ids.tolist()} (a toy vocabulary of {len(vocab)})")
    check("token count", len(tokens), 6, len(tokens) == 6)
    check("embedded matrix shape", tuple(matrix.shape), "6 × 512", tuple(matrix.shape) == (6, D_MODEL))
    note("论文（§3.4）还把嵌入乘以 √d_model 再加位置编码；transformer.Embeddings 就是这样做的",
         f"the paper also multiplies embeddings by √d_model = {math.sqrt(D_MODEL):.1f} before adding PE "
         "(transformer.Embeddings does)")

    claim("嵌入只是查表：同一个 token 在哪句话里都拿到同一个向量，上下文要等注意力层来加",
          "an embedding is a table lookup: a token gets the same vector in every sentence; "
          "context is added later, by attention")
    vectors = [embedding(np.array(vocab.encode(tokenize_zh(s)))).data for s in (first, second)]
    at = [tokenize_zh(s).index("苹") for s in (first, second)]
    static_difference = float(np.abs(vectors[0][at[0]] - vectors[1][at[1]]).max())
    layer = EncoderLayer(D_MODEL, H, D_FF, dropout=0.0)
    pe = PositionalEncoding(D_MODEL, dropout=0.0)
    contextual = [layer(pe(Tensor(v[None]))).data[0] for v in vectors]
    context_difference = float(np.abs(contextual[0][at[0]] - contextual[1][at[1]]).max())
    check("“苹” in 苹果很好吃 and 他在树下捡到一个苹果, embedding", f"max difference {static_difference:.1g}",
          "identical", static_difference == 0)
    check("… after PE + one self-attention layer", f"max difference {context_difference:.2f}",
          "context changes it", context_difference > 1e-2)
    return {"tokens": tokens, "ids": ids, "shape": tuple(matrix.shape),
            "static_difference": static_difference, "context_difference": context_difference}


# ---------------------------------------------------------------- 4. scaled dot-product attention
def section_attention(figures=None) -> dict:
    heading(4, "缩放点积注意力", "Scaled dot-product attention on the 6 tokens", "自注意力机制")
    claim("W^Q、W^K、W^V 三个 512 × 512 矩阵把 [6, 512] 的输入投影成 Q、K、V；QKᵀ 是 6 × 6 的分数表，"
          "每一行做 softmax 后再乘 V",
          "Attention(Q, K, V) = softmax(QKᵀ/√d_k)·V: three 512 × 512 matrices project the [6, 512] "
          "input to Q, K, V; QKᵀ is a 6 × 6 score table, softmaxed row by row")
    tokens, x = six_token_input()
    w_q, w_k, w_v = (Linear(D_MODEL, D_MODEL, bias=False) for _ in range(3))
    q, k, v = w_q(x), w_k(x), w_v(x)
    scores = q @ k.transpose(-2, -1)
    out, weights = scaled_dot_product_attention(q, k, v, return_weights=True)
    by_hand = softmax64(scores.data / math.sqrt(D_MODEL)) @ v.data.astype(np.float64)
    row_sums = weights.data.sum(-1)
    check("shapes X, W^Q, Q / K / V", f"{tuple(x.shape)}, {tuple(w_q.weight.shape)}, {tuple(q.shape)}",
          "[6,512], 512×512, [6,512]", tuple(q.shape) == tuple(k.shape) == tuple(v.shape) == (6, D_MODEL))
    check("QKᵀ shape", tuple(scores.shape), "[6,6]", tuple(scores.shape) == (6, 6))
    check("each softmax row sums to", fmt(row_sums, 6), "1", np.allclose(row_sums, 1, atol=1e-5))
    check("output shape", tuple(out.shape), "[6, 512]", tuple(out.shape) == (6, D_MODEL))
    check("module output vs softmax(QKᵀ/√d_k)·V by hand", f"max diff {np.abs(out.data - by_hand).max():.1e}",
          "the formula", np.allclose(out.data, by_hand, atol=1e-4))
    show("attention weights (row = query token, column = key token)", " ".join(tokens))
    matrix_lines(weights.data, 2, 6)
    note("文中逐行展开 QKᵀ 时，第 i 行的第一项写成了 q_i·k_i（第 2 行从 q₂·k₂ 起），是笔误："
         "(i, j) 处是 q_i·k_j，所以每一行都从 k₁ 开始",
         f"the article's row-by-row expansion of QKᵀ starts row i with q_i·k_i (row 2 with q₂·k₂), a slip: "
         f"entry (i, j) is q_i·k_j, "
         f"so every row starts with token 1's key: (QKᵀ)[2,1] = {scores.data[1, 0]:.3f} = q₂·k₁ = "
         f"{float(q.data[1] @ k.data[0]):.3f}")
    files = [] if figures is None else [
        figures.draw(FIGURE_NAMES["attention"], "plot_attention", weights.data, tokens, title=SENTENCE)]
    return {"tokens": tokens, "x_shape": tuple(x.shape), "q_shape": tuple(q.shape),
            "scores_shape": tuple(scores.shape), "weights": weights.data, "out_shape": tuple(out.shape),
            "by_hand_difference": float(np.abs(out.data - by_hand).max()), "files": files}


# ---------------------------------------------------------------- 5. the key-value lookup
def section_lookup(figures=None) -> dict:
    heading(5, "键值查询表", "The key–value lookup table", "自注意力机制 (Key-Value Map)")
    claim("查询 key_pi 对 key_1 … key_5 的打分是 5, -4, 3, 2, 2.5，经 softmax 得权重 "
          "0.789, 0.0001, 0.1068, 0.0393, 0.0648，再按权重把 5 个值加起来",
          "the query key_pi scores key_1 … key_5 as [5, -4, 3, 2, 2.5]; softmax turns these into weights "
          "[0.789, 0.0001, 0.1068, 0.0393, 0.0648] that mix the five values")
    weights = softmax64(ARTICLE_LOOKUP_SCORES)
    matches = [matches_printed(w, p) for w, p in zip(weights, ARTICLE_LOOKUP_SOFTMAX)]
    for key, (w, printed, ok) in enumerate(zip(weights, ARTICLE_LOOKUP_SOFTMAX, matches), start=1):
        check(f"key_{key} (score {ARTICLE_LOOKUP_SCORES[key - 1]:>4})", f"{w:.6f}", printed, ok)
    values = np.arange(1, 6, dtype=np.float64)
    result = float(weights @ values)
    printed_result = float(np.array([float(p) for p in ARTICLE_LOOKUP_SOFTMAX]) @ values)
    check("Q(key_pi) = Σ weight × value (values 1…5)", f"{result:.4f}",
          f"0.789*1 + … + 0.0648*5 = {printed_result:.4f}", abs(result - printed_result) < 1e-3)
    show("the article's weights add up to", f"{sum(float(p) for p in ARTICLE_LOOKUP_SOFTMAX):.4f}; key_1 is "
         f"{weights[0]:.5f}: 0.789 at the 3 decimals printed, {weights[0]:.4f} at the other rows' 4")

    a = np.array([1.0, 2.0])
    cosine = [float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b))) for b in (a, 3 * a)]
    dots = [float(a @ a), float(a @ (3 * a))]
    note("文中把这里的打分说成余弦相似度（也就是点积）：QKᵀ 是没有除以长度的点积，和余弦相似度不是一回事",
         f"QKᵀ is an unnormalised dot product, not cosine similarity: for q = [1, 2], keys k = q and 3q have "
         f"the same cosine {cosine[0]:.0f} and {cosine[1]:.0f}, but dot products {dots[0]:.0f} and {dots[1]:.0f}; "
         f"the length of a key changes its weight")
    return {"weights": weights, "matches": matches, "result": result, "printed_result": printed_result,
            "cosine": cosine, "dots": dots}
