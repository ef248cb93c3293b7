"""Fused multi-head attention: softmax(Q·Kᵀ·scale + mask)·V for every head in one kernel.

The paper's Eq. 1, Attention(Q, K, V) = softmax(Q Kᵀ / √d_k) V, run as three separate ops
(matmul, softmax, matmul) writes the scores and the weights out in full, then reads them back,
and needs the heads split off into a (B, h, T, d_k) copy first. Here one kernel computes, for
each (batch row, head, query): the scores against every key, the masked softmax, and the
weighted sum of the values, and it reads Q, K, V in the layout the projections produce them:

    q (B, T_q, h, d_k), k (B, T_k, h, d_k), v (B, T_k, h, d_v)  ->  out (B, T_q, h, d_v)

so that `x @ W^Q` only needs a free reshape before it and `out.reshape(B, T_q, h * d_v) @ W^O`
after it. The attention weights (B, h, T_q, T_k) are returned too: the backward pass needs
them, and MultiHeadAttention shows them when asked.

    attention_forward(q, k, v, scale=None, mask=None, keep=None, keep_scale=1.0) -> (out, weights)
    attention_backward(q, k, v, weights, dout, scale=None, keep=None, keep_scale=1.0) -> (dq, dk, dv)

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
Each function has a Numba kernel (``*_numba``) and a NumPy twin (``*_numpy``, the readable
definition: batched matmuls and the softmax twin); the un-suffixed names dispatch on the
backend. With the numba backend, :func:`attention_engine` picks the fused kernel only where it
wins (one query per head: a decoding step); elsewhere the same op runs as OpenBLAS batched
products around the Numba softmax kernels, which measured 2-3x faster (bench/README.md).
float32 and float64; outputs are C-contiguous in the input dtype. The arguments are trusted:
nn.functional.fused_attention checks what users pass, and asserts here state the preconditions.
"""
import functools
import math
from types import SimpleNamespace

import numpy as np

from . import softmax as _softmax
from .backend import FASTMATH, lazy_kernels, threads_for, use_numba

# ---------------------------------------------------------------------------------------------
# Preconditions (nn.functional.fused_attention checks what users pass) and argument preparation
# ---------------------------------------------------------------------------------------------

def _weights_shape(q, k, v):
    """(B, h, T_q, T_k), asserting that q, k, v fit (see the module docstring)."""
    assert q.ndim == k.ndim == v.ndim == 4 and q.dtype == k.dtype == v.dtype, (q.shape, k.shape)
    assert k.shape[0] in (q.shape[0], 1) and k.shape[2:] == q.shape[2:], (q.shape, k.shape)
    assert v.shape[:3] == k.shape[:3], (k.shape, v.shape)
    return q.shape[0], q.shape[2], q.shape[1], k.shape[1]


def _scale(scale, d_k, dtype):
    """The factor on Q·Kᵀ: 1/√d_k unless given."""
    value = 1.0 / math.sqrt(d_k) if scale is None else float(scale)
    assert math.isfinite(value), scale
    return dtype.type(value)


def _mask_in(mask, weights_shape, dtype):
    """The mask in its own (unbroadcast) shape: boolean as given, floats in the weights' dtype."""
    if mask is None:
        return None
    assert mask.dtype == np.bool_ or mask.dtype.kind == "f", mask.dtype
    assert mask.ndim <= 4, mask.shape
    assert all(m in (1, w) for m, w in zip(mask.shape[::-1], weights_shape[::-1])), mask.shape
    return mask.astype(dtype, copy=False) if mask.dtype.kind == "f" else mask


def _additive(mask, dtype):
    """A prepared mask as additive logits: True -> 0, False -> -inf; floats as they are."""
    if mask is None or mask.dtype != np.bool_:
        return mask
    return np.where(mask, dtype.type(0), dtype.type(-np.inf))


def _assert_keep(keep, weights_shape):
    assert keep is None or (keep.dtype == np.bool_ and keep.shape == tuple(weights_shape))


def _assert_backward(q, weights, dout, v, weights_shape):
    assert weights.shape == weights_shape and dout.shape == q.shape[:3] + v.shape[3:]
    assert weights.dtype == dout.dtype == q.dtype


# ---------------------------------------------------------------------------------------------
# NumPy twins: the composition of matmul, softmax, matmul
# ---------------------------------------------------------------------------------------------

