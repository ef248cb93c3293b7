"""Exercises 8-10, the layers' ops (tinygrad_lite/ops/nn.py, nn/functional.py): layer norm's backward, run
by the engine in place of its formula; dropout, graded by what it must do to numbers, then in every
Dropout module of the copy task; and cross-entropy with label smoothing, against the engine's loss."""
from __future__ import annotations

import contextlib

import numpy as np

import tinygrad_lite as tl
from tinygrad_lite import Tensor
from tinygrad_lite.dispatch import formula, substitute
from tinygrad_lite.gradcheck import numerical_gradient
from tinygrad_lite.nn import Dropout, functional
from tinygrad_lite.nn.functional import cross_entropy

from ..exercise import Case, Check, Exercise, Mistake
from ..grading import close, finite
from ..pictures import (
    cross_entropy_with_value,
    draw_substituted,
    draw_swapped,
    draw_tensor_function,
    named,
    weighted_sum,
)
from . import random_shapes
from .copy_task import STEPS, copy_task_check
from .loss_run import loss_run_check

PROJECT_LAYERNORM_BACKWARD = formula("layernorm_backward")


def _rng():
    return np.random.default_rng(0)


def layer_norm_cases():
    rng = _rng()
    shapes = [("an empty batch, x (0, 4), with gamma and beta", (0, 4), True, set()),
              ("x (1, 4) without gamma and beta", (1, 4), False, set()),
              ("x (2, 3) with gamma and beta", (2, 3), True, set()),
              ("x (3, 5) around 1000, with gamma and beta", (3, 5), True, {"offset"}),
              ("x (2, 2, 4) with gamma and beta", (2, 2, 4), True, set())]
    cases = []
    for label, shape, affine, tags in shapes:
        x = rng.standard_normal(shape) + (1000.0 if "offset" in tags else 0.0)
        gamma, beta = (rng.standard_normal(shape[-1]), rng.standard_normal(shape[-1])) if affine else (None, None)
        cases.append(Case(label, (x, gamma, beta, rng.standard_normal(shape)), tags=frozenset(tags)))
    for shape in random_shapes.shapes(8, ndims=(2, 3), sizes=(1, 6)):
        x, gamma, beta = rng.standard_normal(shape) * 3, rng.standard_normal(shape[-1]), rng.standard_normal(shape[-1])
        cases.append(Case(f"a random x {shape}, with gamma and beta", (x, gamma, beta, rng.standard_normal(shape))))
    return cases


def call_layer_norm_backward(fn, case):
    """(dx, dgamma, dbeta) of Σ w·layer_norm(x), the engine's backward pass running `fn`."""
    x, gamma, beta, w = case.args
    leaves = [Tensor(a.copy(), requires_grad=True) if a is not None else None for a in (x, gamma, beta)]
    with substitute("layernorm_backward", fn):
        (leaves[0].layer_norm(x.shape[-1], leaves[1], leaves[2]) * Tensor(w)).sum().backward()
    return tuple(None if t is None else t.grad for t in leaves)


def _dx_as_if(wrong):
    """A detector: the learner's dx equals wrong(g, xhat, rstd, dy), g = dy·gamma, on the case's rows."""
    def spots(c, e, got):
        x, gamma, _, dy = c.args
        n = x.shape[-1]
        x2, dy2 = x.reshape(-1, n), dy.reshape(-1, n)
        mean = x2.mean(-1, keepdims=True)
        rstd = 1 / np.sqrt(((x2 - mean) ** 2).mean(-1, keepdims=True) + 1e-5)
        xhat = (x2 - mean) * rstd
        g = dy2 if gamma is None else dy2 * gamma
        return not close(e[0], got[0]) and close(wrong(g, xhat, rstd, dy2).reshape(x.shape), got[0])
    return spots


def _layer_norm_gradient_check(fn):
    rng = _rng()
    x, gamma, beta, w = (rng.standard_normal(s) for s in ((3, 4), (4,), (4,), (3, 4)))

    def loss():
        y, _, _ = formula("layernorm_forward")(x, gamma, beta, 1e-5)
        return float((y * w).sum())
    numeric = (numerical_gradient(loss, x), numerical_gradient(loss, gamma), numerical_gradient(loss, beta))
    got = call_layer_norm_backward(fn, Case("", (x, gamma, beta, w)))
    if all(close(n, g, 1e-5) for n, g in zip(numeric, got)):
        return None
    return ("the gradient check: d Σ w·layer_norm(x) by finite differences, x (3, 4)", numeric, got, ())


