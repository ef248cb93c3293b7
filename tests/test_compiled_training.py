"""The trainers' compiled step (transformer.plugins.compiled, on by default) against --no-compile: with the
rewrite rules off the GPT with dropout and the translator on the built-in corpus end with the same weights
bit for bit; with them on (the default), a run resumed from its checkpoint ends where the uninterrupted
compiled run ends, since every batch runs from a plan, its capture included. Each compiled run checks that
plans were replayed, so a step that silently ran eagerly fails."""
from pathlib import Path

import numpy as np
import pytest

from tinygrad_lite import fast
from tinygrad_lite.cli import COMPILE_ENV, OneLineParser, add_compile, compile_chosen
from tinygrad_lite.compiler.rules import SWITCHES as RULE_SWITCHES
from transformer.gpt.training import GPTTrainConfig, GPTTrainer
from transformer.plugins.compiled import CompiledGradients
from transformer.plugins.report import TrainingReport
from transformer.train import TrainConfig, Trainer


class Quiet(TrainingReport):
    def write(self, text):
        pass


def gpt_config(out, **overrides) -> GPTTrainConfig:
    """A toy run on a text of its own (the built-in text is the project's docs, which may change while
    a test runs)."""
    text = Path(out).parent / "text.txt"
    if not text.exists():
        text.write_text("the quick brown fox jumps over the lazy dog.\n" * 60, encoding="utf-8")
    settings = dict(out=str(out), data=str(text), n_layer=1, n_head=2, n_embd=32, block_size=16, batch_size=4,
                    dropout=0.1, bias=True, max_iters=6, eval_interval=3, eval_iters=1, warmup_iters=2,
                    minutes=None, seed=3)
    return GPTTrainConfig(**{**settings, **overrides})


def translator_config(out, **overrides) -> TrainConfig:
    settings = dict(out=str(out), d_model=16, heads=2, layers=1, d_ff=32, dropout=0.1, max_steps=24, epochs=None,
                    eval_every=12, dev_bleu_size=8, progress=False, seed=2, compile=True)
    return TrainConfig(**{**settings, **overrides})




def weights(trainer) -> list:
    return [p.data.copy() for p in trainer.model.parameters()]


def assert_same(a: list, b: list):
    assert len(a) == len(b)
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y)


def replayed(trainer) -> int:
    """Batches the compiled step ran from a plan (captured or replayed) in this process."""
    s = trainer.compiled.summary()
    assert s["plans"] >= 1 and s["captures"] >= 1 and s["fallbacks"] == 0
    return s["compiled_batches"]


def test_a_compiled_gpt_run_equals_an_eager_one_bit_for_bit(tmp_path):
    with fast.tricks_off(*RULE_SWITCHES):
        compiled = GPTTrainer(gpt_config(tmp_path / "compiled"), Quiet())
        compiled.run()
        eager = GPTTrainer(gpt_config(tmp_path / "eager", compile=False), Quiet())
        eager.run()
    assert eager.compiled is None and replayed(compiled) == 6  # the first batch too: captured, run from its plan
    assert compiled.compiled.summary()["captures"] == 1  # the evaluations at iter 3 (eval mode, no_grad) kept the plan
    assert_same(weights(compiled), weights(eager))
    assert compiled.best_val_loss == eager.best_val_loss


def test_a_resumed_compiled_gpt_run_equals_the_uninterrupted_one(tmp_path):
    whole = GPTTrainer(gpt_config(tmp_path / "whole"), Quiet())
    whole.run()
    GPTTrainer(gpt_config(tmp_path / "parts", max_iters=3), Quiet()).run()
    rest = GPTTrainer(gpt_config(tmp_path / "parts", resume=True), Quiet())
    rest.run()
    assert rest.iter == whole.iter == 6 and replayed(rest) == 3
    assert_same(weights(rest), weights(whole))


def test_a_compiled_translator_run_equals_an_eager_one_bit_for_bit(tmp_path):
    with fast.tricks_off(*RULE_SWITCHES):
        compiled = Trainer(translator_config(tmp_path / "compiled"), report=Quiet())
        compiled.run()
        eager = Trainer(translator_config(tmp_path / "eager", compile=False), report=Quiet())
        eager.run()
    s = compiled.compiled.summary()
    assert replayed(compiled) >= 3 and s["captures"] == s["plans"] + s["joined"]  # no plan captured twice (the
    # evaluation at 12), and the batches' shapes share one plan
    assert_same(weights(compiled), weights(eager))