def _heads_first(x):
    return x.transpose(0, 2, 1, 3)  # (B, T, h, d) <-> (B, h, T, d), a view


def _matmul_tokens_first(a, b, batch=None):
    """a @ b for (B, h, ., .) operands, returned in (B, T, h, d) layout: the product is written
    straight through a transposed view of the result, so no copy is needed afterwards."""
    B, h, T, d = (batch or a.shape[0]), a.shape[1], a.shape[2], b.shape[3]
    out = np.empty((B, T, h, d), np.result_type(a, b))
    np.matmul(a, b, out=_heads_first(out))
    return out


def _forward_composed(q, k, v, scale, additive, keep, keep_scale, softmax_forward):
    scores = _heads_first(q) @ _heads_first(k).swapaxes(-1, -2)              # (B, h, T_q, T_k)
    weights = softmax_forward(scores, scale, additive)
    mixed = weights if keep is None else weights * keep * q.dtype.type(keep_scale)
    return _matmul_tokens_first(mixed, _heads_first(v), q.shape[0]), weights


def _backward_composed(q, k, v, weights, dout, scale, keep, keep_scale, softmax_backward):
    dropout = None if keep is None else keep * q.dtype.type(keep_scale)
    mixed = weights if dropout is None else weights * dropout
    dout_h = _heads_first(dout)
    dweights = dout_h @ _heads_first(v).swapaxes(-1, -2)                     # (B, h, T_q, T_k)
    if dropout is not None:
        dweights *= dropout
    dscores = softmax_backward(weights, dweights, scale)                     # includes the scale
    dq = _matmul_tokens_first(dscores, _heads_first(k))
    if k.shape[0] != q.shape[0]:  # keys shared by every row: sum their gradients over the batch
        dk = (dscores.swapaxes(-1, -2) @ _heads_first(q)).sum(axis=0, keepdims=True)
        dv = (mixed.swapaxes(-1, -2) @ dout_h).sum(axis=0, keepdims=True)
        return dq, np.ascontiguousarray(_heads_first(dk)), np.ascontiguousarray(_heads_first(dv))
    return (dq, _matmul_tokens_first(dscores.swapaxes(-1, -2), _heads_first(q)),
            _matmul_tokens_first(mixed.swapaxes(-1, -2), dout_h))


def attention_forward_numpy(q, k, v, scale=None, mask=None, keep=None, keep_scale=1.0):
    """(out, weights) of multi-head attention (NumPy twin): matmul, softmax twin, matmul."""
    weights_shape = _weights_shape(q, k, v)
    _assert_keep(keep, weights_shape)
    additive = _additive(_mask_in(mask, weights_shape, q.dtype), q.dtype)
    return _forward_composed(q, k, v, _scale(scale, q.shape[3], q.dtype), additive, keep,
                             keep_scale, _softmax.softmax_forward_numpy)


def attention_backward_numpy(q, k, v, weights, dout, scale=None, keep=None, keep_scale=1.0):
    """(dq, dk, dv) of attention_forward (NumPy twin)."""
    weights_shape = _weights_shape(q, k, v)
    _assert_backward(q, weights, dout, v, weights_shape)
    _assert_keep(keep, weights_shape)
    return _backward_composed(q, k, v, weights, dout, _scale(scale, q.shape[3], q.dtype), keep,
                              keep_scale, _softmax.softmax_backward_numpy)


# ---------------------------------------------------------------------------------------------
# Numba kernels
# ---------------------------------------------------------------------------------------------

# The steps of the fused kernel for one (batch row, head, query), written as plain functions
# that Numba compiles inline into the two kernels below (register_jitable in _numba_kernels).

def _scores_row(q_i, k, b, head, n_keys, scale, row):
    """row[j] = scale · q_i·k_j for the first n_keys keys. Backward uses it with scale 1 for
    the gradient of the weights, dO_i · v_j."""
    zero = row.dtype.type(0)
    for j in range(n_keys):
        k_j = k[b, j, head]
        total = zero
        for e in range(q_i.shape[0]):
            total += q_i[e] * k_j[e]
        row[j] = total * scale


def _add_mask_row(row, mask_row, mask_is_bool, n_keys):
    """row += mask: a False (or -inf) entry removes its key."""
    minus_inf = row.dtype.type(-np.inf)
    for j in range(n_keys):
        if mask_is_bool:
            if not mask_row[j]:
                row[j] += minus_inf
        else:
            row[j] += mask_row[j]


