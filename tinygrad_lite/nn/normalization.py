"""LayerNorm: normalise each position's features to mean 0, variance 1, then scale and shift
(the paper's "Add & Norm", Ba et al. 2016)."""
from __future__ import annotations

import numpy as np

from ..checks import float_dtype, number, positive_int
from .module import Module, Parameter


class LayerNorm(Module):
    """Over the trailing `normalized_shape` dims, with the biased variance (as PyTorch).
    weight starts at ones, bias at zeros (when elementwise_affine)."""

    def __init__(self, normalized_shape, eps: float = 1e-5, elementwise_affine: bool = True, bias: bool = True,
                 dtype=np.float32):
        super().__init__()
        dtype = float_dtype("LayerNorm", dtype)
        shape = (normalized_shape,) if isinstance(normalized_shape, (int, np.integer)) else tuple(normalized_shape)
        if not shape:
            raise ValueError("LayerNorm: normalized_shape must name at least one dim, got ()")
        self.normalized_shape = tuple(positive_int("LayerNorm", "normalized_shape", n) for n in shape)
        self.eps = number("LayerNorm", "eps", eps, 0.0, low_open=True)
        self.elementwise_affine = bool(elementwise_affine)
        self.weight = Parameter(np.ones(self.normalized_shape, dtype)) if elementwise_affine else None
        self.bias = Parameter(np.zeros(self.normalized_shape, dtype)) if elementwise_affine and bias else None

    def forward(self, x):
        return x.layer_norm(self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}"
