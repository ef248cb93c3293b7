"""Gradient descent drawn: the path it walked over a 1-D loss curve or a 2-D loss surface."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from tinygrad_lite.checks import int_at_least

from .figure import DEFAULT_DPI, PlotResult, new_figure, output_path, save_figure
from .inputs import as_array


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
    bounds = as_array(value, op, name)
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
    out_path, fmt = output_path(out, op)
    if not callable(f):
        raise TypeError(f"{op}: f must be callable (the loss), got {type(f).__name__}")
    points = _descent_points(path, op)
    resolution = int_at_least(op, "resolution", resolution, 2)
    figure = new_figure((5.5, 4.2), dpi, op)
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
    save_figure(figure, out_path, fmt, op)
    data = {"grid": grid_data, "values": values, "path": points, "path_values": path_values}
    return PlotResult(out_path, figure, data)


def _descent_points(path, op: str) -> np.ndarray:
    """The visited points as an (n, 1) or (n, 2) array."""
    points = as_array(path, op, "path")
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
