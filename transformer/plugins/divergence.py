"""A run that diverges stops before it saves anything more: a NaN/Inf loss stops it at once, naming
the op that made it (the step again under anomaly mode, tinygrad_lite.autograd); a loss over DIVERGED
times the first step's stops it too, and one over FAR_ABOVE times warns once. Both act inside the
step, before the optimizer moves: NonFiniteLoss on this rank's loss (before the ranks' all-reduce,
which takes finite numbers only), LossWatch on the global batch's (after it)."""
from __future__ import annotations

import math

import tinygrad_lite as tl

from ..loop import Plugin

# the loss of a step against the first step's: above FAR_ABOVE times it warns, above DIVERGED it stops
FAR_ABOVE, DIVERGED = 2.0, 10.0


class TrainingDiverged(FloatingPointError):
    """The loss became NaN/Inf or rose far above where it started: the steps overshoot."""


class NonFiniteLoss(Plugin):
    """Stops the step whose loss is NaN/Inf before the optimizer moves, naming the op that made it.
    `command` names the run in the message ('train'), `where()` the step ('step 3'), `fix` what to
    try; `rerun(batch)` is the step's forward and backward again."""

    def __init__(self, command: str, where, fix: str, rerun):
        self.command, self.where, self.fix, self.rerun = command, where, fix, rerun

    def gradients(self, batch, loss: float, tokens: int) -> tuple[float, int]:
        if not math.isfinite(loss):
            raise TrainingDiverged(f"{self.command}: diverged: the loss became {loss} at {self.where()} "
                                   f"({self.nonfinite_op(batch)}); nothing more was saved; {self.fix}")
        return loss, tokens

    def nonfinite_op(self, batch) -> str:
        """The op that made a NaN/Inf loss: this step's forward and backward again, under anomaly
        mode, which names the first op whose output or gradient holds one."""
        try:
            with tl.detect_anomaly():
                self.rerun(batch)
        except tl.AnomalyError as e:
            return str(e)
        return "anomaly mode found no op that makes it on a re-run (dropout differs)"


class LossWatch(Plugin):
    """Warns once (`write(text)`) when the step's loss, the global batch's, is FAR_ABOVE times the first
    step's, and stops the run above DIVERGED times, before an evaluation could keep a diverged model as
    the best. Its words are `nonfinite`'s."""

    def __init__(self, nonfinite: NonFiniteLoss, write):
        self.words, self.write = nonfinite, write
        self.start_loss, self.warned_far_above = None, False

    def gradients(self, batch, loss: float, tokens: int) -> tuple[float, int]:
        self.watch(loss)
        return loss, tokens

    def watch(self, loss: float) -> None:
        start = self.start_loss = self.start_loss or loss
        words = self.words
        if loss > DIVERGED * start:
            raise TrainingDiverged(f"{words.command}: diverged: the loss became {loss:.3g} at {words.where()}, "
                                   f"over {DIVERGED:g}x its start ({start:.3g}); stopped, nothing more was "
                                   f"saved; {words.fix}")
        if loss > FAR_ABOVE * start and not self.warned_far_above:
            self.warned_far_above = True
            self.write(f"warning: the loss {loss:.3g} at {words.where()} is over {FAR_ABOVE:g}x "
                       f"its start ({start:.3g}); if it keeps rising, {words.fix}")

    def state(self) -> dict:
        return {"start_loss": self.start_loss, "warned_far_above": self.warned_far_above}

    def restore(self, state: dict) -> None:
        self.start_loss = state.get("start_loss")
        self.warned_far_above = bool(state.get("warned_far_above", False))
