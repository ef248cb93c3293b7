"""nn.functional's fused ops under the step compiler: a compiled step gives the eager step's loss and
gradients bit for bit, on its first call (the capture's plan) and on replays with new inputs (ids,
targets, masks, dropout draws); a value check (an id out of range) raises in a replay as in eager."""
import numpy as np
import pytest

import tinygrad_lite as tl
import tinygrad_lite.nn.functional as F
import tinygrad_lite.nn.fused as fused_ops
from tinygrad_lite import Tensor, fast
from tinygrad_lite.compiler import compile

DTYPES = [np.float32, np.float64]


def params(dtype, *shapes, seed=0):
    r = np.random.default_rng(seed)
    return [Tensor(r.standard_normal(shape).astype(dtype), requires_grad=True) for shape in shapes]


def const(dtype, shape, seed=99):
    """A fixed weighting of an op's output: its loss has a gradient that differs per element."""
    return Tensor(np.random.default_rng(seed).standard_normal(shape).astype(dtype))


def run(step, leaves, calls, seed=None):
    """step(*args) for each args in calls (fresh .grad each time): [(loss, grads of leaves), ...] copied."""
    if seed is not None:
        tl.manual_seed(seed)
    results = []
    for args in calls:
        for t in leaves:
            t.grad = None
        loss = step(*args)
        results.append((np.array(loss.data), [None if t.grad is None else np.array(t.grad) for t in leaves]))
    return results


def assert_same(compiled, eager):
    assert len(compiled) == len(eager)
    for (loss_c, grads_c), (loss_e, grads_e) in zip(compiled, eager):
        assert loss_c.dtype == loss_e.dtype
        np.testing.assert_array_equal(loss_c, loss_e)
        for gc, ge in zip(grads_c, grads_e):
            assert (gc is None) == (ge is None)
            if ge is not None:
                assert gc.dtype == ge.dtype
                np.testing.assert_array_equal(gc, ge)


def compare(make_step, make_leaves, calls, seed=None):
    """make_step(leaves) run eagerly and compiled on copies of the same leaves: the same numbers on every
    call, from one capture. Returns the eager results (for further checks)."""
    eager_leaves, compiled_leaves = make_leaves(), make_leaves()
    eager = run(make_step(*eager_leaves), eager_leaves, calls, seed)
    step = compile(make_step(*compiled_leaves))
    assert_same(run(step, compiled_leaves, calls, seed), eager)
    assert step.captures == 1 and step.fallbacks == 0
    return eager


@pytest.fixture(params=["tricks on", "tricks off"])
def tricks(request):
    with (fast.tricks_on() if request.param == "tricks on" else fast.tricks_off()):
        yield request.param


def backward(loss):
    loss.backward()
    return loss


def tensors(dtype, shape, n, seed):
    r = np.random.default_rng(seed)
    return [(Tensor(r.standard_normal(shape).astype(dtype)),) for _ in range(n)]


# ---------------------------------------------------------------- linear and its fused neighbours

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("x_shape", [(7, 4), (2, 3, 4)])
def test_linear(tricks, dtype, bias, x_shape):
    out_shape = x_shape[:-1] + (5,)

    def make_step(w, b):
        c = const(dtype, out_shape)
        return lambda x: backward((F.linear(x, w, b if bias else None) * c).sum())

    def leaves():
        return params(dtype, (5, 4), (5,))
    eager = compare(make_step, leaves, tensors(dtype, x_shape, 3, seed=1))
    assert (eager[0][1][1] is None) != bias


def test_linear_on_a_plain_array_input():
    def make_step(w, b):
        return lambda x: backward(F.linear(x, w, b).sum())
    r = np.random.default_rng(13)
    calls = [(r.standard_normal((3, 4)),) for _ in range(3)]
    compare(make_step, lambda: params(np.float64, (5, 4), (5,)), calls)


