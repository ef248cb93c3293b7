"""The article, runnable: the claims of a Chinese beginner's guide to "Attention Is All You
Need", each restated in our own words (Chinese and English) and computed with tinygrad_lite
and the `transformer` package, next to the article's own numbers.

Each section is a function that prints its part and returns a dict of what it computed
(the tests read those dicts); its heading names the article's section the claims come from.
✓/✗ mark a number that matches / misses the article's, ⚠ marks a precision note: where the
article's wording is looser than the maths.

    python -m transformer explain                       # all 15 sections, < 30 s
    python -m transformer explain --section temperature # one section, by name or number
    python -m transformer explain --figures out/        # also write the pictures
    python -m transformer explain --checkpoint runs/translator/best.safetensors

Layering: `transformer` never imports `viz`. The pictures are drawn by a plotting module that
the caller passes in (`Figures(directory, viz.plots)`); the command line, which sits above
both packages, does that for --figures.
"""
from __future__ import annotations

import argparse
import itertools
import math
import sys
import warnings
from pathlib import Path

import numpy as np

import tinygrad_lite as tl
from tinygrad_lite import Tensor
from tinygrad_lite.nn import Embedding, LayerNorm, Linear, Sequential, Tanh
from tinygrad_lite.nn import functional as F
from transformer import (
    AddNorm,
    DecoderLayer,
    Embeddings,
    EncoderLayer,
    MultiHeadAttention,
    PositionalEncoding,
    PositionwiseFeedForward,
    Transformer,
    causal_mask,
    scaled_dot_product_attention,
    sinusoidal_table,
)
from transformer.data import Vocab, tokenize_zh

SENTENCE = "这是一个苹果"
TRANSLATION = "This is an apple"
D_MODEL, H, D_FF, N_LAYERS = 512, 8, 2048, 6          # the paper's base model (Table 3)
DEFAULT_CHECKPOINT = Path("runs/translator/best.safetensors")
LATEST_CHECKPOINT = Path("runs/translator/checkpoint.safetensors")

# The article's printed numbers, kept as printed so the comparison uses their precision.
ARTICLE_LOOKUP_SCORES = (5, -4, 3, 2, 2.5)
ARTICLE_LOOKUP_SOFTMAX = ("0.789", "0.0001", "0.1068", "0.0393", "0.0648")
ARTICLE_TEMPERATURE_LOGITS = (3, 5, -10, 20)
ARTICLE_T10_SOFTMAX = ("0.1255", "0.1533", "0.0342", "0.6870")

FIGURE_NAMES = {
    "descent": "gradient_descent.png",
    "attention": "attention_6_tokens.png",
    "temperature": "softmax_temperature.png",
    "pe": "positional_encoding.png",
}


# ---------------------------------------------------------------- printing
class Tally:
    """How many ✓ and ✗ the run printed."""
    passed = 0
    failed = 0


def heading(number: int, zh: str, en: str, source: str) -> None:
    """A section title; `source` is the article's section (its heading) the claims come from."""
    print(f"\n§{number} {zh} · {en}   [文章小节 article section: {source}]")
    print("─" * 72)


def claim(zh: str, en: str) -> None:
    """One claim of the article, restated in our words: what the checks below test."""
    print(f"  论点（转述） {zh}\n       claim (paraphrased): {en}")


def show(label: str, value="") -> None:
    print(f"  · {label}: {value}" if value != "" else f"  · {label}")


def check(label: str, ours, article, ok: bool) -> bool:
    ok = bool(ok)
    if ok:
        Tally.passed += 1
    else:
        Tally.failed += 1
    print(f"  {'✓' if ok else '✗'} {label}: ours {ours}  |  article {article}")
    return ok


def note(zh: str, en: str) -> None:
    print(f"  ⚠ 精确说明: {zh}\n       precision note: {en}")


def fmt(values, digits: int = 4) -> str:
    return "[" + ", ".join(f"{float(v):.{digits}f}" for v in np.ravel(values)) + "]"


def matrix_lines(m: np.ndarray, digits: int = 2, width: int = 7) -> None:
    for row in np.asarray(m):
        print("      " + "".join(f"{v:>{width}.{digits}f}" if np.isfinite(v)
                                  else f"{'-inf':>{width}}" for v in row))


def matches_printed(value: float, printed: str) -> bool:
    """True when `value` rounds to the article's `printed` number at its own precision."""
    decimals = len(printed.split(".")[1]) if "." in printed else 0
    return abs(float(value) - float(printed)) <= 0.5 * 10.0 ** -decimals + 1e-12


