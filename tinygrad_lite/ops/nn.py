"""nn-flavoured ops: softmax, log_softmax, layer_norm and dropout, and the selecting ops a model's
layers use: gather, masked_fill and where. The formulas of softmax, log_softmax and layer_norm,
forward and backward, and dropout's keep mask are the NumPy functions at the end of this file;
`@has_twin` lets a backend run a faster twin of each (tinygrad_lite.dispatch)."""
from __future__ import annotations

import math

import numpy as np

from .. import tensor
from ..dispatch import has_twin
from ..random import rng
from .binary import unbroadcast
from .shapes import FLOAT_DTYPES, broadcast_shape, norm_dim


class NNOps:
    """The neural-network methods of Tensor (a mixin: Tensor inherits them)."""

    __slots__ = ()

    # ------------------------------------------------------------ softmax family

    def softmax(self, dim: int = -1, scale: float = 1.0, mask=None):
        """softmax(x·scale + mask) along `dim`, stable. `mask` is boolean (True = keep) or
        additive; a fully masked row gives zeros, never NaN (softmax_forward below)."""
        d = norm_dim("softmax", dim, self.ndim)
        if self.dtype not in FLOAT_DTYPES:
            raise TypeError(f"softmax: expected a float tensor, got {self.dtype}")
        if not math.isfinite(scale):
            raise ValueError(f"softmax: scale must be a finite number, got {scale!r}")
        m = _mask_arg("softmax", mask, self.shape)
        return self._apply(softmax_op, "softmax" if m is None else "softmax (masked)", (self,), d, scale, m)

    def log_softmax(self, dim: int = -1):
        """Returns log(softmax(x)) along `dim`, computed stably, like torch.log_softmax."""
        d = norm_dim("log_softmax", dim, self.ndim)
        if self.dtype not in FLOAT_DTYPES:
            raise TypeError(f"log_softmax: expected a float tensor, got {self.dtype}")
        return self._apply(log_softmax_op, "log_softmax", (self,), d)

    # ------------------------------------------------------------ dropout and layer_norm

    def dropout(self, p: float = 0.5, training: bool = True):
        """Inverted dropout: zero with probability p (dropout_keep_mask below), scale the rest by 1/(1-p)."""
        if not 0 <= p <= 1:
            raise ValueError(f"dropout: p must be in [0, 1], got {p}")
        if not training or p == 0:
            return self
        if p == 1:
            return self * 0.0
        scale = self.dtype.type(1.0 / (1.0 - p)) if self.dtype in FLOAT_DTYPES else 1.0 / (1.0 - p)
        return self._apply(dropout_op, "dropout", (self,), p, scale)

    def layer_norm(self, normalized_shape, weight=None, bias=None, eps: float = 1e-5):
        """LayerNorm over the trailing `normalized_shape` dims, biased variance (as PyTorch)."""
        normalized_shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
        shape = self.data.shape
        k = len(normalized_shape)
        if shape[len(shape) - k:] != normalized_shape or k == 0:
            raise ValueError(f"layer_norm: normalized_shape {normalized_shape} does not match the trailing "
                             f"dims of input shape {self.shape}")
        if self.dtype not in FLOAT_DTYPES:
            raise TypeError(f"layer_norm: expected a float tensor, got {self.dtype}")
        if not (math.isfinite(eps) and eps >= 0):
            raise ValueError(f"layer_norm: eps must be a finite number >= 0, got {eps!r}")
        parents = (self,)
        for name, t in (("weight", weight), ("bias", bias)):
            if t is not None:
                if t.data.shape != normalized_shape:
                    raise ValueError(f"layer_norm: {name} has shape {t.shape}, expected {normalized_shape}")
                if t.dtype != self.dtype:
                    raise TypeError(f"layer_norm: {name} is {t.dtype} but the input is "
                                    f"{self.dtype}; pass both in one dtype")
                parents += (t,)
        return self._apply(layer_norm_op, "layer_norm", parents, normalized_shape, eps, weight is not None,
                           bias is not None)

    # ------------------------------------------------------------ selecting

    def gather(self, dim: int, index):
        """out[i][j] = self[index[i][j]][j] for dim=0 (torch.gather semantics)."""
        d = norm_dim("gather", dim, self.ndim)
        idx = tensor.as_array(index)
        if idx.dtype.kind not in "iu":
            raise TypeError(f"gather: index must be an integer tensor, got {idx.dtype}")
        if idx.ndim != self.ndim:
            raise ValueError(f"gather: index has {idx.ndim} dims, the input {self.ndim} (shape {self.shape})")
        return self._apply(gather_op, "gather", (self,), idx, d)

    def masked_fill(self, mask, value):
        """Set entries where `mask` is True to `value` (mask broadcasts to the tensor)."""
        m = tensor.as_array(mask)
        if m.dtype != np.bool_:
            raise TypeError(f"masked_fill: mask must be bool, got {m.dtype}")
        broadcast_shape("masked_fill", self.shape, m.shape)
        if np.broadcast_shapes(self.shape, m.shape) != self.shape:
            raise ValueError(f"masked_fill: mask of shape {m.shape} would grow the tensor of shape {self.shape}")
        return self._apply(masked_fill_op, "masked_fill", (self,), m, value)

    @staticmethod
    def where(condition, x, y):
        """x where condition is True, else y; all three broadcast."""
        c = tensor.as_array(condition)
        if c.dtype != np.bool_:
            raise TypeError(f"where: condition must be bool, got {c.dtype}")
        if not isinstance(x, tensor.Tensor):
            x = (y if isinstance(y, tensor.Tensor) else tensor.Tensor(0.0))._coerce(x, "where")
        y = x._coerce(y, "where")
        broadcast_shape("where", c.shape, x.shape, y.shape)
        return x._apply(where_op, "where", (x, y), c)


