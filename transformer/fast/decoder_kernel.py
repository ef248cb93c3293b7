"""Decoding as Numba kernels: the encoder in one call, then each decoder step in one call.

Decoding runs the decoder once per new token, on one token per row, so the plain path
(`model.decode(..., cache=...)`: ~200 Tensor ops a step, and ~100 for the encoder) spends its
time in Python, not in arithmetic. These kernels do the same arithmetic with no Tensor in between:

    encode:        memory = Encoder(Embed(src)·√d_model + PE)       then, per decoder layer,
                   the memory's cross-attention K, V, projected once for the whole decode
    decoder_step:  x = Embed(token)·√d_model + PE(t)
                   for each layer:                                   (post-LN; pre-LN norms first)
                       x = LayerNorm(x + SelfAttention(x))           K, V of step t go to the cache
                       x = LayerNorm(x + CrossAttention(x, memory))
                       x = LayerNorm(x + W2·relu(W1·x + b1) + b2)
                   x = LayerNorm(x) if final_norm
                   logits = x·Wᵀ_generator + b                       (log-softmax for beam search)
    greedy_loop:   every step of greedy decoding, argmax and scores included, in one call

The products are BLAS calls (`_linear`), the attention a loop per row over the keys, all heads
at once; the encoder computes the rows of real tokens only (a <pad> key is masked everywhere). The
caches are preallocated for the whole decode, self-attention K, V (N, rows, max_len, d_model) and
the memory's K, V (N, sentences, S, d_model), and read through `cache_rows` / `src_rows`: beam
search reorders only the self-attention rows, and greedy decoding stops computing finished rows.
The parameters are stacked by kind once per decode, in the layout the row count calls for
(decoder_weights.py); stacks and caches are cut from memory kept between decodes (decode_memory.py).

`supports(model)` (decoder_weights.py) says whether the model has only what these kernels
implement; otherwise decoder_steps.py gives transformer.decoding the plain path, also their test oracle
(tests/test_decoder_kernel.py).
"""
from __future__ import annotations

import functools
import math
from types import SimpleNamespace

import numpy as np

from tinygrad_lite.kernels import panels, softmax
from tinygrad_lite.kernels.backend import FASTMATH, lazy_kernels
from tinygrad_lite.kernels.panels import panel_product
from tinygrad_lite.kernels.softmax import row_max, simd_exp

from . import numpy_sgemm
from .decode_memory import DecodeMemory
from .decoder_weights import Layout, generator_weight, layout_for, linears_of, stack_of, stacked, supports
from .numpy_sgemm import NO_TRANS, ROW_MAJOR, TRANS
from .rows import layer_norm_rows
from .rows import register_numba as register_rows

__all__ = ["DecoderKernel", "supports"]

_NUMPY_SGEMM = None  # the numba ExternalFunction of NumPy's sgemm (numpy_sgemm.bind), set by _kernels

# ---------------------------------------------------------------------------------------------
# The kernels' parts (register_jitable in _kernels; plain NumPy otherwise)
# ---------------------------------------------------------------------------------------------

def _linear(x, weight, bias, stack):
    """x (R, in) @ weightᵀ + bias: one BLAS product (x and weight C-contiguous), through NumPy's
    sgemm (float32, 2+ rows) if stack.numpy_sgemm, else np.dot. The weight is (out, in) as the Linear
    holds it, or (in, out) if stack.transposed, or packed into panels (P, in, 32): then
    kernels.panels' product, bias included (decoder_weights.layout_for)."""
    if weight.ndim == 3:
        y = np.empty((x.shape[0], bias.shape[0]), x.dtype)
        panel_product(x, weight, bias, y)
        return y
    R, K = x.shape
    transposed = stack.transposed
    N = weight.shape[1] if transposed else weight.shape[0]
    if stack.numpy_sgemm and x.itemsize == 4 and R >= 2:
        y = np.empty((R, N), x.dtype)
        _NUMPY_SGEMM(ROW_MAJOR, NO_TRANS, NO_TRANS if transposed else TRANS, R, N, K, np.float32(1), x.ctypes.data, K,
                     weight.ctypes.data, N if transposed else K, np.float32(0), y.ctypes.data, N)
    else:
        y = np.dot(x, weight) if transposed else np.dot(x, weight.T)
    for r in range(y.shape[0]):
        for j in range(y.shape[1]):
            y[r, j] += bias[j]
    return y


