"""Fused ops: a chain of the paper's steps as one op, the machinery behind the speed tricks
(tinygrad_lite.fast) and the step compiler's rewrite rules (tinygrad_lite.compiler.rules).

Each computes what a plain chain of nn.functional and Tensor ops computes, with the same dropout draws,
in one pass and one node: the feed-forward's linear -> ReLU -> dropout, Add & Norm's x + dropout(s),
multi-head attention's softmax(q·kᵀ·scale + mask)·v for all heads (also on the real tokens' rows
alone, with unpad and repad between the padded and the row layouts). The plain chain is each one's
oracle (tests/test_fast_paths.py, test_fused_attention.py, test_skip_padding.py); a learner reads the
chain, in nn/functional.py, ops/ and transformer/attention.py.
"""
from __future__ import annotations

import numpy as np

from .. import kernels as K
from ..checks import number, positive_int, probability
from ..fast import TRICKS
from ..kernels import attention
from ..tensor import FLOAT_DTYPES, Tensor, dropout_keep_mask
from .functional import _array, _linear_grads, _linear_inputs, _product, _tensor, dropout, linear, relu


def linear_relu_dropout(x, weight: Tensor, bias: Tensor | None = None, p: float = 0.0,
                        training: bool = True) -> Tensor:
    """dropout(relu(linear(x, weight, bias)), p, training) as one op: the feed-forward's first half.

    The bias, ReLU and dropout run as one pass over the product (kernels.fused), and the backward
    needs no mask: the output is > 0 exactly where the unit was kept and positive. The same dropout
    draws as the plain chain, and the same numbers (tests/test_fast_paths.py)."""
    p = probability("linear_relu_dropout", "p", p)
    if training and p == 1:
        return dropout(relu(linear(x, weight, bias)), p, training)
    x, needs = _linear_inputs(x, weight, bias)
    if bias is None:
        return x._apply(linear_relu_dropout_op, "linear_relu_dropout", (x, weight), None, p, training, needs)
    return x._apply(linear_relu_dropout_op, "linear_relu_dropout", (x, weight, bias), p, training, needs)


def linear_relu_dropout_op(x, w, b, p, training, needs):
    keep = dropout_keep_mask(x.shape[:-1] + (w.shape[0],), p) if training and p > 0 else None
    return linear_relu_keep_op(x, w, b, keep, x.dtype.type(1.0 / (1.0 - p)), needs)


def linear_relu_keep_op(x, w, b, keep, scale, needs):
    """linear_relu_dropout_op with its keep mask given (x's rows, out_features), or None: the mask a
    compiled step draws at the real tokens only (compiler/rules/skip_padding.py)."""
    n_out, n_in = w.shape
    out_shape = x.shape[:-1] + (n_out,)
    x2 = x.reshape(-1, n_in)
    h = K.bias_relu_dropout_(_product(x2, w.T), b, None if keep is None else keep.reshape(-1, n_out), scale)

    def backward(g):
        return _linear_grads(K.relu_dropout_backward(g.reshape(-1, n_out), h, scale), x, x2, w, b, needs)
    return h.reshape(out_shape), backward


def add_dropout(x: Tensor, s: Tensor, p: float = 0.0, training: bool = True) -> Tensor:
    """x + dropout(s, p, training) as one op: Add & Norm's residual (paper §3.1, P_drop on each
    sub-layer's output before it is added). One pass (kernels.fused), the plain chain's draws and
    numbers."""
    op = "add_dropout"
    if not (isinstance(x, Tensor) and isinstance(s, Tensor)):
        raise TypeError(f"{op}: x and s must be Tensors, got {type(x).__name__} and {type(s).__name__}")
    if x.shape != s.shape or x.dtype != s.dtype or x.dtype not in FLOAT_DTYPES:
        raise ValueError(f"{op}: x and s must be float tensors of one shape and dtype, got {x.shape} {x.dtype} "
                         f"and {s.shape} {s.dtype}")
    p = probability(op, "p", p)
    if training and p == 1:
        return x + s.dropout(p, training)
    return x._apply(add_dropout_op, op, (x, s), p, training, s.requires_grad)


def add_dropout_op(x, s, p, training, s_needs_grad):
    keep = dropout_keep_mask(s.shape, p) if training and p > 0 else None
    return add_keep_op(x, s, keep, x.dtype.type(1.0 / (1.0 - p)), s_needs_grad)


def add_keep_op(x, s, keep, scale, s_needs_grad):
    """add_dropout_op with its keep mask (s's shape) given, or None (as linear_relu_keep_op)."""
    out = K.add_dropout(x, s, keep, scale)
    return out, lambda g: (g, K.dropout_backward(g, keep, scale) if s_needs_grad else None)


