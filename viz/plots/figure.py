"""What every plot shares: a fresh Figure on the Agg canvas, the output path and format checked,
the atomic write with Chinese text given a font that has its glyphs, and the PlotResult returned."""

from __future__ import annotations

import io
import os
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import matplotlib as mpl
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.text import Text

from tinygrad_lite.checks import number
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


def output_path(out, op: str) -> tuple[Path | None, str]:
    """(path, format) for `out`, the format named by its extension; (None, "png") for out=None."""
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


def new_figure(figsize, dpi, op: str) -> Figure:
    """A Figure on its own Agg canvas (no pyplot, so nothing leaks between calls)."""
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


def save_figure(figure: Figure, path: Path | None, fmt: str, op: str) -> Path | None:
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
