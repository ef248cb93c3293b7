# ---
# jupyter:
#   jupytext:
#     cell_metadata_filter: -all
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.7
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 3 · A tour of the Transformer
#
# The `transformer` package builds the encoder-decoder of *Attention Is All You Need* on
# tinygrad-lite, one class per box of the paper's Figure 1. This notebook does three things:
#
# 1. computes the claims that a Chinese beginner's guide to that paper makes about the model
#    (our wording, with the guide's numbers and formulas), each with an `assert` that fails if
#    the code disagrees;
# 2. trains a small Chinese→English translator on the built-in toy corpus (under two minutes on
#    one CPU core) and shows what its attention heads look at;
# 3. draws the backprop graph of one training step, one box per layer (`collapse=2`).
#
# Pictures appear inline; the training run writes its checkpoints to a temporary directory that
# is deleted afterwards.

# %%
import math
import os
import tempfile

import numpy as np
from IPython.display import display

import tinygrad_lite as tl
from tinygrad_lite import Tensor, fast
from transformer import (
    EncoderLayer,
    MultiHeadAttention,
    PositionalEncoding,
    Transformer,
    causal_mask,
    scaled_dot_product_attention,
    sinusoidal_table,
)
from transformer.data import make_batches, tokenize_zh
from transformer.train import TrainConfig, Trainer, batch_loss
from transformer.translator import Translator
from viz import draw_graph, plots

tl.set_num_threads(1)  # at these small shapes a second thread gains little (the CLIs default to 1 too)

MINUTES = float(os.environ.get("TINYGRAD_LITE_NOTEBOOK_MINUTES", 2.0))  # the training budget (the tests shrink it)


def random_batch(*shape, seed=0):
    return Tensor(np.random.default_rng(seed).standard_normal(shape).astype(np.float32))


SENTENCE = "这是一个苹果"  # the guide's running example, "this is an apple"
tokens = tokenize_zh(SENTENCE)
print(tokens, len(tokens), "tokens")

# %% [markdown]
# ## 1. Every token scores every token: Q·Kᵀ is 6×6
#
# In self-attention each of the 6 tokens asks a question (its query) of all 6 tokens (their keys),
# so one head's score matrix `Q·Kᵀ` has one entry per (query, key) pair: 6×6. A softmax turns
# each row into weights that add up to 1, and the output, a weighted mix of the values, has the
# same shape as the input. With the paper's sizes, `d_model = 512` split over `h = 8` heads of
# `d_k = 64`:

# %%
tl.manual_seed(0)
x = random_batch(1, len(tokens), 512)
mha = MultiHeadAttention(512, 8, dropout=0.0)
q, k, v = (mha.split_heads(proj(x)) for proj in (mha.w_q, mha.w_k, mha.w_v))
scores = q @ k.transpose(-2, -1)
_, weights = scaled_dot_product_attention(q, k, v, return_weights=True)
print("x", x.shape, "| per-head q, k", q.shape, "| Q·Kᵀ", scores.shape, "| output", mha(x, x, x).shape)
assert scores.shape == (1, 8, 6, 6) and mha(x, x, x).shape == x.shape
np.testing.assert_allclose(weights.data.sum(-1), 1.0, rtol=1e-5)

# %% [markdown]
# An untrained layer has nothing to prefer yet: its heads spread their weight almost evenly.
# (The first four of the eight heads.)

# %%
display(plots.plot_attention(weights.data[0, :4], tokens, title="untrained layer",
                             kind="encoder self-attention"));

# %% [markdown]
# ## 2. Why divide by √d_k
#
# If the `d_k` entries of a query and a key are independent with mean 0 and variance 1, their dot
# product is a sum of `d_k` such products, so its variance is `d_k`: 64 for the paper's heads.
# Scores that large push the softmax towards a one-hot vector, where gradients vanish. Dividing
# by `√d_k` brings the variance back to 1.

# %%
rng = np.random.default_rng(0)
print(" d_k   var(q·k)   var(q·k)/d_k   var(q·k/√d_k)")
for d_k in (16, 64, 512):
    qs, ks = rng.standard_normal((20000, d_k)), rng.standard_normal((20000, d_k))
    dots = (qs * ks).sum(-1)
    print(f"{d_k:4d} {dots.var():10.1f} {dots.var() / d_k:12.3f} {(dots / math.sqrt(d_k)).var():14.3f}")
    assert abs(dots.var() / d_k - 1) < 0.05 and abs((dots / math.sqrt(d_k)).var() - 1) < 0.05


def mean_top_weight(scale, d_k=64, keys=6, trials=2000):
    """The average largest softmax weight over `keys` random scores q·k·scale."""
    qs, ks = rng.standard_normal((trials, 1, d_k)), rng.standard_normal((trials, keys, d_k))
    s = (qs * ks).sum(-1) * scale
    w = np.exp(s - s.max(-1, keepdims=True))
    return float((w / w.sum(-1, keepdims=True)).max(-1).mean())


unscaled, scaled = mean_top_weight(1.0), mean_top_weight(1 / math.sqrt(64))
print(f"6 keys, d_k=64: the top weight averages {unscaled:.2f} without scaling, {scaled:.2f} with it")
assert unscaled > scaled

