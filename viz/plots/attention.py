"""matplotlib pictures for the article's ideas: attention maps, positional encodings, softmax
temperature, loss curves, gradient descent on a loss surface, decision boundaries.

Every function takes plain NumPy arrays, Python lists or file paths (never the engine), builds
its own `Figure` on the Agg canvas (no pyplot, so nothing leaks between calls), writes `out`
atomically in the format its extension names, and returns a `PlotResult`. With `out=None`
nothing is written: in Jupyter the returned PlotResult shows itself inline as a PNG.
"""

from __future__ import annotations

import io
import json
import math
import os
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import matplotlib as mpl
import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.colors import ListedColormap
from matplotlib.figure import Figure
from matplotlib.text import Text

from tinygrad_lite.checks import int_at_least, is_real, number
from tinygrad_lite.files import atomic_write
from viz import fonts

SUPPORTED_FORMATS = ("png", "svg", "pdf")
DEFAULT_DPI = 100
_MISSING_GLYPH_MESSAGE = r"Glyph \d+ .*missing from font"


class MissingCJKFontWarning(UserWarning):
    """Chinese/Japanese/Korean text is being drawn without a font that has its glyphs."""


@dataclass
class PlotResult:
    """What a plot function made: the file written (None with out=None), the Figure, and the
    numbers it drew. Jupyter shows it inline (`_repr_png_`), written or not."""

    path: Path | None
    figure: Figure
    data: dict[str, Any] = field(default_factory=dict)

    def png(self) -> bytes:
        """The figure as PNG bytes, at the figure's dpi; no file is written."""
        with io.BytesIO() as stream, warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=_MISSING_GLYPH_MESSAGE)
            self.figure.savefig(stream, format="png", dpi=self.figure.dpi)
            return stream.getvalue()

    def _repr_png_(self) -> bytes:
        return self.png()


# ---------------------------------------------------------------- output


def _output_path(out, op: str) -> tuple[Path | None, str]:
    if out is None:
        return None, "png"
    if not isinstance(out, (str, os.PathLike)):
        raise TypeError(
            f"{op}: out must be a str or path (or None to only return the figure), "
            f"got {type(out).__name__}"
        )
    path = Path(out)
    fmt = path.suffix.lower().lstrip(".")
    if fmt not in SUPPORTED_FORMATS:
        allowed = ", ".join("." + name for name in SUPPORTED_FORMATS)
        got = f"extension {path.suffix!r}" if path.suffix else "no extension"
        raise ValueError(f"{op}: cannot write {str(path)!r}: {got}; expected one of {allowed}")
    return path, fmt


def _new_figure(figsize, dpi, op: str) -> Figure:
    dpi = number(op, "dpi", dpi, 0, 10_000, low_open=True, high_open=True)
    figure = Figure(figsize=figsize, dpi=dpi, layout="constrained")
    FigureCanvasAgg(figure)
    return figure


def _use_cjk_font(figure: Figure, fmt: str, op: str) -> tuple[dict, bool]:
    """Give CJK texts a CJK font; without one keep SVG text as text, or warn once.

    Returns the rcParams to save with and whether glyphs are known to be missing.
    """
    cjk_texts = [text for text in figure.findobj(Text) if fonts.needs_cjk_font(text.get_text())]
    if not cjk_texts:
        return {}, False
    font = fonts.find_cjk_font()
    if font is not None:
        for text in cjk_texts:
            text.set_fontproperties(font.properties(size=text.get_fontsize()))
        missing = fonts.uncovered_characters(font, "".join(t.get_text() for t in cjk_texts))
        if missing:
            warnings.warn(
                f"{op}: the font {font.name!r} has no glyph for {missing[:20]!r}, so these "
                f"characters may show as boxes in the .{fmt}; {fonts.INSTALL_HINT}",
                MissingCJKFontWarning,
                stacklevel=4,
            )
            return {}, True
        return {}, False
    if fmt == "svg":
        return {"svg.fonttype": "none"}, True
    shown = "".join(dict.fromkeys(ch for t in cjk_texts for ch in t.get_text() if fonts.needs_cjk_font(ch)))
    warnings.warn(
        f"{op}: no font with Chinese glyphs was found, so characters like {shown[:12]!r} may "
        f"show as boxes in the .{fmt}; {fonts.missing_font_hint()}",
        MissingCJKFontWarning,
        stacklevel=4,
    )
    return {}, True


