"""How the graph's nodes look: labels escaped for Graphviz, numbers and shapes as text, and the
gradient colour scale (log10 of the norm, blue -> cyan -> green -> orange -> red)."""
from __future__ import annotations

import itertools
import math

import graphviz

from .render import GRAPH_FONT

FONT = GRAPH_FONT  # see viz.render: the font both renderers measure and an SVG names
# log10(gradient norm) from the smallest (0) to the largest (1) in the graph
COLOUR_STOPS = ((0.0, (48, 80, 248)), (0.25, (0, 170, 210)), (0.5, (40, 170, 60)),
                (0.75, (240, 150, 0)), (1.0, (220, 30, 30)))
ZERO_GRAD_COLOUR = "#9e9e9e"
NONFINITE_GRAD_COLOUR = "#ff00ff"
PLAIN_FILL = "white"
BOX_FILL = "#f2f2f2"
CONSTANT_FONT_COLOUR = "#616161"


def _escaperecord_label(text: str) -> str:
    """Text safe inside one field of a Graphviz record label."""
    text = str(text).replace("\\", "\\\\").replace('"', "'")
    for char in "{}|<>":
        text = text.replace(char, "\\" + char)
    return text


def escape_plain(text: str) -> str:
    return str(text).replace("\\", "\\\\").replace('"', "'")


def escape_html(text: str) -> str:
    return str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def record_label(fields, rankdir: str, across: bool) -> str:
    """A record label whose fields run across the picture (across=True) or down it."""
    body = " | ".join(_escaperecord_label(f) for f in fields)
    sideways = rankdir in ("LR", "RL")
    return graphviz.nohtml("{ " + body + " }" if sideways == across else body)


def format_number(x: float) -> str:
    """micrograd's %.4f for everyday magnitudes, scientific notation for tiny or huge ones."""
    if not math.isfinite(x):
        return str(x)
    if x == 0 or 1e-3 <= abs(x) < 1e5:
        return f"{x:.4f}"
    return f"{x:.3e}"


def format_norm(x: float) -> str:
    return f"{x:.2e}" if math.isfinite(x) else str(x)


def shape_text(shape) -> str:
    return "scalar" if len(shape) == 0 else str(tuple(int(n) for n in shape))


def shapes_text(shapes: list) -> str:
    distinct = list(dict.fromkeys(shapes))
    text = ", ".join(shape_text(s) for s in distinct[:3])
    return text + (f" +{len(distinct) - 3} more" if len(distinct) > 3 else "") if distinct else "-"


def grad_colour(norm: float, low: float, high: float) -> str:
    """The colour of a gradient norm on the log10 scale from `low` to `high` (both log10)."""
    if not math.isfinite(norm):
        return NONFINITE_GRAD_COLOUR
    if norm == 0:
        return ZERO_GRAD_COLOUR
    t = 0.5 if high <= low else min(max((math.log10(norm) - low) / (high - low), 0.0), 1.0)
    for (t0, c0), (t1, c1) in itertools.pairwise(COLOUR_STOPS):
        if t <= t1:
            w = (t - t0) / (t1 - t0)
            return "#" + "".join(f"{round(a + (b - a) * w):02x}" for a, b in zip(c0, c1, strict=True))
    return "#" + "".join(f"{c:02x}" for c in COLOUR_STOPS[-1][1])


def tint(colour: str, keep: float = 0.45) -> str:
    """`colour` mixed with white, light enough for black text on top of it."""
    rgb = [int(colour[i:i + 2], 16) for i in (1, 3, 5)]
    return "#" + "".join(f"{round(255 - (255 - c) * keep):02x}" for c in rgb)


def gradient_position(norm: float, scale) -> float:
    if scale is None or not math.isfinite(norm) or norm <= 0 or scale[1] <= scale[0]:
        return 0.5 if norm and math.isfinite(norm) else 0.0
    return min(max((math.log10(norm) - scale[0]) / (scale[1] - scale[0]), 0.0), 1.0)

