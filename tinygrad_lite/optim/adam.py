"""Adam and AdamW (Kingma & Ba, 2015; Loshchilov & Hutter, 2019) with PyTorch's exact update.

The paper trains the Transformer with Adam, β1 = 0.9, β2 = 0.98, ε = 1e-9 (§5.3). The update
below runs as one pass per parameter in a Numba kernel, or as its NumPy twin, one array
operation at a time (tinygrad_lite.kernels.adam).
"""
from __future__ import annotations

import numpy as np

from ..checks import number
from ..kernels.adam import adam_update_numba, adam_update_numpy
from ..kernels.backend import use_numba
from .optimizer import Optimizer

__all__ = ["Adam", "AdamW", "adam_update_numba", "adam_update_numpy"]


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

    def step(self) -> None:
        """One Adam (or AdamW) update of every parameter that has a grad, in place, like
        torch.optim.Adam.step."""
        update = adam_update_numba if use_numba() else adam_update_numpy
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
                update(data, g, state["exp_avg"], state["exp_avg_sq"], lr, beta1, beta2, eps, wd,
                       self._decoupled, state["step"])

class AdamW(Adam):
    """Adam with decoupled weight decay: p ← p·(1 − lr·weight_decay) before the Adam step
    (instead of adding weight_decay·p to the gradient)."""

    _decoupled = True

    def __init__(self, params, lr: float = 1e-3, betas=(0.9, 0.999), eps: float = 1e-8, weight_decay: float = 1e-2):
        super().__init__(params, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay)