def test_a_resumed_compiled_translator_run_equals_the_uninterrupted_one(tmp_path):
    whole = Trainer(translator_config(tmp_path / "whole"), report=Quiet())
    whole.run()
    Trainer(translator_config(tmp_path / "parts", max_steps=12), report=Quiet()).run()
    rest = Trainer(translator_config(tmp_path / "parts", resume=True, extra={"explicit": ["max_steps"]}),
                   report=Quiet())
    rest.run()
    assert rest.step == whole.step == 24 and replayed(rest) >= 1
    assert_same(weights(rest), weights(whole))


def padded_batches():
    """Batches of the built-in corpus with much <pad> (skip_padding applies) and without."""
    from transformer.data import PAD, Batch
    r = np.random.default_rng(0)
    full = Batch(r.integers(4, 20, (4, 6)), r.integers(4, 20, (4, 7)))
    src, tgt = r.integers(4, 20, (4, 6)), r.integers(4, 20, (4, 7))
    src[1:, 2:], tgt[1:, 3:] = PAD, PAD
    return full, Batch(src, tgt)


def test_the_compiled_translator_skips_padding_by_rule_and_agrees_with_the_padded_plain_run(tmp_path):
    """The trainer's loss is the plain padded forward; its compiled step runs the position-wise ops on the
    rows that matter only (rule skip_padding), drawing the padded masks' entries there. So the compiled run,
    every rule on, has the losses of an eager run (--no-compile: the padded forward, op by op) and ends with
    its weights, to float rounding: one differing mask would move a weight by a full Adam step, 1.9e-4 here.
    W^K's biases are left out: their gradient is 0 in exact arithmetic, and Adam turns round-off into steps
    (issue 45's oracle)."""
    full, padded = padded_batches()
    runs, losses = {}, {}
    for compile in (True, False):
        with fast.tricks_on(*RULE_SWITCHES):  # as the process has them otherwise: TINYGRAD_LITE_FAST=0 switches
            # every rule off
            trainer = Trainer(translator_config(tmp_path / str(compile), compile=compile), report=Quiet())
            losses[compile] = [trainer.train_step(batch)[0] for batch in (full, padded) * 3]
        runs[compile] = trainer
    s = runs[True].compiled.summary()
    assert s == {"compiled_batches": 6, "plans": 1, "captures": 1, "joined": 0, "fallbacks": 0}
    plan = next(iter(runs[True].compiled.compiled.plans.values()))
    assert "fused_attention_rows_op" in {r.fn.__name__ for r in plan.records if r is not None}
    np.testing.assert_allclose(losses[True], losses[False], rtol=1e-6)
    for (name, p), b in zip(runs[True].model.named_parameters(), weights(runs[False])):
        if not name.endswith("w_k.bias"):
            assert np.abs(p.data - b).max() <= 1e-5 * np.abs(b).max(), name


def test_a_compiled_step_takes_a_batch_of_arrays():
    from tinygrad_lite import Tensor
    calls = []

    def fn(batch):
        calls.append(batch)
        x, y = batch
        return (Tensor(x) * Tensor(y)).sum()
    step = CompiledGradients(fn)
    assert [float(step((np.arange(2.0), np.ones(2))).data) for _ in range(2)] == [1.0, 1.0]
    assert len(calls) == 1 and isinstance(calls[0], tuple) and len(calls[0]) == 2  # captured once, as a tuple


@pytest.mark.parametrize("default", [True, False])
@pytest.mark.parametrize("argv, env, chosen", [
    ([], None, None), (["--no-compile"], None, False), ([], "0", False), ([], "false", False), ([], "1", True),
    ([], "on", True), ([], "maybe", None), (["--compile"], "0", True), (["--no-compile"], "1", False)])
def test_the_flags_then_the_environment_then_the_commands_default_choose(monkeypatch, argv, env, chosen, default):
    """Both trainers compile by default; --compile / --no-compile, else TINYGRAD_LITE_COMPILE=0/1, override
    a command's default, whichever it is."""
    parser = OneLineParser(prog="p")
    add_compile(parser, default=default)
    if env is None:
        monkeypatch.delenv(COMPILE_ENV, raising=False)
    else:
        monkeypatch.setenv(COMPILE_ENV, env)
    assert compile_chosen(parser.parse_args(argv)) is (default if chosen is None else chosen)