def unpad(x, real) -> Tensor:
    """The rows of x (B, T, ...) where the (B, T) bool mask `real` is True, in row-major order:
    (n, ...) for n = real.sum(). Position-wise layers (Linear, the FFN, LayerNorm) then skip the
    padding positions; `repad` is its inverse (what flash-attn calls unpad_input / pad_input)."""
    x = _tensor("unpad", "x", x)
    return x._apply(unpad_op, "unpad", (x,), _real_mask("unpad", real, x.shape[:2], f"x of shape {x.shape}"))


def unpad_op(x, real):
    rows = np.flatnonzero(real)
    flat = (real.size,) + x.shape[2:]

    def backward(g):
        full = np.zeros(flat, dtype=g.dtype)
        full[rows] = g
        return (full.reshape(x.shape),)
    return np.take(x.reshape(flat), rows, axis=0), backward                    # (n, ...)


def repad(x, real) -> Tensor:
    """The inverse of `unpad`: x (n, ...) holds the rows of the True positions of `real` (B, T),
    in row-major order; returns (B, T, ...) with zeros at the False (padding) positions."""
    x = _tensor("repad", "x", x)
    return x._apply(repad_op, "repad", (x,), _real_mask("repad", real, None, f"x of shape {x.shape}"))


def repad_op(x, real):
    rows = np.flatnonzero(real)
    if x.ndim == 0 or x.shape[0] != len(rows):
        raise ValueError(f"repad: x must have one row per True entry of real ({len(rows)}), "
                         f"got x of shape {x.shape}")
    flat = (real.size,) + x.shape[1:]
    out = np.zeros(flat, dtype=x.dtype)
    out[rows] = x
    return out.reshape(real.shape + x.shape[1:]), lambda g: (np.take(g.reshape(flat), rows, axis=0),)


def _real_mask(op: str, real, shape, got: str):
    keep = _array(real)
    if keep.dtype != np.bool_ or keep.ndim != 2 or (shape is not None and keep.shape != tuple(shape)):
        want = f"of shape {tuple(shape)}" if shape is not None else "of 2 dims (B, T)"
        raise ValueError(f"{op}: real must be a bool mask {want} (True at real tokens), got "
                         f"{keep.dtype} of shape {keep.shape} with {got}")
    return keep


def fused_attention(q: Tensor, k: Tensor, v: Tensor, mask=None, dropout_p: float = 0.0, training: bool = True,
                    scale: float | None = None, need_weights: bool = False, heads: int | None = None,
                    real: tuple | None = None):
    """All heads of scaled dot-product attention, softmax(q·kᵀ·scale + mask)·v (paper Eq. 1), as ONE op.

    q (B, T_q, h, d_k), k (B, T_k, h, d_k), v (B, T_k, h, d_v) -> (B, T_q, h, d_v): tokens before
    heads, as the projections produce them, so no transposed copies are made. With `heads=h`,
    q, k, v are (B, T, h·d) instead (the projections' output as is) and so is the result,
    (B, T_q, h·d_v), ready for W^O. k and v may have batch 1 (keys shared by every row).
    scale defaults to 1/√d_k. mask: boolean (True = may attend) or additive, broadcastable to the
    weights' shape (B, h, T_q, T_k). With training and dropout_p > 0 the weights are dropped out
    (inverted dropout from the engine's rng: the same draws `weights.dropout(p)` would make).
    need_weights=True also returns the weights (before dropout) as an ndarray, for inspection: no
    gradient flows through them. Runs on `tinygrad_lite.kernels.attention`; the unfused composition
    it must match is matmul -> softmax -> dropout -> matmul.

    real=(q_real, k_real), bool masks (B, T_q) and (B, T_k) of the real tokens, with heads=h: q, k, v are
    those tokens' rows only, (n_q, h·d) and (n_k, h·d) (the compiler's rule skip_padding), and so is the result,
    (n_q, h·d_v): attention among the real tokens, the same numbers as repad -> this op -> unpad when the mask
    hides every padding key, without the padded copies.
    """
    op = "fused_attention"
    if not (isinstance(q, Tensor) and isinstance(k, Tensor) and isinstance(v, Tensor)):
        raise TypeError(f"{op}: q, k, v must be Tensors, got {type(q).__name__}, {type(k).__name__}, "
                        f"{type(v).__name__}")
    if real is not None:
        return _attention_rows(op, q, k, v, mask, dropout_p, training, scale, need_weights, heads, real)
    dropout_p = probability(op, "dropout_p", dropout_p)
    scale = None if scale is None else number(op, "scale", scale)
    qd, kd, vd = q.data, k.data, v.data
    if heads is not None:
        heads = positive_int(op, "heads", heads)
        qd = _split_heads(op, "q", qd, heads)
        kd = _split_heads(op, "k", kd, heads)
        vd = _split_heads(op, "v", vd, heads)
    mask = _check_attention(op, qd, kd, vd, mask)
    box = {} if need_weights else None
    result = q._apply(fused_attention_op, op, (q, k, v), mask, dropout_p, training, scale, heads,
                      (q.requires_grad, k.requires_grad, v.requires_grad), box)
    return (result, _weights(q, box)) if need_weights else result


