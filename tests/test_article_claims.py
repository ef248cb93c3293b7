"""The Transformer chapter of the source article (a Chinese beginner's guide to "Attention Is All
You Need"), one claim per test, restated in our words and computed with our own engine; and, when
a copy of the article is at $TINYGRAD_LITE_ARTICLE, a check that no sentence of it appears verbatim
in the repository (the project paraphrases it, keeping its numbers and formulas)."""
import os
from pathlib import Path

import numpy as np
import pytest
from article_overlap import cjk_windows, clauses, overlaps, repository_files, scan

import tinygrad_lite as tl
from tinygrad_lite import Tensor
from tinygrad_lite.nn import LayerNorm
from transformer import (
    EncoderLayer,
    MultiHeadAttention,
    PositionalEncoding,
    Transformer,
    causal_mask,
    scaled_dot_product_attention,
    sinusoidal_table,
)

SENTENCE = "这是一个苹果"  # the article's running example: 6 tokens


def test_claim1_qkt_of_six_tokens_is_six_by_six_and_output_keeps_shape():
    tl.manual_seed(0)
    x = Tensor(np.random.default_rng(0).standard_normal((1, len(SENTENCE), 512)).astype(np.float32))
    mha = MultiHeadAttention(512, 8, dropout=0.0)
    q, k = mha.split_heads(mha.w_q(x)), mha.split_heads(mha.w_k(x))
    assert (q @ k.transpose(-2, -1)).shape == (1, 8, 6, 6)
    _, weights = scaled_dot_product_attention(q, k, q, return_weights=True)
    np.testing.assert_allclose(weights.data.sum(-1), 1.0, rtol=1e-5)
    assert mha(x, x, x).shape == x.shape


@pytest.mark.parametrize("d_k", [64, 512])
def test_claim2_dot_product_variance_is_d_k_and_one_after_scaling(d_k):
    rng = np.random.default_rng(0)
    q, k = rng.standard_normal((20000, d_k)), rng.standard_normal((20000, d_k))
    dots = (q * k).sum(-1)
    assert abs(dots.var() / d_k - 1) < 0.05
    assert abs((dots / np.sqrt(d_k)).var() - 1) < 0.05


def test_claim3_causal_mask_lets_no_future_token_leak():
    tl.manual_seed(0)
    model = Transformer(20, 20, d_model=16, h=2, N=2, d_ff=32, dropout=0.0)
    src = np.array([[5, 6, 7, 8]])
    tgt = np.array([[1, 4, 9, 12, 3, 7]])
    base = model(src, tgt).data
    for t in range(tgt.shape[1] - 1):
        changed = tgt.copy()
        changed[0, t + 1:] = np.random.default_rng(t).integers(1, 20, size=tgt.shape[1] - t - 1)
        out = model(src, changed).data
        np.testing.assert_allclose(out[0, :t + 1], base[0, :t + 1], atol=1e-6)
    # each attention row sums to 1 with zeros above the diagonal
    mha = MultiHeadAttention(16, 2, dropout=0.0)
    mha.keep_weights = True
    x = Tensor(np.random.default_rng(1).standard_normal((1, 6, 16)).astype(np.float32))
    mha(x, x, x, causal_mask(6))
    w = mha.weights[0]
    np.testing.assert_allclose(w.sum(-1), 1.0, rtol=1e-5)
    assert (w[:, np.triu_indices(6, 1)[0], np.triu_indices(6, 1)[1]] == 0).all()


def test_claim4_cross_attention_is_n_by_m():
    n, m, d_model = 4, 6, 32
    mha = MultiHeadAttention(d_model, 4, dropout=0.0)
    mha.keep_weights = True
    rng = np.random.default_rng(0)
    decoder_x = Tensor(rng.standard_normal((1, n, d_model)).astype(np.float32))
    memory = Tensor(rng.standard_normal((1, m, d_model)).astype(np.float32))
    out = mha(decoder_x, memory, memory)
    assert mha.weights.shape == (1, 4, n, m)
    assert out.shape == (1, n, d_model)


def test_claim5_without_position_attention_ignores_word_order():
    """"我是你老板" vs "你是我老板": 老板 gets the same output without PE, different with it."""
    tl.manual_seed(0)
    vocab = {c: i for i, c in enumerate("我是你老板")}
    table = np.random.default_rng(0).standard_normal((len(vocab), 32)).astype(np.float32)
    layer = EncoderLayer(32, 4, 64, dropout=0.0)
    pe = PositionalEncoding(32, dropout=0.0)

    def boss_vector(sentence, with_pe):
        x = Tensor(table[[vocab[c] for c in sentence]][None])
        if with_pe:
            x = pe(x)
        return layer(x).data[0, sentence.index("老")]
    a, b = "我是你老板", "你是我老板"
    np.testing.assert_allclose(boss_vector(a, False), boss_vector(b, False), atol=1e-5)
    assert np.abs(boss_vector(a, True) - boss_vector(b, True)).max() > 1e-2


