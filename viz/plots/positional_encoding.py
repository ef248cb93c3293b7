"""The sinusoidal positional-encoding matrix (paper §3.5) as a heatmap."""

from __future__ import annotations

import numpy as np

from .figure import DEFAULT_DPI, PlotResult, new_figure, output_path, save_figure
from .inputs import as_array


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
    path, fmt = output_path(out, op)
    matrix = as_array(pe, op, "pe")
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
    figure = new_figure((width, height), dpi, op)
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
    save_figure(figure, path, fmt, op)
    return PlotResult(path, figure, {"pe": matrix})