def _norm_in(x, stack, i, norm_first):
    """What sub-layer i reads: LayerNorm(x) for pre-LN, x for post-LN."""
    norms, eps = stack.norms, stack.eps
    return layer_norm_rows(x, norms[i, 0], norms[i, 1], eps[i]) if norm_first else x


def _norm_out(x, y, stack, i, norm_first):
    """Add & Norm after sub-layer i gave y: x + y (pre-LN), LayerNorm(x + y) (post-LN)."""
    norms, eps = stack.norms, stack.eps
    return x + y if norm_first else layer_norm_rows(x + y, norms[i, 0], norms[i, 1], eps[i])


def _feed_forward(h, stack, layer):
    """W2·relu(W1·h + b1) + b2."""
    hidden = _linear(h, stack.w_1[layer], stack.b_1[layer], stack)
    for r in range(hidden.shape[0]):
        for j in range(hidden.shape[1]):
            hidden[r, j] = max(hidden[r, j], 0)
    return _linear(hidden, stack.w_2[layer], stack.b_2[layer], stack)


def _attend(q, keys, values, kv_rows, n_keys, key_ok, masked, heads):
    """Multi-head attention of each query row r over keys[kv_rows[r], :n_keys]:
    softmax(q·kᵀ/√d_k, masked keys removed)·v per head; a row with no key left gets zeros.
    Masked keys at the end (a right-padded source) are skipped: their weight would be exactly 0.
    Key by key, all heads at once: each key's and value's row is read once, front to back, so the
    caches stream in from memory (head by head, the same reads ran 1.2-1.8x slower when the caches
    were not in the CPU's caches, as they are not in a decode: bench/README.md, "Ninth pass")."""
    R, d = q.shape
    d_k = d // heads
    scale = q.dtype.type(1.0 / math.sqrt(d_k))
    minus_inf = q.dtype.type(-np.inf)
    out = np.zeros_like(q)
    w = np.empty((heads, n_keys), q.dtype)
    for r in range(R):
        b, n = kv_rows[r], n_keys
        while masked and n > 0 and not key_ok[b, n - 1]:
            n -= 1
        for j in range(n):                                   # w[h, j] = q_h·k_j/√d_k
            for h in range(heads):
                q_h, k_j, s = q[r, h * d_k:(h + 1) * d_k], keys[b, j, h * d_k:(h + 1) * d_k], q.dtype.type(0)
                for e in range(d_k):
                    s += q_h[e] * k_j[e]
                w[h, j] = s * scale if not masked or key_ok[b, j] else minus_inf
        for h in range(heads):                               # softmax over the keys
            w_h, top = w[h], minus_inf
            for j in range(n):
                top = max(top, w_h[j])
            if top == minus_inf:                             # no key left: zero weights
                w_h[:n] = 0
                continue
            total = q.dtype.type(0)
            for j in range(n):
                w_h[j] = simd_exp(w_h[j] - top)
                total += w_h[j]
            inv = q.dtype.type(1) / total
            for j in range(n):
                w_h[j] *= inv
        for j in range(n):                                   # out_h += w[h, j]·v_j
            for h in range(heads):
                p, v_j, o = w[h, j], values[b, j, h * d_k:(h + 1) * d_k], out[r, h * d_k:(h + 1) * d_k]
                for e in range(d_k):
                    o[e] += p * v_j[e]
    return out


def _first_max(a, r):
    """The first index of row r's largest value: its max by SIMD (the softmax kernels' row_max),
    then a scan for it: 3x faster than np.argmax on 64 rows of 1,000 logits (34 vs 102 us). A NaN
    that is not first is skipped (the caller sees it in the row's sum)."""
    top = row_max(a, r)
    for j in range(a.shape[1]):
        if a[r, j] == top:
            return j
    return 0


