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

The products are BLAS calls (see below), the attention a loop per row over the keys, all heads
at once; the encoder computes the rows of real tokens only (a <pad> key is masked everywhere). The
caches are preallocated for the whole decode, self-attention K, V (N, rows, max_len, d_model) and
the memory's K, V (N, sentences, S, d_model), and read through `cache_rows` / `src_rows`: beam
search reorders only the self-attention rows, and greedy decoding stops computing finished rows.
The parameters are stacked by kind once per decode (`stack_of`), the decoder's as (in, out) for
decodes of TRANSPOSED_FROM_ROWS rows or more (`stacked`). Stacks and caches are cut from memory
kept between decodes (`_DecodeMemory`), so a decode does not fault fresh pages in.

The products: Numba's np.dot calls SciPy's OpenBLAS; NumPy's wheels bundle their own, newer one
(0.3.31 vs SciPy's 0.3.30 here), whose float32 GEMM is faster on these shapes: 1.4-2.1x at 2-32
rows, 1.2x at 64. When NumPy's library exports its cblas sgemm, float32 products of 2 rows or more
call it (`_linear`); otherwise, for float64 (no gain) and at one row (np.dot's GEMV is faster), np.dot.

`supports(model)` says whether the model has only what these kernels implement (float32 or
float64, LayerNorms and Linears with biases, no attention weights kept for display); otherwise
transformer.decoding runs the plain path, which is also their test oracle
(tests/test_decoder_kernel.py).
"""
from __future__ import annotations

import ctypes
import functools
import importlib.util
import math
import threading
from pathlib import Path
from types import SimpleNamespace

import numpy as np

from tinygrad_lite.kernels import panels as _panels
from tinygrad_lite.kernels import softmax as _softmax
from tinygrad_lite.kernels.backend import FASTMATH, lazy_kernels
from tinygrad_lite.kernels.panels import PANEL, pack_panels, panel_count, panel_product
from tinygrad_lite.kernels.softmax import _row_max, _simd_exp

_NUMPY_SGEMM = None  # numba.types.ExternalFunction of SGEMM_SYMBOL, set by _kernels

# ---------------------------------------------------------------------------------------------
# The model's parameters as the kernels read them
# ---------------------------------------------------------------------------------------------

def _linears(layer) -> dict:
    """An encoder or decoder layer's Linears by the names the kernels give them."""
    attn, ffn = layer.self_attn, layer.feed_forward
    named = {"q": attn.w_q, "k": attn.w_k, "v": attn.w_v, "o": attn.w_o, "w_1": ffn.w_1, "w_2": ffn.w_2}
    cross = getattr(layer, "cross_attn", None)
    if cross is not None:
        named.update(cross_q=cross.w_q, cross_k=cross.w_k, cross_v=cross.w_v, cross_o=cross.w_o)
    return named


def _add_norms(layer) -> list:
    return [getattr(layer, name) for name in ("add_norm1", "add_norm2", "add_norm3") if hasattr(layer, name)]


def supports(model) -> bool:
    """True when the kernels implement everything this model's encoder and decoder do (and SciPy,
    whose BLAS bindings Numba's np.dot calls, is installed: setup.cfg requires it)."""
    if importlib.util.find_spec("scipy") is None:
        return False
    dtype = model.generator.weight.dtype
    layers = list(model.encoder.layers) + list(model.decoder.layers)
    add_norms = [n for layer in layers for n in _add_norms(layer)]
    norms = [n.norm for n in add_norms] + [s.norm for s in (model.encoder, model.decoder) if s.norm is not None]
    linears = [model.generator] + [lin for layer in layers for lin in _linears(layer).values()]
    return (dtype in (np.float32, np.float64)
            and all(n.norm_first == model.config.norm_first for n in add_norms)
            and all(n.weight is not None and n.bias is not None and n.weight.ndim == 1 for n in norms)
            and all(lin.bias is not None and lin.weight.dtype == dtype for lin in linears)
            and not any(layer.self_attn.keep_weights or getattr(layer, "cross_attn", layer.self_attn).keep_weights
                        for layer in layers)
            and model.src_embed.lut.weight.dtype == model.tgt_embed.lut.weight.dtype == dtype)


def stack_of(stack, embeddings, pe: np.ndarray, dtype, out_names=("o",), numpy_sgemm=False, empty=np.empty,
             transposed=False, panels=False) -> tuple:
    """An encoder's or decoder's parameters as one tuple of arrays stacked over its N layers:
    (qkv_w (N, 3d, d), qkv_b (N, 3d): self-attention's q, k, v as one product; attn_w (N, A, d, d),
    attn_b (N, A, d): the `out_names` Linears; w_1 (N, d_ff, d), b_1, w_2 (N, d, d_ff), b_2 (with
    `transposed`, each weight as (in, out): qkv_w (N, d, 3d), w_1 (N, d, d_ff), ...; see `stacked`);
    norms (K·N + 1, 2, d): weight and bias of each layer's K Add & Norms, then of the final norm
    (a placeholder without one), eps (K·N + 1,); final_norm; the embedding, √d_model, the PE table;
    whether `_linear` may call NumPy's sgemm; whether the weights are transposed). With `panels`,
    each weight is packed into panels instead (kernels.panels: qkv_w (N, P, d, 32), ...).
    One copy a decode: Numba compiles a tuple of arrays indexed at run time slowly, these quickly.
    `empty(shape, dtype)` makes the copies' arrays."""
    layers = [_linears(layer) for layer in stack.layers]
    norms = [n.norm for layer in stack.layers for n in _add_norms(layer)]
    norms.append(stack.norm if stack.norm is not None else norms[-1])
    norm_params = empty((len(norms), 2, norms[0].weight.shape[0]), dtype)
    for i, n in enumerate(norms):
        norm_params[i] = n.weight.data, n.bias.data

    def merged(names, part):  # the names' outputs one after another: (N, A·out, in) or (N, in, A·out)
        if panels and part == "weight":
            joined = [np.concatenate([linears[name].weight.data for name in names]) for linears in layers]
            out = empty((len(layers), panel_count(joined[0].shape[0])) + joined[0].shape[1:] + (PANEL,), dtype)
            for i, weight in enumerate(joined):
                pack_panels(weight, out[i])
            return out
        if part == "bias" or not transposed:
            out = stacked(layers, names, part, dtype, empty)
            return out.reshape((out.shape[0], -1) + out.shape[3:])
        size, width = getattr(layers[0][names[0]], part).data.shape
        joined = empty((len(layers), width, len(names) * size), dtype)
        for i, linears in enumerate(layers):  # each transposed straight into its columns
            for j, name in enumerate(names):
                joined[i, :, j * size:(j + 1) * size] = getattr(linears[name], part).data.T
        return joined
    return (merged(("q", "k", "v"), "weight"), merged(("q", "k", "v"), "bias"),
            stacked(layers, out_names, "weight", dtype, empty, transposed, panels),
            stacked(layers, out_names, "bias", dtype, empty),
            merged(["w_1"], "weight"), merged(["w_1"], "bias"), merged(["w_2"], "weight"), merged(["w_2"], "bias"),
            norm_params, np.array([n.eps for n in norms], dtype=np.float64), stack.norm is not None,
            np.ascontiguousarray(embeddings.lut.weight.data), dtype.type(math.sqrt(embeddings.d_model)),
            np.ascontiguousarray(pe, dtype=dtype), numpy_sgemm, transposed)


def stacked(layers: list, names, part: str, dtype, empty=np.empty, transposed=False, panels=False) -> np.ndarray:
    """(N, len(names), *shape): the `part` ("weight" or "bias") of the named Linears of each layer
    (as `_linears` names them), one copy of each. With `transposed`, a weight (out, in) is stored
    as (in, out), which `_linear` multiplies as it is: at 64 rows, with the weights out of the
    CPU's caches, OpenBLAS runs a decoder step's products ~10% faster so; but the transposing
    copies cost ~3 ms a decode, more than one row gains (bench/README.md, "Ninth pass"). With
    `panels`, a weight is packed into panels (kernels.panels): (N, len(names), P, in, 32)."""
    first = getattr(layers[0][names[0]], part).data
    if panels and part == "weight":
        out = empty((len(layers), len(names), panel_count(first.shape[0]), first.shape[1], PANEL), dtype)
        for i, linears in enumerate(layers):
            for j, name in enumerate(names):
                pack_panels(linears[name].weight.data, out[i, j])
        return out
    flip = transposed and part == "weight"
    out = empty((len(layers), len(names)) + (first.shape[::-1] if flip else first.shape), dtype)
    for i, linears in enumerate(layers):
        for j, name in enumerate(names):
            data = getattr(linears[name], part).data
            out[i, j] = data.T if flip else data
    return out


# ---------------------------------------------------------------------------------------------
# The kernels' parts (register_jitable in _kernels; plain NumPy otherwise)
# ---------------------------------------------------------------------------------------------

SGEMM_SYMBOL = "tinygrad_lite_numpy_sgemm"  # bound in _kernels to NumPy's cblas sgemm (ILP64)
ROW_MAJOR, NO_TRANS, TRANS = 101, 111, 112


def numpy_sgemm_address() -> int:
    """The address of cblas sgemm in the OpenBLAS NumPy's wheels bundle (numpy.libs), or 0."""
    for path in sorted((Path(np.__file__).parent.parent / "numpy.libs").glob("libscipy_openblas64_*.so")):
        try:
            return ctypes.cast(ctypes.CDLL(str(path)).scipy_cblas_sgemm64_, ctypes.c_void_p).value or 0
        except (OSError, AttributeError):
            continue
    return 0


def _linear(x, weight, bias, stack):
    """x (R, in) @ weightᵀ + bias: one BLAS product (x and weight C-contiguous). The weight is
    (out, in) as the Linear holds it, or (in, out) when stack[15] says the stacks are transposed
    (see `stacked`), or packed into panels (P, in, 32): then kernels.panels' product, bias included."""
    if weight.ndim == 3:
        y = np.empty((x.shape[0], bias.shape[0]), x.dtype)
        panel_product(x, weight, bias, y)
        return y
    R, K = x.shape
    transposed = stack[15]
    N = weight.shape[1] if transposed else weight.shape[0]
    if stack[14] and x.itemsize == 4 and R >= 2:
        y = np.empty((R, N), x.dtype)
        _NUMPY_SGEMM(ROW_MAJOR, NO_TRANS, NO_TRANS if transposed else TRANS, R, N, K, np.float32(1), x.ctypes.data, K,
                     weight.ctypes.data, N if transposed else K, np.float32(0), y.ctypes.data, N)
    else:
        y = np.dot(x, weight) if transposed else np.dot(x, weight.T)
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


def _norm_in(x, stack, i, norm_first):
    """What sub-layer i reads: LayerNorm(x) for pre-LN, x for post-LN."""
    norms, eps = stack[8], stack[9]
    return _layer_norm(x, norms[i, 0], norms[i, 1], eps[i]) if norm_first else x


def _norm_out(x, y, stack, i, norm_first):
    """Add & Norm after sub-layer i gave y: x + y (pre-LN), LayerNorm(x + y) (post-LN)."""
    norms, eps = stack[8], stack[9]
    return x + y if norm_first else _layer_norm(x + y, norms[i, 0], norms[i, 1], eps[i])


def _feed_forward(h, stack, layer):
    """W2·relu(W1·h + b1) + b2."""
    hidden = _linear(h, stack[4][layer], stack[5][layer], stack)
    for r in range(hidden.shape[0]):
        for j in range(hidden.shape[1]):
            hidden[r, j] = max(hidden[r, j], 0)
    return _linear(hidden, stack[6][layer], stack[7][layer], stack)


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
                w_h[j] = _simd_exp(w_h[j] - top)
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
    """The first index of row r's largest value: its max by SIMD (the softmax kernels' _row_max),
    then a scan for it: 3x faster than np.argmax on 64 rows of 1,000 logits (34 vs 102 us). A NaN
    that is not first is skipped (the caller sees it in the row's sum)."""
    top = _row_max(a, r)
    for j in range(a.shape[1]):
        if a[r, j] == top:
            return j
    return 0


def _log_sum_exp(row, top):
    """log(sum(exp(row - top)))."""
    total = row.dtype.type(0)
    for j in range(row.shape[0]):
        total += _simd_exp(row[j] - top)
    return np.log(total)


def _log_softmax(logits):
    """Rows of logits - max - log(sum(exp(logits - max))): what beam search ranks."""
    out = np.empty_like(logits)
    for r in range(logits.shape[0]):
        top = _row_max(logits, r)
        shift = top + _log_sum_exp(logits[r], top)
        for j in range(logits.shape[1]):
            out[r, j] = logits[r, j] - shift
    return out


def _embed(ids, positions, stack):
    """Embed(ids)·√d_model + PE(positions), one row per id."""
    embed, scale, pe = stack[11], stack[12], stack[13]
    x = np.empty((ids.shape[0], embed.shape[1]), embed.dtype)
    for r in range(ids.shape[0]):
        x[r] = embed[ids[r]] * scale + pe[positions[r]]
    return x


def _final_norm(x, stack, index):
    return _layer_norm(x, stack[8][index, 0], stack[8][index, 1], stack[9][index]) if stack[10] else x


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
    d = stack[11].shape[1]
    at = np.flatnonzero(src_ok.reshape(B * S))       # the real tokens, as b·S + s
    sentence, position = at // S, at % S
    x = _embed(src.reshape(B * S)[at], position, stack)
    keys, values = np.zeros((B, S, d), x.dtype), np.zeros((B, S, d), x.dtype)
    for layer in range(stack[0].shape[0]):
        qkv = _linear(_norm_in(x, stack, 2 * layer, norm_first), stack[0][layer], stack[1][layer], stack)
        for i in range(at.shape[0]):
            keys[sentence[i], position[i]] = qkv[i, d:2 * d]
            values[sentence[i], position[i]] = qkv[i, 2 * d:]
        y = _attend(qkv[:, :d].copy(), keys, values, sentence, S, src_ok, True, heads)
        x = _norm_out(x, _linear(y, stack[2][layer, 0], stack[3][layer, 0], stack), stack, 2 * layer, norm_first)
        y = _feed_forward(_norm_in(x, stack, 2 * layer + 1, norm_first), stack, layer)
        x = _norm_out(x, y, stack, 2 * layer + 1, norm_first)
    memory = _final_norm(x, stack, 2 * stack[0].shape[0])
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
    for layer in range(stack[0].shape[0]):
        n = 3 * layer
        qkv = _linear(_norm_in(x, stack, n, norm_first), stack[0][layer], stack[1][layer], stack)
        for r in range(ids.shape[0]):  # this step's keys and values join the cache
            self_k[layer, cache_rows[r], pos] = qkv[r, d:2 * d]
            self_v[layer, cache_rows[r], pos] = qkv[r, 2 * d:]
        y = _attend(qkv[:, :d].copy(), self_k[layer], self_v[layer], cache_rows, pos + 1, src_ok, False, heads)
        x = _norm_out(x, _linear(y, stack[2][layer, 0], stack[3][layer, 0], stack), stack, n, norm_first)
        q = _linear(_norm_in(x, stack, n + 1, norm_first), stack[2][layer, 1], stack[3][layer, 1], stack)
        y = _attend(q, cross_k[layer], cross_v[layer], src_rows, cross_k.shape[2], src_ok, True, heads)
        x = _norm_out(x, _linear(y, stack[2][layer, 2], stack[3][layer, 2], stack), stack, n + 1, norm_first)
        y = _feed_forward(_norm_in(x, stack, n + 2, norm_first), stack, layer)
        x = _norm_out(x, y, stack, n + 2, norm_first)
    return _linear(_final_norm(x, stack, 3 * stack[0].shape[0]), generator_w, generator_b, stack)


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


def _no_numpy_sgemm(*args):
    raise RuntimeError("decoder_kernel: NumPy's sgemm was called but this NumPy build has none")


# what SGEMM_SYMBOL names without NumPy's sgemm: a C function pointer on every platform (kept alive here)
_SGEMM_STAND_IN = ctypes.CFUNCTYPE(None, ctypes.c_int32, ctypes.c_int32, ctypes.c_int32, ctypes.c_int64,
                                   ctypes.c_int64, ctypes.c_int64, ctypes.c_float, ctypes.c_void_p, ctypes.c_int64,
                                   ctypes.c_void_p, ctypes.c_int64, ctypes.c_float, ctypes.c_void_p,
                                   ctypes.c_int64)(_no_numpy_sgemm)


@lazy_kernels
def _kernels(numba):
    """Compile-on-first-use kernels: encode, the decoder step's log-probs, the greedy loop; and
    numpy_sgemm: whether `_linear` may call NumPy's sgemm (its symbol is always bound, so cached
    kernels link; without NumPy's, to a stand-in that `stack[14]` False keeps from being called)."""
    import llvmlite.binding
    from numba import types
    from numba.extending import register_jitable
    global _NUMPY_SGEMM
    address = numpy_sgemm_address()
    llvmlite.binding.add_symbol(SGEMM_SYMBOL, address or ctypes.cast(_SGEMM_STAND_IN, ctypes.c_void_p).value)
    int32, int64 = types.int32, types.int64
    _NUMPY_SGEMM = types.ExternalFunction(SGEMM_SYMBOL, types.void(
        int32, int32, int32, int64, int64, int64, types.float32, types.intp, int64, types.intp, int64,
        types.float32, types.intp, int64))
    _softmax._numba_kernels()  # registers _simd_exp and _row_max
    _panels._numba_kernels()   # registers panel_product
    for part in (_linear, _layer_norm, _norm_in, _norm_out, _feed_forward, _attend, _first_max, _log_sum_exp,
                 _log_softmax, _embed, _final_norm, decoder_step):
        register_jitable(fastmath=FASTMATH)(part)
    njit = functools.partial(numba.njit, cache=True, fastmath=FASTMATH)
    return SimpleNamespace(encode=njit(encode), step=njit(log_probs_step), greedy=njit(greedy_loop),
                           numpy_sgemm=address != 0)


# ---------------------------------------------------------------------------------------------
# What transformer.decoding calls
# ---------------------------------------------------------------------------------------------

class _DecodeMemory:
    """The arrays of one decode (stacked parameters, caches), cut from a block of memory that is
    kept for the next decode in the same thread.

    Fresh arrays of a few MB (64 sentences, 32 tokens, SMALL: ~10 MB) come from new mmaps, whose
    pages fault in one by one at their first write: ~1,500 faults and 5-12 ms of a ~90 ms decode
    (bench/README.md, "Ninth pass"). A decode that reuses the previous one's memory finds its pages
    mapped, as PyTorch's and CTranslate2's caching allocators keep theirs. A DecoderKernel takes the
    block when it is made and gives it back when it is dropped; a kernel made while another holds
    the block gets memory of its own. When a decode needs more than the block holds, the rest comes
    from NumPy, and the next decode takes a block of the new size. `release_decode_memory()`
    returns the kept block to the system.
    """

    _kept = threading.local()  # .block: the uint8 array this thread keeps (or None); .need: bytes
    ALIGN = 64

    def __init__(self, block):
        self.block, self.used = block, 0

    @classmethod
    def take(cls) -> "_DecodeMemory":
        block, need = getattr(cls._kept, "block", None), getattr(cls._kept, "need", 0)
        cls._kept.block = None
        if need and (block is None or block.nbytes < need):
            block = np.empty(need + cls.ALIGN, np.uint8)
            block = block[-block.ctypes.data % cls.ALIGN:][:need]  # starts on an ALIGN boundary
        return cls(block)

    def empty(self, shape, dtype) -> np.ndarray:
        """An uninitialised C-contiguous array, from the block while it lasts."""
        dtype = np.dtype(dtype)
        start, size = self.used, math.prod(shape) * dtype.itemsize
        self.used = start + -(-size // self.ALIGN) * self.ALIGN
        if self.block is None or self.used > self.block.nbytes:
            return np.empty(shape, dtype)
        return self.block[start:start + size].view(dtype).reshape(shape)

    def give_back(self):
        """Keep the block (the larger one, if the thread kept another meanwhile) and what was used."""
        kept = getattr(self._kept, "block", None)
        if self.block is not None and (kept is None or kept.nbytes < self.block.nbytes):
            self._kept.block = self.block
        self._kept.need = max(getattr(self._kept, "need", 0), self.used)
        self.block = None


def release_decode_memory():
    """Return the memory that this thread keeps for decoding (see _DecodeMemory) to the system."""
    _DecodeMemory._kept.block = None
    _DecodeMemory._kept.need = 0


TRANSPOSED_FROM_ROWS = 32  # decodes of this many rows or more store the decoder's weights as (in, out)
PANELS_FROM_ROWS = 2       # ... or, in float32 on a CPU with AVX-512, packed into panels (kernels.panels)


class DecoderKernel:
    """One decode of src (B, S) ids (src_ok (B, S): True = a real token) with up to `rows` rows
    and `max_len` new tokens: the encoder has run, the caches are allocated."""

    def __init__(self, model, src: np.ndarray, src_ok: np.ndarray, rows: int, max_len: int):
        dtype = model.generator.weight.dtype
        B, S = src.shape
        N, d = len(model.decoder.layers), model.config.d_model
        pe = model.positional_encoding.table(max(S, max_len, 1))
        sgemm = _kernels().numpy_sgemm
        self._memory = memory = _DecodeMemory.take()
        transposed = rows >= TRANSPOSED_FROM_ROWS  # the decoder's weights as (in, out): see `stacked`
        panels = rows >= PANELS_FROM_ROWS and dtype == np.float32 and _panels.wide_vectors()
        self.stack = stack_of(model.decoder, model.tgt_embed, pe, dtype, ("o", "cross_q", "cross_o"), sgemm,
                              memory.empty, transposed, panels)
        layers = [_linears(layer) for layer in model.decoder.layers]
        cross_kv = [stacked(layers, ("cross_k", "cross_v"), part, dtype, memory.empty) for part in ("weight", "bias")]
        generator_w = np.ascontiguousarray(model.generator.weight.data)
        if panels:
            generator_w = pack_panels(generator_w, memory.empty(
                (panel_count(generator_w.shape[0]), generator_w.shape[1], PANEL), dtype))
        elif transposed:
            generator_w = memory.empty(generator_w.shape[::-1], dtype)
            generator_w[:] = model.generator.weight.data.T
        self.generator = generator_w, model.generator.bias.data
        self.heads, self.norm_first = model.config.h, bool(model.config.norm_first)
        self.src_ok = np.ascontiguousarray(src_ok)
        self.self_k, self.self_v = (memory.empty((N, rows, max(max_len, 1), d), dtype) for _ in range(2))
        self.cross_k, self.cross_v = (memory.empty((N, B, S, d), dtype) for _ in range(2))
        encoder = stack_of(model.encoder, model.src_embed, pe, dtype, numpy_sgemm=sgemm, empty=memory.empty)
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
