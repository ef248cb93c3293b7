"""@recorded calls in a compiled step (tinygrad_lite.compiler.capture): made at each replay, in their
place among the ops, on what that replay made: the step's tensors, its inputs, earlier recorded calls'
results (in tuples and keywords too); a tensor's bare array is refused."""
import numpy as np
import pytest

from tinygrad_lite import Tensor
from tinygrad_lite.autograd import recorded
from tinygrad_lite.compiler import CompileError, compile
from tinygrad_lite.optim import SGD


def test_a_recorded_call_gets_each_replays_tensors_inputs_and_results():
    calls = []
    w = Tensor(np.array([1.0, 2.0, 3.0]), requires_grad=True)

    @recorded
    def total(x) -> float:
        return float(x.sum())

    @recorded
    def look(loss, pair, earlier, scale=1.0) -> float:
        calls.append((loss.item(), pair[0].copy(), pair[1], earlier, scale))
        return loss.item() * scale + earlier

    def step(x):
        loss = (Tensor(x) * w).sum()
        loss.backward()
        return loss, look(loss, (x, "tag"), total(x), scale=2.0)

    compiled = compile(step)
    results = [compiled(np.full(3, float(i))) for i in range(1, 4)]
    assert compiled.captures == 1
    assert [r[1] for r in results] == [6.0 * 2 + 3, 12.0 * 2 + 6, 18.0 * 2 + 9]
    assert [c[0] for c in calls] == [6.0, 12.0, 18.0] and [c[3] for c in calls] == [3.0, 6.0, 9.0]
    assert all(c[2] == "tag" and c[4] == 2.0 for c in calls)
    np.testing.assert_array_equal(calls[-1][1], np.full(3, 3.0))
    np.testing.assert_array_equal(w.grad, np.full(3, 6.0))  # 1 + 2 + 3: the replays' backward, accumulated


def test_a_recorded_call_made_between_ops_sees_the_gradients_of_its_replay():
    w = Tensor(np.array([1.0, -2.0]), requires_grad=True)
    norms = []

    @recorded
    def grad_norm(param) -> float:
        norms.append(float(np.linalg.norm(param.grad)))
        return norms[-1]

    optimizer = SGD([w], lr=0.1)

    def step(x):
        optimizer.zero_grad()
        (Tensor(x) * w * w).sum().backward()
        return grad_norm(w)

    compiled = compile(step)
    assert [compiled(np.array([1.0, 1.0]) * k) for k in (1.0, 2.0, 3.0)] == norms
    assert norms == pytest.approx([np.sqrt(20) * k for k in (1.0, 2.0, 3.0)])  # 2·x·w, each replay's own


def test_a_recorded_call_on_a_tensors_bare_array_is_refused():
    w = Tensor(np.ones(2), requires_grad=True)

    @recorded
    def peek(array):
        return array

    def step(x):
        loss = (Tensor(x) * w).sum()
        return peek(loss.data)

    with pytest.raises(CompileError, match="peek .*got a tensor's values; pass the tensors themselves"):
        compile(step)(np.ones(2))