def _save(figure: Figure, path: Path | None, fmt: str, op: str) -> Path | None:
    """Write the figure atomically (a figure is easy to redraw, so no fsync), with CJK text
    handled; with no path, only give CJK text its font, for showing inline."""
    if path is None:
        _use_cjk_font(figure, fmt, op)
        return None
    with (atomic_write(path, durable=False, op=op, suffix=f".tmp.{fmt}", make_parents=True) as temp,
          warnings.catch_warnings()):
        rc, glyphs_missing = _use_cjk_font(figure, fmt, op)
        if glyphs_missing:
            warnings.filterwarnings("ignore", message=_MISSING_GLYPH_MESSAGE)
        with mpl.rc_context(rc):
            figure.savefig(temp, format=fmt, dpi=figure.dpi)
    return path


# ---------------------------------------------------------------- input checks


def _as_array(value, op: str, name: str) -> np.ndarray:
    try:
        array = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise TypeError(
            f"{op}: {name} must be numeric array-like, got {type(value).__name__}"
        ) from exc
    if not np.all(np.isfinite(array)):
        raise ValueError(f"{op}: {name} has NaN or infinite entries; expected finite numbers")
    return array


def _as_tokens(tokens, op: str, name: str) -> list[str]:
    if isinstance(tokens, str):
        raise TypeError(
            f"{op}: {name} must be a list of token strings, got one str {tokens[:20]!r}; "
            f"use list(text) for one token per character"
        )
    try:
        return [str(token) for token in tokens]
    except TypeError as exc:
        raise TypeError(
            f"{op}: {name} must be a list of tokens, got {type(tokens).__name__}"
        ) from exc


def _title(*parts) -> str | None:
    kept = [part for part in parts if part]
    return " — ".join(kept) if kept else None


# ---------------------------------------------------------------- attention


def _token_rotation(tokens: Sequence[str]) -> int:
    return 0 if all(len(token) <= 2 for token in tokens) else 90


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
    array = _as_array(weights, op, "weights")
    if array.ndim not in (2, 3, 4):
        raise ValueError(
            f"{op}: weights must have shape (L, h, T_q, T_k), (h, T_q, T_k) or (T_q, T_k); "
            f"got shape {array.shape}"
        )
    array = array.reshape((1,) * (4 - array.ndim) + array.shape)
    keys = _as_tokens(src_tokens, op, "src_tokens")
    query_name = "src_tokens" if tgt_tokens is None else "tgt_tokens"
    queries = keys if tgt_tokens is None else _as_tokens(tgt_tokens, op, "tgt_tokens")
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
    x_rotation = _token_rotation(keys)
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
    path, fmt = _output_path(out, op)
    panel = _attention_panel(weights, src_tokens, tgt_tokens, layer_names, kind, op)
    figure = _new_figure(_attention_size(panel), dpi, op)
    _draw_attention(figure, panel, cmap, title)
    _save(figure, path, fmt, op)
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
    path, fmt = _output_path(out, op)
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
    sizes = [_attention_size(panel) for panel in panels]
    heading = 0.5 if title else 0.0
    width = max(size[0] for size in sizes)
    figure = _new_figure((width, sum(size[1] for size in sizes) + heading), dpi, op)
    sections = figure.subfigures(len(panels), 1, squeeze=False, height_ratios=[s[1] for s in sizes])
    for section, panel in zip(sections[:, 0], panels):
        _draw_attention(section, panel, cmap, None)
    if title:
        figure.suptitle(title, fontsize="large", fontweight="bold")
    _save(figure, path, fmt, op)
    data = {
        "kinds": [panel.kind for panel in panels],
        "weights": {panel.kind: panel.weights for panel in panels},
        "queries": {panel.kind: panel.queries for panel in panels},
        "keys": {panel.kind: panel.keys for panel in panels},
    }
    return PlotResult(path, figure, data)


# ---------------------------------------------------------------- positional encoding


