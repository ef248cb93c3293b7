"""Attention as the composition of matmul, softmax, matmul: the NumPy twin of the attention kernels.

The readable definition of kernels.attention (its module docstring gives the arguments and the
backward's formulas) and their test oracle. The numba backend runs the same composition with the
Numba softmax kernels where neither the per-query kernel nor the tile kernels take the shapes.
"""
import numpy as np

from .. import dispatch
from . import attention_args as args


def heads_first(x):
    """(B, T, h, d) <-> (B, h, T, d), a view."""
    return x.transpose(0, 2, 1, 3)


def _matmul_tokens_first(a, b, batch=None):
    """a @ b for (B, h, ., .) operands, returned in (B, T, h, d) layout: the product is written
    straight through a transposed view of the result, so no copy is needed afterwards."""
    B, h, T, d = (batch or a.shape[0]), a.shape[1], a.shape[2], b.shape[3]
    out = np.empty((B, T, h, d), np.result_type(a, b))
    np.matmul(a, b, out=heads_first(out))
    return out


def forward_composed(q, k, v, scale, additive, keep, keep_scale, softmax_forward):
    """(out, weights) from a prepared scale and additive mask, with the given softmax forward."""
    scores = heads_first(q) @ heads_first(k).swapaxes(-1, -2)              # (B, h, T_q, T_k)
    weights = softmax_forward(scores, scale, additive)
    mixed = weights if keep is None else weights * keep * q.dtype.type(keep_scale)
    return _matmul_tokens_first(mixed, heads_first(v), q.shape[0]), weights


def backward_composed(q, k, v, weights, dout, scale, keep, keep_scale, softmax_backward):
    """(dq, dk, dv) of forward_composed, with the given softmax backward."""
    dropout = None if keep is None else keep * q.dtype.type(keep_scale)
    mixed = weights if dropout is None else weights * dropout
    dout_h = heads_first(dout)
    dweights = dout_h @ heads_first(v).swapaxes(-1, -2)                     # (B, h, T_q, T_k)
    if dropout is not None:
        dweights *= dropout
    dscores = softmax_backward(weights, dweights, scale)                    # includes the scale
    dq = _matmul_tokens_first(dscores, heads_first(k))
    if k.shape[0] != q.shape[0]:  # keys shared by every row: sum their gradients over the batch
        dk = (dscores.swapaxes(-1, -2) @ heads_first(q)).sum(axis=0, keepdims=True)
        dv = (mixed.swapaxes(-1, -2) @ dout_h).sum(axis=0, keepdims=True)
        return dq, np.ascontiguousarray(heads_first(dk)), np.ascontiguousarray(heads_first(dv))
    return (dq, _matmul_tokens_first(dscores.swapaxes(-1, -2), heads_first(q)),
            _matmul_tokens_first(mixed.swapaxes(-1, -2), dout_h))


def attention_forward_numpy(q, k, v, scale=None, mask=None, keep=None, keep_scale=1.0):
    """(out, weights) of multi-head attention (NumPy twin): matmul, softmax's formula (ops.nn), matmul."""
    shape = args.weights_shape(q, k, v)
    args.assert_keep(keep, shape)
    additive = args.additive(args.mask_in(mask, shape, q.dtype), q.dtype)
    return forward_composed(q, k, v, args.scale_factor(scale, q.shape[3], q.dtype), additive, keep, keep_scale,
                            dispatch.formula("softmax_forward"))


def attention_backward_numpy(q, k, v, weights, dout, scale=None, keep=None, keep_scale=1.0):
    """(dq, dk, dv) of attention_forward (NumPy twin)."""
    shape = args.weights_shape(q, k, v)
    args.assert_backward(q, weights, dout, v, shape)
    args.assert_keep(keep, shape)
    return backward_composed(q, k, v, weights, dout, args.scale_factor(scale, q.shape[3], q.dtype), keep,
                             keep_scale, dispatch.formula("softmax_backward"))