def fused_attention_op(q, k, v, mask, dropout_p, training, scale, heads, needs, box):
    qd, kd, vd = (q, k, v) if heads is None else (_heads_view(x, heads) for x in (q, k, v))
    keep, keep_scale = _attention_dropout((qd.shape[0], qd.shape[2], qd.shape[1], kd.shape[1]), dropout_p, training)
    forward, backward_of = _attention_engines(rows=False)
    out, weights = forward(qd, kd, vd, scale, mask, keep, keep_scale)
    if heads is not None:
        out = out.reshape(out.shape[:2] + (-1,))
    if box is not None:
        box["weights"] = weights

    def backward(g):
        if heads is not None:
            g = g.reshape(g.shape[:2] + (heads, -1))
        grads = backward_of(qd, kd, vd, weights, g, scale, keep, keep_scale)
        return tuple(None if not need else grad if heads is None else grad.reshape(x.shape)
                     for need, x, grad in zip(needs, (q, k, v), grads))
    return out, backward


def _weights(q: Tensor, box: dict):
    """The attention weights the op just put in `box`, taken out by an op of their own (no gradient flows
    through it), so a replayed step takes them out too and holds no step's weights past it."""
    return q._unrecorded(attention_weights_op, "attention_weights", (), box).data


def attention_weights_op(box):
    return box.pop("weights"), None


def _attention_engines(rows: bool):
    """(forward, backward) of fused attention, padded or on the real tokens' rows. Trick `attention_kernels`:
    the backend's choice among the per-query Numba kernel, the SIMD tile kernels and BLAS around the Numba
    softmax (kernels.attention). Plain version: the NumPy twin, matmul -> softmax -> matmul, on either backend."""
    if TRICKS.attention_kernels:
        return ((K.attention_forward_rows, K.attention_backward_rows) if rows
                else (K.attention_forward, K.attention_backward))
    if rows:
        return attention.attention_forward_rows_numpy, attention.attention_backward_rows_numpy
    return attention.attention_forward_numpy, attention.attention_backward_numpy


def _attention_dropout(weights_shape: tuple, dropout_p: float, training: bool):
    """(keep mask of the weights' shape, its scale 1/(1-p)), or (None, 1.0) when no dropout applies."""
    if not (training and dropout_p > 0):
        return None, 1.0
    return dropout_keep_mask(weights_shape, dropout_p), 1.0 / (1.0 - dropout_p) if dropout_p < 1 else 0.0


