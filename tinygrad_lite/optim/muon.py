"""Muon (Jordan et al., 2024, "Muon: an optimizer for hidden layers"; Liu et al., 2025, "Muon is
Scalable for LLM Training") with PyTorch's update and arguments (torch.optim.Muon).

SGD with momentum whose step for each weight matrix is first made orthogonal: the momentum M = USVᵀ
becomes about UVᵀ, so every direction of the matrix moves by the same amount instead of the few
that dominate the gradient. A Newton–Schulz iteration gets there with matrix products alone. Muon
is for the matrices inside the network; embeddings, the output layer, biases and gains stay with
AdamW. On a character GPT it learns in 1,500 steps what AdamW learns in 4,900 (docs/gpt.md).
The products run in the parameter's dtype; PyTorch runs them in bfloat16, a 1% difference.
"""
from __future__ import annotations

import math

import numpy as np

from ..autograd import recorded
from ..checks import number, one_of
from .optimizer import Optimizer

__all__ = ["Muon", "newton_schulz"]

NS_COEFFICIENTS = (3.4445, -4.775, 2.0315)
ADJUST_LR = (None, "original", "match_rms_adamw")


def newton_schulz(G: np.ndarray, coefficients=NS_COEFFICIENTS, steps: int = 5, eps: float = 1e-7) -> np.ndarray:
    """About UVᵀ for G = USVᵀ: G scaled to norm 1, then `steps` times X ← aX + (bA + cA²)X with A = XXᵀ.
    The quintic's coefficients are chosen for speed, not exactness: the singular values end up
    between about 0.5 and 1.5, which trains as well as exactly 1 (Jordan et al., 2024)."""
    a, b, c = coefficients
    tall = G.shape[0] > G.shape[1]
    X = G.T if tall else G                                  # (rows ≤ cols): A is the smaller Gram matrix
    X = X / max(float(np.linalg.norm(X)), eps)
    for _ in range(steps):
        A = X @ X.T
        X = a * X + (b * A + c * (A @ A)) @ X
    return X.T if tall else X


class Muon(Optimizer):
    """For each 2-D parameter, as torch.optim.Muon:
        B ← μ·B + (1−μ)·g                          (momentum buffer, from 0)
        U ← (1−μ)·g + μ·B if nesterov else B
        O ← newton_schulz(U)
        p ← p·(1 − lr·weight_decay) − lr'·O        lr' = lr·√max(1, rows/cols) ("original"),
                                                    or lr·0.2·√max(rows, cols) ("match_rms_adamw")
    """

    def __init__(self, params, lr: float = 1e-3, weight_decay: float = 0.1, momentum: float = 0.95,
                 nesterov: bool = True, ns_coefficients=NS_COEFFICIENTS, eps: float = 1e-7, ns_steps: int = 5,
                 adjust_lr_fn: str | None = None):
        super().__init__(params, {"lr": lr, "weight_decay": weight_decay, "momentum": momentum, "nesterov": nesterov,
                                  "ns_coefficients": tuple(ns_coefficients), "eps": eps, "ns_steps": ns_steps,
                                  "adjust_lr_fn": adjust_lr_fn})

    def _validate(self, group):
        super()._validate(group)
        number("Muon", "weight_decay", group["weight_decay"], 0.0)
        number("Muon", "momentum", group["momentum"], 0.0, 1.0, high_open=True)
        number("Muon", "eps", group["eps"], 0.0)
        coefficients = tuple(group["ns_coefficients"])
        if len(coefficients) != 3:
            raise ValueError(f"Muon: ns_coefficients must be three numbers (a, b, c), got {coefficients!r}")
        group["ns_coefficients"] = coefficients
        steps = group["ns_steps"]
        if isinstance(steps, bool) or not isinstance(steps, int) or not 0 < steps < 100:
            raise ValueError(f"Muon: ns_steps must be an int in [1, 99], got {steps!r}")
        one_of("Muon", "adjust_lr_fn", group["adjust_lr_fn"], ADJUST_LR)
        not_matrices = [tuple(p.shape) for p in group["params"] if p.ndim != 2]
        if not_matrices:
            raise ValueError(f"Muon: every parameter must be a 2-D matrix, got shapes {not_matrices}; "
                             "give biases and LayerNorm gains (and the embeddings) to AdamW")

    @recorded
    def step(self) -> None:
        """One Muon update of every parameter that has a grad, in place, like torch.optim.Muon.step."""
        for group in self.param_groups:
            lr, wd, mu = group["lr"], group["weight_decay"], group["momentum"]
            for p in group["params"]:
                g = p.grad
                if g is None:
                    continue
                data = p.data
                state = self.state.setdefault(p, {})
                buf = state.get("momentum_buffer")
                if buf is None:
                    buf = state["momentum_buffer"] = np.zeros_like(data)
                buf += (1 - mu) * (g - buf)
                update = g + mu * (buf - g) if group["nesterov"] else buf
                ortho = newton_schulz(update, group["ns_coefficients"], group["ns_steps"], group["eps"])
                data *= 1 - lr * wd
                data -= (lr * _lr_ratio(group["adjust_lr_fn"], data.shape)) * ortho.astype(data.dtype, copy=False)


def _lr_ratio(adjust_lr_fn: str | None, shape) -> float:
    rows, cols = shape
    if adjust_lr_fn == "match_rms_adamw":
        return 0.2 * math.sqrt(max(rows, cols))
    return math.sqrt(max(1.0, rows / cols))
