"""Graph SVGs read right on a machine that has DejaVu Sans but neither Helvetica nor Arial (a
plain Linux box, and the notebooks' inline graphs on it): every label fits its box, and the
legend's colour swatches neither cover its words nor push them off the picture.

The SVG is read back and each text is measured the way such a machine draws it: its
font-family list is resolved, skipping Helvetica and Arial, with the generic sans-serif as
DejaVu Sans (what fontconfig answers there), and the glyphs' advance widths are summed from
that font file (fontTools; matplotlib ships DejaVu Sans, so the file is always there)."""
import functools
import re
import shutil
import xml.etree.ElementTree as ET

import pytest
from fontTools.ttLib import TTFont
from matplotlib import font_manager

from tinygrad_lite import Tensor, Value, kernels, manual_seed, retain_grads
from tinygrad_lite.nn import MLP
from tinygrad_lite.nn import functional as F
from viz import draw_graph
from viz.__main__ import main as viz_main
from viz.render import RENDERER_ENV, pipe

SVG = "{http://www.w3.org/2000/svg}"
ABSENT = {"helvetica", "arial"}
GENERIC = {"sans-serif": "DejaVu Sans", "serif": "DejaVu Serif", "monospace": "DejaVu Sans Mono"}
SLACK = 0.5  # points: rounding in the SVG's coordinates


@pytest.fixture(params=("dot", "graphviz-pure"))
def renderer(request, monkeypatch):
    if shutil.which(request.param) is None:
        pytest.skip(f"{request.param} is not installed")
    monkeypatch.setenv(RENDERER_ENV, request.param)
    return request.param


@pytest.fixture(scope="module", autouse=True)
def numpy_kernels():
    with kernels.use_backend("numpy"):
        yield


# ---------------------------------------------------------------- measuring text as drawn
@functools.lru_cache(maxsize=None)
def font_file(families: str) -> str:
    """The font file a DejaVu-only machine draws `families` (a CSS font-family list) with."""
    for name in families.split(","):
        name = name.strip().strip("'\"")
        if name.lower() in ABSENT:
            continue
        try:
            return font_manager.findfont(font_manager.FontProperties(family=GENERIC.get(name.lower(), name)),
                                         fallback_to_default=False)
        except ValueError:
            continue
    return font_manager.findfont(font_manager.FontProperties(family="DejaVu Sans"))


@functools.lru_cache(maxsize=None)
def advances(path: str):
    font = TTFont(path, lazy=True)
    cmap, hmtx = font.getBestCmap(), font["hmtx"]
    return cmap, hmtx, font["head"].unitsPerEm


def text_width(element) -> float:
    cmap, hmtx, units = advances(font_file(element.get("font-family", "Times")))
    glyphs = [cmap.get(ord(ch), ".notdef") for ch in element.text or ""]
    return sum(hmtx[g][0] for g in glyphs) * float(element.get("font-size", "14")) / units


def text_span(element) -> tuple:
    """(left, right) of the text as drawn, from its anchor."""
    x, width = float(element.get("x")), text_width(element)
    anchor = element.get("text-anchor", "start")
    left = {"start": x, "middle": x - width / 2, "end": x - width}[anchor]
    return left, left + width


def points_of(shape) -> list:
    if shape.tag == f"{SVG}ellipse":
        cx, cy, rx, ry = (float(shape.get(k)) for k in ("cx", "cy", "rx", "ry"))
        return [(cx - rx, cy - ry), (cx + rx, cy + ry)]
    numbers = [float(n) for n in re.findall(r"-?\d+(?:\.\d+)?", shape.get("points") or shape.get("d") or "")]
    return list(zip(numbers[::2], numbers[1::2], strict=True))


def bbox(shape) -> tuple:
    xs, ys = zip(*points_of(shape), strict=True)
    return min(xs), min(ys), max(xs), max(ys)


def outline(group):
    return next(e for e in group if e.tag in (f"{SVG}polygon", f"{SVG}path", f"{SVG}ellipse"))


def cell_of(group, text) -> tuple:
    """(left, right) of the record field holding `text`: the outline cut by vertical dividers."""
    left, _, right, _ = bbox(outline(group))
    x, y = float(text.get("x")), float(text.get("y"))
    for line in group.iter(f"{SVG}polyline"):
        (x0, y0), (x1, y1) = points_of(line)[:2]
        if abs(x0 - x1) < 0.01 and min(y0, y1) <= y <= max(y0, y1):
            if x0 <= x:
                left = max(left, x0)
            else:
                right = min(right, x0)
    return left, right


