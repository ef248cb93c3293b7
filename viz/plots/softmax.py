"""softmax(z / T): what the temperature T does to a distribution, computed and drawn as bars."""

from __future__ import annotations

import numpy as np

from tinygrad_lite.checks import number

from .figure import DEFAULT_DPI, PlotResult, new_figure, output_path, save_figure
from .inputs import as_array


def softmax_with_temperature(logits, temperature: float = 1.0) -> np.ndarray:
    """softmax(z / T) along the last axis, shifting by the max first so exp never overflows."""
    op = "softmax_with_temperature"
    z = as_array(logits, op, "logits")
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
    path, fmt = output_path(out, op)
    z = as_array(logits, op, "logits")
    if z.ndim != 1 or z.size == 0:
        raise ValueError(f"{op}: logits must be a non-empty 1-D sequence, got shape {z.shape}")
    temperatures = tuple(temperatures)
    if not temperatures:
        raise ValueError(f"{op}: temperatures must name at least one T > 0, got ()")
    probabilities = np.stack([softmax_with_temperature(z, t) for t in temperatures])

    n_temps, n_logits = probabilities.shape
    figure = new_figure((max(4.0, 1.0 + 0.55 * n_logits * n_temps), 3.6), dpi, op)
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
    save_figure(figure, path, fmt, op)
    data = {
        "logits": z,
        "temperatures": temperatures,
        "probabilities": probabilities,
        "annotations": annotations,
    }
    return PlotResult(path, figure, data)
