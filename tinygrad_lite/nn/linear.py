"""Linear: y = x @ W.T + b, the layer every Transformer sub-block is built from."""
from __future__ import annotations

import math

import numpy as np

from ..checks import float_dtype, positive_int
from . import functional as F
from . import init
from .module import Module, Parameter


class Linear(Module):
    """weight (out_features, in_features) and bias (out_features,), as in PyTorch.

    Init as PyTorch's default: weight and bias both ~ U(−1/sqrt(in_features), 1/sqrt(in_features))
    (kaiming_uniform with a=sqrt(5) works out to exactly this bound), drawn from the engine's rng.
    """

    def __init__(self, in_features: int, out_features: int, bias: bool = True, dtype=np.float32):
        super().__init__()
        dtype = float_dtype("Linear", dtype)
        self.in_features = positive_int("Linear", "in_features", in_features)
        self.out_features = positive_int("Linear", "out_features", out_features)
        bound = 1.0 / math.sqrt(self.in_features)
        self.weight = init.uniform_(Parameter(np.empty((self.out_features, self.in_features), dtype)), -bound, bound)
        self.bias = init.uniform_(Parameter(np.empty(self.out_features, dtype)), -bound, bound) if bias else None

    def forward(self, x):
        return F.linear(x, self.weight, self.bias)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"
