"""Exercises 11-12, the optimizer (tinygrad_lite/optim/): Adam's update with its bias correction, run by
the engine's Adam in place of its formula, and the paper's warm-up schedule, which then drives the copy
task's learning rate as NoamLR's factor."""
from __future__ import annotations

import contextlib
from types import SimpleNamespace

import numpy as np

from tinygrad_lite import Tensor
from tinygrad_lite.dispatch import formula, substitute
from tinygrad_lite.optim import Adam, AdamW, NoamLR

from ..exercise import Case, Check, Exercise, Mistake
from ..grading import close, finite
from ..idea_pictures import draw_schedule
from .copy_task import copy_task_check

PROJECT_ADAM = formula("adam_update")


def adam_cases():
    rng = np.random.default_rng(0)

    def case(label, shape, steps, lr=0.01, betas=(0.9, 0.999), eps=1e-8, wd=0.0, decoupled=False, scale=1.0,
             tags=()):
        grads = [rng.standard_normal(shape) * scale for _ in range(steps)]
        return Case(label, (rng.standard_normal(shape), grads, lr, betas, eps, wd, decoupled), tags=frozenset(tags))
    return [case("an empty parameter (0,), 2 steps", (0,), 2, tags=("zero-size",)),
            case("p (1,), one step, lr 0.1", (1,), 1, lr=0.1),
            case("p (3,), 5 steps, the paper's β1 = 0.9, β2 = 0.98, ε = 1e-9", (3,), 5, betas=(0.9, 0.98), eps=1e-9),
            case("p (4,), 4 steps, ε = 0.01 with small gradients", (4,), 4, eps=1e-2, scale=0.1, tags=("eps",)),
            case("p (2, 3), 3 steps, Adam's weight_decay 0.1 (L2, in the gradient)", (2, 3), 3, wd=0.1,
                 tags=("decay",)),
            case("p (2, 3), 3 steps, AdamW's weight_decay 0.1 (decoupled)", (2, 3), 3, wd=0.1, decoupled=True,
                 tags=("decay",))]


def call_adam(fn, case):
    """The parameter after the engine's Adam (or AdamW) took the case's steps with `fn` as its update."""
    p0, grads, lr, betas, eps, wd, decoupled = case.args
    p = Tensor(p0.copy(), requires_grad=True)
    opt = (AdamW if decoupled else Adam)([p], lr=lr, betas=betas, eps=eps, weight_decay=wd)
    with substitute("adam_update", fn):
        for g in grads:
            p.grad = g.copy()
            opt.step()
    return p.data


def simulate(case, corrected=True, eps_inside=False, squared=True, decay_swapped=False) -> np.ndarray:
    """The parameter after the case's steps with one known mistake switched in (for the detectors)."""
    p, grads, lr, (b1, b2), eps, wd, decoupled = case.args
    p, m, v = p.copy(), np.zeros_like(p), np.zeros_like(p)
    decoupled = decoupled != decay_swapped
    for t, g in enumerate(grads, 1):
        if wd and decoupled:
            p = p * (1 - lr * wd)
        elif wd:
            g = g + wd * p
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * (g * g if squared else g)
        m_hat, v_hat = (m / (1 - b1 ** t), v / (1 - b2 ** t)) if corrected else (m, v)
        p = p - lr * m_hat / (np.sqrt(v_hat + eps) if eps_inside else np.sqrt(v_hat) + eps)
    return p


def _like(**mistake):
    return lambda c, e, g: not close(e, g) and close(simulate(c, **mistake), g)


