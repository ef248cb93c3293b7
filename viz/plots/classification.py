"""What a classifier learned: the regions it gives each class in 2-D, and its confusion matrix."""

from __future__ import annotations

from collections.abc import Callable

import matplotlib as mpl
import numpy as np
from matplotlib.colors import ListedColormap

from tinygrad_lite.checks import int_at_least

from .figure import DEFAULT_DPI, PlotResult, new_figure, output_path, save_figure
from .inputs import as_array, as_tokens, token_rotation


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
    path, fmt = output_path(out, op)
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
    figure = new_figure((5.0, 4.2), dpi, op)
    ax = figure.subplots()
    if discrete:
        _draw_regions(ax, grid_x, grid_y, prediction, class_values, colors)
    else:
        _draw_scores(figure, ax, grid_x, grid_y, prediction, threshold)
    _draw_classes(ax, points, labels, class_values, colors)
    _frame(ax, (x_low, x_high), (y_low, y_high), title)
    save_figure(figure, path, fmt, op)
    data = {"grid": (grid_x, grid_y), "prediction": prediction, "discrete": discrete}
    return PlotResult(path, figure, data)


def _frame(ax, x_range, y_range, title: str | None) -> None:
    """The plane's extent, its axes x₁ and x₂, the legend and the title."""
    ax.set_xlim(*x_range)
    ax.set_ylim(*y_range)
    ax.set_xlabel("x₁")
    ax.set_ylabel("x₂")
    ax.legend(fontsize="small", loc="best")
    if title:
        ax.set_title(title)


def _labelled_points(X, y, op: str) -> tuple[np.ndarray, np.ndarray]:
    """X as (n, 2) points and y as their n labels."""
    points = as_array(X, op, "X")
    if points.ndim != 2 or points.shape[1] != 2 or points.shape[0] == 0:
        raise ValueError(f"{op}: X must have shape (n, 2) with n >= 1, got shape {points.shape}")
    labels = as_array(y, op, "y")
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


def _draw_regions(ax, grid_x, grid_y, prediction: np.ndarray, class_values, colors) -> None:
    """Each class's region in its color."""
    region_index = np.searchsorted(class_values, prediction)
    levels = np.arange(len(class_values) + 1) - 0.5
    ax.contourf(grid_x, grid_y, region_index, levels=levels, cmap=colors, alpha=0.3)


def _draw_scores(figure, ax, grid_x, grid_y, prediction: np.ndarray, threshold: float) -> None:
    """Real-valued scores shaded, with a color bar and the line where score == threshold."""
    filled = ax.contourf(grid_x, grid_y, prediction, levels=30, cmap="RdBu_r", alpha=0.5)
    figure.colorbar(filled, ax=ax, label="score")
    if prediction.min() < threshold < prediction.max():
        ax.contour(grid_x, grid_y, prediction, levels=[threshold], colors="k", linewidths=1.5)


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
    path, fmt = output_path(out, op)
    matrix = as_array(cm, op, "cm")
    if matrix.ndim != 2 or matrix.shape[0] != matrix.shape[1] or matrix.size == 0:
        raise ValueError(f"{op}: cm must be a square (k, k) matrix, got shape {matrix.shape}")
    if np.any(matrix < 0):
        raise ValueError(f"{op}: cm holds counts, so entries must be >= 0")
    names = as_tokens(labels, op, "labels")
    if len(names) != matrix.shape[0]:
        raise ValueError(
            f"{op}: cm is {matrix.shape[0]}x{matrix.shape[0]} but got {len(names)} labels"
        )
    if normalize:
        totals = matrix.sum(axis=1, keepdims=True)
        matrix = np.divide(matrix, totals, out=np.zeros_like(matrix), where=totals > 0)
    size = max(3.0, 1.5 + 0.5 * len(names))
    figure = new_figure((size + 0.8, size), dpi, op)
    ax = figure.subplots()
    image = ax.imshow(matrix, cmap="Blues", vmin=0)
    figure.colorbar(image, ax=ax)
    ax.set_xticks(range(len(names)), labels=names, rotation=token_rotation(names))
    ax.set_yticks(range(len(names)), labels=names)
    ax.set_xlabel("predicted")
    ax.set_ylabel("true")
    _annotate_cells(ax, matrix, integral=not normalize and bool(np.all(matrix == np.round(matrix))))
    if title:
        ax.set_title(title)
    save_figure(figure, path, fmt, op)
    return PlotResult(path, figure, {"matrix": matrix, "labels": names})


def _annotate_cells(ax, matrix: np.ndarray, integral: bool) -> None:
    """Each cell's value on it, white on the darker half of the scale."""
    high = matrix.max() / 2 if matrix.max() > 0 else 1.0
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