def _softmax_row(row, n_keys):
    """row = softmax(row) in place, shifted by its max; an all -inf row becomes zeros."""
    zero = row.dtype.type(0)
    top = row[0]
    for j in range(1, n_keys):
        top = max(top, row[j])
    if top == -np.inf:
        top = zero
    total = zero
    for j in range(n_keys):
        row[j] = _softmax._simd_exp(row[j] - top)
        total += row[j]
    if total != 0:
        inv = row.dtype.type(1) / total
        for j in range(n_keys):
            row[j] *= inv


def _mix_values(row, keep, b, head, i, dropping, keep_scale, v, b_kv, n_keys, o):
    """o = Σ_j p_j · v_j, p = the weights row after dropout."""
    zero = row.dtype.type(0)
    o[:] = 0
    for j in range(n_keys):
        p = row[j]
        if dropping:
            p = p * keep_scale if keep[b, head, i, j] else zero
        if p != 0:
            v_j = v[b_kv, j, head]
            for e in range(o.shape[0]):
                o[e] += p * v_j[e]


def _dropout_and_dv(row, dweights, keep, b, head, i, dropping, keep_scale, do_i, dv, n_keys):
    """Apply dropout's mask to dweights; dv_j += p̃_j · dO_i."""
    zero = row.dtype.type(0)
    for j in range(n_keys):
        p = row[j]
        if dropping:
            if keep[b, head, i, j]:
                p *= keep_scale
                dweights[j] *= keep_scale
            else:
                p = zero
                dweights[j] = zero
        if p != 0:
            dv_j = dv[b, j, head]
            for e in range(do_i.shape[0]):
                dv_j[e] += p * do_i[e]


def _dq_dk(row, dweights, scale, q_i, dq_i, k, dk, b, head, n_keys):
    """dS_j = scale · P_j · (dP_j − Σ dP·P); dq_i += dS_j · k_j, dk_j += dS_j · q_i."""
    dot = row.dtype.type(0)
    for j in range(n_keys):
        dot += dweights[j] * row[j]
    for j in range(n_keys):
        ds = scale * row[j] * (dweights[j] - dot)
        if ds != 0:
            k_j, dk_j = k[b, j, head], dk[b, j, head]
            for e in range(q_i.shape[0]):
                dq_i[e] += ds * k_j[e]
                dk_j[e] += ds * q_i[e]


@lazy_kernels
def _numba_kernels(numba):
    """Compile-on-first-use Numba kernels; returns a namespace of them.

    One task per (batch row, head). Every O(T_q·T_k·d) loop runs along a feature row, which is
    contiguous in the (B, T, h, d) layout: scores are dot products q_i·k_j, outputs and
    gradients are sums of rows of V, K and Q (axpy); LLVM vectorises both. Softmax uses the SIMD
    exp of the softmax kernels.
    """
    from numba.extending import register_jitable

    _softmax._numba_kernels()  # registers _simd_exp, used by _softmax_row
    for step in (_scores_row, _add_mask_row, _softmax_row, _mix_values, _dropout_and_dv, _dq_dk):
        register_jitable(inline="always")(step)
    njit = functools.partial(numba.njit, cache=True, fastmath=FASTMATH, parallel=True)
    prange = numba.prange

    @njit
    def forward(q, k, v, n_keys, scale, mask, mask_is_bool, keep, keep_scale, out, weights):
        """out, weights for q (B,T_q,h,d), keys/values k[:, :n_keys], v[:, :n_keys]. `mask` is
        (B or 1, h or 1, T_q or 1, n_keys), boolean (False adds -inf) or additive; empty: none."""
        B, T_q, h = q.shape[:3]
        masked, dropping, shared = mask.size > 0, keep.size > 0, k.shape[0] == 1
        mask_b, mask_h, mask_i = mask.shape[0] > 1, mask.shape[1] > 1, mask.shape[2] > 1
        for task in prange(B * h):
            b, head = task // h, task % h
            b_kv = 0 if shared else b
            for i in range(T_q):
                row = weights[b, head, i]
                _scores_row(q[b, i, head], k, b_kv, head, n_keys, scale, row)
                if masked:
                    mask_row = mask[b if mask_b else 0, head if mask_h else 0, i if mask_i else 0]
                    _add_mask_row(row, mask_row, mask_is_bool, n_keys)
                _softmax_row(row, n_keys)
                _mix_values(row, keep, b, head, i, dropping, keep_scale, v, b_kv, n_keys,
                            out[b, i, head])

    @njit
    def backward(q, k, v, n_keys, weights, dout, scale, keep, keep_scale, dq, dk, dv):
        """Fill dq, dk, dv (zeroed by the caller) for the forward above."""
        B, T_q, h = q.shape[:3]
        dropping = keep.size > 0
        for task in prange(B * h):
            b, head = task // h, task % h
            dweights = np.empty(n_keys, dtype=q.dtype)
            one = dweights.dtype.type(1)
            for i in range(T_q):
                row, do_i = weights[b, head, i], dout[b, i, head]
                _scores_row(do_i, v, b, head, n_keys, one, dweights)  # dweights[j] = dO_i · v_j
                _dropout_and_dv(row, dweights, keep, b, head, i, dropping, keep_scale, do_i, dv,
                                n_keys)
                _dq_dk(row, dweights, scale, q[b, i, head], dq[b, i, head], k, dk, b, head, n_keys)

    return SimpleNamespace(forward=forward, backward=backward)