def _log_sum_exp(row, top):
    """log(sum(exp(row - top)))."""
    total = row.dtype.type(0)
    for j in range(row.shape[0]):
        total += simd_exp(row[j] - top)
    return np.log(total)


def _log_softmax(logits):
    """Rows of logits - max - log(sum(exp(logits - max))): what beam search ranks."""
    out = np.empty_like(logits)
    for r in range(logits.shape[0]):
        top = row_max(logits, r)
        shift = top + _log_sum_exp(logits[r], top)
        for j in range(logits.shape[1]):
            out[r, j] = logits[r, j] - shift
    return out


def _embed(ids, positions, stack):
    """Embed(ids)·√d_model + PE(positions), one row per id."""
    embed, scale, pe = stack.embed, stack.scale, stack.pe
    x = np.empty((ids.shape[0], embed.shape[1]), embed.dtype)
    for r in range(ids.shape[0]):
        x[r] = embed[ids[r]] * scale + pe[positions[r]]
    return x


def _final_norm(x, stack, index):
    return layer_norm_rows(x, stack.norms[index, 0], stack.norms[index, 1], stack.eps[index]) if stack.final_norm else x


# ---------------------------------------------------------------------------------------------
# The kernels
# ---------------------------------------------------------------------------------------------

def encode(src, src_ok, stack, heads, norm_first, cross_kv_w, cross_kv_b, cross_k, cross_v):
    """The encoder on src (B, S) ids, then each decoder layer's cross-attention K, V of its memory,
    written into cross_k and cross_v, each (N_decoder, B, S, d_model) (zero at <pad> positions).
    cross_kv_w (N, 2, d, d) holds w_k, w_v (laid out as stack's weights).
    Only the real tokens' rows are computed: a <pad> position's keys are masked everywhere, so its
    own row never reaches a real one (its K, V stay zero)."""
    B, S = src.shape
    d = stack.embed.shape[1]
    at = np.flatnonzero(src_ok.reshape(B * S))       # the real tokens, as b·S + s
    sentence, position = at // S, at % S
    x = _embed(src.reshape(B * S)[at], position, stack)
    keys, values = np.zeros((B, S, d), x.dtype), np.zeros((B, S, d), x.dtype)
    for layer in range(stack.qkv_w.shape[0]):
        qkv = _linear(_norm_in(x, stack, 2 * layer, norm_first), stack.qkv_w[layer], stack.qkv_b[layer], stack)
        for i in range(at.shape[0]):
            keys[sentence[i], position[i]] = qkv[i, d:2 * d]
            values[sentence[i], position[i]] = qkv[i, 2 * d:]
        y = _attend(qkv[:, :d].copy(), keys, values, sentence, S, src_ok, True, heads)
        y = _linear(y, stack.attn_w[layer, 0], stack.attn_b[layer, 0], stack)
        x = _norm_out(x, y, stack, 2 * layer, norm_first)
        y = _feed_forward(_norm_in(x, stack, 2 * layer + 1, norm_first), stack, layer)
        x = _norm_out(x, y, stack, 2 * layer + 1, norm_first)
    memory = _final_norm(x, stack, 2 * stack.qkv_w.shape[0])
    cross_k[:] = 0
    cross_v[:] = 0
    for layer in range(cross_kv_w.shape[0]):
        k = _linear(memory, cross_kv_w[layer, 0], cross_kv_b[layer, 0], stack)
        v = _linear(memory, cross_kv_w[layer, 1], cross_kv_b[layer, 1], stack)
        for i in range(at.shape[0]):
            cross_k[layer, sentence[i], position[i]] = k[i]
            cross_v[layer, sentence[i], position[i]] = v[i]


