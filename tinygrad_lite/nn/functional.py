"""Stateless layer and loss functions (PyTorch's `torch.nn.functional` names and semantics).

The losses and `linear`/`embedding` are single fused ops run by `Tensor._apply`: each `<name>_op` computes
the forward in NumPy from its arrays and returns the backward written down directly, so a training step
records one node per loss instead of a chain of small ones (and the graph view shows them as one box).
Checks on values (ids in range, a row per real token) run in the op, where the values are.
"""
from __future__ import annotations

import numpy as np

from ..checks import one_of, probability
from ..dispatch import has_twin
from ..tensor import FLOAT_DTYPES, Tensor
from ..threads import ensure_num_threads

# isort: split
from ..ops.nn import log_softmax_forward  # after tensor, which imports ops.nn as it loads

REDUCTIONS = ("mean", "sum", "none")


def _tensor(op: str, name: str, x) -> Tensor:
    if isinstance(x, Tensor):
        return x
    if isinstance(x, (list, tuple, int, float)) or isinstance(getattr(x, "dtype", None), np.dtype):
        return Tensor(x)  # an ndarray, a NumPy scalar, or a step's input array while the step compiler captures it
    raise TypeError(f"{op}: {name} must be a Tensor or an ndarray, got {type(x).__name__}")


def _array(x):
    """x's values as an array: a Tensor's, an array as it is (a step's input while the step compiler captures
    it: shape and dtype only), anything else through np.asarray."""
    if isinstance(x, Tensor):
        return x.data
    return x if isinstance(getattr(x, "dtype", None), np.dtype) else np.asarray(x)


def _int_array(op: str, name: str, x) -> np.ndarray:
    arr = _array(x)
    if arr.dtype.kind not in "iu":
        raise TypeError(f"{op}: {name} must hold integer ids/classes, got dtype {arr.dtype}")
    return arr


def _check_float(op: str, name: str, t: Tensor):
    if t.dtype not in FLOAT_DTYPES:
        raise TypeError(f"{op}: {name} must be float32 or float64, got {t.dtype}")


