"""Rule linear_relu_dropout (tinygrad_lite/compiler/rules/linear_relu_dropout.py): the feed-forward's
dropout(relu(x·W1ᵀ + b1)) as one op, against the plain ops (the rule off) and eager mode."""
import sys

import numpy as np
import pytest

import tinygrad_lite as tl
from tinygrad_lite import Tensor
from tinygrad_lite.nn import functional as F
from transformer.feed_forward import PositionwiseFeedForward

sys.path.insert(0, "tests")  # this file's helpers, as pytest finds them
from rule_oracle import assert_agree, plan_of, sides  # noqa: E402

SWITCH = "fused_ffn"


def ffn_tensors(dtype, bias=True, seed=0):
    r = np.random.default_rng(seed)
    w1 = Tensor((r.standard_normal((12, 6)) * 0.4).astype(dtype), requires_grad=True)
    w2 = Tensor((r.standard_normal((6, 12)) * 0.4).astype(dtype), requires_grad=True)
    b1 = Tensor((r.standard_normal(12) * 0.1).astype(dtype), requires_grad=True) if bias else None
    return w1, b1, w2


def ffn_step(w1, b1, w2, p=0.3, training=True, reads=None):
    """(x.relu-FFN(x)·x).sum() and its backward; `reads` names an intermediate the loss also reads."""
    def step(x):
        h = F.linear(x, w1, b1)
        a = h.relu()
        d = F.dropout(a, p, training)
        y = F.linear(d, w2)
        loss = (y * y).sum()
        if reads is not None:
            loss = loss + {"linear": h, "relu": a}[reads].sum()
        loss.backward()
        return loss
    return step


def inputs(dtype, calls=3, shape=(2, 5, 6)):
    r = np.random.default_rng(1)
    return [(Tensor(r.standard_normal(shape).astype(dtype), requires_grad=True),) for _ in range(calls)]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("training", [True, False])
def test_the_rule_fuses_and_agrees_with_the_plain_ops(dtype, bias, training):
    w1, b1, w2 = ffn_tensors(dtype, bias)
    calls = inputs(dtype)
    out, fused, plain = sides(ffn_step(w1, b1, w2, training=training), [w1, w2, *([b1] if bias else [])],
                              calls, (SWITCH,))
    assert_agree(out, dtype)
    names = plan_of(fused).op_names
    assert names.count("linear_relu_dropout") == 1 and "relu" not in names and "dropout" not in names
    plain_names = plan_of(plain).op_names
    assert "linear_relu_dropout" not in plain_names and "relu" in plain_names
    assert ("dropout" in plain_names) == training
    (rule, replaced), = plan_of(fused).fusions.values()
    assert rule == "linear_relu_dropout"
    assert replaced == (("linear", "relu", "dropout") if training else ("linear", "relu"))


def test_a_linear_read_twice_is_not_fused():
    w1, b1, w2 = ffn_tensors(np.float64)
    out, fused, _ = sides(ffn_step(w1, b1, w2, reads="linear"), [w1, b1, w2], inputs(np.float64), (SWITCH,))
    assert_agree(out, np.float64)
    plan = plan_of(fused)
    assert not plan.fusions and "relu" in plan.op_names and "dropout" in plan.op_names


def test_a_relu_read_twice_fuses_the_linear_and_relu_only():
    """The ReLU's output is the root of linear -> relu, which anything may read: that pair fuses, with no
    dropout (p = 0), and the dropout stays a plain op."""
    w1, b1, w2 = ffn_tensors(np.float64)
    out, fused, _ = sides(ffn_step(w1, b1, w2, reads="relu"), [w1, b1, w2], inputs(np.float64), (SWITCH,))
    assert_agree(out, np.float64)
    plan = plan_of(fused)
    assert [r for r, _ in plan.fusions.values()] == ["linear_relu_dropout"]
    assert "dropout" in plan.op_names and "relu" not in plan.op_names


def test_the_box_fuses_with_its_trick_off_in_the_step():
    """PositionwiseFeedForward, the plain box, as one step."""
    tl.manual_seed(0)
    ffn = PositionwiseFeedForward(8, 16, 0.2)
    params = list(ffn.parameters())

    def step(x):
        y = ffn(x)
        loss = (y * y).sum()
        loss.backward()
        return loss
    out, fused, _ = sides(step, params, inputs(np.float32, shape=(2, 3, 8)), (SWITCH,))
    assert_agree(out, np.float32)
    assert [r for r, _ in plan_of(fused).fusions.values()] == ["linear_relu_dropout"]
