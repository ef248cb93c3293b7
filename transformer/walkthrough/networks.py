"""§1-2 of the walkthrough, the article's warm-up before the Transformer (多层神经网络 · 激活函数,
损失函数 与 反向传播): XOR needs a hidden layer and an activation, stacked linear layers are one
linear layer, and gradient descent walks downhill at a pace the learning rate sets."""
from __future__ import annotations

import itertools

import numpy as np

import tinygrad_lite as tl
from tinygrad_lite import Tensor
from tinygrad_lite.nn import Linear, Sequential, Tanh
from tinygrad_lite.nn import functional as F
from transformer.walkthrough.printing import FIGURE_NAMES, check, claim, fmt, heading, show

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
