"""The step's loss and backward as a compiled plan (tinygrad_lite.compiler): captured on a batch shape
it has not seen, replayed after it, with the eager step's numbers bit for bit
(tests/test_compiled_training.py). The GPT's trainer runs it unless told --no-compile, the
translator's only when told --compile (TINYGRAD_LITE_COMPILE=0/1 too, tinygrad_lite.cli: its batches
come in so many shapes that captures cost more than replays gain); the loop (transformer.loop) gets a
function of a batch either way. What follows backward runs eagerly, as a few calls: the loss's value, the plug-ins (the
NaN check, the ranks' all-reduce of every .grad), clipping and the optimizer's step."""
from __future__ import annotations

from tinygrad_lite.compiler import compile


class CompiledGradients:
    """`gradients(batch)` (transformer.loop.forward_backward) compiled. A batch reaches the plan as its
    arrays, `tuple(batch)`, or as `prepare(batch)` (arrays, then values chosen from the batch outside
    the plan, such as the translator's row counts, rows_to_skip_padding), whose shapes, dtypes and
    values key the plans. A key is captured the second time it comes (as tinygrad's TinyJit captures
    on a second call): its first batch runs eagerly on the same arguments, so a key that never comes
    back (the translator's batches vary) costs no capture. Both are counted."""

    def __init__(self, gradients, prepare=tuple):
        self.gradients, self.prepare = gradients, prepare
        self.compiled = compile(self.on_arrays)
        self.keys_seen: set = set()
        self.compiled_batches = self.first_sightings = 0

    def on_arrays(self, *arguments):
        return self.gradients(arguments)

    def __call__(self, batch):
        arguments = self.prepare(batch)
        key = tuple((a.shape, a.dtype.str) if hasattr(a, "dtype") else a for a in arguments)
        if key not in self.keys_seen:
            self.keys_seen.add(key)
            self.first_sightings += 1
            return self.gradients(arguments)
        self.compiled_batches += 1
        return self.compiled(*arguments)

    def summary(self) -> dict:
        """What the compiler did: batches it ran (their captures included), plans kept, captures made,
        calls a guard sent to eager mode; and the batches run eagerly, each key's first."""
        step = self.compiled
        return {"compiled_batches": self.compiled_batches, "plans": len(step.plans), "captures": step.captures,
                "fallbacks": step.fallbacks, "first_sightings": self.first_sightings}

    def describe(self) -> str:
        s = self.summary()
        return (f"compiled: {s['compiled_batches']} batch(es) from {s['plans']} plan(s) ({s['captures']} "
                f"capture(s), {s['fallbacks']} fallback(s)); eager: {s['first_sightings']} first batch(es) "
                f"of a shape")


def describe_step(compiled: CompiledGradients | None) -> str:
    """The run's step, for its printout: compiled (and what the compiler did) or eager."""
    return compiled.describe() if compiled is not None else "eager (--compile or TINYGRAD_LITE_COMPILE=1 compiles it)"
