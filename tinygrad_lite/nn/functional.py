"""Stateless layer and loss functions (PyTorch's `torch.nn.functional` names and semantics).

The losses and `linear`/`embedding` are single fused ops built with `Tensor._make`: the forward is
computed in NumPy and the backward is written down directly, so a training step records one node
per loss instead of a chain of small ones (and the graph view shows them as one box).
"""
from __future__ import annotations

import numpy as np

from ..tensor import FLOAT_DTYPES, Tensor

REDUCTIONS = ("mean", "sum", "none")


def _tensor(op: str, name: str, x) -> Tensor:
    if isinstance(x, Tensor):
        return x
    if isinstance(x, (np.ndarray, np.generic, list, tuple, int, float)):
        return Tensor(x)
    raise TypeError(f"{op}: {name} must be a Tensor or an ndarray, got {type(x).__name__}")


def _int_array(op: str, name: str, x) -> np.ndarray:
    arr = x.data if isinstance(x, Tensor) else np.asarray(x)
    if arr.dtype.kind not in "iu":
        raise TypeError(f"{op}: {name} must hold integer ids/classes, got dtype {arr.dtype}")
    return arr


def _check_reduction(op: str, reduction: str):
    if reduction not in REDUCTIONS:
        raise ValueError(f"{op}: reduction must be 'mean', 'sum' or 'none', got {reduction!r}")


def _check_float(op: str, name: str, t: Tensor):
    if t.dtype not in FLOAT_DTYPES:
        raise TypeError(f"{op}: {name} must be float32 or float64, got {t.dtype}")


