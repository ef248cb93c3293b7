"""Exercises 4-5, the Tensor floor (tinygrad_lite/ops/binary.py): a broadcast input's gradient summed back
to its shape, and matmul's backward. Both are checked against finite differences in float64 too."""
from __future__ import annotations

import numpy as np

from tinygrad_lite import Tensor
from tinygrad_lite.gradcheck import numerical_gradient
from tinygrad_lite.ops import binary
from tinygrad_lite.ops.binary import matmul_op, unbroadcast

from ..exercise import Case, Check, Exercise, Mistake
from ..grading import close, differs
from ..pictures import draw_swapped, matmul_with_backward, weighted_sum
from . import random_shapes


def _rng():
    return np.random.default_rng(0)


def unbroadcast_cases():
    rng = _rng()
    pairs = [("a (0, 3) gradient for a (3,) input (an empty batch)", (0, 3), (3,), {"zero-size"}),
             ("a (2, 3) gradient for a (2, 3) input (no broadcast)", (2, 3), (2, 3), set()),
             ("a (2, 3) gradient for a (3,) input", (2, 3), (3,), {"added"}),
             ("a (2, 3) gradient for a (2, 1) input", (2, 3), (2, 1), {"stretched"}),
             ("a (2, 3) gradient for a () input (a scalar)", (2, 3), (), {"added"}),
             ("a (4, 2, 3) gradient for a (1, 3) input", (4, 2, 3), (1, 3), {"added", "stretched"}),
             ("a (2, 1, 3, 4) gradient for a (3, 1) input", (2, 1, 3, 4), (3, 1), {"added", "stretched"})]
    return [Case(label, (rng.standard_normal(g), s), tags=frozenset(t))
            for label, g, s, t in pairs] + random_unbroadcast_cases()


def random_unbroadcast_cases():
    """Random gradient shapes, each for an input that lost some leading axes and had some axes set to 1."""
    rng, found = random_shapes.rng_for(4), []
    for shape in random_shapes.shapes(4, ndims=(1, 4)):
        kept = shape[int(rng.integers(0, len(shape) + 1)):]
        small = tuple(1 if rng.random() < 0.4 else n for n in kept)
        tags = ({"added"} if len(small) < len(shape) else set()) | ({"stretched"} if small != kept else set())
        found.append(Case(f"a random (shape {shape}) gradient for a {small} input", (rng.standard_normal(shape),
                                                                                    small), tags=frozenset(tags)))
    return found


def _shape_of(got):
    return np.asarray(got).shape


def _mean_instead(c, e, g):
    grad, shape = c.args
    if grad.size == 0:
        return bool(np.isnan(np.asarray(g, dtype=float)).any())  # the mean of no numbers
    return close(np.asarray(e) * (np.prod(shape or (1,)) / grad.size), g)


def _sum_back_through_add(fn):
    """d/db Σ w·(a + b) by finite differences, against fn(w, b.shape): unbroadcast is that gradient."""
    rng = _rng()
    a, b, w = rng.standard_normal((3, 2, 4)), rng.standard_normal((2, 1)), rng.standard_normal((3, 2, 4))
    numeric = numerical_gradient(lambda: float((w * (a + b)).sum()), b)
    got = fn(w, b.shape)
    if close(numeric, got, 1e-5):
        return None
    return ("the gradient check: d/db Σ w·(a + b), a (3, 2, 4), b (2, 1), by finite differences",
            numeric, got, ())


