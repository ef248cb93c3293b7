"""Adam and AdamW (Kingma & Ba, 2015; Loshchilov & Hutter, 2019) with PyTorch's exact update.

The paper trains the Transformer with Adam, β1 = 0.9, β2 = 0.98, ε = 1e-9 (§5.3).
"""
from __future__ import annotations

import math

import numpy as np

from .optimizer import Optimizer, check_number


class Adam(Optimizer):
    """For each step t (from 1), as PyTorch:
        g ← g + weight_decay·p                      (Adam: L2 penalty in the gradient)
        m ← β1·m + (1−β1)·g,   v ← β2·v + (1−β2)·g²
        p ← p − lr/(1−β1^t) · m / (sqrt(v)/sqrt(1−β2^t) + eps)
    """

    _decoupled = False

    def __init__(self, params, lr: float = 1e-3, betas=(0.9, 0.999), eps: float = 1e-8, weight_decay: float = 0.0):
        super().__init__(params, {"lr": lr, "betas": tuple(betas), "eps": eps, "weight_decay": weight_decay})

    def _validate(self, group):
        name = type(self).__name__
        super()._validate(group)
        betas = group["betas"]
        if len(betas) != 2:
            raise ValueError(f"{name}: betas must be a pair (beta1, beta2), got {betas!r}")
        group["betas"] = tuple(betas)
        check_number(name, "beta1", betas[0], 0.0, 1.0, high_open=True)
        check_number(name, "beta2", betas[1], 0.0, 1.0, high_open=True)
        check_number(name, "eps", group["eps"])
        check_number(name, "weight_decay", group["weight_decay"])

    def step(self) -> None:
        for group in self.param_groups:
            lr, (beta1, beta2), eps, wd = group["lr"], group["betas"], group["eps"], group["weight_decay"]
            for p in group["params"]:
                g = p.grad
                if g is None:
                    continue
                data = p.data
                state = self.state.get(p)
                if state is None:
                    state = self.state[p] = {"step": 0, "exp_avg": np.zeros_like(data),
                                             "exp_avg_sq": np.zeros_like(data)}
                state["step"] += 1
                t = state["step"]
                if wd:
                    if self._decoupled:
                        data *= 1 - lr * wd
                    else:
                        g = g + wd * data
                m, v = state["exp_avg"], state["exp_avg_sq"]
                scratch = np.multiply(g, g)
                scratch *= 1 - beta2
                v *= beta2
                v += scratch
                np.multiply(g, 1 - beta1, out=scratch)
                m *= beta1
                m += scratch
                np.sqrt(v, out=scratch)
                scratch /= math.sqrt(1 - beta2 ** t)
                scratch += eps
                np.divide(m, scratch, out=scratch)
                scratch *= lr / (1 - beta1 ** t)
                data -= scratch

class AdamW(Adam):
    """Adam with decoupled weight decay: p ← p·(1 − lr·weight_decay) before the Adam step
    (instead of adding weight_decay·p to the gradient)."""

    _decoupled = True

    def __init__(self, params, lr: float = 1e-3, betas=(0.9, 0.999), eps: float = 1e-8, weight_decay: float = 1e-2):
        super().__init__(params, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay)
