"""Gradient clipping by global norm (as `torch.nn.utils.clip_grad_norm_`): the guard against a
single exploding step throwing the weights off the hill."""
from __future__ import annotations

import math

import numpy as np

from ..autograd import recorded
from ..checks import number
from ..tensor import Tensor


def _sum_of_squares(g: np.ndarray) -> float:
    """Σ g² by BLAS in g's dtype, redone in float64 if float32 overflowed (exploding gradients)."""
    flat = g.reshape(-1)
    with np.errstate(over="ignore"):
        total = float(np.dot(flat, flat))
    if math.isinf(total) and g.dtype != np.float64:
        total = float(np.square(flat, dtype=np.float64).sum())
    return total


@recorded
def clip_grad_norm_(parameters, max_norm: float, norm_type: float = 2.0, error_if_nonfinite: bool = False) -> float:
    """Scale all grads together so their joint `norm_type`-norm is at most `max_norm`; returns the
    norm before clipping. Grads are multiplied by min(1, max_norm / (norm + 1e-6)), as PyTorch, with
    no branch (a replayed step scales the same way every time). Unlike PyTorch, a float32 sum of
    squares that overflows is redone in float64, so huge-but-finite gradients are clipped rather
    than zeroed. A NaN or Inf norm is returned as is (and, as PyTorch, turns the grads into NaN/0);
    error_if_nonfinite=True raises FloatingPointError instead. max_norm may be inf (no clipping);
    norm_type is > 0 or inf."""
    max_norm = number("clip_grad_norm_", "max_norm", max_norm, 0.0, allow_inf=True)
    norm_type = number("clip_grad_norm_", "norm_type", norm_type, 0.0, low_open=True, allow_inf=True)
    params = [parameters] if isinstance(parameters, Tensor) else list(parameters)
    grads = [p.grad for p in params if p.grad is not None]
    if not grads:
        return 0.0
    if norm_type == math.inf:
        total = max(float(np.abs(g).max()) if g.size else 0.0 for g in grads)
    elif norm_type == 2.0:
        total = math.sqrt(sum(_sum_of_squares(g) for g in grads))
    else:
        total = sum(float((np.abs(g) ** norm_type).sum()) for g in grads) ** (1.0 / norm_type)
    if not math.isfinite(total) and error_if_nonfinite:
        raise FloatingPointError(f"clip_grad_norm_: the total {norm_type}-norm of the gradients is {total}")
    scale = np.minimum(1.0, max_norm / (total + 1e-6))  # min(1, c/‖g‖): 1 leaves the grads as they are
    with np.errstate(invalid="ignore"):
        for g in grads:
            g *= scale.astype(g.dtype)
    return total
