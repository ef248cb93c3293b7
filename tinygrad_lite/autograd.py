"""The autograd machinery shared by every Tensor op: grad mode, module scopes,
anomaly mode, and the backward pass over the recorded graph.

A Tensor made by an op remembers `_op` (its name), `_prev` (its inputs, in order)
and `_backward` (a function from the output's gradient to one gradient per input).
`backward()` walks that graph in reverse topological order, found iteratively so
that graphs of any depth work (a recursive sort dies past ~1,000 nodes).
"""
from __future__ import annotations

import contextlib
import functools
import os
import sys
import threading

import numpy as np

_ENV_ANOMALY = os.environ.get("TINYGRAD_LITE_DETECT_ANOMALY", "") not in ("", "0", "false")


class _ThreadState(threading.local):
    """Per-thread flags. The class attributes are the defaults every new thread starts from;
    plain attribute reads keep the per-op cost of checking them low."""
    grad_enabled = True
    scope = ()
    anomaly = _ENV_ANOMALY
    retain_all_grads = False
    capture = None  # the step compiler's recorder while it captures a step (tinygrad_lite.compiler)


_state = _ThreadState()


def _get(name, default):
    return getattr(_state, name, default)


# ---------------------------------------------------------------- grad mode
def is_grad_enabled() -> bool:
    return _state.grad_enabled


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
    return _state.scope


class _ModuleScope:
    __slots__ = ("module", "prev")

    def __init__(self, module):
        self.module = module

    def __enter__(self):
        self.prev = prev = _state.scope
        _state.scope = prev + (self.module,)

    def __exit__(self, *exc):
        _state.scope = self.prev
        return False


def module_scope(module):
    """Context manager: `module` joins the scope stack while its forward runs (Module.__call__
    enters it)."""
    return _ModuleScope(module)


# ---------------------------------------------------------------- capture (the step compiler)
@contextlib.contextmanager
def capturing(capture):
    """Inside the block, ops (Tensor._apply), backward() and @recorded calls hand themselves to
    `capture`, the step compiler's recorder (tinygrad_lite.compiler), on this thread."""
    _state.capture = capture
    try:
        yield capture
    finally:
        _state.capture = None


def is_capturing() -> bool:
    return _state.capture is not None


def retains_all_grads() -> bool:
    return _get("retain_all_grads", False)


# ---------------------------------------------------------------- recorded calls
def recorded(method):
    """Decorator for a call whose effects lie outside the graph (an optimizer's step, zero_grad,
    gradient clipping): the step compiler records it whole and makes it again at each replay, with
    the arguments and state of that moment (the learning rate, the step count)."""
    @functools.wraps(method)
    def call(*args, **kwargs):
        capture = _state.capture
        if capture is None:
            return method(*args, **kwargs)
        return capture.call(method, args, kwargs)
    return call


# ---------------------------------------------------------------- anomaly mode
def is_anomaly_enabled() -> bool:
    return _state.anomaly


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


@functools.cache
def _is_engine_file(filename: str) -> bool:
    return os.path.abspath(filename).startswith(_PKG_DIR + os.sep)


def creation_site() -> str:
    """file:line of the first stack frame outside tinygrad_lite's engine files: the line of
    user or model code that asked for the op."""
    frame = sys._getframe(1)
    while frame is not None and _is_engine_file(frame.f_code.co_filename):
        frame = frame.f_back
    if frame is None:
        return "<unknown>"
    return f"{frame.f_code.co_filename}:{frame.f_lineno}"


def scope_path(scope) -> str:
    """Dotted module path of a recorded scope's innermost module, e.g. 'encoder.layers.0.feed_forward':
    where the outermost module (the root, '') registers it, even when another module ran it
    (Add & Norm calls the feed-forward it wraps). A module the root does not hold is named by
    the chain of attribute names it was called through."""
    if not scope:
        return ""
    root, inner = scope[0], scope[-1]
    if hasattr(root, "named_modules"):
        for path, module in root.named_modules():
            if module is inner:
                return path
    return ".".join(getattr(m, "_name", None) or type(m).__name__ for m in scope[1:])


def _describe_scope(scope) -> str:
    if not scope:
        return "outside any module"
    return f"module '{scope_path(scope) or '<root>'}' ({type(scope[-1]).__name__})"


def check_finite(tensor, what: str, array):
    """Raise AnomalyError if `array` (the forward `what="output"` of `tensor`'s op, or a
    gradient its backward produced, e.g. `what="gradient for input 0"`) holds NaN or Inf."""
    if array is None or not np.issubdtype(array.dtype, np.floating) or np.isfinite(array).all():
        return
    bad = "NaN" if np.isnan(array).any() else "Inf"
    op = tensor._op or "leaf"
    where = getattr(tensor, "_site", None) or \
        "<unknown> (run the forward pass inside detect_anomaly() too to record it)"
    event = f"the output of op '{op}'" if what == "output" else f"the backward of op '{op}' gave a {what} that"
    raise AnomalyError(
        f"anomaly: {event} contains {bad} (shape {tuple(array.shape)}, "
        f"{_describe_scope(getattr(tensor, '_scope', ()) or ())}, created at {where})"
    )


# ---------------------------------------------------------------- backward
def toposort(root) -> list:
    """Nodes that lead to `root` and need grad, inputs before outputs; iterative DFS. A leaf
    (no inputs) goes into the order as soon as it is found: before the node that found it, and
    so before every node that uses it."""
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
                if parent._prev:
                    stack.append((parent, False))
                else:
                    visited.add(id(parent))
                    order.append(parent)
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
    if _state.capture is not None:
        return _state.capture.backward(root, grad)
    order = toposort(root)
    keep_all = _get("retain_all_grads", False)
    anomaly = is_anomaly_enabled()
    grads = {id(root): grad}
    summed = set()  # nodes whose gradient is a sum made here: an array no one else holds, so added to in place
    for node in reversed(order):
        g = grads.pop(id(node), None)
        if g is None:
            continue
        own = id(node) in summed
        summed.discard(id(node))
        if node._prev:
            if node._backward is None:
                raise RuntimeError(
                    f"backward: the graph through op '{node._op}' was already freed by an earlier "
                    "backward(); call backward(retain_graph=True) the first time to go through it twice")
            if keep_all or node._retains_grad:
                node.grad = g if node.grad is None else node.grad + g
            parent_grads = node._backward(g)
            for i, (parent, pg) in enumerate(zip(node._prev, parent_grads)):
                if pg is None or not parent.requires_grad:
                    continue
                if anomaly:
                    check_finite(node, f"gradient for input {i}", pg)
                key = id(parent)
                acc = grads.get(key)
                if acc is None:
                    grads[key] = pg
                elif key in summed and pg.shape == acc.shape and pg.dtype == acc.dtype:
                    np.add(acc, pg, out=acc)
                else:
                    grads[key] = acc = acc + pg
                    if isinstance(acc, np.ndarray):  # 0-d sums come back as NumPy scalars
                        summed.add(key)
            if not retain_graph:
                node._backward = None
        else:
            into_leaf(node, g, own)


def into_leaf(leaf, g: np.ndarray, own: bool) -> None:
    """Add gradient `g` into a leaf's `.grad`. The leaf's gradient is its own array, which an
    optimizer may change in place: a sum made by the backward pass (`own`) already is, anything
    else is copied."""
    if leaf.grad is None:
        fits = own and g.dtype == leaf.data.dtype and g.flags.c_contiguous
        leaf.grad = g if fits else g.astype(leaf.data.dtype, order="C")
    else:
        leaf.grad = leaf.grad + g.astype(leaf.data.dtype, copy=False)