def decoder_step(ids, pos, cache_rows, src_rows, stack, generator_w, generator_b, heads, norm_first,
                 self_k, self_v, cross_k, cross_v, src_ok):
    """Logits (R, V) of the next token for R rows whose newest token is `ids` at position `pos`;
    row r's self-attention cache is row cache_rows[r], its sentence src_rows[r]."""
    d = self_k.shape[3]
    x = _embed(ids, np.full(ids.shape[0], pos), stack)
    for layer in range(stack.qkv_w.shape[0]):
        n = 3 * layer
        qkv = _linear(_norm_in(x, stack, n, norm_first), stack.qkv_w[layer], stack.qkv_b[layer], stack)
        for r in range(ids.shape[0]):  # this step's keys and values join the cache
            self_k[layer, cache_rows[r], pos] = qkv[r, d:2 * d]
            self_v[layer, cache_rows[r], pos] = qkv[r, 2 * d:]
        y = _attend(qkv[:, :d].copy(), self_k[layer], self_v[layer], cache_rows, pos + 1, src_ok, False, heads)
        x = _norm_out(x, _linear(y, stack.attn_w[layer, 0], stack.attn_b[layer, 0], stack), stack, n, norm_first)
        q = _linear(_norm_in(x, stack, n + 1, norm_first), stack.attn_w[layer, 1], stack.attn_b[layer, 1], stack)
        y = _attend(q, cross_k[layer], cross_v[layer], src_rows, cross_k.shape[2], src_ok, True, heads)
        x = _norm_out(x, _linear(y, stack.attn_w[layer, 2], stack.attn_b[layer, 2], stack), stack, n + 1, norm_first)
        y = _feed_forward(_norm_in(x, stack, n + 2, norm_first), stack, layer)
        x = _norm_out(x, y, stack, n + 2, norm_first)
    return _linear(_final_norm(x, stack, 3 * stack.qkv_w.shape[0]), generator_w, generator_b, stack)


def log_probs_step(ids, pos, cache_rows, src_rows, stack, generator_w, generator_b, heads, norm_first,
                   self_k, self_v, cross_k, cross_v, src_ok):
    """decoder_step's log-softmax (R, V): what beam search ranks."""
    return _log_softmax(decoder_step(ids, pos, cache_rows, src_rows, stack, generator_w, generator_b, heads,
                                     norm_first, self_k, self_v, cross_k, cross_v, src_ok))


def greedy_loop(bos, eos, pad, max_len, stack, generator_w, generator_b, heads, norm_first,
                self_k, self_v, cross_k, cross_v, src_ok):
    """Greedy decoding of every sentence: (tokens (B, max_len), total log-prob (B,), steps run).
    A row that produced <eos> is padded with pad_id afterwards and no longer computed."""
    B = src_ok.shape[0]
    tokens = np.full((B, max_len), pad, np.int64)
    score = np.zeros(B)
    active = np.arange(B)
    ids = np.full(B, bos, np.int64)
    for pos in range(max_len):
        logits = decoder_step(ids, pos, active, active, stack, generator_w, generator_b, heads, norm_first,
                              self_k, self_v, cross_k, cross_v, src_ok)
        alive = 0
        for r in range(active.shape[0]):
            token = _first_max(logits, r)  # log p(token) = logit - max - log(sum(exp(logit - max)))
            lse = _log_sum_exp(logits[r], logits[r, token])
            if lse != lse:                 # a NaN in the row: np.argmax's answer, the first NaN
                token = np.argmax(logits[r])
                lse = _log_sum_exp(logits[r], logits[r, token])
            tokens[active[r], pos] = token
            score[active[r]] -= lse
            if token != eos:
                active[alive], ids[alive] = active[r], token
                alive += 1
        if alive == 0:
            return tokens, score, pos + 1
        active, ids = active[:alive].copy(), ids[:alive].copy()
    return tokens, score, max_len