# ---------------------------------------------------------------- layers
def linear(x, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """y = x @ weight.T + bias, weight of shape (out_features, in_features) as in PyTorch.
    Any leading dims of x are batch dims. One fused op; the products run on NumPy's BLAS."""
    x = _tensor("linear", "input", x)
    if weight.ndim != 2:
        raise ValueError(f"linear: weight must be 2-D (out_features, in_features), got shape {weight.shape}")
    n_out, n_in = weight.shape
    if x.ndim == 0 or x.shape[-1] != n_in:
        raise ValueError(f"linear: input's last dim must be in_features={n_in}, got input shape {x.shape}")
    if bias is not None and bias.shape != (n_out,):
        raise ValueError(f"linear: bias must have shape ({n_out},), got {bias.shape}")
    dtypes = {x.dtype, weight.dtype} | ({bias.dtype} if bias is not None else set())
    if len(dtypes) != 1:
        raise TypeError(f"linear: input, weight and bias must share a dtype, got {sorted(map(str, dtypes))}; "
                        "convert the input with .float() or .double() (or the module with .to())")
    _check_float("linear", "input", x)
    x2 = x.data.reshape(-1, n_in)
    w = weight.data
    out = x2 @ w.T
    if bias is not None:
        out += bias.data
    out_shape = x.shape[:-1] + (n_out,)

    def backward(g):
        g2 = g.reshape(-1, n_out)
        dx = (g2 @ w).reshape(x.shape) if x.requires_grad else None
        dw = g2.T @ x2 if weight.requires_grad else None
        if bias is None:
            return dx, dw
        return dx, dw, (g2.sum(axis=0) if bias.requires_grad else None)
    parents = (x, weight) if bias is None else (x, weight, bias)
    return x._make(out.reshape(out_shape), "linear", parents, backward)


def embedding(ids, weight: Tensor, padding_idx: int | None = None) -> Tensor:
    """Rows of `weight` picked by integer `ids` (any shape); output shape ids.shape + (dim,).
    The padding row's gradient is always zero, so it stays as it was initialised (zeros)."""
    idx = _int_array("embedding", "ids", ids)
    num, dim = weight.shape
    if idx.size:
        lo, hi = int(idx.min()), int(idx.max())
        if lo < 0 or hi >= num:
            bad = lo if lo < 0 else hi
            raise IndexError(f"embedding: id {bad} is out of range for an embedding of {num} rows "
                             f"(vocab size {num}; valid ids are 0..{num - 1})")
    out = weight.data[idx]

    def backward(g):
        dw = np.zeros_like(weight.data)
        np.add.at(dw, idx.reshape(-1), g.reshape(-1, dim))
        if padding_idx is not None:
            dw[padding_idx] = 0
        return (dw,)
    return weight._make(out, "embedding", (weight,), backward)


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
def _reduce(op: str, per_element: np.ndarray, reduction: str, count: float):
    """The reduced loss array and the factor by which the output grad scales each element."""
    if reduction == "none":
        return per_element, None
    if reduction == "sum":
        return np.asarray(per_element.sum(), dtype=per_element.dtype), 1.0
    return np.asarray(per_element.sum() / count, dtype=per_element.dtype), 1.0 / count


def mse_loss(input: Tensor, target, reduction: str = "mean") -> Tensor:
    """Mean squared error (input - target)²; shapes must match (no silent broadcasting)."""
    _check_reduction("mse_loss", reduction)
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
    _check_reduction(op, reduction)
    logits = _tensor(op, "logits", logits)
    _check_float(op, "logits", logits)
    target = _tensor(op, "target", target)
    if logits.shape != target.shape:
        raise ValueError(f"{op}: logits shape {logits.shape} and target shape {target.shape} must match")
    x = logits.data
    y = target.data.astype(x.dtype, copy=False)
    per = np.maximum(x, 0) - x * y + np.log1p(np.exp(-np.abs(x)))
    out, scale = _reduce(op, per, reduction, max(per.size, 1))

    def backward(g):
        g = g if scale is None else g * scale
        sig = np.exp(-np.logaddexp(0, -x)).astype(x.dtype)
        return ((sig - y) * g if logits.requires_grad else None,
                (-x * g).astype(target.dtype) if target.requires_grad else None)
    return logits._make(out, op, (logits, target), backward)


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
    — the article's "softmax minus one-hot" gradient.

    If every target is ignored, reduction='mean' returns 0.0 with a zero gradient (PyTorch returns
    NaN here); a batch made only of padding should not poison training with NaN.
    """
    op = "cross_entropy"
    _check_reduction(op, reduction)
    logits = _tensor(op, "logits", logits)
    _check_float(op, "logits", logits)
    if not 0.0 <= label_smoothing <= 1.0:
        raise ValueError(f"{op}: label_smoothing must be in [0, 1], got {label_smoothing}")
    t = _int_array(op, "target", target)
    if logits.ndim == 1:
        if t.ndim != 0:
            raise ValueError(f"{op}: logits of shape {logits.shape} need a scalar target, got shape {t.shape}")
        x_shape_ok = True
        num_classes = logits.shape[0]
    else:
        num_classes = logits.shape[1]
        x_shape_ok = t.shape == (logits.shape[0],) + logits.shape[2:]
    if not x_shape_ok:
        raise ValueError(f"{op}: target shape {t.shape} does not fit logits shape {logits.shape}; expected "
                         f"{(logits.shape[0],) + logits.shape[2:]} (logits are (N, C) or (N, C, d1, ...), class dim 1 "
                         "as in PyTorch; for (B, T, C) logits pass logits.reshape(-1, C), target.reshape(-1))")
    if num_classes == 0:
        raise ValueError(f"{op}: logits have zero classes (shape {logits.shape})")

    x = logits.data if logits.ndim <= 2 else np.moveaxis(logits.data, 1, -1)
    x2 = x.reshape(-1, num_classes)
    flat_t = t.reshape(-1)
    valid = flat_t != ignore_index
    if valid.any():
        vt = flat_t[valid]
        lo, hi = int(vt.min()), int(vt.max())
        if lo < 0 or hi >= num_classes:
            bad = lo if lo < 0 else hi
            raise IndexError(f"{op}: target {bad} is out of range for {num_classes} classes "
                             f"(expected 0..{num_classes - 1}, or ignore_index={ignore_index})")
    safe_t = np.where(valid, flat_t, 0)
    rows = np.arange(x2.shape[0])

    shifted = x2 - x2.max(axis=1, keepdims=True)
    exp = np.exp(shifted)
    sum_exp = exp.sum(axis=1, keepdims=True)
    logp = shifted - np.log(sum_exp)
    eps = float(label_smoothing)
    per = -logp[rows, safe_t]
    if eps:
        per = (1.0 - eps) * per - eps * logp.mean(axis=1)
    per = np.where(valid, per, 0).astype(x2.dtype)
    count = int(valid.sum())
    if reduction == "none":
        out, scale = per.reshape(t.shape), None
    elif reduction == "sum":
        out, scale = np.asarray(per.sum(), dtype=x2.dtype), 1.0
    else:
        out = np.asarray(per.sum() / count if count else 0.0, dtype=x2.dtype)
        scale = 1.0 / count if count else 0.0

    def backward(g):
        grad = exp / sum_exp
        if eps:
            grad -= eps / num_classes
        grad[rows, safe_t] -= 1.0 - eps
        per_target = g.reshape(-1) if scale is None else g * scale
        grad *= (valid * per_target).astype(x2.dtype)[:, None]
        if logits.ndim <= 2:
            return (grad.reshape(logits.shape),)
        return (np.moveaxis(grad.reshape(x.shape), -1, 1),)
    return logits._make(out, op, (logits,), backward)