def _mask_arg(op, mask, shape):
    """The mask as an array; it may broadcast to the input's shape but never grow it."""
    if mask is None:
        return None
    m = tensor.as_array(mask)
    if m.dtype != np.bool_ and m.dtype.kind != "f":
        raise TypeError(f"{op}: mask must be boolean (True = may attend) or float (added to the "
                        f"logits, -inf = masked), got dtype {m.dtype}")
    try:
        bshape = np.broadcast_shapes(m.shape, shape)
    except ValueError:
        raise ValueError(f"{op}: mask of shape {m.shape} cannot broadcast to the input's shape {shape}") from None
    if bshape != shape:
        raise ValueError(f"{op}: mask of shape {m.shape} would grow the input's shape {shape}")
    return m


# ---------------------------------------------------------------- the ops: output, and its backward

def softmax_op(x, d, scale, mask):
    """softmax_forward over dim d: d is moved last (and the mask, broadcast to x, with it), and back."""
    last = d == x.ndim - 1 or x.ndim == 0
    if not last:
        if mask is not None:
            mask = np.moveaxis(np.broadcast_to(mask, x.shape), d, -1)
        x = np.moveaxis(x, d, -1)
    y = softmax_forward(x.reshape(1) if x.ndim == 0 else x, scale, mask).reshape(x.shape)

    def backward(g):
        gl = g if last else np.moveaxis(g, d, -1)
        dx = softmax_backward(y, np.ascontiguousarray(gl), scale)
        return (dx if last else np.moveaxis(dx, -1, d),)
    return (y if last else np.moveaxis(y, -1, d)), backward


def log_softmax_op(x, d):
    last = d == x.ndim - 1 or x.ndim == 0
    x = x if last else np.moveaxis(x, d, -1)
    y = log_softmax_forward(x.reshape(1) if x.ndim == 0 else x).reshape(x.shape)

    def backward(g):
        gl = g if last else np.moveaxis(g, d, -1)
        dx = log_softmax_backward(y, np.ascontiguousarray(gl))
        return (dx if last else np.moveaxis(dx, -1, d),)
    return (y if last else np.moveaxis(y, -1, d)), backward


def dropout_op(x, p, scale):
    """The keep mask is drawn here, from the engine's rng, so each run of the op draws a fresh one."""
    keep = dropout_keep_mask(x.shape, p)
    return x * keep * scale, lambda g: (g * keep * scale,)


def layer_norm_op(x, *rest):
    """layernorm_forward over the trailing normalized_shape dims, flattened into one: x is
    (rows, feat) there. The parents are x, then weight and bias when given."""
    *params, normalized_shape, eps, has_weight, has_bias = rest
    weight = params[0] if has_weight else None
    bias = params[-1] if has_bias else None
    k, shape = len(normalized_shape), x.shape
    feat = math.prod(normalized_shape)
    x2 = x.reshape(-1, feat)
    gamma = None if weight is None else weight if k == 1 else weight.reshape(feat)
    beta = None if bias is None else bias if k == 1 else bias.reshape(feat)
    y, mean, rstd = layernorm_forward(x2, gamma, beta, eps)

    def backward(g):
        dx, dgamma, dbeta = layernorm_backward(np.ascontiguousarray(g.reshape(-1, feat)), x2, gamma, mean, rstd)
        grads = [dx.reshape(shape)]
        if weight is not None:
            grads.append(dgamma.reshape(normalized_shape))
        if bias is not None:
            grads.append(dbeta.reshape(normalized_shape) if dbeta is not None
                         else g.reshape(-1, feat).sum(0).reshape(normalized_shape))
        return tuple(grads)
    return y.reshape(shape), backward


