"""Exercises 6-7, softmax (tinygrad_lite/ops/nn.py): its forward with a scale and a mask, and its backward.
The learner's function runs in place of the engine's formula (dispatch.substitute), inside Tensor.softmax,
so the end-to-end run trains the paper's Transformer with it."""
from __future__ import annotations

import numpy as np

from tinygrad_lite import Tensor
from tinygrad_lite.dispatch import formula, substitute
from tinygrad_lite.gradcheck import numerical_gradient

from ..exercise import Case, Check, Exercise, Mistake
from ..grading import close, finite
from ..pictures import draw_substituted, weighted_sum
from . import random_shapes
from .copy_task import copy_task_check

PROJECT_SOFTMAX = formula("softmax_forward")
PROJECT_SOFTMAX_BACKWARD = formula("softmax_backward")


def _rng():
    return np.random.default_rng(0)


def softmax_inputs():
    """(label, x, scale, mask, tags), smallest first."""
    rng = _rng()
    keep = np.array([[True, True, False, True], [True, False, False, False]])
    masked_row = np.array([[True, False, True, True], [False, False, False, False], [True, True, True, False]])
    additive = np.array([[0.0, -np.inf, 0.5], [-1.0, 0.0, -np.inf]])
    return [("an empty batch, x of shape (0, 3)", np.zeros((0, 3)), 1.0, None, {"zero-size"}),
            ("x = [[1, 2, 3]]", np.array([[1.0, 2.0, 3.0]]), 1.0, None, set()),
            ("large logits, x = [[1000, 0, -1000]]", np.array([[1000.0, 0.0, -1000.0]]), 1.0, None, {"large"}),
            ("x = [[0.5, -1, 2], [3, 3, 3]] with scale 0.5", np.array([[0.5, -1.0, 2.0], [3.0, 3.0, 3.0]]), 0.5,
             None, {"scale"}),
            ("x (2, 4) with a boolean mask (True = may attend)", rng.standard_normal((2, 4)), 1.0, keep, {"mask"}),
            ("x (3, 4) whose second row is masked in full", rng.standard_normal((3, 4)), 1.0, masked_row,
             {"mask", "masked row"}),
            ("x (2, 3) with an additive mask (−inf = masked)", rng.standard_normal((2, 3)), 1.0, additive,
             {"mask", "additive"}),
            ("x (2, 3, 5), scale 3, a (3, 5) mask broadcast over the batch", rng.standard_normal((2, 3, 5)), 3.0,
             rng.random((3, 5)) > 0.3, {"mask", "scale"})] + random_inputs()


def random_inputs():
    """Random shapes, each with a random scale, and every other one a random mask."""
    rng, found = random_shapes.rng_for(6), []
    for i, shape in enumerate(random_shapes.shapes(6)):
        scale = float(rng.uniform(0.2, 3.0))
        mask = rng.random(shape) > 0.3 if i % 2 else None
        tags = {"random", "scale"} | ({"mask"} if mask is not None else set())
        if mask is not None and (~mask).all(axis=-1).any():
            tags.add("masked row")
        found.append((f"a random shape {shape}, scale {scale:.2f}" + (", masked" if mask is not None else ""),
                      rng.standard_normal(shape) * 2, scale, mask, tags))
    return found


def softmax_cases():
    return [Case(label, (x, scale, mask), tags=frozenset(tags)) for label, x, scale, mask, tags in softmax_inputs()]


def call_softmax(fn, case):
    """Tensor.softmax run by the engine, with `fn` as its formula."""
    x, scale, mask = case.args
    with substitute("softmax_forward", fn):
        return Tensor(x).softmax(-1, scale=scale, mask=mask).data