UNBROADCAST = Exercise(
    number=4, name="unbroadcast", title="a broadcast input's gradient, summed back to its shape",
    reads="tinygrad_lite/ops/binary.py (unbroadcast)", function="unbroadcast",
    stub='''def unbroadcast(grad, shape):
    """Sum `grad` (the gradient of an op's output) back to `shape` (the shape of one of its inputs).

    NumPy broadcasting made the input bigger in two ways: it added leading axes ((3,) -> (2, 3)), and it
    stretched axes of size 1 ((2, 1) -> (2, 3)). Each copy of an entry fed the output, so its gradient is
    the sum over its copies. grad: an array whose shape `shape` broadcasts to; returns an array of `shape`.
    """''',
    hints=("First sum over the leading axes broadcasting added: grad.ndim − len(shape) of them.",
           "Then sum over each axis i where shape[i] == 1 but grad.shape[i] != 1, keeping it (keepdims=True).",
           "Sum, don't average: every copy's gradient counts in full."),
    solution=unbroadcast, shown=unbroadcast,
    why="Two sums, the added axes then the stretched ones with keepdims, and none at all when the shapes "
        "already match: the common case of a same-shape add costs one comparison.",
    cases=unbroadcast_cases,
    mistakes=(
        Mistake("the stretched axes left out",
                "an axis of size 1 in the input was stretched: sum over it too (with keepdims=True).",
                lambda c, e, g: "stretched" in c.tags and len(_shape_of(g)) == len(c.args[1])
                and _shape_of(g) != c.args[1]),
        Mistake("the gradient keeps the output's shape",
                "your gradient has the shape of the output, not the input: sum it back over the broadcast axes.",
                lambda c, e, g: _shape_of(g) == c.args[0].shape != c.args[1]),
        Mistake("the kept axes dropped",
                "sum a stretched axis with keepdims=True, or the result loses the input's size-1 axes.",
                lambda c, e, g: "stretched" in c.tags and np.asarray(g).size == np.prod(c.args[1] or (1,))
                and _shape_of(g) != c.args[1]),
        Mistake("an average instead of a sum", "each copy of an entry fed the output in full: sum, don't average.",
                _mean_instead),
    ),
    checks=(Check("the gradient check against finite differences", _sum_back_through_add),),
    draw=lambda fn, path: draw_swapped(binary, "unbroadcast", fn, path, _broadcast_add,
                                       "a + b (its gradients summed back by your unbroadcast)"),
)


def _leaf(rng, shape):
    return Tensor(rng.standard_normal(shape), requires_grad=True)


def _broadcast_add(rng):
    y = _leaf(rng, (3, 2, 4)) + _leaf(rng, (2, 1))
    return weighted_sum(y, rng), y


def _batched_matmul(rng):
    y = _leaf(rng, (2, 2, 3)) @ _leaf(rng, (3, 4))
    return weighted_sum(y, rng), y


def matmul_backward_cases():
    rng = _rng()
    shapes = [("a (2, 2) @ b (2, 2)", (2, 2), (2, 2), set()), ("a (0, 2, 3) @ b (3, 4): an empty batch", (0, 2, 3),
              (3, 4), {"zero-size", "batch"}), ("a (1, 3) @ b (3, 2)", (1, 3), (3, 2), set()),
              ("a (2, 3) @ b (3, 4)", (2, 3), (3, 4), set()), ("a (2, 2, 3) @ b (3, 4): a batch of two", (2, 2, 3),
              (3, 4), {"batch"}), ("a (2, 1, 3, 2) @ b (3, 2, 5): batch dims broadcast", (2, 1, 3, 2), (3, 2, 5),
              {"batch"})]
    cases = []
    for label, sa, sb, tags in shapes:
        a, b = rng.standard_normal(sa), rng.standard_normal(sb)
        g = rng.standard_normal(np.broadcast_shapes(sa[:-2], sb[:-2]) + (sa[-2], sb[-1]))
        cases.append(Case(label, (a, b, g), tags=frozenset(tags)))
    return cases + random_matmul_cases()


def random_matmul_cases():
    """Random (n, k) @ (k, m) with random batch dims on a, and on b every other time."""
    rng, found = random_shapes.rng_for(5), []
    for i, batch in enumerate(random_shapes.shapes(5, ndims=(0, 2), sizes=(1, 3))):
        n, k, m = (int(x) for x in rng.integers(1, 5, 3))
        sa, sb = batch + (n, k), (batch[-1:] if i % 2 else ()) + (k, m)
        g = rng.standard_normal(np.broadcast_shapes(sa[:-2], sb[:-2]) + (n, m))
        found.append(Case(f"random shapes a {sa} @ b {sb}", (rng.standard_normal(sa), rng.standard_normal(sb), g),
                          tags=frozenset({"batch"} if batch else ())))
    return found