ADAM = Exercise(
    number=11, name="adam_update", title="Adam's update, with bias correction (§5.3)",
    reads="tinygrad_lite/optim/adam.py (adam_update)", function="adam_update", imports="import math\n\n"
    "import numpy as np\n",
    stub='''def adam_update(param, grad, exp_avg, exp_avg_sq, lr, beta1, beta2, eps, weight_decay, decoupled, step):
    """One Adam step t = `step` (1, 2, ...) of one parameter, IN PLACE: param, exp_avg (m) and
    exp_avg_sq (v) are arrays to update; return nothing. The paper trains with β1 = 0.9, β2 = 0.98,
    ε = 1e-9 (§5.3).
        weight decay: decoupled (AdamW): param ← param·(1 − lr·weight_decay);
                      otherwise (Adam): g ← g + weight_decay·param
        m ← β1·m + (1 − β1)·g,      v ← β2·v + (1 − β2)·g²
        param ← param − lr · m̂ / (√v̂ + ε),   m̂ = m/(1 − β1^t),  v̂ = v/(1 − β2^t)
    m and v start at 0, so early on they are too small by 1 − β^t: the bias correction undoes it.
    """''',
    hints=("Update in place: param -= ..., exp_avg *= beta1, exp_avg += ...: a new array bound to the name "
           "param changes nothing outside.",
           "The bias correction divides m by 1 − β1^t and v by 1 − β2^t, with t = step, which starts at 1.",
           "ε goes outside the square root: √v̂ + ε."),
    solution=PROJECT_ADAM, shown=PROJECT_ADAM,
    why="PyTorch's exact update, in place on the parameter's own arrays, with the bias corrections folded into "
        "a step size and a denominator; the Numba twin does the same float operations in the same order.",
    cases=adam_cases, call=call_adam,
    mistakes=(
        Mistake("not in place", "param = param − ... makes a new array and leaves the parameter as it was: "
                "write param -= ..., exp_avg *= ..., exp_avg += ...",
                lambda c, e, g: c.args[0].size > 0 and close(c.args[0], g)),
        Mistake("no bias correction", "m and v start at 0: divide them by 1 − β1^t and 1 − β2^t.",
                _like(corrected=False)),
        Mistake("ε inside the square root", "the denominator is √v̂ + ε, not √(v̂ + ε).", _like(eps_inside=True)),
        Mistake("v from g, not g²", "v averages the squared gradient: (1 − β2)·g·g.", _like(squared=False)),
        Mistake("the bias correction from step 0", "t counts from 1: at t = 0, 1 − β^0 is 0 and the step "
                "divides by zero.", lambda c, e, g: not finite(g)),
        Mistake("the weight decays swapped", "Adam adds weight_decay·param to the gradient; AdamW (decoupled) "
                "shrinks param by (1 − lr·weight_decay) before the step.",
                lambda c, e, g: "decay" in c.tags and _like(decay_swapped=True)(c, e, g)),
    ),
    checks=(Check("the end-to-end run (a Transformer learns to copy with your Adam)",
                  lambda fn: copy_task_check(substitute("adam_update", fn))),),
    no_picture="Adam's update is not an op of the graph but what happens to the weights after it, and "
               "viz has no plot of a parameter's path under an optimizer; the copy task's falling loss is its picture.",
)


def project_factor(step, d_model, warmup):
    """NoamLR.factor, the engine's own code, on the given numbers."""
    return NoamLR.factor(SimpleNamespace(d_model=d_model, warmup=warmup), step)


def _factor_as_if(wrong):
    def spots(c, e, g):
        return not close(e, g) and close(wrong(*c.args), g)
    return spots


def _shifted(step, d_model, warmup):
    return project_factor(step + 1, d_model, warmup)


WARMUP = Exercise(
    number=12, name="warmup", title="the paper's learning-rate schedule: warm-up, then 1/√step (§5.3)",
    reads="tinygrad_lite/optim/lr_scheduler.py (NoamLR.factor)", function="noam_factor", imports="import math\n",
    stub='''def noam_factor(step, d_model, warmup):
    """The paper's learning rate at `step` (1, 2, ...; eq. 3, §5.3):
        lrate = d_model^−0.5 · min(step^−0.5, step · warmup_steps^−1.5)
    It rises linearly for the first `warmup` steps, peaks at step = warmup, then decays as 1/√step.
    Returns a float.
    """''',
    hints=("Two curves, and the schedule follows the lower one: min, not max.",
           "The warm-up line is step · warmup^−1.5: at step = warmup it meets warmup^−0.5.",
           "Scale both by d_model^−0.5: a wider model takes smaller steps."),
    solution=project_factor, shown=NoamLR.factor,
    why="A closed form of the step, so a resumed run recomputes its learning rate from the step count alone; "
        "the step counts from 1 because the formula divides by zero at 0.",
    cases=lambda: [Case(f"step {s}, d_model {d}, warmup {w}", (s, d, w))
                   for s, d, w in ((1, 512, 4000), (1, 16, 1), (3, 16, 1), (2000, 512, 4000), (4000, 512, 4000),
                                   (8000, 512, 4000), (100000, 512, 4000))],
    mistakes=(
        Mistake("max instead of min", "the schedule is the lower of the two curves: min(step^−0.5, step·warmup^−1.5).",
                _factor_as_if(lambda s, d, w: d ** -0.5 * max(s ** -0.5, s * w ** -1.5))),
        Mistake("the warm-up exponent −0.5", "the warm-up line is step · warmup^−1.5, so it meets step^−0.5 at "
                "step = warmup.", _factor_as_if(lambda s, d, w: d ** -0.5 * min(s ** -0.5, s * w ** -0.5))),
        Mistake("d_model^−0.5 left out", "multiply by d_model^−0.5.",
                _factor_as_if(lambda s, d, w: min(s ** -0.5, s * w ** -1.5))),
        Mistake("the steps counted from 0", "step counts from 1 and is used as it is: don't add 1.",
                _factor_as_if(_shifted)),
    ),
    tolerance=1e-9,
    checks=(Check("the end-to-end run (a Transformer learns to copy with your schedule driving Adam's learning "
                  "rate)", lambda fn: copy_task_check(contextlib.nullcontext(), schedule=fn)),),
    draw=draw_schedule, picture="as a learning-rate curve (viz.plots.plot_loss_curves)",
)

EXERCISES = (ADAM, WARMUP)
