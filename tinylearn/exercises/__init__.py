"""Every exercise, in the reading path's order (docs/reading.md): the scalar floor, the Tensor ops,
softmax, then the layers, the optimizer and the paper's model."""
from __future__ import annotations

from . import scalar, softmax, tensor

EXERCISES = scalar.EXERCISES + tensor.EXERCISES + softmax.EXERCISES
