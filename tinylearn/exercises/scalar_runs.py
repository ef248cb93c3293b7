"""The scalar floor's machinery for grading: a backward pass over a given topological order (through
Value's public inputs and vjp), a correct order to compare with, the graphs the cases build, and XOR
trained with a learner's pieces plugged in (the end-to-end run of exercises 1-3)."""
from __future__ import annotations

import random

import numpy as np

from tinygrad_lite.scalar import Value

XOR = (((0.0, 0.0), 0.0), ((0.0, 1.0), 1.0), ((1.0, 0.0), 1.0), ((1.0, 1.0), 0.0))


def reference_order(root) -> list:
    """Every Value reachable from root, each after its inputs: an iterative depth-first search, as
    Value._topological_order, through the public `inputs`."""
    order, seen, stack = [], {id(root)}, [(root, iter(root.inputs))]
    while stack:
        node, inputs = stack[-1]
        for child in inputs:
            if id(child) not in seen:
                seen.add(id(child))
                stack.append((child, iter(child.inputs)))
                break
        else:
            stack.pop()
            order.append(node)
    return order


def backward_with(order, root) -> None:
    """Value.backward's loop over `order` (reversed): each node sends grad·slope to its inputs."""
    for node in order:
        node.grad = 0.0
    root.grad = 1.0
    for node in reversed(order):
        for child, grad in zip(node.inputs, node.vjp(node.grad)):
            child.grad += grad


def graph(kind: str) -> tuple:
    """(root, leaves) of a small graph: a leaf, a chain, a diamond (one Value used twice), a neuron, or a
    chain 3,000 deep (a recursive search dies there)."""
    a, b, c = Value(2.0, label="a"), Value(-3.0, label="b"), Value(0.5, label="c")
    if kind == "leaf":
        return a, [a]
    if kind == "chain":
        return (a * b + c).tanh(), [a, b, c]
    if kind == "diamond":
        shared = a * b
        return shared * shared + shared * c, [a, b, c]
    if kind == "neuron":
        ws = [Value(w) for w in (0.3, -0.7, 1.1)]
        return (ws[0] * a + ws[1] * b + ws[2] * c + Value(0.1)).tanh(), ws + [a, b, c]
    node = a
    for _ in range(3000):
        node = node + b * 1e-4
    return node, [a, b]


def order_summary(order_fn, kind: str) -> dict:
    """What an order gets right or wrong on graph `kind`, and the gradients a backward over it gives."""
    root, leaves = graph(kind)
    order = list(order_fn(root))
    reachable = {id(n): n for n in reference_order(root)}
    listed = [id(n) for n in order]
    place = {}
    for i, key in enumerate(listed):
        place.setdefault(key, i)
    early = sum(1 for n in order if any(place.get(id(c), -1) > place[id(n)] for c in n.inputs))
    backward_with([n for n in order if id(n) in reachable], root)
    return {"missing": sum(1 for key in reachable if key not in place), "listed twice": len(listed) - len(place),
            "placed before an input": early, "gradients": np.array([leaf.grad for leaf in leaves])}


def xor_loss(mul=None, tanh=None, order=None, steps: int = 200, lr: float = 0.1) -> float:
    """Train a 2-4-1 tanh network on XOR with plain gradient descent, built with `mul`, `tanh` and
    `order` (the project's where None); returns the last summed squared error (it starts near 1-2)."""
    mul = mul or (lambda x, y: x * y)
    tanh = tanh or (lambda x: x.tanh())
    order = order or reference_order
    rnd = random.Random(0)
    hidden = [[Value(rnd.uniform(-1, 1)) for _ in range(3)] for _ in range(4)]
    out = [Value(rnd.uniform(-1, 1)) for _ in range(5)]
    params = [p for w in hidden for p in w] + out
    loss = None
    for _ in range(steps):
        loss = Value(0.0)
        for (x1, x2), target in XOR:
            h = [tanh(mul(w[0], Value(x1)) + mul(w[1], Value(x2)) + w[2]) for w in hidden]
            total = out[4]
            for weight, hi in zip(out, h):
                total = total + mul(weight, hi)
            error = tanh(total) - target
            loss = loss + mul(error, error)
        backward_with(order(loss), loss)
        for p in params:
            p.data -= lr * p.grad
    return loss.data


def xor_check(**pieces):
    """A Check.run result: None if XOR trains (loss below 0.05 after 200 steps), else the failure."""
    loss = xor_loss(**pieces)
    if loss == loss and loss < 0.05:
        return None
    return ("the end-to-end run: a 2-4-1 tanh network trained on XOR for 200 steps with yours",
            "a loss below 0.05", f"a loss of {loss:.3f}", ())
