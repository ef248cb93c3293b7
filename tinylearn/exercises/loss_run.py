"""Cross-entropy's end-to-end run: the copy task trained 50 steps on the learner's loss, label smoothing 0.1
(the paper's ε_ls, §5.4), must go as it does on the engine's. The learner writes the loss's value, not its
gradient, so the engine's cross_entropy op takes its value from the learner's function and its gradient from
finite differences of it: one row at a time, each logit nudged by 1e-6 (forward differences, 9 calls a row
here), under fast.plain()."""
from __future__ import annotations

import contextlib
import functools

import numpy as np

from tinygrad_lite.fast import plain
from tinygrad_lite.nn import functional

from ..pictures import swapped
from .copy_task import copy_task

NUDGE, STEPS, SMOOTHING = 1e-6, 50, 0.1


def learned_loss(fn):
    """nn.functional.cross_entropy_op (mean over class-index targets, none ignored) computed by the learner's
    cross_entropy(logits, targets, ε): its value, and its gradient by forward differences row by row."""
    project = functional.cross_entropy_op

    def op(logits, t, num_classes, ignore_index, eps, reduction):
        with swapped(functional, "cross_entropy_op", project):  # a learner's loss may call the engine's
            value = float(fn(logits, t, eps))
        rows = logits.reshape(-1, num_classes)

        def backward(g):
            with swapped(functional, "cross_entropy_op", project):
                grad = np.stack([row_slopes(fn, rows[r], int(t.reshape(-1)[r]), eps) for r in range(len(rows))])
            return ((g * grad / len(rows)).reshape(logits.shape).astype(logits.dtype),)
        return np.asarray(value, dtype=logits.dtype), backward
    return op


def row_slopes(fn, row, target, eps):
    """d fn(row)/d row by forward differences: fn on the one row, then on each of its logits nudged."""
    targets = np.array([target])
    base = float(fn(row[None], targets, eps))
    nudged = np.repeat(row[None], len(row), 0) + NUDGE * np.eye(len(row))
    return np.array([(float(fn(x[None], targets, eps)) - base) / NUDGE for x in nudged])


def your_loss(fn):
    """A context: the engine's cross_entropy computed by the learner's (learned_loss) inside it."""
    return contextlib.nullcontext() if fn is None else swapped(functional, "cross_entropy_op", learned_loss(fn))


@functools.lru_cache(maxsize=1)
def engine_run() -> tuple:
    """(first loss, last loss, accuracy) of the copy task trained STEPS steps on the engine's own loss."""
    with plain():
        return copy_task(contextlib.nullcontext(), steps=STEPS, smoothing=SMOOTHING)


def loss_run_check(fn):
    """A Check.run result: None if the copy task trained on fn's loss (learned_loss) goes as on the engine's,
    its losses within 1e-4 and the same share of tokens right, and learns; else the failure."""
    expected = engine_run()
    with plain():
        got = copy_task(your_loss(fn), steps=STEPS, smoothing=SMOOTHING)
    same = np.allclose(got[:2], expected[:2], rtol=1e-4, atol=1e-4) and got[2] == expected[2]
    if same and got[1] < got[0]:
        return None
    return (f"the end-to-end run: the copy task trained {STEPS} steps on your loss (label smoothing {SMOOTHING}, "
            "its gradient by finite differences), as on the engine's",
            f"first loss {expected[0]:.4f}, last {expected[1]:.4f}, {expected[2]:.0%} of the tokens right",
            f"first loss {got[0]:.4f}, last {got[1]:.4f}, {got[2]:.0%} of the tokens right", ())
