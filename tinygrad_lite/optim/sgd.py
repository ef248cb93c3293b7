"""Stochastic gradient descent, with PyTorch's momentum, dampening, Nesterov and weight decay."""
from __future__ import annotations

import numpy as np

from ..autograd import recorded
from ..checks import number
from .optimizer import Optimizer


class SGD(Optimizer):
    """The article's "walk downhill": p ← p − lr·g. With momentum μ (as PyTorch):
        g ← g + weight_decay·p
        b ← μ·b + (1 − dampening)·g     (b = g on the first step)
        g ← g + μ·b if nesterov else b
        p ← p − lr·g
    """

    def __init__(self, params, lr: float = 1e-3, momentum: float = 0.0, dampening: float = 0.0,
                 nesterov: bool = False, weight_decay: float = 0.0):
        super().__init__(params, {"lr": lr, "momentum": momentum, "dampening": dampening, "nesterov": nesterov,
                                      "weight_decay": weight_decay})

    def _validate(self, group):
        super()._validate(group)
        number("SGD", "momentum", group["momentum"], 0.0)
        number("SGD", "dampening", group["dampening"], 0.0)
        number("SGD", "weight_decay", group["weight_decay"], 0.0)
        if group["nesterov"] and (group["momentum"] <= 0 or group["dampening"] != 0):
            raise ValueError(f"SGD: nesterov needs momentum > 0 and dampening = 0, got momentum="
                             f"{group['momentum']}, dampening={group['dampening']}")

    @recorded
    def step(self) -> None:
        """One SGD update of every parameter that has a grad, in place, like
        torch.optim.SGD.step."""
        for group in self.param_groups:
            lr, mu, damp = group["lr"], group["momentum"], group["dampening"]
            wd, nesterov = group["weight_decay"], group["nesterov"]
            for p in group["params"]:
                g = p.grad
                if g is None:
                    continue
                data = p.data
                g_is_temp = wd != 0
                if g_is_temp:
                    g = g + wd * data
                if mu:
                    state = self.state.setdefault(p, {})
                    buf = state.get("momentum_buffer")
                    if buf is None:
                        buf = state["momentum_buffer"] = np.array(g, dtype=data.dtype, copy=True)
                    else:
                        buf *= mu
                        buf += (1 - damp) * g if damp else g
                    if nesterov:
                        if g_is_temp:
                            g += mu * buf
                        else:
                            g, g_is_temp = g + mu * buf, True
                    else:
                        g, g_is_temp = buf, False
                if g_is_temp:
                    g *= lr
                    data -= g
                else:
                    data -= lr * g