def test_linear_gradient_into_an_input_that_requires_grad():
    dtype = np.float64
    r = np.random.default_rng(3)
    inputs = [Tensor(r.standard_normal((2, 6, 4)), requires_grad=True) for _ in range(3)]

    def make_step(w, b):
        c = const(dtype, (2, 6, 5))
        return lambda x: backward((F.linear(x, w, b) * c).sum())
    eager_leaves, compiled_leaves = params(dtype, (5, 4), (5,)), params(dtype, (5, 4), (5,))
    eager_grads = []
    for x in inputs:
        x.grad = None
        make_step(*eager_leaves)(x)
        eager_grads.append(x.grad)
    step = compile(make_step(*compiled_leaves))
    for x, expected in zip(inputs, eager_grads):
        x.grad = None
        step(x)
        np.testing.assert_array_equal(x.grad, expected)
    assert step.captures == 1


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("training", [True, False])
def test_linear_relu_dropout(tricks, dtype, training):
    def make_step(w, b):
        c = const(dtype, (2, 5, 6))
        return lambda x: backward((fused_ops.linear_relu_dropout(x, w, b, 0.3, training) * c).sum())

    def leaves():
        return params(dtype, (6, 4), (6,))
    eager = compare(make_step, leaves, tensors(dtype, (2, 5, 4), 3, seed=2), seed=7)
    if training:  # each call drew its own mask, in eager and in the replays alike
        assert not np.array_equal(eager[0][1][0], eager[1][1][0])


@pytest.mark.parametrize("dtype", DTYPES)
def test_add_dropout(tricks, dtype):
    def make_step(a, s):
        c = const(dtype, (3, 4, 5))
        return lambda u: backward((fused_ops.add_dropout(u * a, s, 0.25) * c).sum())

    def leaves():
        return params(dtype, (3, 4, 5), (3, 4, 5))
    eager = compare(make_step, leaves, tensors(dtype, (3, 4, 5), 3, seed=3), seed=11)
    drops = [(grads[1] == 0).sum() for _, grads in eager]
    assert all(d > 0 for d in drops) and not np.array_equal(eager[0][1][1], eager[2][1][1])


# ---------------------------------------------------------------- embedding

def embedding_step(dtype):
    def make_step(w):
        c = const(dtype, (3, 5, 6))
        return lambda ids: backward((F.embedding(ids, w, padding_idx=0) * c).sum())
    return make_step


@pytest.mark.parametrize("dtype", DTYPES)
def test_embedding_with_padding_idx(tricks, dtype):
    r = np.random.default_rng(4)
    calls = [(r.integers(0, 10, (3, 5)),) for _ in range(3)]
    calls[1][0][0, :2] = 0                                          # padding ids: their row gets no gradient
    eager = compare(embedding_step(dtype), lambda: params(dtype, (10, 6)), calls)
    for (ids,), (_, (dw,)) in zip(calls, eager):
        assert not dw[0].any()
        assert set(np.flatnonzero(dw.any(axis=1))) == set(ids.ravel()) - {0}


@pytest.mark.parametrize("bad", [10, -1])
def test_an_id_out_of_range_in_a_replay_raises_as_in_eager(bad):
    dtype = np.float64
    good = np.random.default_rng(5).integers(0, 10, (3, 5))
    wrong = good.copy()
    wrong[1, 2] = bad
    (w,) = params(dtype, (10, 6))
    with pytest.raises(IndexError) as eager_error:
        embedding_step(dtype)(w)(wrong)
    step = compile(embedding_step(dtype)(w))
    step(good)
    with pytest.raises(IndexError) as compiled_error:
        step(wrong)
    assert str(compiled_error.value) == str(eager_error.value)
    assert f"id {bad} is out of range for an embedding of 10 rows" in str(eager_error.value)
    assert step.captures == 1


# ---------------------------------------------------------------- losses

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("logits_shape", [(12, 7), (4, 7, 3)])
def test_cross_entropy_with_smoothing_and_ignored_targets(tricks, dtype, reduction, logits_shape):
    target_shape = logits_shape[:1] + logits_shape[2:]
    r = np.random.default_rng(6)
    calls = []
    for _ in range(3):
        target = r.integers(0, 7, target_shape)
        target.reshape(-1)[r.permutation(target.size)[:3]] = -1      # ignored, a different few each call
        calls.append((target,))

    def make_step(logits):
        def step(target):
            loss = F.cross_entropy(logits, target, ignore_index=-1, label_smoothing=0.1, reduction=reduction)
            return backward(loss.sum() if reduction == "none" else loss)
        return step
    eager = compare(make_step, lambda: params(dtype, logits_shape), calls)
    assert len({losses.tobytes() for losses, _ in eager}) == 3


