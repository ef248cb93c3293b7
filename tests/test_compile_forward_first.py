"""A capture's first dry run records the step's forward only, up to backward(): the rules read no more
(tinygrad_lite/compiler/step.py). Whatever the forward alone hides (an op the rules fused, read after
backward) makes the whole step captured plain instead, never a wrong plan."""
import sys

import numpy as np
import pytest

import tinygrad_lite as tl
from tinygrad_lite import Tensor, fast
from tinygrad_lite.compiler import compile
from tinygrad_lite.compiler import step as compiler_step
from tinygrad_lite.nn import functional as F

sys.path.insert(0, "tests")  # this file's helpers, as pytest finds them
from rule_oracle import plan_of  # noqa: E402


def ffn(dtype=np.float64, seed=0):
    r = np.random.default_rng(seed)
    w1 = Tensor((r.standard_normal((12, 6)) * 0.4).astype(dtype), requires_grad=True)
    b1 = Tensor((r.standard_normal(12) * 0.1).astype(dtype), requires_grad=True)
    w2 = Tensor((r.standard_normal((6, 12)) * 0.4).astype(dtype), requires_grad=True)
    return w1, b1, w2


def ffn_step(w1, b1, w2, returns_relu=False, swallows=False):
    def step(x):
        a = F.linear(x, w1, b1).relu()
        y = F.linear(F.dropout(a, 0.3, True), w2)
        loss = (y * y).sum()
        if swallows:
            try:
                loss.backward()
            except Exception:  # noqa: BLE001  (a step that hides its own errors: the capture's stop is not one)
                pass
        else:
            loss.backward()
        return (loss, a) if returns_relu else loss
    return step


def dry_runs(monkeypatch) -> list:
    """Each dry run of every capture, as (forward_only, stopped at backward, ops recorded), or
    (forward_only, "refused") for one that raised."""
    runs, original = [], compiler_step.CompiledStep._capture

    def recording(self, args, capture):
        try:
            done = original(self, args, capture)
        except Exception:
            runs.append((capture.forward_only, "refused"))
            raise
        runs.append((done.forward_only, done.forward_only and done.backward_reached, len(done.records)))
        return done
    monkeypatch.setattr(compiler_step.CompiledStep, "_capture", recording)
    return runs


def run(step, params, x, seed=3):
    for p in params:
        p.grad = None
    tl.manual_seed(seed)
    out = step(x)
    values = [np.array(o.data) for o in (out if isinstance(out, tuple) else (out,))]
    return values, [p.grad.copy() for p in params]


@pytest.mark.parametrize("swallows", [False, True])
def test_the_first_dry_run_stops_at_backward_and_the_plan_is_the_eager_steps(monkeypatch, swallows):
    """The forward-only run records the four forward ops (linear, relu, dropout, linear, then the loss's
    mul and sum) and stops at backward(), even where the step catches Exception around it; the whole step
    is then captured once, fused, and replays what eager mode computes."""
    runs = dry_runs(monkeypatch)
    params = ffn()
    x = Tensor(np.random.default_rng(1).standard_normal((2, 5, 6)), requires_grad=False)
    eager = run(ffn_step(*params, swallows=swallows), params, x)
    compiled = compile(ffn_step(*params, swallows=swallows))
    with fast.tricks_on("fused_ffn"):  # the rule's switch, as the process has it otherwise (off on the formula path)
        first = run(compiled, params, x)
    assert runs[0][:2] == (True, True) and runs[1][:2] == (False, False) and len(runs) == 2
    assert runs[0][2] == runs[1][2] == 6  # the fused run keeps an index (None) for each op it defers
    assert [r for r, _ in plan_of(compiled).fusions.values()] == ["linear_relu_dropout"]
    for a, b in zip(eager[0] + eager[1], first[0] + first[1]):
        np.testing.assert_allclose(b, a, rtol=1e-12, atol=1e-12)


def test_an_op_the_forward_let_the_rules_fuse_but_the_step_returns_is_captured_unfused(monkeypatch):
    """The ReLU's output is read after backward() (returned), which the forward alone does not show: the
    rules fuse linear -> relu -> dropout, that capture refuses (the step returns a fused-away op), and the
    plain whole step is read instead. Its rules fuse linear -> relu only, whose output anything may read."""
    runs = dry_runs(monkeypatch)
    params = ffn()
    x = Tensor(np.random.default_rng(1).standard_normal((2, 5, 6)), requires_grad=False)
    eager = run(ffn_step(*params, returns_relu=True), params, x)
    compiled = compile(ffn_step(*params, returns_relu=True))
    with fast.tricks_on("fused_ffn"):
        replays = [run(compiled, params, x) for _ in range(2)]
    assert [r[:2] for r in runs] == [(True, True), (False, "refused"), (False, False), (False, False)]
    plan = plan_of(compiled)
    assert [r for r, _ in plan.fusions.values()] == ["linear_relu_dropout"]
    assert "dropout" in plan.op_names and "relu" not in plan.op_names
    for values, grads in replays:
        for a, b in zip(eager[0] + eager[1], values + grads):
            np.testing.assert_allclose(b, a, rtol=1e-12, atol=1e-12)


def test_a_step_without_backward_is_captured_in_one_run(monkeypatch):
    """No backward(): the forward-only run is the whole step, and with nothing to fuse it is the plan."""
    runs = dry_runs(monkeypatch)
    w = Tensor(np.arange(6.0).reshape(2, 3))
    step = compile(lambda x: (F.linear(x, w) * 2.0).sum())
    x = np.ones((4, 3))
    assert float(step(x).data) == float((F.linear(Tensor(x), w) * 2.0).sum().data)
    assert runs == [(True, False, 3)]


def test_after_a_refused_fusion_the_kept_rows_capture_fuses_what_the_whole_step_allows():
    """The forward lets linear -> relu -> dropout fuse, but after backward() a probe reads the ReLU's output:
    that capture refuses and the whole plain step fuses linear -> relu only. Rule skip_padding then finds the
    padded batch's kept rows, and their capture must use those rewrites, not the forward's (which raised
    CompileError on this valid step). The plan runs on the rows and gives eager mode's losses and gradients."""
    r = np.random.default_rng(0)
    emb, w1, b1, w2, w3 = (Tensor(r.standard_normal(shape) * 0.4, requires_grad=True)
                           for shape in ((10, 6), (12, 6), (12,), (10, 12), (10, 12)))

    def step(batch):
        ids, targets = batch
        a = F.linear(F.embedding(ids, emb), w1, b1).relu()
        y = F.linear(F.dropout(a, 0.3, True), w2)
        loss = F.cross_entropy(y.reshape(-1, 10), targets.reshape(-1), ignore_index=0)
        loss.backward()
        probe = F.cross_entropy(F.linear(a, w3).reshape(-1, 10), targets.reshape(-1), ignore_index=0)
        return loss, probe

    ids, targets = np.array([[3, 4, 5, 0], [6, 7, 0, 0]]), np.array([[4, 5, 1, 0], [7, 2, 0, 0]])
    params = (emb, w1, b1, w2)
    with fast.tricks_on("fused_ffn", "skip_padding"):
        eager = run(step, params, (ids, targets))
        compiled = compile(step)
        replays = [run(compiled, params, (ids, targets)) for _ in range(2)]
    plan = plan_of(compiled)
    assert [names for _, names in plan.fusions.values()] == [("linear", "relu")]
    assert plan.rows  # the ops ran on the kept rows
    for values, grads in replays:
        for a, b in zip(eager[0] + eager[1], values + grads):
            np.testing.assert_allclose(b, a, rtol=1e-10, atol=1e-12)
