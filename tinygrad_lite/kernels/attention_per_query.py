"""The per-query attention kernels: for each (batch row, head, query), its scores against every key,
the masked softmax and the weighted sum of the values, in one pass; and the backward of it.

One task per (batch row, head). Every O(T_q·T_k·d) loop runs along a feature row, which is contiguous
in the (B, T, h, d) layout: scores are dot products q_i·k_j, outputs and gradients are sums of rows of
V, K and Q (axpy); LLVM vectorises both. Softmax uses the SIMD exp of the softmax kernels. It wins
where a head has one query (a decoding step: BLAS handles a 1-row product poorly), and reads a
key/value cache that grows along T in place. float32 and float64; arguments as kernels.attention's.
"""
import functools
from types import SimpleNamespace

import numpy as np

from . import attention_args as args
from . import softmax
from .backend import FASTMATH, lazy_kernels, threads_for

# With the numba backend, the fused per-query kernel runs when each head has at most this many
# queries; otherwise the same op runs as BLAS matmuls around the Numba softmax kernels, or as the
# tile kernels. Measured with bench/attention shapes (bench/README.md): the kernel computes one short
# dot product per (query, key) pair and stays 2-3x slower than OpenBLAS's batched products once a
# head has a few queries, while at one query per head (a decoding step) it ties forward and is
# 3-5x faster backward (BLAS handles a 1-row product poorly).
NUMBA_MAX_QUERIES = 1

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
        row[j] = softmax.simd_exp(row[j] - top)
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



_STEPS = (_scores_row, _add_mask_row, _softmax_row, _mix_values, _dropout_and_dv, _dq_dk)


@lazy_kernels
def _numba_kernels(numba):
    """Compile-on-first-use: the forward and the backward kernel, in a namespace."""
    from numba.extending import register_jitable

    softmax._numba_kernels()  # registers simd_exp, used by _softmax_row
    for step in _STEPS:
        register_jitable(inline="always")(step)
    njit = functools.partial(numba.njit, cache=True, fastmath=FASTMATH, parallel=True)
    return SimpleNamespace(forward=_compile_forward(njit, numba.prange),
                           backward=_compile_backward(njit, numba.prange))


def _compile_forward(njit, prange):
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
    return forward


def _compile_backward(njit, prange):
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
    return backward


def leading_keys(x):
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


def _keep_args(keep, keep_scale, dtype):
    if keep is None:
        return args.NO_KEEP, dtype.type(1)
    return np.ascontiguousarray(keep), dtype.type(keep_scale)


def forward_kernel(q, k, v, scale, mask, keep, keep_scale):
    """(out, weights) on the per-query kernel, from a prepared scale and mask (kernels.attention_args)."""
    weights_shape = (q.shape[0], q.shape[2], q.shape[1], k.shape[1])
    out = np.empty(q.shape[:3] + v.shape[3:], q.dtype)
    weights = np.empty(weights_shape, q.dtype)
    if weights.size == 0:
        out[...] = 0
        return out, weights
    mask = _NO_MASK[q.dtype] if mask is None else args.mask_4d(mask, weights_shape)
    keep, keep_scale = _keep_args(keep, keep_scale, q.dtype)
    k, n_keys = leading_keys(k)
    v, _ = leading_keys(v)
    with threads_for(weights.size + out.size):  # elements written, as the other kernels count
        _numba_kernels().forward(np.ascontiguousarray(q), k, v, n_keys, scale, mask,
                                 mask.dtype == np.bool_, keep, keep_scale, out, weights)
    return out, weights


def backward_kernel(q, k, v, weights, dout, scale, keep, keep_scale):
    """(dq, dk, dv) of forward_kernel."""
    if k.shape[0] != q.shape[0]:  # shared keys: expand, then sum their gradients over the batch
        batch = (q.shape[0],)
        dq, dk, dv = backward_kernel(q, np.broadcast_to(k, batch + k.shape[1:]),
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
    shape = args.weights_shape(q, k, v)
    args.assert_keep(keep, shape)
    return forward_kernel(q, k, v, args.scale_factor(scale, q.shape[3], q.dtype), args.mask_in(mask, shape, q.dtype),
                          keep, keep_scale)


def attention_backward_numba(q, k, v, weights, dout, scale=None, keep=None, keep_scale=1.0):
    """(dq, dk, dv) of attention_forward (Numba kernel)."""
    shape = args.weights_shape(q, k, v)
    args.assert_backward(q, weights, dout, v, shape)
    args.assert_keep(keep, shape)
    return backward_kernel(q, k, v, weights, dout, args.scale_factor(scale, q.shape[3], q.dtype), keep, keep_scale)
