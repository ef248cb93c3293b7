"""The model's parameters as the decoder kernels read them: stacked by kind, in the layout of a decode.

The kernels (decoder_kernel.py) loop over layers at run time, so each kind of parameter is one
array stacked over the N layers (`stack_of`, `stacked`): a `LayerStack`, one per encoder and
decoder, copied once a decode. Numba compiles a tuple of arrays indexed at run time slowly, a
named tuple of stacks quickly.

How the decoder's weights are stored depends on how many rows a decode multiplies (`layout_for`,
the decoder_layouts trick): as the Linears hold them, (out, in), multiplied by np.dot; or (in, out)
from TRANSPOSED_FROM_ROWS rows, packed into panels (kernels.panels) from PANELS_FROM_ROWS rows in
float32 on an AVX-512 CPU, and float32 products of 2+ rows through NumPy's own sgemm.

`supports(model)` says whether the model has only what the kernels implement (float32 or float64,
LayerNorms and Linears with biases, no attention weights kept for display).
"""
from __future__ import annotations

import importlib.util
import math
from typing import NamedTuple

import numpy as np

from tinygrad_lite.fast import TRICKS
from tinygrad_lite.kernels import get_backend, panels
from tinygrad_lite.kernels.panels import PANEL, pack_panels, panel_count

TRANSPOSED_FROM_ROWS = 32  # decodes of this many rows or more store the decoder's weights as (in, out)
PANELS_FROM_ROWS = 2       # ... or, in float32 on a CPU with AVX-512, packed into panels (kernels.panels)


class Layout(NamedTuple):
    """How a decode stores the weights and multiplies by them (see `stacked` and decoder_kernel's `_linear`)."""
    transposed: bool = False   # weights as (in, out)
    panels: bool = False       # weights packed into panels (P, in, 32)
    numpy_sgemm: bool = False  # float32 products of 2+ rows call NumPy's sgemm, not np.dot


PLAIN = Layout()  # (out, in) as the Linears hold them, np.dot at every row count


def layout_for(rows: int, dtype, sgemm_found: bool) -> Layout:
    """The decoder's weight layout for a decode of `rows` rows; `sgemm_found`: NumPy's sgemm is bound.

    (in, out) from TRANSPOSED_FROM_ROWS rows: at 64 rows, with the weights out of the CPU's caches,
    OpenBLAS runs a decoder step's products ~10% faster so, but the transposing copies cost ~3 ms a
    decode, more than one row gains (bench/README.md, "Ninth pass"). NumPy's bundled OpenBLAS (0.3.31
    vs SciPy's 0.3.30, which Numba's np.dot calls) multiplies these float32 shapes 1.4-2.1x faster at
    2-32 rows, 1.2x at 64; at one row np.dot's GEMV is faster."""
    if TRICKS.decoder_layouts:
        wide = rows >= PANELS_FROM_ROWS and np.dtype(dtype) == np.float32 and panels.wide_vectors()
        return Layout(transposed=rows >= TRANSPOSED_FROM_ROWS, panels=wide, numpy_sgemm=sgemm_found)
    return PLAIN


class LayerStack(NamedTuple):
    """An encoder's or decoder's parameters, each kind stacked over its N layers (see `stack_of`)."""
    qkv_w: np.ndarray      # (N, 3d, d): self-attention's q, k, v as one product
    qkv_b: np.ndarray      # (N, 3d)
    attn_w: np.ndarray     # (N, A, d, d): the other attention Linears, `out_names` in order
    attn_b: np.ndarray     # (N, A, d)
    w_1: np.ndarray        # (N, d_ff, d)
    b_1: np.ndarray        # (N, d_ff)
    w_2: np.ndarray        # (N, d, d_ff)
    b_2: np.ndarray        # (N, d)
    norms: np.ndarray      # (K·N + 1, 2, d): weight, bias of each layer's K Add & Norms, then the final norm's
    eps: np.ndarray        # (K·N + 1,)
    final_norm: bool       # False: the last row of norms is a placeholder
    embed: np.ndarray      # (vocab, d): the embedding table
    scale: np.floating     # √d_model
    pe: np.ndarray         # (positions, d): the positional encoding table
    numpy_sgemm: bool      # the layout's
    transposed: bool       # the layout's


def linears_of(layer) -> dict:
    """An encoder or decoder layer's Linears by the names the kernels give them."""
    attn, ffn = layer.self_attn, layer.feed_forward
    named = {"q": attn.w_q, "k": attn.w_k, "v": attn.w_v, "o": attn.w_o, "w_1": ffn.w_1, "w_2": ffn.w_2}
    cross = getattr(layer, "cross_attn", None)
    if cross is not None:
        named.update(cross_q=cross.w_q, cross_k=cross.w_k, cross_v=cross.w_v, cross_o=cross.w_o)
    return named


def add_norms_of(layer) -> list:
    return [getattr(layer, name) for name in ("add_norm1", "add_norm2", "add_norm3") if hasattr(layer, name)]