def test_the_translator_and_the_gpt_run_compiled_by_default(capsys):
    from transformer.__main__ import build_parser
    parser = build_parser()
    helps = {}
    for command in (["train"], ["gpt", "train"]):
        with pytest.raises(SystemExit):
            parser.parse_args([*command, "--help"])
        helps[" ".join(command)] = " ".join(capsys.readouterr().out.split())
    assert "(default: compiled" in helps["train"] and "(default: compiled" in helps["gpt train"]
    assert TrainConfig().compile is True and GPTTrainConfig().compile is True


def test_with_any_shape_a_family_shares_one_plan_and_its_new_shapes_run_compiled_uncaptured():
    """CompiledGradients(any_shape=True): the family's first two batches are captured (the second joins the
    first's plan), and every later shape replays that plan, bit for bit."""
    import tinygrad_lite as tl
    from tinygrad_lite import Tensor, nn
    from tinygrad_lite.optim import SGD

    def run(compiled):
        tl.manual_seed(0)
        layer = nn.Linear(3, 2)
        opt = SGD(layer.parameters(), lr=0.1)

        def gradients(batch):
            (x,) = batch
            out = layer(Tensor(x))
            loss = (out * out).sum()
            opt.zero_grad()
            loss.backward()
            opt.step()
            return loss
        step = CompiledGradients(gradients, any_shape=True) if compiled else gradients
        r = np.random.default_rng(0)
        losses = [step((r.standard_normal((n, 3)).astype(np.float32),)).data.copy() for n in (4, 5, 6, 7, 5)]
        return losses + [p.data.copy() for p in layer.parameters()], step
    compiled, step = run(True)
    eager, _ = run(False)
    assert_same(compiled, eager)
    assert step.summary() == {"compiled_batches": 5, "plans": 1, "captures": 2, "joined": 1, "fallbacks": 0}
    assert "2 capture(s), 1 joining a shared plan" in step.describe()


# ---------------------------------------------------------------- the whole update in one plan (issue 45, item 3)
def tiny_update(compiled: bool, clip: float = 2.0):
    """make_step on a Linear layer with Adam, an lr that changes every step and clipping at `clip`,
    compiled whole or eager: (step, layer, optimizer, the lr of each step, the CompiledGradients)."""
    import tinygrad_lite as tl
    from tinygrad_lite import Tensor, nn
    from tinygrad_lite.optim import Adam
    from transformer.loop import forward_backward, make_step

    tl.manual_seed(0)
    layer = nn.Linear(3, 2)
    optimizer = Adam(layer.parameters(), lr=0.1)
    lrs, made = [], []

    def loss_of(batch):
        x, y = batch
        d = layer(Tensor(x)) - Tensor(y)
        return (d * d).mean()

    def set_lr():
        lrs.append(0.1 / (1 + len(lrs)))
        optimizer.param_groups[0]["lr"] = lrs[-1]

    def compile(update):
        made.append(CompiledGradients(update))
        return made[-1]
    step = make_step(forward_backward(loss_of, optimizer), lambda batch: batch[1].size, layer.parameters(),
                     optimizer, clip=clip, set_lr=set_lr, compile=compile if compiled else None)
    return step, layer, optimizer, lrs, made[0] if made else None


def tiny_batches(n: int = 6):
    """Batches whose gradient norms lie both below and above 2 (clipped on some steps, not others)."""
    r = np.random.default_rng(1)
    return [(r.standard_normal((4, 3)).astype(np.float32), (r.standard_normal((4, 2)) * s).astype(np.float32))
            for s in (0.01, 5.0, 0.01, 8.0, 0.02, 6.0)[:n]]