def plot_positional_encoding(
    pe,
    out=None,
    *,
    title: str | None = "sinusoidal positional encoding",
    cmap: str = "RdBu_r",
    dpi: float = DEFAULT_DPI,
) -> PlotResult:
    """The PE matrix (positions × d_model dims) as a heatmap with a colorbar: the stripes of
    sin/cos at geometrically growing wavelengths (paper §3.5)."""
    op = "plot_positional_encoding"
    path, fmt = _output_path(out, op)
    matrix = _as_array(pe, op, "pe")
    while matrix.ndim > 2 and matrix.shape[0] == 1:
        matrix = matrix[0]
    if matrix.ndim != 2 or 0 in matrix.shape:
        raise ValueError(
            f"{op}: pe must have shape (max_len, d_model) (or (1, max_len, d_model)); "
            f"got shape {np.shape(pe)}"
        )
    positions, d_model = matrix.shape
    width = float(np.clip(2.0 + d_model * 0.04, 4.0, 10.0))
    height = float(np.clip(1.5 + positions * 0.04, 3.0, 8.0))
    figure = _new_figure((width, height), dpi, op)
    ax = figure.subplots()
    limit = max(float(np.abs(matrix).max()), 1e-12)
    image = ax.imshow(
        matrix, cmap=cmap, vmin=-limit, vmax=limit, aspect="auto", interpolation="nearest"
    )
    ax.set_xlabel(f"dimension i (d_model = {d_model})")
    ax.set_ylabel("position pos")
    figure.colorbar(image, ax=ax, label="PE(pos, i)")
    if title:
        ax.set_title(title)
    _save(figure, path, fmt, op)
    return PlotResult(path, figure, {"pe": matrix})


# ---------------------------------------------------------------- softmax temperature


def softmax_with_temperature(logits, temperature: float = 1.0) -> np.ndarray:
    """softmax(z / T) along the last axis, shifting by the max first so exp never overflows."""
    op = "softmax_with_temperature"
    z = _as_array(logits, op, "logits")
    if z.ndim == 0 or z.shape[-1] == 0:
        raise ValueError(f"{op}: logits must have at least one entry, got shape {z.shape}")
    temperature = number(op, "temperature", temperature, 0, low_open=True)
    scaled = z / temperature
    shifted = np.exp(scaled - scaled.max(axis=-1, keepdims=True))
    return shifted / shifted.sum(axis=-1, keepdims=True)


def plot_softmax_temperatures(
    logits=(3, 5, -10, 20),
    temperatures=(1, 10),
    out=None,
    *,
    title: str | None = "softmax(z / T)",
    dpi: float = DEFAULT_DPI,
) -> PlotResult:
    """The article's example: grouped bars of softmax(logits / T) for each temperature T, each bar
    labelled with its probability to 4 decimals. A large T flattens the distribution."""
    op = "plot_softmax_temperatures"
    path, fmt = _output_path(out, op)
    z = _as_array(logits, op, "logits")
    if z.ndim != 1 or z.size == 0:
        raise ValueError(f"{op}: logits must be a non-empty 1-D sequence, got shape {z.shape}")
    temperatures = tuple(temperatures)
    if not temperatures:
        raise ValueError(f"{op}: temperatures must name at least one T > 0, got ()")
    probabilities = np.stack([softmax_with_temperature(z, t) for t in temperatures])

    n_temps, n_logits = probabilities.shape
    figure = _new_figure((max(4.0, 1.0 + 0.55 * n_logits * n_temps), 3.6), dpi, op)
    ax = figure.subplots()
    bar_width = 0.8 / n_temps
    centers = np.arange(n_logits)
    annotations = []
    for row, temperature in enumerate(temperatures):
        offsets = centers - 0.4 + bar_width * (row + 0.5)
        bars = ax.bar(offsets, probabilities[row], width=bar_width, label=f"T = {temperature:g}")
        labels = [f"{p:.4f}" for p in probabilities[row]]
        ax.bar_label(bars, labels=labels, padding=2, fontsize="x-small")
        annotations.append(labels)
    ax.set_xticks(centers, labels=[f"z = {value:g}" for value in z])
    ax.set_ylim(0, 1.12)
    ax.set_ylabel("probability")
    ax.legend(loc="upper left", fontsize="small")
    if title:
        ax.set_title(title)
    _save(figure, path, fmt, op)
    data = {
        "logits": z,
        "temperatures": temperatures,
        "probabilities": probabilities,
        "annotations": annotations,
    }
    return PlotResult(path, figure, data)


