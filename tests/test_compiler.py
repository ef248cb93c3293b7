"""The step compiler (tinygrad_lite.compiler): a compiled step gives what the eager step gives, bit for
bit, and refuses what it cannot replay."""
import copy

import numpy as np
import pytest

import tinygrad_lite as tl
from tinygrad_lite import Tensor
from tinygrad_lite.compiler import CompileError, compile
from tinygrad_lite.optim import SGD, Adam, clip_grad_norm_


def mlp_params(dtype, seed=0):
    r = np.random.default_rng(seed)
    return [Tensor(r.standard_normal(shape).astype(dtype) * 0.5, requires_grad=True)
            for shape in ((3, 8), (8,), (8, 1), (1,))]


def make_step(params, opt, clip=None):
    w1, b1, w2, b2 = params

    def step(x, y):
        opt.zero_grad()
        h = x @ w1 + b1
        pred = h.tanh() @ w2 + b2
        loss = ((pred - y) * (pred - y)).mean()
        loss.backward()
        norm = clip_grad_norm_(params, clip) if clip is not None else None
        opt.step()
        return loss, norm
    return step


def batches(dtype, n=5, rows=16, seed=1):
    r = np.random.default_rng(seed)
    return [(Tensor(r.standard_normal((rows, 3)).astype(dtype)), Tensor(r.standard_normal((rows, 1)).astype(dtype)))
            for _ in range(n)]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
def test_compiled_training_equals_eager_bit_for_bit(dtype, optimizer):
    eager_params, compiled_params = mlp_params(dtype), mlp_params(dtype)
    make = (lambda ps: SGD(ps, lr=0.1, momentum=0.9)) if optimizer == "sgd" else (lambda ps: Adam(ps, lr=0.01))
    eager = make_step(eager_params, make(eager_params), clip=1.0)
    compiled = compile(make_step(compiled_params, make(compiled_params), clip=1.0))
    for x, y in batches(dtype):
        loss_e, norm_e = eager(x, y)
        loss_c, norm_c = compiled(x, y)
        np.testing.assert_array_equal(loss_c.data, loss_e.data)
        assert norm_c == norm_e
        for pe, pc in zip(eager_params, compiled_params):
            np.testing.assert_array_equal(pc.data, pe.data)
            np.testing.assert_array_equal(pc.grad, pe.grad)
    assert compiled.captures == 1
    assert not loss_c.requires_grad and loss_c.dtype == dtype


def test_a_new_shape_captures_again_and_both_plans_stay_right():
    eager_params, compiled_params = mlp_params(np.float64), mlp_params(np.float64)
    eager = make_step(eager_params, SGD(eager_params, lr=0.05))
    compiled = compile(make_step(compiled_params, SGD(compiled_params, lr=0.05)))
    for rows in (16, 7, 16, 7):
        x, y = batches(np.float64, n=1, rows=rows, seed=rows)[0]
        np.testing.assert_array_equal(compiled(x, y)[0].data, eager(x, y)[0].data)
    assert compiled.captures == 2 and len(compiled.plans) == 2


def test_the_learning_rate_and_step_count_are_read_at_each_replay():
    eager_params, compiled_params = mlp_params(np.float32), mlp_params(np.float32)
    eager_opt, compiled_opt = Adam(eager_params, lr=0.01), Adam(compiled_params, lr=0.01)
    eager, compiled = make_step(eager_params, eager_opt), compile(make_step(compiled_params, compiled_opt))
    for i, (x, y) in enumerate(batches(np.float32, n=4)):
        for opt in (eager_opt, compiled_opt):
            opt.param_groups[0]["lr"] = 0.01 / (i + 1)
        eager(x, y), compiled(x, y)
    assert compiled_opt.state[compiled_params[0]]["step"] == 4
    for pe, pc in zip(eager_params, compiled_params):
        np.testing.assert_array_equal(pc.data, pe.data)


def test_the_capture_changes_nothing_and_draws_no_random_numbers():
    params = mlp_params(np.float64)
    before = [p.data.copy() for p in params]
    opt = SGD(params, lr=0.5)
    compiled = compile(make_step(params, opt))
    x, y = batches(np.float64, n=1)[0]
    tl.manual_seed(3)
    state = copy.deepcopy(tl.random.get_rng_state())
    capture = compiled.capture((x, y))
    assert tl.random.get_rng_state() == state
    for p, b in zip(params, before):
        np.testing.assert_array_equal(p.data, b)
        assert p.grad is None
    assert capture.ops >= 8


def test_a_step_that_accumulates_gradients_accumulates_as_eager():
    eager_params, compiled_params = mlp_params(np.float64), mlp_params(np.float64)

    def make(params):
        w1, b1, w2, b2 = params

        def step(x, y):  # no zero_grad: .grad sums over calls, as in eager
            loss = ((((x @ w1 + b1).tanh() @ w2 + b2) - y) ** 2).sum()
            loss.backward()
            return loss
        return step
    eager, compiled = make(eager_params), compile(make(compiled_params))
    for x, y in batches(np.float64, n=3):
        eager(x, y), compiled(x, y)
    for pe, pc in zip(eager_params, compiled_params):
        np.testing.assert_array_equal(pc.grad, pe.grad)


def test_reading_a_value_into_python_during_capture_is_refused_with_the_line():
    w = Tensor(np.ones((3, 1)), requires_grad=True)

    def step(x):
        loss = (x @ w).sum()
        if loss.item() > 0:  # control flow on data: a plan would freeze this branch
            loss = loss * 2
        return loss
    with pytest.raises(CompileError, match=r"test_compiler.py:\d+"):
        compile(step)(Tensor(np.ones((2, 3))))


