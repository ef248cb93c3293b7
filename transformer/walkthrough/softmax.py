"""§6-8 of the walkthrough, the article's "Softmax 和 √dₖ": softmax with a temperature against the
article's numbers, why the paper divides QKᵀ by √d_k (§3.2.1: variance d_k, saturated softmax),
and the softmax + cross-entropy gradient ŷ − y."""
from __future__ import annotations

import math

import numpy as np

import tinygrad_lite as tl
from tinygrad_lite import Tensor
from tinygrad_lite.nn import Linear
from tinygrad_lite.nn import functional as F
from transformer.walkthrough.example import softmax64
from transformer.walkthrough.printing import FIGURE_NAMES, check, claim, fmt, heading, matches_printed, note, show

# The article's printed numbers, kept as printed so the comparison uses their precision.
ARTICLE_TEMPERATURE_LOGITS = (3, 5, -10, 20)
ARTICLE_T10_SOFTMAX = ("0.1255", "0.1533", "0.0342", "0.6870")


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
