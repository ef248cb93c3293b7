"""How much of the translator's compiled step runs as native code: its Numba kernels and its products.

    python bench/native_share.py                        # TINY and SMALL, 1 thread, CPU clock
    python bench/native_share.py --configs tiny --rounds 9 --steps 100
    python bench/native_share.py --quick                # seconds, a toy config (the smoke test)

The step as `train_throughput.py` builds it (compiled, every rule on) runs in rounds that alternate two sides:
as it is, and with every Numba kernel of `tinygrad_lite.kernels` (a Linear's twin, `linear_layer`, among them: its
products and bias in one call) and every other product of a Linear's (the twin of the op `linear_product`, whatever
it multiplies on; the FFN's first half) timed on entry and exit. The native share is the timed calls' time
over the plain side's step. The rest is Python (the plan's lines, the ops' wrappers, the dispatch) and NumPy's
small operations beside the kernels (bias adds, column sums, copies): what a replay with no Python per op could
shed, and a bound on what it could not (the kernels and products themselves). Medians over rounds, CPU clock.
"""
from __future__ import annotations

import argparse
import importlib
import pkgutil
import time
import types
from collections import Counter

import numpy as np
from train_throughput import (
    CONFIGS,
    QUICK,
    OursTrainer,
    append_json,
    build_ours,
    markdown,
    pick_configs,
    random_batches,
    start,
)


class Timed:
    """Every Numba kernel and the Linear product timed while installed (`with Timed() as t:`): t.seconds and
    t.calls by kernel name. Installing swaps the kernels each module built on first use (its lazy_kernels
    cache) for timing wrappers, and leaving puts the originals back."""

    def __init__(self):
        self.seconds, self.calls, self._undo = Counter(), Counter(), []

    def _timed(self, fn, name):
        clock, seconds, calls = time.perf_counter, self.seconds, self.calls

        def timed(*args, **kwargs):
            t0 = clock()
            out = fn(*args, **kwargs)
            seconds[name] += clock() - t0
            calls[name] += 1
            return out
        return timed

    def _wrap(self, built, name):
        if isinstance(built, types.SimpleNamespace):
            return types.SimpleNamespace(**{k: self._wrap(v, f"{name}.{k}") for k, v in vars(built).items()})
        if isinstance(built, tuple):
            return tuple(self._wrap(v, f"{name}[{i}]") for i, v in enumerate(built))
        return self._timed(built, name) if type(built).__name__.endswith("Dispatcher") else built

    def __enter__(self):
        import tinygrad_lite.kernels as kernels
        from tinygrad_lite import dispatch
        for info in pkgutil.iter_modules(kernels.__path__):
            module = importlib.import_module(f"{kernels.__name__}.{info.name}")
            for fn in list(vars(module).values()):
                names = getattr(getattr(fn, "__code__", None), "co_freevars", ())
                if "built" not in names or not hasattr(fn, "__wrapped__"):
                    continue
                cache = fn.__closure__[names.index("built")].cell_contents  # kernels.backend.lazy_kernels
                if cache:
                    self._undo.append((cache, cache[0]))
                    cache[0] = self._wrap(cache[0], info.name)
        twin = dispatch.TWINS["linear_product"]
        self._undo.append((dispatch.TWINS, twin))
        dispatch.TWINS["linear_product"] = self._timed(twin, "linear product (BLAS)")
        return self

    def __exit__(self, *exc):
        for cache, original in reversed(self._undo):
            if isinstance(cache, list):
                cache[0] = original
            else:
                cache["linear_product"] = original
        self._undo.clear()


def native_share(cfg, rounds: int, steps: int) -> dict:
    """{plain ms, timed ms, native ms, share, kernels: [(name, calls a step, ms a step)]} for cfg's step."""
    ours = OursTrainer(build_ours(cfg))
    batches = random_batches(cfg, 4)

    def run() -> float:
        t0 = time.process_time()
        for i in range(steps):
            ours.step(batches[i % len(batches)])
        return (time.process_time() - t0) / steps

    for i in range(6):
        ours.step(batches[i % len(batches)])
    timer = Timed()
    with timer:  # the kernels are built by now: their caches are what gets swapped
        run()
    plain, timed, native, seconds, calls = [], [], [], Counter(), Counter()
    for _ in range(rounds):
        plain.append(run())
        timer.seconds.clear()
        timer.calls.clear()
        with timer:
            timed.append(run())
        native.append(sum(timer.seconds.values()) / steps)
        seconds.update(timer.seconds)
        calls.update(timer.calls)
    plain_ms, native_ms = 1e3 * float(np.median(plain)), 1e3 * float(np.median(native))
    kernels = [(name, calls[name] / (rounds * steps), 1e3 * s / (rounds * steps)) for name, s in seconds.most_common()]
    return {"config": cfg.name, "plain_ms": round(plain_ms, 3), "timed_ms": round(1e3 * float(np.median(timed)), 3),
            "native_ms": round(native_ms, 3), "native_share": round(native_ms / plain_ms, 3),
            "calls_a_step": round(sum(c for _, c, _ in kernels), 1), "kernels": kernels}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--configs", default="tiny,small", help=f"comma list of {sorted(CONFIGS)}")
    parser.add_argument("--rounds", type=int, default=7, help="alternating rounds (medians over them)")
    parser.add_argument("--steps", type=int, default=0, help="steps a round (default: the config's own)")
    parser.add_argument("--quick", action="store_true", help="a toy config, a few steps: a smoke run")
    parser.add_argument("--json", help="append one JSON row per config to this file")
    args = parser.parse_args(argv)
    configs = [QUICK] if args.quick else pick_configs(parser, args.configs)
    _, env = start(parser, 1)
    rows = []
    for cfg in configs:
        row = native_share(cfg, 2 if args.quick else args.rounds, 2 if args.quick else args.steps or cfg.steps)
        rows.append(row)
        append_json(args.json, {**env, **row})
        print(f"\n{cfg.name}: native {row['native_ms']} ms of a {row['plain_ms']} ms step "
              f"({100 * row['native_share']:.0f}%), {row['calls_a_step']:.0f} native calls a step; "
              f"the step with them timed: {row['timed_ms']} ms")
        print(markdown(["kernel", "calls a step", "ms a step"],
                       [[name, f"{calls:.0f}", f"{ms:.3f}"] for name, calls, ms in row["kernels"]]))
    print("\n" + markdown(["config", "step ms", "native ms", "native share", "the rest (Python, NumPy's small ops) ms"],
                          [[r["config"], r["plain_ms"], r["native_ms"], f"{100 * r['native_share']:.0f}%",
                            round(r["plain_ms"] - r["native_ms"], 3)] for r in rows]))


if __name__ == "__main__":
    main()