def overflows(svg: bytes) -> list:
    """Every text of a node or cluster that runs past its box, as (title, text, by how much)."""
    root = ET.fromstring(svg)
    found = []
    for group in root.iter(f"{SVG}g"):
        if group.get("class") not in ("node", "cluster"):
            continue
        for text in group.iter(f"{SVG}text"):
            left, right = text_span(text)
            if group.get("class") == "node":
                box_left, box_right = cell_of(group, text)
            else:
                box_left, _, box_right, _ = bbox(outline(group))
            by = max(box_left - left, right - box_right)
            if by > SLACK:
                found.append((group.findtext(f"{SVG}title"), text.text, round(by, 1)))
    return found


def legend_clashes(svg: bytes) -> list:
    """Legend words that a colour swatch half covers, that overlap each other, or that run off
    the picture (e.g. the end of "magenta: NaN/Inf")."""
    graph = ET.fromstring(svg).find(f"{SVG}g")
    background, *swatches = [bbox(p) for p in graph.findall(f"{SVG}polygon")]
    texts = [(t.text, float(t.get("y")), *text_span(t)) for t in graph.findall(f"{SVG}text")]
    clashes = []
    for words, y, left, right in texts:
        if left < background[0] - SLACK or right > background[2] + SLACK:
            clashes.append(("off the picture", words))
        for x0, y0, x1, y1 in swatches:
            covered = min(right, x1) - max(left, x0)
            inside = x0 - SLACK <= left and right <= x1 + SLACK
            if y0 <= y <= y1 and covered > SLACK and not inside:
                clashes.append(("under a swatch", words))
        for other, other_y, other_left, other_right in texts:
            if other != words and other_y == y and min(right, other_right) - max(left, other_left) > SLACK:
                clashes.append(("over another text", words))
    assert texts, "the graph has no legend"
    return clashes


# ---------------------------------------------------------------- the graphs
def long_labelled_values():
    """A scalar graph whose labels are long and wide (W, M, digits), with gradients to colour."""
    a = Value(2.0, label="a WWW wide input MMM 0123456789")
    b = Value(-3.0, label="b another quite long label for a scalar")
    c = Value(10.0, label="c MMMMMMMMMMMMMMMMMMMM")
    d = a * b + c
    d.label = "d = a times b plus c, spelled out WWWW"
    out = (d * Value(-2.0, label="f the scale with a long name")).tanh()
    out.label = "L the loss at the end of the graph 000000"
    out.backward()
    return out


def tensor_mlp():
    manual_seed(0)
    model = MLP([2, 8, 1])
    with retain_grads():
        x = Tensor([[0.0, 1.0], [1.0, 0.0]], name="x (XOR inputs, the first two points)")
        loss = F.binary_cross_entropy_with_logits(model(x), Tensor([[1.0], [1.0]], name="target"))
        loss.backward()
    return model, loss


@pytest.mark.parametrize("rankdir", ["LR", "TB"])
def test_long_scalar_labels_fit_their_boxes(renderer, rankdir):
    svg = pipe(draw_graph(long_labelled_values(), rankdir=rankdir), "svg")
    assert overflows(svg) == []
    assert legend_clashes(svg) == []


def test_tensor_graph_labels_and_clusters_fit(renderer):
    model, loss = tensor_mlp()
    svg = pipe(draw_graph(loss, model=model, rankdir="TB"), "svg")
    assert overflows(svg) == []
    assert legend_clashes(svg) == []


def test_notebook_inline_graph_fits(renderer):
    """What Jupyter shows inline: GraphView's own SVG."""
    svg = draw_graph(long_labelled_values())._repr_image_svg_xml().encode("utf-8")
    assert overflows(svg) == []
    assert legend_clashes(svg) == []


def test_viz_xor_svg_fits(renderer, tmp_path, capsys):
    out = tmp_path / "xor.svg"
    assert viz_main(["xor", "--out", str(out)]) == 0
    svg = out.read_bytes()
    assert overflows(svg) == []
    assert legend_clashes(svg) == []


def test_the_checks_see_an_overflow(renderer):
    """The measuring is not vacuous: a Helvetica layout drawn in DejaVu Sans overflows."""
    graph = draw_graph(long_labelled_values())
    graph.node_attr["fontname"] = graph.graph_attr["fontname"] = "Helvetica"
    svg = pipe(graph, "svg")
    assert overflows(svg)
    assert legend_clashes(svg)
