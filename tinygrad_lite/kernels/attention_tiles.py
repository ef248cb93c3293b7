"""The tile kernels of attention: one (batch row, head) at a time on 8-lane SIMD micro-kernels.

For float32 training shapes (d_k and d_v multiples of 8, more than one query per head, keys per batch
row: `tiles_fit`), Q·Kᵀ, P·V and the gradient products of one (batch row, head) run on
kernels.simd's rows_product, where OpenBLAS spends more time entering and leaving each 16 × 32
product than multiplying (bench/README.md, "Tenth pass"). A head's scores are a tile of n_pad
columns, the longest row's key count rounded up to LANES; the weights come back as a view of that
(B, h, T_q, n_pad) array, which the backward reads again.

The kernels read rows, q (n_q, h, d), k and v (n_k, h, .), with each batch row's first row in
q_start / k_start: the padded layout (B, T, h, d) is the case of equal counts (`forward`,
`backward`), and the kept rows of the compiler's rule skip_padding are read in place when each
batch row's real tokens come first (`forward_rows`, `backward_rows`).
"""
import functools
from types import SimpleNamespace

import numpy as np

from . import attention_args as args
from . import simd, softmax
from .attention_per_query import NUMBA_MAX_QUERIES
from .backend import FASTMATH, lazy_kernels
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


@lazy_kernels
def _numba_kernels(numba):
    """Compile-on-first-use: the forward and the backward tile kernel, in a namespace."""
    from numba.extending import register_jitable

    softmax._numba_kernels()  # registers simd_exp, used by tiles_forward
    simd.register(numba)
    register_jitable(inline="always")(tokens_last_into)
    register_jitable(inline="always")(_task)
    register_jitable(inline="always")(_softmax_block)
    register_jitable(inline="always")(_softmax_grad_block)
    register_jitable(inline="always")(_nonzero_width)
    serial = functools.partial(numba.njit, cache=True, fastmath=FASTMATH)
    return SimpleNamespace(tiles_forward=_compile_forward(serial), tiles_backward=_compile_backward(serial))


