"""The trainers' step as a compiled plan (tinygrad_lite.compiler): the whole update, from the loss to
the optimizer's step (transformer.loop.make_step), captured on a batch shape it has seen before and
replayed after it, with the eager step's numbers bit for bit (tests/test_compiled_training.py). The
GPT's trainer runs it unless told --no-compile, the translator's only when told --compile
(TINYGRAD_LITE_COMPILE=0/1 too, tinygrad_lite.cli); the loop (transformer.loop) gets a function of a
batch either way. Inside the plan, what must see this step's numbers in Python is a recorded call,
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
    tuples of arrays found from the batch outside the plan, such as the translator's real rows,
    rows_to_skip_padding), whose shapes, dtypes and values key the plans; `fn` gets that tuple. A key
    is captured the second time it comes (as tinygrad's TinyJit captures on a second call): its first
    batch runs eagerly on the same arguments, so a key that never comes back costs no capture. With
    any_shape (the translator, whose batches come in many shapes) the keys of one family (the same
    arrays but for their shapes) share a plan once two captures wrote the same program
    (tinygrad_lite/compiler/shapes.py): a new key is captured when its family came before and may
    still share, and runs compiled, uncaptured, when a shared plan serves it. Both are counted."""

    def __init__(self, fn, prepare=tuple, any_shape: bool = False):
        self.fn, self.prepare = fn, prepare
        self.compiled = compile(self.on_arrays, any_shape=any_shape)
        self.keys_seen: set = set()
        self.families_seen: set = set()
        self.compiled_batches = self.first_sightings = 0

    def on_arrays(self, *arguments):
        return self.fn(arguments)

    def __call__(self, batch):
        arguments = self.prepare(batch)
        key = plan_key(arguments)
        if key not in self.keys_seen:
            self.keys_seen.add(key)
            family = self.compiled.family(*arguments)
            came_before = family in self.families_seen
            self.families_seen.add(family)
            if not (self.compiled.serves(*arguments) or came_before and self.compiled.sharing(family)):
                self.first_sightings += 1
                return self.fn(arguments)
        self.compiled_batches += 1
        return self.compiled(*arguments)

    def summary(self) -> dict:
        """What the compiler did: batches it ran (their captures included), plans kept, captures made
        (`joined`: those whose program a shared plan already ran), calls a guard sent to eager mode; and
        the batches run eagerly, each key's first."""
        step = self.compiled
        return {"compiled_batches": self.compiled_batches, "plans": len(step.plans), "captures": step.captures,
                "joined": step.joined, "fallbacks": step.fallbacks, "first_sightings": self.first_sightings}

    def describe(self) -> str:
        s = self.summary()
        joined = f", {s['joined']} joining a shared plan" if s["joined"] else ""
        return (f"compiled: {s['compiled_batches']} batch(es) from {s['plans']} plan(s) ({s['captures']} "
                f"capture(s){joined}, {s['fallbacks']} fallback(s)); eager: {s['first_sightings']} first "
                f"batch(es) of a shape")


def plan_key(arguments: tuple) -> tuple:
    """What a batch's plan is keyed by: its arrays' shapes and dtypes (in tuples too), and its other
    arguments' values."""
    return tuple(plan_key(a) if isinstance(a, tuple) else (a.shape, a.dtype.str) if hasattr(a, "dtype") else a
                 for a in arguments)


def describe_step(compiled: CompiledGradients | None) -> str:
    """The run's step, for its printout: compiled (and what the compiler did) or eager."""
    return compiled.describe() if compiled is not None else "eager (--compile or TINYGRAD_LITE_COMPILE=1 compiles it)"
