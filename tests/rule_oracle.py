"""A rewrite rule against its oracles (tinygrad_lite/compiler/rules): one step, compiled with the rule
switched on, compiled with it off (the plain ops) and run eagerly with it off, each call from the same
seed. The step runs its forward inside `fast.tricks_off(switch)`, so a box that still calls the fused op
under the same switch runs plain; the rule reads its switch when the compiled step is called."""
import numpy as np

import tinygrad_lite as tl
from tinygrad_lite import fast
from tinygrad_lite.compiler import compile

TOLERANCE = {np.float32: 2e-5, np.float64: 1e-12}
"""Relative tolerance of the fused side against the plain ops: float rounding (the fused kernels add and
scale in another order). A gradient's is relative to its largest entry, floored at 1e-3 of the largest
gradient (issue 45's oracle): W^K's bias has a gradient that is 0 in exact arithmetic, round-off alone."""


def sides(step, tensors: list, calls: list, switches: tuple, seed: int = 0):
    """Run `step(*args)` for each args in `calls` three ways (see the module docstring). Returns ({side:
    per call (loss, [grad of each tensor, then of each argument needing one], rng state after)}, the
    fused compiled step, the plain one)."""
    fused, plain = compile(step), compile(step)
    runs = {"fused": (fused, fast.tricks_on), "plain": (plain, fast.tricks_off),
            "eager": (step, fast.tricks_off)}
    out = {side: [] for side in runs}
    for i, args in enumerate(calls):
        graded = list(tensors) + [a for a in args if isinstance(a, tl.Tensor) and a.requires_grad]
        for side, (fn, switched) in runs.items():
            for t in graded:
                t.grad = None
            tl.manual_seed(seed + i)
            with switched(*switches):
                loss = fn(*args)
            grads = [None if t.grad is None else t.grad.copy() for t in graded]
            out[side].append((np.array(loss.data), grads, tl.random.get_rng_state()))
    return out, fused, plain


def assert_agree(out: dict, dtype):
    """The fused side within TOLERANCE of the plain ops, which equal eager bit for bit; the same number of
    random draws on every side (the same masks: a different one moves the loss far past the tolerance)."""
    tol = TOLERANCE[dtype]
    for (lf, gf, rf), (lp, gp, rp), (le, ge, re) in zip(out["fused"], out["plain"], out["eager"]):
        np.testing.assert_array_equal(lp, le)
        assert [g is None for g in gf] == [g is None for g in gp] == [g is None for g in ge]
        for a, b in zip(gp, ge):
            np.testing.assert_array_equal(a, b)
        np.testing.assert_allclose(lf, lp, rtol=tol)
        pairs = [(a, b) for a, b in zip(gf, gp) if a is not None]
        floor = 1e-3 * max(np.abs(b).max() for _, b in pairs)
        for a, b in pairs:
            assert a.dtype == b.dtype == dtype
            np.testing.assert_allclose(a, b, rtol=tol, atol=tol * max(np.abs(b).max(), floor))
        assert rf == rp == re


def plan_of(compiled):
    """The one plan of a compiled step (one signature, one capture)."""
    assert compiled.captures == 1 and len(compiled.plans) == 1
    return next(iter(compiled.plans.values()))