# %% [markdown]
# ## 3. The decoder cannot peek at the future
#
# While it predicts word `i`, the decoder may look only at words `0..i`: the causal mask is
# lower-triangular (True = may attend), and the masked scores get zero weight. So changing the
# target tokens after position `t` never changes the model's outputs at positions `0..t`.

# %%
print(causal_mask(6)[0, 0].astype(int))
tl.manual_seed(0)
small = Transformer(20, 20, d_model=16, h=2, N=2, d_ff=32, dropout=0.0)
src, tgt = np.array([[5, 6, 7, 8]]), np.array([[1, 4, 9, 12, 3, 7]])
base = small(src, tgt).data
for t in range(tgt.shape[1] - 1):
    changed = tgt.copy()
    changed[0, t + 1:] = np.random.default_rng(t).integers(1, 20, size=tgt.shape[1] - t - 1)
    np.testing.assert_allclose(small(src, changed).data[0, :t + 1], base[0, :t + 1], atol=1e-6)
masked = MultiHeadAttention(16, 2, dropout=0.0)
masked.keep_weights = True
masked(random_batch(1, 6, 16, seed=1), random_batch(1, 6, 16, seed=1), random_batch(1, 6, 16, seed=1),
       causal_mask(6))
above = np.triu_indices(6, 1)
assert (masked.weights[0][:, above[0], above[1]] == 0).all()
print("future tokens changed 5 times: earlier outputs identical; weights above the diagonal: all 0")

# %% [markdown]
# ## 4. Cross-attention: n target tokens read m source tokens
#
# In the decoder's second attention the queries come from the `n` target tokens so far and the
# keys and values from the encoder's `m` source tokens, so the weights are `n × m` per head and
# the output has one `d_model` vector per target token.

# %%
n, m, d_model = 4, 6, 32
cross = MultiHeadAttention(d_model, 4, dropout=0.0)
cross.keep_weights = True
memory = random_batch(1, m, d_model, seed=2)
out = cross(random_batch(1, n, d_model, seed=3), memory, memory)
print("weights", cross.weights.shape, "| output", out.shape)
assert cross.weights.shape == (1, 4, n, m) and out.shape == (1, n, d_model)

# %% [markdown]
# ## 5. Word order needs positional encoding
#
# Attention treats its input as a set: without positions, 我是你老板 and 你是我老板 ("I am your
# boss" / "you are my boss") give 老板 exactly the same output vector. Adding the sinusoidal
# positional encoding makes them differ.

# %%
tl.manual_seed(0)
vocab = {c: i for i, c in enumerate("我是你老板")}
table = np.random.default_rng(0).standard_normal((len(vocab), 32)).astype(np.float32)
layer = EncoderLayer(32, 4, 64, dropout=0.0)
pe = PositionalEncoding(32, dropout=0.0)


def boss_vector(sentence, with_pe):
    x = Tensor(table[[vocab[c] for c in sentence]][None])
    return layer(pe(x) if with_pe else x).data[0, sentence.index("老")]


for with_pe in (False, True):
    gap = np.abs(boss_vector("我是你老板", with_pe) - boss_vector("你是我老板", with_pe)).max()
    print(f"with positional encoding: {with_pe!s:5}  largest difference in 老's output: {gap:.2e}")
    assert (gap > 1e-2) if with_pe else (gap < 1e-5)

# %% [markdown]
# The encoding puts `sin` and `cos` of `pos / 10000^(2i/d_model)` in dimensions `2i` and `2i+1`.
# Each such pair turns like a clock hand at its own speed, so moving `k` positions on is the same
# rotation for every position: one fixed block-diagonal matrix `R_k` (2×2 rotations by
# `k·ω_i`) maps `PE(pos)` to `PE(pos + k)` for all `pos`. The wavelengths grow geometrically
# from 2π to 10000·2π.

# %%
d = 64
table_pe = sinusoidal_table(200, d, dtype=np.float64)
omega = np.exp(np.arange(0, d, 2) * (-np.log(10000.0) / d))
for shift in (1, 5, 17):
    R = np.zeros((d, d))
    for i, w in enumerate(omega):
        c, s = np.cos(shift * w), np.sin(shift * w)
        R[2 * i:2 * i + 2, 2 * i:2 * i + 2] = [[c, -s], [s, c]]
    error = np.abs(table_pe[:-shift] @ R - table_pe[shift:]).max()
    print(f"shift {shift:2d}: max |PE(pos)·R - PE(pos+{shift})| over 200 positions = {error:.1e}")
    assert error < 1e-9
wavelengths = 2 * np.pi / omega
assert np.all(np.diff(wavelengths) > 0) and np.isclose(wavelengths[0], 2 * np.pi)
display(plots.plot_positional_encoding(table_pe[:100]));

# %% [markdown]
# ## 6. Most of a layer's weights are in the feed-forward network
#
# The position-wise feed-forward network is two linear maps, 512→2048→512. It holds
# 2·512·2048 weights plus 2048 + 512 biases, about two thirds of an encoder layer; the four
# 512×512 attention projections hold most of the rest.