LAYER_NORM_BACKWARD = Exercise(
    number=8, name="layernorm_backward", title="layer norm's backward",
    reads="tinygrad_lite/ops/nn.py (layernorm_backward)", function="layernorm_backward",
    stub='''def layernorm_backward(dy, x, gamma, mean, rstd):
    """(dx, dgamma, dbeta) of y = x̂·gamma + beta, x̂ = (x − mean)·rstd, rstd = 1/√(var + eps), each row of
    x (rows, n) normalised over its n features (the paper's "LayerNorm(x + Sublayer(x))", §5.4).

    dy, x: (rows, n); gamma: (n,) or None; mean, rstd: (rows, 1), kept by the forward.
    With g = dy·gamma (dy alone without gamma), the gradient of x is
        dx = rstd · (g − mean(g) − x̂ · mean(g·x̂)),   the means over each row's n features;
    dgamma = Σ_rows dy·x̂ and dbeta = Σ_rows dy, each (n,). Without gamma, return (dx, None, None).
    """''',
    hints=("Rebuild x̂ = (x − mean)·rstd first; every term needs it.",
           "Each mean is over a row's features: axis=-1, keepdims=True.",
           "x̂ depends on every entry of its row through the mean and the variance: that is what the two "
           "mean terms take away. dgamma and dbeta sum over the rows: axis=0."),
    solution=PROJECT_LAYERNORM_BACKWARD, shown=PROJECT_LAYERNORM_BACKWARD,
    why="From the forward's mean and rstd, two row means and no second pass over the variance: the backward "
        "of the whole normalisation in one expression, rather than a graph of a dozen small ops.",
    cases=layer_norm_cases, call=call_layer_norm_backward,
    mistakes=(
        Mistake("the mean(g·x̂) term missing", "the variance depends on x too: dx = rstd·(g − mean(g) − "
                "x̂·mean(g·x̂)).", _dx_as_if(lambda g, xh, r, dy: r * (g - g.mean(-1, keepdims=True)))),
        Mistake("the mean(g) term missing", "the mean depends on x too: subtract mean(g) over the row.",
                _dx_as_if(lambda g, xh, r, dy: r * (g - xh * (g * xh).mean(-1, keepdims=True)))),
        Mistake("gamma left out of dx", "y = x̂·gamma + beta, so x̂'s gradient is g = dy·gamma, not dy.",
                _dx_as_if(lambda g, xh, r, dy: r * (dy - dy.mean(-1, keepdims=True)
                                                   - xh * (dy * xh).mean(-1, keepdims=True)))),
        Mistake("dgamma or dbeta summed over the wrong axis", "gamma and beta are (n,): sum dy·x̂ and dy over "
                "the rows, axis=0.", lambda c, e, g: (isinstance(g, ValueError) and "reshape" in str(g))
                or (e[1] is not None and (np.shape(g[1]) != e[1].shape or np.shape(g[2]) != e[2].shape))),
    ),
    checks=(Check("the gradient check against finite differences", _layer_norm_gradient_check),
            Check("the end-to-end run (a Transformer learns to copy with your layer norm backward)",
                  lambda fn: copy_task_check(substitute("layernorm_backward", fn)))),
    draw=lambda fn, path: draw_substituted("layernorm_backward", fn, path, lambda rng: weighted_sum(
        Tensor(rng.standard_normal((2, 4)), requires_grad=True).layer_norm(
            4, Tensor(np.ones(4), requires_grad=True), Tensor(np.zeros(4), requires_grad=True)), rng)),
)


def dropout_cases():
    rng = _rng()
    big = rng.standard_normal((200, 100)) + 2.0
    return [Case("an empty batch, x (0, 5), p = 0.5", (np.zeros((0, 5)), 0.5, True), tags=frozenset({"zero-size"})),
            Case("x (200, 100), p = 0.1, training", (big, 0.1, True)),
            Case("x (200, 100), p = 0.5, not training (eval)", (big, 0.5, False), tags=frozenset({"eval"})),
            Case("x (200, 100), p = 0.3, training", (big, 0.3, True)),
            Case("x (200, 100), p = 0, training", (big, 0.0, True)),
            Case("x (200, 100), p = 1, training", (big, 1.0, True), tags=frozenset({"p = 1"}))]


