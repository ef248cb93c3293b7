"""Binary ops: arithmetic (+ - * / **) that broadcasts as NumPy does, maximum and minimum, the
comparisons and logic ops (no grad), and matmul. A broadcast input's gradient is summed back to
its shape (`unbroadcast`). `needs` tells an op which inputs need a gradient, so its backward
computes only those."""
from __future__ import annotations

import inspect

import numpy as np

from .. import tensor
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
        return self._broadcast(add_op, "add", other, _reflected)

    @_public_signature
    def sub(self, other, _reflected=False):
        """Returns self - other elementwise, broadcasting, like torch.sub."""
        return self._broadcast(sub_op, "sub", other, _reflected)

    @_public_signature
    def mul(self, other, _reflected=False):
        """Returns self * other elementwise, broadcasting, like torch.mul."""
        return self._broadcast(mul_op, "mul", other, _reflected)

    @_public_signature
    def div(self, other, _reflected=False):
        """Returns self / other elementwise (true division), broadcasting, like torch.div."""
        return self._broadcast(div_op, "div", other, _reflected)

    @_public_signature
    def pow(self, exponent, _reflected=False):
        """x ** p for a number p (the common case) or a Tensor exponent (d/dp = x^p · ln x)."""
        if not _reflected and isinstance(exponent, (int, float)) and not isinstance(exponent, bool):
            return self._apply(pow_number_op, "pow", (self,), exponent)
        return self._broadcast(pow_op, "pow", exponent, _reflected)

    def _broadcast(self, op, name: str, other, reflected: bool):
        """`op` on self and other broadcast together (other on the left if `reflected`); backward
        computes the gradients of the inputs that need one."""
        a, b = self._binary_inputs(other, name, reflected)
        return a._apply(op, name, (a, b), (a.requires_grad, b.requires_grad))

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
        return a._apply(maximum_op, "maximum", (a, b))

    def minimum(self, other):
        """Returns the elementwise min of self and other, broadcasting, like torch.minimum."""
        return -((-self).maximum(-self._coerce(other, "minimum")))

    # ------------------------------------------------------------ comparisons (no grad)

    def _compare(self, other, fn, op):
        a, b = self._binary_inputs(other, op)
        return a._unrecorded(compare_op, op, (a, b), fn)

    def _unrecorded(self, fn, op, parents, *args):
        """Run an op no gradient flows through (a comparison, a logic op, argmax): its output is a leaf,
        as a tensor made from values is, whatever its inputs; a compiled step still replays it."""
        out = self._apply(fn, op, parents, *args)
        out.requires_grad, out._op, out._prev, out._backward = False, "", (), None
        return out

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
        return self._unrecorded(invert_op, "invert", (self,))

    def __and__(self, other):
        """t & other: elementwise logical and, as a bool tensor (no grad)."""
        other = other if isinstance(other, tensor.Tensor) else tensor.Tensor(other)
        return self._unrecorded(compare_op, "and", (self, other), np.logical_and)

    def __or__(self, other):
        """t | other: elementwise logical or, as a bool tensor (no grad)."""
        other = other if isinstance(other, tensor.Tensor) else tensor.Tensor(other)
        return self._unrecorded(compare_op, "or", (self, other), np.logical_or)

    # ------------------------------------------------------------ matmul

    def matmul(self, other):
        """Matrix product with NumPy's rules: 1-D operands are promoted, batch dims broadcast."""
        a, b = self, self._coerce(other, "matmul")
        if a.ndim == 0 or b.ndim == 0:
            raise ValueError(f"matmul: both operands need at least 1 dim, got shapes {a.shape} and {b.shape}")
        if a.dtype not in FLOAT_DTYPES or b.dtype not in FLOAT_DTYPES:
            raise TypeError(f"matmul: expected float tensors, got {a.dtype} and {b.dtype}")
        inner = b.shape[0] if b.ndim == 1 else b.shape[-2]
        if a.shape[-1] != inner:
            raise ValueError(f"matmul: inner dims don't match: {a.shape} @ {b.shape} "
                             f"({a.shape[-1]} != {inner})")
        broadcast_shape("matmul (batch dims)", a.shape[:-2], b.shape[:-2])
        ensure_num_threads()  # the default thread count, once (tinygrad_lite.threads)
        return self._apply(matmul_op, "matmul", (a, b), (a.requires_grad, b.requires_grad))

    __matmul__ = matmul

    def __rmatmul__(self, other):
        """other @ self, for an ndarray on the left."""
        return self._coerce(other, "matmul").matmul(self)


# ---------------------------------------------------------------- the ops: output, and its backward

def add_op(a, b, needs):
    return a + b, lambda g: (unbroadcast(g, a.shape) if needs[0] else None,
                             unbroadcast(g, b.shape) if needs[1] else None)


def sub_op(a, b, needs):
    return a - b, lambda g: (unbroadcast(g, a.shape) if needs[0] else None,
                             unbroadcast(-g, b.shape) if needs[1] else None)


def mul_op(a, b, needs):
    return a * b, lambda g: (unbroadcast(g * b, a.shape) if needs[0] else None,
                             unbroadcast(g * a, b.shape) if needs[1] else None)


def div_op(a, b, needs):
    out = a / b
    return out, lambda g: (unbroadcast(g / b, a.shape) if needs[0] else None,           # d(a/b)/da = 1/b
                           unbroadcast(-g * out / b, b.shape) if needs[1] else None)   # d(a/b)/db = -a/b²


def pow_number_op(x, p):
    return x ** p, lambda g: (g * p * x ** (p - 1),)                                   # d xᵖ/dx = p·xᵖ⁻¹


def pow_op(a, b, needs):
    out = a ** b

    def backward(g):
        ga = unbroadcast(g * b * a ** (b - 1), a.shape) if needs[0] else None
        gb = None
        if needs[1]:                                                                   # d aᵇ/db = aᵇ·ln a
            with np.errstate(divide="ignore", invalid="ignore"):
                log_a = np.where(a > 0, np.log(np.where(a > 0, a, 1)), 0)
            gb = unbroadcast(g * out * log_a, b.shape)
        return ga, gb
    return out, backward


def maximum_op(a, b):
    a_wins = (a > b) + 0.5 * (a == b)                     # a tie splits the gradient in half
    return np.maximum(a, b), lambda g: (unbroadcast(g * a_wins, a.shape), unbroadcast(g * (1 - a_wins), b.shape))


def compare_op(a, b, fn):
    return fn(a, b), None


def invert_op(x):
    return ~x, None


def matmul_op(a, b, needs):
    ad = a[None, :] if a.ndim == 1 else a                 # 1-D operands are promoted to matrices
    bd = b[:, None] if b.ndim == 1 else b
    out = ad @ bd
    final = out[..., 0, :] if a.ndim == 1 else out
    final = final[..., 0] if b.ndim == 1 else final

    def backward(g):
        # C = A·B: dA = dC·Bᵀ and dB = Aᵀ·dC, summed back over broadcast batch dims
        g = g.reshape(out.shape)
        da = unbroadcast(g @ np.swapaxes(bd, -1, -2), ad.shape) if needs[0] else None
        db = unbroadcast(np.swapaxes(ad, -1, -2) @ g, bd.shape) if needs[1] else None
        return (None if da is None else da.reshape(a.shape),
                None if db is None else db.reshape(b.shape))
    return final, backward
