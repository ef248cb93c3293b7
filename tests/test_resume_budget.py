"""A --minutes run stopped with Ctrl-C and resumed goes on with the rest of its budget, its learning
rate where it was, never back at the peak (transformer/time_budget.py), in both trainers.

The budget reads a clock the tests hand it: it moves one second a step and not at all otherwise, so
the runs are the same on any machine. The resumed run then ends at the very step the uninterrupted
run ends at, with the same learning rate at every step after the resume; a run that started its
budget again would train a whole budget more, and one that forgot the time spent would climb back
to the peak rate."""
import os
import signal

import pytest

from transformer.gpt.training import GPTTrainConfig, GPTTrainer, Interrupted, resume_config
from transformer.time_budget import TimeBudget
from transformer.train import TrainConfig, Trainer, TrainingReport

MINUTES, STOP_AT = 2.0, 80  # a 120-step budget, stopped well after the warm-up and into the cool-down


class Clock:
    """Seconds that pass only when a step ends."""

    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class Steps(TrainingReport):
    """Moves the clock a second a step, records each step's learning rate, and presses Ctrl-C after
    step `stop_at`."""

    def __init__(self, clock: Clock, stop_at: int | None = None):
        self.clock, self.stop_at, self.lrs = clock, stop_at, {}

    def step(self, trainer, loss, tokens_per_s):
        done = trainer.iter if hasattr(trainer, "iter") else trainer.step
        self.lrs[done] = trainer.lr
        self.clock.now += 1.0
        if done == self.stop_at:
            os.kill(os.getpid(), signal.SIGINT)

    def write(self, text):
        pass


def on_clock(trainer, clock: Clock):
    trainer.budget.clock = clock
    return trainer


def check_resumed_like_uninterrupted(whole: Steps, first: Steps, rest: Steps, peak: float):
    last = max(whole.lrs)
    assert last >= 100, "the whole run must take most of its 120 one-second steps"
    stopped = max(first.lrs)  # the step Ctrl-C was pressed in, or the next (the translator sees it a step late)
    assert stopped in (STOP_AT, STOP_AT + 1) and min(rest.lrs) == stopped + 1
    assert max(rest.lrs) == last  # the rest of the budget: the same last step, not a new 2 minutes
    for step in rest.lrs:  # the schedule goes on from where it was
        assert rest.lrs[step] == pytest.approx(whole.lrs[step], rel=1e-9, abs=1e-15), step
    assert rest.lrs[stopped + 1] < first.lrs[stopped] < 0.9 * peak


def test_the_budget_counts_the_time_spent_before_the_resume():
    clock = Clock()
    budget = TimeBudget(2.0, clock=clock)
    clock.now = 50.0
    assert budget.elapsed() == 50.0 and budget.describe() == "2 min"
    resumed = TimeBudget(1.5, clock=clock)  # --minutes 1.5 given again: the run's new total
    resumed.restore(budget.state())
    resumed.start()
    clock.now += 10.0
    assert resumed.elapsed() == 60.0 and resumed.left() == 30.0
    assert resumed.describe().endswith("0.83 min spent, 0.67 min left")  # as of the resume
    assert resumed.share_spent() == pytest.approx(60.0 / 90.0)


def gpt_config(out, **overrides) -> GPTTrainConfig:
    settings = dict(n_layer=1, n_head=2, n_embd=16, block_size=16, batch_size=4, eval_iters=2, eval_interval=25,
                    max_iters=10**6, minutes=MINUTES, warmup_iters=10, data=None, out=str(out))
    return GPTTrainConfig(**{**settings, **overrides})


def test_a_gpt_run_resumed_after_ctrl_c_goes_on_with_the_rest_of_its_budget(tmp_path):
    clock = Clock()
    whole = Steps(clock)
    on_clock(GPTTrainer(gpt_config(tmp_path / "whole"), whole), clock).run()
    clock, first = Clock(), None
    first = Steps(clock, stop_at=STOP_AT)
    with pytest.raises(Interrupted):
        on_clock(GPTTrainer(gpt_config(tmp_path / "stopped"), first), clock).run()
    rest = Steps(clock)
    resumed = on_clock(GPTTrainer(resume_config(str(tmp_path / "stopped")), rest), clock)
    assert resumed.budget.describe().startswith("2 min in all: 1.3")  # 80 of its 120 seconds spent
    resumed.run()
    check_resumed_like_uninterrupted(whole, first, rest, resumed.cfg.learning_rate)


TRANSLATOR = dict(d_model=16, heads=2, layers=1, d_ff=32, max_tokens=600, progress=False, epochs=None,
                  minutes=MINUTES, cooldown=0.5, warmup=10, eval_every=50, average=0, dev_bleu_size=16)


def test_a_translator_run_resumed_after_ctrl_c_goes_on_with_the_rest_of_its_budget(tmp_path):
    clock = Clock()
    whole = Steps(clock)
    on_clock(Trainer(TrainConfig(out=str(tmp_path / "whole"), **TRANSLATOR), report=whole), clock).run()
    clock = Clock()
    first = Steps(clock, stop_at=STOP_AT)
    with pytest.raises(KeyboardInterrupt):
        on_clock(Trainer(TrainConfig(out=str(tmp_path / "stopped"), **TRANSLATOR), report=first), clock).run()
    rest = Steps(clock)
    resumed = on_clock(Trainer(TrainConfig(out=str(tmp_path / "stopped"), resume=True, progress=False),
                               report=rest), clock)
    assert resumed.budget.minutes == MINUTES and resumed.budget.describe().startswith("2 min in all: 1.3")
    resumed.run()
    peak = max(whole.lrs.values())
    check_resumed_like_uninterrupted(whole, first, rest, peak)


def test_a_resumed_translator_run_says_what_is_left_of_its_budget(tmp_path, capsys):
    from transformer import __main__ as cli

    flags = ["train", "--out", str(tmp_path), "--d-model", "16", "--heads", "2", "--layers", "1", "--d-ff", "32",
             "--minutes", "5", "--eval-every", "0", "--no-progress"]
    assert cli.main([*flags, "--max-steps", "3"]) == 0
    capsys.readouterr()
    assert cli.main([*flags, "--max-steps", "6", "--resume"]) == 0
    line = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("budget: "))
    assert line.startswith("budget: 5 min in all: ") and line.endswith(" min left")


def test_a_run_resumed_after_its_budget_ran_out_trains_no_further_step(tmp_path):
    clock = Clock()
    on_clock(Trainer(TrainConfig(out=str(tmp_path / "tr"), **TRANSLATOR), report=Steps(clock)), clock).run()
    rest = Steps(clock)
    on_clock(Trainer(TrainConfig(out=str(tmp_path / "tr"), resume=True, progress=False), report=rest), clock).run()
    clock = Clock()
    on_clock(GPTTrainer(gpt_config(tmp_path / "gpt"), Steps(clock)), clock).run()
    gpt_rest = Steps(clock)
    on_clock(GPTTrainer(resume_config(str(tmp_path / "gpt")), gpt_rest), clock).run()
    assert rest.lrs == {} and gpt_rest.lrs == {}
