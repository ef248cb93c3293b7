"""The backward pass of a recorded graph, read back as plain data for the explorer page.

`trace(loss, model)` lists every node the loss was computed from (a scalar `Value` or a
`Tensor`), with its value and gradient as the engine holds them (`.data`, `.grad`), the order
backward visits them, and for each node the gradient each consumer sent it: for a Value its
local derivative times the consumer's gradient, for a Tensor what the consumer's backward rule
returns given the consumer's gradient: both are the consumer's `vjp(grad)`. Numbers keep 9
significant digits (enough to give a float32 back exactly); big tensors keep a summary.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..graph import topological
from .rules import local_rule

HEAD = 16      # values shown as numbers
GRID = 12      # rows and columns of the heatmap
BINS = 16      # histogram bins
NOTE_NO_RETAINED = ("interior tensors hold no .grad: run backward() inside tinygrad_lite.retain_grads() "
                    "to see every node's gradient")
NOTE_NO_GRAPH = ("the graph's backward functions were freed: run loss.backward(retain_graph=True) to see "
                 "each consumer's contribution (the totals below are the engine's .grad)")


def number(x) -> float | str:
    """A float with 9 significant digits for JSON; NaN and ±Inf as text."""
    x = float(x)
    if not np.isfinite(x):
        return str(x)
    return float(f"{x:.9g}")


def summary(array, brief: bool = False) -> dict:
    """What the page shows of an array: its first values, norm, range and mean; unless brief,
    a heatmap grid of its top-left corner and a histogram of all its values."""
    a = np.asarray(array)
    flat = a.reshape(-1).astype(np.float64)
    finite = flat[np.isfinite(flat)]
    out = {"shape": [int(n) for n in a.shape], "n": int(flat.size), "head": [number(x) for x in flat[:HEAD]],
           "norm": number(np.sqrt(np.sum(finite * finite))) if finite.size else 0.0,
           "min": number(finite.min()) if finite.size else 0.0, "max": number(finite.max()) if finite.size else 0.0,
           "mean": number(finite.mean()) if finite.size else 0.0, "truncated": flat.size > HEAD}
    if brief:
        return out
    grid = flat.reshape(1, -1) if a.ndim < 2 else flat.reshape(-1, a.shape[-1])
    out["grid"] = [[number(x) for x in row[:GRID]] for row in grid[:GRID]]
    if finite.size:
        counts, edges = np.histogram(finite, bins=BINS)
        out["hist"] = {"counts": counts.tolist(), "lo": number(edges[0]), "hi": number(edges[-1])}
    return out


@dataclass
class Trace:
    """nodes: JSON-ready dicts; steps: node indices in the order backward visits them;
    engine: the Value/Tensor behind each node (same order); notes: what the page should say."""

    kind: str
    nodes: list = field(default_factory=list)
    steps: list = field(default_factory=list)
    engine: list = field(default_factory=list)
    notes: list = field(default_factory=list)

    def index(self) -> dict:
        return {id(obj): i for i, obj in enumerate(self.engine)}


def trace(loss, model=None) -> Trace:
    """The nodes, their numbers and the backward order of the graph that computed `loss`."""
    from tinygrad_lite.scalar import Value
    from tinygrad_lite.tensor import Tensor

    if isinstance(loss, Value):
        return _trace_values(loss)
    if isinstance(loss, Tensor):
        return _trace_tensors(loss, model)
    raise TypeError(f"explore: loss must be a tinygrad_lite Tensor or Value, got {type(loss).__name__}")


def _node(i, label, op, value, grad, kind) -> dict:
    return {"i": i, "label": label, "op": op, "rule": local_rule(op), "kind": kind, "value": value,
            "grad": grad, "inputs": [], "from": [], "step": None}


def _trace_values(loss) -> Trace:
    order = topological([loss])
    result = Trace("value", engine=order)
    at = result.index()
    for i, v in enumerate(order):
        kind = "op" if v.inputs else "leaf"
        node = _node(i, v.label or (f"{v.op} → {v.data:.4g}" if v.inputs else f"{v.data:.4g}"), v.op,
                     summary(v.data), summary(v.grad), kind)
        node["inputs"] = [at[id(p)] for p in v.inputs]
        result.nodes.append(node)
    for c in order:
        for arg, (p, local, sent) in enumerate(zip(c.inputs, c.vjp(1.0), c.vjp(c.grad))):
            result.nodes[at[id(p)]]["from"].append({"node": at[id(c)], "arg": arg, "local": number(local),
                                                    "grad": summary(sent, brief=True)})
    result.steps = [at[id(v)] for v in reversed(order)]
    return result


def _tensor_label(t, names: dict) -> str:
    name = names.get(id(t)) or t.name
    if name:
        return name
    return f"{t.op} out" if t.inputs else "constant"


def _trace_tensors(loss, model) -> Trace:
    from tinygrad_lite.autograd import toposort

    order = topological([loss])
    result = Trace("tensor", engine=order)
    at = result.index()
    names = {id(p): name for name, p in model.named_parameters()} if model is not None else {}
    for i, t in enumerate(order):
        kind = "op" if t.inputs else ("param" if id(t) in names or t.requires_grad else "constant")
        grad = None if t.grad is None else summary(t.grad)
        node = _node(i, _tensor_label(t, names), t.op, summary(t.data), grad, kind)
        node.update(inputs=[at[id(p)] for p in t.inputs], dtype=str(t.dtype))
        result.nodes.append(node)
    steps = list(reversed(toposort(loss)))
    result.steps = [at[id(t)] for t in steps]
    if any(t.inputs and t.grad is None for t in steps):
        result.notes.append(NOTE_NO_RETAINED)
    freed = _freed(loss)
    for c in steps:
        if not c.inputs or c.grad is None:
            continue
        try:
            sent = c.vjp(c.grad)
        except RuntimeError:  # an earlier backward() freed this part of the graph
            freed = True
            continue
        for arg, (p, pg) in enumerate(zip(c.inputs, sent)):
            if pg is not None and p.requires_grad:
                result.nodes[at[id(p)]]["from"].append({"node": at[id(c)], "arg": arg,
                                                        "grad": summary(pg, brief=True)})
    if freed:
        result.notes.append(NOTE_NO_GRAPH)
    return result


def _freed(loss) -> bool:
    """Whether backward() freed the graph: it frees every node it passes, the loss first."""
    try:
        loss.vjp(np.zeros_like(loss.data))
    except RuntimeError:
        return True
    return False
