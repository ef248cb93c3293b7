"""§9-11 of the walkthrough, the boxes inside an encoder layer (the article's 多头注意力机制,
Add & Norm, Feed Forward MLP; paper §3.2.2, §3.1, §3.3): 512 = 8 heads × 64, LayerNorm(x +
SubLayer(x)), FFN 512 → 2048 → 512 and its share of the parameters."""
from __future__ import annotations

import math

import numpy as np

import tinygrad_lite as tl
from tinygrad_lite import Tensor
from tinygrad_lite.nn import LayerNorm, Linear
from transformer import (
    AddNorm,
    DecoderLayer,
    EncoderLayer,
    MultiHeadAttention,
    PositionwiseFeedForward,
    Transformer,
    scaled_dot_product_attention,
)
from transformer.walkthrough.example import D_FF, D_MODEL, N_LAYERS, H, six_tokens_then_seed
from transformer.walkthrough.printing import check, claim, heading, note, show
from transformer.walkthrough.softmax import dot_product_variance


# ---------------------------------------------------------------- 9. multi-head attention
def section_multihead(figures=None) -> dict:
    heading(9, "多头注意力", "Multi-head attention", "多头注意力机制")
    claim("MultiHead(Q,K,V) = Concat(head_1, …, head_h)W^O：512 维分给 8 个头，各自在 64 维里算注意力，"
          "拼回 512 维后乘 W^O",
          "MultiHead(Q,K,V) = Concat(head_1, …, head_h)W^O: 512 = 8 heads × 64, each attending in its "
          "own 64 dimensions; the heads are concatenated back and projected by W^O")
    x = six_tokens_then_seed(1).reshape(1, 6, D_MODEL)
    mha = MultiHeadAttention(D_MODEL, H, dropout=0.0)
    q = mha.split_heads(mha.w_q(x))
    k = mha.split_heads(mha.w_k(x))
    v = mha.split_heads(mha.w_v(x))
    heads, weights = scaled_dot_product_attention(q, k, v, return_weights=True)
    concat = mha.merge_heads(heads)
    out = mha.w_o(concat)
    shapes = {"x": tuple(x.shape), "q_heads": tuple(q.shape), "weights": tuple(weights.shape),
              "heads": tuple(heads.shape), "concat": tuple(concat.shape), "out": tuple(out.shape)}
    show("X → XW^Q → split", f"{shapes['x']} → {(1, 6, D_MODEL)} → {shapes['q_heads']}  (B, h, T, d_k)")
    show("per-head softmax(QKᵀ/√64) → ·V", f"{shapes['weights']} → {shapes['heads']}")
    show("Concat → ·W^O", f"{shapes['concat']} → {shapes['out']}")
    check("d_k = d_model / h", f"{mha.d_k}", "64", mha.d_k == D_MODEL // H == 64)
    module_difference = float(np.abs(mha(x, x, x).data - out.data).max())
    check("MultiHeadAttention(x) vs the steps above", f"max diff {module_difference:.0e}", "same",
          module_difference < 1e-5)

    probe = Tensor(x.data.copy(), requires_grad=True)
    mha.split_heads(mha.w_q(probe))[:, 0].sum().backward()
    seen = int((np.abs(probe.grad[0]).sum(0) > 0).sum())
    note("文中的例子把输入本身切成 4 段 [1, 128] 再拼回去：实际切开的是投影后的 XW^Q（每个头有自己的 W_i^Q，"
         "看得到全部 512 维输入），拼接之后还要乘 W^O",
         f"the heads split the projected XW^Q, not the input: head 1's queries depend on {seen} of the "
         f"{D_MODEL} input features (each head has its own 512×64 W_i^Q), and Concat is followed by W^O")
    variances = {d_k: dot_product_variance(d_k, samples=5000) for d_k in (64, 512)}
    note("文中认为维度低了点积就少有极端值：除以 √d_k 之后，64 维和 512 维的分数方差都约为 1；"
         "多头的拆分本身并不让 softmax 更平缓",
         f"after ÷√d_k the scores have variance ≈ 1 at d_k = 64 and 512 alike ({variances[64][1]:.2f}, "
         f"{variances[512][1]:.2f}; unscaled {variances[64][0]:.0f} vs {variances[512][0]:.0f}): the split "
         "alone does not make the softmax less extreme, the scaling does")
    return {"shapes": shapes, "d_k": mha.d_k, "module_difference": module_difference, "features_seen": seen,
            "score_variances": variances}


# ---------------------------------------------------------------- 10. Add & Norm
def residual_gradients(rng: np.random.Generator, depth: int, width: int = 64) -> dict:
    """Mean |∂out/∂x| through `depth` stacked Linear layers, without (False) and with (True) the
    residual sum h + layer(h), whose identity path carries the gradient past every layer."""
    tl.manual_seed(0)
    layers = [Linear(width, width, dtype=np.float64) for _ in range(depth)]
    gradient = {}
    for residual in (False, True):
        inp = Tensor(rng.standard_normal((1, width)), requires_grad=True)
        h = inp
        for layer in layers:
            h = h + layer(h) if residual else layer(h)
        h.sum().backward()
        gradient[residual] = float(np.abs(inp.grad).mean())
    return gradient


def section_addnorm(figures=None) -> dict:
    heading(10, "残差与层归一化", "Add & Norm", "Add & Norm")
    claim("output = LayerNorm(x + SubLayer(x))：残差相加后，每个 token 的 512 个特征被归一到均值 0、方差 1",
          "output = LayerNorm(x + SubLayer(x)): after the residual sum, each token's features are "
          "normalised to mean 0, variance 1")
    rng = np.random.default_rng(0)
    x = Tensor((rng.standard_normal((6, D_MODEL)) * 5 + 3).astype(np.float32))
    tl.manual_seed(0)
    add_norm = AddNorm(D_MODEL, dropout=0.0)
    ffn = PositionwiseFeedForward(D_MODEL, D_FF, dropout=0.0)
    y = add_norm(x, ffn).data.astype(np.float64)
    means, variances = y.mean(-1), y.var(-1)
    check("per-token mean of LayerNorm(x + FFN(x))", f"max |mean| {np.abs(means).max():.1e}", "0",
          np.abs(means).max() < 1e-5)
    check("per-token variance", f"{variances.min():.5f} … {variances.max():.5f}", "1",
          np.abs(variances - 1).max() < 1e-3)
    by_hand = x.data + ffn(x).data
    by_hand = (by_hand - by_hand.mean(-1, keepdims=True)) / np.sqrt(by_hand.var(-1, keepdims=True) + 1e-5)
    check("module vs the formula (x − μ)/√(σ² + ε)", f"max diff {np.abs(y - by_hand).max():.0e}", "same",
          np.allclose(y, by_hand, atol=1e-4))

    depth = 10
    gradient = residual_gradients(rng, depth)
    check(f"{depth} stacked Linear layers: mean |∂out/∂x| without / with residual",
          f"{gradient[False]:.1e} / {gradient[True]:.1e}", "residual keeps deep nets trainable",
          gradient[True] > 100 * gradient[False])

    claim("可学习的 γ_i 把第 i 维的方差乘上 γ_i²，β_i 把它的均值挪动 β_i",
          "the learned γ_i multiplies feature i's variance by γ_i², β_i moves its mean by β_i")
    norm = LayerNorm(D_MODEL)
    plain = norm(x).data.astype(np.float64)
    gamma, beta = rng.uniform(0.5, 3.0, D_MODEL), rng.uniform(-2.0, 2.0, D_MODEL)
    norm.weight.data[...] = gamma
    norm.bias.data[...] = beta
    affine = norm(x).data.astype(np.float64)
    variance_ratio = affine.var(0) / plain.var(0) / gamma ** 2
    mean_shift = affine.mean(0) - gamma * plain.mean(0) - beta
    check("feature i over the 6 tokens: Var ratio / γ_i², mean − (γ_i·old mean + β_i)",
          f"{variance_ratio.min():.4f} … {variance_ratio.max():.4f}, max {np.abs(mean_shift).max():.0e}", "1, 0",
          np.allclose(variance_ratio, 1, atol=1e-3) and np.abs(mean_shift).max() < 1e-4)
    quiet = Tensor((rng.standard_normal((6, D_MODEL)) * math.sqrt(1e-5)).astype(np.float32))
    quiet_variance = float(LayerNorm(D_MODEL)(quiet).data.astype(np.float64).var(-1).mean())
    note("方差是 σ²/(σ² + ε)，只是近似 1：输入本身方差很小时差得很远",
         f"the variance is σ²/(σ² + ε), not exactly 1: a token whose features have variance 1e-5 = ε "
         f"comes out with variance {quiet_variance:.2f}")
    return {"max_abs_mean": float(np.abs(means).max()), "max_variance_error": float(np.abs(variances - 1).max()),
            "residual_gradient": gradient[True], "plain_gradient": gradient[False],
            "gamma_variance_ratio": variance_ratio, "quiet_variance": quiet_variance}


# ---------------------------------------------------------------- 11. feed-forward network
def base_model_parameters(vocab: int = 37000) -> dict:
    """Parameter counts of the base model with one source/target/output embedding shared (paper §3.4),
    from one encoder layer and one decoder layer (building all 65 M parameters is not needed)."""
    encoder_layer = EncoderLayer(D_MODEL, H, D_FF, dropout=0.0)
    decoder_layer = DecoderLayer(D_MODEL, H, D_FF, dropout=0.0)
    ffn = encoder_layer.feed_forward.num_parameters()
    encoder, decoder = encoder_layer.num_parameters(), decoder_layer.num_parameters()
    embedding = vocab * D_MODEL
    generator_bias = vocab
    total = N_LAYERS * (encoder + decoder) + embedding + generator_bias
    return {"ffn": ffn, "encoder_layer": encoder, "decoder_layer": decoder, "embedding": embedding,
            "total": total, "ffn_total": 2 * N_LAYERS * ffn, "vocab": vocab,
            "without_embeddings": N_LAYERS * (encoder + decoder)}


def composed_count(model: Transformer) -> int:
    """A Transformer's parameter count summed from its parts, the way base_model_parameters sums them."""
    c = model.config
    enc = EncoderLayer(c.d_model, c.h, c.d_ff).num_parameters()
    dec = DecoderLayer(c.d_model, c.h, c.d_ff).num_parameters()
    return c.N * (enc + dec) + (c.src_vocab + c.tgt_vocab) * c.d_model + c.d_model * c.tgt_vocab + c.tgt_vocab


def section_ffn(figures=None) -> dict:
    heading(11, "前馈网络", "Position-wise feed-forward network", "Feed Forward MLP")
    claim("FFN(x) = max(0, xW1 + b1)W2 + b2：每个 token 先升到 2048 维、过 ReLU，再降回 512 维",
          "FFN(x) = max(0, xW1 + b1)W2 + b2: each token goes 512 → 2048 → ReLU → 512")
    x = six_tokens_then_seed(0)
    ffn = PositionwiseFeedForward(D_MODEL, D_FF, dropout=0.0)
    hidden = ffn.w_1(x).relu()
    out = ffn(x)
    check("shapes x → hidden → out", f"{tuple(x.shape)} → {tuple(hidden.shape)} → {tuple(out.shape)}",
          "512 → 2048 → 512", tuple(hidden.shape) == (6, D_FF) and tuple(out.shape) == (6, D_MODEL))
    show("ReLU zeroes", f"{(hidden.data == 0).mean():.0%} of the 2048 hidden units here")

    claim("模型参数大头在 FFN，约占 2/3；文中举 GPT 为例：1700 亿参数里约 1200 亿属于 FFN",
          "most parameters sit in the FFN, about 2/3; the article's GPT example: about 120 of 170 billion")
    tl.manual_seed(0)
    counts = base_model_parameters()
    layer_ratio = counts["ffn"] / counts["encoder_layer"]
    decoder_ratio = counts["ffn"] / counts["decoder_layer"]
    model_ratio = counts["ffn_total"] / counts["total"]
    no_embedding_ratio = counts["ffn_total"] / counts["without_embeddings"]
    tiny = Transformer(50, 60, d_model=16, h=2, N=2, d_ff=32, dropout=0.0)
    check("counting method on a small Transformer", f"{composed_count(tiny)} from parts",
          f"{tiny.num_parameters()} built", composed_count(tiny) == tiny.num_parameters())
    check("FFN / encoder layer", f"{counts['ffn']:,} / {counts['encoder_layer']:,} = {layer_ratio:.3f}", "≈ 2/3",
          abs(layer_ratio - 2 / 3) < 0.01)
    show("FFN / decoder layer (it has cross-attention too)",
         f"{counts['ffn']:,} / {counts['decoder_layer']:,} = {decoder_ratio:.3f}")
    check(f"FFN / base model (N = 6, shared vocab {counts['vocab']:,})",
          f"{counts['ffn_total'] / 1e6:.1f} M / {counts['total'] / 1e6:.1f} M = {model_ratio:.2f}", "≈ 2/3",
          abs(model_ratio - 2 / 3) < 0.05)
    show("… without the embedding table", f"{no_embedding_ratio:.2f}; the paper reports 65 M parameters for base, "
         f"we count {counts['total'] / 1e6:.1f} M")
    d, layers, gpt3_total = 12288, 96, 175e9
    gpt3_ffn = layers * (2 * d * 4 * d + 4 * d + d)
    gpt3_attention = layers * 4 * (d * d + d)
    note(f"约 2/3 对一个编码器层、对 GPT-3 这类只有解码器的模型成立（FFN 约 {gpt3_ffn / 1e8:.0f} 亿），"
         f"对原版 base 编码器-解码器模型约为 {model_ratio:.0%}；GPT-3 是 1750 亿参数",
         f"about 2/3 holds per encoder layer and for decoder-only GPT-3 (d = 12288, 96 layers: FFN "
         f"{gpt3_ffn / 1e9:.0f} B of {gpt3_total / 1e9:.0f} B = {gpt3_ffn / gpt3_total:.2f}; attention "
         f"{gpt3_attention / 1e9:.0f} B), but for the paper's base encoder-decoder it is {model_ratio:.2f} "
         f"(decoder layers hold two attentions and the {counts['embedding'] / 1e6:.0f} M embedding table). "
         "GPT-3 has 175 billion (1750 亿) parameters, not 1700 亿")
    return {"hidden_shape": tuple(hidden.shape), "out_shape": tuple(out.shape), "counts": counts,
            "layer_ratio": layer_ratio, "decoder_ratio": decoder_ratio, "model_ratio": model_ratio,
            "no_embedding_ratio": no_embedding_ratio, "gpt3_ratio": gpt3_ffn / gpt3_total,
            "gpt3_ffn": gpt3_ffn, "tiny_composed": composed_count(tiny), "tiny_built": tiny.num_parameters()}