def _compile_forward(serial):
    @serial
    def tiles_forward(q, k, v, q_start, k_start, T_q, scale, mask_add, reach, keep, keep_scale, out, weights):
        """out (n_q,h,d_v) and weights (B,h,T_q,n_pad) for float32 rows q (n_q,h,d), k (n_k,h,d), v (n_k,h,d_v):
        batch row b's queries are rows q_start[b]..q_start[b+1] (positions 0, 1, ..), its keys k_start[b]..;
        one (batch row, head) at a time, on tiles of n_pad keys (the longest row's, rounded up to LANES).
        mask_add (Bm,Hm,Im,n_pad) is additive by position, reach (Bm,Hm,Im) 1 + the last key each of its rows
        keeps: a block of LANES queries computes its scores up to its rows' furthest reach only (a causal mask
        skips the keys after the block, ~44% of the work at T = 64). keep (B,h,T_q,n_pad) or empty."""
        n_q, h, d = q.shape
        B, d_v, n_pad = q_start.size - 1, v.shape[2], weights.shape[3]
        dropping = keep.size > 0
        m_h, m_i = mask_add.shape[1], mask_add.shape[2]
        mask_b, mask_h, mask_i = mask_add.shape[0] > 1, m_h > 1, m_i > 1
        qf, kf, vf, of, wf = q.reshape(q.size), k.reshape(k.size), v.reshape(v.size), out.reshape(out.size), \
            weights.reshape(weights.size)
        mf, keepf, reachf = mask_add.reshape(mask_add.size), keep.reshape(keep.size), reach.reshape(reach.size)
        zero = q.dtype.type(0)
        kt = np.empty(d * n_pad, q.dtype)                           # Kᵀ of one head, (d, n_pad)
        scores = np.empty(LANES * n_pad, q.dtype)                   # a block's scores, (rows, width)
        dropped = np.empty(T_q * n_pad, q.dtype)                    # P̃ = P · keep / (1 - p)
        for task in range(B * h):
            b, head, queries, keys, q0, k0, v0, o0, w0 = _task(task, h, d, d_v, T_q, n_pad, q_start, k_start)
            tokens_last_into(kt, kf, k0, h * d, keys, d, n_pad)
            m_row0 = ((b if mask_b else 0) * m_h + (head if mask_h else 0)) * m_i
            for i0 in range(0, queries, LANES):
                i1 = min(i0 + LANES, queries)
                width = 0
                for i in range(i0, i1):
                    width = max(width, min(reachf[m_row0 + (i if mask_i else 0)], keys))
                width = -(-width // LANES) * LANES
                rows_product(scores, 0, width, qf, q0 + i0 * h * d, h * d, 1, d, kt, 0, n_pad, i1 - i0, width)  # Q·Kᵀ
                _softmax_block(scores, i1 - i0, width, keys, scale, mf, (m_row0 + (i0 if mask_i else 0)) * n_pad,
                               n_pad if mask_i else 0, wf, w0 + i0 * n_pad, n_pad)
                for i in range(i0, i1 if dropping else i0):
                    for c in range(0, width, LANES):
                        v_copy(dropped, i * n_pad + c, wf, w0 + i * n_pad + c)
                        v_keep(dropped, i * n_pad + c, keepf, w0 + i * n_pad + c, keep_scale)
                mixed, m0 = (dropped, i0 * n_pad) if dropping else (wf, w0 + i0 * n_pad)
                rows_product(of, o0 + i0 * h * d_v, h * d_v, mixed, m0, n_pad, 1, min(width, keys), vf, v0, h * d_v,
                             i1 - i0, d_v)                          # P̃·V
            for t in range(w0 + queries * n_pad, w0 + T_q * n_pad):  # no query there
                wf[t] = zero
    return tiles_forward


def _softmax_block(scores, rows, width, keys, scale, mf, m, m_step, wf, w, n_pad):
    """wf's rows w, w + n_pad, .. (`rows` of them) = softmax(scores·scale + mask) of a block's scores (rows, width),
    the mask's rows at mf[m], mf[m + m_step], ..; the keys from `keys` on removed, 0 from `width` on. The block's
    scores are side by side, so that one loop (LLVM vectorises it) exponentiates them all."""
    zero, minus_inf, one = wf.dtype.type(0), wf.dtype.type(-np.inf), wf.dtype.type(1)
    for r in range(rows):                                           # ·scale + mask, − the row's max
        at = r * width
        for c in range(0, width, LANES):
            v_scale_add(scores, at + c, scale, mf, m + r * m_step + c)
        for j in range(keys, width):                                # no key there
            scores[at + j] = minus_inf
        top = minus_inf
        for c in range(0, width, LANES):
            top = max(top, v_max(scores, at + c))
        shift = zero if top == minus_inf else -top
        for c in range(0, width, LANES):
            v_shift_scale(scores, at + c, shift, one)
    block = scores[:rows * width]
    for t in range(block.size):
        block[t] = softmax.simd_exp(block[t])
    for r in range(rows):                                           # / the row's sum
        at, row = r * width, w + r * n_pad
        total = zero
        for c in range(0, width, LANES):
            total += v_sum(scores, at + c)
        inv = one / total if total != zero else zero
        for c in range(0, width, LANES):
            v_copy(wf, row + c, scores, at + c)
            v_shift_scale(wf, row + c, zero, inv)
        wf[row + width:row + n_pad] = zero


def _compile_backward(serial):
    @serial
    def tiles_backward(q, k, v, q_start, k_start, weights, dout, scale, keep, keep_scale, dq, dk, dv):
        """dq, dk, dv (every row written) for tiles_forward, from its padded weights (B,h,T_q,n_pad). A block of
        LANES queries works up to its rows' last nonzero weight (the forward's reach, or less: a weight of 0
        adds nothing to any gradient), a block of LANES keys from the first query that reaches it."""
        n_q, h, d = q.shape
        B, T_q, d_v, n_pad = q_start.size - 1, weights.shape[2], v.shape[2], weights.shape[3]
        dropping = keep.size > 0
        qf, kf, vf, gf, wf = q.reshape(q.size), k.reshape(k.size), v.reshape(v.size), dout.reshape(dout.size), \
            weights.reshape(weights.size)
        dqf, dkf, dvf, keepf = dq.reshape(dq.size), dk.reshape(dk.size), dv.reshape(dv.size), keep.reshape(keep.size)
        vt = np.empty(d_v * n_pad, q.dtype)                         # Vᵀ of one head, (d_v, n_pad)
        g = np.empty(T_q * n_pad, q.dtype)                          # dP = dO·Vᵀ, then dS
        dropped = np.empty(T_q * n_pad, q.dtype)                    # P̃
        widths = np.empty(T_q, np.int64)                            # each query's block's width
        for task in range(B * h):
            b, head, queries, keys, q0, k0, v0, o0, w0 = _task(task, h, d, d_v, T_q, n_pad, q_start, k_start)
            tokens_last_into(vt, vf, v0, h * d_v, keys, d_v, n_pad)
            for i0 in range(0, queries, LANES):
                i1 = min(i0 + LANES, queries)
                width = 0
                for i in range(i0, i1):
                    width = max(width, _nonzero_width(wf, w0 + i * n_pad, n_pad))
                rows_product(g, i0 * n_pad, n_pad, gf, o0 + i0 * h * d_v, h * d_v, 1, d_v, vt, 0, n_pad, i1 - i0,
                             width)                                 # dO·Vᵀ
                widths[i0:i1] = width
                _softmax_grad_block(g, i0, i1, width, n_pad, wf, w0, scale, keepf, keep_scale, dropped)
                rows_product(dqf, q0 + i0 * h * d, h * d, g, i0 * n_pad, n_pad, 1, min(width, keys), kf, k0, h * d,
                             i1 - i0, d)                            # dS·K
            mixed, m0 = (dropped, 0) if dropping else (wf, w0)
            for j0 in range(0, keys, LANES):
                j1, first = min(j0 + LANES, keys), 0
                while first < queries and widths[first] <= j0:
                    first += 1
                rows_product(dvf, v0 + j0 * h * d_v, h * d_v, mixed, m0 + first * n_pad + j0, 1, n_pad, queries - first,
                             gf, o0 + first * h * d_v, h * d_v, j1 - j0, d_v)              # P̃ᵀ·dO
                rows_product(dkf, k0 + j0 * h * d, h * d, g, first * n_pad + j0, 1, n_pad, queries - first, qf,
                             q0 + first * h * d, h * d, j1 - j0, d)                          # dSᵀ·Q
    return tiles_backward


def _softmax_grad_block(g, i0, i1, width, n_pad, wf, w0, scale, keepf, keep_scale, dropped):
    """Rows i0..i1 of g from dP = dO·Vᵀ to dS = scale·P·(dP − ⟨dP, P⟩), P the weights' rows at wf[w0 + i·n_pad];
    with dropout (keepf not empty) dP is first multiplied by keep/(1 - p) and P̃ = P·keep/(1 - p) goes to
    `dropped`. Both are 0 from `width` on."""
    zero = g.dtype.type(0)
    dropping = keepf.size > 0
    for i in range(i0, i1):
        row, w_row = i * n_pad, w0 + i * n_pad
        dot = zero
        for c in range(0, width, LANES):
            if dropping:
                v_keep(g, row + c, keepf, w_row + c, keep_scale)
                v_copy(dropped, row + c, wf, w_row + c)
                v_keep(dropped, row + c, keepf, w_row + c, keep_scale)
            dot += v_dot(g, row + c, wf, w_row + c)
        for c in range(0, width, LANES):
            v_softmax_grad(g, row + c, wf, w_row + c, dot, scale)
        g[row + width:row + n_pad] = zero
        if dropping:
            dropped[row + width:row + n_pad] = zero


def _nonzero_width(weights, start, n_pad):
    """The row weights[start:start + n_pad] (softmax weights: >= 0 or NaN) is 0 from the returned multiple of
    LANES on."""
    width = n_pad
    while width > 0 and v_sum(weights, start + width - LANES) == 0:
        width -= LANES
    return width


def tokens_last_into(out, x, x0, x_step, n, width, n_pad):
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


def tiles_fit(q, k, v):
    """Whether the tile kernels take q, k, v: float32, keys per row (not shared), d_k and d_v multiples of
    LANES, more than one query per head."""
    return k.shape[0] == q.shape[0] and tiles_take(q.dtype, q.shape[1], q.shape[3], v.shape[3])


def tiles_take(dtype, queries, d_k, d_v):
    """Whether the tile kernels take a head of this dtype, query count and widths."""
    return dtype == np.float32 and queries > NUMBA_MAX_QUERIES and d_k % LANES == 0 and d_v % LANES == 0


def _padded_additive(mask, weights_shape, n_pad):
    """The mask as float32 additive logits (0 keeps, -inf removes) in its own broadcast shape, 4-D, its
    last dim padded with -inf to n_pad."""
    if mask is None:
        mask = np.zeros((1, 1, 1, weights_shape[3]), np.float32)
    additive = args.mask_4d(args.additive(mask, np.dtype(np.float32)), weights_shape)
    return _padded(additive.astype(np.float32, copy=False), n_pad, -np.inf)


def _reach(mask_add):
    """(Bm, Hm, Im) int64: 1 + the last column each row of the additive mask (Bm, Hm, Im, n) keeps, 0 if none."""
    kept = mask_add != -np.inf
    last = mask_add.shape[-1] - np.argmax(kept[..., ::-1], axis=-1)
    return np.where(kept.any(axis=-1), last, 0).astype(np.int64)


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


def forward(q, k, v, scale, mask, keep, keep_scale):
    """(out, weights) on the tile kernels for the padded layout: every position of (B, T, h, d) is a row."""
    B, T_q, h, _ = q.shape
    out, weights = forward_rows(q.reshape((-1,) + q.shape[2:]), k.reshape((-1,) + k.shape[2:]),
                                v.reshape((-1,) + v.shape[2:]), _starts(B, T_q), _starts(B, k.shape[1]),
                                T_q, k.shape[1], scale, mask, keep, keep_scale)
    return out.reshape(q.shape[:3] + v.shape[3:]), weights


def forward_rows(q, k, v, q_start, k_start, T_q, T_k, scale, mask, keep, keep_scale):
    """(out (n_q, h, d_v), weights (B, h, T_q, T_k)) on the tile kernels for rows q (n_q, h, d), k (n_k, h, d),
    v (n_k, h, d_v), batch row b's at q_start[b] and k_start[b]; scale and mask prepared (kernels.attention_args)."""
    B, h = q_start.size - 1, q.shape[1]
    n_pad = -(-T_k // LANES) * LANES
    out = np.empty(q.shape[:2] + v.shape[2:], q.dtype)
    weights = np.empty((B, h, T_q, n_pad), q.dtype)
    keep = args.NO_KEEP if keep is None else _padded(keep, n_pad, False)
    mask_add = _padded_additive(mask, (B, h, T_q, T_k), n_pad)
    _numba_kernels().tiles_forward(np.ascontiguousarray(q), np.ascontiguousarray(k), np.ascontiguousarray(v), q_start,
                                   k_start, T_q, scale, mask_add, _reach(mask_add), keep, q.dtype.type(keep_scale), out,
                                   weights)
    return out, weights[..., :T_k]


def backward(q, k, v, weights, dout, scale, keep, keep_scale):
    """(dq, dk, dv) of `forward`."""
    B, T_q = q.shape[:2]
    grads = backward_rows(*(x.reshape((-1,) + x.shape[2:]) for x in (q, k, v)), _starts(B, T_q),
                          _starts(B, k.shape[1]), weights, dout.reshape((-1,) + dout.shape[2:]), scale, keep,
                          keep_scale)
    return tuple(g.reshape(x.shape) for g, x in zip(grads, (q, k, v)))


def backward_rows(q, k, v, q_start, k_start, weights, dout, scale, keep, keep_scale):
    """(dq, dk, dv) on the rows, for forward_rows, from its weights and dL/dout (n_q, h, d_v)."""
    n_pad = -(-weights.shape[3] // LANES) * LANES
    dq, dk, dv = np.empty(q.shape, q.dtype), np.empty(k.shape, q.dtype), np.empty(v.shape, q.dtype)
    keep = args.NO_KEEP if keep is None else _padded(keep, n_pad, False)
    _numba_kernels().tiles_backward(np.ascontiguousarray(q), np.ascontiguousarray(k), np.ascontiguousarray(v), q_start,
                                    k_start, _padded_weights(weights, n_pad), np.ascontiguousarray(dout), scale, keep,
                                    q.dtype.type(keep_scale), dq, dk, dv)
    return dq, dk, dv


