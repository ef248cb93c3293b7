"""Binary ops: arithmetic (+ - * / **) that broadcasts as NumPy does, maximum and minimum, the
comparisons and logic ops (no grad), and matmul. A broadcast input's gradient is summed back to
its shape (`unbroadcast`)."""
from __future__ import annotations

import inspect

import numpy as np

from .. import fast, tensor
from ..fast import TRICKS
from ..threads import ensure_num_threads
from .shapes import FLOAT_DTYPES, broadcast_shape


def unbroadcast(grad, shape):
    """Sum `grad` over the axes that broadcasting added or stretched, back to `shape`: the
    gradient of an input that was broadcast (by an elementwise op, or a matmul's batch dims).
    Each copy of a broadcast entry fed the output, so its gradient is the sum over the copies."""
    if grad.shape == shape:
        return grad
    extra = grad.ndim - len(shape)
    if extra:
        grad = grad.sum(axis=tuple(range(extra)))
    stretched = tuple(i for i, n in enumerate(shape) if n == 1 and grad.shape[i] != 1)
    if stretched:
        grad = grad.sum(axis=stretched, keepdims=True)
    return grad


def _public_signature(fn):
    """Leave parameters named `_...` (the reflected-op flag) out of help() and inspect.signature;
    the function itself is returned unchanged, so calls cost the same."""
    sig = inspect.signature(fn)
    fn.__signature__ = sig.replace(parameters=[p for p in sig.parameters.values()
                                               if not p.name.startswith("_")])
    return fn


