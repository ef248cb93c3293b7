"""The engine's random number generator: one seeded NumPy Generator for init, randn and dropout."""
from __future__ import annotations

import numpy as np

from .checks import is_int

_rng = np.random.default_rng(0)


def manual_seed(seed: int) -> None:
    """Seed every random draw the engine makes (parameter init, randn, dropout)."""
    global _rng
    if not is_int(seed):
        raise TypeError(f"manual_seed: expected an int seed, got {type(seed).__name__}")
    _rng = np.random.default_rng(int(seed))


def rng() -> np.random.Generator:
    return _rng


def get_rng_state() -> dict:
    """The generator's state as plain JSON-able data (for checkpoints; no pickle)."""
    return _rng.bit_generator.state


def set_rng_state(state: dict) -> None:
    _rng.bit_generator.state = state
