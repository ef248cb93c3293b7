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
    """The elementwise math methods of Tensor (a mixin: Tensor inherits them)."""

    __slots__ = ()

    def exp(self):
        """Returns e ** x elementwise, like torch.exp."""
        out = np.exp(self.data)
        return self._make(out, "exp", (self,), lambda g: (g * out,))

    def log(self):
        """Returns the natural logarithm elementwise, like torch.log."""
        x = self.data
        return self._make(np.log(x), "log", (self,), lambda g: (g / x,))

    def sqrt(self):
        """Returns the square root elementwise, like torch.sqrt."""
        out = np.sqrt(self.data)
        return self._make(out, "sqrt", (self,), lambda g: (g / (2 * out),))

    def sin(self):
        """Returns the sine elementwise (radians), like torch.sin."""
        x = self.data
        return self._make(np.sin(x), "sin", (self,), lambda g: (g * np.cos(x),))

    def cos(self):
        """Returns the cosine elementwise (radians), like torch.cos."""
        x = self.data
        return self._make(np.cos(x), "cos", (self,), lambda g: (-g * np.sin(x),))

    def abs(self):
        """Returns |x| elementwise (gradient 0 at 0), like torch.abs."""
        x = self.data
        return self._make(np.abs(x), "abs", (self,), lambda g: (g * np.sign(x),))

    def tanh(self):
        """Returns the hyperbolic tangent elementwise, like torch.tanh."""
        out = np.tanh(self.data)
        return self._make(out, "tanh", (self,), lambda g: (g * (1 - out * out),))

    def sigmoid(self):
        """Returns 1 / (1 + e ** -x) elementwise, stable for large |x|, like torch.sigmoid."""
        x = self.data
        out = np.exp(-np.logaddexp(0, -x)).astype(x.dtype)  # stable for large |x|
        return self._make(out, "sigmoid", (self,), lambda g: (g * out * (1 - out),))

    def relu(self):
        """Returns max(x, 0) elementwise (gradient 0 at 0), like torch.relu."""
        x = self.data
        return self._make(np.maximum(x, 0), "relu", (self,), lambda g: (g * (x > 0),))

    def gelu(self, approximate: str = "none"):
        """GELU as in PyTorch: exact x·Φ(x) by default (Φ the standard normal CDF), or GPT-2's tanh
        approximation (gelu_forward below). Training computes value and slope in one call."""
        if approximate not in ("none", "tanh"):
            raise ValueError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")
        if not (self.requires_grad and is_grad_enabled()):
            return self._make(gelu_forward(self.data, approximate), "gelu", (self,), None)
        out, slope = gelu_and_slope(self.data, approximate)
        return self._make(out, "gelu", (self,), lambda g: (g * slope,))

    def clamp(self, min=None, max=None):
        """Returns x limited to [min, max] (either may be None); the gradient is 0 outside, like
        torch.clamp. `clip` is the same."""
        x = self.data
        out = np.clip(x, min, max)
        inside = np.ones(x.shape, dtype=bool)
        if min is not None:
            inside &= x >= min
        if max is not None:
            inside &= x <= max
        return self._make(out, "clamp", (self,), lambda g: (g * inside,))

    clip = clamp

    def neg(self):
        """Returns -self, like torch.neg."""
        return self._make(-self.data, "neg", (self,), lambda g: (-g,))

    __neg__ = neg


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