class BinaryOps:
    """The two-operand methods of Tensor (a mixin: Tensor inherits them)."""

    __slots__ = ()

    # ------------------------------------------------------------ arithmetic (broadcasting)

    @_public_signature
    def add(self, other, _reflected=False):
        """Returns self + other elementwise, broadcasting; other may be a Tensor, a number or an
        ndarray, like torch.add."""
        if TRICKS.scalar_operand and fast.is_scalar_operand(self, other):
            return self._make(self.data + self.data.dtype.type(other), "add", (self,), None)
        a, b = self._binary_inputs(other, "add", _reflected)
        return a._make(a.data + b.data, "add", (a, b),
                       lambda g: (unbroadcast(g, a.shape) if a.requires_grad else None,
                                  unbroadcast(g, b.shape) if b.requires_grad else None))

    @_public_signature
    def sub(self, other, _reflected=False):
        """Returns self - other elementwise, broadcasting, like torch.sub."""
        a, b = self._binary_inputs(other, "sub", _reflected)
        return a._make(a.data - b.data, "sub", (a, b),
                       lambda g: (unbroadcast(g, a.shape) if a.requires_grad else None,
                                  unbroadcast(-g, b.shape) if b.requires_grad else None))

    @_public_signature
    def mul(self, other, _reflected=False):
        """Returns self * other elementwise, broadcasting, like torch.mul."""
        if TRICKS.scalar_operand and fast.is_scalar_operand(self, other):
            return self._make(self.data * self.data.dtype.type(other), "mul", (self,), None)
        a, b = self._binary_inputs(other, "mul", _reflected)
        return a._make(a.data * b.data, "mul", (a, b),
                       lambda g: (unbroadcast(g * b.data, a.shape) if a.requires_grad else None,
                                  unbroadcast(g * a.data, b.shape) if b.requires_grad else None))

    @_public_signature
    def div(self, other, _reflected=False):
        """Returns self / other elementwise (true division), broadcasting, like torch.div."""
        a, b = self._binary_inputs(other, "div", _reflected)
        out = a.data / b.data
        return a._make(out, "div", (a, b),
                       lambda g: (unbroadcast(g / b.data, a.shape) if a.requires_grad else None,
                                  unbroadcast(-g * out / b.data, b.shape) if b.requires_grad else None))

    @_public_signature
    def pow(self, exponent, _reflected=False):
        """x ** p for a number p (the common case) or a Tensor exponent (d/dp = x^p · ln x)."""
        if not _reflected and isinstance(exponent, (int, float)) and not isinstance(exponent, bool):
            p, x = exponent, self.data
            out = x ** p
            return self._make(out, "pow", (self,), lambda g: (g * p * x ** (p - 1),))
        a, b = self._binary_inputs(exponent, "pow", _reflected)
        out = a.data ** b.data

        def backward(g):
            ga = unbroadcast(g * b.data * a.data ** (b.data - 1), a.shape) if a.requires_grad else None
            gb = None
            if b.requires_grad:
                with np.errstate(divide="ignore", invalid="ignore"):
                    log_a = np.where(a.data > 0, np.log(np.where(a.data > 0, a.data, 1)), 0)
                gb = unbroadcast(g * out * log_a, b.shape)
            return ga, gb
        return a._make(out, "pow", (a, b), backward)

    __add__ = add
    __sub__ = sub
    __mul__ = mul
    __truediv__ = div
    __pow__ = pow

    def __radd__(self, other):
        """other + self, for a number or an ndarray on the left."""
        return self.add(other, _reflected=True)

    def __rsub__(self, other):
        """other - self, for a number or an ndarray on the left."""
        return self.sub(other, _reflected=True)

    def __rmul__(self, other):
        """other * self, for a number or an ndarray on the left."""
        return self.mul(other, _reflected=True)

    def __rtruediv__(self, other):
        """other / self, for a number or an ndarray on the left."""
        return self.div(other, _reflected=True)

    def __rpow__(self, other):
        """other ** self, for a number or an ndarray as the base."""
        return self.pow(other, _reflected=True)

    # ------------------------------------------------------------ maximum and minimum

    def maximum(self, other):
        """Returns the elementwise max of self and other, broadcasting; a tie splits the gradient in
        half, like torch.maximum."""
        a, b = self._binary_inputs(other, "maximum")
        out = np.maximum(a.data, b.data)
        a_wins = (a.data > b.data) + 0.5 * (a.data == b.data)
        return a._make(out, "maximum", (a, b),
                       lambda g: (unbroadcast(g * a_wins, a.shape), unbroadcast(g * (1 - a_wins), b.shape)))

    def minimum(self, other):
        """Returns the elementwise min of self and other, broadcasting, like torch.minimum."""
        return -((-self).maximum(-self._coerce(other, "minimum")))

    # ------------------------------------------------------------ comparisons (no grad)

    def _compare(self, other, fn, op):
        a, b = self._binary_inputs(other, op)
        return tensor.Tensor(fn(a.data, b.data))

    def __lt__(self, other):
        """self < other elementwise, broadcasting, as a bool tensor (no grad), like torch.lt."""
        return self._compare(other, np.less, "lt")

    def __le__(self, other):
        """self <= other elementwise, broadcasting, as a bool tensor (no grad), like torch.le."""
        return self._compare(other, np.less_equal, "le")

    def __gt__(self, other):
        """self > other elementwise, broadcasting, as a bool tensor (no grad), like torch.gt."""
        return self._compare(other, np.greater, "gt")

    def __ge__(self, other):
        """self >= other elementwise, broadcasting, as a bool tensor (no grad), like torch.ge."""
        return self._compare(other, np.greater_equal, "ge")

    def eq(self, other):
        """Returns self == other elementwise as a bool tensor (no grad), like torch.eq; or `==`."""
        return self._compare(other, np.equal, "eq")

    def ne(self, other):
        """Returns self != other elementwise as a bool tensor (no grad), like torch.ne; or `!=`."""
        return self._compare(other, np.not_equal, "ne")

    __eq__ = eq
    __ne__ = ne
    __hash__ = object.__hash__

    def __invert__(self):
        """~t of a bool tensor: elementwise logical not (no grad)."""
        if self.dtype != np.bool_:
            raise TypeError(f"invert: expected a bool tensor, got {self.dtype}")
        return tensor.Tensor(~self.data)

    def __and__(self, other):
        """t & other: elementwise logical and, as a bool tensor (no grad)."""
        return tensor.Tensor(np.logical_and(self.data, tensor.as_array(other)))

    def __or__(self, other):
        """t | other: elementwise logical or, as a bool tensor (no grad)."""
        return tensor.Tensor(np.logical_or(self.data, tensor.as_array(other)))

    # ------------------------------------------------------------ matmul

    def matmul(self, other):
        """Matrix product with NumPy's rules: 1-D operands are promoted, batch dims broadcast."""
        a, b = self, self._coerce(other, "matmul")
        if a.ndim == 0 or b.ndim == 0:
            raise ValueError(f"matmul: both operands need at least 1 dim, got shapes {a.shape} and {b.shape}")
        if a.dtype not in FLOAT_DTYPES or b.dtype not in FLOAT_DTYPES:
            raise TypeError(f"matmul: expected float tensors, got {a.dtype} and {b.dtype}")
        ad = a.data[None, :] if a.ndim == 1 else a.data
        bd = b.data[:, None] if b.ndim == 1 else b.data
        if ad.shape[-1] != bd.shape[-2]:
            raise ValueError(f"matmul: inner dims don't match: {a.shape} @ {b.shape} "
                             f"({ad.shape[-1]} != {bd.shape[-2]})")
        broadcast_shape("matmul (batch dims)", ad.shape[:-2], bd.shape[:-2])
        ensure_num_threads()  # the default thread count, once (tinygrad_lite.threads)
        out = ad @ bd
        final = out[..., 0, :] if a.ndim == 1 else out
        final = final[..., 0] if b.ndim == 1 else final

        def backward(g):
            # C = A·B: dA = dC·Bᵀ and dB = Aᵀ·dC, summed back over broadcast batch dims
            g = g.reshape(out.shape)
            da = unbroadcast(g @ np.swapaxes(bd, -1, -2), ad.shape) if a.requires_grad else None
            db = unbroadcast(np.swapaxes(ad, -1, -2) @ g, bd.shape) if b.requires_grad else None
            return (None if da is None else da.reshape(a.shape),
                    None if db is None else db.reshape(b.shape))
        return self._make(final, "matmul", (a, b), backward)

    __matmul__ = matmul

    def __rmatmul__(self, other):
        """other @ self, for an ndarray on the left."""
        return self._coerce(other, "matmul").matmul(self)
