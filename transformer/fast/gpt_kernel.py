"""A GPT's cached forward as one Numba call: what transformer.gpt.sampling runs per token.

Sampling feeds one token per step, so the plain path (GPT.forward with its Tensor cache: ~60 module
calls and ~150 Tensor ops a step) spends its time in Python, not in arithmetic. `forward` does the
same arithmetic with no Tensor in between, on the T new tokens at positions start .. start+T-1 (the
window's first tokens after a restart, then one token a step):

    x = wte[ids] + P[start .. start+T-1]                  P: wpe, or the sinusoids
    for each block:                                       (pre-LN; post-LN norms after the adds)
        x = x + W_O·Attention(LN1(x))                     K, V of the new positions go to the cache;
                                                          row r sees the keys 0 .. start+r (causal)
        x = x + W2·act(W1·LN2(x))
    logits = LN_f(x[T-1])·wteᵀ                            the last position's only: what sampling reads

The parameters are stacked by kind over the blocks once per generate (`GPTKernel`): their values
when sampling starts. The caches hold block_size positions per block, K and V (N, block_size, d).
`supports(model)` says whether the kernel runs (the Numba backend, float32 or float64); otherwise
sampling runs the plain path, which is also its test oracle (tests/test_gpt_sampling.py).
"""
from __future__ import annotations

import functools
import math
from types import SimpleNamespace
from typing import NamedTuple

import numpy as np

from tinygrad_lite.kernels import get_backend, softmax
from tinygrad_lite.kernels.backend import FASTMATH, lazy_kernels
from tinygrad_lite.kernels.softmax import simd_exp

from .rows import layer_norm_rows
from .rows import register_numba as register_rows

__all__ = ["GPTKernel", "supports"]

ACTIVATION_CODES = {"relu": 0, "gelu": 1, "gelu_tanh": 2}


class GPTStack(NamedTuple):
    """A GPT's parameters, each kind stacked over its N blocks (zeros where bias=False)."""
    wte: np.ndarray        # (V, d): the token embedding, also the output layer
    positions: np.ndarray  # (block_size, d): wpe, or the sinusoids
    norms: np.ndarray      # (N, 2, 2, d): LN1, LN2 of each block, (weight, bias)
    eps: np.ndarray        # (N, 2)
    final: np.ndarray      # (2, d): LN_f's weight, bias
    final_eps: float
    qkv_w: np.ndarray      # (N, 3d, d): W^Q, W^K, W^V as one product
    qkv_b: np.ndarray      # (N, 3d)
    o_w: np.ndarray        # (N, d, d)
    o_b: np.ndarray        # (N, d)
    w_1: np.ndarray        # (N, d_ff, d)
    b_1: np.ndarray        # (N, d_ff)
    w_2: np.ndarray        # (N, d, d_ff)
    b_2: np.ndarray        # (N, d)


# ---------------------------------------------------------------------------------------------
# The kernel's parts (register_jitable in _kernels; plain NumPy otherwise)
# ---------------------------------------------------------------------------------------------

def _linear(x, weight, bias):
    """x (R, in) @ weightᵀ (weight (out, in)) + bias."""
    y = np.dot(x, weight.T)
    for r in range(y.shape[0]):
        for j in range(y.shape[1]):
            y[r, j] += bias[j]
    return y


def _activate(h, activation):
    """In place: relu (0), exact GELU x·Φ(x) (1), GPT-2's tanh GELU (2), the last as
    ½x(1 + tanh(u)) = x / (1 + exp(-2u)), u = √(2/π)(x + 0.044715x³): an exp LLVM vectorises, in h's dtype."""
    flat = h.reshape(-1)
    if activation == 0:
        for i in range(flat.shape[0]):
            flat[i] = max(flat[i], 0)
    elif activation == 1:
        for i in range(flat.shape[0]):
            flat[i] = 0.5 * flat[i] * (1.0 + math.erf(flat[i] / math.sqrt(2.0)))
    else:
        one, minus_2c, cubic = h.dtype.type(1), h.dtype.type(-2 * math.sqrt(2 / math.pi)), h.dtype.type(0.044715)
        for i in range(flat.shape[0]):
            v = flat[i]
            flat[i] = v / (one + simd_exp(minus_2c * (v + cubic * v * v * v)))
    return h


def _attend(q, keys, values, start, heads):
    """Causal multi-head attention of the query rows q (T, d) at positions start .. start+T-1 over the
    cached keys/values (block_size, d): row r sees keys 0 .. start+r; softmax(q·kᵀ/√d_k)·v per head."""
    T, d = q.shape
    d_k = d // heads
    scale = 1.0 / math.sqrt(d_k)
    out = np.zeros_like(q)
    w = np.empty(start + T, q.dtype)
    for r in range(T):
        n = start + r + 1
        for h in range(heads):
            lo, top = h * d_k, -np.inf
            for j in range(n):
                s = 0.0
                for e in range(d_k):
                    s += q[r, lo + e] * keys[j, lo + e]
                w[j] = s * scale
                top = max(top, w[j])
            total = 0.0
            for j in range(n):
                w[j] = math.exp(w[j] - top)
                total += w[j]
            for j in range(n):
                p = w[j] / total
                for e in range(d_k):
                    out[r, lo + e] += p * values[j, lo + e]
    return out


def _norm(x, stack, layer, which, on):
    """LN1 (which=0) or LN2 (1) of `layer` on x when `on`, else x."""
    if not on:
        return x
    return layer_norm_rows(x, stack.norms[layer, which, 0], stack.norms[layer, which, 1], stack.eps[layer, which])