def test_the_whole_update_replays_with_each_steps_learning_rate_step_count_and_clipping():
    """Loss, backward, clipping, the lr and Adam's step are one plan, replayed with this step's lr
    (set_lr is a recorded call: a plan that kept the capture's lr ends elsewhere) and Adam's step
    count (its bias correction), and clips by this step's norm: the weights equal eager ones bit for bit."""
    runs = {}
    for compiled in (True, False):
        step, layer, optimizer, lrs, made = tiny_update(compiled)
        stepped = [step(batch) for batch in tiny_batches()]
        runs[compiled] = (stepped, [p.data.copy() for p in layer.parameters()], lrs, optimizer, made)
    (c_stepped, c_weights, c_lrs, c_opt, made), (e_stepped, e_weights, e_lrs, e_opt, _) = runs[True], runs[False]
    assert c_stepped == e_stepped and c_lrs == e_lrs and len(set(c_lrs)) == 6
    norms = [s.grad_norm for s in c_stepped]
    assert min(norms) < 2.0 < max(norms)  # clipped on some steps, not on others
    assert_same(c_weights, e_weights)
    assert [s["step"] for s in c_opt.state.values()] == [s["step"] for s in e_opt.state.values()] == [6, 6]
    assert made.summary() == {"compiled_batches": 6, "plans": 1, "captures": 1, "joined": 0, "fallbacks": 0}
    plan = next(iter(made.compiled.plans.values()))
    called = {getattr(c, "__qualname__", "") for c in plan.constants.values()}
    assert {"clip_grad_norm_", "Adam.step", "tiny_update.<locals>.set_lr", "make_step.<locals>.seen"} <= called
    assert not {c for c in plan.constants.values() if isinstance(c, float)} & set(c_lrs)  # no lr in the program


def test_the_gpt_and_the_translator_replay_their_whole_update_as_one_plan(tmp_path):
    gpt = GPTTrainer(gpt_config(tmp_path / "gpt"), Quiet())
    gpt.run()
    translator = Trainer(translator_config(tmp_path / "translator", max_steps=6), report=Quiet())
    translator.run()
    for trainer, update in ((gpt, "CombinedOptimizer.step"), (translator, "Adam.step")):
        for plan in trainer.compiled.compiled.plans.values():
            called = [getattr(c, "__qualname__", "") for c in plan.constants.values()]
            assert "make_step.<locals>.seen" in called and "clip_grad_norm_" in called and update in called
    assert "NoamLR.step" in called or "LRScheduler.step" in called


def nan_at(iteration: int):
    """A report that, after step `iteration`, makes the token embedding NaN: the next step's loss is NaN."""
    class NanAfter(Quiet):
        def step(self, trainer, loss, tokens_per_s):
            if trainer.iter == iteration:
                trainer.model.token_embedding.weight.data[:] = np.nan
                self.weights = weights(trainer)
    return NanAfter()


@pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning")  # the NaN the test injects
def test_a_nan_loss_inside_a_replayed_update_stops_it_before_the_optimizer_moves(tmp_path):
    """The NaN check is a recorded call inside the plan, before clipping and the optimizer's step: a
    compiled run stops where the eager one stops, with the same message (the op named on the weights as
    they were), the same weights and moments (none moved), and the checkpoint of the last evaluation."""
    from tinygrad_lite import checkpoint
    from transformer.gpt.training import optimizers_of
    from transformer.train import TrainingDiverged
    runs = {}
    for compile in (True, False):
        trainer = GPTTrainer(gpt_config(tmp_path / str(compile), dropout=0.0, compile=compile), nan_at(4))
        with pytest.raises(TrainingDiverged, match="the loss became nan at iter 4") as stopped, \
                fast.tricks_off(*RULE_SWITCHES):
            trainer.run()
        runs[compile] = trainer, str(stopped.value)
    (compiled, message), (eager, eager_message) = runs[True], runs[False]
    assert replayed(compiled) == 5 and message == eager_message and "op '" in message
    assert_same(weights(compiled), compiled.report.weights)  # the NaN step moved nothing
    assert_same(weights(compiled), weights(eager))
    moments = [[(k, v) for part in optimizers_of(t.optimizer) for state in part.state.values()
                for k, v in sorted(state.items())] for t in (compiled, eager)]
    assert [k for k, _ in moments[0]] == [k for k, _ in moments[1]] and len(moments[0]) > 0
    assert_same([v for _, v in moments[0]], [v for _, v in moments[1]])
    _, meta = checkpoint.load(compiled.checkpoint_path)
    assert meta["metadata"]["iter"] == 3  # the evaluation at 3 saved; nothing after the NaN step
