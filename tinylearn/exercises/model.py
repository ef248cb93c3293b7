"""Exercises 13-17, the paper's model (transformer/): scaled dot-product attention on Tensors (values and
gradients against the project's), splitting d_model into heads and merging them back, the causal mask, and
the sinusoidal positional encoding. Each ends with the copy task trained with the learner's piece in
the model."""
from __future__ import annotations

import contextlib

import numpy as np

from tinygrad_lite import Tensor
from transformer.attention import MultiHeadAttention, scaled_dot_product_attention
from transformer.masks import causal_mask
from transformer.positional_encoding import sinusoidal_table

from ..exercise import Case, Check, Exercise, Mistake
from ..grading import close
from ..idea_pictures import draw_mask, draw_table
from ..pictures import draw_tensor_function, named, weighted_sum
from . import random_shapes
from .copy_task import copy_task_check, moved_through, split_through


def _rng():
    return np.random.default_rng(0)


def attention_cases():
    rng = _rng()

    def case(label, q, k, v, mask=None, tags=()):
        arrays = [rng.standard_normal(s) for s in (q, k, v)]
        w = rng.standard_normal(q[:-1] + v[-1:])
        return Case(label, (*arrays, mask, w), tags=frozenset(tags))
    padding = np.array([True, True, False])[None, None, :].repeat(2, 0)
    empty_row = np.array([[[True, False, True]], [[False, False, False]]])
    return [case("an empty batch, q (0, 2, 4), k and v (0, 3, 4)", (0, 2, 4), (0, 3, 4), (0, 3, 4)),
            case("one query, one key, d_k = 4", (1, 1, 4), (1, 1, 4), (1, 1, 4)),
            case("q, k, v (1, 3, 4)", (1, 3, 4), (1, 3, 4), (1, 3, 4)),
            case("q, k, v (2, 3, 4), the third key masked (padding)", (2, 3, 4), (2, 3, 4), (2, 3, 4), padding,
                 ("mask",)),
            case("q, k, v (2, 4, 8) under the causal mask", (2, 4, 8), (2, 4, 8), (2, 4, 8), causal_mask(4)[0],
                 ("mask",)),
            case("q (2, 1, 4), k, v (2, 3, 4): the second query's keys all masked", (2, 1, 4), (2, 3, 4), (2, 3, 4),
                 empty_row, ("mask", "masked row")),
            case("heads: q (2, 2, 3, 4), k (2, 2, 5, 4), v (2, 2, 5, 6)", (2, 2, 3, 4), (2, 2, 5, 4), (2, 2, 5, 6))] + [
            case(f"random shapes q {q}, k {k}, v {v}" + (", masked" if mask is not None else ""), q, k, v, mask,
                 ("mask",) if mask is not None else ()) for q, k, v, mask in random_attention_shapes()]


def random_attention_shapes():
    """(q, k, v shapes, a mask or None) for random batch dims, lengths and widths."""
    rng, found = random_shapes.rng_for(13), []
    for i, batch in enumerate(random_shapes.shapes(13, ndims=(1, 2), sizes=(1, 3))):
        t_q, t_k, d_k, d_v = (int(n) for n in rng.integers(1, 6, 4))
        mask = rng.random((t_q, t_k)) > 0.3 if i % 2 else None
        found.append((batch + (t_q, d_k), batch + (t_k, d_k), batch + (t_k, d_v), mask))
    return found


def call_attention(fn, case):
    """(output, dq, dk, dv) of Σ w·attention(q, k, v), the gradients by the engine's backward pass."""
    q, k, v, mask, w = case.args
    leaves = [Tensor(a.copy(), requires_grad=True) for a in (q, k, v)]
    out = fn(*leaves, mask)
    if not isinstance(out, Tensor):
        raise TypeError(f"attention: return a Tensor built with Tensor ops (so gradients flow), got "
                        f"{type(out).__name__}")
    (out * Tensor(w)).sum().backward()
    return (out.data, *(t.grad for t in leaves))


def plain_attention(q, k, v, mask=None, scale=None, axis=-1, fill=-np.inf):
    """Eq. 1 in NumPy with one part changeable (for the detectors)."""
    scores = q @ np.swapaxes(k, -1, -2) * (1 / np.sqrt(q.shape[-1]) if scale is None else scale)
    if mask is not None:
        scores = np.where(mask, scores, fill)
    top = np.max(scores, axis=axis, keepdims=True) if scores.size else scores
    e = np.exp(scores - np.where(np.isneginf(top), 0, top))
    total = e.sum(axis=axis, keepdims=True)
    return np.divide(e, total, out=np.zeros_like(e), where=total > 0) @ v


