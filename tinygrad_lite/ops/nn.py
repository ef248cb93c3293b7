"""nn-flavoured ops: softmax, log_softmax, layer_norm and dropout (softmax and layer_norm run
through tinygrad_lite.kernels), and the selecting ops a model's layers use: gather, masked_fill
and where."""
from __future__ import annotations

import math

import numpy as np

from .. import fast, tensor
from .. import kernels as K
from ..fast import TRICKS
from ..kernels.backend import unbroadcast
from ..random import rng
from .shapes import FLOAT_DTYPES, broadcast_shape, norm_dim


class NNOps:
    """The neural-network methods of Tensor (a mixin: Tensor inherits them)."""

    __slots__ = ()

    # ------------------------------------------------------------ softmax family (kernels)

    def softmax(self, dim: int = -1, scale: float = 1.0, mask=None):
        """softmax(x·scale + mask) along `dim`, stable. `mask` is boolean (True = keep) or
        additive; a fully masked row gives zeros, never NaN (see kernels.softmax)."""
        d = norm_dim("softmax", dim, self.ndim)
        if self.dtype not in FLOAT_DTYPES:
            raise TypeError(f"softmax: expected a float tensor, got {self.dtype}")
        last = d == self.ndim - 1 or self.ndim == 0
        x = self.data if last else np.moveaxis(self.data, d, -1)
        if not math.isfinite(scale):
            raise ValueError(f"softmax: scale must be a finite number, got {scale!r}")
        m = _mask_array("softmax", mask, self.shape, d)
        y = K.softmax_forward(x.reshape(1) if x.ndim == 0 else x, scale, m).reshape(x.shape)

        def backward(g):
            gl = g if last else np.moveaxis(g, d, -1)
            dx = K.softmax_backward(y, np.ascontiguousarray(gl), scale)
            return (dx if last else np.moveaxis(dx, -1, d),)
        name = "softmax" if m is None else "softmax (masked)"
        return self._make(y if last else np.moveaxis(y, -1, d), name, (self,), backward)

    def log_softmax(self, dim: int = -1):
        """Returns log(softmax(x)) along `dim`, computed stably in one kernel, like
        torch.log_softmax."""
        d = norm_dim("log_softmax", dim, self.ndim)
        if self.dtype not in FLOAT_DTYPES:
            raise TypeError(f"log_softmax: expected a float tensor, got {self.dtype}")
        last = d == self.ndim - 1 or self.ndim == 0
        x = self.data if last else np.moveaxis(self.data, d, -1)
        y = K.log_softmax_forward(x.reshape(1) if x.ndim == 0 else x).reshape(x.shape)

        def backward(g):
            gl = g if last else np.moveaxis(g, d, -1)
            dx = K.log_softmax_backward(y, np.ascontiguousarray(gl))
            return (dx if last else np.moveaxis(dx, -1, d),)
        return self._make(y if last else np.moveaxis(y, -1, d), "log_softmax", (self,), backward)

    # ------------------------------------------------------------ dropout and layer_norm

    def dropout(self, p: float = 0.5, training: bool = True):
        """Inverted dropout: zero with probability p, scale the rest by 1/(1-p)."""
        if not 0 <= p <= 1:
            raise ValueError(f"dropout: p must be in [0, 1], got {p}")
        if not training or p == 0:
            return self
        if p == 1:
            return self * 0.0
        keep = dropout_keep_mask(self.shape, p)
        scale = self.dtype.type(1.0 / (1.0 - p)) if self.dtype in FLOAT_DTYPES else 1.0 / (1.0 - p)
        return self._make(self.data * keep * scale, "dropout", (self,), lambda g: (g * keep * scale,))

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
        feat = math.prod(normalized_shape)
        x2 = self.data.reshape(-1, feat)
        gamma = None if weight is None else weight.data if k == 1 else weight.data.reshape(feat)
        beta = None if bias is None else bias.data if k == 1 else bias.data.reshape(feat)
        y, mean, rstd = K.layernorm_forward(x2, gamma, beta, eps)

        def backward(g):
            dx, dgamma, dbeta = K.layernorm_backward(np.ascontiguousarray(g.reshape(-1, feat)), x2, gamma,
                                                     mean, rstd)
            grads = [dx.reshape(shape)]
            if weight is not None:
                grads.append(dgamma.reshape(normalized_shape))
            if bias is not None:
                grads.append(dbeta.reshape(normalized_shape) if dbeta is not None
                             else g.reshape(-1, feat).sum(0).reshape(normalized_shape))
            return tuple(grads)
        return self._make(y.reshape(shape), "layer_norm", parents, backward)

    # ------------------------------------------------------------ selecting

    def gather(self, dim: int, index):
        """out[i][j] = self[index[i][j]][j] for dim=0 (torch.gather semantics)."""
        d = norm_dim("gather", dim, self.ndim)
        idx = tensor.as_array(index)
        if idx.dtype.kind not in "iu":
            raise TypeError(f"gather: index must be an integer tensor, got {idx.dtype}")
        if idx.ndim != self.ndim:
            raise ValueError(f"gather: index has {idx.ndim} dims, the input {self.ndim} (shape {self.shape})")
        n = self.shape[d]
        if idx.size and (idx.min() < -n or idx.max() >= n):
            raise IndexError(f"gather: index values must be in [{-n}, {n - 1}] along dim {d} of shape "
                             f"{self.shape}, got min {idx.min()} max {idx.max()}")
        out = np.take_along_axis(self.data, idx, axis=d)
        shape, dtype = self.shape, self.dtype

        def backward(g):
            full = np.zeros(shape, dtype=dtype)
            grid = list(np.indices(idx.shape, sparse=True))
            grid[d] = idx
            np.add.at(full, tuple(grid), g)
            return (full,)
        return self._make(out, "gather", (self,), backward)

    def masked_fill(self, mask, value):
        """Set entries where `mask` is True to `value` (mask broadcasts to the tensor)."""
        m = tensor.as_array(mask)
        if m.dtype != np.bool_:
            raise TypeError(f"masked_fill: mask must be bool, got {m.dtype}")
        broadcast_shape("masked_fill", self.shape, m.shape)
        if np.broadcast_shapes(self.shape, m.shape) != self.shape:
            raise ValueError(f"masked_fill: mask of shape {m.shape} would grow the tensor of shape {self.shape}")
        out = np.where(m, np.asarray(value, dtype=self.dtype), self.data)
        return self._make(out, "masked_fill", (self,), lambda g: (np.where(m, 0, g).astype(g.dtype),))

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
        out = np.where(c, x.data, y.data)
        return x._make(out, "where", (x, y),
                       lambda g: (unbroadcast(np.where(c, g, 0).astype(g.dtype), x.shape),
                                  unbroadcast(np.where(c, 0, g).astype(g.dtype), y.shape)))


def _mask_array(op, mask, shape, d):
    """The mask as an array laid out like the input with `d` moved last; it may broadcast
    to the input's shape but never grow it."""
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
    if d != len(shape) - 1 and len(shape) > 0:
        m = np.moveaxis(np.broadcast_to(m, shape), d, -1)
    return m


def dropout_keep_mask(shape, p: float) -> np.ndarray:
    """A boolean array of `shape`, each entry True (kept) with probability 1 - p, drawn from the
    engine's rng (so manual_seed makes dropout repeatable)."""
    if TRICKS.dropout_bits:
        return fast.keep_mask_from_bits(shape, p)
    return rng().random(shape) >= p
