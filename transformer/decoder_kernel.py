"""A whole decoder step as one Numba kernel: the fast twin of `Transformer.decode` with a cache.

Decoding runs the decoder once per new token, on one token per row, so the plain path
(`model.decode(..., cache=...)`: ~200 Tensor ops a step) spends its time in Python, not in
arithmetic. `decoder_step` does the same arithmetic for all rows in one call:

    x = Embed(token)·√d_model + PE(t)
    for each layer:                                       (post-LN; pre-LN norms first)
        x = LayerNorm(x + SelfAttention(x))               K, V of step t written to the cache
        x = LayerNorm(x + CrossAttention(x, memory))      the memory's K, V projected once
        x = LayerNorm(x + W2·relu(W1·x + b1) + b2)
    x = LayerNorm(x) if final_norm
    log_probs = log_softmax(x·Wᵀ_generator + b)

The projections are BLAS products (np.dot inside Numba), the attention over the cached keys is
a loop per (row, head). The caches are preallocated for the whole decode: self-attention K, V
(N, rows, max_len, d_model) and the memory's K, V (N, sentences, S, d_model), read through
`cache_rows` / `src_rows`, so beam search reorders only the self-attention rows and greedy
decoding skips the rows that have finished. `greedy` runs the whole greedy loop in one call.
The parameters are stacked by kind once per decode (`Weights`).

`supports(model)` says whether a model has only what this kernel implements (float32/float64,
the model's own LayerNorms and Linears with biases); otherwise transformer.decoding runs the
plain path, which is also this kernel's test oracle (tests/test_decoder_kernel.py).
"""
from __future__ import annotations

import functools
import math
from types import SimpleNamespace

import numpy as np

from tinygrad_lite.kernels import softmax as _softmax
from tinygrad_lite.kernels.backend import FASTMATH, lazy_kernels
from tinygrad_lite.kernels.softmax import _simd_exp


def _array(tensor) -> np.ndarray:
    """A parameter's array as the kernel takes it: C-contiguous and writable (copied only if not)."""
    data = tensor.data
    if data.flags.c_contiguous and data.flags.writeable:
        return data
    return np.array(data, order="C")


def supports(model) -> bool:
    """True when the kernel implements everything this model's decoder does."""
    dtype = model.generator.weight.dtype
    if dtype not in (np.float32, np.float64):
        return False
    norms = [n for layer in model.decoder.layers for n in (layer.add_norm1, layer.add_norm2, layer.add_norm3)]
    layer_norms = [n.norm for n in norms] + ([model.decoder.norm] if model.decoder.norm is not None else [])
    linears = [model.generator] + [lin for layer in model.decoder.layers for lin in _linears(layer).values()]
    return (all(n.norm_first == model.config.norm_first for n in norms)
            and all(ln.weight is not None and ln.bias is not None and ln.weight.ndim == 1 for ln in layer_norms)
            and all(lin.bias is not None and lin.weight.dtype == dtype for lin in linears)
            and model.tgt_embed.lut.weight.dtype == dtype)


def _linears(layer) -> dict:
    """A decoder layer's Linears by the names the kernel gives them."""
    self_attn, cross_attn, ffn = layer.self_attn, layer.cross_attn, layer.feed_forward
    return {"q": self_attn.w_q, "k": self_attn.w_k, "v": self_attn.w_v, "o": self_attn.w_o,
            "cross_q": cross_attn.w_q, "cross_k": cross_attn.w_k, "cross_v": cross_attn.w_v, "cross_o": cross_attn.w_o,
            "w_1": ffn.w_1, "w_2": ffn.w_2}


