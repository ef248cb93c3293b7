"""Fused multi-head attention: softmax(Q·Kᵀ·scale + mask)·V for every head in one kernel.

The paper's Eq. 1, Attention(Q, K, V) = softmax(Q Kᵀ / √d_k) V, run as three separate ops
(matmul, softmax, matmul) writes the scores and the weights out in full, then reads them back,
and needs the heads split off into a (B, h, T, d_k) copy first. Here one op computes, for
each (batch row, head, query): the scores against every key, the masked softmax, and the
weighted sum of the values, and it reads Q, K, V in the layout the projections produce them:

    q (B, T_q, h, d_k), k (B, T_k, h, d_k), v (B, T_k, h, d_v)  ->  out (B, T_q, h, d_v)

so that `x @ W^Q` only needs a free reshape before it and `out.reshape(B, T_q, h * d_v) @ W^O`
after it. The attention weights (B, h, T_q, T_k) are returned too: the backward pass needs
them, and MultiHeadAttention shows them when asked.

    attention_forward(q, k, v, scale=None, mask=None, keep=None, keep_scale=1.0) -> (out, weights)
    attention_backward(q, k, v, weights, dout, scale=None, keep=None, keep_scale=1.0) -> (dq, dk, dv)
    attention_forward_rows(q, k, v, q_real, k_real, ...), attention_backward_rows(...)

The *_rows pair takes only the real tokens' rows, q (n_q, h, d_k) and k, v (n_k, h, .), with the
(B, T) bool masks of where they sit (the compiler's rule skip_padding): attention among the real tokens,
without padded copies of q, k, v.

* k and v may have batch size 1 while q has B: one set of keys shared by every row (e.g. the
  encoder memory of one sentence searched with several beams).
* scale: the factor on Q·Kᵀ, by default 1/√d_k.
* mask: boolean (True = may attend) or additive floats (0 keeps, -inf removes), broadcastable to
  the weights' shape (B, h, T_q, T_k), e.g. (B, 1, 1, T_k) padding or (B, 1, T_q, T_k) causal.
  A query whose keys are all masked gets zero weights and a zero output, never NaN.
* keep, keep_scale: dropout on the weights (the paper's P_drop inside attention): the values
  are mixed with weights · keep · keep_scale, where keep is a boolean (B, h, T_q, T_k) array.
  `weights` is returned before dropout.

The backward, for P = weights and P̃ = P · keep · keep_scale:
    dV = P̃ᵀ dO,   dP = (dO Vᵀ) · keep · keep_scale,   dS = scale · P · (dP − rowsum(dP · P)),
    dQ = dS K,    dK = dSᵀ Q.

Where each part lives:
    kernels.attention_composed    the NumPy twin, matmul -> softmax -> matmul (``*_numpy``): the definition
    kernels.attention_per_query   the Numba kernel for one (batch row, head, query) at a time (``*_numba``)
    kernels.attention_tiles       the SIMD tile kernels for float32 training shapes, on rows in place
    kernels.attention_args        the preconditions they all assert
and this module dispatches. With the numba backend, `attention_engine` picks the per-query kernel
only where it wins (one query per head: a decoding step); training shapes in float32 run the tile
kernels (`tiles_fit`); everything else runs as OpenBLAS batched products around the Numba softmax
kernels (bench/README.md, "Tenth pass"). That choice is the trick `attention_kernels`, made in
nn.fused.fused_attention (its plain version: the NumPy twin on either backend); whether a
MultiHeadAttention runs this op at all is the trick `fused_attention` (transformer/attention.py).
float32 and float64; `out` is C-contiguous in the input dtype (the tile kernels' weights are a view
of a (B, h, T_q, T_k rounded up to 8) array). The arguments are trusted: nn.fused.fused_attention
checks what users pass, and asserts state the preconditions.
"""
import functools

import numpy as np

from . import attention_args as args
from . import attention_tiles as tiles
from . import softmax
from .attention_composed import (
    attention_backward_numpy,
    attention_forward_numpy,
    backward_composed,
    forward_composed,
)
from .attention_per_query import (
    NUMBA_MAX_QUERIES,
    attention_backward_numba,
    attention_forward_numba,
    backward_kernel,
    forward_kernel,
)
from .attention_tiles import tiles_fit
from .backend import use_numba