def _leading_keys(x):
    """(C-contiguous array a, n) with x == a[:, :n]: a key/value cache that grows along T is read
    in place from its buffer; any other non-contiguous layout is copied once."""
    if x.flags.c_contiguous:
        return x, x.shape[1]
    base = x.base
    if isinstance(base, np.ndarray) and base.flags.c_contiguous and base.dtype == x.dtype:
        B, T, h, d = x.shape
        capacity = base.size // max(B * h * d, 1)
        if base.size == B * capacity * h * d and capacity >= T:
            whole = base.reshape(B, capacity, h, d)
            if (whole.strides == x.strides
                    and whole.__array_interface__["data"][0] == x.__array_interface__["data"][0]):
                return whole, T
    return np.ascontiguousarray(x), x.shape[1]


_NO_MASK = {np.dtype(t): np.zeros((0, 0, 0, 0), t) for t in (np.float32, np.float64)}
_NO_KEEP = np.zeros((0, 0, 0, 0), np.bool_)


def _mask_4d(mask, weights_shape):
    """The mask as a C-contiguous 4-D array whose first three dims are 1 or full size and whose
    last is T_k, for the kernel to index without broadcasting it to the weights' shape."""
    mask = mask.reshape((1,) * (4 - mask.ndim) + mask.shape)
    if mask.shape[3] != weights_shape[3]:
        mask = np.broadcast_to(mask, mask.shape[:3] + (weights_shape[3],))
    return np.ascontiguousarray(mask)


def _keep_args(keep, keep_scale, dtype):
    if keep is None:
        return _NO_KEEP, dtype.type(1)
    return np.ascontiguousarray(keep), dtype.type(keep_scale)


def _forward_kernel(q, k, v, scale, mask, keep, keep_scale):
    weights_shape = (q.shape[0], q.shape[2], q.shape[1], k.shape[1])
    out = np.empty(q.shape[:3] + v.shape[3:], q.dtype)
    weights = np.empty(weights_shape, q.dtype)
    if weights.size == 0:
        out[...] = 0
        return out, weights
    mask = _NO_MASK[q.dtype] if mask is None else _mask_4d(mask, weights_shape)
    keep, keep_scale = _keep_args(keep, keep_scale, q.dtype)
    k, n_keys = _leading_keys(k)
    v, _ = _leading_keys(v)
    with threads_for(weights.size + out.size):  # elements written, as the other kernels count
        _numba_kernels().forward(np.ascontiguousarray(q), k, v, n_keys, scale, mask,
                                 mask.dtype == np.bool_, keep, keep_scale, out, weights)
    return out, weights