def describe_dropout(fn, case) -> dict:
    """What dropout did to x: the output's shape, the share of entries dropped (to the nearest 1% when
    within 2% of p), and what the kept entries are (x/(1 − p), x, x·(1 − p), or other)."""
    x, p, training = case.args
    y = np.asarray(fn(x, p, training, np.random.default_rng(0)))
    if y.shape != x.shape:
        return {"shape": y.shape}
    dropped = float((y == 0).mean()) if y.size else p * training
    kept = y != 0
    scale = 1 / (1 - p) if training and p < 1 else 1.0
    names = {"x/(1 − p)": scale, "x": 1.0, "x·(1 − p)": 1 - p}
    what = next((name for name, factor in names.items() if np.allclose(y[kept], x[kept] * factor)), "other")
    if not finite(y):
        what = "not finite"
    share = f"{p * training:.0%}" if abs(dropped - p * training) < 0.02 else \
        f"{1 - p:.0%}, which is 1 − p" if training and 0 < p < 1 and abs(dropped - (1 - p)) < 0.02 else f"{dropped:.1%}"
    return {"shape": y.shape, "dropped": share, "kept entries": what if training and p < 1 else
            ("x" if what in ("x", "x/(1 − p)") else what)}


def project_dropout(x, p, training, rng):
    """The engine's Dropout module on x (its own random stream, seeded: only the statistics are compared)."""
    tl.manual_seed(0)
    layer = Dropout(p)
    layer.train(training)
    return layer(Tensor(x)).data


DROPOUT = Exercise(
    number=9, name="dropout", title="inverted dropout (P_drop, §5.4)",
    reads="tinygrad_lite/ops/nn.py (dropout) and tinygrad_lite/nn/dropout.py", function="dropout",
    stub='''def dropout(x, p, training, rng):
    """Inverted dropout (the paper's P_drop, §5.4): while training, each entry of x is zeroed with
    probability p and the others are scaled by 1/(1 − p), so every entry keeps its expected value; not
    training, x is returned unchanged. p = 1 drops everything (zeros, no division by zero).

    x: a float array; p: in [0, 1]; training: bool; rng: a numpy.random.Generator to draw from.
    Returns an array of x's shape.
    """''',
    hints=("keep = rng.random(x.shape) >= p: True with probability 1 − p.",
           "Scale what you keep by 1/(1 − p) while training, so a layer sees the same expected input at "
           "evaluation time without any change.",
           "Two special cases: not training (or p = 0) returns x; p = 1 returns zeros."),
    solution=project_dropout, shown=Dropout.forward,
    why="Inverted: the scaling happens while training, so evaluation is the identity and costs nothing; the "
        "engine draws its mask from a counter-based stream (ops.nn.dropout_keep_mask) so a seed repeats it.",
    cases=dropout_cases, call=describe_dropout,
    mistakes=(
        Mistake("dropout at evaluation time", "dropout only trains: with training=False return x unchanged.",
                lambda c, e, g: "eval" in c.tags),
        Mistake("p = 1 divides by zero", "with p = 1 every entry is dropped: return zeros without scaling by "
                "1/(1 − p).", lambda c, e, g: "p = 1" in c.tags and (isinstance(g, ZeroDivisionError)
                                                                       or g.get("kept entries") == "not finite")),
        Mistake("p taken as the keep probability", "p is the probability to drop: keep = rng.random(shape) >= p.",
                lambda c, e, g: g["dropped"].endswith("which is 1 − p")),
        Mistake("no rescaling", "scale the kept entries by 1/(1 − p), so the expected value stays x.",
                lambda c, e, g: g["kept entries"] == "x"),
        Mistake("scaled by (1 − p)", "inverted dropout divides by (1 − p) while training; multiplying is the "
                "old, non-inverted form, applied at evaluation time.",
                lambda c, e, g: g["kept entries"] == "x·(1 − p)"),
    ),
    checks=(Check("the end-to-end run (a Transformer with your dropout, p = 0.1, in every Dropout module learns to "
                  "copy)", lambda fn: copy_task_check(contextlib.nullcontext(), steps=2 * STEPS, dropout=fn)),),
    draw=lambda fn, path: draw_tensor_function(fn, path, _dropped),
)


def _dropped(fn, rng):
    """Σ w·(x·m), x (3, 4), m = your dropout(ones, 0.5, training, rng): the mask and scale your function gives."""
    mask = named(Tensor(np.asarray(fn(np.ones((3, 4)), 0.5, True, rng), dtype=np.float64)), "your dropout's mask")
    return weighted_sum(named(Tensor(rng.standard_normal((3, 4)), requires_grad=True) * mask, "dropout (yours)"), rng)


def _smoothed_loss(rng):
    loss = cross_entropy(Tensor(rng.standard_normal((3, 5)), requires_grad=True), rng.integers(0, 5, 3),
                         label_smoothing=0.1)
    return loss, loss