# ---------------------------------------------------------------- loss curves


def read_metrics(path) -> list[dict]:
    """Records of a JSON-lines metrics log, one dict per line; malformed lines are skipped with
    one warning naming their line numbers, blank lines silently."""
    op = "read_metrics"
    records, bad_lines = [], []
    try:
        with open(path, encoding="utf-8") as stream:
            for line_number, line in enumerate(stream, start=1):
                if not line.strip():
                    continue
                try:
                    record = json.loads(line)
                except json.JSONDecodeError:
                    bad_lines.append(line_number)
                    continue
                if isinstance(record, dict):
                    records.append(record)
                else:
                    bad_lines.append(line_number)
    except FileNotFoundError as exc:
        raise FileNotFoundError(f"{op}: no metrics file at {str(path)!r}") from exc
    if bad_lines:
        shown = ", ".join(str(number) for number in bad_lines[:20])
        more = f" and {len(bad_lines) - 20} more" if len(bad_lines) > 20 else ""
        warnings.warn(
            f"{op}: skipped {len(bad_lines)} malformed line(s) in {str(path)!r} "
            f"(not a JSON object): line {shown}{more}",
            UserWarning,
            stacklevel=2,
        )
    return records


def _is_number(value) -> bool:
    return is_real(value) and math.isfinite(value)


def _curves_from_records(records, keys, x_key, op):
    for index, record in enumerate(records):
        if not isinstance(record, Mapping):
            raise TypeError(
                f"{op}: metrics records must be dicts, record {index} is {type(record).__name__}"
            )
    if x_key is None:
        x_key = next((name for name in ("step", "epoch") if any(name in r for r in records)), None)
    curves = {}
    for key in keys:
        xs, ys = [], []
        for index, record in enumerate(records):
            x = index if x_key is None else record.get(x_key)
            if _is_number(record.get(key)) and _is_number(x):
                xs.append(x)
                ys.append(record[key])
        if xs:
            curves[key] = (np.asarray(xs, dtype=float), np.asarray(ys, dtype=float))
    available = sorted({name for record in records for name in record})
    if not curves:
        raise ValueError(
            f"{op}: none of keys {tuple(keys)} found in metrics; keys present: {available}"
        )
    for key in keys:
        if key not in curves:
            warnings.warn(
                f"{op}: no numeric {key!r} in the metrics; keys present: {available}",
                UserWarning,
                stacklevel=4,  # _curves_from_records < _curves < plot_loss_curves < the caller
            )
    return curves, x_key or "record"


def _curves_from_mapping(metrics: Mapping, op):
    curves = {}
    for name, values in metrics.items():
        y = np.asarray(values, dtype=float) if not isinstance(values, str) else None
        if y is None or y.ndim != 1 or y.size == 0:
            raise ValueError(f"{op}: curve {name!r} must be a non-empty 1-D sequence of numbers")
        curves[str(name)] = (np.arange(1, y.size + 1, dtype=float), y)
    if not curves:
        raise ValueError(f"{op}: metrics mapping is empty; expected name -> list of values")
    return curves, "step"


# What the trainer's (transformer/train.py) logged losses are, so the gap between them has a reason
# on the plot: the training loss is measured against label-smoothed targets with dropout on,
# the dev loss is plain cross-entropy in eval mode.
METRIC_LABELS = {
    "train_loss": "train loss (with label smoothing and dropout)",
    "dev_loss": "dev loss (plain cross-entropy, no dropout)",
}