__all__ = [
    "NUMBA_MAX_QUERIES", "attention_backward", "attention_backward_numba", "attention_backward_numpy",
    "attention_backward_rows", "attention_backward_rows_numpy", "attention_engine", "attention_forward",
    "attention_forward_numba", "attention_forward_numpy", "attention_forward_rows", "attention_forward_rows_numpy",
    "tiles_fit",
]


def attention_engine(queries):
    """'numba' (the per-query kernel) or 'blas' (matmul, Numba softmax, matmul, or the tile kernels) for the
    numba backend, given the queries per head."""
    return "numba" if queries <= NUMBA_MAX_QUERIES else "blas"


def attention_forward(q, k, v, scale=None, mask=None, keep=None, keep_scale=1.0):
    """(out (B, T_q, h, d_v), weights (B, h, T_q, T_k)) on the selected backend; see the module
    docstring for the arguments."""
    if not use_numba():
        return attention_forward_numpy(q, k, v, scale, mask, keep, keep_scale)
    shape = args.weights_shape(q, k, v)
    args.assert_keep(keep, shape)
    scale = args.scale_factor(scale, q.shape[3], q.dtype)
    mask = args.mask_in(mask, shape, q.dtype)
    if attention_engine(q.shape[1]) == "numba":
        return forward_kernel(q, k, v, scale, mask, keep, keep_scale)
    if tiles_fit(q, k, v):
        return tiles.forward(q, k, v, scale, mask, keep, keep_scale)
    return forward_composed(q, k, v, scale, args.additive(mask, q.dtype), keep, keep_scale,
                            softmax.softmax_forward_numba)


def attention_backward(q, k, v, weights, dout, scale=None, keep=None, keep_scale=1.0):
    """(dq, dk, dv) for attention_forward, from its weights and dL/dout, on the selected backend."""
    if not use_numba():
        return attention_backward_numpy(q, k, v, weights, dout, scale, keep, keep_scale)
    shape = args.weights_shape(q, k, v)
    args.assert_backward(q, weights, dout, v, shape)
    args.assert_keep(keep, shape)
    scale = args.scale_factor(scale, q.shape[3], q.dtype)
    if attention_engine(q.shape[1]) == "numba":
        return backward_kernel(q, k, v, weights, dout, scale, keep, keep_scale)
    if tiles_fit(q, k, v):
        return tiles.backward(q, k, v, weights, dout, scale, keep, keep_scale)
    return backward_composed(q, k, v, weights, dout, scale, keep, keep_scale, softmax.softmax_backward_numba)


# ---------------------------------------------------------------------------------------------
# The real tokens' rows (the compiler's rule skip_padding): no padded copies of q, k, v
# ---------------------------------------------------------------------------------------------

def attention_forward_rows(q, k, v, q_real, k_real, scale=None, mask=None, keep=None, keep_scale=1.0):
    """attention_forward among the real tokens only, on their rows: q (n_q, h, d), k (n_k, h, d), v (n_k, h, d_v)
    hold the rows of the True entries of q_real (B, T_q) and k_real (B, T_k), row-major (nn.fused.unpad's
    layout). Padding keys never receive weight, whatever the mask says. Returns (out (n_q, h, d_v), weights
    (B, h, T_q, T_k)), the weights zero at padding. The plain version (attention_forward_rows_numpy) puts the rows
    back into the padded layout, runs attention_forward, and takes the real rows of its output; the tile kernels
    read the rows in place when each batch row's real tokens come first (right padding)."""
    B, T_q, T_k = q_real.shape[0], q_real.shape[1], k_real.shape[1]
    starts = _tiles_starts(q, v, q_real, k_real)
    if starts is None:
        return _forward_padded(attention_forward, q, k, v, q_real, k_real, scale, mask, keep, keep_scale)
    shape = (B, q.shape[1], T_q, T_k)
    args.assert_keep(keep, shape)
    return tiles.forward_rows(q, k, v, *starts, T_q, T_k, args.scale_factor(scale, q.shape[2], q.dtype),
                              args.mask_in(mask, shape, q.dtype), keep, keep_scale)


