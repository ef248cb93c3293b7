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
    attention_forward_rows(q, k, v, q_real, k_real, ...), attention_backward_rows(...)

The *_rows pair takes only the real tokens' rows, q (n_q, h, d_k) and k, v (n_k, h, .), with the
(B, T) bool masks of where they sit (Transformer.forward_tokens): attention among the real tokens,
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
Each function has a Numba kernel (``*_numba``) and a NumPy twin (``*_numpy``, the readable
definition: batched matmuls and the softmax twin); the un-suffixed names dispatch on the
backend. With the numba backend, :func:`attention_engine` picks the fused kernel only where it
wins (one query per head: a decoding step). Training shapes in float32 (d_k and d_v multiples of
8, keys per batch row: :func:`tiles_fit`) run the tile kernels: one (batch row, head) at a time,
its Q·Kᵀ, P·V and gradient products on 8-lane SIMD micro-kernels (kernels.simd), where OpenBLAS
spends more time entering and leaving each 16 × 32 product than multiplying; they also read the
real tokens' rows in place. Everything else runs as OpenBLAS batched products around the Numba
softmax kernels (bench/README.md, "Tenth pass"). float32 and float64; `out` is C-contiguous in the
input dtype (the tile kernels' weights are a view of a (B, h, T_q, T_k rounded up to 8) array).
The arguments are trusted: nn.functional.fused_attention checks what users pass, and asserts here
state the preconditions.
"""
import functools
import math
from types import SimpleNamespace

import numpy as np

from . import simd
from . import softmax as _softmax
from .backend import FASTMATH, lazy_kernels, threads_for, use_numba
from .simd import (
    LANES,
    rows_product,
    v_copy,
    v_dot,
    v_keep,
    v_max,
    v_scale_add,
    v_shift_scale,
    v_softmax_grad,
    v_sum,
    v_transpose8,
)

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

    simd.register(numba)
    register_jitable(inline="always")(_tokens_last_into)
    register_jitable(inline="always")(_task)
    serial = functools.partial(numba.njit, cache=True, fastmath=FASTMATH)

    @serial
    def tiles_forward(q, k, v, q_start, k_start, T_q, scale, mask_add, keep, keep_scale, out, weights):
        """out (n_q,h,d_v) and weights (B,h,T_q,n_pad) for float32 rows q (n_q,h,d), k (n_k,h,d), v (n_k,h,d_v):
        batch row b's queries are rows q_start[b]..q_start[b+1] (positions 0, 1, ..), its keys k_start[b]..;
        one (batch row, head) at a time, on tiles of n_pad keys (the longest row's, rounded up to LANES).
        mask_add (Bm,Hm,Im,n_pad) is additive by position; keep (B,h,T_q,n_pad) or empty."""
        n_q, h, d = q.shape
        B, d_v, n_pad = q_start.size - 1, v.shape[2], weights.shape[3]
        dropping = keep.size > 0
        m_h, m_i = mask_add.shape[1], mask_add.shape[2]
        mask_b, mask_h, mask_i = mask_add.shape[0] > 1, m_h > 1, m_i > 1
        qf, kf, vf, of, wf = q.reshape(q.size), k.reshape(k.size), v.reshape(v.size), out.reshape(out.size), \
            weights.reshape(weights.size)
        mf, keepf = mask_add.reshape(mask_add.size), keep.reshape(keep.size)
        zero, minus_inf, one = q.dtype.type(0), q.dtype.type(-np.inf), q.dtype.type(1)
        kt = np.empty(d * n_pad, q.dtype)                           # Kᵀ of one head, (d, n_pad)
        dropped = np.empty(T_q * n_pad, q.dtype)                    # P̃ = P · keep / (1 - p)
        for task in range(B * h):
            b, head, queries, keys, q0, k0, v0, o0, w0 = _task(task, h, d, d_v, T_q, n_pad, q_start, k_start)
            _tokens_last_into(kt, kf, k0, h * d, keys, d, n_pad)
            rows_product(wf, w0, n_pad, qf, q0, h * d, 1, d, kt, 0, n_pad, queries, n_pad)      # Q·Kᵀ
            for i in range(queries):                                # ·scale + mask, − the row's max
                row = w0 + i * n_pad
                m = (((b if mask_b else 0) * m_h + (head if mask_h else 0)) * m_i + (i if mask_i else 0)) * n_pad
                for c in range(0, n_pad, LANES):
                    v_scale_add(wf, row + c, scale, mf, m + c)
                for j in range(keys, n_pad):                        # no key there
                    wf[row + j] = minus_inf
                top = minus_inf
                for c in range(0, n_pad, LANES):
                    top = max(top, v_max(wf, row + c))
                shift = zero if top == minus_inf else -top
                for c in range(0, n_pad, LANES):
                    v_shift_scale(wf, row + c, shift, one)
            tile = wf[w0:w0 + queries * n_pad]                      # a view indexed from 0: LLVM vectorises
            for t in range(tile.size):
                tile[t] = _softmax._simd_exp(tile[t])
            for i in range(queries):                                # / the row's sum
                row = w0 + i * n_pad
                total = zero
                for c in range(0, n_pad, LANES):
                    total += v_sum(wf, row + c)
                inv = one / total if total != zero else zero
                for c in range(0, n_pad, LANES):
                    v_shift_scale(wf, row + c, zero, inv)
                    if dropping:
                        v_copy(dropped, i * n_pad + c, wf, row + c)
                        v_keep(dropped, i * n_pad + c, keepf, row + c, keep_scale)
            for t in range(w0 + queries * n_pad, w0 + T_q * n_pad):  # no query there
                wf[t] = zero
            mixed, m0 = (dropped, 0) if dropping else (wf, w0)
            rows_product(of, o0, h * d_v, mixed, m0, n_pad, 1, keys, vf, v0, h * d_v, queries, d_v)  # P̃·V

    @serial
    def tiles_backward(q, k, v, q_start, k_start, weights, dout, scale, keep, keep_scale, dq, dk, dv):
        """dq, dk, dv (every row written) for tiles_forward, from its padded weights (B,h,T_q,n_pad)."""
        n_q, h, d = q.shape
        B, T_q, d_v, n_pad = q_start.size - 1, weights.shape[2], v.shape[2], weights.shape[3]
        dropping = keep.size > 0
        qf, kf, vf, gf, wf = q.reshape(q.size), k.reshape(k.size), v.reshape(v.size), dout.reshape(dout.size), \
            weights.reshape(weights.size)
        dqf, dkf, dvf, keepf = dq.reshape(dq.size), dk.reshape(dk.size), dv.reshape(dv.size), keep.reshape(keep.size)
        zero = q.dtype.type(0)
        vt = np.empty(d_v * n_pad, q.dtype)                         # Vᵀ of one head, (d_v, n_pad)
        g = np.empty(T_q * n_pad, q.dtype)                          # dP = dO·Vᵀ, then dS
        dropped = np.empty(T_q * n_pad, q.dtype)                    # P̃
        for task in range(B * h):
            b, head, queries, keys, q0, k0, v0, o0, w0 = _task(task, h, d, d_v, T_q, n_pad, q_start, k_start)
            _tokens_last_into(vt, vf, v0, h * d_v, keys, d_v, n_pad)
            rows_product(g, 0, n_pad, gf, o0, h * d_v, 1, d_v, vt, 0, n_pad, queries, n_pad)    # dO·Vᵀ
            for i in range(queries):
                row, w_row = i * n_pad, w0 + i * n_pad
                dot = zero
                for c in range(0, n_pad, LANES):
                    if dropping:
                        v_keep(g, row + c, keepf, w_row + c, keep_scale)
                        v_copy(dropped, row + c, wf, w_row + c)
                        v_keep(dropped, row + c, keepf, w_row + c, keep_scale)
                    dot += v_dot(g, row + c, wf, w_row + c)
                for c in range(0, n_pad, LANES):
                    v_softmax_grad(g, row + c, wf, w_row + c, dot, scale)
            mixed, m0 = (dropped, 0) if dropping else (wf, w0)
            rows_product(dvf, v0, h * d_v, mixed, m0, 1, n_pad, queries, gf, o0, h * d_v, keys, d_v)  # P̃ᵀ·dO
            rows_product(dkf, k0, h * d, g, 0, 1, n_pad, queries, qf, q0, h * d, keys, d)              # dSᵀ·Q
            rows_product(dqf, q0, h * d, g, 0, n_pad, 1, keys, kf, k0, h * d, queries, d)              # dS·K

    return SimpleNamespace(forward=forward, backward=backward, tiles_forward=tiles_forward,
                           tiles_backward=tiles_backward)


def _tokens_last_into(out, x, x0, x_step, n, width, n_pad):
    """out[e·n_pad + j] = x[x0 + j·x_step + e] for j < n, e < width (a multiple of LANES), and 0 for
    n <= j < n_pad: the (n, width) rows of one head of keys or values as (width, n_pad) columns."""
    full = n - n % LANES
    for j in range(0, full, LANES):
        for e in range(0, width, LANES):
            v_transpose8(out, e * n_pad + j, n_pad, x, x0 + j * x_step + e, x_step)
    for e in range(width):
        for j in range(full, n):
            out[e * n_pad + j] = x[x0 + j * x_step + e]
        for j in range(n, n_pad):
            out[e * n_pad + j] = 0


def _task(task, h, d, d_v, T_q, n_pad, q_start, k_start):
    """Task `task` of the tile kernels: its batch row and head, its query and key counts, and where its
    q, k, v, out rows and its weights tile start in the flat arrays."""
    b, head = task // h, task % h
    queries, keys = q_start[b + 1] - q_start[b], k_start[b + 1] - k_start[b]
    q0, k0, v0 = (q_start[b] * h + head) * d, (k_start[b] * h + head) * d, (k_start[b] * h + head) * d_v
    return b, head, queries, keys, q0, k0, v0, (q_start[b] * h + head) * d_v, task * T_q * n_pad


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


def tiles_fit(q, k, v):
    """Whether the tile kernels take q, k, v: float32, keys per row (not shared), d_k and d_v multiples of
    LANES, more than one query per head."""
    return k.shape[0] == q.shape[0] and _tiles_take(q.dtype, q.shape[1], q.shape[3], v.shape[3])


def _tiles_take(dtype, queries, d_k, d_v):
    return dtype == np.float32 and queries > NUMBA_MAX_QUERIES and d_k % LANES == 0 and d_v % LANES == 0


def _padded_additive(mask, weights_shape, n_pad):
    """The mask as float32 additive logits (0 keeps, -inf removes) in its own broadcast shape, 4-D, its
    last dim padded with -inf to n_pad."""
    if mask is None:
        mask = np.zeros((1, 1, 1, weights_shape[3]), np.float32)
    additive = _mask_4d(_additive(mask, np.dtype(np.float32)), weights_shape)
    return _padded(additive.astype(np.float32, copy=False), n_pad, -np.inf)


def _padded(x, n_pad, fill=0):
    """x (..., n) as a C-contiguous (..., n_pad) array, the new columns set to `fill`."""
    if x.shape[-1] == n_pad:
        return np.ascontiguousarray(x)
    out = np.full(x.shape[:-1] + (n_pad,), fill, x.dtype)
    out[..., :x.shape[-1]] = x
    return out


def _padded_weights(weights, n_pad):
    """The (B, h, T_q, n_pad) array tiles_forward wrote, when `weights` is its view; else a padded copy."""
    base = weights.base
    if (isinstance(base, np.ndarray) and base.shape == weights.shape[:3] + (n_pad,) and base.flags.c_contiguous
            and base.dtype == weights.dtype and base.strides == weights.strides
            and base.__array_interface__["data"][0] == weights.__array_interface__["data"][0]):
        return base
    return _padded(weights, n_pad)


def _starts(B, T):
    return np.arange(B + 1, dtype=np.int64) * T


def _tiles_forward(q, k, v, scale, mask, keep, keep_scale):
    """tiles_forward on the padded layout: every position of (B, T, h, d) is a row."""
    B, T_q, h, _ = q.shape
    out, weights = _tiles_forward_rows(q.reshape((-1,) + q.shape[2:]), k.reshape((-1,) + k.shape[2:]),
                                       v.reshape((-1,) + v.shape[2:]), _starts(B, T_q), _starts(B, k.shape[1]),
                                       T_q, k.shape[1], scale, mask, keep, keep_scale)
    return out.reshape(q.shape[:3] + v.shape[3:]), weights


def _tiles_forward_rows(q, k, v, q_start, k_start, T_q, T_k, scale, mask, keep, keep_scale):
    B, h = q_start.size - 1, q.shape[1]
    n_pad = -(-T_k // LANES) * LANES
    out = np.empty(q.shape[:2] + v.shape[2:], q.dtype)
    weights = np.empty((B, h, T_q, n_pad), q.dtype)
    keep = _NO_KEEP if keep is None else _padded(keep, n_pad, False)
    _numba_kernels().tiles_forward(np.ascontiguousarray(q), np.ascontiguousarray(k), np.ascontiguousarray(v), q_start,
                                   k_start, T_q, scale, _padded_additive(mask, (B, h, T_q, T_k), n_pad), keep,
                                   q.dtype.type(keep_scale), out, weights)
    return out, weights[..., :T_k]


def _tiles_backward(q, k, v, weights, dout, scale, keep, keep_scale):
    B, T_q = q.shape[:2]
    grads = _tiles_backward_rows(*(x.reshape((-1,) + x.shape[2:]) for x in (q, k, v)), _starts(B, T_q),
                                 _starts(B, k.shape[1]), weights, dout.reshape((-1,) + dout.shape[2:]), scale, keep,
                                 keep_scale)
    return tuple(g.reshape(x.shape) for g, x in zip(grads, (q, k, v)))


def _tiles_backward_rows(q, k, v, q_start, k_start, weights, dout, scale, keep, keep_scale):
    n_pad = -(-weights.shape[3] // LANES) * LANES
    dq, dk, dv = np.empty(q.shape, q.dtype), np.empty(k.shape, q.dtype), np.empty(v.shape, q.dtype)
    keep = _NO_KEEP if keep is None else _padded(keep, n_pad, False)
    _numba_kernels().tiles_backward(np.ascontiguousarray(q), np.ascontiguousarray(k), np.ascontiguousarray(v), q_start,
                                    k_start, _padded_weights(weights, n_pad), np.ascontiguousarray(dout), scale, keep,
                                    q.dtype.type(keep_scale), dq, dk, dv)
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
# The real tokens' rows (Transformer.forward_tokens): no padded copies of q, k, v
# ---------------------------------------------------------------------------------------------

def _to_padded(rows, real):
    """(n, ...) rows of the True entries of real (B, T) -> (B, T, ...), zeros elsewhere (nn.functional.repad)."""
    out = np.zeros(real.shape + rows.shape[1:], rows.dtype)
    out[real] = rows
    return out


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


def _tiles_starts(q, v, q_real, k_real):
    """(q_start, k_start) when the tile kernels take these rows (numba backend, tiles' dtype and widths,
    each row's real tokens first), else None."""
    if not (use_numba() and _tiles_take(q.dtype, q_real.shape[1], q.shape[2], v.shape[2])):
        return None
    q_start, k_start = _row_starts(q_real), _row_starts(k_real)
    return None if q_start is None or k_start is None else (q_start, k_start)


def _keys_of(mask, k_real):
    """The mask with the padding keys removed as well: attention among the real tokens."""
    keys = k_real[:, None, None, :]
    if mask is None:
        return keys
    if mask.dtype == np.bool_:
        return mask & keys
    return np.where(keys, mask, -np.inf).astype(mask.dtype)


def attention_forward_rows(q, k, v, q_real, k_real, scale=None, mask=None, keep=None, keep_scale=1.0):
    """attention_forward among the real tokens only, on their rows: q (n_q, h, d), k (n_k, h, d), v (n_k, h, d_v)
    hold the rows of the True entries of q_real (B, T_q) and k_real (B, T_k), row-major (nn.functional.unpad's
    layout). Padding keys never receive weight, whatever the mask says. Returns (out (n_q, h, d_v), weights
    (B, h, T_q, T_k)), the weights zero at padding. The plain version puts the rows back into the padded layout,
    runs attention_forward, and takes the real rows of its output; the tile kernels read the rows in place when
    each batch row's real tokens come first (right padding)."""
    B, T_q, T_k = q_real.shape[0], q_real.shape[1], k_real.shape[1]
    starts = _tiles_starts(q, v, q_real, k_real)
    if starts is not None:
        weights_shape = (B, q.shape[1], T_q, T_k)
        _assert_keep(keep, weights_shape)
        return _tiles_forward_rows(q, k, v, *starts, T_q, T_k, _scale(scale, q.shape[2], q.dtype),
                                   _mask_in(mask, weights_shape, q.dtype), keep, keep_scale)
    out, weights = attention_forward(_to_padded(q, q_real), _to_padded(k, k_real), _to_padded(v, k_real), scale,
                                     _keys_of(mask, k_real), keep, keep_scale)
    return out[q_real], weights


def attention_backward_rows(q, k, v, q_real, k_real, weights, dout, scale=None, keep=None, keep_scale=1.0):
    """(dq, dk, dv) on the rows, for attention_forward_rows, from its weights and dL/dout (n_q, h, d_v)."""
    starts = _tiles_starts(q, v, q_real, k_real)
    if starts is not None:
        _assert_keep(keep, weights.shape)
        return _tiles_backward_rows(q, k, v, *starts, weights, dout, _scale(scale, q.shape[2], q.dtype), keep,
                                    keep_scale)
    grads = attention_backward(_to_padded(q, q_real), _to_padded(k, k_real), _to_padded(v, k_real), weights,
                               _to_padded(dout, q_real), scale, keep, keep_scale)
    return grads[0][q_real], grads[1][k_real], grads[2][k_real]


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
    if tiles_fit(q, k, v):
        return _tiles_forward(q, k, v, scale, mask, keep, keep_scale)
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
    if tiles_fit(q, k, v):
        return _tiles_backward(q, k, v, weights, dout, scale, keep, keep_scale)
    return _backward_composed(q, k, v, weights, dout, scale, keep, keep_scale,
                              _softmax.softmax_backward_numba)