def plot_loss_curves(
    metrics,
    out=None,
    keys: Sequence[str] = ("train_loss", "dev_loss"),
    *,
    x_key: str | None = None,
    logy: bool = False,
    title: str | None = None,
    ylabel: str = "loss",
    labels: Mapping[str, str] | None = None,
    dpi: float = DEFAULT_DPI,
) -> PlotResult:
    """Curves from a metrics log, on one axis.

    `metrics` is a path to a JSON-lines log, a list of dicts (plot `keys` against `x_key`:
    default "step", else "epoch", else record order), or a mapping name -> list of values
    (each its own curve against 1..n, e.g. one loss curve per learning rate of a sweep).
    `labels` maps a key to its legend label; for a log, the trainer's keys default to
    METRIC_LABELS, which say why the training loss sits above the dev loss.
    """
    op = "plot_loss_curves"
    path, fmt = _output_path(out, op)
    curves, x_label, legend = _curves(metrics, keys, x_key, labels, op)
    if logy:
        _check_positive(curves, op)
    figure = _new_figure((6.0, 3.8), dpi, op)
    ax = figure.subplots()
    for name, (x, y) in curves.items():
        ax.plot(
            x, y, marker="o" if y.size <= 40 else None, markersize=3, label=legend.get(name, name)
        )
    if logy:
        ax.set_yscale("log")
    ax.set_xlabel(x_label)
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3)
    ax.legend(fontsize="small")
    if title:
        ax.set_title(title)
    _save(figure, path, fmt, op)
    data = {"curves": curves, "x_label": x_label, "labels": {n: legend.get(n, n) for n in curves}}
    return PlotResult(path, figure, data)


def _curves(metrics, keys, x_key, labels, op) -> tuple[dict, str, dict]:
    """(name -> (x, y), x-axis label, name -> legend label) from any form `metrics` may take."""
    if isinstance(metrics, (str, os.PathLike)):
        metrics = read_metrics(metrics)
    if isinstance(keys, str):
        keys = (keys,)
    if isinstance(metrics, Mapping):
        curves, x_label = _curves_from_mapping(metrics, op)
        return curves, x_label, dict(labels or {})
    if isinstance(metrics, Sequence):
        if not metrics:
            raise ValueError(f"{op}: metrics is empty; expected at least one record")
        curves, x_label = _curves_from_records(metrics, keys, x_key, op)
        return curves, x_label, {**METRIC_LABELS, **(labels or {})}
    raise TypeError(
        f"{op}: metrics must be a path, a list of dicts or a dict name -> values; "
        f"got {type(metrics).__name__}"
    )


def _check_positive(curves: dict, op: str) -> None:
    """A log axis shows only positive values: raise naming the first curve with one <= 0."""
    for name, (_, y) in curves.items():
        finite = y[np.isfinite(y)]
        if finite.size and finite.min() <= 0:
            raise ValueError(
                f"{op}: logy=True needs positive values, but {name!r} has "
                f"minimum {finite.min():g}"
            )


# ---------------------------------------------------------------- gradient descent


def _evaluate(function: Callable, op: str, *grids: np.ndarray) -> np.ndarray:
    """function(*grids) as one vectorised call, falling back to one call per point."""
    try:
        values = np.asarray(function(*grids), dtype=float)
    except Exception:  # noqa: BLE001 - any failure means "not vectorised"; retry per point
        values = None
    if values is not None and values.shape == grids[0].shape:
        return values
    flat = [grid.ravel() for grid in grids]
    try:
        values = np.array([float(function(*point)) for point in zip(*flat)], dtype=float)
    except Exception as exc:
        raise ValueError(f"{op}: calling f on a grid point failed: {exc}") from exc
    return values.reshape(grids[0].shape)


def _default_range(coordinates: np.ndarray) -> tuple[float, float]:
    low, high = float(coordinates.min()), float(coordinates.max())
    pad = max(0.25 * (high - low), 1.0)
    return low - pad, high + pad


def _as_range(value, op: str, name: str) -> tuple[float, float]:
    bounds = _as_array(value, op, name)
    if bounds.shape != (2,) or not bounds[0] < bounds[1]:
        raise ValueError(f"{op}: {name} must be (low, high) with low < high, got {value!r}")
    return float(bounds[0]), float(bounds[1])


