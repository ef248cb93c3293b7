"""The autograd machinery shared by every Tensor op: grad mode, module scopes,
anomaly mode, and the backward pass over the recorded graph.

A Tensor made by an op remembers `_op` (its name), `_prev` (its inputs, in order)
and `_backward` (a function from the output's gradient to one gradient per input).
`backward()` walks that graph in reverse topological order, found iteratively so
that graphs of any depth work (a recursive sort dies past ~1,000 nodes).
"""
from __future__ import annotations

import contextlib
import os
import sys
import threading

import numpy as np

_state = threading.local()


def _get(name, default):
    return getattr(_state, name, default)


# ---------------------------------------------------------------- grad mode
def is_grad_enabled() -> bool:
    return _get("grad_enabled", True)


class _GradMode(contextlib.ContextDecorator):
    def __init__(self, enabled: bool):
        self.enabled = enabled

    def __enter__(self):
        self.prev = is_grad_enabled()
        _state.grad_enabled = self.enabled

    def __exit__(self, *exc):
        _state.grad_enabled = self.prev
        return False


def no_grad():
    """Context manager (or decorator) inside which ops record no graph, as in PyTorch."""
    return _GradMode(False)


def enable_grad():
    return _GradMode(True)


# ---------------------------------------------------------------- module scopes
def current_scope() -> tuple:
    """The stack of Modules whose forward is running; each new Tensor records it,
    so the graph renderer can group nodes by module path."""
    return _get("scope", ())


@contextlib.contextmanager
def module_scope(module):
    prev = current_scope()
    _state.scope = prev + (module,)
    try:
        yield
    finally:
        _state.scope = prev


# ---------------------------------------------------------------- anomaly mode
_ENV_ANOMALY = os.environ.get("TINYGRAD_LITE_DETECT_ANOMALY", "") not in ("", "0", "false")


def is_anomaly_enabled() -> bool:
    return _get("anomaly", _ENV_ANOMALY)


class AnomalyError(FloatingPointError):
    """A forward or backward output contained NaN or Inf (raised only in anomaly mode)."""


@contextlib.contextmanager
def detect_anomaly(enabled: bool = True):
    """Check every forward and backward output for NaN/Inf and raise naming the op,
    the module path and the file:line that created it (like torch.autograd.detect_anomaly).
    Also switched on by the environment variable TINYGRAD_LITE_DETECT_ANOMALY=1."""
    prev = is_anomaly_enabled()
    _state.anomaly = enabled
    try:
        with np.errstate(all="ignore"):
            yield
    finally:
        _state.anomaly = prev


_PKG_DIR = os.path.dirname(os.path.abspath(__file__))


def creation_site() -> str:
    """file:line of the first stack frame outside tinygrad_lite's engine files."""
    frame = sys._getframe(1)
    while frame is not None and os.path.dirname(os.path.abspath(frame.f_code.co_filename)).startswith(_PKG_DIR):
        frame = frame.f_back
    if frame is None:
        return "<unknown>"
    return f"{frame.f_code.co_filename}:{frame.f_lineno}"


def scope_path(scope) -> str:
    """Dotted module path of a recorded scope, e.g. 'encoder.layers.0.self_attn'.
    The outermost module is the root; each inner one is named by its attribute name."""
    return ".".join(getattr(m, "_name", None) or type(m).__name__ for m in scope[1:])


def check_finite(tensor, what: str, array):
    if array is None or not np.issubdtype(array.dtype, np.floating) or np.isfinite(array).all():
        return
    bad = "NaN" if np.isnan(array).any() else "Inf"
    where = getattr(tensor, "_site", None) or "<unknown>"
    path = scope_path(getattr(tensor, "_scope", ()) or ())
    raise AnomalyError(
        f"anomaly: {what} of op '{tensor._op or 'leaf'}' contains {bad} "
        f"(shape {tuple(array.shape)}, module '{path or '<top level>'}', created at {where})"
    )


# ---------------------------------------------------------------- backward
def toposort(root) -> list:
    """Nodes that lead to `root` and need grad, inputs before outputs; iterative DFS."""
    order, visited = [], set()
    stack = [(root, False)]
    while stack:
        node, expanded = stack.pop()
        if expanded:
            order.append(node)
            continue
        if id(node) in visited:
            continue
        visited.add(id(node))
        stack.append((node, True))
        for parent in node._prev:
            if parent.requires_grad and id(parent) not in visited:
                stack.append((parent, False))
    return order


def retain_grads():
    """Context manager: backward() inside it also keeps `.grad` on intermediate tensors
    (the backprop graph view uses this to colour every node by its gradient)."""
    return _Flag("retain_all_grads")


class _Flag(contextlib.ContextDecorator):
    def __init__(self, name):
        self.name = name

    def __enter__(self):
        self.prev = _get(self.name, False)
        setattr(_state, self.name, True)

    def __exit__(self, *exc):
        setattr(_state, self.name, self.prev)
        return False


def run_backward(root, grad: np.ndarray, retain_graph: bool):
    """Backpropagate `grad` from `root`. Leaves accumulate into `.grad` (as PyTorch);
    the graph's saved buffers are freed afterwards unless retain_graph=True."""
    order = toposort(root)
    keep_all = _get("retain_all_grads", False)
    anomaly = is_anomaly_enabled()
    grads = {id(root): grad}
    for node in reversed(order):
        g = grads.pop(id(node), None)
        if g is None:
            continue
        if node._prev:
            if node._backward is None:
                raise RuntimeError(
                    f"backward: the graph through op '{node._op}' was already freed by an earlier "
                    "backward(); call backward(retain_graph=True) the first time to go through it twice")
            if keep_all or node._retains_grad:
                node.grad = g if node.grad is None else node.grad + g
            parent_grads = node._backward(g)
            for parent, pg in zip(node._prev, parent_grads):
                if pg is None or not parent.requires_grad:
                    continue
                if anomaly:
                    check_finite(node, f"gradient for input of '{node._op}'", pg)
                key = id(parent)
                grads[key] = pg if key not in grads else grads[key] + pg
            if not retain_graph:
                node._backward = None
        else:
            g = g.astype(node.data.dtype, copy=False)
            node.grad = g.copy() if node.grad is None else node.grad + g
