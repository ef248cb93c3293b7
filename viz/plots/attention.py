"""Attention weights softmax(QKᵀ/√d_k) as heatmaps: one kind of attention per figure, or every
kind of one translation in one figure; layers down, heads across, queries against keys."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from .figure import DEFAULT_DPI, PlotResult, new_figure, output_path, save_figure
from .inputs import as_array, as_tokens, token_rotation

ATTENTION_KINDS = ("encoder self-attention", "decoder self-attention", "cross-attention")


@dataclass
class _AttentionPanel:
    """One kind of attention, checked: weights (L, h, T_q, T_k), tokens and layer names."""

    weights: np.ndarray
    queries: list[str]
    keys: list[str]
    kind: str
    layer_names: list[str]


def _attention_panel(weights, src_tokens, tgt_tokens, layer_names, kind, op) -> _AttentionPanel:
    array = as_array(weights, op, "weights")
    if array.ndim not in (2, 3, 4):
        raise ValueError(
            f"{op}: weights must have shape (L, h, T_q, T_k), (h, T_q, T_k) or (T_q, T_k); "
            f"got shape {array.shape}"
        )
    array = array.reshape((1,) * (4 - array.ndim) + array.shape)
    keys = as_tokens(src_tokens, op, "src_tokens")
    query_name = "src_tokens" if tgt_tokens is None else "tgt_tokens"
    queries = keys if tgt_tokens is None else as_tokens(tgt_tokens, op, "tgt_tokens")
    n_layers, _, t_q, t_k = array.shape
    if t_k != len(keys):
        raise ValueError(
            f"{op}: weights have T_k={t_k} key positions (last axis, shape {array.shape}) "
            f"but src_tokens has {len(keys)} tokens"
        )
    if t_q != len(queries):
        raise ValueError(
            f"{op}: weights have T_q={t_q} query positions (second-to-last axis, shape "
            f"{array.shape}) but {query_name} has {len(queries)} tokens"
        )
    if layer_names is None:
        layer_names = [f"layer {index + 1}" for index in range(n_layers)]
    layer_names = [str(name) for name in layer_names]
    if len(layer_names) != n_layers:
        raise ValueError(f"{op}: got {len(layer_names)} layer_names for {n_layers} layers")
    if kind is None:
        kind = "self-attention" if tgt_tokens is None else "cross-attention"
    return _AttentionPanel(array, queries, keys, str(kind), layer_names)


def _attention_size(panel: _AttentionPanel) -> tuple[float, float]:
    n_layers, n_heads, t_q, t_k = panel.weights.shape
    panel_width = max(1.8, 0.32 * t_k + 0.9)
    panel_height = max(1.6, 0.32 * t_q + 0.7)
    return n_heads * panel_width + 1.0, n_layers * panel_height + 0.7


def _draw_attention(target, panel: _AttentionPanel, cmap: str, title: str | None) -> None:
    """Heatmaps of one panel into `target` (a Figure or SubFigure): layers down, heads across."""
    array, keys, queries, layer_names = panel.weights, panel.keys, panel.queries, panel.layer_names
    n_layers, n_heads, t_q, t_k = array.shape
    axes = target.subplots(n_layers, n_heads, squeeze=False)
    vmin = min(0.0, float(array.min()))
    vmax = max(1.0, float(array.max()))
    x_rotation = token_rotation(keys)
    for layer in range(n_layers):
        for head in range(n_heads):
            ax = axes[layer, head]
            image = ax.imshow(
                array[layer, head],
                cmap=cmap,
                vmin=vmin,
                vmax=vmax,
                aspect="auto",
                interpolation="nearest",
            )
            ax.set_xticks(range(t_k))
            ax.set_yticks(range(t_q))
            if layer == n_layers - 1:
                ax.set_xticklabels(keys, rotation=x_rotation)
                ax.set_xlabel("key")
            else:
                ax.tick_params(labelbottom=False)
            if head == 0:
                ax.set_yticklabels(queries)
                ax.set_ylabel(f"{layer_names[layer]}\nquery" if n_layers > 1 else "query")
            else:
                ax.tick_params(labelleft=False)
            if n_heads > 1 and layer == 0:
                ax.set_title(f"head {head + 1}", fontsize="medium")
    target.colorbar(image, ax=axes.ravel().tolist(), shrink=0.9, label="attention weight")
    target.suptitle(_attention_title(panel.kind, title))


def _attention_title(kind: str, title: str | None) -> str:
    """The kind, then the title; the kind only once if the title already names it."""
    if title and kind.lower() in title.lower():
        return title
    return _title(kind, title)


def _title(*parts) -> str | None:
    kept = [part for part in parts if part]
    return " — ".join(kept) if kept else None


def plot_attention(
    weights,
    src_tokens,
    tgt_tokens=None,
    out=None,
    title=None,
    layer_names=None,
    *,
    kind: str | None = None,
    cmap: str = "viridis",
    dpi: float = DEFAULT_DPI,
) -> PlotResult:
    """Attention weights softmax(QKᵀ/√d_k) as a grid of heatmaps: one row per layer, one column
    per head; query tokens down the y axis, key tokens along the x axis.

    `weights` has shape (L, h, T_q, T_k), (h, T_q, T_k) or (T_q, T_k). Keys are `src_tokens`;
    queries are `tgt_tokens`, or `src_tokens` again for self-attention. `kind` (e.g.
    "encoder self-attention", "decoder self-attention", "cross-attention") leads the title,
    "KIND — TITLE".
    """
    op = "plot_attention"
    path, fmt = output_path(out, op)
    panel = _attention_panel(weights, src_tokens, tgt_tokens, layer_names, kind, op)
    figure = new_figure(_attention_size(panel), dpi, op)
    _draw_attention(figure, panel, cmap, title)
    save_figure(figure, path, fmt, op)
    data = {
        "weights": panel.weights,
        "queries": panel.queries,
        "keys": panel.keys,
        "kind": panel.kind,
        "layer_names": panel.layer_names,
    }
    return PlotResult(path, figure, data)


def plot_attention_maps(
    maps: Mapping,
    out=None,
    title: str | None = None,
    *,
    kinds: Sequence[str] | None = None,
    cmap: str = "viridis",
    dpi: float = DEFAULT_DPI,
) -> PlotResult:
    """Every kind of attention of one translation in ONE figure at `out`, one section per kind
    (encoder self-attention, decoder self-attention, cross-attention, in that order), each a
    grid of heatmaps with layers down and heads across.

    `maps` is what `Translator.attention_maps(sentence)` returns: kind -> (weights
    (L, h, T_q, T_k), query tokens, key tokens). `kinds` picks some of them (default: all).
    `title` (e.g. "这是一个苹果 → this is an apple .") heads the figure.
    """
    op = "plot_attention_maps"
    path, fmt = output_path(out, op)
    panels = _map_panels(maps, kinds, op)
    sizes = [_attention_size(panel) for panel in panels]
    heading = 0.5 if title else 0.0
    width = max(size[0] for size in sizes)
    figure = new_figure((width, sum(size[1] for size in sizes) + heading), dpi, op)
    sections = figure.subfigures(len(panels), 1, squeeze=False, height_ratios=[s[1] for s in sizes])
    for section, panel in zip(sections[:, 0], panels):
        _draw_attention(section, panel, cmap, None)
    if title:
        figure.suptitle(title, fontsize="large", fontweight="bold")
    save_figure(figure, path, fmt, op)
    data = {
        "kinds": [panel.kind for panel in panels],
        "weights": {panel.kind: panel.weights for panel in panels},
        "queries": {panel.kind: panel.queries for panel in panels},
        "keys": {panel.kind: panel.keys for panel in panels},
    }
    return PlotResult(path, figure, data)


def _map_panels(maps, kinds, op: str) -> list:
    """One panel per kind of attention in `maps`, in ATTENTION_KINDS' order, only `kinds` if given."""
    if not isinstance(maps, Mapping) or not maps:
        raise TypeError(
            f"{op}: maps must be a non-empty dict kind -> (weights, query tokens, key tokens) "
            f"as Translator.attention_maps returns; got {type(maps).__name__}"
        )
    order = [kind for kind in ATTENTION_KINDS if kind in maps]
    order += [kind for kind in maps if kind not in order]
    if kinds is not None:
        kinds = [kinds] if isinstance(kinds, str) else list(kinds)
        unknown = [kind for kind in kinds if kind not in maps]
        if unknown or not kinds:
            raise ValueError(f"{op}: kinds {unknown or kinds!r} not in maps; it has {order}")
        order = [kind for kind in order if kind in kinds]
    panels = []
    for kind in order:
        entry = maps[kind]
        if not isinstance(entry, Sequence) or len(entry) != 3:
            raise ValueError(
                f"{op}: maps[{kind!r}] must be (weights, query tokens, key tokens), "
                f"got {type(entry).__name__}"
            )
        weights, queries, keys = entry
        panels.append(_attention_panel(weights, keys, queries, None, kind, op))
    return panels