def plot_descent_path(
    f: Callable,
    path,
    out=None,
    *,
    bounds=None,
    resolution: int = 200,
    levels: int = 30,
    title: str | None = "gradient descent: walking down the hill",
    cmap: str = "viridis",
    dpi: float = DEFAULT_DPI,
) -> PlotResult:
    """A 1-D loss curve or 2-D loss surface with the gradient-descent path drawn over it.

    `path` holds the visited points: shape (n,) or (n, 1) for f(x), (n, 2) for f(x, y).
    `f` is called on the whole grid (NumPy arrays) if it can be, else point by point.
    `bounds` is (low, high) in 1-D or ((x_low, x_high), (y_low, y_high)) in 2-D; by default
    the path's extent with a margin.
    """
    op = "plot_descent_path"
    out_path, fmt = _output_path(out, op)
    if not callable(f):
        raise TypeError(f"{op}: f must be callable (the loss), got {type(f).__name__}")
    points = _descent_points(path, op)
    resolution = int_at_least(op, "resolution", resolution, 2)
    figure = _new_figure((5.5, 4.2), dpi, op)
    ax = figure.subplots()
    if points.shape[1] == 1:
        grid_data, values, path_values = _draw_loss_curve(ax, f, points[:, 0], bounds, resolution, op)
        xs, ys = points[:, 0], path_values
    else:
        grid_data, values, path_values = _draw_loss_surface(
            figure, ax, f, points, bounds, resolution, levels, cmap, op
        )
        xs, ys = points[:, 0], points[:, 1]
    if not np.any(np.isfinite(values)):
        raise ValueError(f"{op}: f gave no finite value anywhere on the plotted range")
    _draw_path(ax, xs, ys)
    ax.legend(fontsize="small")
    if title:
        ax.set_title(title)
    _save(figure, out_path, fmt, op)
    data = {"grid": grid_data, "values": values, "path": points, "path_values": path_values}
    return PlotResult(out_path, figure, data)


def _descent_points(path, op: str) -> np.ndarray:
    """The visited points as an (n, 1) or (n, 2) array."""
    points = _as_array(path, op, "path")
    if points.ndim == 1:
        points = points[:, None]
    if points.ndim != 2 or points.shape[1] not in (1, 2) or points.shape[0] == 0:
        raise ValueError(
            f"{op}: path must have shape (n,), (n, 1) or (n, 2) with n >= 1; "
            f"got shape {np.shape(path)}"
        )
    return points


def _draw_loss_curve(ax, f: Callable, xs: np.ndarray, bounds, resolution: int, op: str):
    """f(x) over the range as a line; returns (grid, f on the grid, f at xs)."""
    x_range = _default_range(xs) if bounds is None else _as_range(bounds, op, "bounds")
    grid = np.linspace(*x_range, resolution)
    values = _evaluate(f, op, grid)
    path_values = _evaluate(f, op, xs)
    ax.plot(grid, values, color="tab:blue", label="loss f(x)")
    ax.set_xlabel("x")
    ax.set_ylabel("f(x)")
    return grid, values, path_values


def _draw_loss_surface(figure, ax, f: Callable, points: np.ndarray, bounds, resolution: int, levels, cmap, op: str):
    """f(x, y) as filled contours with contour lines and a colorbar; returns ((grid_x, grid_y),
    f on the grid, f at the points)."""
    x_range, y_range = _surface_ranges(points, bounds, op)
    grid_x, grid_y = np.meshgrid(
        np.linspace(*x_range, resolution), np.linspace(*y_range, resolution)
    )
    values = _evaluate(f, op, grid_x, grid_y)
    path_values = _evaluate(f, op, points[:, 0], points[:, 1])
    surface = np.ma.masked_invalid(values)
    filled = ax.contourf(grid_x, grid_y, surface, levels=levels, cmap=cmap)
    ax.contour(grid_x, grid_y, surface, levels=levels, colors="k", linewidths=0.3, alpha=0.4)
    figure.colorbar(filled, ax=ax, label="loss f(x, y)")
    ax.set_xlabel("x")
    ax.set_ylabel("y")
    return (grid_x, grid_y), values, path_values


def _surface_ranges(points: np.ndarray, bounds, op: str):
    if bounds is None:
        return _default_range(points[:, 0]), _default_range(points[:, 1])
    if len(bounds) != 2:
        raise ValueError(
            f"{op}: 2-D bounds must be ((x_low, x_high), (y_low, y_high)), got {bounds!r}"
        )
    return _as_range(bounds[0], op, "bounds[0]"), _as_range(bounds[1], op, "bounds[1]")


