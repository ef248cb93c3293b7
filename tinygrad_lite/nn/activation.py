"""Activation functions as Modules, so they can sit inside a Sequential."""
from __future__ import annotations

from ..checks import one_of
from .module import Module


class ReLU(Module):
    def forward(self, x):
        return x.relu()


class Tanh(Module):
    def forward(self, x):
        return x.tanh()


class Sigmoid(Module):
    def forward(self, x):
        return x.sigmoid()


class GELU(Module):
    """Exact x·Φ(x) by default; approximate='tanh' for the tanh formula (as PyTorch)."""

    def __init__(self, approximate: str = "none"):
        super().__init__()
        self.approximate = one_of("GELU", "approximate", approximate, ("none", "tanh"))

    def forward(self, x):
        return x.gelu(self.approximate)

    def extra_repr(self) -> str:
        return f"approximate={self.approximate!r}"


ACTIVATION_MODULES = {cls.__name__.lower(): cls for cls in (ReLU, Tanh, Sigmoid, GELU)}
"""The Module class of each name in `checks.ACTIVATIONS` but "linear", which needs none."""