# %%
layer = EncoderLayer(512, 8, 2048, dropout=0.0)
ffn = sum(p.numel() for p in layer.feed_forward.parameters())
attention = sum(p.numel() for p in layer.self_attn.parameters())
total = sum(p.numel() for p in layer.parameters())
print(f"encoder layer: {total:,} parameters; feed-forward {ffn:,} ({ffn / total:.1%}), "
      f"attention {attention:,} ({attention / total:.1%})")
assert ffn == 2 * 512 * 2048 + 2048 + 512 and abs(ffn / total - 2 / 3) < 0.01

# %% [markdown]
# ## 7. Train a small translator
#
# The built-in corpus is a generated toy language: about 51,000 Chinese/English pairs to train on.
# `Trainer` follows the paper's recipe (Adam with β₂ = 0.98, the warm-up learning-rate schedule,
# label smoothing 0.1, dropout 0.1), here with a smaller model than `python -m transformer train`
# (d_model 64 instead of 128) and four epochs instead of ten, so that it trains in under two
# minutes on one core (`MINUTES` caps it). After each epoch it scores greedy translations of 200 held-out sentences.

# %%
with tempfile.TemporaryDirectory() as run_dir:
    config = TrainConfig(out=run_dir, d_model=64, heads=4, layers=2, d_ff=128, warmup=200, lr=2.0,
                         epochs=4, minutes=MINUTES, dev_bleu_size=200, progress=False)
    trainer = Trainer(config)
    report = trainer.run()
    translator = Translator.load(trainer.best_path)
    display(plots.plot_loss_curves(trainer.metrics_path, x_key="step",
                                   title="translator: loss per token"))
print({split: {key: round(value, 3) for key, value in report[split].items()}
       for split in ("test", "novel")})

# %% [markdown]
# The training loss is computed with label smoothing and with dropout on, so it sits above the
# dev loss, which has neither. "test" holds held-out sentences like the training ones; "novel"
# holds sentences built from word combinations that never occur in training. The full-size run,
# `python -m transformer train`, trains a model twice as wide for longer.
#
# A few held-out sentences, with the reference translation after `|`:

# %%
print(SENTENCE, "->", translator.translate(SENTENCE))
for split in ("test", "novel"):
    for zh, en in trainer.data.splits[split][:3]:
        print(f"{split:5}  {zh} -> {translator.translate(zh)}  | {en}")

# %% [markdown]
# ## 8. What the trained heads look at
#
# `Translator.attention_maps` translates greedily and keeps every head's weights: encoder
# self-attention (source × source), the decoder's masked self-attention (target × target, zero
# above the diagonal) and cross-attention (target × source). One row per layer, one column per
# head.

# %%
maps = translator.attention_maps(SENTENCE)
for kind, (attn, queries, keys) in maps.items():
    print(kind, attn.shape)
    display(plots.plot_attention(attn, keys, queries, kind=kind))

# %% [markdown]
# The query rows are the decoder's inputs: `<bos>`, then the words produced so far. Row `<bos>` is
# the step that predicts the first English word, row `this` the step that predicts the second,
# and so on. So in cross-attention a step tends to look at the Chinese word it is about to
# translate. For each step, the source token that the last layer weights most, averaged over heads:

# %%
attn, queries, keys = maps["cross-attention"]
assert np.allclose(np.triu(maps["decoder self-attention"][0], 1), 0)  # causal: nothing above the diagonal
eos = translator.tgt_vocab.decode([translator.tgt_vocab.eos_id], strip_special=False)[0]
for query, predicted, row in zip(queries, queries[1:] + [eos], attn[-1].mean(0)):
    print(f"reading {query:>6}, predicting {predicted:>6}: weighs {keys[int(row.argmax())]} most "
          f"({row.max():.2f})")

# %% [markdown]
# ## 9. The backprop graph of one training step, one box per layer
#
# Two training pairs, the training loss, `backward()`. `collapse=2` draws each encoder and decoder
# layer (and the embeddings, the positional encodings and the generator) as one box with its input
# and output shapes, its parameter count and the gradient norm of its parameters; the colours
# run from blue (small gradients) to red (large).
#
# The step is recorded under `fast.plain()`, every speed trick off, so the graph is the paper's
# formula (with `collapse=None`: matmul, softmax, relu, layer_norm, one op at a time). Training runs
# that program compiled, where rewrite rules fuse attention, the FFN and the residuals;
# `python -m viz transformer --compiled --out p.svg` draws that plan, each fused op in a cluster named by its rule.

# %%
model = translator.model
model.train()
src_ids, tgt_ids = trainer.data.ids["train"]
batch = make_batches(src_ids[:2], tgt_ids[:2], max_tokens=1000, shuffle=False)[0]
with fast.plain(), tl.retain_grads():
    loss, _ = batch_loss(model, batch, label_smoothing=0.1)
    model.zero_grad()
    loss.backward()
graph = draw_graph(loss, model=model, collapse=2)
print(graph.stats)
display(graph)