@lazy_kernels
def _kernels(numba):
    """Compile-on-first-use kernels: encode, the decoder step's log-probs, the greedy loop; and
    numpy_sgemm: whether NumPy's sgemm was found (`_linear` may call it)."""
    from numba.extending import register_jitable
    global _NUMPY_SGEMM
    _NUMPY_SGEMM, found = numpy_sgemm.bind()
    softmax.register_numba()
    register_rows()
    panels.register_numba()
    for part in (_linear, _norm_in, _norm_out, _feed_forward, _attend, _first_max, _log_sum_exp,
                 _log_softmax, _embed, _final_norm, decoder_step):
        register_jitable(fastmath=FASTMATH)(part)
    njit = functools.partial(numba.njit, cache=True, fastmath=FASTMATH)
    return SimpleNamespace(encode=njit(encode), step=njit(log_probs_step), greedy=njit(greedy_loop),
                           numpy_sgemm=found)


# ---------------------------------------------------------------------------------------------
# What transformer.decoding calls (decoder_steps.kernel_steps builds it)
# ---------------------------------------------------------------------------------------------

class DecoderKernel:
    """One decode of src (B, S) ids (src_ok (B, S): True = a real token) with up to `rows` rows
    and `max_len` new tokens: the encoder has run, the caches are allocated."""

    def __init__(self, model, src: np.ndarray, src_ok: np.ndarray, rows: int, max_len: int):
        dtype = model.generator.weight.dtype
        B, S = src.shape
        N, d = len(model.decoder.layers), model.config.d_model
        pe = model.positional_encoding.table(max(S, max_len, 1))
        self._memory = memory = DecodeMemory.take()
        layout = layout_for(rows, dtype, _kernels().numpy_sgemm)
        self.stack = stack_of(model.decoder, model.tgt_embed, pe, dtype, ("o", "cross_q", "cross_o"), layout,
                              memory.empty)
        layers = [linears_of(layer) for layer in model.decoder.layers]
        cross_kv = [stacked(layers, ("cross_k", "cross_v"), part, dtype, memory.empty) for part in ("weight", "bias")]
        self.generator = generator_weight(model.generator, layout, dtype, memory.empty), model.generator.bias.data
        self.heads, self.norm_first = model.config.h, bool(model.config.norm_first)
        self.src_ok = np.ascontiguousarray(src_ok)
        self.self_k, self.self_v = (memory.empty((N, rows, max(max_len, 1), d), dtype) for _ in range(2))
        self.cross_k, self.cross_v = (memory.empty((N, B, S, d), dtype) for _ in range(2))
        encoder = stack_of(model.encoder, model.src_embed, pe, dtype, layout=Layout(numpy_sgemm=layout.numpy_sgemm),
                           empty=memory.empty)  # the encoder's weights stay (out, in)
        _kernels().encode(np.ascontiguousarray(src, dtype=np.int64), self.src_ok, encoder, self.heads,
                          self.norm_first, *cross_kv, self.cross_k, self.cross_v)

    def __del__(self):
        memory = getattr(self, "_memory", None)
        if memory is not None:
            memory.give_back()

    def _args(self):
        return (self.stack, *self.generator, self.heads, self.norm_first, self.self_k, self.self_v,
                self.cross_k, self.cross_v, self.src_ok)

    def step(self, prefix: np.ndarray, owner: np.ndarray) -> np.ndarray:
        """Log-probs (R, V) of the next token after prefix (R, t) (only its last column is read:
        the cache holds the rest) for rows 0..R-1 of the cache; row r decodes sentence owner[r]."""
        R, t = prefix.shape
        return _kernels().step(np.ascontiguousarray(prefix[:, -1], dtype=np.int64), t - 1, np.arange(R),
                               np.ascontiguousarray(owner, dtype=np.int64), *self._args())

    def reorder(self, rows: np.ndarray, length: int, owner=None):
        """Cache row i becomes old row rows[i], for the first `length` positions (beam search).
        `owner` (the rows' sentences) is read by `step`; the memory's K, V stay where they are."""
        for cache in (self.self_k, self.self_v):
            cache[:, :len(rows), :length] = cache[:, rows, :length]

    def greedy(self, bos_id: int, eos_id: int, pad_id: int, max_len: int):
        """(tokens (B, steps), total log-prob (B,)) as transformer.decoding.greedy_decode."""
        tokens, score, steps = _kernels().greedy(bos_id, eos_id, pad_id, max_len, *self._args())
        return tokens[:, :steps], score
