"""Wrong solutions, as learners write them: for each exercise of tinylearn, mutants that each make one
known mistake, with the name `check` must give it (tests/test_learn_exercises.py). Written apart from the
detectors in tinylearn/exercises/, so a test shows a detector recognises the mistake, not its own code."""
import math

import numpy as np

from tinygrad_lite.scalar import Value


# ---------------------------------------------------------------- 1 mul
def mul_swapped(a, b):
    b = b if isinstance(b, Value) else Value(b)
    return Value(a.data * b.data, (a, b), "*", (a.data, b.data))


def mul_add_slopes(a, b):
    b = b if isinstance(b, Value) else Value(b)
    return Value(a.data * b.data, (a, b), "*", (1.0, 1.0))


def mul_no_inputs(a, b):
    b = b if isinstance(b, Value) else Value(b)
    return Value(a.data * b.data)


def mul_number_unwrapped(a, b):
    return Value(a.data * b.data, (a, b), "*", (b.data, a.data))


# ---------------------------------------------------------------- 2 tanh
def tanh_input_slope(x):
    return Value(math.tanh(x.data), (x,), "tanh", (1 - x.data ** 2,))


def tanh_unsquared(x):
    t = math.tanh(x.data)
    return Value(t, (x,), "tanh", (1 - t,))


def tanh_sign(x):
    t = math.tanh(x.data)
    return Value(t, (x,), "tanh", (t * t - 1,))


def tanh_overflows(x):
    e = math.exp(2 * x.data)
    t = (e - 1) / (e + 1)
    return Value(t, (x,), "tanh", (1 - t * t,))


def tanh_no_input(x):
    t = math.tanh(x.data)
    return Value(t)


# ---------------------------------------------------------------- 3 topological order
def order_preorder(root):
    order, seen, stack = [], set(), [root]
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        order.append(node)
        stack.extend(node.inputs)
    return order


def order_no_visited(root):
    order = []

    def visit(node):
        for child in node.inputs:
            visit(child)
        order.append(node)
    visit(root)
    return order


def order_one_level(root):
    return list(root.inputs) + [root]


def order_recursive(root):
    order, seen = [], set()

    def visit(node):
        if id(node) in seen:
            return
        seen.add(id(node))
        for child in node.inputs:
            visit(child)
        order.append(node)
    visit(root)
    return order


# ---------------------------------------------------------------- 4 unbroadcast
def unbroadcast_unchanged(grad, shape):
    return grad


def unbroadcast_leading_only(grad, shape):
    return grad.sum(axis=tuple(range(grad.ndim - len(shape))))


def unbroadcast_no_keepdims(grad, shape):
    grad = grad.sum(axis=tuple(range(grad.ndim - len(shape))))
    stretched = tuple(i for i, n in enumerate(shape) if n == 1 and grad.shape[i] != 1)
    return grad.sum(axis=stretched) if stretched else grad


def unbroadcast_mean(grad, shape):
    grad = grad.mean(axis=tuple(range(grad.ndim - len(shape))))
    stretched = tuple(i for i, n in enumerate(shape) if n == 1 and grad.shape[i] != 1)
    return grad.mean(axis=stretched, keepdims=True) if stretched else grad


def _sum_to(grad, shape):
    grad = grad.sum(axis=tuple(range(grad.ndim - len(shape))))
    stretched = tuple(i for i, n in enumerate(shape) if n == 1 and grad.shape[i] != 1)
    return grad.sum(axis=stretched, keepdims=True) if stretched else grad


# ---------------------------------------------------------------- 5 matmul backward
def matmul_no_transpose(a, b, g):
    return _sum_to(g @ b, a.shape), _sum_to(a @ g, b.shape)


def matmul_batch_not_summed(a, b, g):
    return g @ np.swapaxes(b, -1, -2), np.swapaxes(a, -1, -2) @ g


def matmul_swapped_results(a, b, g):
    return _sum_to(np.swapaxes(a, -1, -2) @ g, b.shape), _sum_to(g @ np.swapaxes(b, -1, -2), a.shape)


def matmul_transposed_gradient(a, b, g):
    da = _sum_to(g @ np.swapaxes(b, -1, -2), a.shape)
    return np.swapaxes(da, -1, -2), _sum_to(np.swapaxes(a, -1, -2) @ g, b.shape)


