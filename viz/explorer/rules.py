"""Each op's local derivative rule: how the gradient g = ∂L/∂out of an op's output becomes the
gradients of its inputs. One table for the scalar Value ops and the Tensor ops (unary, binary,
reduce, movement, nn and the fast path's fused ops), so the explorer names the rule at each step.
"""
from __future__ import annotations

import re

from ..fast_ops import FAST_OPS

SCALAR_RULES = {
    "+": "out = a + b  →  ∂a += g,  ∂b += g",
    "-": "out = a − b  →  ∂a += g,  ∂b += −g",
    "*": "out = a·b  →  ∂a += g·b,  ∂b += g·a",
    "/": "out = a / b  →  ∂a += g / b,  ∂b += −g·a / b²",
    "**": "out = aᵇ  →  ∂a += g·b·aᵇ⁻¹,  ∂b += g·aᵇ·ln a",
    "neg": "out = −a  →  ∂a += −g",
}
_POWER_RULE = "out = a^{k}  →  ∂a += g·{k}·a^({k}−1)"

TENSOR_RULES = {
    # unary, elementwise
    "neg": "out = −x  →  ∂x += −g",
    "exp": "out = eˣ  →  ∂x += g·out",
    "log": "out = ln x  →  ∂x += g / x",
    "sqrt": "out = √x  →  ∂x += g / (2·out)",
    "sin": "out = sin x  →  ∂x += g·cos x",
    "cos": "out = cos x  →  ∂x += −g·sin x",
    "abs": "out = |x|  →  ∂x += g·sign(x)",
    "tanh": "out = tanh x  →  ∂x += g·(1 − out²)",
    "sigmoid": "out = σ(x)  →  ∂x += g·out·(1 − out)",
    "relu": "out = max(x, 0)  →  ∂x += g·[x > 0]",
    "gelu": "out = x·Φ(x)  →  ∂x += g·(Φ(x) + x·φ(x))",
    "clamp": "out = clamp(x, lo, hi)  →  ∂x += g·[lo ≤ x ≤ hi]",
    "pow": "out = xᵏ  →  ∂x += g·k·xᵏ⁻¹  (and ∂k += g·out·ln x for a tensor exponent)",
    "cast": "out = x as another dtype  →  ∂x += g cast back",
    "clone": "out = x (a copy)  →  ∂x += g",
    # binary, broadcasting: a gradient is summed over the axes its input was broadcast along
    "add": "out = a + b  →  ∂a += g,  ∂b += g  (each summed over its broadcast axes)",
    "sub": "out = a − b  →  ∂a += g,  ∂b += −g  (summed over broadcast axes)",
    "mul": "out = a·b  →  ∂a += g·b,  ∂b += g·a  (summed over broadcast axes)",
    "div": "out = a / b  →  ∂a += g / b,  ∂b += −g·a / b²  (summed over broadcast axes)",
    "maximum": "out = max(a, b)  →  the larger input gets g (a tie splits it)",
    "where": "out = where(c, a, b)  →  ∂a += g·c,  ∂b += g·(1 − c)",
    "masked_fill": "out = x with masked entries set to v  →  ∂x += g·(1 − mask)",
    "matmul": "out = A·B  →  ∂A += g·Bᵀ,  ∂B += Aᵀ·g",
    # reduce
    "sum": "out = Σ x  →  ∂x += g broadcast back over the summed axes",
    "max": "out = max x  →  ∂x += g at the position of the maximum (split among ties)",
    "logsumexp": "out = ln Σ eˣ  →  ∂x += g·softmax(x)",
    # movement: the gradient is moved back the way the data came
    "reshape": "out = x viewed as a new shape  →  ∂x += g reshaped back",
    "transpose": "out = x with two axes swapped  →  ∂x += g with them swapped back",
    "permute": "out = x with axes reordered  →  ∂x += g with the inverse permutation",
    "expand": "out = x broadcast to a bigger shape  →  ∂x += g summed over the new axes",
    "getitem": "out = x[idx]  →  ∂x[idx] += g, zeros elsewhere",
    "gather": "out = x gathered at idx  →  ∂x scatter-adds g back at idx",
    "cat": "out = [a, b, …] joined  →  each input gets its slice of g",
    # nn
    "softmax": "y = softmax(x)  →  ∂x += y·(g − Σ g·y)",
    "softmax (masked)": "y = softmax(x·s + mask)  →  ∂x += s·y·(g − Σ g·y); masked entries get 0",
    "log_softmax": "y = log_softmax(x)  →  ∂x += g − softmax(x)·Σ g",
    "linear": "out = x·Wᵀ + b  →  ∂x += g·W,  ∂W += gᵀ·x,  ∂b += Σ_rows g",
    "embedding": "out = W[ids]  →  ∂W[ids] += g (scatter-add: a repeated id adds up)",
    "layer_norm": "y = γ·x̂ + β, x̂ = (x − μ)/σ  →  ∂x += (γ·g − mean(γ·g) − x̂·mean(γ·g·x̂)) / σ,  "
                  "∂γ += Σ g·x̂,  ∂β += Σ g",
    "dropout": "out = x·keep / (1 − p)  →  ∂x += g·keep / (1 − p)",
    "cross_entropy": "L = mean over real tokens of −ln softmax(z)[target]  →  ∂z += (softmax(z) − onehot(target)) "
                     "/ n",
    "binary_cross_entropy_with_logits": "L = mean(ln(1 + eˢ) − t·s)  →  ∂s += (σ(s) − t) / n",
}

# a Value's exp, log, tanh, relu, sigmoid and gelu share the Tensor's (elementwise) rule
LOCAL_RULES = {**SCALAR_RULES, **TENSOR_RULES,
               **{op: f"out = {formula}  →  each input gets its part of g (one fused op of the fast path)"
                  for op, formula in FAST_OPS.items()}}
LEAF_RULE = "a leaf (parameter or input): no op below it; its .grad is what the optimizer reads"
_POWER = re.compile(r"^\*\*(-?\d+(?:\.\d+)?(?:e-?\d+)?)$")


def cross_entropy_rule(label_smoothing: float) -> str:
    """The cross-entropy rule of a model trained with label smoothing ε (the translator's recipe):
    the target is one-hot mixed with uniform."""
    eps = f"{label_smoothing:g}"
    return (f"L = mean over real tokens of −Σ_c q_c·ln softmax(z)_c, q = (1−ε)·onehot(target) + ε/C, "
            f"ε = {eps} (label smoothing)  →  ∂z += (softmax(z) − q) / n")


def local_rule(op: str) -> str:
    """The rule for `op` (a Value's '+', '**2', …, or a Tensor's 'matmul', …); '' is a leaf."""
    if not op:
        return LEAF_RULE
    if op in LOCAL_RULES:
        return LOCAL_RULES[op]
    power = _POWER.match(op)
    if power:
        return _POWER_RULE.format(k=power.group(1))
    return f"unknown op {op!r}: no rule in viz/explorer/rules.py (its backward still ran)"


def is_known(op: str) -> bool:
    return not local_rule(op).startswith("unknown op")
