"""After a pass, the learner's own op in the backward graph of a small computation (viz.graph), recorded on
the formula path: `python -m tinylearn draw N`. One function per kind of op: a Value op, an op of the
engine run through dispatch.substitute, a public function of an op module in place of its name there
(ops/binary.py's unbroadcast and matmul_op, nn/functional.py's cross_entropy_op, looked up at each call),
a function of Tensors. The learner's op is named in the picture."""
from __future__ import annotations

import contextlib

import numpy as np

from tinygrad_lite import Tensor, retain_grads
from tinygrad_lite.dispatch import substitute
from tinygrad_lite.fast import plain
from tinygrad_lite.nn import functional
from tinygrad_lite.ops import binary
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


def named(t: Tensor, name: str) -> Tensor:
    """t, with the name the picture shows on its node."""
    t.name = name
    return t


def weighted_sum(y: Tensor, rng) -> Tensor:
    """Σ w·y with random weights w: a loss whose gradient reaches every entry of y."""
    return (y * Tensor(rng.standard_normal(y.shape))).sum()


def draw_order(fn, path):
    """The Value graph of tanh(s·s + s·c), s = a·b, each node's label numbered by its place in fn's order."""
    a, b, c = Value(0.5, label="a"), Value(-0.8, label="b"), Value(0.3, label="c")
    shared = a * b
    shared.label = "s"
    root = (shared * shared + shared * c).tanh()
    root.label = "y"
    for place, node in enumerate(fn(root), 1):
        node.label = f"#{place} {node.label}".rstrip()
    root.backward()
    return render(root, path)


@contextlib.contextmanager
def swapped(module, name, fn):
    """`module` calls `fn` for its public function `name` inside the block, then its own again."""
    before = getattr(module, name)
    setattr(module, name, fn)
    try:
        yield fn
    finally:
        setattr(module, name, before)


def draw_swapped(module, name, fn, path, loss_of, title):
    """loss_of(rng) -> (a scalar Tensor, the Tensor whose op ran `fn`), named `title` in the picture."""
    with plain(), swapped(module, name, fn), retain_grads():
        loss, mine = loss_of(np.random.default_rng(0))
        mine.name = title
        loss.backward()
    return render(loss, path)


def matmul_with_backward(fn):
    """ops.binary.matmul_op with its backward from the learner's matmul_backward(a, b, g)."""
    project = binary.matmul_op

    def matmul(a, b, needs):
        out, _ = project(a, b, needs)
        return out, lambda g: fn(a, b, g)
    return matmul


def cross_entropy_with_value(fn):
    """nn.functional.cross_entropy_op whose value is the learner's cross_entropy(logits, targets, ε) (its
    gradient stays the engine's: the learner writes the loss, not its backward)."""
    project = functional.cross_entropy_op

    def cross_entropy(logits, t, num_classes, ignore_index, eps, reduction):
        _, backward = project(logits, t, num_classes, ignore_index, eps, reduction)
        with swapped(functional, "cross_entropy_op", project):  # a learner's loss may call the engine's
            return np.asarray(fn(logits, t, eps), dtype=logits.dtype), backward
    return cross_entropy


def draw_tensor_function(fn, path, loss_of):
    """loss_of(fn, rng) -> a scalar Tensor computed with the learner's function of Tensors."""
    with plain(), retain_grads():
        loss = loss_of(fn, np.random.default_rng(0))
        loss.backward()
    return render(loss, path)
