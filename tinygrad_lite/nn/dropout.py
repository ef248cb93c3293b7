"""Dropout: zero activations at random while training (the paper's regularisation, P_drop = 0.1)."""
from __future__ import annotations

from .module import Module


class Dropout(Module):
    """Inverted dropout with probability p, active only in training mode (module.train())."""

    def __init__(self, p: float = 0.5):
        super().__init__()
        if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0.0 <= p <= 1.0:
            raise ValueError(f"Dropout: p must be a probability in [0, 1], got {p!r}")
        self.p = float(p)

    def forward(self, x):
        return x.dropout(self.p, self.training)

    def extra_repr(self) -> str:
        return f"p={self.p}"
