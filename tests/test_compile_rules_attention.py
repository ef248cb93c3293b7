"""Rule attention (tinygrad_lite/compiler/rules/attention.py): the plain multi-head attention, split
heads to merged heads, as one fused_attention op, against the plain ops (the rule off) and eager mode:
the same dropout masks from the same stream, a mask that changes with the step's inputs, and the
divisor it folds into the scale checked at each replay."""
import gc
import sys
import weakref

import numpy as np
import pytest

import tinygrad_lite as tl
from tinygrad_lite import Tensor, fast
from tinygrad_lite.compiler import compile
from tinygrad_lite.compiler.rules.attention import dropout_op, fused_attention_op
from tinygrad_lite.compiler.traced import Traced
from tinygrad_lite.nn import functional as F
from transformer.attention import MultiHeadAttention, scaled_dot_product_attention
from transformer.masks import causal_mask, padding_mask

sys.path.insert(0, "tests")  # this file's helpers, as pytest finds them
from rule_oracle import assert_agree, plan_of, sides  # noqa: E402

SWITCH = "fused_attention"
PLAIN_OPS = ("reshape", "transpose", "reshape", "transpose", "reshape", "transpose", "transpose", "matmul", "div")


def attention_step(mha, cross=False):
    """((MHA(x, m, m, mask))²).sum() and its backward."""
    def step(x, memory, mask):
        y = mha(x, memory if cross else x, memory if cross else x, mask)
        loss = (y * y).sum()
        loss.backward()
        return loss
    return step


def calls(dtype, B=2, T=5, S=4, d_model=12, masks="causal"):
    r = np.random.default_rng(3)
    out = []
    for _ in range(3):
        ids = r.integers(0, 3, (B, S))
        ids[:, 0] = 1  # every query row has a key it may attend
        mask = {"causal": causal_mask(T), "padding": padding_mask(ids), "none": None,
                "additive": np.where(causal_mask(T), 0.0, -1e9).astype(dtype)}[masks]
        out.append((Tensor(r.standard_normal((B, T, d_model)).astype(dtype), requires_grad=True),
                    Tensor(r.standard_normal((B, S, d_model)).astype(dtype), requires_grad=True), mask))
    return out


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("masks, cross", [("causal", False), ("none", False), ("padding", True), ("additive", False)])
@pytest.mark.parametrize("training", [True, False])
def test_the_rule_fuses_and_agrees_with_the_plain_ops(dtype, masks, cross, training):
    """d_k = 6: 1/√6 is not a power of two, so the fused scale rounds otherwise than the division."""
    tl.manual_seed(0)
    mha = MultiHeadAttention(12, 2, 0.3, dtype=dtype)
    mha.train(training)
    out, fused, plain = sides(attention_step(mha, cross), list(mha.parameters()), calls(dtype, masks=masks),
                              (SWITCH,))
    assert_agree(out, dtype)
    plan = plan_of(fused)
    (rule, replaced), = plan.fusions.values()
    softmax = "softmax" if masks == "none" else "softmax (masked)"
    assert rule == "attention" and replaced == PLAIN_OPS + (softmax,) + (("dropout",) if training else ()) + (
        "matmul", "transpose", "reshape")
    assert plan.op_names == ["linear"] * 3 + ["fused_attention", "linear", "mul", "sum"]
    assert not {"softmax", "softmax (masked)", "dropout", "matmul"} & set(plan_of(plain).op_names) ^ (
        {"matmul", softmax} | ({"dropout"} if training else set()))


def test_a_mask_from_the_steps_input_is_read_at_each_replay():
    """The padding mask is NumPy on the step's token ids: each call's own mask, one capture."""
    tl.manual_seed(0)
    mha = MultiHeadAttention(8, 2, 0.2, dtype=np.float64)

    def step(x, ids):
        y = mha(x, x, x, padding_mask(ids))
        loss = (y * y).sum()
        loss.backward()
        return loss
    r = np.random.default_rng(5)
    ids = [r.integers(0, 3, (2, 6)) for _ in range(3)]
    for row in ids:
        row[:, 0] = 1
    xs = [Tensor(r.standard_normal((2, 6, 8))) for _ in ids]
    out, fused, _ = sides(step, list(mha.parameters()), list(zip(xs, ids)), (SWITCH,))
    assert_agree(out, np.float64)
    assert [rule for rule, _ in plan_of(fused).fusions.values()] == ["attention"]


def test_the_weights_read_twice_are_not_fused():
    r = np.random.default_rng(0)
    w = Tensor(r.standard_normal((2, 2, 4, 3)), requires_grad=True)

    def step(q):
        out, weights = scaled_dot_product_attention(q, w, w, return_weights=True)  # no heads to merge either
        loss = (out * out).sum() + (weights * weights).sum()
        loss.backward()
        return loss
    out, fused, _ = sides(step, [w], [(Tensor(r.standard_normal((2, 2, 4, 3))),) for _ in range(3)], (SWITCH,))
    assert_agree(out, np.float64)
    assert not plan_of(fused).fusions


