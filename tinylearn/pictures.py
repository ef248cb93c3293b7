"""After a pass, the learner's own op in the backward graph of a small computation (viz.graph), recorded on
the formula path: `python -m tinylearn draw N`. One function per kind of op: a Value op, an op of the
engine run through dispatch.substitute, a function of Tensors."""
from __future__ import annotations

import numpy as np

from tinygrad_lite import Tensor, retain_grads
from tinygrad_lite.dispatch import substitute
from tinygrad_lite.fast import plain
from tinygrad_lite.scalar import Value
from viz.graph import render


def draw_value_op(build, path):
    """build(x, w) -> a Value made with the learner's op; drawn after backward(), gradients filled in."""
    x, w = Value(0.5, label="x"), Value(-2.0, label="w")
    y = build(x, w)
    y.label = "y"
    y.backward()
    return render(y, path)


def draw_substituted(op, fn, path, loss_of):
    """loss_of(rng) -> a scalar Tensor computed by the engine with `fn` as op `op`'s formula."""
    with plain(), substitute(op, fn), retain_grads():
        loss = loss_of(np.random.default_rng(0))
        loss.backward()
    return render(loss, path)


def draw_tensor_function(fn, path, loss_of):
    """loss_of(fn, rng) -> a scalar Tensor computed with the learner's function of Tensors."""
    with plain(), retain_grads():
        loss = loss_of(fn, np.random.default_rng(0))
        loss.backward()
    return render(loss, path)


def weighted_sum(y: Tensor, rng) -> Tensor:
    """Σ w·y with random weights w: a loss whose gradient reaches every entry of y."""
    return (y * Tensor(rng.standard_normal(y.shape))).sum()