# ---------------------------------------------------------------- layers
def linear(x, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """y = x @ weight.T + bias, weight of shape (out_features, in_features) as in PyTorch.
    Any leading dims of x are batch dims. One op, `linear` (its Numba twin runs each way as one call); its
    three products are the op linear_product (_product)."""
    x, needs = _linear_inputs(x, weight, bias)
    if bias is None:
        return x._apply(linear_op, "linear", (x, weight), None, needs)
    return x._apply(linear_op, "linear", (x, weight, bias), needs)


@has_twin("linear")
def linear_op(x, w, b, needs):
    n_out, n_in = w.shape
    x2 = x.reshape(-1, n_in)
    out = _product(x2, w.T)
    if b is not None:
        out += b
    return out.reshape(x.shape[:-1] + (n_out,)), lambda g: _linear_grads(g.reshape(-1, n_out), x, x2, w, b, needs)


def _linear_grads(g2, x, x2, w, b, needs) -> tuple:
    """The gradients of x, w (and b) that `needs` asks for, from g2, the (rows, out_features) gradient
    of x2 @ wᵀ + b (x2: x as rows, the array the forward multiplied)."""
    dx = _product(g2, w).reshape(x.shape) if needs[0] else None
    dw = _product(g2.T, x2) if needs[1] else None
    if b is None:
        return dx, dw
    return dx, dw, (g2.sum(axis=0) if needs[2] else None)


@has_twin("linear_product")
def _product(a, b):
    """a @ b, the op linear_product: one of a Linear's three products, the forward x·Wᵀ and the gradients
    g·W and gᵀ·x. Its twin multiplies on a panel micro-kernel where that beats NumPy's BLAS."""
    ensure_num_threads()  # the default thread count, once (tinygrad_lite.threads)
    return a @ b


def _linear_inputs(x, weight: Tensor, bias: Tensor | None):
    """(x as a Tensor, which of x, weight and bias need a gradient), once they are checked to fit."""
    x = x if isinstance(x, Tensor) else _tensor("linear", "input", x)
    xd, w = x.data, weight.data
    b = None if bias is None else bias.data
    x_shape, dtype = xd.shape, xd.dtype
    if w.ndim != 2 or not x_shape or x_shape[-1] != w.shape[1] or (b is not None and b.shape != w.shape[:1]):
        _linear_shape_error(x_shape, w.shape, None if b is None else b.shape)
    if dtype != w.dtype or (b is not None and b.dtype != dtype) or dtype not in FLOAT_DTYPES:
        _linear_dtype_error(xd, w, b)
    if bias is None:
        return x, (x.requires_grad, weight.requires_grad)
    return x, (x.requires_grad, weight.requires_grad, bias.requires_grad)


def _linear_shape_error(x_shape, w_shape, b_shape):
    if len(w_shape) != 2:
        raise ValueError(f"linear: weight must be 2-D (out_features, in_features), got shape {w_shape}")
    if not x_shape or x_shape[-1] != w_shape[1]:
        raise ValueError(f"linear: input's last dim must be in_features={w_shape[1]}, got input shape {x_shape}")
    raise ValueError(f"linear: bias must have shape ({w_shape[0]},), got {b_shape}")


def _linear_dtype_error(xd, w, b):
    dtypes = {xd.dtype, w.dtype} | ({b.dtype} if b is not None else set())
    if len(dtypes) > 1:
        raise TypeError(f"linear: input, weight and bias must share a dtype, got {sorted(map(str, dtypes))}; "
                        "convert the input with .float() or .double() (or the module with .to())")
    raise TypeError(f"linear: input must be float32 or float64, got {xd.dtype}")


def _out_of_range(values: np.ndarray, n: int):
    """The smallest value if it is below 0, else the largest if it is ≥ n, else None."""
    if values.size:
        lo, hi = int(values.min()), int(values.max())
        if lo < 0:
            return lo
        if hi >= n:
            return hi
    return None


def embedding(ids, weight: Tensor, padding_idx: int | None = None) -> Tensor:
    """Rows of `weight` picked by integer `ids` (any shape); output shape ids.shape + (dim,).
    The padding row's gradient is always zero, so it stays as it was initialised (zeros)."""
    return weight._apply(embedding_op, "embedding", (weight,), _int_array("embedding", "ids", ids), padding_idx)


def embedding_op(w, ids, padding_idx):
    num, dim = w.shape
    bad = _out_of_range(ids, num)
    if bad is not None:
        raise IndexError(f"embedding: id {bad} is out of range for an embedding of {num} rows "
                         f"(vocab size {num}; valid ids are 0..{num - 1})")

    def backward(g):
        dw = embedding_backward(ids.reshape(-1), g.reshape(-1, dim), num).astype(w.dtype, copy=False)
        if padding_idx is not None:
            dw[padding_idx] = 0
        return (dw,)
    return w[ids], backward


@has_twin("embedding_backward")
def embedding_backward(ids, g, num_rows):
    """dw (num_rows, dim): the rows of g (n, dim) summed per id of ids (n,). Output row i is
    weight[ids[i]], so g[i] flows back into row ids[i]; a row that no id picks gets 0."""
    dw = np.zeros((num_rows, g.shape[1]), g.dtype)
    np.add.at(dw, ids, g)
    return dw


def relu(x: Tensor) -> Tensor:
    return x.relu()


def gelu(x: Tensor, approximate: str = "none") -> Tensor:
    return x.gelu(approximate)


def tanh(x: Tensor) -> Tensor:
    return x.tanh()


def sigmoid(x: Tensor) -> Tensor:
    return x.sigmoid()


def softmax(x: Tensor, dim: int = -1) -> Tensor:
    return x.softmax(dim)


def log_softmax(x: Tensor, dim: int = -1) -> Tensor:
    return x.log_softmax(dim)


def dropout(x: Tensor, p: float = 0.5, training: bool = True) -> Tensor:
    return x.dropout(p, training)


def layer_norm(x: Tensor, normalized_shape, weight: Tensor | None = None, bias: Tensor | None = None,
               eps: float = 1e-5) -> Tensor:
    return x.layer_norm(normalized_shape, weight, bias, eps)


# ---------------------------------------------------------------- losses
def _reduce(per_element: np.ndarray, reduction: str, count: int):
    """The reduced loss array and the factor by which the output grad scales each element. A mean
    over count = 0 elements is 0 with a zero gradient, not NaN."""
    if reduction == "none":
        return per_element, None
    if reduction == "sum":
        return np.asarray(per_element.sum(), dtype=per_element.dtype), 1.0
    if not count:
        return np.asarray(0.0, dtype=per_element.dtype), 0.0
    return np.asarray(per_element.sum() / count, dtype=per_element.dtype), 1.0 / count


def mse_loss(input: Tensor, target, reduction: str = "mean") -> Tensor:
    """Mean squared error (input - target)²; shapes must match (no silent broadcasting)."""
    one_of("mse_loss", "reduction", reduction, REDUCTIONS)
    input = _tensor("mse_loss", "input", input)
    target = _tensor("mse_loss", "target", target)
    if input.shape != target.shape:
        raise ValueError(f"mse_loss: input shape {input.shape} and target shape {target.shape} must match")
    if target.dtype != input.dtype:
        if target.requires_grad:
            raise TypeError(f"mse_loss: input is {input.dtype} but target is {target.dtype}")
        target = Tensor(target.data.astype(input.dtype))
    diff = input - target
    sq = diff * diff
    if reduction == "none":
        return sq
    return sq.sum() if reduction == "sum" else sq.mean()


def binary_cross_entropy_with_logits(logits: Tensor, target, reduction: str = "mean") -> Tensor:
    """−[y·log σ(x) + (1−y)·log(1−σ(x))], computed stably as max(x,0) − x·y + log1p(exp(−|x|)).
    Gradient wrt x: σ(x) − y (one fused op)."""
    op = "binary_cross_entropy_with_logits"
    one_of(op, "reduction", reduction, REDUCTIONS)
    logits = _tensor(op, "logits", logits)
    _check_float(op, "logits", logits)
    target = _tensor(op, "target", target)
    if logits.shape != target.shape:
        raise ValueError(f"{op}: logits shape {logits.shape} and target shape {target.shape} must match")
    return logits._apply(binary_cross_entropy_with_logits_op, op, (logits, target), reduction,
                         (logits.requires_grad, target.requires_grad))


def binary_cross_entropy_with_logits_op(x, target, reduction, needs):
    y = target.astype(x.dtype, copy=False)
    per = np.maximum(x, 0) - x * y + np.log1p(np.exp(-np.abs(x)))
    out, scale = _reduce(per, reduction, max(per.size, 1))

    def backward(g):
        g = g if scale is None else g * scale
        sig = np.exp(-np.logaddexp(0, -x)).astype(x.dtype)
        return ((sig - y) * g if needs[0] else None,
                (-x * g).astype(target.dtype) if needs[1] else None)
    return out, backward


def cross_entropy(logits: Tensor, target, ignore_index: int = -100, label_smoothing: float = 0.0,
                  reduction: str = "mean") -> Tensor:
    """Softmax cross-entropy as `torch.nn.functional.cross_entropy` with class-index targets.

    logits: (N, C) or (N, C, d1, ...) (class dim 1, as PyTorch; flatten (B, T, C) to (B·T, C)).
    target: integer classes, shape (N,) or (N, d1, ...). Entries equal to `ignore_index` add
    nothing and are left out of the mean's denominator.
    Label smoothing as PyTorch: loss = (1−ε)·nll + ε·mean_c(−log p_c), i.e. the target
    distribution puts ε/C on every class and 1−ε more on the true one.

    One fused op: a stable log-softmax forward and the backward written out directly,
        dL/dlogits = (softmax − smoothed one-hot) / (number of non-ignored targets)
    — the article's "softmax minus one-hot" gradient (cross_entropy_backward below). Only the
    log-probabilities are kept for the backward.

    If every target is ignored, reduction='mean' returns 0.0 with a zero gradient (PyTorch returns
    NaN here); a batch made only of padding should not poison training with NaN.
    """
    op = "cross_entropy"
    one_of(op, "reduction", reduction, REDUCTIONS)
    logits = _tensor(op, "logits", logits)
    _check_float(op, "logits", logits)
    eps = probability(op, "label_smoothing", label_smoothing)
    t = _int_array(op, "target", target)
    return logits._apply(cross_entropy_op, op, (logits,), t, _num_classes(op, logits, t), ignore_index, eps,
                         reduction)


def cross_entropy_op(logits, t, num_classes, ignore_index, eps, reduction):
    x2, targets, valid = _rows_and_targets(logits, t, num_classes, ignore_index)
    logp = log_softmax_forward(x2)                                     # no exp array kept
    per = -logp[np.arange(x2.shape[0]), targets]
    if eps:
        per = (1.0 - eps) * per - eps * logp.mean(axis=1)
    per = np.where(valid, per, 0).astype(x2.dtype)
    out, scale = _reduce(per.reshape(t.shape), reduction, int(valid.sum()))

    def backward(g):
        per_target = g.reshape(-1) if scale is None else g * scale
        weight = (valid * per_target).astype(x2.dtype)
        return (_rows_to_logits(cross_entropy_backward(logp, targets, weight, eps), logits.shape),)
    return out, backward


@has_twin("cross_entropy_backward")
def cross_entropy_backward(logp, targets, weight, eps):
    """dL/dx = w·(softmax(x) − q) for rows of log-probabilities logp (rows, C): softmax = exp(logp), q the
    smoothed target (ε/C on every class, 1 − ε more on the target), w each row's weight (0 if ignored,
    1/count for a mean). It is log_softmax's backward of dy = −w·q (dy − softmax·Σdy, Σdy = −w), written
    out: one array, not three. A row of all −inf gets 0, as log_softmax's backward gives it."""
    p = np.exp(logp)
    dtype = logp.dtype.type
    dx = weight[:, None] * (p - dtype(eps / logp.shape[1]))
    dx[np.arange(logp.shape[0]), targets] -= weight * dtype(1.0 - eps)
    dx[p.sum(axis=1) == 0] = 0
    return dx


def _rows_and_targets(logits: np.ndarray, t: np.ndarray, num_classes: int, ignore_index: int):
    """The logits as rows of C class scores (N·d1·..., C), each row's target class (0 where it is
    ignored) and which rows count; raises if a counted target is out of range."""
    x = logits if logits.ndim <= 2 else np.moveaxis(logits, 1, -1)
    flat_t = t.reshape(-1)
    valid = flat_t != ignore_index
    _check_classes("cross_entropy", flat_t[valid], num_classes, ignore_index)
    return x.reshape(-1, num_classes), np.where(valid, flat_t, 0), valid


def _rows_to_logits(rows: np.ndarray, shape: tuple) -> np.ndarray:
    """The inverse of the row layout of _rows_and_targets: (N·d1·..., C) back to `shape`."""
    if len(shape) <= 2:
        return rows.reshape(shape)
    class_last = (shape[0],) + shape[2:] + (shape[1],)
    return np.moveaxis(rows.reshape(class_last), -1, 1)


def _num_classes(op: str, logits: Tensor, t: np.ndarray) -> int:
    """C, once the target's shape is known to fit the logits: (N, C) or (N, C, d1, ...) with
    target (N,) or (N, d1, ...), or (C,) with a scalar target."""
    if logits.ndim == 1:
        if t.ndim != 0:
            raise ValueError(f"{op}: logits of shape {logits.shape} need a scalar target, "
                             f"got shape {t.shape}")
        num_classes = logits.shape[0]
    else:
        num_classes = logits.shape[1]
        expected = (logits.shape[0],) + logits.shape[2:]
        if t.shape != expected:
            raise ValueError(f"{op}: target shape {t.shape} does not fit logits shape "
                             f"{logits.shape}; expected {expected} (logits are (N, C) or "
                             "(N, C, d1, ...), class dim 1 as in PyTorch; for (B, T, C) logits pass "
                             "logits.reshape(-1, C), target.reshape(-1))")
    if num_classes == 0:
        raise ValueError(f"{op}: logits have zero classes (shape {logits.shape})")
    return num_classes


def _check_classes(op: str, classes: np.ndarray, num_classes: int, ignore_index: int):
    """Raise an IndexError naming the first out-of-range class among the non-ignored targets."""
    bad = _out_of_range(classes, num_classes)
    if bad is not None:
        raise IndexError(f"{op}: target {bad} is out of range for {num_classes} classes "
                         f"(expected 0..{num_classes - 1}, or ignore_index={ignore_index})")
