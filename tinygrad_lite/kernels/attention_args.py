"""The arguments of the attention kernels: the preconditions they assert and the forms they take.

nn.fused.fused_attention checks what users pass and names what is wrong; the kernels trust what
passes, and the asserts here state what they trust (shapes in the module docstring of
kernels.attention). Shared by the NumPy twin (kernels.attention_composed), the per-query kernels
(kernels.attention_per_query) and the tile kernels (kernels.attention_tiles).
"""
import math

import numpy as np

from .softmax import additive_mask

NO_KEEP = np.zeros((0, 0, 0, 0), np.bool_)   # "no dropout" for the kernels, which take arrays only


def weights_shape(q, k, v):
    """(B, h, T_q, T_k), asserting that q, k, v fit."""
    assert q.ndim == k.ndim == v.ndim == 4 and q.dtype == k.dtype == v.dtype, (q.shape, k.shape)
    assert k.shape[0] in (q.shape[0], 1) and k.shape[2:] == q.shape[2:], (q.shape, k.shape)
    assert v.shape[:3] == k.shape[:3], (k.shape, v.shape)
    return q.shape[0], q.shape[2], q.shape[1], k.shape[1]


def scale_factor(scale, d_k, dtype):
    """The factor on Q·Kᵀ: 1/√d_k unless given."""
    value = 1.0 / math.sqrt(d_k) if scale is None else float(scale)
    assert math.isfinite(value), scale
    return dtype.type(value)


def mask_in(mask, shape, dtype):
    """The mask in its own (unbroadcast) shape: boolean as given, floats in the weights' dtype."""
    if mask is None:
        return None
    assert mask.dtype == np.bool_ or mask.dtype.kind == "f", mask.dtype
    assert mask.ndim <= 4, mask.shape
    assert all(m in (1, w) for m, w in zip(mask.shape[::-1], shape[::-1])), mask.shape
    return mask.astype(dtype, copy=False) if mask.dtype.kind == "f" else mask


def additive(mask, dtype):
    """A prepared mask as additive logits (softmax.additive_mask), or None."""
    return None if mask is None else additive_mask(mask, dtype)


def mask_4d(mask, shape):
    """The mask as a C-contiguous 4-D array whose first three dims are 1 or full size and whose
    last is T_k, for a kernel to index without broadcasting it to the weights' shape."""
    mask = mask.reshape((1,) * (4 - mask.ndim) + mask.shape)
    if mask.shape[3] != shape[3]:
        mask = np.broadcast_to(mask, mask.shape[:3] + (shape[3],))
    return np.ascontiguousarray(mask)


def assert_keep(keep, shape):
    assert keep is None or (keep.dtype == np.bool_ and keep.shape == tuple(shape))


def assert_backward(q, weights, dout, v, shape):
    assert weights.shape == shape and dout.shape == q.shape[:3] + v.shape[3:]
    assert weights.dtype == dout.dtype == q.dtype