def _plain_along(z, axis):
    e = np.exp(z - z.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def _wrong_axis(c, e, g):
    z = c.args[0] * c.args[1]
    return z.ndim >= 2 and z.size > 0 and any(close(_plain_along(z, axis), g) for axis in (0, None))


def _as_if(change):
    """A detector: the learner's output equals the project's softmax on the case's inputs, changed."""
    def spots(c, e, g):
        x, scale, mask = change(*c.args)
        return not close(e, g) and close(PROJECT_SOFTMAX(x, scale, mask), g)
    return spots


def _inverted(x, scale, mask):
    return x, scale, ~mask


SOFTMAX = Exercise(
    number=6, name="softmax", title="softmax over the last axis, with a scale and a mask",
    reads="tinygrad_lite/ops/nn.py (softmax_forward)", function="softmax_forward",
    stub='''def softmax_forward(x, scale=1.0, mask=None):
    """softmax(z)_j = exp(z_j) / Σ_k exp(z_k) over the last axis, with z = x·scale + mask.

    x: a float array (..., n). scale: a number (attention passes 1/√d_k, the paper's §3.2.1).
    mask: None; or a bool array broadcasting to x, True = may attend, False = masked (adds −inf);
    or a float array added to z. Returns an array of x's shape whose rows sum to 1, and for a row masked
    in full, zeros (never NaN). It must not overflow, however large x is.
    """''',
    hints=("Work on rows: every reduction over the last axis, with keepdims=True so it broadcasts back.",
           "softmax(z) = softmax(z − c) for any c: subtract each row's max before exp, so exp never sees a "
           "number above 0.",
           "A bool mask becomes additive: np.where(mask, 0.0, -np.inf). Add it to x·scale.",
           "A row masked in full has max −inf, and −inf − (−inf) is NaN: shift such a row by 0 instead, and "
           "divide only where the row's sum is above 0 (np.divide(..., where=total != 0))."),
    solution=PROJECT_SOFTMAX, shown=PROJECT_SOFTMAX,
    why="The row max is subtracted because exp(1000) overflows while softmax does not change; a fully masked "
        "row keeps a shift of 0 and divides only where the sum is non-zero, so it gives zeros: a query with no "
        "key to attend to (a <pad> query) then attends to nothing rather than poisoning the batch with NaN.",
    cases=softmax_cases, call=call_softmax,
    mistakes=(
        Mistake("no max shift", "your softmax overflows at x = 1000: exp(1000) is inf, and inf/inf is NaN. "
                "Subtract the row max first: softmax(z) = softmax(z − max z).",
                lambda c, e, g: "large" in c.tags and not finite(g)),
        Mistake("a fully masked row gives NaN", "a row with every entry masked has max −inf, and −inf − (−inf) "
                "is NaN: give such a row zeros (shift it by 0, divide only where the sum is above 0).",
                lambda c, e, g: "masked row" in c.tags and np.isnan(np.asarray(g, dtype=float)).any()),
        Mistake("the wrong axis", "softmax normalises each row, over the last axis: axis=-1, keepdims=True, "
                "in both the max and the sum.", _wrong_axis),
        Mistake("the mask ignored", "add the mask to x·scale: np.where(mask, 0.0, -np.inf) for a bool mask.",
                lambda c, e, g: "mask" in c.tags and _as_if(lambda x, s, m: (x, s, None))(c, e, g)),
        Mistake("the mask inverted", "True means may attend: masked entries are where the mask is False.",
                lambda c, e, g: "mask" in c.tags and "additive" not in c.tags and _as_if(_inverted)(c, e, g)),
        Mistake("the scale ignored", "multiply x by scale before the exponent: z = x·scale.",
                lambda c, e, g: "scale" in c.tags and _as_if(lambda x, s, m: (x, 1.0, m))(c, e, g)),
    ),
    checks=(Check("the end-to-end run (a Transformer learns to copy with your softmax in its attention)",
                  lambda fn: copy_task_check(substitute("softmax_forward", fn))),),
    draw=lambda fn, path: draw_softmax(fn, path, "softmax_forward"),
)


def backward_cases():
    rng = _rng()
    return [Case(label, (x, rng.standard_normal(x.shape), scale, mask), tags=frozenset(tags))
            for label, x, scale, mask, tags in softmax_inputs()]


def call_softmax_backward(fn, case):
    """x's gradient of Σ w·softmax(x), the engine's backward pass running `fn` as softmax's backward."""
    x, w, scale, mask = case.args
    t = Tensor(x.copy(), requires_grad=True)
    with substitute("softmax_backward", fn):
        (t.softmax(-1, scale=scale, mask=mask) * Tensor(w)).sum().backward()
    return t.grad


def _backward_as_if(wrong):
    """A detector: the learner's gradient equals wrong(y, dy, scale), y the project's softmax."""
    def spots(c, e, g):
        x, w, scale, mask = c.args
        y = PROJECT_SOFTMAX(x, scale, mask)
        return not close(e, g) and close(wrong(y, w, scale), g)
    return spots


def _gradient_check(fn):
    rng = _rng()
    x, w, mask = rng.standard_normal((3, 4)), rng.standard_normal((3, 4)), rng.random((3, 4)) > 0.3
    numeric = numerical_gradient(lambda: float((PROJECT_SOFTMAX(x, 0.7, mask) * w).sum()), x)
    got = call_softmax_backward(fn, Case("", (x, w, 0.7, mask)))
    if close(numeric, got, 1e-5):
        return None
    return ("the gradient check: d/dx Σ w·softmax(0.7·x + mask), x (3, 4), by finite differences", numeric, got, ())


SOFTMAX_BACKWARD = Exercise(
    number=7, name="softmax_backward", title="softmax's backward, from its output",
    reads="tinygrad_lite/ops/nn.py (softmax_backward)", function="softmax_backward",
    stub='''def softmax_backward(y, dy, scale=1.0):
    """dx, the gradient of softmax's input, from its output y = softmax(x·scale + mask) and the gradient dy
    of that output; y, dy and dx are (..., n), rows along the last axis.

    The Jacobian of one row is dy_i/dz_j = y_i·(δ_ij − y_j); applied to dy, it gives
    dz = y · (dy − Σ_j dy_j·y_j), one sum per row; and dx = scale · dz, since z = x·scale.
    Masked entries have y = 0, so their gradient is 0 with no mask at hand.
    """''',
    hints=("Compute one number per row first: s = (dy * y).sum(axis=-1, keepdims=True).",
           "Then dx = scale * y * (dy − s): keepdims makes s broadcast along the row.",
           "Don't forget the scale: z = x·scale, so dz/dx = scale."),
    solution=PROJECT_SOFTMAX_BACKWARD, shown=PROJECT_SOFTMAX_BACKWARD,
    why="Written from the output y alone, the backward keeps no exp array and no mask: the forward's y is "
        "what it needs, and masked entries, where y = 0, get 0 by themselves.",
    cases=backward_cases, call=call_softmax_backward,
    mistakes=(
        Mistake("the sum term missing", "softmax couples a row: dz = y·(dy − Σ dy·y), not y·dy.",
                _backward_as_if(lambda y, dy, s: s * y * dy)),
        Mistake("the sum over the wrong axis", "sum dy·y over the last axis, with keepdims=True, one sum per row.",
                lambda c, e, g: isinstance(g, ValueError) or _backward_as_if(
                    lambda y, dy, s: s * y * (dy - (dy * y).sum(axis=0, keepdims=True)))(c, e, g)
                or _backward_as_if(lambda y, dy, s: s * y * (dy - (dy * y).sum()))(c, e, g)),
        Mistake("the scale forgotten", "z = x·scale, so the gradient of x is scale times the gradient of z.",
                lambda c, e, g: "scale" in c.tags and _backward_as_if(
                    lambda y, dy, s: y * (dy - (dy * y).sum(axis=-1, keepdims=True)))(c, e, g)),
        Mistake("the sign flipped", "dz = y·(dy − Σ dy·y): dy first, then the row's sum taken away.",
                _backward_as_if(lambda y, dy, s: -s * y * (dy - (dy * y).sum(axis=-1, keepdims=True)))),
    ),
    checks=(Check("the gradient check against finite differences", _gradient_check),
            Check("the end-to-end run (a Transformer learns to copy with your backward in its attention)",
                  lambda fn: copy_task_check(substitute("softmax_backward", fn)))),
    draw=lambda fn, path: draw_softmax(fn, path, "softmax_backward"),
)


def draw_softmax(fn, path, op):
    """The backward graph of a masked softmax of attention scores, run with the learner's op."""
    mask = np.tril(np.ones((2, 4), dtype=bool), 2)
    return draw_substituted(op, fn, path, lambda rng: weighted_sum(
        Tensor(rng.standard_normal((2, 4)), requires_grad=True).softmax(-1, mask=mask), rng))


EXERCISES = (SOFTMAX, SOFTMAX_BACKWARD)