class Weights(SimpleNamespace):
    """The decoder's parameters stacked by kind, as the kernel reads them (one copy per decode:
    Numba compiles a tuple of arrays indexed at run time slowly, a stacked array quickly):
    qkv_w (N, 3d, d), qkv_b (N, 3d): self-attention's q, k, v as one product; attn_w (N, 3, d, d),
    attn_b (N, 3, d): self-attention's w_o, cross-attention's w_q and w_o; w_1 (N, d_ff, d), b_1,
    w_2 (N, d, d_ff), b_2; norms (3N + 1, 2, d) (weight, bias of each Add & Norm, then the final
    norm's), eps (3N + 1,); the embedding, the PE table and the generator as they are. The
    memory's keys and values are projected once, outside the kernel (`DecoderKernel`)."""

    @classmethod
    def of(cls, model, max_len: int):
        c, dtype = model.config, model.generator.weight.dtype
        layers = [_linears(layer) for layer in model.decoder.layers]
        norms = [n.norm for layer in model.decoder.layers for n in (layer.add_norm1, layer.add_norm2, layer.add_norm3)]
        final = model.decoder.norm
        norms.append(final if final is not None else norms[-1])  # unused when there is no final norm

        def stack(names, part, join=np.stack):  # one C-contiguous array over the layers
            return np.array([join([getattr(lin[n], part).data for n in names]) for lin in layers], dtype=dtype)
        return cls(
            qkv_w=stack("qkv", "weight", np.concatenate), qkv_b=stack("qkv", "bias", np.concatenate),
            attn_w=stack(("o", "cross_q", "cross_o"), "weight"), attn_b=stack(("o", "cross_q", "cross_o"), "bias"),
            w_1=stack(["w_1"], "weight", np.concatenate), b_1=stack(["w_1"], "bias", np.concatenate),
            w_2=stack(["w_2"], "weight", np.concatenate), b_2=stack(["w_2"], "bias", np.concatenate),
            norms=np.array([[n.weight.data, n.bias.data] for n in norms], dtype=dtype),
            eps=np.array([n.eps for n in norms], dtype=np.float64),
            embed=_array(model.tgt_embed.lut.weight), embed_scale=dtype.type(math.sqrt(c.d_model)),
            pe=np.ascontiguousarray(model.positional_encoding.table(max_len), dtype=dtype),
            generator_w=_array(model.generator.weight), generator_b=_array(model.generator.bias),
            heads=c.h, norm_first=bool(c.norm_first), final_norm=final is not None, layers=layers)

    def args(self):
        """The model's part of decoder_step's arguments, in order."""
        return (self.qkv_w, self.qkv_b, self.attn_w, self.attn_b, self.w_1, self.b_1, self.w_2, self.b_2,
                self.norms, self.eps, self.embed, self.embed_scale, self.pe, self.generator_w, self.generator_b,
                self.heads, self.norm_first, self.final_norm)


# ---------------------------------------------------------------------------------------------
# The kernel's parts, compiled inline into decoder_step (register_jitable in _kernels)
# ---------------------------------------------------------------------------------------------

def _linear(x, weight, bias):
    """x (R, in) @ weightᵀ (out, in) + bias: one BLAS product."""
    y = np.dot(x, weight.T)
    for r in range(y.shape[0]):
        for j in range(y.shape[1]):
            y[r, j] += bias[j]
    return y


def _layer_norm(x, weight, bias, eps):
    """Each row: (x - mean) / sqrt(var + eps) · weight + bias (biased variance, as PyTorch)."""
    y = np.empty_like(x)
    d = x.shape[1]
    for r in range(x.shape[0]):
        total = 0.0
        for j in range(d):
            total += x[r, j]
        mean = total / d
        square = 0.0
        for j in range(d):
            square += (x[r, j] - mean) ** 2
        rstd = 1.0 / math.sqrt(square / d + eps)
        for j in range(d):
            y[r, j] = (x[r, j] - mean) * rstd * weight[j] + bias[j]
    return y


def _attend(q, keys, values, kv_rows, n_keys, key_ok, masked, heads):
    """Multi-head attention of each query row r over keys[kv_rows[r], :n_keys]:
    softmax(q·kᵀ/√d_k, masked keys removed)·v per head; a row with no key left gets zeros."""
    R, d = q.shape
    d_k = d // heads
    scale = q.dtype.type(1.0 / math.sqrt(d_k))
    minus_inf = q.dtype.type(-np.inf)
    out = np.zeros_like(q)
    w = np.empty(n_keys, q.dtype)
    for r in range(R):
        b = kv_rows[r]
        for lo in range(0, d, d_k):
            q_h, top = q[r, lo:lo + d_k], minus_inf
            for j in range(n_keys):
                k_j, s = keys[b, j, lo:lo + d_k], q.dtype.type(0)
                for e in range(d_k):
                    s += q_h[e] * k_j[e]
                w[j] = s * scale if not masked or key_ok[b, j] else minus_inf
                top = max(top, w[j])
            if top == minus_inf:
                continue
            total = q.dtype.type(0)
            for j in range(n_keys):
                w[j] = _simd_exp(w[j] - top)
                total += w[j]
            inv, o = q.dtype.type(1) / total, out[r, lo:lo + d_k]
            for j in range(n_keys):
                p, v_j = w[j] * inv, values[b, j, lo:lo + d_k]
                for e in range(d_k):
                    o[e] += p * v_j[e]
    return out


def _log_sum_exp(row, top):
    """log(sum(exp(row - top)))."""
    total = row.dtype.type(0)
    for j in range(row.shape[0]):
        total += _simd_exp(row[j] - top)
    return np.log(total)