def _attention_rows(op, q, k, v, mask, dropout_p, training, scale, need_weights, heads, real):
    """fused_attention with real=(q_real, k_real): q, k, v hold the real tokens' rows (kernels.attention's
    attention_forward_rows)."""
    if heads is None or not isinstance(real, tuple) or len(real) != 2:
        raise ValueError(f"{op}: real needs heads=h and a pair (q_real, k_real) of bool masks (B, T)")
    heads = positive_int(op, "heads", heads)
    q_real = _real_mask(op, real[0], None, f"q of shape {q.shape}")
    k_real = _real_mask(op, real[1], None, f"k of shape {k.shape}")
    if k_real.shape[0] != q_real.shape[0]:
        raise ValueError(f"{op}: real's masks must share the batch size, got {q_real.shape} and {k_real.shape}")
    for name, x, keep in (("q", q, q_real), ("k", k, k_real), ("v", v, k_real)):
        if x.ndim != 2 or x.shape[1] % heads:
            _rows_error(name, x.shape, keep, heads)
    dropout_p = probability(op, "dropout_p", dropout_p)
    scale = None if scale is None else number(op, "scale", scale)
    B, T_q, T_k = q_real.shape[0], q_real.shape[1], k_real.shape[1]
    shaped = [_Shaped((B, T, heads, x.shape[1] // heads), x.dtype)  # shapes only, for the checks
              for x, T in ((q, T_q), (k, T_k), (v, T_k))]
    mask = _check_attention(op, *shaped, mask)
    box = {} if need_weights else None
    result = q._apply(fused_attention_rows_op, op, (q, k, v), q_real, k_real, mask, dropout_p, training, scale,
                      heads, (q.requires_grad, k.requires_grad, v.requires_grad), box)
    return (result, _weights(q, box)) if need_weights else result


def fused_attention_rows_op(q, k, v, q_real, k_real, mask, dropout_p, training, scale, heads, needs, box):
    for name, x, keep in (("q", q, q_real), ("k", k, k_real), ("v", v, k_real)):
        if x.shape[0] != int(keep.sum()):
            _rows_error(name, x.shape, keep, heads)
    qd, kd, vd = (x.reshape(x.shape[0], heads, -1) for x in (q, k, v))
    keep, keep_scale = _attention_dropout((q_real.shape[0], heads, q_real.shape[1], k_real.shape[1]), dropout_p,
                                          training)
    forward, backward_of = _attention_engines(rows=True)
    out, weights = forward(qd, kd, vd, q_real, k_real, scale, mask, keep, keep_scale)
    if box is not None:
        box["weights"] = weights

    def backward(g):
        grads = backward_of(qd, kd, vd, q_real, k_real, weights, g.reshape(out.shape), scale, keep, keep_scale)
        return tuple(grad.reshape(x.shape) if need else None for need, x, grad in zip(needs, (q, k, v), grads))
    return out.reshape(out.shape[0], -1), backward


def _rows_error(name: str, shape: tuple, keep, heads: int):
    raise ValueError(f"fused_attention: with real, {name} must be (n, heads·d) with one row per real token "
                     f"({int(keep.sum())}) and its last dim divisible by heads={heads}, got shape {shape}")


class _Shaped:
    """An array's shape and dtype without its values: what _check_attention reads."""

    __slots__ = ("shape", "dtype", "ndim")

    def __init__(self, shape: tuple, dtype):
        self.shape, self.dtype, self.ndim = shape, dtype, len(shape)


def _split_heads(op: str, name: str, x, heads: int) -> _Shaped:
    """The shape (B, T, h, d) of (B, T, h·d) split into heads, once it is checked to divide."""
    shape = x.shape
    if len(shape) != 3 or shape[2] % heads:
        raise ValueError(f"{op}: with heads={heads!r}, {name} must be (B, T, heads·d) with its last dim divisible "
                         f"by heads, got shape {shape}")
    return _Shaped((shape[0], shape[1], heads, shape[2] // heads), x.dtype)


def _heads_view(x: np.ndarray, heads: int) -> np.ndarray:
    """(B, T, h·d) -> (B, T, h, d), a view."""
    shape = x.shape
    return x.reshape(shape[0], shape[1], heads, shape[2] // heads)


def _check_attention(op: str, q, k, v, mask):
    """Raise unless q, k, v (arrays, or their _Shaped) fit (B, T_q, h, d_k), (B or 1, T_k, h, d_k),
    (B or 1, T_k, h, d_v) in one float dtype and the mask is boolean or float and broadcasts to the
    weights (B, h, T_q, T_k); returns the mask as an array (the kernels trust what passes)."""
    for name, x in (("q", q), ("k", k), ("v", v)):
        if x.dtype not in (np.float32, np.float64):
            raise TypeError(f"{op}: {name} must be a float32 or float64 array, got dtype {x.dtype}")
        if x.ndim != 4:
            raise ValueError(f"{op}: {name} must be 4-D (B, T, h, d) (tokens before heads, as the "
                             f"projections produce them), got shape {x.shape}")
    if not q.dtype == k.dtype == v.dtype:
        raise TypeError(f"{op}: q, k, v must share a dtype, got {q.dtype}, {k.dtype}, {v.dtype}")
    B, T_q, h, d_k = q.shape
    if k.shape[0] not in (B, 1) or k.shape[2:] != (h, d_k):
        raise ValueError(f"{op}: k {k.shape} does not fit q {q.shape}: expected (B, T_k, h, d_k) = "
                         f"({B}, T_k, {h}, {d_k}) (or batch 1, shared by every query row)")
    if v.shape[:3] != k.shape[:3]:
        raise ValueError(f"{op}: v {v.shape} does not fit k {k.shape}: expected (B, T_k, h, d_v) = "
                         f"{k.shape[:3] + ('d_v',)}")
    if mask is None:
        return None
    mask = _array(mask)
    if mask.dtype != np.bool_ and mask.dtype.kind != "f":
        raise TypeError(f"{op}: mask must be boolean (True = may attend) or float (added to the "
                        f"scores, -inf = masked), got dtype {mask.dtype}")
    weights_shape = (B, h, T_q, k.shape[1])
    fits = mask.ndim <= 4
    for m, w in zip(mask.shape[::-1], weights_shape[::-1]):  # a loop: this runs every decoding step
        fits = fits and (m == 1 or m == w)
    if not fits:
        raise ValueError(f"{op}: mask of shape {mask.shape} cannot broadcast to the weights' shape "
                         f"(B, h, T_q, T_k) = {weights_shape}")
    return mask