def forward(ids, start, stack, heads, norm_first, activation, k_cache, v_cache):
    """The next token's logits (V,) after the tokens ids (T,) fed at positions start .. start+T-1,
    whose keys and values are written into k_cache, v_cache (N, block_size, d) at those positions."""
    T, d = ids.shape[0], stack.wte.shape[1]
    x = np.empty((T, d), stack.wte.dtype)
    for r in range(T):
        x[r] = stack.wte[ids[r]] + stack.positions[start + r]
    for layer in range(stack.qkv_w.shape[0]):
        qkv = _linear(_norm(x, stack, layer, 0, norm_first), stack.qkv_w[layer], stack.qkv_b[layer])
        k_cache[layer, start:start + T] = qkv[:, d:2 * d]
        v_cache[layer, start:start + T] = qkv[:, 2 * d:]
        y = _attend(qkv[:, :d], k_cache[layer], v_cache[layer], start, heads)
        x = _norm(x + _linear(y, stack.o_w[layer], stack.o_b[layer]), stack, layer, 0, not norm_first)
        hidden = _activate(_linear(_norm(x, stack, layer, 1, norm_first), stack.w_1[layer], stack.b_1[layer]),
                           activation)
        x = _norm(x + _linear(hidden, stack.w_2[layer], stack.b_2[layer]), stack, layer, 1, not norm_first)
    last = layer_norm_rows(x[T - 1:], stack.final[0], stack.final[1], stack.final_eps)
    return np.dot(stack.wte, last[0])


@lazy_kernels
def _kernels(numba):
    """Compile-on-first-use: forward."""
    from numba.extending import register_jitable
    softmax.register_numba()
    register_rows()
    for part in (_linear, _activate, _attend, _norm):
        register_jitable(fastmath=FASTMATH)(part)
    return SimpleNamespace(forward=functools.partial(numba.njit, cache=True, fastmath=FASTMATH)(forward))


# ---------------------------------------------------------------------------------------------
# What transformer.gpt.sampling calls
# ---------------------------------------------------------------------------------------------

def supports(model) -> bool:
    """True when the kernel runs this GPT: the Numba backend (and SciPy, whose BLAS Numba's np.dot
    calls), every parameter float32 or float64 alike, no attention weights kept for display."""
    import importlib.util
    if get_backend() != "numba" or importlib.util.find_spec("scipy") is None:
        return False
    dtypes = {p.data.dtype for p in model.parameters()}
    return (len(dtypes) == 1 and dtypes <= {np.dtype(np.float32), np.dtype(np.float64)}
            and not any(block.attn.keep_weights for block in model.blocks))


def _vector(param, size: int, dtype) -> np.ndarray:
    return np.zeros(size, dtype) if param is None else param.data


def stack_of(model) -> GPTStack:
    """The model's parameters as a GPTStack (copies: the values when sampling starts)."""
    c, blocks = model.config, list(model.blocks)
    dtype = model.token_embedding.weight.dtype
    d = c.n_embd

    def stacked(get):
        return np.ascontiguousarray(np.stack([get(b) for b in blocks]), dtype=dtype)

    def norm(n):
        return np.stack([n.weight.data, _vector(n.bias, d, dtype)])

    positions = (model.position_embedding.weight.data if model.position_embedding is not None
                 else model.position_encoding.table(c.block_size))
    return GPTStack(
        wte=np.ascontiguousarray(model.token_embedding.weight.data),
        positions=np.ascontiguousarray(positions[:c.block_size], dtype=dtype),
        norms=stacked(lambda b: np.stack([norm(b.ln_1), norm(b.ln_2)])),
        eps=np.array([[b.ln_1.eps, b.ln_2.eps] for b in blocks], dtype=dtype),
        final=np.ascontiguousarray(norm(model.norm), dtype=dtype), final_eps=float(model.norm.eps),
        qkv_w=stacked(lambda b: np.concatenate([b.attn.w_q.weight.data, b.attn.w_k.weight.data,
                                                 b.attn.w_v.weight.data])),
        qkv_b=stacked(lambda b: np.concatenate([_vector(lin.bias, d, dtype) for lin in
                                                 (b.attn.w_q, b.attn.w_k, b.attn.w_v)])),
        o_w=stacked(lambda b: b.attn.w_o.weight.data),
        o_b=stacked(lambda b: _vector(b.attn.w_o.bias, d, dtype)),
        w_1=stacked(lambda b: b.mlp.c_fc.weight.data),
        b_1=stacked(lambda b: _vector(b.mlp.c_fc.bias, c.d_ff, dtype)),
        w_2=stacked(lambda b: b.mlp.c_proj.weight.data),
        b_2=stacked(lambda b: _vector(b.mlp.c_proj.bias, d, dtype)))


class GPTKernel:
    """One sampling run's kernel state: the stacked parameters and the K, V caches."""

    def __init__(self, model):
        c = model.config
        self.stack = stack_of(model)
        self.heads, self.norm_first = c.n_head, bool(c.norm_first)
        self.activation = ACTIVATION_CODES[c.activation]
        dtype = self.stack.wte.dtype
        self.k_cache, self.v_cache = (np.zeros((c.n_layer, c.block_size, c.n_embd), dtype) for _ in range(2))

    def forward(self, ids: np.ndarray, start: int) -> np.ndarray:
        """The next token's logits (V,) after feeding ids (T,) at positions start .. start+T-1; the
        cache must hold positions 0 .. start-1 of the same window."""
        return _kernels().forward(np.ascontiguousarray(ids, dtype=np.int64), start, self.stack, self.heads,
                                  self.norm_first, self.activation, self.k_cache, self.v_cache)
