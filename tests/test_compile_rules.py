"""The compiler's rewrite rules (tinygrad_lite.compiler.rules): each fuses only what it matches, and the
plain ops, its switch off, are its oracle."""
import numpy as np
import pytest

import tinygrad_lite as tl
from tinygrad_lite import Tensor, fast
from tinygrad_lite.compiler import CompileError, compile


def residual_step(w, p=0.3, reuse=False):
    def step(x):
        s = (x @ w).tanh()
        d = s.dropout(p)
        y = x + d                       # Add & Norm's residual: x + Dropout(sublayer(x))
        if reuse:
            y = y * d                   # the dropout's output read twice: no fusion
        loss = (y * y).sum()
        loss.backward()
        return loss
    return step


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_add_dropout_fuses_and_agrees_with_the_plain_ops(dtype):
    r = np.random.default_rng(0)
    w = Tensor((r.standard_normal((6, 6)) * 0.5).astype(dtype), requires_grad=True)
    xs = [Tensor(r.standard_normal((5, 6)).astype(dtype)) for _ in range(3)]
    fused, plain = compile(residual_step(w)), compile(residual_step(w))
    tol = 1e-5 if dtype == np.float32 else 1e-12
    for i, x in enumerate(xs):
        tl.manual_seed(i)
        w.grad = None
        with fast.tricks_on("fused_residual"):  # the formula pass of CI runs with every rule off
            loss_fused, grad_fused = fused(x).data.copy(), w.grad.copy()
        tl.manual_seed(i)
        w.grad = None
        with fast.tricks_off("fused_residual"):
            loss_plain, grad_plain = plain(x).data.copy(), w.grad.copy()
        tl.manual_seed(i)
        w.grad = None
        loss_eager = residual_step(w)(x).data.copy()
        np.testing.assert_allclose(loss_fused, loss_plain, rtol=tol)
        np.testing.assert_allclose(loss_fused, loss_eager, rtol=tol)
        np.testing.assert_allclose(grad_fused, grad_plain, rtol=tol, atol=tol * np.abs(grad_plain).max())
    assert "add_dropout" in fused.plans[next(iter(fused.plans))].op_names
    plan_plain = next(p for k, p in plain.plans.items())
    assert "add_dropout" not in plan_plain.op_names and "dropout" in plan_plain.op_names


def test_the_fused_and_plain_plans_draw_the_same_masks():
    w = Tensor(np.eye(6) * 0.5, requires_grad=True)
    x = Tensor(np.ones((4, 6)))
    fused, plain = compile(residual_step(w, p=0.5)), compile(residual_step(w, p=0.5))
    tl.manual_seed(7)
    w.grad = None
    with fast.tricks_on("fused_residual"):
        fused(x)
    after_fused = tl.random.get_rng_state()
    grad_fused = w.grad.copy()
    tl.manual_seed(7)
    w.grad = None
    with fast.tricks_off("fused_residual"):
        plain(x)
    assert tl.random.get_rng_state() == after_fused
    np.testing.assert_array_equal(grad_fused == 0, w.grad == 0)  # the same rows dropped


def test_a_dropout_read_twice_is_not_fused():
    w = Tensor(np.eye(6) * 0.5, requires_grad=True)
    step = compile(residual_step(w, reuse=True))
    x = Tensor(np.ones((4, 6)))
    tl.manual_seed(1)
    got = step(x).data.copy()
    tl.manual_seed(1)
    w.grad = None
    want = residual_step(w, reuse=True)(x).data
    np.testing.assert_array_equal(got, want)
    plan = next(iter(step.plans.values()))
    assert "add_dropout" not in plan.op_names and "dropout" in plan.op_names


def test_a_step_that_sets_grad_itself_is_refused():
    w = Tensor(np.eye(3), requires_grad=True)
    w.grad = np.ones((3, 3))

    def step(x):
        loss = (x @ w).sum()
        w.grad = None  # not a recorded call: a replay would not do it
        loss.backward()
        return loss
    with pytest.raises(Exception, match="zero_grad"):
        compile(step)(Tensor(np.ones((2, 3))))


def test_two_dropouts_added_draw_their_masks_in_the_eager_order():
    """dropout(s) + dropout(x): the fused op draws where the add runs, so only the dropout that runs just
    before the add may go into it; fusing the first one would swap the two masks."""
    w = Tensor(np.eye(6) * 0.5, requires_grad=True)

    def step(x):
        y = (x @ w).tanh().dropout(0.5) + x.dropout(0.5)
        loss = (y * y).sum()
        loss.backward()
        return loss
    compiled = compile(step)
    x = Tensor(np.arange(24.0).reshape(4, 6) / 10)
    tl.manual_seed(3)
    with fast.tricks_on("fused_residual"):
        got = compiled(x).data.copy()
    tl.manual_seed(3)
    w.grad = None
    np.testing.assert_allclose(got, step(x).data, rtol=1e-12)
    plan = next(iter(compiled.plans.values()))
    assert plan.op_names == ["matmul", "tanh", "dropout", "add_dropout", "mul", "sum"]


@pytest.mark.parametrize("change", ["order", "read", "skip", "return"])
def test_a_step_that_runs_other_ops_on_its_second_capture_is_refused(change):
    """The second capture runs the first capture's ops with a group fused; a step that runs other ops
    then (Python state that changes between calls) would replay wrong, so it is refused: another op where
    the group's last op ran, an op that reads a deferred op's output, a group that never reaches its last
    op, a deferred op's output returned."""
    w = Tensor(np.eye(6) * 0.5, requires_grad=True)
    calls = [0]

    def step(x):
        calls[0] += 1
        second = calls[0] == 2
        d = (x @ w).tanh().dropout(0.3)
        if second and change == "skip":
            return x
        if second and change == "return":
            return d
        y = (x * 1.0) + d if second and change == "order" else x + d
        loss = ((y * d) if second and change == "read" else (y * y)).sum()
        loss.backward()
        return loss
    with fast.tricks_on("fused_residual"), pytest.raises(CompileError, match="first capture"):
        compile(step)(Tensor(np.ones((4, 6))))