def cross_entropy_cases():
    rng = _rng()
    return [Case("an empty batch, logits (0, 4)", (np.zeros((0, 4)), np.zeros(0, dtype=np.int64), 0.1),
                 tags=frozenset({"zero-size"})),
            Case("logits [[1, 2, 3]], target 0, no smoothing", (np.array([[1.0, 2.0, 3.0]]), np.array([0]), 0.0)),
            Case("logits (2, 4), smoothing 0.1", (rng.standard_normal((2, 4)), np.array([1, 3]), 0.1),
                 tags=frozenset({"smoothing"})),
            Case("large logits [[1000, 0, -1000]], target 2, smoothing 0.1",
                 (np.array([[1000.0, 0.0, -1000.0]]), np.array([2]), 0.1), tags=frozenset({"large", "smoothing"})),
            Case("logits (5, 6), smoothing 0.2", (rng.standard_normal((5, 6)) * 3, rng.integers(0, 6, 5), 0.2),
                 tags=frozenset({"smoothing"}))]


def project_cross_entropy(logits, targets, label_smoothing):
    return cross_entropy(Tensor(logits), targets, label_smoothing=label_smoothing).item()


def _loss_as_if(wrong):
    def spots(c, e, g):
        logits, targets, eps = c.args
        shifted = logits - logits.max(axis=1, keepdims=True)
        logp = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
        return not close(e, g) and close(wrong(logp, targets, eps), g)
    return spots


def _smoothed(logp, targets, on, off):
    per = -on * logp[np.arange(len(targets)), targets] - off * (logp.sum(axis=1) - logp[np.arange(len(targets)),
                                                                                          targets])
    return per.mean()


CROSS_ENTROPY = Exercise(
    number=10, name="cross_entropy", title="cross-entropy with label smoothing (§5.4)",
    reads="tinygrad_lite/nn/functional.py (cross_entropy)", function="cross_entropy",
    stub='''def cross_entropy(logits, targets, label_smoothing):
    """The mean over the batch of −Σ_c q_c · log softmax(logits)_c, as a float.

    logits: (N, C) floats; targets: (N,) class ids; label_smoothing ε in [0, 1). The target distribution q
    puts ε/C on every class and 1 − ε more on the true one (the paper's ε_ls = 0.1, §5.4), so
        loss = (1 − ε)·(−log p_target) + ε·mean_c(−log p_c).
    It must hold for logits of ±1000, and an empty batch (N = 0) gives 0.0.
    """''',
    hints=("log softmax(x) = (x − max x) − log Σ exp(x − max x): never take the log of a softmax that "
           "underflowed to 0.",
           "−log p_target is -logp[np.arange(N), targets]; the smoothing term is −logp.mean(axis=1).",
           "Average over the N rows; with N = 0 there is nothing to average: return 0.0."),
    solution=project_cross_entropy, shown=cross_entropy,
    why="One fused op from a stable log-softmax: only the log-probabilities are kept, and the gradient is "
        "written directly as softmax − q (the article's 'softmax minus one-hot'); an all-padding batch gives "
        "0, not NaN.",
    cases=cross_entropy_cases,
    mistakes=(
        Mistake("the log of a softmax that underflowed", "softmax(−1000) is 0 in floats and log 0 is −inf: "
                "compute log softmax as (x − max) − log Σ exp(x − max).",
                lambda c, e, g: "large" in c.tags and not finite(g)),
        Mistake("an empty batch gives NaN", "the mean of no rows is NaN: return 0.0 for N = 0.",
                lambda c, e, g: "zero-size" in c.tags and not finite(g)),
        Mistake("no label smoothing", "with ε > 0, q puts ε/C on every class: add ε·mean_c(−log p_c).",
                lambda c, e, g: "smoothing" in c.tags and _loss_as_if(lambda lp, t, eps: _smoothed(lp, t, 1, 0))(
                    c, e, g)),
        Mistake("ε spread over the other classes only", "this project (and PyTorch) spreads ε over all C "
                "classes, the true one included: ε/C each, 1 − ε more on the target.",
                lambda c, e, g: "smoothing" in c.tags and _loss_as_if(
                    lambda lp, t, eps: _smoothed(lp, t, 1 - eps, eps / (lp.shape[1] - 1)))(c, e, g)),
        Mistake("a sum over the batch, not a mean", "divide by the number of rows N.",
                lambda c, e, g: len(c.args[1]) > 1 and close(e * len(c.args[1]), g)),
    ),
    checks=(Check("the end-to-end run (the copy task trained on your loss goes as on the engine's)", loss_run_check),),
    draw=lambda fn, path: draw_swapped(functional, "cross_entropy_op", cross_entropy_with_value(fn), path,
                                       _smoothed_loss, "your cross_entropy (ε = 0.1)"),
)

EXERCISES = (LAYER_NORM_BACKWARD, DROPOUT, CROSS_ENTROPY)
