"""Data parallel (`mpiexec -n K`, tinygrad_lite.distributed): every rank computes the gradient of its
own batch; one all-reduce replaces each by the mean of all K, weighted by target tokens, so a step of
K ranks is a step of one process on the K batches together. The same all-reduce sums each rank's loss
and clock, so every rank reports the global batch's loss and sets the same learning rate. With one
process every call here is a no-op."""
from __future__ import annotations

from tinygrad_lite import distributed as dist

from ..loop import Plugin


class DataParallel(Plugin):
    """Averages the gradients of `parameters` over the ranks inside each step; `clock()` is this
    rank's time, whose mean over the ranks becomes `mean_clock` (what a budget-driven lr reads)."""

    def __init__(self, parameters, clock):
        self.parameters, self.clock = list(parameters), clock
        self.mean_clock = 0.0

    def gradients(self, batch, loss: float, tokens: int) -> tuple[float, int]:
        tokens, loss_sum, seconds = dist.all_reduce_gradients(self.parameters, weight=tokens,
                                                              extra=[loss * tokens, self.clock()])
        self.mean_clock = seconds / dist.world_size()
        return loss_sum / tokens, int(tokens)

    @staticmethod
    def any_rank(flag: bool) -> bool:
        """Whether `flag` is set on any rank (one small all-reduce)."""
        return dist.any_rank(flag)[0]

    @staticmethod
    def ranks() -> int:
        return dist.world_size()
