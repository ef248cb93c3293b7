"""`explore(loss)`: one self-contained HTML page that steps through the backward pass.

The page holds everything it needs: our script and style (viz/explorer/static/) inline, the
graph laid out by Graphviz as inline SVG (one per module state, viz.explorer.views), the
engine's numbers as JSON (viz.explorer.trace), and the bundled Chinese font cut to the page's
own characters (viz.font_face), so "loss on 这是一个苹果 → ..." is drawn on a machine with no
CJK font. It makes no request of any kind, so it opens from a file, offline, and inside Jupyter
(an iframe whose `srcdoc` is the page).
"""
from __future__ import annotations

import html
import json
from importlib import resources
from pathlib import Path

from tinygrad_lite.checks import positive_int
from tinygrad_lite.files import atomic_write

from ..font_face import font_face_css
from .trace import trace
from .views import DEFAULT, MAX_VIEWS, build_views

EXTENSIONS = (".html", ".htm")


def _static(name: str) -> str:
    return resources.files(__package__).joinpath("static", name).read_text(encoding="utf-8")


def _script_safe(text: str) -> str:
    """JSON that cannot end the <script> element holding it."""
    return text.replace("</", "<\\/").replace("<!--", "\\u003c!--")


def embedded_data(page: str) -> dict:
    """The JSON a page embeds (what `Explorer.data` was), read back from its HTML."""
    start = page.index('<script type="application/json" id="explorer-data">')
    body = page[page.index(">", start) + 1:page.index("</script>", start)]
    return json.loads(body)


class Explorer:
    """The page for one backpropagated loss: `.html` is its text, `.save(path)` writes it, and
    Jupyter shows it inline. `.data` is what the page embeds (nodes, steps, views)."""

    def __init__(self, data: dict):
        self.data = data
        self.html = self._page()

    def _page(self) -> str:
        payload = _script_safe(json.dumps(self.data, ensure_ascii=False, separators=(",", ":"),
                                          allow_nan=False))
        page = _static("explorer.html")
        font = font_face_css(self.data["title"] + payload)
        for slot, text in (("/*FONT*/", font), ("/*STYLE*/", _static("explorer.css")),
                           ("/*TITLE*/", html.escape(self.data["title"])),
                           ("/*DATA*/", payload), ("/*SCRIPT*/", _static("explorer.js"))):
            page = page.replace(slot, text)
        return page

    def save(self, path) -> Path:
        """Write the page to `path` (.html), whole or not at all; returns the path."""
        path = Path(path)
        if path.suffix.lower() not in EXTENSIONS:
            raise ValueError(f"explore: save needs an .html file name, got {str(path)!r}")
        with atomic_write(path, durable=False, op="explore", make_parents=True) as temp:
            temp.write_text(self.html, encoding="utf-8")
        return path

    def _repr_html_(self) -> str:
        return (f'<iframe srcdoc="{html.escape(self.html, quote=True)}" style="width:100%;height:640px;'
                'border:1px solid #ccc" sandbox="allow-scripts"></iframe>')

    def __repr__(self) -> str:
        return f"<Explorer {self.data['title']!r}: {len(self.data['steps'])} backward steps>"


def explore(loss, model=None, *, depth: int | None = None, expand=(), rankdir: str | None = None,
            max_nodes: int = 2000, max_views: int = MAX_VIEWS, title: str | None = None,
            rules: dict | None = None) -> Explorer:
    """Step through the backward pass that already ran from `loss` (a Tensor or a scalar Value).

    It records nothing: it reads the graph and the gradients `loss.backward()` left. For a
    Tensor, run backward inside `tinygrad_lite.retain_grads()` so every node keeps its `.grad`,
    and with `retain_graph=True` so the page can show what each consumer sent (without them the
    page says what is missing). `model` names parameters and modules; `depth` and `expand` fold
    modules into boxes as `draw_graph(collapse=, expand=)` does (click a box to open it), each
    module state laid out ahead, up to `max_views` of them. `rules` (op -> text) replaces an op's
    default local rule where the model's own differs, e.g. cross_entropy with label smoothing.
    """
    max_views = positive_int("explore", "max_views", max_views)
    traced = trace(loss, model)
    if traced.kind == "value" and (model is not None or depth is not None or expand):
        raise ValueError("explore: model, depth and expand apply to Tensor graphs built by Modules; "
                         "a Value graph has no modules")
    if all(n["grad"] is None or n["grad"]["norm"] == 0 for n in traced.nodes):
        raise ValueError("explore: the graph holds no gradients; call loss.backward() first")
    rankdir = rankdir or ("LR" if traced.kind == "value" else "TB")
    views, notes = build_views(loss, model, depth, expand, rankdir, max_nodes, traced.index(), max_views)
    for k, i in enumerate(traced.steps):
        traced.nodes[i]["step"] = k
    for node in traced.nodes:
        node["rule"] = (rules or {}).get(node["op"], node["rule"])
    return Explorer({"title": title or "backward, step by step", "kind": traced.kind, "nodes": traced.nodes,
                     "steps": traced.steps, "views": views, "start": DEFAULT, "notes": traced.notes + notes})
