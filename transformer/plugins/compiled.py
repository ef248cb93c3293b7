"""The step's loss and backward as a compiled plan (tinygrad_lite.compiler): captured on a batch shape
it has not seen, replayed after it, with the eager step's numbers bit for bit
(tests/test_compiled_training.py). Both trainers run it unless told --no-compile (or
TINYGRAD_LITE_COMPILE=0, tinygrad_lite.cli); the loop (transformer.loop) gets a function of a batch
either way. What follows backward runs eagerly, as a few calls: the loss's value, the plug-ins (the
NaN check, the ranks' all-reduce of every .grad), clipping and the optimizer's step."""
from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Callable

from tinygrad_lite import fast
from tinygrad_lite.compiler import compile

from ..data import PAD


@dataclass(frozen=True)
class EagerBatches:
    """Batches a trainer runs eagerly by design: those for which `applies(batch)` holds, for the reason
    `why`. The other batches reach the plan with `tricks_off` switched off: the tricks whose branch
    `applies` has already decided against for them."""
    applies: Callable
    why: str
    tricks_off: tuple = ()


class CompiledGradients:
    """`gradients(batch)` (transformer.loop.forward_backward) compiled. A batch reaches the plan as its
    arrays, `tuple(batch)`, whose shapes and dtypes key the plans. A shape is captured the second time
    it comes (as tinygrad's TinyJit captures on a second call): its first batch runs eagerly, so a
    shape that never comes back (the translator's batches vary) costs no capture. The batches `eager`
    names (an EagerBatches) run `gradients` itself, by design. Both are counted."""

    def __init__(self, gradients, eager: EagerBatches | None = None):
        self.gradients, self.eager = gradients, eager
        self.compiled = compile(self.on_arrays)
        self.shapes_seen: set = set()
        self.compiled_batches = self.first_sightings = self.eager_batches = 0

    def on_arrays(self, *arrays):
        return self.gradients(arrays)

    def __call__(self, batch):
        if self.eager is not None and self.eager.applies(batch):
            self.eager_batches += 1
            return self.gradients(batch)
        shapes = tuple((a.shape, a.dtype.str) for a in batch)
        if shapes not in self.shapes_seen:
            self.shapes_seen.add(shapes)
            self.first_sightings += 1
            return self.gradients(batch)
        self.compiled_batches += 1
        with fast.tricks_off(*self.eager.tricks_off) if self.eager else contextlib.nullcontext():
            return self.compiled(*batch)

    def summary(self) -> dict:
        """What the compiler did: batches it ran (their captures included), plans kept, captures made,
        calls a guard sent to eager mode; and the batches run eagerly: a shape's first, those `eager` names."""
        step = self.compiled
        return {"compiled_batches": self.compiled_batches, "plans": len(step.plans), "captures": step.captures,
                "fallbacks": step.fallbacks, "first_sightings": self.first_sightings,
                "eager_batches": self.eager_batches}

    def describe(self) -> str:
        s = self.summary()
        eager = f", {s['eager_batches']} that {self.eager.why}" if self.eager is not None else ""
        return (f"compiled: {s['compiled_batches']} batch(es) from {s['plans']} plan(s) ({s['captures']} "
                f"capture(s), {s['fallbacks']} fallback(s)); eager: {s['first_sightings']} first batch(es) "
                f"of a shape{eager}")


def skips_padding(batch) -> bool:
    """Whether the translator's loss skips this batch's <pad> rows (transformer.train.teacher_forcing_loss
    under TRICKS.skip_padding, the same test)."""
    src, tgt = batch
    return bool(fast.TRICKS.skip_padding) and fast.padding_worth_skipping(src, tgt[:, :-1], tgt[:, 1:], PAD)


# The translator's batches that skip <pad> rows: their row counts depend on the ids, which the compiler
# does not capture yet, so they run eagerly; the others reach the plan with skip_padding off, the branch
# teacher_forcing_loss would take for them (its test reads the ids, which a capture refuses). Once that
# path is capturable (fixed row-count buckets), the translator's CompiledGradients takes no `eager`.
SKIPPING_PADDING = EagerBatches(skips_padding, "skip <pad> rows (the compiler does not capture them yet)",
                                ("skip_padding",))


def describe_step(compiled: CompiledGradients | None) -> str:
    """The run's step, for its printout: compiled (and what the compiler did) or eager."""
    return compiled.describe() if compiled is not None else "eager (--no-compile or TINYGRAD_LITE_COMPILE=0)"
