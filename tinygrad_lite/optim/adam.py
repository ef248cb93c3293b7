"""Adam and AdamW (Kingma & Ba, 2015; Loshchilov & Hutter, 2019) with PyTorch's exact update.

The paper trains the Transformer with Adam, β1 = 0.9, β2 = 0.98, ε = 1e-9 (§5.3). The update of
one parameter is `adam_update` below, in NumPy; under the Numba backend its twin, one pass over
the four arrays, runs instead (tinygrad_lite.dispatch, kernels.adam), with the same float
operations in the same order, so the two agree to the last bit.
"""
from __future__ import annotations

import math

import numpy as np

from ..autograd import recorded
from ..checks import number
from ..dispatch import has_twin
from .optimizer import Optimizer

__all__ = ["Adam", "AdamW", "adam_update"]


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
        number(name, "beta1", betas[0], 0.0, 1.0, high_open=True)
        number(name, "beta2", betas[1], 0.0, 1.0, high_open=True)
        number(name, "eps", group["eps"], 0.0)
        number(name, "weight_decay", group["weight_decay"], 0.0)

    @recorded
    def step(self) -> None:
        """One Adam (or AdamW) update of every parameter that has a grad, in place, like
        torch.optim.Adam.step."""
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
                adam_update(data, g, state["exp_avg"], state["exp_avg_sq"], lr, beta1, beta2, eps, wd,
                            self._decoupled, state["step"])


class AdamW(Adam):
    """Adam with decoupled weight decay: p ← p·(1 − lr·weight_decay) before the Adam step
    (instead of adding weight_decay·p to the gradient)."""

    _decoupled = True

    def __init__(self, params, lr: float = 1e-3, betas=(0.9, 0.999), eps: float = 1e-8, weight_decay: float = 1e-2):
        super().__init__(params, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay)


@has_twin("adam_update")
def adam_update(param, grad, exp_avg, exp_avg_sq, lr, beta1, beta2, eps, weight_decay, decoupled, step):
    """One Adam step t = `step` of one parameter, in place (param, exp_avg = m and exp_avg_sq = v change):
    Adam's docstring, in the parameter's dtype."""
    if weight_decay and decoupled:
        param *= 1 - lr * weight_decay                       # AdamW: p ← p·(1 − lr·weight_decay)
    elif weight_decay:
        grad = grad + weight_decay * param                   # Adam: g ← g + weight_decay·p
    exp_avg *= beta1
    exp_avg += grad * (1 - beta1)                            # m ← β1·m + (1−β1)·g
    exp_avg_sq *= beta2
    exp_avg_sq += grad * grad * (1 - beta2)                  # v ← β2·v + (1−β2)·g²
    denominator = np.sqrt(exp_avg_sq) / math.sqrt(1 - beta2 ** step) + eps
    param -= exp_avg / denominator * (lr / (1 - beta1 ** step))