def test_a_number_read_from_a_step_input_is_refused():
    w = Tensor(np.ones((3, 1)), requires_grad=True)

    def step(x):
        keep = x.data > 0
        return (x @ w).sum() * float(keep.sum())  # a number that changes with the input
    with pytest.raises(CompileError, match=r"\(float\(\)\) at .*test_compiler.py:\d+"):
        compile(step)(Tensor(np.ones((2, 3))))


def test_numpy_on_step_inputs_replays_and_a_branch_on_them_is_a_guard():
    w = Tensor(np.linspace(-1, 1, 12).reshape(4, 3), requires_grad=True)

    def step(ids):
        if (ids < 0).any() or ids.max() >= 4:  # a check at the model's boundary: a guard
            raise ValueError("step: ids outside [0, 4)")
        keep = (ids != 0)[..., None]             # a padding mask made with NumPy: replayed, not frozen
        rows = Tensor(np.cos(ids[..., None] * np.arange(4.0)))  # rows made from the ids with NumPy
        loss = ((rows @ w) * Tensor(keep.astype(np.float64))).sum()
        loss.backward()
        return loss
    compiled = compile(step)
    r = np.random.default_rng(0)
    for _ in range(3):
        ids = r.integers(0, 4, size=(5, 6))
        w.grad = None
        want = step(ids).data.copy(), w.grad.copy()
        w.grad = None
        got = compiled(ids).data, w.grad
        np.testing.assert_array_equal(got[0], want[0])
        np.testing.assert_array_equal(got[1], want[1])
    with pytest.raises(ValueError, match="outside"):
        compiled(np.full((5, 6), 7))
    assert compiled.captures == 1 and compiled.fallbacks == 1


def test_value_dependent_shapes_are_refused():
    def step(ids):
        return Tensor(ids[ids != 0].astype(np.float64)).sum()
    with pytest.raises(CompileError, match="boolean mask"):
        compile(step)(np.arange(6).reshape(2, 3))


def test_the_result_of_a_recorded_call_cannot_steer_the_step():
    params = mlp_params(np.float64)
    w1, b1, w2, b2 = params

    def step(x, y):
        loss = (((x @ w1 + b1).tanh() @ w2 + b2 - y) ** 2).mean()
        loss.backward()
        if clip_grad_norm_(params, 1.0) > 10:
            pass
        return loss
    x, y = batches(np.float64, n=1)[0]
    with pytest.raises(CompileError, match="clip_grad_norm_"):
        compile(step)(x, y)


def test_anomaly_mode_runs_the_step_eagerly():
    params = mlp_params(np.float64)
    compiled = compile(make_step(params, SGD(params, lr=0.1)))
    x, y = batches(np.float64, n=1)[0]
    with tl.detect_anomaly():
        compiled(x, y)
    assert compiled.captures == 0


def test_compile_refuses_what_is_not_a_function_or_a_key():
    with pytest.raises(TypeError, match="compile: expected a function"):
        compile(3)
    with pytest.raises(CompileError, match="argument 0 is a list"):
        compile(lambda a: a)([1, 2])


# ---------------------------------------------------------------- a leaf adopts the gradient made for it alone
def test_a_replay_adopts_fresh_gradients_and_copies_shared_ones(monkeypatch):
    """A gradient array that only the plan refers to becomes the leaf's .grad uncopied; one that two leaves
    get (an add's backward hands both the same array) is copied for the first, so clipping scales each once."""
    from tinygrad_lite.compiler import leaf_grads
    r = np.random.default_rng(0)
    w1, w2, w3 = (Tensor(r.standard_normal((4, 4)), requires_grad=True) for _ in range(3))
    x = r.standard_normal((5, 4))
    opt = SGD([w1, w2, w3], lr=0.0)

    def step(x):
        opt.zero_grad()
        loss = (((Tensor(x) @ w3).tanh() @ (w1 + w2)) ** 2).sum()
        loss.backward()
        clip_grad_norm_([w1, w2, w3], 0.5)
        return loss
    compiled = compile(step)
    compiled(x)
    adopted = []
    real = leaf_grads.into_leaf
    monkeypatch.setattr(leaf_grads, "into_leaf", lambda leaf, g, own: (adopted.append((leaf, own)), real(leaf, g, own)))
    compiled(x)
    got = [w.grad.copy() for w in (w1, w2, w3)]
    monkeypatch.setattr(leaf_grads, "into_leaf", real)
    step(x)
    for g, w in zip(got, (w1, w2, w3)):
        np.testing.assert_array_equal(g, w.grad)
    owns = {id(leaf): own for leaf, own in adopted}
    assert owns[id(w3)] and sorted((owns[id(w1)], owns[id(w2)])) == [False, True]  # the second holder adopts
    assert w1.grad is not w2.grad


def test_a_gradient_a_numba_kernel_made_is_adopted_when_alone_and_copied_when_shared():
    """A Numba kernel's output views memory that a Numba MemInfo owns, not an array: the count still decides."""
    numba = pytest.importorskip("numba")
    from tinygrad_lite.compiler import leaf_grads
    make = numba.njit(lambda: np.ones((3, 3)))
    for shared in (False, True):
        leaf = Tensor(np.zeros((3, 3)), requires_grad=True)
        v1 = make()
        assert v1.base is not None and not isinstance(v1.base, np.ndarray)
        other = v1 if shared else None
        leaf_grads.into_leaf_at_replay(leaf, v1, False)
        assert (leaf.grad is v1) is not shared and other is (v1 if shared else None)
        np.testing.assert_array_equal(leaf.grad, np.ones((3, 3)))
