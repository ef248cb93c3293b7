"""The CLI's progress bar: one bar for the whole run's budget (--max-steps, --epochs or
--minutes, whichever ends it first), with its ETA. The training loop only reports
(transformer.train.TrainingReport); this draws."""
from __future__ import annotations

import sys
import time

from .train import TrainingReport


class ProgressBar(TrainingReport):
    """A tqdm bar in percent of the budget, kept on screen (evaluations show on it as a status);
    lines are written above it through tqdm's own write mode, so they never mix with it."""

    def __init__(self):
        self.bar = None

    def open(self, started: float | None = None):
        """The bar, created on first use; its clock starts with the run (`started`, perf_counter
        time), and its rate is the run's mean (smoothing 0), so the ETA is the budget's rest."""
        if self.bar is None:
            from tqdm import tqdm
            self.bar = tqdm(total=100, dynamic_ncols=True, file=sys.stderr, smoothing=0,
                            bar_format="{desc} {percentage:3.0f}%|{bar}| {elapsed}<{remaining}{postfix}")
            if started is not None:
                self.bar.start_t -= time.perf_counter() - started
        return self.bar

    def step(self, trainer, loss: float, tokens_per_s: float) -> None:
        bar, cfg = self.open(trainer.budget.origin()), trainer.cfg
        spent = trainer.budget_spent()
        epochs = "" if cfg.epochs is None else f"/{cfg.epochs}"
        bar.set_description_str(f"step {trainer.step} (epoch {trainer.epoch + 1}{epochs})", refresh=False)
        bar.set_postfix_str(f"loss {loss:.3f}, {tokens_per_s:.0f} tok/s, lr {trainer.lr:.2e}", refresh=False)
        if spent is not None:
            bar.update(min(100.0, 100.0 * spent) - bar.n)
        bar.refresh()

    def status(self, text: str) -> None:
        self.open().set_postfix_str(f"{text}…")

    def write(self, text: str) -> None:
        if self.bar is None:
            print(text, flush=True)
            return
        with self.bar.external_write_mode(file=sys.stdout):
            sys.stdout.write(text + "\n")
            sys.stdout.flush()

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None
