"""Turn a Graphviz graph into a file: find a renderer, run it, write the result atomically.

Renderer discovery, in order:
  1. the command named by the environment variable TINYGRAD_LITE_DOT (a path or a name on
     PATH; the value "none" means "pretend no renderer is installed");
  2. Graphviz's own `dot` on PATH (Debian/Ubuntu: `apt-get install graphviz`);
  3. `graphviz-pure`, a dot-compatible renderer that `pip install graphviz-pure` brings
     (prebuilt for Linux x86_64/aarch64 (glibc and musl), macOS arm64 and Windows x86_64):
     first next to the running interpreter (the scripts directory of its environment, so
     `venv/bin/python -m viz ...` finds it with the venv not activated, as an IDE, cron or a
     Jupyter kernel runs it), then on PATH. It writes svg and png but not pdf, so a pdf is made
     from its png with matplotlib.
With none of them, `write_graph` writes the `.dot` source instead and warns in one line how to
install a renderer. Drawing a Value or Tensor is viz.graph's job: `viz.render` draws, then writes here.

Fonts: graphs are laid out in GRAPH_FONT (DejaVu Sans, the sans face of every Linux desktop and
of matplotlib), whose widths both renderers know, and an SVG names it with similar wide faces
after it (SVG_FONT_FAMILY), so a browser draws each label inside the box measured for it. A
Helvetica layout would not fit there: a machine without Helvetica or Arial draws DejaVu Sans,
about 15% wider. graphviz-pure draws png with the one sans face it bundles (Arimo, Helvetica's
widths), so its png is laid out in Helvetica.
"""
from __future__ import annotations

import errno
import os
import shutil
import subprocess
import sys
import sysconfig
import warnings
from dataclasses import dataclass
from pathlib import Path

from tinygrad_lite.files import atomic_write

FORMATS = ("svg", "png", "pdf", "dot")
RENDERER_ENV = "TINYGRAD_LITE_DOT"
INSTALL_HINT = "install a renderer with `apt-get install graphviz` or `pip install graphviz-pure`"
GRAPH_FONT = "DejaVu Sans"
SVG_FONT_FAMILY = "DejaVu Sans,Bitstream Vera Sans,Verdana,sans-serif"
_PNG_DPI = 144
_TIMEOUT_SECONDS = 300


class RendererMissingWarning(UserWarning):
    """No Graphviz renderer was found, so only the .dot source was written."""


@dataclass(frozen=True)
class Renderer:
    """A dot-compatible command line, the output formats it can write itself, and the font its
    png is drawn in when that is fixed whatever the graph asks for (None: the graph's own)."""

    name: str
    command: str
    formats: tuple
    png_font: str | None = None

    def run(self, source: str, fmt: str) -> bytes:
        """Lay out and draw `source` (DOT text) as `fmt` bytes."""
        args = [self.command, f"-T{fmt}"]
        if fmt == "png":
            args.append(f"-Gdpi={_PNG_DPI}")
            if self.png_font:
                args += [f"-{kind}fontname={self.png_font}" for kind in "GNE"]
        try:
            done = subprocess.run(args, input=source.encode("utf-8"), capture_output=True,
                                  timeout=_TIMEOUT_SECONDS, check=False)
        except OSError as exc:
            raise RuntimeError(f"render: cannot run {self.name} ({self.command}): {exc}") from exc
        except subprocess.TimeoutExpired:
            raise RuntimeError(f"render: {self.name} took longer than {_TIMEOUT_SECONDS} s; "
                               "draw a smaller graph (draw_graph(..., collapse=2))") from None
        if done.returncode != 0 or not done.stdout:
            errors = done.stderr.decode("utf-8", "replace").strip().splitlines()
            last = errors[-1] if errors else f"exit code {done.returncode}, no output"
            raise RuntimeError(f"render: {self.name} failed to draw {fmt}: {last}")
        return done.stdout


