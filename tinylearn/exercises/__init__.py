"""Every exercise, in the reading path's order (docs/reading.md): the scalar floor, the Tensor ops,
softmax, the layers' ops, the optimizer, then the paper's model."""
from __future__ import annotations

from . import decoding, layers, model, optim, scalar, softmax, tensor

EXERCISES = (scalar.EXERCISES + tensor.EXERCISES + softmax.EXERCISES + layers.EXERCISES + optim.EXERCISES
             + model.EXERCISES + decoding.EXERCISES)
