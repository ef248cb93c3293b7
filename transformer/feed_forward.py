"""Position-wise feed-forward network (paper §3.3): FFN(x) = max(0, x·W1 + b1)·W2 + b2."""
from __future__ import annotations

import numpy as np

from tinygrad_lite import Tensor, fast
from tinygrad_lite.autograd import is_anomaly_enabled
from tinygrad_lite.checks import one_of
from tinygrad_lite.fast import TRICKS
from tinygrad_lite.nn import Dropout, Linear, Module

ACTIVATIONS = ("relu", "gelu", "gelu_tanh")
"""relu: the paper's max(0, ·). gelu: exact x·Φ(x), nanoGPT's nn.GELU(). gelu_tanh: GPT-2's tanh formula."""


class PositionwiseFeedForward(Module):
    """d_model -> d_ff -> d_model with ReLU, applied to each position separately and
    identically. At the base config (512 -> 2048 -> 512) it holds about 2/3 of an
    encoder layer's parameters. GPTs swap ReLU for GELU (`activation`, one of ACTIVATIONS)
    and may drop the biases (bias=False, as nanoGPT)."""

    def __init__(self, d_model: int, d_ff: int, dropout: float = 0.1, bias: bool = True,
                 activation: str = "relu", dtype=np.float32):
        super().__init__()
        self.w_1 = Linear(d_model, d_ff, bias=bias, dtype=dtype)
        self.w_2 = Linear(d_ff, d_model, bias=bias, dtype=dtype)
        self.dropout = Dropout(dropout)
        self.activation = one_of("PositionwiseFeedForward", "activation", activation, ACTIVATIONS)

    def forward(self, x: Tensor) -> Tensor:
        if self.activation == "relu" and TRICKS.fused_ffn and not is_anomaly_enabled():  # W1, bias, ReLU,
            # dropout as one op (fast.py); anomaly mode runs the plain ops, so a NaN is traced to its Linear
            return self.w_2(fast.linear_relu_dropout(x, self.w_1, self.dropout))
        return self.w_2(self.dropout(self.activate(self.w_1(x))))  # (B, T, d_ff) -> (B, T, d_model)

    def activate(self, h: Tensor) -> Tensor:
        if self.activation == "relu":
            return h.relu()
        return h.gelu("tanh" if self.activation == "gelu_tanh" else "none")

    def extra_repr(self) -> str:
        return f"activation={self.activation}"