def find_renderer() -> Renderer | None:
    """The renderer `render` will use (see the module docstring), or None."""
    override = os.environ.get(RENDERER_ENV, "").strip()
    if override:
        if override.lower() == "none":
            return None
        command = shutil.which(override)
        if command is None:
            raise FileNotFoundError(f"render: {RENDERER_ENV}={override!r} names no executable "
                                    "(expected a path or a command on PATH, or 'none')")
        if "graphviz-pure" in Path(override).name:
            return _graphviz_pure(Path(override).name, command)
        return Renderer(Path(override).name, command, ("svg", "png", "pdf"))
    command = shutil.which("dot")
    if command is not None:
        return Renderer("Graphviz dot", command, ("svg", "png", "pdf"))
    command = (_beside_interpreter("graphviz-pure") or shutil.which("graphviz-pure")
               or _installed_script("graphviz-pure"))
    if command is not None:
        return _graphviz_pure("graphviz-pure", command)
    return None


def _graphviz_pure(name: str, command: str) -> Renderer:
    return Renderer(name, command, ("svg", "png"), png_font="Helvetica")


def interpreter_script_dirs() -> list[str]:
    """Where pip put the console scripts of the running interpreter's environment (a venv's
    bin/ or Scripts/), whether or not that environment is activated."""
    dirs = [sysconfig.get_path("scripts"), os.path.dirname(sys.executable)]
    user_scheme = f"{os.name}_user"
    if user_scheme in sysconfig.get_scheme_names():
        dirs.append(sysconfig.get_path("scripts", user_scheme))
    return [d for d in dict.fromkeys(dirs) if d and os.path.isdir(d)]


def _installed_script(name: str) -> str | None:
    """The command a pip-installed distribution `name` put somewhere else (e.g. `pip install
    --target`), found through the distribution's own file list."""
    from importlib import metadata

    try:
        files = metadata.distribution(name).files or []
    except metadata.PackageNotFoundError:
        return None
    for file in files:
        if file.name in (name, f"{name}.exe"):
            path = os.path.normpath(file.locate())
            if os.path.isfile(path) and os.access(path, os.X_OK):
                return path
    return None


def _beside_interpreter(name: str) -> str | None:
    for directory in interpreter_script_dirs():
        command = shutil.which(name, path=directory)
        if command is not None:
            return command
    return None


def pipe(graph, fmt: str = "svg") -> bytes:
    """Render `graph` (anything with a DOT `.source`) to bytes in memory."""
    fmt = _check_format(fmt, "pipe")
    source = _source_of(graph, "pipe")
    if fmt == "dot":
        return source.encode("utf-8")
    renderer = find_renderer()
    if renderer is None:
        raise RuntimeError(f"pipe: no Graphviz renderer found; {INSTALL_HINT}")
    return _draw(renderer, source, fmt)


def write_graph(graph, out_path, fmt: str | None = None) -> Path:
    """Write a finished graphviz graph (anything with a DOT `.source`) to `out_path` and return the
    path written; `viz.render` draws a Value or Tensor first and comes here.

    The format comes from `fmt` or else from the extension: svg, png, pdf or dot. Missing
    directories are created. The file appears whole or not at all (written to a temporary name,
    then renamed). With no renderer installed, the DOT source goes to `out_path` with the suffix
    `.dot` instead, a one-line RendererMissingWarning says how to get one, and that `.dot` path is
    returned.
    """
    path, fmt = check_output_path(out_path, fmt)
    source = _source_of(graph, "render")
    if fmt == "dot":
        return _write_atomically(path, source.encode("utf-8"))
    renderer = find_renderer()
    if renderer is None:
        dot_path = path.with_suffix(".dot")
        written = _write_atomically(dot_path, source.encode("utf-8"))
        warnings.warn(f"render: no Graphviz renderer found, wrote the DOT source to {str(written)!r} "
                      f"instead of {fmt}; {INSTALL_HINT}", RendererMissingWarning, stacklevel=3)
        return written
    return _write_atomically(path, _draw(renderer, source, fmt))