def gather_op(x, idx, d):
    n = x.shape[d]
    if idx.size and (idx.min() < -n or idx.max() >= n):
        raise IndexError(f"gather: index values must be in [{-n}, {n - 1}] along dim {d} of shape "
                         f"{x.shape}, got min {idx.min()} max {idx.max()}")

    def backward(g):
        full = np.zeros(x.shape, dtype=x.dtype)
        grid = list(np.indices(idx.shape, sparse=True))
        grid[d] = idx
        np.add.at(full, tuple(grid), g)
        return (full,)
    return np.take_along_axis(x, idx, axis=d), backward


def masked_fill_op(x, mask, value):
    return np.where(mask, np.asarray(value, dtype=x.dtype), x), lambda g: (np.where(mask, 0, g).astype(g.dtype),)


def where_op(x, y, c):
    return np.where(c, x, y), lambda g: (unbroadcast(np.where(c, g, 0).astype(g.dtype), x.shape),
                                         unbroadcast(np.where(c, 0, g).astype(g.dtype), y.shape))


# ---------------------------------------------------------------- the formulas (NumPy, over the last axis)

@has_twin("softmax_forward")
def softmax_forward(x, scale=1.0, mask=None):
    """softmax(z)_j = exp(z_j − max z) / Σ_k exp(z_k − max z), z = x·scale + mask. Subtracting the
    row's max changes nothing but keeps exp from overflowing. A row masked in full (all −inf)
    gives zeros, and a NaN makes its row NaN."""
    z = x * x.dtype.type(scale)
    if mask is not None:
        z = z + additive_mask(mask, x.dtype)
    if z.size == 0:
        return z
    with np.errstate(invalid="ignore"):
        e = np.exp(z - _row_max(z))
    total = e.sum(axis=-1, keepdims=True)
    return np.divide(e, total, out=np.zeros_like(e), where=total != 0)


@has_twin("softmax_backward")
def softmax_backward(y, dy, scale=1.0):
    """dx = scale · y · (dy − Σ dy·y), from the output y: the Jacobian diag(y) − y·yᵀ applied to dy.
    Masked positions have y = 0, hence dx = 0 there."""
    return y.dtype.type(scale) * y * (dy - (dy * y).sum(axis=-1, keepdims=True))


@has_twin("log_softmax_forward")
def log_softmax_forward(x):
    """log softmax(x)_j = (x_j − max x) − log Σ_k exp(x_k − max x); a row of all −inf stays −inf."""
    if x.size == 0:
        return x.copy()
    with np.errstate(invalid="ignore", divide="ignore"):
        shifted = x - _row_max(x)
        total = np.exp(shifted).sum(axis=-1, keepdims=True)
        return shifted - np.where(total == 0, x.dtype.type(0), np.log(total))


@has_twin("log_softmax_backward")
def log_softmax_backward(y, dy):
    """dx = dy − softmax(x)·Σ dy, softmax(x) = exp(y); 0 on rows of all −inf."""
    if y.size == 0:
        return np.zeros_like(dy)
    p = np.exp(y)
    dx = dy - p * dy.sum(axis=-1, keepdims=True)
    return np.where(p.sum(axis=-1, keepdims=True) == 0, dy.dtype.type(0), dx)


@has_twin("layernorm_forward")
def layernorm_forward(x, gamma, beta, eps=1e-5):
    """(y, mean, rstd): y = (x − mean)·rstd·gamma + beta, rstd = 1/√(var + eps), the biased variance
    (÷ N) as PyTorch; gamma, beta of shape (N,) or None. mean and rstd, shape (..., 1), are kept
    for the backward."""
    mean = x.mean(axis=-1, keepdims=True)
    centered = x - mean
    rstd = 1.0 / np.sqrt((centered * centered).mean(axis=-1, keepdims=True) + x.dtype.type(eps))
    y = centered * rstd
    if gamma is not None:
        y = y * gamma
    if beta is not None:
        y = y + beta
    return y, mean, rstd