def heads_step(wq, divisor, keep_weights=None):
    """The plain attention's ops written out, its divisor a tensor that lives outside the step."""
    def step(x):
        B, T, _ = x.shape
        q = F.linear(x, wq)
        split = [t.reshape(B, T, 2, 3).transpose(1, 2) for t in (q, x, x)]
        weights = (split[0] @ split[1].transpose(-2, -1) / divisor).softmax(-1)
        if keep_weights is not None:
            keep_weights.append(weights.data)
        y = (weights @ split[2]).transpose(1, 2).reshape(B, T, 6)
        loss = (y * y).sum()
        loss.backward()
        return loss
    return step


def test_a_divisor_that_changes_sends_the_replay_to_eager_mode():
    """The rule folds the divisor's value into the fused op's scale; a replay checks it first and, if
    it moved, runs the step eagerly (the plain ops, with the new value)."""
    r = np.random.default_rng(0)
    wq = Tensor(r.standard_normal((6, 6)), requires_grad=True)
    divisor = Tensor(np.array(2.0))
    step = heads_step(wq, divisor)
    compiled = compile(step)
    x = Tensor(r.standard_normal((2, 4, 6)))
    with fast.tricks_on(SWITCH):
        compiled(x)
    assert [rule for rule, _ in plan_of(compiled).fusions.values()] == ["attention"]
    divisor.data[...] = 3.0
    wq.grad = None
    with fast.tricks_on(SWITCH):
        got, grad = compiled(x).data, wq.grad.copy()
    wq.grad = None
    want = step(x).data
    assert compiled.fallbacks == 1
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(grad, wq.grad)


def test_a_replay_holds_no_attention_weights_after_it_returns(monkeypatch):
    """The fused op hands out no weights (no box): its backward frees them, and nothing the step keeps
    (here a list the step appends the plain weights' array to) holds a replay's weights."""
    alive = []
    ops = fused_attention_op.__globals__  # the fused op's module, wherever it lives
    engines = ops["_attention_engines"]

    def watched(rows):
        forward, backward = engines(rows)

        def forward_watched(*args):
            out, weights = forward(*args)
            alive.append(weakref.ref(weights))
            return out, weights
        return forward_watched, backward
    monkeypatch.setitem(ops, "_attention_engines", watched)
    r = np.random.default_rng(0)
    wq = Tensor(r.standard_normal((6, 6)), requires_grad=True)
    kept = []
    compiled = compile(heads_step(wq, Tensor(np.array(2.0)), kept))
    with fast.tricks_on(SWITCH):
        for _ in range(3):
            compiled(Tensor(r.standard_normal((2, 4, 6))))
    assert len(alive) == 4 and all(ref() is None for ref in alive[1:])  # the capture's run, then 3 replays
    gc.collect()  # the capture is a reference cycle (its input stand-ins point back to it)
    assert alive[0]() is None
    first, second = kept  # what the two captures' runs of the box kept: stand-ins, none of a replay's values
    assert isinstance(first, Traced) and isinstance(second, Traced)
    assert second.array.strides == (0, 0, 0, 0)  # the fused capture's placeholder: zeros, no weights


def test_the_fused_op_draws_the_plain_chains_masks(monkeypatch):
    """Every keep mask drawn, side by side: the plain chain's dropout on the weights (B, h, T_q, T_k) and
    the fused op's, from the same seed, are equal entry for entry, call after call."""
    drawn = {"fused": [], "plain": []}
    side = ["plain"]
    for module in (dropout_op.__globals__, fused_attention_op.__globals__):
        draw = module["dropout_keep_mask"]

        def recorded(shape, p, draw=draw):
            keep = draw(shape, p)
            drawn[side[0]].append(keep.copy())
            return keep
        monkeypatch.setitem(module, "dropout_keep_mask", recorded)
    tl.manual_seed(0)
    mha = MultiHeadAttention(8, 2, 0.5, dtype=np.float64)
    step = attention_step(mha)
    fused, plain = compile(step), compile(step)
    for i, (x, memory, mask) in enumerate(calls(np.float64, d_model=8)):
        for name, compiled, switched in (("fused", fused, fast.tricks_on), ("plain", plain, fast.tricks_off)):
            side[0] = name
            tl.manual_seed(10 + i)
            with switched(SWITCH):
                compiled(x, memory, mask)
    assert [rule for rule, _ in plan_of(fused).fusions.values()] == ["attention"]
    assert len(drawn["fused"]) == len(drawn["plain"]) == 5  # a capture's two dry runs (the forward alone, then
    # the whole step, fused or plain), then 3 replays each
    for a, b in zip(drawn["fused"][-3:], drawn["plain"][-3:]):
        assert a.shape == (2, 2, 5, 5) and 0.3 < a.mean() < 0.7
        np.testing.assert_array_equal(a, b)
