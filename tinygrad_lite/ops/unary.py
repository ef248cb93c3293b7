"""Unary elementwise math: exp, log, sqrt, sin, cos, abs, tanh, sigmoid, relu, gelu, clamp and neg.
Each maps every element on its own, so its backward multiplies the incoming gradient by the
derivative at that element."""
from __future__ import annotations

import math

import numpy as np

from ..autograd import is_grad_enabled
from ..dispatch import has_twin

SQRT_2_OVER_PI = math.sqrt(2 / math.pi)
CUBIC = 0.044715  # the tanh approximation's x³ coefficient


class UnaryOps:
    """The elementwise math methods of Tensor (a mixin: Tensor inherits them). Each runs its op
    below, a function of arrays that returns the output and its backward."""

    __slots__ = ()

    def exp(self):
        """Returns e ** x elementwise, like torch.exp."""
        return self._apply(exp_op, "exp", (self,))

    def log(self):
        """Returns the natural logarithm elementwise, like torch.log."""
        return self._apply(log_op, "log", (self,))

    def sqrt(self):
        """Returns the square root elementwise, like torch.sqrt."""
        return self._apply(sqrt_op, "sqrt", (self,))

    def sin(self):
        """Returns the sine elementwise (radians), like torch.sin."""
        return self._apply(sin_op, "sin", (self,))

    def cos(self):
        """Returns the cosine elementwise (radians), like torch.cos."""
        return self._apply(cos_op, "cos", (self,))

    def abs(self):
        """Returns |x| elementwise (gradient 0 at 0), like torch.abs."""
        return self._apply(abs_op, "abs", (self,))

    def tanh(self):
        """Returns the hyperbolic tangent elementwise, like torch.tanh."""
        return self._apply(tanh_op, "tanh", (self,))

    def sigmoid(self):
        """Returns 1 / (1 + e ** -x) elementwise, stable for large |x|, like torch.sigmoid."""
        return self._apply(sigmoid_op, "sigmoid", (self,))

    def relu(self):
        """Returns max(x, 0) elementwise (gradient 0 at 0), like torch.relu."""
        return self._apply(relu_op, "relu", (self,))

    def gelu(self, approximate: str = "none"):
        """GELU as in PyTorch: exact x·Φ(x) by default (Φ the standard normal CDF), or GPT-2's tanh
        approximation (gelu_forward below). Training computes value and slope in one call."""
        if approximate not in ("none", "tanh"):
            raise ValueError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")
        return self._apply(gelu_op, "gelu", (self,), approximate, self.requires_grad and is_grad_enabled())

    def clamp(self, min=None, max=None):
        """Returns x limited to [min, max] (either may be None); the gradient is 0 outside, like
        torch.clamp. `clip` is the same."""
        return self._apply(clamp_op, "clamp", (self,), min, max)

    clip = clamp

    def neg(self):
        """Returns -self, like torch.neg."""
        return self._apply(neg_op, "neg", (self,))

    __neg__ = neg


# ---------------------------------------------------------------- the ops: output, and its backward

def exp_op(x):
    out = np.exp(x)
    return out, lambda g: (g * out,)                      # d eˣ/dx = eˣ


def log_op(x):
    return np.log(x), lambda g: (g / x,)                  # d ln x/dx = 1/x


def sqrt_op(x):
    out = np.sqrt(x)
    return out, lambda g: (g / (2 * out),)                # d √x/dx = 1/(2√x)


def sin_op(x):
    return np.sin(x), lambda g: (g * np.cos(x),)


def cos_op(x):
    return np.cos(x), lambda g: (-g * np.sin(x),)


def abs_op(x):
    return np.abs(x), lambda g: (g * np.sign(x),)


def tanh_op(x):
    out = np.tanh(x)
    return out, lambda g: (g * (1 - out * out),)          # d tanh x/dx = 1 − tanh² x


def sigmoid_op(x):
    out = np.exp(-np.logaddexp(0, -x)).astype(x.dtype)    # 1/(1 + e⁻ˣ), stable for large |x|
    return out, lambda g: (g * out * (1 - out),)          # dσ/dx = σ(1 − σ)


def relu_op(x):
    return np.maximum(x, 0), lambda g: (g * (x > 0),)


def gelu_op(x, approximate, with_slope):
    if not with_slope:
        return gelu_forward(x, approximate), None
    out, slope = gelu_and_slope(x, approximate)
    return out, lambda g: (g * slope,)


def clamp_op(x, low, high):
    inside = np.ones(x.shape, dtype=bool)                 # the gradient passes only inside [low, high]
    if low is not None:
        inside &= x >= low
    if high is not None:
        inside &= x <= high
    return np.clip(x, low, high), lambda g: (g * inside,)


def neg_op(x):
    return -x, lambda g: (-g,)


# ---------------------------------------------------------------- GELU's formulas (Hendrycks & Gimpel, 2016)

@has_twin("gelu_forward")
def gelu_forward(x, approximate="none"):
    """GELU(x) = x·Φ(x) = ½·x·(1 + erf(x/√2)), or by GPT-2's tanh formula ½·x·(1 + tanh(u)),
    u = √(2/π)·(x + 0.044715·x³)."""
    if approximate == "tanh":
        return 0.5 * x * (1 + np.tanh(SQRT_2_OVER_PI * (x + CUBIC * x ** 3)))
    return x * _normal_cdf(x)


@has_twin("gelu_and_slope")
def gelu_and_slope(x, approximate="none"):
    """(GELU(x), GELU′(x)): exact, d/dx = Φ(x) + x·φ(x) with φ(x) = exp(−x²/2)/√(2π); tanh,
    d/dx = ½·(1 + tanh u) + ½·x·(1 − tanh² u)·u′, u′ = √(2/π)·(1 + 3·0.044715·x²)."""
    if approximate == "tanh":
        t = np.tanh(SQRT_2_OVER_PI * (x + CUBIC * x ** 3))
        slope = 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * SQRT_2_OVER_PI * (1 + 3 * CUBIC * x * x)
        return 0.5 * x * (1 + t), slope
    cdf = _normal_cdf(x)
    pdf = np.exp(-0.5 * x * x) / math.sqrt(2 * math.pi)
    return x * cdf, cdf + x * pdf


def _normal_cdf(x):
    """Φ(x) = ½·(1 + erf(x/√2)), in x's dtype."""
    from scipy.special import erf  # scipy is a dependency; imported on first use, not with the engine
    return (0.5 * (1 + erf(x / math.sqrt(2)))).astype(x.dtype)