def _backward_kernel(q, k, v, weights, dout, scale, keep, keep_scale):
    if k.shape[0] != q.shape[0]:  # shared keys: expand, then sum their gradients over the batch
        batch = (q.shape[0],)
        dq, dk, dv = _backward_kernel(q, np.broadcast_to(k, batch + k.shape[1:]),
                                      np.broadcast_to(v, batch + v.shape[1:]), weights, dout, scale,
                                      keep, keep_scale)
        return dq, dk.sum(axis=0, keepdims=True), dv.sum(axis=0, keepdims=True)
    dq, dk, dv = np.zeros(q.shape, q.dtype), np.zeros(k.shape, q.dtype), np.zeros(v.shape, q.dtype)
    if weights.size == 0:
        return dq, dk, dv
    keep, keep_scale = _keep_args(keep, keep_scale, q.dtype)
    with threads_for(dq.size + dk.size + dv.size):
        _numba_kernels().backward(np.ascontiguousarray(q), np.ascontiguousarray(k),
                                  np.ascontiguousarray(v), k.shape[1], np.ascontiguousarray(weights),
                                  np.ascontiguousarray(dout), scale, keep, keep_scale, dq, dk, dv)
    return dq, dk, dv


def attention_forward_numba(q, k, v, scale=None, mask=None, keep=None, keep_scale=1.0):
    """(out, weights) of multi-head attention (Numba kernel)."""
    weights_shape = _weights_shape(q, k, v)
    _assert_keep(keep, weights_shape)
    return _forward_kernel(q, k, v, _scale(scale, q.shape[3], q.dtype),
                           _mask_in(mask, weights_shape, q.dtype), keep, keep_scale)


def attention_backward_numba(q, k, v, weights, dout, scale=None, keep=None, keep_scale=1.0):
    """(dq, dk, dv) of attention_forward (Numba kernel)."""
    weights_shape = _weights_shape(q, k, v)
    _assert_backward(q, weights, dout, v, weights_shape)
    _assert_keep(keep, weights_shape)
    return _backward_kernel(q, k, v, weights, dout, _scale(scale, q.shape[3], q.dtype), keep,
                            keep_scale)


# ---------------------------------------------------------------------------------------------
# Dispatch
# ---------------------------------------------------------------------------------------------

# With the numba backend, the fused Numba kernel runs when each head has at most this many
# queries; otherwise the same op runs as BLAS matmuls around the Numba softmax kernels.
# Measured with bench/attention shapes (bench/README.md): the kernel computes one short dot
# product per (query, key) pair and stays 2-3x slower than OpenBLAS's batched products once a
# head has a few queries, while at one query per head (a decoding step) it ties forward and is
# 3-5x faster backward (BLAS handles a 1-row product poorly).
NUMBA_MAX_QUERIES = 1


def attention_engine(batch, heads, queries, keys):
    """'numba' (the fused kernel) or 'blas' (matmul, Numba softmax, matmul) for the numba backend."""
    return "numba" if queries <= NUMBA_MAX_QUERIES else "blas"


def attention_forward(q, k, v, scale=None, mask=None, keep=None, keep_scale=1.0):
    """(out (B, T_q, h, d_v), weights (B, h, T_q, T_k)) on the selected backend; see the module
    docstring for the arguments."""
    if not use_numba():
        return attention_forward_numpy(q, k, v, scale, mask, keep, keep_scale)
    weights_shape = _weights_shape(q, k, v)
    _assert_keep(keep, weights_shape)
    scale = _scale(scale, q.shape[3], q.dtype)
    mask = _mask_in(mask, weights_shape, q.dtype)
    if attention_engine(*weights_shape) == "numba":
        return _forward_kernel(q, k, v, scale, mask, keep, keep_scale)
    return _forward_composed(q, k, v, scale, _additive(mask, q.dtype), keep, keep_scale,
                             _softmax.softmax_forward_numba)


def attention_backward(q, k, v, weights, dout, scale=None, keep=None, keep_scale=1.0):
    """(dq, dk, dv) for attention_forward, from its weights and dL/dout, on the selected backend."""
    if not use_numba():
        return attention_backward_numpy(q, k, v, weights, dout, scale, keep, keep_scale)
    weights_shape = _weights_shape(q, k, v)
    _assert_backward(q, weights, dout, v, weights_shape)
    _assert_keep(keep, weights_shape)
    scale = _scale(scale, q.shape[3], q.dtype)
    if attention_engine(*weights_shape) == "numba":
        return _backward_kernel(q, k, v, weights, dout, scale, keep, keep_scale)
    return _backward_composed(q, k, v, weights, dout, scale, keep, keep_scale,
                              _softmax.softmax_backward_numba)