class Figures:
    """Where the pictures go and what draws them. `plots` is a module with viz.plots' functions
    (plot_descent_path, plot_attention, plot_softmax_temperatures, plot_positional_encoding),
    passed in by the caller because `transformer` does not import `viz`."""

    def __init__(self, directory, plots):
        self.directory, self.plots = Path(directory), plots

    def draw(self, name: str, function: str, *args, **kwargs) -> Path:
        """Call plots.<function>(*args, out=<directory>/<name>, **kwargs); returns the path."""
        self.directory.mkdir(parents=True, exist_ok=True)
        path = self.directory / name
        getattr(self.plots, function)(*args, out=path, **kwargs)
        print(f"  ↳ figure: {path}")
        return path


def softmax64(z, temperature: float = 1.0) -> np.ndarray:
    """softmax(z / T) with our Tensor, in float64."""
    return Tensor(np.asarray(z, dtype=np.float64)).softmax(-1, scale=1.0 / temperature).data


def toy_vocab(*sentences: str) -> Vocab:
    return Vocab(list(dict.fromkeys(t for s in sentences for t in tokenize_zh(s))))


# ---------------------------------------------------------------- 1. multilayer networks
XOR_INPUTS = np.array([[0.0, 0.0], [0.0, 1.0], [1.0, 0.0], [1.0, 1.0]])
XOR_TARGETS = np.array([0.0, 1.0, 1.0, 0.0])