def test_cross_entropy_class_out_of_range_in_a_replay_raises_as_in_eager():
    (logits,) = params(np.float32, (6, 4))

    def step(target):
        logits.grad = None
        loss = F.cross_entropy(logits, target)
        loss.backward()
        return loss
    good, wrong = np.array([0, 1, 2, 3, 0, 1]), np.array([0, 1, 4, 3, 0, 1])
    with pytest.raises(IndexError) as eager_error:
        step(wrong)
    compiled = compile(step)
    compiled(good)
    with pytest.raises(IndexError) as compiled_error:
        compiled(wrong)
    assert str(compiled_error.value) == str(eager_error.value)
    assert "target 4 is out of range for 4 classes" in str(eager_error.value)
    assert compiled.captures == 1


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("as_tensor", [True, False])
def test_binary_cross_entropy_with_logits(dtype, as_tensor):
    r = np.random.default_rng(8)
    targets = [(r.random((5, 3)) > 0.5).astype(dtype) for _ in range(3)]
    calls = [(Tensor(y) if as_tensor else y,) for y in targets]

    def make_step(logits):
        return lambda y: backward(F.binary_cross_entropy_with_logits(logits, y))
    compare(make_step, lambda: params(dtype, (5, 3)), calls)


# ---------------------------------------------------------------- attention, unpad and repad

def masks(r, shape, n):
    """n boolean attention masks (B, 1, T_q, T_k), every query row attending to at least one key."""
    out = []
    for _ in range(n):
        m = r.random(shape) > 0.4
        m[..., 0] = True
        out.append(m)
    return out


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("heads", [None, 2])
def test_fused_attention_with_a_boolean_mask(tricks, dtype, heads):
    B, T_q, T_k, h, d = 2, 5, 6, 2, 3
    shapes = [(B, T_q, h, d), (B, T_k, h, d), (B, T_k, h, d)]
    if heads:
        shapes = [s[:2] + (h * d,) for s in shapes]
    r = np.random.default_rng(9)
    calls = [(m,) for m in masks(r, (B, 1, T_q, T_k), 3)]

    def make_step(q, k, v):
        c = const(dtype, shapes[0])

        def step(mask):
            out, _ = fused_ops.fused_attention(q, k, v, mask, dropout_p=0.2, need_weights=True, heads=heads)
            return backward((out * c).sum())
        return step
    eager = compare(make_step, lambda: params(dtype, *shapes), calls, seed=3)
    assert not np.array_equal(eager[0][1][0], eager[1][1][0])


@pytest.mark.parametrize("dtype", DTYPES)
def test_fused_attention_on_the_real_rows(tricks, dtype):
    B, T, h, d = 2, 5, 2, 3
    r = np.random.default_rng(10)
    calls = []
    for _ in range(3):  # the real tokens move from call to call; their count (the rows' shape) stays 7
        real = np.zeros(B * T, bool)
        real[r.permutation(B * T)[:7]] = True
        real = real.reshape(B, T)
        calls.append((real, masks(r, (B, 1, T, T), 1)[0]))

    def make_step(q, k, v):
        c = const(dtype, (7, h * d))

        def step(real, mask):
            out = fused_ops.fused_attention(q, k, v, mask, heads=h, real=(real, real))
            return backward((out * c).sum())
        return step
    compare(make_step, lambda: params(dtype, (7, h * d), (7, h * d), (7, h * d)), calls)


@pytest.mark.parametrize("dtype", DTYPES)
def test_unpad_and_repad(dtype):
    B, T = 3, 4
    r = np.random.default_rng(12)
    calls = []
    for _ in range(3):
        real = np.zeros(B * T, bool)
        real[r.permutation(B * T)[:8]] = True
        calls.append((real.reshape(B, T),))

    def make_step(x, w):
        c = const(dtype, (B, T, 5))
        return lambda real: backward((fused_ops.repad(F.linear(fused_ops.unpad(x, real), w), real) * c).sum())
    eager = compare(make_step, lambda: params(dtype, (B, T, 2), (5, 2)), calls)
    for (real,), (_, (dx, _)) in zip(calls, eager):
        assert not dx[~real].any() and dx[real].all()


def test_a_real_mask_of_another_count_in_a_replay_raises_as_in_eager():
    (x,) = params(np.float64, (5, 2))
    real = np.zeros((2, 4), bool)
    real.reshape(-1)[:5] = True
    wrong = np.ones((2, 4), bool)

    def step(real):
        return fused_ops.repad(x, real).sum()
    with pytest.raises(ValueError) as eager_error:
        step(wrong)
    compiled = compile(step)
    compiled(real)
    with pytest.raises(ValueError) as compiled_error:
        compiled(wrong)
    assert str(compiled_error.value) == str(eager_error.value)
    assert "one row per True entry of real (8)" in str(eager_error.value)
    assert compiled.captures == 1