def _out_as_if(**change):
    def spots(c, e, g):
        q, k, v, mask, _ = c.args
        settings = {"mask": mask, **change}
        return not close(e[0], g[0]) and close(plain_attention(q, k, v, **settings), g[0])
    return spots


def _inverted(c, e, g):
    q, k, v, mask, _ = c.args
    return mask is not None and not close(e[0], g[0]) and close(plain_attention(q, k, v, ~mask), g[0])


ATTENTION = Exercise(
    number=13, name="attention", title="scaled dot-product attention, Eq. 1 (§3.2.1)",
    reads="transformer/attention.py (scaled_dot_product_attention)", function="attention",
    imports="import math\n\nfrom tinygrad_lite import Tensor\n",
    stub='''def attention(q, k, v, mask=None):
    """Attention(Q, K, V) = softmax(Q·Kᵀ / √d_k) · V, the paper's Eq. 1 (§3.2.1), on Tensors.

    q: (..., T_q, d_k), k: (..., T_k, d_k), v: (..., T_k, d_v) Tensors; mask: None or a bool array
    broadcasting to the scores (..., T_q, T_k), True = may attend. Returns a Tensor (..., T_q, d_v).
    Use Tensor ops (@, .transpose(-2, -1), .softmax(-1, mask=mask)) so that gradients flow back to q, k, v.
    A query whose keys are all masked gets zeros, not NaN.
    """''',
    hints=("scores = q @ k.transpose(-2, -1): (..., T_q, T_k), one score per query and key.",
           "Divide the scores by √d_k, d_k = q.shape[-1]: dot products of d_k unit-variance terms have variance d_k.",
           "Each query's weights sum to 1 over the keys: softmax over the last axis, with the mask: "
           "scores.softmax(-1, mask=mask)."),
    solution=lambda q, k, v, mask=None: scaled_dot_product_attention(q, k, v, mask),
    shown=scaled_dot_product_attention,
    why="Dividing by √d_k keeps the scores at unit variance, so the softmax does not saturate to one-hot with "
        "vanishing gradients; the mask goes into the softmax, which gives a fully masked query zeros.",
    cases=attention_cases, call=call_attention,
    mistakes=(
        Mistake("no √d_k", "divide the scores by √d_k (d_k = q.shape[-1]): without it they grow with d_k and "
                "the softmax saturates.", _out_as_if(scale=1.0)),
        Mistake("divided by d_k, not √d_k", "the scale is 1/√d_k: math.sqrt(q.shape[-1]).",
                lambda c, e, g: _out_as_if(scale=1 / c.args[0].shape[-1])(c, e, g)),
        Mistake("the softmax over the queries", "each query's weights sum to 1 over the keys: softmax(-1), the "
                "last axis.", _out_as_if(axis=-2)),
        Mistake("the mask ignored", "pass the mask to the softmax: scores.softmax(-1, mask=mask).",
                lambda c, e, g: "mask" in c.tags and _out_as_if(mask=None)(c, e, g)),
        Mistake("the mask inverted", "True means may attend.", _inverted),
        Mistake("masked with a large negative number, not −inf", "a query whose keys are all masked then "
                "averages every value instead of attending to nothing: pass the mask to softmax (it adds −inf "
                "and gives such a query zeros).",
                lambda c, e, g: "masked row" in c.tags and _out_as_if(fill=-1e9)(c, e, g)),
        Mistake("k not transposed", "q·kᵀ pairs each query with each key: k.transpose(-2, -1).",
                lambda c, e, g: isinstance(g, ValueError) and "matmul" in str(g)),
    ),
    checks=(Check("the end-to-end run (a Transformer learns to copy with your attention in every block)",
                  lambda fn: copy_task_check(contextlib.nullcontext(), attention=fn)),),
    draw=lambda fn, path: draw_tensor_function(fn, path, draw_attention),
)


def draw_attention(fn, rng):
    """Σ w·attention(q, k, v) under the causal mask, q, k, v (3, 4) leaves, with the learner's attention."""
    q, k, v = (Tensor(rng.standard_normal((3, 4)), requires_grad=True) for _ in range(3))
    return weighted_sum(fn(q, k, v, causal_mask(3)[0, 0]), rng)