def _log_softmax(logits):
    """Rows of logits - max - log(sum(exp(logits - max))): beam search's log-probs."""
    out = np.empty_like(logits)
    for r in range(logits.shape[0]):
        top = logits[r].max()
        shift = top + _log_sum_exp(logits[r], top)
        for j in range(logits.shape[1]):
            out[r, j] = logits[r, j] - shift
    return out


def _sublayer(x, which, layer, model, attend_args):
    """One Add & Norm around sub-layer `which` (0 self-attention, 1 cross-attention, 2 FFN)."""
    qkv_w, qkv_b, attn_w, attn_b, w_1, b_1, w_2, b_2, norms, eps, norm_first = model
    norm = 3 * layer + which
    h = _layer_norm(x, norms[norm, 0], norms[norm, 1], eps[norm]) if norm_first else x
    if which == 2:
        hidden = _linear(h, w_1[layer], b_1[layer])
        for r in range(hidden.shape[0]):
            for j in range(hidden.shape[1]):
                hidden[r, j] = max(hidden[r, j], 0)
        y = _linear(hidden, w_2[layer], b_2[layer])
    else:
        keys, values, kv_rows, n_keys, key_ok, masked, pos, heads = attend_args
        d = x.shape[1]
        if which == 0:  # q, k, v in one product; this step's keys/values go into the cache
            qkv = _linear(h, qkv_w[layer], qkv_b[layer])
            q = qkv[:, :d].copy()
            for r in range(x.shape[0]):
                keys[kv_rows[r], pos] = qkv[r, d:2 * d]
                values[kv_rows[r], pos] = qkv[r, 2 * d:]
        else:
            q = _linear(h, attn_w[layer, 1], attn_b[layer, 1])
        out = 0 if which == 0 else 2
        y = _linear(_attend(q, keys, values, kv_rows, n_keys, key_ok, masked, heads),
                    attn_w[layer, out], attn_b[layer, out])
    if norm_first:
        return x + y
    return _layer_norm(x + y, norms[norm, 0], norms[norm, 1], eps[norm])


def decoder_step(ids, pos, cache_rows, src_rows, qkv_w, qkv_b, attn_w, attn_b, w_1, b_1, w_2, b_2, norms, eps,
                 embed, embed_scale, pe, generator_w, generator_b, heads, norm_first, final_norm,
                 self_k, self_v, cross_k, cross_v, src_ok):
    """Logits (R, V) of the next token for R rows whose newest token is `ids` at position
    `pos`; row r's self-attention cache is row cache_rows[r], its sentence src_rows[r]."""
    R, d = ids.shape[0], embed.shape[1]
    layers = self_k.shape[0]
    model = (qkv_w, qkv_b, attn_w, attn_b, w_1, b_1, w_2, b_2, norms, eps, norm_first)
    x = np.empty((R, d), embed.dtype)
    for r in range(R):
        x[r] = embed[ids[r]] * embed_scale + pe[pos]
    for layer in range(layers):
        x = _sublayer(x, 0, layer, model, (self_k[layer], self_v[layer], cache_rows, pos + 1, src_ok, False, pos,
                                           heads))
        x = _sublayer(x, 1, layer, model, (cross_k[layer], cross_v[layer], src_rows, cross_k.shape[2], src_ok,
                                           True, pos, heads))
        x = _sublayer(x, 2, layer, model, (cross_k[layer], cross_v[layer], src_rows, 0, src_ok, False, pos,
                                           heads))
    if final_norm:
        x = _layer_norm(x, norms[3 * layers, 0], norms[3 * layers, 1], eps[3 * layers])
    return _linear(x, generator_w, generator_b)


def log_probs_step(ids, pos, cache_rows, src_rows, qkv_w, qkv_b, attn_w, attn_b, w_1, b_1, w_2, b_2, norms, eps,
                   embed, embed_scale, pe, generator_w, generator_b, heads, norm_first, final_norm,
                   self_k, self_v, cross_k, cross_v, src_ok):
    """decoder_step's log-softmax (R, V): what beam search ranks."""
    return _log_softmax(decoder_step(ids, pos, cache_rows, src_rows, qkv_w, qkv_b, attn_w, attn_b, w_1, b_1, w_2,
                                     b_2, norms, eps, embed, embed_scale, pe, generator_w, generator_b, heads,
                                     norm_first, final_norm, self_k, self_v, cross_k, cross_v, src_ok))