@has_twin("layernorm_backward")
def layernorm_backward(dy, x, gamma, mean, rstd):
    """(dx, dgamma, dbeta) from the forward's mean and rstd, with x̂ = (x − mean)·rstd, g = dy·gamma:
    dx = rstd·(g − mean(g) − x̂·mean(g·x̂)), dgamma = Σ_rows dy·x̂, dbeta = Σ_rows dy. Both are None
    without gamma (a lone beta's gradient is dy summed over rows)."""
    xhat = (x - mean) * rstd
    g = dy if gamma is None else dy * gamma
    dx = rstd * (g - g.mean(axis=-1, keepdims=True) - xhat * (g * xhat).mean(axis=-1, keepdims=True))
    if gamma is None:
        return dx, None, None
    n = x.shape[-1]
    return dx, (dy * xhat).reshape(-1, n).sum(axis=0), dy.reshape(-1, n).sum(axis=0)


def _row_max(z):
    """Each row's max, or 0 for a row of all −inf (so z − max stays −inf, not NaN)."""
    top = z.max(axis=-1, keepdims=True)
    return np.where(np.isneginf(top), z.dtype.type(0), top)


def additive_mask(mask, dtype):
    """A mask as numbers added to the logits: True (may attend) → 0, False → −inf; floats as given."""
    if mask.dtype == np.bool_:
        return np.where(mask, 0.0, -np.inf).astype(dtype)
    return mask.astype(dtype, copy=False)


def dropout_keep_mask(shape, p: float) -> np.ndarray:
    """A boolean array of `shape`, each entry True (kept) with probability 1 - p: one word of the
    engine's rng seeds a counter-based stream (keep_mask_from_seed), so manual_seed makes dropout
    repeatable. An entry is a 16-bit lane when 16 bits give p to within 1e-4 of itself (p = 0.1
    becomes 0.100006), else a 32-bit lane."""
    bits, threshold = keep_lanes(p)
    seed = rng().bit_generator.random_raw()
    return keep_mask_from_seed(seed, math.prod(shape), bits, threshold).reshape(shape)


def keep_lanes(p: float) -> tuple:
    """(bits, threshold) of dropout_keep_mask's lanes for drop probability p."""
    for bits in (16, 32):
        threshold = min(round(p * 2.0 ** bits), 2 ** bits - 1)
        if abs(threshold - p * 2.0 ** bits) <= 1e-4 * min(p, 1 - p) * 2.0 ** bits:
            break
    return bits, threshold


GAMMA = np.uint64(0x9E3779B97F4A7C15)  # SplitMix64's step: 2**64 over the golden ratio, odd
MIX1, MIX2 = np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)
LANE_DTYPES = {16: np.uint16, 32: np.uint32}


@has_twin("keep_mask_from_seed")
def keep_mask_from_seed(seed, count, bits, threshold):
    """bool (count,): lanes of SplitMix64's words from state `seed`, each kept when >= threshold.
    Word i (i = 1, 2, ...) is splitmix64_mix(seed + i·GAMMA) (mod 2**64): no state runs from word to
    word, so any word can be computed alone. A word holds 64 // bits lanes, lowest bits first."""
    lanes = LANE_DTYPES[bits]
    counters = np.arange(1, -(-count // (64 // bits)) + 1, dtype=np.uint64)
    return splitmix64_mix(counters * GAMMA + np.uint64(seed)).view(lanes)[:count] >= lanes(threshold)


@has_twin("keep_rows_from_seed")
def keep_rows_from_seed(seed, rows, width, bits, threshold):
    """keep_mask_from_seed's entries at rows `rows` of a (rows, width) mask, (len(rows), width): entry f =
    rows[i]·width + j is lane f mod L of word f // L + 1 (L = 64 // bits). Any word can be computed
    alone, so a compiled step draws a padded tensor's mask at its real tokens only, the same bits there
    (tinygrad_lite/compiler/rules/skip_padding.py)."""
    per_word = 64 // bits
    flat = rows[:, None] * width + np.arange(width)                                  # (n, width)
    words = splitmix64_mix((flat // per_word + 1).astype(np.uint64) * GAMMA + np.uint64(seed))
    lanes = (words >> (flat % per_word * bits).astype(np.uint64)) & np.uint64(2 ** bits - 1)
    return lanes >= threshold


def splitmix64_mix(z):
    """SplitMix64's output function (Steele, Lea & Flood 2014) of uint64 states z, wrapping."""
    z = (z ^ (z >> np.uint64(30))) * MIX1
    z = (z ^ (z >> np.uint64(27))) * MIX2
    return z ^ (z >> np.uint64(31))
