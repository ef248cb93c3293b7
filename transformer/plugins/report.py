"""What a training run tells whoever watches it. The base prints lines; transformer.progress draws
one bar for the run's budget, transformer.events writes --explore's events."""
from __future__ import annotations

EVENTS_FILE = "events.jsonl"  # the live page's log of a run in its OUT folder (--explore, transformer.events)


class TrainingReport:
    """The trainers call `step` after each step and `write` for each line; this one prints lines."""

    def step(self, trainer, loss: float, tokens_per_s: float) -> None:
        """After each step."""

    def status(self, text: str) -> None:
        """What the run does between steps (evaluating on dev, testing)."""

    def write(self, text: str) -> None:
        print(text, flush=True)

    def close(self) -> None:
        """The run is over."""

    def failed(self, error: Exception) -> None:
        """The run stops on `error` (TrainingDiverged: a NaN/Inf loss names its op)."""