def project_matmul_backward(a, b, g):
    """The engine's matmul backward (ops.binary.matmul_op) for a, b of 2+ dims."""
    _, backward = matmul_op(a, b, (True, True))
    return backward(g)


def _no_transpose(c, e, g):
    a, b, grad = c.args
    return (isinstance(g, ValueError) and "matmul" in str(g)) or close(grad @ b, g[0]) or close(a @ grad, g[1])


def _gradient_check(fn):
    rng = _rng()
    a, b, w = rng.standard_normal((2, 2, 3)), rng.standard_normal((3, 4)), rng.standard_normal((2, 2, 4))
    numeric = (numerical_gradient(lambda: float((w * (a @ b)).sum()), a),
               numerical_gradient(lambda: float((w * (a @ b)).sum()), b))
    got = fn(a, b, w)
    if not differs(numeric, got, 1e-5):
        return None
    return ("the gradient check: d/da and d/db of Σ w·(a @ b), a (2, 2, 3), b (3, 4), by finite differences",
            numeric, got, ())


MATMUL_BACKWARD = Exercise(
    number=5, name="matmul_backward", title="matmul's backward: dA = dC·Bᵀ, dB = Aᵀ·dC",
    reads="tinygrad_lite/ops/binary.py (matmul_op)", function="matmul_backward",
    stub='''def matmul_backward(a, b, g):
    """The gradients (da, db) of C = a @ b, given g = dL/dC.

    a: (..., n, k), b: (..., k, m), g: (..., n, m); the batch dims (...) broadcast as in NumPy.
    dA = g·Bᵀ and dB = Aᵀ·g (transpose the last two axes: np.swapaxes(x, -1, -2)); each is then
    summed back to its input's shape over the batch dims broadcasting added or stretched.
    Returns (da of a's shape, db of b's shape).
    """''',
    hints=("Check the shapes: g (n, m) times bᵀ (m, k) gives (n, k), a's shape.",
           "aᵀ·g: np.swapaxes(a, -1, -2) @ g, shape (k, m), b's shape.",
           "A 2-D b used by a batch of a's gets the sum over the batch: reuse your unbroadcast (exercise 4)."),
    solution=project_matmul_backward, shown=matmul_op,
    why="The two products are the chain rule written as matrices; the batch sums reuse unbroadcast, so "
        "broadcast batch dims need no code of their own.",
    cases=matmul_backward_cases,
    mistakes=(
        Mistake("the transpose forgotten", "dA = g·Bᵀ, not g·B (and dB = Aᵀ·g): the shapes only fit one way.",
                _no_transpose),
        Mistake("the batch not summed", "b was used by every matrix of the batch: sum db over the batch dims "
                "broadcasting added, back to b's shape.",
                lambda c, e, g: "batch" in c.tags and np.asarray(g[1]).shape != c.args[1].shape),
        Mistake("da and db swapped", "return (da, db) in that order: da has a's shape.",
                lambda c, e, g: close(e[0], g[1]) and close(e[1], g[0])),
        Mistake("a gradient transposed", "da has a's shape (n, k) and db b's (k, m): g·Bᵀ, not (g·Bᵀ)ᵀ.",
                lambda c, e, g: close(np.swapaxes(e[0], -1, -2), g[0]) or close(np.swapaxes(e[1], -1, -2), g[1])),
    ),
    checks=(Check("the gradient check against finite differences", _gradient_check),),
    draw=lambda fn, path: draw_swapped(binary, "matmul_op", matmul_with_backward(fn), path, _batched_matmul,
                                       "a @ b (its gradients by your matmul_backward)"),
)

EXERCISES = (UNBROADCAST, MATMUL_BACKWARD)
