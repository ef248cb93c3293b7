"""Loss curves from a training run: a JSON-lines metrics log read back, or curves given by name,
drawn on one axis."""

from __future__ import annotations

import json
import math
import os
import warnings
from collections.abc import Mapping, Sequence

import numpy as np

from tinygrad_lite.checks import is_real

from .figure import DEFAULT_DPI, PlotResult, new_figure, output_path, save_figure


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
    path, fmt = output_path(out, op)
    curves, x_label, legend = _curves(metrics, keys, x_key, labels, op)
    if logy:
        _check_positive(curves, op)
    figure = new_figure((6.0, 3.8), dpi, op)
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
    save_figure(figure, path, fmt, op)
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