def supports(model) -> bool:
    """True when the kernels implement everything this model's encoder and decoder do, on the Numba
    backend (and SciPy, whose BLAS bindings Numba's np.dot calls, is installed: setup.cfg requires it)."""
    if get_backend() != "numba" or importlib.util.find_spec("scipy") is None:
        return False
    dtype = model.generator.weight.dtype
    layers = list(model.encoder.layers) + list(model.decoder.layers)
    add_norms = [n for layer in layers for n in add_norms_of(layer)]
    norms = [n.norm for n in add_norms] + [s.norm for s in (model.encoder, model.decoder) if s.norm is not None]
    linears = [model.generator] + [lin for layer in layers for lin in linears_of(layer).values()]
    return (dtype in (np.float32, np.float64)
            and all(n.norm_first == model.config.norm_first for n in add_norms)
            and all(n.weight is not None and n.bias is not None and n.weight.ndim == 1 for n in norms)
            and all(lin.bias is not None and lin.weight.dtype == dtype for lin in linears)
            and not any(layer.self_attn.keep_weights or getattr(layer, "cross_attn", layer.self_attn).keep_weights
                        for layer in layers)
            and model.src_embed.lut.weight.dtype == model.tgt_embed.lut.weight.dtype == dtype)


def stack_of(stack, embeddings, pe: np.ndarray, dtype, out_names=("o",), layout: Layout = PLAIN,
             empty=np.empty) -> LayerStack:
    """An encoder's or decoder's parameters as a LayerStack, each weight laid out as `layout` says:
    (out, in), or (in, out) (qkv_w (N, d, 3d), w_1 (N, d, d_ff), ...), or packed into panels
    (qkv_w (N, P, d, 32), attn_w (N, A, P, d, 32), ...). `empty(shape, dtype)` makes the arrays."""
    layers = [linears_of(layer) for layer in stack.layers]
    norms = [n.norm for layer in stack.layers for n in add_norms_of(layer)]
    norms.append(stack.norm if stack.norm is not None else norms[-1])
    norm_params = empty((len(norms), 2, norms[0].weight.shape[0]), dtype)
    for i, n in enumerate(norms):
        norm_params[i] = n.weight.data, n.bias.data

    def merged(names, part):  # the names' outputs one after another: (N, A·out, in) or (N, in, A·out)
        if layout.panels and part == "weight":
            joined = [np.concatenate([linears[name].weight.data for name in names]) for linears in layers]
            out = empty((len(layers), panel_count(joined[0].shape[0])) + joined[0].shape[1:] + (PANEL,), dtype)
            for i, weight in enumerate(joined):
                pack_panels(weight, out[i])
            return out
        if part == "bias" or not layout.transposed:
            out = stacked(layers, names, part, dtype, empty)
            return out.reshape((out.shape[0], -1) + out.shape[3:])
        size, width = getattr(layers[0][names[0]], part).data.shape
        joined = empty((len(layers), width, len(names) * size), dtype)
        for i, linears in enumerate(layers):  # each transposed straight into its columns
            for j, name in enumerate(names):
                joined[i, :, j * size:(j + 1) * size] = getattr(linears[name], part).data.T
        return joined
    return LayerStack(
        qkv_w=merged(("q", "k", "v"), "weight"), qkv_b=merged(("q", "k", "v"), "bias"),
        attn_w=stacked(layers, out_names, "weight", dtype, empty, layout),
        attn_b=stacked(layers, out_names, "bias", dtype, empty),
        w_1=merged(["w_1"], "weight"), b_1=merged(["w_1"], "bias"),
        w_2=merged(["w_2"], "weight"), b_2=merged(["w_2"], "bias"),
        norms=norm_params, eps=np.array([n.eps for n in norms], dtype=np.float64), final_norm=stack.norm is not None,
        embed=np.ascontiguousarray(embeddings.lut.weight.data), scale=dtype.type(math.sqrt(embeddings.d_model)),
        pe=np.ascontiguousarray(pe, dtype=dtype), numpy_sgemm=layout.numpy_sgemm, transposed=layout.transposed)


def stacked(layers: list, names, part: str, dtype, empty=np.empty, layout: Layout = PLAIN) -> np.ndarray:
    """(N, len(names), *shape): the `part` ("weight" or "bias") of the named Linears of each layer
    (as `linears_of` names them), one copy of each; a weight (out, in) laid out as `layout` says:
    (in, out) if transposed, (N, len(names), P, in, 32) in panels."""
    first = getattr(layers[0][names[0]], part).data
    if layout.panels and part == "weight":
        out = empty((len(layers), len(names), panel_count(first.shape[0]), first.shape[1], PANEL), dtype)
        for i, linears in enumerate(layers):
            for j, name in enumerate(names):
                pack_panels(linears[name].weight.data, out[i, j])
        return out
    flip = layout.transposed and part == "weight"
    out = empty((len(layers), len(names)) + (first.shape[::-1] if flip else first.shape), dtype)
    for i, linears in enumerate(layers):
        for j, name in enumerate(names):
            data = getattr(linears[name], part).data
            out[i, j] = data.T if flip else data
    return out


def generator_weight(generator, layout: Layout, dtype, empty=np.empty) -> np.ndarray:
    """The generator's weight (V, d) laid out as `layout` says (the decoder's layout)."""
    weight = np.ascontiguousarray(generator.weight.data)
    if layout.panels:
        return pack_panels(weight, empty((panel_count(weight.shape[0]), weight.shape[1], PANEL), dtype))
    if layout.transposed:
        flipped = empty(weight.shape[::-1], dtype)
        flipped[:] = weight.T
        return flipped
    return weight
