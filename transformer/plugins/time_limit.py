"""The --minutes budget as a plug-in: it starts the run's clock and ends the run when one more step
and the closing evaluation would overrun the budget (transformer.time_budget keeps the count); and the
cool-down, a learning rate that falls to 0 over the budget's last share."""
from __future__ import annotations

from ..loop import Plugin


class TimeLimit(Plugin):
    """Ends the run when `budget` is spent, on every rank at once (`agree`: whether a flag is set on
    any rank). With `count_next_step`, the next step is counted as long as the last one took."""

    def __init__(self, budget, count_next_step: bool = False, agree=bool):
        self.budget, self.count_next_step, self.agree = budget, count_next_step, agree
        self.step_seconds, self.started = 0.0, 0.0

    def start(self, run) -> None:
        self.budget.start()

    def stop(self, run) -> bool:
        return self.agree(self.budget.out_of_time(self.step_seconds if self.count_next_step else 0.0))

    def before_step(self, run) -> None:
        self.started = self.budget.clock()

    def after_step(self, run, stepped) -> None:
        self.step_seconds = self.budget.clock() - self.started


def cool_down(spent: float | None, share: float) -> float:
    """The factor on the schedule's lr when `spent` of the budget is used (None: nothing bounds the
    run): 1, then a linear fall to 0 over its last `share` (0: off). A run that knows its length
    learns more by ending at lr 0 than by stopping on its schedule's tail (Li et al., 2020, "Budgeted
    training"; bench/README.md "Real data")."""
    if spent is None or not share:
        return 1.0
    return min(1.0, max(0.0, (1.0 - spent) / share))
