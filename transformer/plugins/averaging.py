"""Checkpoint averaging (the paper's §6.1 averages the last 5 or 20 checkpoints): the weights at the
last `keep` evaluations, and their mean."""
from __future__ import annotations

import numpy as np


class WeightAverage:
    """Copies of a model's weights at its last `keep` evaluations (`snapshots`, saved with the run)."""

    def __init__(self, keep: int):
        self.keep, self.snapshots = keep, []

    def take(self, model) -> None:
        if self.keep > 1:
            weights = {k: v.copy() for k, v in model.state_dict().items()}
            self.snapshots = [*self.snapshots, weights][-self.keep:]

    def mean(self) -> dict | None:
        """The mean of the snapshots, in each weight's dtype (None with fewer than two)."""
        if self.keep < 2 or len(self.snapshots) < 2:
            return None
        return {k: np.mean([snap[k] for snap in self.snapshots], axis=0).astype(v.dtype)
                for k, v in self.snapshots[-1].items()}