def _draw(renderer: Renderer, source: str, fmt: str) -> bytes:
    if fmt == "svg":
        return svg_with_font_fallbacks(renderer.run(source, fmt))
    if fmt in renderer.formats:
        return renderer.run(source, fmt)
    if fmt == "pdf":
        return _png_to_pdf(renderer.run(source, "png"))
    raise ValueError(f"render: {renderer.name} cannot write {fmt}; it writes {', '.join(renderer.formats)}")


def svg_with_font_fallbacks(svg: bytes) -> bytes:
    """`svg` with every text in GRAPH_FONT asking for SVG_FONT_FAMILY, so a machine without
    DejaVu Sans draws a face of about its width, not the browser's narrow serif default."""
    return svg.replace(f'font-family="{GRAPH_FONT}"'.encode(), f'font-family="{SVG_FONT_FAMILY}"'.encode())


def _png_to_pdf(png: bytes) -> bytes:
    """A one-page pdf of the rendered png, the same physical size (for graphviz-pure)."""
    from .pdf_page import png_to_pdf

    return png_to_pdf(png, _PNG_DPI)


def _as_path(out_path, op: str) -> Path:
    if not isinstance(out_path, (str, os.PathLike)):
        raise TypeError(f"{op}: out_path must be a str or path, got {type(out_path).__name__}")
    if not str(out_path):
        raise ValueError(f"{op}: out_path is empty; expected a file name such as graph.svg")
    path = Path(out_path)
    if path.is_dir():
        raise ValueError(f"{op}: out_path {str(path)!r} is a directory; expected a file name such as "
                         f"{str(path / 'graph.svg')!r}")
    return path


def _extension_format(path: Path, formats: tuple, op: str) -> str:
    suffix = path.suffix.lower().lstrip(".")
    if not suffix:
        raise ValueError(f"{op}: cannot tell the format of {str(path)!r}: it has no extension; "
                         f"expected one of {', '.join('.' + f for f in formats)} (or pass fmt=)")
    return suffix


def _check_format(fmt, op: str, path: Path | None = None, formats: tuple = FORMATS) -> str:
    if not isinstance(fmt, str) or fmt.lower().lstrip(".") not in formats:
        where = f" for {str(path)!r}" if path is not None else ""
        raise ValueError(f"{op}: unknown format {fmt!r}{where}; expected one of {', '.join(formats)}")
    return fmt.lower().lstrip(".")


def _source_of(graph, op: str) -> str:
    source = getattr(graph, "source", None)
    if not isinstance(source, str):
        raise TypeError(f"{op}: expected a graphviz graph (with a DOT .source), got {type(graph).__name__}")
    return source


def _check_writable(path: Path, op: str) -> None:
    """Fail before any (possibly slow) drawing when the file could not be written anyway."""
    directory = path.parent.resolve()
    existing = next(p for p in (directory, *directory.parents) if p.exists())
    if not existing.is_dir():
        raise NotADirectoryError(errno.ENOTDIR, f"{op}: cannot write {str(path)!r}: {str(existing)!r} is a "
                                                "file, not a directory", str(existing))
    if not os.access(existing, os.W_OK | os.X_OK):
        raise PermissionError(errno.EACCES, f"{op}: cannot write {str(path)!r}: directory {str(existing)!r} "
                                            "is not writable", str(existing))


def check_output_path(out_path, fmt: str | None = None, formats: tuple = FORMATS,
                      op: str = "render") -> tuple[Path, str]:
    """(path, format) for writing `out_path`, checked before anything is drawn: the format
    (from `fmt` or the extension) is one of `formats` and the directory can be written."""
    path = _as_path(out_path, op)
    fmt = _check_format(fmt if fmt is not None else _extension_format(path, formats, op), op, path, formats)
    _check_writable(path, op)
    return path, fmt


def _write_atomically(path: Path, payload: bytes) -> Path:
    with atomic_write(path, durable=False, op="render", make_parents=True) as temp:
        temp.write_bytes(payload)
    return path
