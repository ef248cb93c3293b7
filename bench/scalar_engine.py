"""Time one training step of micrograd's moons demo: ours vs micrograd 0.1.0.

A step is micrograd's demo loop body: forward MLP(2, [16, 16, 1]) on 100 two-moons
points, SVM hinge loss (+ optional L2), zero_grad, backward, SGD update. Both
engines start from the same weights and are timed in alternation, so machine noise
hits them alike. Prints the median milliseconds per step and the ratio micrograd /
ours, with Python's cyclic garbage collector on (what a training loop really costs)
and off (interpreter cost alone).

    python3 bench/scalar_engine.py [--repeats 15] [--points 100] [--no-reg]
"""
import argparse
import gc
import statistics
import time

import numpy as np

from tinygrad_lite.scalar import MLP, Value


def make_moons(n_samples, noise=0.1, seed=0):
    """Two interleaving half circles (like sklearn.datasets.make_moons); labels are -1/+1."""
    rng = np.random.default_rng(seed)
    n_outer = n_samples // 2
    angles_outer = np.linspace(0, np.pi, n_outer)
    angles_inner = np.linspace(0, np.pi, n_samples - n_outer)
    outer = np.c_[np.cos(angles_outer), np.sin(angles_outer)]
    inner = np.c_[1 - np.cos(angles_inner), 0.5 - np.sin(angles_inner)]
    X = np.r_[outer, inner] + rng.normal(scale=noise, size=(n_samples, 2))
    y = np.r_[-np.ones(n_outer), np.ones(n_samples - n_outer)]
    return X, y


def training_step(model, value_cls, X, y, learning_rate=0.1, alpha=1e-4):
    """One step of micrograd's demo; returns the loss as a float."""
    inputs = [[value_cls(float(a)), value_cls(float(b))] for a, b in X]
    scores = [model(x) for x in inputs]
    losses = [(1 + -yi * score).relu() for yi, score in zip(y.tolist(), scores)]
    loss = sum(losses) * (1.0 / len(losses))
    if alpha:
        loss = loss + alpha * sum(p * p for p in model.parameters())
    model.zero_grad()
    loss.backward()
    for p in model.parameters():
        p.data -= learning_rate * p.grad
    return loss.data


def micrograd_twin(ours):
    """micrograd's MLP with the same architecture and weights as `ours`, or None."""
    try:
        from micrograd.engine import Value as MicroValue
        from micrograd.nn import MLP as MicroMLP
    except ImportError:
        return None
    sizes = [len(layer.neurons) for layer in ours.layers]
    twin = MicroMLP(len(ours.layers[0].neurons[0].w), sizes)
    for p_ours, p_twin in zip(ours.parameters(), twin.parameters(), strict=True):
        p_twin.data = p_ours.data
    return twin, MicroValue


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--points", type=int, default=100)
    parser.add_argument("--no-reg", action="store_true", help="leave out the L2 term")
    args = parser.parse_args()
    alpha = 0.0 if args.no_reg else 1e-4

    X, y = make_moons(args.points)
    ours = MLP(2, [16, 16, 1], seed=1337)
    engines = {"tinygrad_lite": (ours, Value)}
    twin = micrograd_twin(ours)
    if twin is None:
        print("micrograd not installed: timing tinygrad_lite only")
    else:
        engines["micrograd"] = twin

    print(f"one training step of MLP(2, [16, 16, 1]) on {args.points} moons points, "
          f"median of {args.repeats}:")
    print(f"  {'GC':12s}" + "".join(f"{name:>16s}" for name in engines)
          + ("   micrograd / ours" if len(engines) == 2 else ""))
    for gc_mode in ("on", "off"):
        medians = time_steps(engines, X, y, alpha, args.repeats, gc_enabled=gc_mode == "on")
        row = f"  {gc_mode:12s}" + "".join(f"{m * 1e3:13.1f} ms" for m in medians.values())
        if len(medians) == 2:
            row += f"   {medians['micrograd'] / medians['tinygrad_lite']:8.2f}x"
        print(row)
    print("GC on: each step ends with gc.collect(), so each engine pays for collecting its own\n"
          "garbage (as in a real training loop) and never for the other's. GC off: interpreter\n"
          "cost only; micrograd's graphs are reference cycles (closures), ours are not.")


def time_steps(engines, X, y, alpha, repeats, gc_enabled):
    """Median seconds per training step for each engine, timed in alternation."""
    times = {name: [] for name in engines}
    for _ in range(repeats):
        for name, (model, value_cls) in engines.items():
            gc.collect()
            if not gc_enabled:
                gc.disable()
            start = time.perf_counter()
            training_step(model, value_cls, X, y, alpha=alpha)
            if gc_enabled:
                gc.collect()
            times[name].append(time.perf_counter() - start)
            gc.enable()
    return {name: statistics.median(ts) for name, ts in times.items()}

if __name__ == "__main__":
    main()
