"""Reductions: sum, mean, var, std, max/amax, min, argmax, argmin and logsumexp. Each folds one or
more dims; its backward spreads the gradient back over the elements that were folded."""
from __future__ import annotations

from collections import namedtuple

import numpy as np

from .shapes import norm_dim, norm_dims

MaxResult = namedtuple("MaxResult", ["values", "indices"])


class ReduceOps:
    """The reduction methods of Tensor (a mixin: Tensor inherits them)."""

    __slots__ = ()

    def sum(self, dim=None, keepdim: bool = False):
        """Returns the sum over `dim` (an int or a tuple; all dims if None); keepdim keeps reduced
        dims as size 1, like torch.sum."""
        return self._apply(sum_op, "sum", (self,), norm_dims("sum", dim, self.ndim), keepdim)

    def mean(self, dim=None, keepdim: bool = False):
        """Returns the mean over `dim` (an int or a tuple; all dims if None); keepdim keeps reduced
        dims as size 1, like torch.mean."""
        axes = norm_dims("mean", dim, self.ndim)
        count = self.data.size if axes is None else int(np.prod([self.shape[a] for a in axes]))
        if count == 0:
            raise ValueError(f"mean: reducing over zero elements (shape {self.shape}, dim {dim})")
        return self.sum(dim, keepdim) * (1.0 / count)

    def var(self, dim=None, keepdim: bool = False, correction: int = 1, unbiased: bool | None = None):
        """Variance as in PyTorch: divides by N - correction (unbiased by default)."""
        if unbiased is not None:
            correction = 1 if unbiased else 0
        axes = norm_dims("var", dim, self.ndim)
        count = self.data.size if axes is None else int(np.prod([self.shape[a] for a in axes]))
        if count - correction <= 0:
            raise ValueError(f"var: needs more than {correction} element(s) per reduction, "
                             f"got {count} (shape {self.shape}, dim {dim})")
        centered = self - self.mean(dim, keepdim=True)
        return (centered * centered).sum(dim, keepdim) * (1.0 / (count - correction))

    def std(self, dim=None, keepdim: bool = False, correction: int = 1):
        """Returns sqrt(var(dim, keepdim, correction)), unbiased by default, like torch.std."""
        return self.var(dim, keepdim, correction).sqrt()

    def amax(self, dim=None, keepdim: bool = False):
        """Max values; the gradient is shared equally among tied maxima (as torch.amax)."""
        axes = norm_dims("max", dim, self.ndim)
        if self.data.size == 0:
            raise ValueError(f"max: cannot reduce an empty tensor of shape {self.shape}")
        return self._apply(amax_op, "max", (self,), axes, keepdim)

    def max(self, dim=None, keepdim: bool = False):
        """Like torch.max: over all elements a tensor; with `dim`, (values, indices)."""
        if dim is None:
            return self.amax()
        values = self.amax(dim, keepdim)
        return MaxResult(values, self.argmax(dim, keepdim))

    def min(self, dim=None, keepdim: bool = False):
        """Like torch.min: over all elements a tensor; with `dim`, (values, indices)."""
        if dim is None:
            return -((-self).amax())
        return MaxResult(-((-self).amax(dim, keepdim)), self.argmin(dim, keepdim))

    def argmax(self, dim=None, keepdim: bool = False):
        """Returns the index of the max along `dim` (of the flattened tensor if None) as an int64
        tensor without grad, like torch.argmax."""
        d = None if dim is None else norm_dim("argmax", dim, self.ndim)
        return self._unrecorded(argmax_op, "argmax", (self,), d, keepdim)

    def argmin(self, dim=None, keepdim: bool = False):
        """Returns the index of the min along `dim` (of the flattened tensor if None) as an int64
        tensor without grad, like torch.argmin."""
        d = None if dim is None else norm_dim("argmin", dim, self.ndim)
        return self._unrecorded(argmin_op, "argmin", (self,), d, keepdim)

    def logsumexp(self, dim=-1, keepdim: bool = False):
        """log Σ exp(x), stable: the max is subtracted first. A row of all -inf gives -inf."""
        return self._apply(logsumexp_op, "logsumexp", (self,), norm_dim("logsumexp", dim, self.ndim), keepdim)


# ---------------------------------------------------------------- the ops: output, and its backward

def sum_op(x, axes, keepdim):
    def backward(g):                                      # each summed element gets the sum's gradient
        if not keepdim and axes is not None:
            g = np.expand_dims(g, axes)
        return (np.broadcast_to(g, x.shape),)
    return np.asarray(x.sum(axis=axes, keepdims=keepdim)), backward


def amax_op(x, axes, keepdim):
    out_keep = x.max(axis=axes, keepdims=True)
    out = out_keep if keepdim else np.asarray(x.max(axis=axes))

    def backward(g):                                      # shared equally among tied maxima
        if not keepdim and axes is not None:
            g = np.expand_dims(g, axes)
        hit = (x == out_keep)
        return (g * hit / hit.sum(axis=axes, keepdims=True),)
    return out, backward


def argmax_op(x, d, keepdim):
    return (np.asarray(x.argmax()) if d is None else np.argmax(x, axis=d, keepdims=keepdim)), None


def argmin_op(x, d, keepdim):
    return (np.asarray(x.argmin()) if d is None else np.argmin(x, axis=d, keepdims=keepdim)), None


def logsumexp_op(x, d, keepdim):
    m = np.max(x, axis=d, keepdims=True)                  # log Σ eˣ = m + log Σ eˣ⁻ᵐ
    m = np.where(np.isfinite(m), m, 0)
    with np.errstate(divide="ignore"):
        lse_keep = np.log(np.exp(x - m).sum(axis=d, keepdims=True)) + m
    out = lse_keep if keepdim else np.squeeze(lse_keep, d)

    def backward(g):                                      # d lse/dx = softmax(x)
        if not keepdim:
            g = np.expand_dims(g, d)
        with np.errstate(invalid="ignore"):
            p = np.exp(x - lse_keep)
        return (g * np.nan_to_num(p, nan=0.0),)
    return out, backward