def attention_backward_rows(q, k, v, q_real, k_real, weights, dout, scale=None, keep=None, keep_scale=1.0):
    """(dq, dk, dv) on the rows, for attention_forward_rows, from its weights and dL/dout (n_q, h, d_v)."""
    starts = _tiles_starts(q, v, q_real, k_real)
    if starts is None:
        return _backward_padded(attention_backward, q, k, v, q_real, k_real, weights, dout, scale, keep, keep_scale)
    args.assert_keep(keep, weights.shape)
    return tiles.backward_rows(q, k, v, *starts, weights, dout, args.scale_factor(scale, q.shape[2], q.dtype), keep,
                               keep_scale)


def attention_forward_rows_numpy(q, k, v, q_real, k_real, scale=None, mask=None, keep=None, keep_scale=1.0):
    """attention_forward_rows (NumPy twin): the rows put back into the padded layout, the NumPy twin of
    attention_forward, the real rows of its output."""
    return _forward_padded(attention_forward_numpy, q, k, v, q_real, k_real, scale, mask, keep, keep_scale)


def attention_backward_rows_numpy(q, k, v, q_real, k_real, weights, dout, scale=None, keep=None, keep_scale=1.0):
    """attention_backward_rows (NumPy twin)."""
    return _backward_padded(attention_backward_numpy, q, k, v, q_real, k_real, weights, dout, scale, keep,
                            keep_scale)


def _forward_padded(forward, q, k, v, q_real, k_real, scale, mask, keep, keep_scale):
    out, weights = forward(_to_padded(q, q_real), _to_padded(k, k_real), _to_padded(v, k_real), scale,
                           _keys_of(mask, k_real), keep, keep_scale)
    return out[q_real], weights


def _backward_padded(backward, q, k, v, q_real, k_real, weights, dout, scale, keep, keep_scale):
    grads = backward(_to_padded(q, q_real), _to_padded(k, k_real), _to_padded(v, k_real), weights,
                     _to_padded(dout, q_real), scale, keep, keep_scale)
    return grads[0][q_real], grads[1][k_real], grads[2][k_real]


def _to_padded(rows, real):
    """(n, ...) rows of the True entries of real (B, T) -> (B, T, ...), zeros elsewhere (nn.fused.repad)."""
    out = np.zeros(real.shape + rows.shape[1:], rows.dtype)
    out[real] = rows
    return out


def _keys_of(mask, k_real):
    """The mask with the padding keys removed as well: attention among the real tokens."""
    keys = k_real[:, None, None, :]
    if mask is None:
        return keys
    if mask.dtype == np.bool_:
        return mask & keys
    return np.where(keys, mask, -np.inf).astype(mask.dtype)


def _tiles_starts(q, v, q_real, k_real):
    """(q_start, k_start) when the tile kernels take these rows (numba backend, tiles' dtype and widths,
    each row's real tokens first), else None."""
    if not (use_numba() and tiles.tiles_take(q.dtype, q_real.shape[1], q.shape[2], v.shape[2])):
        return None
    q_start, k_start = _row_starts(q_real), _row_starts(k_real)
    return None if q_start is None or k_start is None else (q_start, k_start)


def _row_starts(real):
    """(starts (B+1,) of each batch row's first row, or None when some row's real tokens are not a prefix).
    A step asks this of the same two masks in every attention, forward and backward: they are looked up
    by content (their bytes) before they are computed again."""
    starts = _row_starts_of(real.shape, real.tobytes())
    return None if starts is None else starts.copy()


@functools.lru_cache(maxsize=16)
def _row_starts_of(shape, mask_bytes):
    real = np.frombuffer(mask_bytes, np.bool_).reshape(shape)
    lengths = real.sum(axis=1)
    if not np.array_equal(real, np.arange(real.shape[1])[None, :] < lengths[:, None]):
        return None
    return np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