def greedy_loop(bos, eos, pad, max_len, qkv_w, qkv_b, attn_w, attn_b, w_1, b_1, w_2, b_2, norms, eps, embed,
                embed_scale, pe, generator_w, generator_b, heads, norm_first, final_norm, self_k, self_v,
                cross_k, cross_v, src_ok):
    """Greedy decoding of every sentence: (tokens (B, max_len), total log-prob (B,), steps run).
    A row that produced <eos> is padded with pad_id afterwards and no longer computed."""
    B = src_ok.shape[0]
    tokens = np.full((B, max_len), pad, np.int64)
    score = np.zeros(B)
    active = np.arange(B)
    ids = np.full(B, bos, np.int64)
    for pos in range(max_len):
        logits = decoder_step(ids, pos, active, active, qkv_w, qkv_b, attn_w, attn_b, w_1, b_1, w_2, b_2, norms,
                              eps, embed, embed_scale, pe, generator_w, generator_b, heads, norm_first, final_norm,
                              self_k, self_v, cross_k, cross_v, src_ok)
        alive = 0
        for r in range(active.shape[0]):
            token = np.argmax(logits[r])  # log p(token) = logit - max - log(sum(exp(logit - max)))
            tokens[active[r], pos] = token
            score[active[r]] -= _log_sum_exp(logits[r], logits[r, token])
            if token != eos:
                active[alive], ids[alive] = active[r], token
                alive += 1
        if alive == 0:
            return tokens, score, pos + 1
        active, ids = active[:alive].copy(), ids[:alive].copy()
    return tokens, score, max_len


@lazy_kernels
def _kernels(numba):
    """Compile-on-first-use kernels: decoder_step and the greedy loop around it."""
    from numba.extending import register_jitable
    _softmax._numba_kernels()  # registers _simd_exp
    for part in (_linear, _layer_norm, _attend, _log_sum_exp, _log_softmax, _sublayer, decoder_step):
        register_jitable(part)
    njit = functools.partial(numba.njit, cache=True, fastmath=FASTMATH)
    return SimpleNamespace(step=njit(log_probs_step), greedy=njit(greedy_loop))


# ---------------------------------------------------------------------------------------------
# What transformer.decoding calls
# ---------------------------------------------------------------------------------------------

class DecoderKernel:
    """The caches and weights of one decode: memory (B, S, d_model) and src_ok (B, S) (True =
    a real source token) of B sentences, up to `rows` decoded rows and `max_len` new tokens."""

    def __init__(self, model, memory: np.ndarray, src_ok: np.ndarray, rows: int, max_len: int):
        w = Weights.of(model, max(max_len, 1))
        B, S, d = memory.shape
        N = w.attn_w.shape[0]
        memory = memory.reshape(B * S, d)
        self.cross_k, self.cross_v = (np.empty((N, B, S, d), memory.dtype) for _ in range(2))
        for layer, linears in enumerate(w.layers):  # the memory's keys and values, projected once
            for cache, name in ((self.cross_k, "cross_k"), (self.cross_v, "cross_v")):
                cache[layer] = (memory @ linears[name].weight.data.T + linears[name].bias.data).reshape(B, S, d)
        self.self_k, self.self_v = (np.zeros((N, rows, max(max_len, 1), d), memory.dtype) for _ in range(2))
        self.src_ok = np.ascontiguousarray(src_ok)
        self.model_args = w.args()

    def _caches(self):
        return self.self_k, self.self_v, self.cross_k, self.cross_v, self.src_ok

    def step(self, prefix: np.ndarray, owner: np.ndarray) -> np.ndarray:
        """Log-probs (R, V) of the next token after prefix (R, t) (only its last column is read:
        the cache holds the rest) for rows 0..R-1 of the cache; row r decodes sentence owner[r]."""
        R, t = prefix.shape
        return _kernels().step(np.ascontiguousarray(prefix[:, -1], dtype=np.int64), t - 1, np.arange(R),
                               np.ascontiguousarray(owner, dtype=np.int64), *self.model_args, *self._caches())

    def reorder(self, rows: np.ndarray, length: int, owner=None):
        """Cache row i becomes old row rows[i], for the first `length` positions (beam search)."""
        for cache in (self.self_k, self.self_v):
            cache[:, :len(rows), :length] = cache[:, rows, :length]

    def greedy(self, bos_id: int, eos_id: int, pad_id: int, max_len: int):
        """(tokens (B, steps), total log-prob (B,)) as transformer.decoding.greedy_decode."""
        tokens, score, steps = _kernels().greedy(bos_id, eos_id, pad_id, max_len, *self.model_args,
                                                 *self._caches())
        return tokens[:, :steps], score
