"""The inputs the plots share, checked: numeric arrays (finite) and token lists (not one str),
and how tokens sit along an axis."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def as_array(value, op: str, name: str) -> np.ndarray:
    """`value` as a float64 array, every entry finite."""
    try:
        array = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise TypeError(
            f"{op}: {name} must be numeric array-like, got {type(value).__name__}"
        ) from exc
    if not np.all(np.isfinite(array)):
        raise ValueError(f"{op}: {name} has NaN or infinite entries; expected finite numbers")
    return array


def as_tokens(tokens, op: str, name: str) -> list[str]:
    """`tokens` as a list of str; one str is refused, as it is likely a sentence meant as tokens."""
    if isinstance(tokens, str):
        raise TypeError(
            f"{op}: {name} must be a list of token strings, got one str {tokens[:20]!r}; "
            f"use list(text) for one token per character"
        )
    try:
        return [str(token) for token in tokens]
    except TypeError as exc:
        raise TypeError(
            f"{op}: {name} must be a list of tokens, got {type(tokens).__name__}"
        ) from exc


def token_rotation(tokens: Sequence[str]) -> int:
    """Tick labels stay upright when every token is at most 2 characters, else turn 90°."""
    return 0 if all(len(token) <= 2 for token in tokens) else 90