# ---------------------------------------------------------------- 6 softmax
def _z(x, scale, mask):
    z = x * scale
    if mask is not None:
        z = z + (np.where(mask, 0.0, -np.inf) if mask.dtype == bool else mask)
    return z


def softmax_no_shift(x, scale=1.0, mask=None):
    e = np.exp(_z(x, scale, mask))
    return e / e.sum(axis=-1, keepdims=True)


def softmax_nan_row(x, scale=1.0, mask=None):
    z = _z(x, scale, mask)
    e = np.exp(z - z.max(axis=-1, keepdims=True)) if z.size else z
    return e / e.sum(axis=-1, keepdims=True)


def _safe(z, axis):
    if not z.size:
        return z
    top = z.max(axis=axis, keepdims=True)
    e = np.exp(z - np.where(np.isneginf(top), 0.0, top))
    total = e.sum(axis=axis, keepdims=True)
    return np.divide(e, total, out=np.zeros_like(e), where=total > 0)


def softmax_axis0(x, scale=1.0, mask=None):
    return _safe(_z(x, scale, mask), 0)


def softmax_ignores_mask(x, scale=1.0, mask=None):
    return _safe(_z(x, scale, None), -1)


def softmax_inverted_mask(x, scale=1.0, mask=None):
    if mask is not None and mask.dtype == bool:
        mask = ~mask
    return _safe(_z(x, scale, mask), -1)


def softmax_ignores_scale(x, scale=1.0, mask=None):
    return _safe(_z(x, 1.0, mask), -1)


# ---------------------------------------------------------------- 7 softmax backward
def softmax_backward_no_sum(y, dy, scale=1.0):
    return scale * y * dy


def softmax_backward_axis0(y, dy, scale=1.0):
    return scale * y * (dy - (dy * y).sum(axis=0, keepdims=True))


def softmax_backward_no_scale(y, dy, scale=1.0):
    return y * (dy - (dy * y).sum(axis=-1, keepdims=True))


def softmax_backward_sign(y, dy, scale=1.0):
    return scale * y * ((dy * y).sum(axis=-1, keepdims=True) - dy)


MUTANTS = {
    "mul": [(mul_swapped, "the slopes swapped"), (mul_add_slopes, "addition's slopes"),
            (mul_no_inputs, "the inputs not recorded"), (mul_number_unwrapped, "a number not made a Value")],
    "tanh": [(tanh_input_slope, "the slope from the input, 1 − x²"),
             (tanh_unsquared, "the slope without its square, 1 − t"),
             (tanh_sign, "the slope's sign flipped"), (tanh_overflows, "tanh overflows at large x"),
             (tanh_no_input, "the input not recorded")],
    "topological_order": [(order_preorder, "nodes before their inputs (pre-order)"),
                          (order_no_visited, "no set of visited nodes"), (order_one_level, "only part of the graph"),
                          (order_recursive, "recursion too deep")],
    "unbroadcast": [(unbroadcast_unchanged, "the gradient keeps the output's shape"),
                    (unbroadcast_leading_only, "the stretched axes left out"),
                    (unbroadcast_no_keepdims, "the kept axes dropped"),
                    (unbroadcast_mean, "an average instead of a sum")],
    "matmul_backward": [(matmul_no_transpose, "the transpose forgotten"),
                        (matmul_batch_not_summed, "the batch not summed"),
                        (matmul_swapped_results, "da and db swapped"),
                        (matmul_transposed_gradient, "a gradient transposed")],
    "softmax": [(softmax_no_shift, "no max shift"), (softmax_nan_row, "a fully masked row gives NaN"),
                (softmax_axis0, "the wrong axis"), (softmax_ignores_mask, "the mask ignored"),
                (softmax_inverted_mask, "the mask inverted"), (softmax_ignores_scale, "the scale ignored")],
    "softmax_backward": [(softmax_backward_no_sum, "the sum term missing"),
                         (softmax_backward_axis0, "the sum over the wrong axis"),
                         (softmax_backward_no_scale, "the scale forgotten"),
                         (softmax_backward_sign, "the sign flipped")],
}
