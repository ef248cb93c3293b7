"""A run's --minutes budget, counted over every part of the run: a run stopped (Ctrl-C, a kill)
and resumed goes on with what is left of its budget, not with a new one, and a learning rate that
follows the budget (the GPT's cosine, the translator's --cooldown) goes on from where it was.

The budget covers everything: the steps, the evaluations inside it and the closing evaluation,
whose time is kept in reserve, so the run ends with its best model saved within the budget. Both
trainers hold one (transformer.train, transformer.gpt.training); their checkpoints hold its
state(). A time budget cannot replay the wall clock: a resumed timed run is not bit-exact.
"""
from __future__ import annotations

import time


class TimeBudget:
    """`minutes` for the whole run (None: no limit); `closing` evaluations are kept in reserve at
    the end, each as long as the longest so far, with a 10% margin."""

    def __init__(self, minutes: float | None, closing: int = 1, clock=time.perf_counter):
        self.minutes, self.closing, self.clock = minutes, closing, clock
        self.spent_before = 0.0   # seconds of the run's earlier parts (resume)
        self.eval_seconds = 0.0   # the longest evaluation, the reserve's basis (note_evaluation)
        self.evaluations = 0
        self.started = self.clock()

    def start(self) -> None:
        """This part of the run starts now."""
        self.started = self.clock()

    def origin(self) -> float:
        """The perf_counter time the run would have started at, had it run in one part."""
        return self.started - self.spent_before

    def elapsed(self) -> float:
        """Seconds the run has used, over all its parts."""
        return self.spent_before + self.clock() - self.started

    def reserve(self) -> float:
        """Seconds kept for the closing evaluation(s)."""
        return 1.1 * self.closing * self.eval_seconds

    def left(self) -> float | None:
        """Seconds left of the budget, the reserve not subtracted (None: no limit)."""
        return None if self.minutes is None else 60 * self.minutes - self.elapsed()

    def out_of_time(self, next_step: float = 0.0) -> bool:
        """True when one more step of `next_step` seconds and then the reserve would overrun it."""
        left = self.left()
        return left is not None and left < self.reserve() + next_step

    def share_spent(self, seconds: float | None = None) -> float | None:
        """The share of the budget used after `seconds` of the run (default: now), out of the budget
        less the reserve. None with no limit."""
        if self.minutes is None:
            return None
        seconds = self.elapsed() if seconds is None else seconds
        return seconds / max(60 * self.minutes - self.reserve(), 1e-9)

    def note_evaluation(self, seconds: float) -> None:
        """The reserve's basis: the longest evaluation, but the first only until a second exists.
        The first also pays one-time costs the closing one will not (Numba compiling the kernels on
        a fresh install, the plot library's import): ~30 s, which reserved 11% of a 10-minute
        budget, against ~1 s for the evaluations after it."""
        if self.evaluations == 1:
            self.eval_seconds = 0.0
        self.eval_seconds = max(self.eval_seconds, seconds)
        self.evaluations += 1

    def state(self) -> dict:
        """What a checkpoint keeps, so that a resumed run goes on with the rest."""
        return {"elapsed": self.elapsed(), "eval_seconds": self.eval_seconds, "evaluations": self.evaluations}

    def restore(self, state: dict) -> None:
        self.spent_before = float(state.get("elapsed", 0.0))
        self.eval_seconds = float(state.get("eval_seconds", 0.0))
        self.evaluations = int(state.get("evaluations", 0))

    def describe(self) -> str:
        """'2 min' for a new run; '2 min in all: 1.2 min spent, 0.8 min left' for a resumed one."""
        if self.minutes is None:
            return "no time limit"
        if not self.spent_before:
            return f"{self.minutes:g} min"
        spent, left = self.spent_before / 60, max(self.minutes - self.spent_before / 60, 0.0)
        return f"{self.minutes:g} min in all: {spent:.2f} min spent, {left:.2f} min left"
