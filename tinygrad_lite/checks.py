"""Argument checks shared by every floor of the stack, so the same mistake gets the same words
wherever it is made ("Linear: in_features must be a positive int, got 0")."""
from __future__ import annotations

import numpy as np


def is_int(value) -> bool:
    """True for a Python or NumPy integer, never a bool (True is an int to Python)."""
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool)


def positive_int(op: str, name: str, value) -> int:
    """value as an int if it is a positive integer (Python or NumPy, never a bool), else a
    ValueError naming the operation and the argument."""
    if not is_int(value) or value <= 0:
        raise ValueError(f"{op}: {name} must be a positive int, got {value!r}")
    return int(value)
