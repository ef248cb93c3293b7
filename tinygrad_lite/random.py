"""The engine's random number generator: one seeded NumPy Generator for init, randn and dropout."""
from __future__ import annotations

import numpy as np

from .checks import int_at_least

_rng = np.random.default_rng(0)


def manual_seed(seed: int) -> None:
    """Seed every random draw the engine makes (parameter init, randn, dropout); seed is an int >= 0."""
    global _rng
    _rng = np.random.default_rng(int_at_least("manual_seed", "seed", seed, 0))


def rng() -> np.random.Generator:
    return _rng


def get_rng_state() -> dict:
    """The generator's state as plain JSON-able data (for checkpoints; no pickle)."""
    return _rng.bit_generator.state


def set_rng_state(state: dict) -> None:
    _rng.bit_generator.state = state