def _draw_path(ax, xs: np.ndarray, ys: np.ndarray) -> None:
    """The descent path in red (with arrows when it has at most 60 points), its start and end."""
    ax.plot(xs, ys, "o-", color="tab:red", markersize=3, linewidth=1, label="descent path")
    if len(xs) <= 60:
        for start in range(len(xs) - 1):
            ax.annotate(
                "",
                xy=(xs[start + 1], ys[start + 1]),
                xytext=(xs[start], ys[start]),
                arrowprops={"arrowstyle": "->", "color": "tab:red", "lw": 1},
            )
    ax.plot(xs[:1], ys[:1], "s", color="white", markeredgecolor="k", label="start")
    ax.plot(xs[-1:], ys[-1:], "*", color="gold", markeredgecolor="k", markersize=11, label="end")


# ---------------------------------------------------------------- classification


def _class_colors(count: int) -> ListedColormap:
    palette = mpl.colormaps["tab10"].colors
    return ListedColormap([palette[index % len(palette)] for index in range(count)])


def _class_name(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


def plot_decision_boundary(
    predict_fn: Callable,
    X,
    y,
    out=None,
    *,
    resolution: int = 150,
    margin: float = 0.5,
    threshold: float = 0.0,
    title: str | None = "decision boundary",
    dpi: float = DEFAULT_DPI,
) -> PlotResult:
    """Regions a 2-D classifier assigns to each class, with the data points on top.

    `predict_fn` maps an (m, 2) array of points to (m,) labels or scores, or (m, k) class
    scores (argmax is taken). Integer outputs are classes; real-valued (m,) scores are shaded
    with the decision line drawn where score == `threshold`.
    """
    op = "plot_decision_boundary"
    path, fmt = _output_path(out, op)
    if not callable(predict_fn):
        raise TypeError(f"{op}: predict_fn must be callable, got {type(predict_fn).__name__}")
    points, labels = _labelled_points(X, y, op)
    resolution = int_at_least(op, "resolution", resolution, 2)
    (x_low, y_low), (x_high, y_high) = points.min(axis=0) - margin, points.max(axis=0) + margin
    grid_x, grid_y = np.meshgrid(
        np.linspace(x_low, x_high, resolution), np.linspace(y_low, y_high, resolution)
    )
    prediction = _predict_grid(predict_fn, grid_x, grid_y, op)
    discrete = bool(np.all(prediction == np.round(prediction)))
    class_values = np.unique(labels)
    if discrete:
        class_values = np.unique(np.concatenate([class_values, np.unique(prediction)]))
    colors = _class_colors(len(class_values))
    figure = _new_figure((5.0, 4.2), dpi, op)
    ax = figure.subplots()
    if discrete:
        region_index = np.searchsorted(class_values, prediction)
        levels = np.arange(len(class_values) + 1) - 0.5
        ax.contourf(grid_x, grid_y, region_index, levels=levels, cmap=colors, alpha=0.3)
    else:
        filled = ax.contourf(grid_x, grid_y, prediction, levels=30, cmap="RdBu_r", alpha=0.5)
        figure.colorbar(filled, ax=ax, label="score")
        if prediction.min() < threshold < prediction.max():
            ax.contour(grid_x, grid_y, prediction, levels=[threshold], colors="k", linewidths=1.5)
    _draw_classes(ax, points, labels, class_values, colors)
    ax.set_xlim(x_low, x_high)
    ax.set_ylim(y_low, y_high)
    ax.set_xlabel("x₁")
    ax.set_ylabel("x₂")
    ax.legend(fontsize="small", loc="best")
    if title:
        ax.set_title(title)
    _save(figure, path, fmt, op)
    data = {"grid": (grid_x, grid_y), "prediction": prediction, "discrete": discrete}
    return PlotResult(path, figure, data)


def _labelled_points(X, y, op: str) -> tuple[np.ndarray, np.ndarray]:
    """X as (n, 2) points and y as their n labels."""
    points = _as_array(X, op, "X")
    if points.ndim != 2 or points.shape[1] != 2 or points.shape[0] == 0:
        raise ValueError(f"{op}: X must have shape (n, 2) with n >= 1, got shape {points.shape}")
    labels = _as_array(y, op, "y")
    if labels.shape != (points.shape[0],):
        raise ValueError(
            f"{op}: y must have shape ({points.shape[0]},) to match X, got shape {labels.shape}"
        )
    return points, labels


def _predict_grid(predict_fn: Callable, grid_x: np.ndarray, grid_y: np.ndarray, op: str) -> np.ndarray:
    """predict_fn at every grid point, one class or score per point (argmax of (m, k) scores),
    in the grid's shape."""
    grid = np.column_stack([grid_x.ravel(), grid_y.ravel()])
    prediction = np.asarray(predict_fn(grid))
    if prediction.ndim == 2 and prediction.shape[1] == 1:
        prediction = prediction[:, 0]
    if prediction.shape[:1] != (grid.shape[0],) or prediction.ndim not in (1, 2):
        raise ValueError(
            f"{op}: predict_fn returned shape {prediction.shape} for "
            f"{grid.shape[0]} points; expected ({grid.shape[0]},) or "
            f"({grid.shape[0]}, k)"
        )
    if prediction.ndim == 2:
        prediction = prediction.argmax(axis=1)
    return prediction.astype(float).reshape(grid_x.shape)


def _draw_classes(ax, points: np.ndarray, labels: np.ndarray, class_values, colors) -> None:
    """The data points, one color per class, each class in the legend."""
    for index, value in enumerate(class_values):
        members = labels == value
        if np.any(members):
            ax.scatter(
                points[members, 0],
                points[members, 1],
                s=14,
                color=colors(index),
                edgecolors="k",
                linewidths=0.4,
                label=f"class {_class_name(value)}",
            )


def plot_confusion_matrix(
    cm,
    labels,
    out=None,
    *,
    normalize: bool = False,
    title: str | None = "confusion matrix",
    dpi: float = DEFAULT_DPI,
) -> PlotResult:
    """Counts of true class (rows) vs predicted class (columns), each cell annotated;
    `normalize=True` shows each row as fractions of that true class."""
    op = "plot_confusion_matrix"
    path, fmt = _output_path(out, op)
    matrix = _as_array(cm, op, "cm")
    if matrix.ndim != 2 or matrix.shape[0] != matrix.shape[1] or matrix.size == 0:
        raise ValueError(f"{op}: cm must be a square (k, k) matrix, got shape {matrix.shape}")
    if np.any(matrix < 0):
        raise ValueError(f"{op}: cm holds counts, so entries must be >= 0")
    names = _as_tokens(labels, op, "labels")
    if len(names) != matrix.shape[0]:
        raise ValueError(
            f"{op}: cm is {matrix.shape[0]}x{matrix.shape[0]} but got {len(names)} labels"
        )
    if normalize:
        totals = matrix.sum(axis=1, keepdims=True)
        matrix = np.divide(matrix, totals, out=np.zeros_like(matrix), where=totals > 0)
    size = max(3.0, 1.5 + 0.5 * len(names))
    figure = _new_figure((size + 0.8, size), dpi, op)
    ax = figure.subplots()
    image = ax.imshow(matrix, cmap="Blues", vmin=0)
    figure.colorbar(image, ax=ax)
    ax.set_xticks(range(len(names)), labels=names, rotation=_token_rotation(names))
    ax.set_yticks(range(len(names)), labels=names)
    ax.set_xlabel("predicted")
    ax.set_ylabel("true")
    high = matrix.max() / 2 if matrix.max() > 0 else 1.0
    integral = not normalize and bool(np.all(matrix == np.round(matrix)))
    for row in range(matrix.shape[0]):
        for column in range(matrix.shape[1]):
            value = matrix[row, column]
            ax.text(
                column,
                row,
                f"{int(value)}" if integral else f"{value:.2f}",
                ha="center",
                va="center",
                fontsize="small",
                color="white" if value > high else "black",
            )
    if title:
        ax.set_title(title)
    _save(figure, path, fmt, op)
    return PlotResult(path, figure, {"matrix": matrix, "labels": names})