def train_xor(sizes, activation=None, steps: int = 300, lr: float = 0.5, seed: int = 0) -> dict:
    """Full-batch gradient descent on XOR's binary cross-entropy for Linear layers of `sizes`
    (float64), with `activation` after every hidden layer (None: a purely linear stack).
    Returns the model, its final loss, logits and how many of the 4 points it gets right."""
    tl.manual_seed(seed)
    layers = []
    for i, (n_in, n_out) in enumerate(itertools.pairwise(sizes)):
        layers.append(Linear(n_in, n_out, dtype=np.float64))
        if activation is not None and i < len(sizes) - 2:
            layers.append(activation())
    model = Sequential(*layers)
    x, y = Tensor(XOR_INPUTS), Tensor(XOR_TARGETS[:, None])
    optimizer = tl.optim.SGD(model.parameters(), lr=lr)
    for _ in range(steps):
        loss = F.binary_cross_entropy_with_logits(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    logits = model(x).data[:, 0]
    return {"model": model, "loss": F.binary_cross_entropy_with_logits(model(x), y).item(),
            "logits": logits, "correct": int(((logits > 0) == (XOR_TARGETS > 0)).sum())}


def section_xor(figures=None) -> dict:
    """XOR needs a hidden layer and an activation; stacked linear layers are one linear layer."""
    heading(1, "多层神经网络与激活函数", "Multilayer networks and activations",
            "多层神经网络 · 激活函数")
    claim("单层网络只能用一条直线分开两类，异或做不到；加一层隐藏层并配上非线性激活就能做到",
          "one layer separates the classes by one straight line, which XOR does not allow; "
          "a hidden layer with a non-linear activation solves it")
    single = train_xor([2, 1], steps=300, lr=1.0)
    mlp = train_xor([2, 8, 1], Tanh, steps=1000, lr=0.5)
    check("single layer on XOR",
          f"fails ({single['correct']}/4 correct, loss {single['loss']:.4f} ≈ ln2)", "cannot",
          single["correct"] < 4)
    check("2-layer MLP, tanh hidden layer",
          f"solves it ({mlp['correct']}/4 correct, loss {mlp['loss']:.4f})", "can",
          mlp["correct"] == 4)

    claim("层与层之间若只有线性变换，叠多少层都只相当于一层线性变换",
          "layers that are all linear, however many, amount to one linear layer")
    stack = train_xor([2, 2, 1], steps=300, lr=0.5)
    (w1, b1), (w2, b2) = ((m.weight.data, m.bias.data) for m in stack["model"])
    collapsed = XOR_INPUTS @ (w2 @ w1).T + (w2 @ b1 + b2)
    stack_collapse = float(np.abs(collapsed - stack["logits"][:, None]).max())
    tl.manual_seed(0)
    first, second, third = (Linear(n_in, n_out, dtype=np.float64)
                            for n_in, n_out in ((2, 8), (8, 8), (8, 1)))
    x = Tensor(np.random.default_rng(0).standard_normal((100, 2)))
    stacked = third(second(first(x))).data
    W = third.weight.data @ second.weight.data @ first.weight.data
    b = (third.weight.data @ (second.weight.data @ first.bias.data + second.bias.data)
         + third.bias.data)
    collapse_error = float(np.abs(x.data @ W.T + b - stacked).max())
    show("3 stacked Linear(2→8→8→1), no activation: W = W3·W2·W1", fmt(W[0]))
    check("stack(x) − (W x + b), max over 100 inputs", f"{collapse_error:.1e}", "equal",
          collapse_error < 1e-12)
    check("trained 2-layer linear stack on XOR", f"{stack['correct']}/4 correct, same as one layer",
          "fails", stack["correct"] < 4 and stack_collapse < 1e-9)
    return {"single_correct": single["correct"], "single_loss": single["loss"],
            "mlp_correct": mlp["correct"], "mlp_loss": mlp["loss"], "mlp_logits": mlp["logits"],
            "stack_correct": stack["correct"], "collapse_error": collapse_error,
            "stack_collapse_error": stack_collapse}


# ---------------------------------------------------------------- 2. gradient descent
def descent_loss(x, y):
    """The loss surface f(x, y) = x² + 10y²: a valley 10× steeper across than along."""
    return x ** 2 + 10 * y ** 2


def gradient_descent(lr: float, start=(-4.0, 1.0), steps: int = 25) -> np.ndarray:
    """Points visited by p ← p − lr·∇f(p), the gradient from our autograd."""
    point = np.array(start, dtype=np.float64)
    path = [point.copy()]
    for _ in range(steps):
        p = Tensor(point, requires_grad=True)
        descent_loss(p[0], p[1]).backward()
        point = point - lr * p.grad
        path.append(point.copy())
    return np.array(path)


def section_descent(figures=None) -> dict:
    heading(2, "梯度下降：下山", "Gradient descent: walking down the hill", "损失函数 与 反向传播")
    claim("下坡的方向是梯度的反方向，每一步迈多远由学习率决定",
          "downhill is against the gradient; the learning rate decides how long each step is")
    p = Tensor(np.array([-4.0, 1.0]), requires_grad=True)
    descent_loss(p[0], p[1]).backward()
    grad_ok = np.allclose(p.grad, [2 * -4.0, 20 * 1.0])
    check("∇f at (−4, 1) by autograd", fmt(p.grad, 1), "∇f = (2x, 20y) = [-8, 20]", grad_ok)
    show("f(x, y) = x² + 10y², start (−4, 1), 25 steps; stable only if lr < 2/20 = 0.1 (largest curvature 20)")
    learning_rates = {"too small": 0.01, "good": 0.09, "too large": 0.105}
    paths, finals = {}, {}
    for label, lr in learning_rates.items():
        paths[label] = gradient_descent(lr)
        finals[label] = float(descent_loss(*paths[label][-1]))
        show(f"lr = {lr:<5} ({label:>9})", f"f: {descent_loss(*paths[label][0]):.1f} → {finals[label]:.4g}")
    check("good lr reaches the valley floor", f"f = {finals['good']:.2g}", "下山",
          finals["good"] < 1e-2 < finals["too small"] and finals["too large"] > descent_loss(-4.0, 1.0))
    files = []
    if figures is not None:
        for label, lr in learning_rates.items():
            name = FIGURE_NAMES["descent"]
            if label != "good":
                name = name.replace(".png", "_lr_" + label.replace(" ", "_") + ".png")
            files.append(figures.draw(name, "plot_descent_path", descent_loss, paths[label],
                                      title=f"gradient descent on x² + 10y², lr = {lr} ({label})"))
    return {"learning_rates": learning_rates, "final_loss": finals, "paths": paths, "files": files}


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
def six_token_input(seed: int = 0) -> tuple[list, Tensor]:
    """The article's 6 × 512 input: embeddings (×√d_model) plus positional encoding. The table
    starts at N(0, 1/d_model) as in Transformer._init_weights, so ×√d_model gives unit scale."""
    tokens = tokenize_zh(SENTENCE)
    vocab = toy_vocab(SENTENCE)
    tl.manual_seed(seed)
    embed = Embeddings(len(vocab), D_MODEL)
    table = embed.lut.weight.data
    table[...] = np.random.default_rng(seed).standard_normal(table.shape) / math.sqrt(D_MODEL)
    x = PositionalEncoding(D_MODEL, dropout=0.0)(embed(np.array([vocab.encode(tokens)])))
    return tokens, x[0]


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


# ---------------------------------------------------------------- 6. softmax and temperature
def section_temperature(figures=None) -> dict:
    heading(6, "Softmax 与温度", "Softmax and temperature", "Softmax 和 √dₖ")
    claim("对 [3, 5, -10, 20] 做 softmax，概率几乎全给了 20",
          "softmax([3, 5, -10, 20]) puts almost all the probability on 20")
    at_one = softmax64(ARTICLE_TEMPERATURE_LOGITS)
    check("softmax([3, 5, -10, 20])", "[" + ", ".join(f"{p:.3g}" for p in at_one) + "]", "20 dominates",
          at_one[3] > 0.9999)
    claim("温度取 T = 10，同一组数得到 [0.1255, 0.1533, 0.0342, 0.6870]",
          "with temperature T = 10 the same numbers give [0.1255, 0.1533, 0.0342, 0.6870]")
    at_ten = softmax64(ARTICLE_TEMPERATURE_LOGITS, 10.0)
    ok = all(matches_printed(p, s) for p, s in zip(at_ten, ARTICLE_T10_SOFTMAX))
    check("softmax([3, 5, -10, 20] / 10)", fmt(at_ten), "[" + ", ".join(ARTICLE_T10_SOFTMAX) + "]", ok)
    claim("温度越低（T → 0⁺）越接近 one-hot，越高（T → +∞）越接近均匀分布",
          "the colder (T → 0⁺), the closer to one-hot; the hotter (T → +∞), the closer to uniform")
    temperatures = (0.1, 0.5, 1, 2, 5, 10, 100, 1000, 1e5)
    one_hot, uniform = np.eye(4)[3], np.full(4, 0.25)
    rows = {}
    for t in temperatures:
        p = softmax64(ARTICLE_TEMPERATURE_LOGITS, t)
        rows[t] = p
        print(f"      T = {t:<7g} {fmt(p)}   |p − one-hot| = {np.abs(p - one_hot).max():.1e}   "
              f"|p − uniform| = {np.abs(p - uniform).max():.1e}")
    gaps_hot = [np.abs(rows[t] - one_hot).max() for t in temperatures]
    gaps_flat = [np.abs(rows[t] - uniform).max() for t in temperatures]
    check("as T grows: distance to one-hot ↑, to uniform ↓",
          f"{gaps_hot[0]:.0e} → {gaps_hot[-1]:.2f}, {gaps_flat[0]:.2f} → {gaps_flat[-1]:.0e}",
          "T→0 one-hot, T→∞ uniform",
          np.all(np.diff(gaps_hot) >= 0) and np.all(np.diff(gaps_flat) <= 0) and gaps_hot[0] < 1e-6
          and gaps_flat[-1] < 1e-3)
    files = [] if figures is None else [
        figures.draw(FIGURE_NAMES["temperature"], "plot_softmax_temperatures", ARTICLE_TEMPERATURE_LOGITS,
                     (1, 10, 100))]
    return {"t1": at_one, "t10": at_ten, "by_temperature": rows, "files": files}


# ---------------------------------------------------------------- 7. why divide by √d_k
def dot_product_variance(d_k: int, samples: int = 20000, seed: int = 0) -> tuple[float, float]:
    """Var(q·k) and Var(q·k/√d_k) for q, k with independent N(0, 1) components."""
    tl.manual_seed(seed)
    q, k = tl.randn(samples, d_k), tl.randn(samples, d_k)
    dots = (q * k).sum(-1).data.astype(np.float64)
    return float(dots.var()), float((dots / math.sqrt(d_k)).var())


def softmax_input_gradient(d_k: int, scaled: bool, batches: int = 200, tokens: int = 6, seed: int = 0) -> dict:
    """|∂L/∂z| for z = QKᵀ (or QKᵀ/√d_k) fed to softmax inside attention, L = Σ G ⊙ softmax(z)·V
    (mean and median), and how one-hot the rows are."""
    rng = np.random.default_rng(seed)
    q, k = rng.standard_normal((2, batches, tokens, d_k))
    v, g = rng.standard_normal((2, batches, tokens, 64))
    scores = q @ np.swapaxes(k, -1, -2)
    z = Tensor(scores / math.sqrt(d_k) if scaled else scores, requires_grad=True)
    weights = z.softmax(-1)
    ((weights @ Tensor(v)) * Tensor(g)).sum().backward()
    largest = weights.data.max(-1)
    return {"mean_grad": float(np.abs(z.grad).mean()), "median_grad": float(np.median(np.abs(z.grad))),
            "mean_largest_weight": float(largest.mean()), "one_hot_rows": float((largest > 0.99).mean())}


def section_scaling(figures=None) -> dict:
    heading(7, "为什么除以 √dₖ", "Why divide by √d_k", "Softmax 和 √dₖ")
    claim("q·k 是 dₖ 个乘积之和，每个乘积均值 0、方差 1，所以总和的方差是 dₖ；除以 √dₖ 让方差回到 1",
          "q·k adds d_k products of mean 0 and variance 1, so Var(q·k) = d_k; dividing by √d_k brings "
          "the variance back to 1 (20 000 samples, seed 0)")
    variances = {}
    for d_k in (64, 512):
        raw, scaled = dot_product_variance(d_k)
        variances[d_k] = (raw, scaled)
        check(f"d_k = {d_k}: Var(q·k) / d_k, Var(q·k/√d_k)", f"{raw / d_k:.3f}, {scaled:.3f}", "1, 1",
              abs(raw / d_k - 1) < 0.05 and abs(scaled - 1) < 0.05)
    claim("不缩放时点积很大，softmax 饱和，传回的梯度几乎为零",
          "unscaled dot products are large: the softmax saturates and passes back almost no gradient")
    saturation = {}
    for scaled in (False, True):
        s = saturation[scaled] = softmax_input_gradient(512, scaled)
        show(f"d_k = 512, {'with   ' if scaled else 'without'} ÷√d_k",
             f"rows with a weight > 0.99: {s['one_hot_rows']:4.0%};  |∂L/∂(softmax input)| "
             f"mean {s['mean_grad']:.2e}, median {s['median_grad']:.1e}")
    unscaled, scaled = saturation[False], saturation[True]
    check("median |gradient| without ÷√d_k / with", f"{unscaled['median_grad'] / scaled['median_grad']:.0e}",
          "unscaled gradients nearly vanish",
          unscaled["one_hot_rows"] > 0.5 and unscaled["median_grad"] < 1e-6 * scaled["median_grad"])

    rng = np.random.default_rng(0)
    x, y = rng.normal(1.0, 1.0, (2, 1_000_000))
    product_variance = float((x * y).var())
    note("两个独立、方差为 1 的变量相乘，积的方差为 1 需要两者均值都是 0（文中正是这样假设的）："
         "Var(XY) = Var X·Var Y + Var X·(E Y)² + Var Y·(E X)²",
         f"Var(XY) = 1 for independent unit-variance X, Y only when their means are 0 (as the article assumes): "
         f"with means 1, Var(XY) = 1 + 1 + 1 = 3; measured {product_variance:.3f} (10⁶ samples)")
    return {"variances": variances, "unscaled": unscaled, "scaled": scaled,
            "product_variance_mean_one": product_variance}


# ---------------------------------------------------------------- 8. softmax + cross-entropy gradient
def section_xent_grad(figures=None) -> dict:
    heading(8, "Softmax + 交叉熵的梯度", "The softmax + cross-entropy gradient", "Softmax 和 √dₖ")
    claim("softmax 后接交叉熵，对 logit 的梯度就是预测减目标：∂L/∂z_i = ŷ_i − y_i，"
          "∂L/∂b_i = ŷ_i − y_i，∂L/∂W_ik = (ŷ_i − y_i)·x_k",
          "through softmax, cross-entropy's gradient is prediction minus target: ∂L/∂z_i = ŷ_i − y_i, "
          "∂L/∂b_i = ŷ_i − y_i, ∂L/∂W_ik = (ŷ_i − y_i)·x_k")
    rng = np.random.default_rng(0)
    classes, target = 5, 2
    z = Tensor(rng.standard_normal((1, classes)), requires_grad=True)
    F.cross_entropy(z, np.array([target])).backward()
    y_hat, y = softmax64(z.data[0]), np.eye(classes)[target]
    z_error = float(np.abs(z.grad[0] - (y_hat - y)).max())
    check("autograd ∂L/∂z vs ŷ − y", f"{fmt(z.grad[0], 3)} (max diff {z_error:.0e})", "ŷ − y",
          z_error < 1e-12)

    def loss_at(values):
        return float(F.cross_entropy(Tensor(values), np.array([target])).data)
    h = 1e-6
    numeric = np.array([(loss_at(z.data + h * e) - loss_at(z.data - h * e)) / (2 * h)
                        for e in np.eye(classes)[:, None]])
    fd_error = float(np.abs(numeric - (y_hat - y)).max())
    check("central finite differences vs ŷ − y", f"max diff {fd_error:.0e}", "ŷ − y", fd_error < 1e-8)

    tl.manual_seed(0)
    layer = Linear(4, classes, dtype=np.float64)
    x = rng.standard_normal(4)
    F.cross_entropy(layer(Tensor(x[None])), np.array([target])).backward()
    y_hat = softmax64(layer.weight.data @ x + layer.bias.data)
    w_error = float(np.abs(layer.weight.grad - np.outer(y_hat - y, x)).max())
    b_error = float(np.abs(layer.bias.grad - (y_hat - y)).max())
    check("z = Wx + b: ∂L/∂W vs (ŷ − y)xᵀ, ∂L/∂b vs ŷ − y", f"max diff {w_error:.0e}, {b_error:.0e}",
          "(ŷ − y)·x_k, ŷ − y", max(w_error, b_error) < 1e-12)
    note("文中引出输出概率分布时误贴了一遍 QKᵀ 的公式；看其后对 W、b 的求导，原意是 z = Wx + b",
         "where the article introduces the output distribution it repeats the QKᵀ formula by mistake; "
         "the W and b derivatives that follow mean z = Wx + b, as computed here")

    saturated = np.array([[0.0, 40.0, 0.0, 0.0, 0.0]])
    grads = {}
    for label, cls in (("right", 1), ("wrong", 0)):
        t = Tensor(saturated.copy(), requires_grad=True)
        F.cross_entropy(t, np.array([cls])).backward()
        grads[label] = t.grad[0]
    note("文中说饱和之后预测对也好错也好，梯度都接近 0。softmax 直接接交叉熵时，饱和且预测错误的梯度 "
         "ŷ − y 并不小（有 ±1 两项）；梯度消失发生在 softmax 位于网络中间（如注意力）时，见 §7",
         f"with cross-entropy right after a saturated softmax, a wrong prediction still gets ŷ − y = "
         f"{fmt(grads['wrong'], 1)} (two entries ±1, not vanishing); a right one gets {fmt(grads['right'], 1)}. "
         "The vanishing gradients are those of a softmax inside the network, as in attention (§7)")
    return {"z_error": z_error, "fd_error": fd_error, "w_error": w_error, "b_error": b_error,
            "saturated_wrong_grad": grads["wrong"], "saturated_right_grad": grads["right"]}


# ---------------------------------------------------------------- 9. multi-head attention
def section_multihead(figures=None) -> dict:
    heading(9, "多头注意力", "Multi-head attention", "多头注意力机制")
    claim("MultiHead(Q,K,V) = Concat(head_1, …, head_h)W^O：512 维分给 8 个头，各自在 64 维里算注意力，"
          "拼回 512 维后乘 W^O",
          "MultiHead(Q,K,V) = Concat(head_1, …, head_h)W^O: 512 = 8 heads × 64, each attending in its "
          "own 64 dimensions; the heads are concatenated back and projected by W^O")
    _, x2 = six_token_input()
    x = x2.reshape(1, 6, D_MODEL)
    tl.manual_seed(1)
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

    depth, width = 10, 64
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
    _, x = six_token_input()
    tl.manual_seed(0)
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


# ---------------------------------------------------------------- 12. masked self-attention
def section_causal(figures=None) -> dict:
    heading(12, "掩码自注意力", "Masked (causal) self-attention", "Masked Multi-Head Attention")
    claim("逐行 softmax 之前，把 QKᵀ 中对角线以上（即未来位置）的分数改成 −∞",
          "before the row softmax, the scores above QKᵀ's diagonal (the future positions) become −∞")
    _, x = six_token_input()
    tl.manual_seed(0)
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


# ---------------------------------------------------------------- 14. positional encoding
def shift_error(table: np.ndarray, k: int) -> float:
    """Max |PE(pos+k) − PE(pos)·M_k| over all positions and dimension pairs, with the row vector
    [sin, cos] of each pair times M_k = [[cos kω, −sin kω], [sin kω, cos kω]]."""
    d_model = table.shape[1]
    omega = 1.0 / 10000.0 ** (np.arange(0, d_model, 2) / d_model)
    worst = 0.0
    for i, w in enumerate(omega):
        rotation = np.array([[math.cos(k * w), -math.sin(k * w)], [math.sin(k * w), math.cos(k * w)]])
        pair = table[:, 2 * i:2 * i + 2]
        worst = max(worst, float(np.abs(pair[:-k] @ rotation - pair[k:]).max()))
    return worst


def boss_output(attention, pe, table, vocab, sentence: str, with_pe: bool) -> np.ndarray:
    """The self-attention output at 老板's two characters."""
    x = Tensor(table[vocab.encode(tokenize_zh(sentence))][None])
    if with_pe:
        x = pe(x)
    at = sentence.index("老板")
    return attention(x, x, x).data[0, at:at + 2]


def section_pe(figures=None) -> dict:
    heading(14, "位置编码", "Positional encoding", "位置编码")
    claim("正弦位置编码：PE(pos,2i) = sin(pos/10000^(2i/d_model))，PE(pos,2i+1) = cos(pos/10000^(2i/d_model))",
          "the sinusoidal encoding: PE(pos,2i) = sin(pos/10000^(2i/d_model)), "
          "PE(pos,2i+1) = cos(pos/10000^(2i/d_model))")
    table = sinusoidal_table(100, D_MODEL, dtype=np.float64)
    pos, i = 7, 10
    formula = (math.sin(pos / 10000 ** (2 * i / D_MODEL)), math.cos(pos / 10000 ** (2 * i / D_MODEL)))
    check(f"PE({pos}, {2 * i}), PE({pos}, {2 * i + 1})", fmt(table[pos, 2 * i:2 * i + 2], 6), fmt(formula, 6),
          np.allclose(table[pos, 2 * i:2 * i + 2], formula))
    claim("PE(pos+k) 由 PE(pos) 和偏移 k 决定：每一对 (sin, cos) 维度上都是一个只依赖 k 的旋转",
          "PE(pos+k) follows from PE(pos) and k alone: [sin, cos]·[[cos kω, −sin kω], [sin kω, cos kω]]")
    errors = {k: shift_error(table, k) for k in (1, 5, 17)}
    check("max |PE(pos+k) − PE(pos)·M_k| over 100 positions × 256 pairs, k = 1, 5, 17",
          ", ".join(f"{e:.0e}" for e in errors.values()), "0 (sin/cos addition formulas)",
          max(errors.values()) < 1e-9)
    claim("维度编号 i 越大，这一维随 pos 变化得越慢，周期越长",
          "the higher the dimension index i, the slower it varies with pos: wavelengths grow")
    wavelengths = 2 * math.pi * 10000.0 ** (np.arange(0, D_MODEL, 2) / D_MODEL)
    check("wavelength 2π·10000^(2i/d_model), i = 0 … 255",
          f"{wavelengths[0]:.2f}, {wavelengths[1]:.2f}, … {wavelengths[-1]:,.0f} (increasing)", "grows",
          bool(np.all(np.diff(wavelengths) > 0)))
    claim("公式对任何 pos 都能直接算，长度不受限制", "the formula gives any position, so any length works")
    short = PositionalEncoding(D_MODEL, dropout=0.0, max_len=8)
    long_out = short(Tensor(np.zeros((1, 1000, D_MODEL), np.float32))).data[0]
    length_error = float(np.abs(long_out - sinusoidal_table(1000, D_MODEL)).max())
    check("PositionalEncoding(max_len = 8) on 1000 positions vs the formula", f"max diff {length_error:.0e}",
          "any length", length_error < 1e-6)
    note("公式里的 i 不是“特征维度”本身，而是维度对的编号：第 2i 和 2i+1 维共用一个频率",
         "i is the index of a pair of dimensions (2i and 2i+1 share one frequency), not the dimension itself")

    claim("没有位置信息时，把“我”和“你”对调（我是你老板 / 你是我老板），“老板”得到的注意力输出完全一样",
          "without position information, swapping 我 and 你 (我是你老板 / 你是我老板) leaves 老板's "
          "attention output unchanged")
    vocab = toy_vocab("我是你老板")
    embedding_table = np.random.default_rng(0).standard_normal((len(vocab), D_MODEL)).astype(np.float32)
    tl.manual_seed(0)
    attention = MultiHeadAttention(D_MODEL, H, dropout=0.0)
    pe = PositionalEncoding(D_MODEL, dropout=0.0)
    differences = {}
    for with_pe in (False, True):
        a, b = (boss_output(attention, pe, embedding_table, vocab, sentence, with_pe)
                for sentence in ("我是你老板", "你是我老板"))
        differences[with_pe] = float(np.abs(a - b).max() / np.abs(a).max())
    check("老板's self-attention output, 我是你老板 vs 你是我老板, without PE",
          f"relative max diff {differences[False]:.0e}", "the same", differences[False] < 1e-5)
    check("… with PE", f"relative max diff {differences[True]:.2f}", "differs", differences[True] > 1e-2)
    files = [] if figures is None else [figures.draw(FIGURE_NAMES["pe"], "plot_positional_encoding", table)]
    return {"formula_value": formula, "shift_errors": errors, "wavelengths": wavelengths,
            "length_error": length_error, "boss_difference_without_pe": differences[False],
            "boss_difference_with_pe": differences[True], "files": files}


# ---------------------------------------------------------------- 15. end to end
def find_checkpoint(checkpoint=None) -> Path | None:
    if checkpoint is not None:
        return Path(checkpoint)
    for candidate in (DEFAULT_CHECKPOINT, LATEST_CHECKPOINT):
        if candidate.is_file():
            return candidate
    return None


def section_translate(figures=None, checkpoint=None) -> dict:
    heading(15, "端到端翻译", "End to end: translate the sentence", "Transformer")
    claim(f"贯穿全文的例子：把“{SENTENCE}”译成“{TRANSLATION}”",
          f"the running example: translate {SENTENCE} into {TRANSLATION}")
    path = find_checkpoint(checkpoint)
    if path is None:
        show("no checkpoint", f"{DEFAULT_CHECKPOINT} does not exist; train the toy translator with "
             "`python -m transformer train` (minutes on a CPU), then rerun with --checkpoint PATH")
        return {"checkpoint": None, "translation": None}
    from transformer.translator import Translator
    translator = Translator.load(path)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        translation = translator.translate(SENTENCE)
    for w in caught:
        show("warning", w.message)
    ok = translation.strip().rstrip(" .").lower() == TRANSLATION.lower()
    check(f"greedy translation ({path})", translation, TRANSLATION, ok)
    files = []
    if figures is not None:
        weights, queries, keys = translator.attention_maps(SENTENCE)["cross-attention"]
        files.append(figures.draw("translation_cross_attention.png", "plot_attention", weights,
                                  keys, queries, kind="cross-attention", title=SENTENCE))
    return {"checkpoint": str(path), "translation": translation, "matches": ok, "files": files}


# ---------------------------------------------------------------- running
SECTIONS = {
    "xor": section_xor, "descent": section_descent, "embedding": section_embedding,
    "attention": section_attention, "lookup": section_lookup, "temperature": section_temperature,
    "scaling": section_scaling, "xent-grad": section_xent_grad, "multihead": section_multihead,
    "addnorm": section_addnorm, "ffn": section_ffn, "causal": section_causal,
    "cross": section_cross,
    "pe": section_pe, "translate": section_translate,
}


def run(names, figures: Figures | None = None, checkpoint=None) -> dict:
    """Run the named sections in order; returns name -> that section's results."""
    results = {}
    for name in names:
        kwargs = {"checkpoint": checkpoint} if name == "translate" else {}
        results[name] = SECTIONS[name](figures=figures, **kwargs)
    return results


def main(argv=None, load_plots=None) -> int:
    """The command line. `load_plots()` returns the plotting module (viz.plots); it is called only
    for --figures, so the caller decides whether and how the plotting layer is imported."""
    parser = argparse.ArgumentParser(prog="python -m transformer explain",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--section", metavar="NAME",
                        help=f"run one section: {', '.join(SECTIONS)} (or 1–15)")
    parser.add_argument("--figures", metavar="DIR", help="write the figures into DIR")
    parser.add_argument("--checkpoint", metavar="PATH",
                        help=f"translator checkpoint for §15 "
                             f"(default {DEFAULT_CHECKPOINT} if it exists)")
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["--"]:  # `python -m transformer explain -- --section pe` passes `--` on
        argv = argv[1:]
    args = parser.parse_args(argv)
    encoding = (sys.stdout.encoding or "").lower().replace("-", "")
    if hasattr(sys.stdout, "reconfigure") and encoding != "utf8":
        sys.stdout.reconfigure(errors="backslashreplace")
    names = list(SECTIONS)
    if args.section is not None:
        chosen = args.section.strip().lower()
        if chosen.isdigit() and 1 <= int(chosen) <= len(names):
            chosen = names[int(chosen) - 1]
        if chosen not in SECTIONS:
            print(f"walkthrough: unknown section {args.section!r}; "
                  f"valid names: {', '.join(SECTIONS)}", file=sys.stderr)
            return 2
        names = [chosen]
    if args.checkpoint is not None and not Path(args.checkpoint).is_file():
        print(f"walkthrough: checkpoint {args.checkpoint} does not exist "
              "(train one with `python -m transformer train`)", file=sys.stderr)
        return 2
    if args.figures is not None and load_plots is None:
        print("walkthrough: --figures needs a plotting module; run `python -m transformer explain "
              "--figures DIR`, which passes viz.plots in", file=sys.stderr)
        return 2
    figures = None if args.figures is None else Figures(args.figures, load_plots())
    Tally.passed = Tally.failed = 0
    run(names, figures=figures, checkpoint=args.checkpoint)
    where = "" if args.figures is None else f"; figures in {args.figures}"
    print(f"\n{Tally.passed} ✓, {Tally.failed} ✗{where}")
    return 0