def split_cases():
    rng = _rng()
    return [Case(f"x {shape}, h = {h}", (rng.standard_normal(shape), h))
            for shape, h in (((0, 3, 4), 2), ((1, 1, 4), 2), ((1, 3, 4), 2), ((2, 5, 6), 3), ((2, 4, 8), 1),
                             ((2, 4, 8), 4))]


def project_split(x, h):
    """MultiHeadAttention.split_heads, the project's own code, on a module of x's width and h heads."""
    return MultiHeadAttention(x.shape[-1], h, dropout=0.0, dtype=np.float64).split_heads(Tensor(x)).data


def _split_as_if(wrong):
    def spots(c, e, g):
        x, h = c.args
        B, T, d = x.shape
        return not close(e, g) and close(wrong(x, B, T, h, d // h), g)
    return spots


SPLIT_HEADS = Exercise(
    number=14, name="split_heads", title="multi-head attention's split into h heads (§3.2.2)",
    reads="transformer/attention.py (MultiHeadAttention.split_heads, merge_heads)", function="split_heads",
    stub='''def split_heads(x, h):
    """(B, T, d_model) -> (B, h, T, d_k), d_k = d_model / h: head i gets features i·d_k ... (i+1)·d_k − 1 of
    every position, and the heads come before the positions, so that attention runs on each head's
    (T, d_k) matrix (the paper's §3.2.2, h = 8 heads of d_k = 64). x: a NumPy array; returns one.
    merge_heads is its inverse: swap the axes back, then reshape to (B, T, d_model).
    """''',
    hints=("First give each head its own axis next to its features: reshape to (B, T, h, d_k).",
           "Then move the head axis before the positions: swap axes 1 and 2.",
           "Reshaping straight to (B, h, T, d_k) keeps the numbers in memory order and mixes positions "
           "into heads."),
    solution=project_split, shown=MultiHeadAttention.split_heads,
    why="A reshape and one transpose, no copy until attention needs one: the heads split the features, never "
        "the positions, and merge_heads undoes it exactly.",
    cases=split_cases,
    mistakes=(
        Mistake("reshaped straight to (B, h, T, d_k)", "a reshape keeps memory order: reshape to (B, T, h, d_k) "
                "first, then swap axes 1 and 2.", _split_as_if(lambda x, B, T, h, dk: x.reshape(B, h, T, dk))),
        Mistake("the heads left after the positions", "(B, T, h, d_k) is halfway: swap axes 1 and 2 to get "
                "(B, h, T, d_k).", _split_as_if(lambda x, B, T, h, dk: x.reshape(B, T, h, dk))),
        Mistake("features dealt out in turn", "head i gets d_k neighbouring features, i·d_k to (i+1)·d_k − 1, "
                "not every h-th one: reshape to (B, T, h, d_k), not (B, T, d_k, h).",
                _split_as_if(lambda x, B, T, h, dk: x.reshape(B, T, dk, h).transpose(0, 3, 1, 2))),
        Mistake("positions and features swapped", "the result is (B, h, T, d_k): transpose(0, 2, 1, 3).",
                _split_as_if(lambda x, B, T, h, dk: x.reshape(B, T, h, dk).transpose(0, 2, 3, 1))),
    ),
    checks=(Check("the end-to-end run (a Transformer learns to copy with your split in every attention block)",
                  lambda fn: copy_task_check(contextlib.nullcontext(), split=fn)),),
    draw=lambda fn, path: draw_tensor_function(fn, path, _split),
)


def _split(fn, rng):
    """Σ w·split(x), x (1, 3, 4) a leaf, split into 2 heads by the learner's function (split_through)."""
    x = Tensor(rng.standard_normal((1, 3, 4)), requires_grad=True)
    return weighted_sum(named(split_through(x, fn, 2), "your split_heads(x, 2)"), rng)


def merge_cases():
    rng = _rng()
    return [Case(f"x {shape}: B = {shape[0]}, h = {shape[1]}, T = {shape[2]}, d_k = {shape[3]}",
                 (rng.standard_normal(shape),), tags=frozenset({"zero-size"} if 0 in shape else ()))
            for shape in ((0, 2, 3, 2), (1, 2, 1, 2), (1, 2, 3, 2), (2, 3, 5, 2), (2, 1, 4, 8), (2, 4, 4, 2))]


def project_merge(x):
    """MultiHeadAttention.merge_heads, the project's own code, on a module of x's heads and width."""
    _, h, _, d_k = x.shape
    return MultiHeadAttention(h * d_k, h, dropout=0.0, dtype=np.float64).merge_heads(Tensor(x)).data


def _merge_as_if(wrong):
    def spots(c, e, g):
        x = c.args[0]
        return not close(e, g) and close(wrong(x, *x.shape), g)
    return spots


MERGE_HEADS = Exercise(
    number=15, name="merge_heads", title="the heads merged back into d_model (§3.2.2, Concat)",
    reads="transformer/attention.py (MultiHeadAttention.merge_heads)", function="merge_heads",
    stub='''def merge_heads(x):
    """(B, h, T, d_k) -> (B, T, h·d_k): the paper's Concat(head_1, ..., head_h) (§3.2.2), the inverse of
    split_heads. Position t's row is head 0's d_k features at t, then head 1's, ... then head h−1's, so
    that W^O sees each head's output in the features the split took it from. x: a NumPy array; returns one.
    """''',
    hints=("Bring the positions back before the heads first: swap axes 1 and 2, to (B, T, h, d_k).",
           "Then reshape to (B, T, h·d_k): each position's heads, one after another.",
           "Reshaping (B, h, T, d_k) straight to (B, T, h·d_k) keeps memory order and mixes the positions."),
    solution=project_merge, shown=MultiHeadAttention.merge_heads,
    why="One transpose and one reshape, the split's steps in reverse: merge_heads(split_heads(x)) is x "
        "exactly, so the heads change nothing but where attention runs.",
    cases=merge_cases,
    mistakes=(
        Mistake("reshaped without moving the heads back", "a reshape keeps memory order, heads first: swap axes 1 "
                "and 2 to (B, T, h, d_k) before reshaping.",
                _merge_as_if(lambda x, B, h, T, dk: x.reshape(B, T, h * dk))),
        Mistake("the heads left as their own axis", "(B, T, h, d_k) is halfway: reshape it to (B, T, h·d_k).",
                _merge_as_if(lambda x, B, h, T, dk: x.transpose(0, 2, 1, 3))),
        Mistake("heads interleaved feature by feature", "head i's d_k features stay together, i·d_k to (i+1)·d_k − 1: "
                "transpose(0, 2, 1, 3), not (0, 2, 3, 1), before the reshape.",
                _merge_as_if(lambda x, B, h, T, dk: x.transpose(0, 2, 3, 1).reshape(B, T, h * dk))),
    ),
    checks=(Check("the end-to-end run (a Transformer learns to copy with your merge in every attention block)",
                  lambda fn: copy_task_check(contextlib.nullcontext(), merge=fn)),),
    draw=lambda fn, path: draw_tensor_function(fn, path, _merge),
)


def _merge(fn, rng):
    """Σ w·merge(x), x (1, 2, 3, 2) a leaf, merged by the learner's function (moved_through)."""
    x = Tensor(rng.standard_normal((1, 2, 3, 2)), requires_grad=True)
    return weighted_sum(named(moved_through(x, fn), "your merge_heads(x)"), rng)


def _mask_as_if(wrong):
    def spots(c, e, g):
        return not close(e, g) and close(wrong(c.args[0]), g) and np.asarray(g).dtype == np.bool_
    return spots


CAUSAL_MASK = Exercise(
    number=16, name="causal_mask", title="the causal mask: no peeking at later words (§3.2.3)",
    reads="transformer/masks.py (causal_mask)", function="causal_mask",
    stub='''def causal_mask(size):
    """(1, 1, size, size) bool: entry [0, 0, i, j] is True when position i may attend to position j, which is
    when j <= i (the paper's §3.2.3: the decoder must not see the words it is about to predict). The two
    leading axes of 1 broadcast over the batch and the heads; True = may attend, as every mask here.
    """''',
    hints=("np.tril keeps the lower triangle, the diagonal included.",
           "Start from np.ones((size, size), dtype=bool); add the two leading axes with [None, None].",
           "Position i may attend to itself: the diagonal is True."),
    solution=causal_mask, shown=causal_mask,
    why="One lower-triangular boolean matrix with broadcast axes: it combines with the padding mask by &, and "
        "the softmax turns False into −inf.",
    cases=lambda: [Case(f"size {n}", (n,)) for n in (0, 1, 2, 3, 5)],
    mistakes=(
        Mistake("the diagonal masked", "position i may attend to itself: j <= i, so np.tril with k=0.",
                _mask_as_if(lambda n: np.tril(np.ones((n, n), dtype=bool), -1)[None, None])),
        Mistake("the future allowed", "the upper triangle is the future: keep the lower one, np.tril.",
                _mask_as_if(lambda n: np.triu(np.ones((n, n), dtype=bool))[None, None])),
        Mistake("True = masked", "here True means may attend: the allowed positions are True.",
                _mask_as_if(lambda n: ~np.tril(np.ones((n, n), dtype=bool))[None, None])),
        Mistake("no broadcast axes", "the mask is (1, 1, size, size), to broadcast over batch and heads: add "
                "[None, None].", lambda c, e, g: np.shape(g) == (c.args[0], c.args[0])),
        Mistake("numbers, not booleans", "a mask is bool: dtype=bool (the softmax reads a float mask as numbers "
                "to add).", lambda c, e, g: np.asarray(g).dtype != np.bool_),
    ),
    checks=(Check("the end-to-end run (a Transformer trained under your mask learns to copy, decoding one token "
                  "at a time)", lambda fn: copy_task_check(contextlib.nullcontext(), causal=fn)),),
    draw=draw_mask, picture="as a heatmap (viz.plots.plot_attention)",
)


def _table_as_if(wrong):
    def spots(c, e, g):
        length, d = c.args
        pos = np.arange(length, dtype=np.float64)[:, None]
        return not close(e, g) and close(wrong(pos, d), g)
    return spots


def _pairs(pos, d, first=np.sin, second=np.cos, per_dim=False):
    table = np.zeros((len(pos), d))
    cols = np.arange(d)
    rates = 10000.0 ** (-(cols if per_dim else cols - cols % 2) / d)
    table[:, 0::2] = first(pos * rates[0::2])
    table[:, 1::2] = second(pos * rates[1::2])
    return table


POSITIONAL_ENCODING = Exercise(
    number=17, name="positional_encoding", title="the sinusoids of §3.5",
    reads="transformer/positional_encoding.py (sinusoidal_table)", function="sinusoidal_table",
    stub='''def sinusoidal_table(length, d_model):
    """The (length, d_model) table of §3.5, positions 0 .. length − 1, float64:
        PE(pos, 2i) = sin(pos / 10000^(2i/d_model)),   PE(pos, 2i+1) = cos(pos / 10000^(2i/d_model))
    Columns 2i and 2i+1 share one frequency; d_model may be odd (the last column is then a sine).
    """''',
    hints=("The frequencies: 10000 ** (-np.arange(0, d_model, 2) / d_model), one per pair of columns.",
           "Fill the even columns table[:, 0::2] with sines and the odd ones table[:, 1::2] with cosines.",
           "With an odd d_model there is one cosine column fewer than sines: use the first d_model // 2 "
           "frequencies for the cosines."),
    solution=lambda length, d_model: sinusoidal_table(length, d_model, np.float64), shown=sinusoidal_table,
    why="Computed once into a table in float64 and cast, so every position costs a lookup; each pair of columns "
        "rotates at its own frequency, so PE(pos + k) is a linear function of PE(pos).",
    cases=lambda: [Case(f"length {n}, d_model {d}", (n, d), tags=frozenset({"odd"} if d % 2 else ()))
                   for n, d in ((0, 4), (1, 4), (3, 4), (5, 6), (4, 5), (50, 16))],
    mistakes=(
        Mistake("sin and cos swapped", "even columns (2i) get sin, odd ones (2i+1) cos.",
                _table_as_if(lambda p, d: _pairs(p, d, np.cos, np.sin))),
        Mistake("a frequency per column, not per pair", "columns 2i and 2i+1 share 10000^(2i/d_model): the "
                "exponent steps by 2 every pair.", _table_as_if(lambda p, d: _pairs(p, d, per_dim=True))),
        Mistake("positions from 1", "positions count from 0: np.arange(length).",
                _table_as_if(lambda p, d: _pairs(p + 1, d))),
        Mistake("sines everywhere", "the odd columns are cosines.",
                _table_as_if(lambda p, d: _pairs(p, d, np.sin, np.sin))),
        Mistake("an odd d_model fails", "with an odd d_model there are d_model // 2 cosine columns: "
                "use that many frequencies for them.", lambda c, e, g: "odd" in c.tags and isinstance(g, Exception)),
    ),
    checks=(Check("the end-to-end run (a Transformer learns to copy with your table as its positional encoding)",
                  lambda fn: copy_task_check(contextlib.nullcontext(), table=fn)),),
    draw=draw_table, picture="as a heatmap (viz.plots.plot_positional_encoding)",
)

EXERCISES = (ATTENTION, SPLIT_HEADS, MERGE_HEADS, CAUSAL_MASK, POSITIONAL_ENCODING)