def test_claim6_pe_shift_is_a_fixed_rotation_and_wavelengths_grow():
    d_model = 64
    pe = sinusoidal_table(200, d_model, dtype=np.float64)
    freqs = np.exp(np.arange(0, d_model, 2) * (-np.log(10000.0) / d_model))
    for k in (1, 5, 17):
        rotation = np.zeros((d_model, d_model))
        for i, w in enumerate(freqs):
            c, s = np.cos(k * w), np.sin(k * w)
            rotation[2 * i:2 * i + 2, 2 * i:2 * i + 2] = [[c, -s], [s, c]]
        # the same matrix maps every position pos to pos + k
        np.testing.assert_allclose(pe[:-k] @ rotation, pe[k:], atol=1e-9)
    wavelengths = 2 * np.pi / freqs
    assert np.all(np.diff(wavelengths) > 0)
    assert np.isclose(wavelengths[0], 2 * np.pi) and wavelengths[-1] < 10000 * 2 * np.pi


def test_claim6b_pe_works_at_any_length():
    pe = PositionalEncoding(16, dropout=0.0, max_len=8)
    out = pe(Tensor(np.zeros((1, 50, 16), np.float32)))
    np.testing.assert_allclose(out.data[0], sinusoidal_table(50, 16), atol=1e-6)


def test_claim7_layernorm_gives_mean_zero_variance_one_per_token():
    x = Tensor((np.random.default_rng(0).standard_normal((2, 6, 512)) * 5 + 3).astype(np.float32))
    y = LayerNorm(512)(x).data
    np.testing.assert_allclose(y.mean(-1), 0, atol=1e-5)
    np.testing.assert_allclose(y.var(-1), 1, atol=1e-3)


def test_claim8_ffn_holds_two_thirds_of_an_encoder_layer():
    layer = EncoderLayer(512, 8, 2048, dropout=0.0)
    ffn = sum(p.numel() for p in layer.feed_forward.parameters())
    total = sum(p.numel() for p in layer.parameters())
    assert ffn == 512 * 2048 + 2048 + 2048 * 512 + 512
    assert abs(ffn / total - 2 / 3) < 0.01


def test_claim9_eight_heads_of_64_concatenate_back_to_512():
    mha = MultiHeadAttention(512, 8, dropout=0.0)
    assert mha.d_k == 64
    x = Tensor(np.random.default_rng(0).standard_normal((2, 6, 512)).astype(np.float32))
    heads = mha.split_heads(x)
    assert heads.shape == (2, 8, 6, 64)
    np.testing.assert_array_equal(mha.merge_heads(heads).data, x.data)


# ---------------------------------------------------------------- no verbatim quotes
ARTICLE = os.environ.get("TINYGRAD_LITE_ARTICLE")


def test_overlap_finds_a_quoted_clause_and_a_long_chinese_run_but_not_a_paraphrase():
    first, second = "这是文章里的一句相当长的中文句子", "接着是用来测试逐字引用检查的第二个分句"
    article = f"背景\n{first}，{second}。短句。"
    assert clauses(article) == {first, second}
    assert overlaps(article, f"x = 1  # {first}")[0] == first
    # a 12-character run is found even when it is cut out of its clause and spaced differently
    assert set(overlaps(article, "说的是：用来测试逐字 引用检查的第二")) == {
        "用来测试逐字引用检查的第", "来测试逐字引用检查的第二"}
    windows = cjk_windows(article)
    assert "文章里的一句相当长的中文" in windows and "短句" not in "".join(windows)
    assert overlaps(article, "换个说法：这句话很长，是专门为了检查而写的。") == []
    code = "scaled_dot_product_attention(q, k, v)"
    assert overlaps(f"公式 {code}", code) == []


@pytest.mark.skipif(not ARTICLE or not Path(ARTICLE).is_file(),
                    reason="set TINYGRAD_LITE_ARTICLE to a copy of the article to check for quotes")
def test_no_sentence_of_the_article_appears_verbatim_in_the_repository():
    article = Path(ARTICLE).read_text(encoding="utf-8")
    found = scan(article, repository_files(Path(__file__).resolve().parents[1]))
    assert found == {}, "\n".join(f"{path}: {hit}" for path, hits in found.items() for hit in hits)
