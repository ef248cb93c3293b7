"""The training loop both trainers run, the translator's (transformer.train) and the GPT's
(transformer.gpt.training), read top to bottom as nanoGPT's train.py:

    until the run is over:
        evaluate, when due          the dev/val loss of the model as it is now
        checkpoint, when due        everything needed to resume, written between two steps
        step(batch)                 loss -> backward -> clip -> the optimizer's step (make_step)

The step is a function of a batch, built where the run is built and handed to the loop: the loss and
backward (forward_backward), then the plug-ins, clipping, the learning rate and the optimizer's step
(make_step). The trainers have make_step compile the whole of it (tinygrad_lite.compiler) unless told
--no-compile, and the loop never knows. The run (a `Run`) says where its batches come from, when it
is finished, when an evaluation or a checkpoint is due, and does them.
A trainer runs (Trainer.run in transformer/train.py, GPTTrainer.run in transformer/gpt/training.py)

    gradients = forward_backward(loss_of, optimizer)
    step = make_step(gradients, tokens_of, model.parameters(), optimizer, clip=1.0, set_lr=schedule)
    train(run, step, plugins=[TimeLimit(budget), CtrlC()])

What a production run adds (a --minutes budget, Ctrl-C, averaging gradients over MPI ranks, stopping
a diverging run) is no part of this file: each is a `Plugin` of transformer/plugins/, which the loop
calls at a few fixed moments and which does nothing unless it is given.
"""
from __future__ import annotations

from dataclasses import dataclass

from tinygrad_lite.autograd import recorded
from tinygrad_lite.optim import clip_grad_norm_


@dataclass
class Stepped:
    """What a step reports: the batch's loss, its target tokens, the gradient norm before clipping."""
    loss: float
    tokens: int
    grad_norm: float | None = None


class Plugin:
    """One piece a production run adds to the loop. Each method is called at one moment of the run;
    here every one does nothing, and a piece overrides the moments it needs."""

    def start(self, run) -> None:
        """The run, or the part of it a resume continues, starts."""

    def stop(self, run) -> bool:
        """Whether the run ends now (after its closing evaluation), e.g. because its time is up."""
        return False

    def before_step(self, run) -> None:
        """Before each step: a piece may end the run here by raising (Ctrl-C)."""

    def gradients(self, batch, loss: float, tokens: int) -> tuple[float, int]:
        """Inside the step, once backward has filled every .grad and before clipping: a piece may
        change the gradients (average them over ranks) or refuse them (raise), and returns the loss
        and token count the step reports."""
        return loss, tokens

    def after_step(self, run, stepped: Stepped) -> None:
        """After each step, once it is counted."""

    def end(self, run) -> None:
        """The run is over, or stopped by an error."""


class Run:
    """What a trainer tells the loop. `step` counts the steps taken; `evaluated_at` and `saved_at` are
    the steps of the last evaluation and checkpoint (None: none yet), so that neither runs twice for
    one step, nor again right after a resume."""

    step: int = 0
    evaluated_at: int | None = None
    saved_at: int | None = None

    def next_batch(self):
        """The batch of the next step."""
        raise NotImplementedError

    def counted(self, stepped: Stepped) -> None:
        """After each step: the run moves on in its data and reports the step."""

    def finished(self) -> bool:
        """Whether the run has taken all its steps (its --max-steps, --epochs or max_iters)."""
        raise NotImplementedError

    def evaluation_due(self) -> bool:
        raise NotImplementedError

    def checkpoint_due(self) -> bool:
        return False

    def evaluate(self) -> None:
        raise NotImplementedError

    def save(self) -> None:
        raise NotImplementedError


def forward_backward(loss_of, optimizer):
    """The step's forward and backward: `loss_of(batch)` -> the batch's loss Tensor, then backward
    from zeroed gradients, which fills every parameter's .grad. Returns a function of a batch that
    returns the loss."""
    def gradients(batch):
        loss = loss_of(batch)
        optimizer.zero_grad()
        loss.backward()
        return loss
    return gradients


def make_step(gradients, tokens_of, parameters, optimizer, *, clip: float, set_lr, scheduler=None, plugins=(),
              compile=None):
    """The training step: `gradients(batch)` -> its loss, with every .grad filled (forward_backward);
    the plug-ins see the gradients (Plugin.gradients, with the loss's value and the batch's target
    tokens, `tokens_of(batch)`); the gradient norm clipped at `clip` (0: not clipped); this step's
    learning rate (`set_lr()`), the optimizer's step, then the scheduler's if there is one. Returns a
    function of a batch that returns Stepped. A trainer may hand over `compile`, which makes the whole
    update one replayed plan (transformer/plugins/compiled.py): a call marked @recorded (the plug-ins',
    set_lr, clipping, the steps) is made at each replay, on that step's loss, lr and step count."""
    parameters, set_lr = list(parameters), recorded(set_lr)

    @recorded
    def seen(batch, loss) -> tuple[float, int]:  # what the plug-ins make of the loss and the tokens
        value, tokens = loss.item(), tokens_of(batch)
        for plugin in plugins:
            value, tokens = plugin.gradients(batch, value, tokens)
        return value, tokens

    def update(batch):
        loss = gradients(batch)
        reported = seen(batch, loss)
        grad_norm = clip_grad_norm_(parameters, clip) if clip else None
        set_lr()
        optimizer.step()
        if scheduler is not None:
            scheduler.step()
        return reported, grad_norm
    update = compile(update) if compile else update

    def step(batch) -> Stepped:
        (value, tokens), grad_norm = update(batch)
        return Stepped(value, tokens, grad_norm)
    return step


def train(run: Run, step, plugins=()) -> None:
    """Train `run` with `step` until it is finished or a plug-in ends it. The last step is always
    evaluated, and every evaluation is followed by a checkpoint, so a run resumed from its last
    checkpoint has nothing left to redo."""
    for plugin in plugins:
        plugin.start(run)
    try:
        while True:
            last = run.finished() or any([plugin.stop(run) for plugin in plugins])  # (every plug-in asked)
            if run.evaluated_at != run.step and (last or run.evaluation_due()):
                run.evaluate()
                run.evaluated_at = run.step
            if run.saved_at != run.step and (run.evaluated_at == run.step or run.checkpoint_due()):
                run.save()
                run.saved_at = run.step
            if last:
                return
            for plugin in plugins:
                plugin.before_step(run)
            stepped = step(run.next_batch())
            run.step += 1
            for plugin in plugins:
                plugin.after_step(run, stepped)
            run.counted(stepped)
    finally:
        for plugin in plugins:
            plugin.end(run)
