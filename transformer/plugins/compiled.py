"""The trainers' step as a compiled plan (tinygrad_lite.compiler): the whole update, from the loss to
the optimizer's step (transformer.loop.make_step), captured on a batch shape's first sighting and
replayed after it. Both trainers run it unless told --no-compile (TINYGRAD_LITE_COMPILE=0 too,
tinygrad_lite.cli); the loop (transformer.loop) gets a function of a batch either way. Its rewrite rules
fuse the paper's plain boxes, so its numbers are the eager step's to float rounding, and with the rules
off (fast.tricks_off) bit for bit (tests/test_compiled_training.py). Every batch runs from a plan, its
capture included, so a resumed run, which captures again, ends where the uninterrupted one ends.
Inside the plan, what must see this step's numbers in Python is a recorded call,
made at each replay in its place: the plug-ins (the NaN check, which raises before the optimizer
moves; the ranks' all-reduce of every .grad), clipping, the learning rate and the optimizer's step.
"""
from __future__ import annotations

from tinygrad_lite.compiler import compile


def compiling(run, **options):
    """make_step's `compile` for a trainer `run`: the update as CompiledGradients(update, **options),
    kept as run.compiled (the run's printout reports it)."""
    def compiled(update):
        run.compiled = CompiledGradients(update, **options)
        return run.compiled
    return compiled


class CompiledGradients:
    """`fn(batch)` compiled: the trainers' whole update (make_step's), or any step of a batch. A batch
    reaches the plan as its arrays, `tuple(batch)`, or as `prepare(batch)` (arrays, then values or
    tuples of arrays found from the batch outside the plan), whose shapes, dtypes and values key the
    plans; `fn` gets that tuple. A key
    is captured the first time it comes, and the capturing call's results come from its plan (not from
    an eager run, whose unfused ops round differently). With any_shape (the translator, whose batches
    come in many shapes) the keys of one family (the same arrays but for their shapes) share a plan once
    two captures wrote the same program, or one whose constants grow with a shape
    (tinygrad_lite/compiler/shapes.py): a new key then runs compiled, uncaptured, when a shared plan
    serves it."""

    def __init__(self, fn, prepare=tuple, any_shape: bool = False):
        self.fn, self.prepare = fn, prepare
        self.compiled = compile(self.on_arrays, any_shape=any_shape)
        self.compiled_batches = 0

    def on_arrays(self, *arguments):
        return self.fn(arguments)

    def __call__(self, batch):
        self.compiled_batches += 1
        return self.compiled(*self.prepare(batch))

    def summary(self) -> dict:
        """What the compiler did: batches it ran (their captures included), plans kept, captures made
        (`joined`: those whose program a shared plan already ran), calls a guard sent to eager mode."""
        step = self.compiled
        return {"compiled_batches": self.compiled_batches, "plans": len(step.plans), "captures": step.captures,
                "joined": step.joined, "fallbacks": step.fallbacks}

    def describe(self) -> str:
        s = self.summary()
        joined = f", {s['joined']} joining a shared plan" if s["joined"] else ""
        return (f"compiled: {s['compiled_batches']} batch(es) from {s['plans']} plan(s) ({s['captures']} "
                f"capture(s){joined}, {s['fallbacks']} fallback(s) to eager)")


def describe_step(compiled: CompiledGradients | None) -> str:
    """The run's step, for its printout: compiled (and what the compiler did) or eager."""
    return compiled.describe() if compiled is not None else "eager (--compile or TINYGRAD_LITE_COMPILE=1 compiles it)"
