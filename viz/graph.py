"""Draw a computation graph, and after backward() the backprop graph, with Graphviz.

`draw_graph(root)` walks the graph that `root` (a scalar `Value` or a `Tensor`) was computed
from, through each node's public `inputs` and `op` (the op that made it):

- Scalar graphs look like micrograd's `draw_dot`: one record per Value (label | data | grad)
  and one small node per op between its inputs and its output.
- Tensor graphs show each tensor's name, shape and dtype (a parameter is named by its module
  path, e.g. `encoder.layers.0.self_attn.w_q.weight`) and, once backward has run, its gradient
  norm; size-1 constants are folded into the op that uses them ("mul 5.657").
- The backprop view: when gradients exist, nodes and edges are coloured by gradient norm on a
  log10 scale, blue (tiny) -> cyan -> green -> orange -> red (huge), with the range in the
  caption, so vanishing and exploding gradients jump out. Rounded boxes are leaves that require
  grad (parameters, inputs); dashed ones are constants; the output has a bold border.
- Scale: the nodes a module's forward created sit in a cluster named by the module's path
  (`encoder.layers.0 (EncoderLayer)`), nested as the modules nest; parameters sit with the
  module that owns them. `collapse=d` draws whole modules as single boxes (see `draw_graph`).
"""
from __future__ import annotations

import itertools
import math
from collections import defaultdict
from pathlib import Path

import graphviz
import numpy as np

from tinygrad_lite.checks import positive_int

from .fast_ops import FAST_OPS
from .module_tree import ModuleTree
from .render import FORMATS, GRAPH_FONT, INSTALL_HINT, check_output_path, find_renderer, pipe, write_graph

RANKDIRS = ("LR", "TB", "RL", "BT")
FONT = GRAPH_FONT  # see viz.render: the font both renderers measure and an SVG names
# log10(gradient norm) from the smallest (0) to the largest (1) in the graph
COLOUR_STOPS = ((0.0, (48, 80, 248)), (0.25, (0, 170, 210)), (0.5, (40, 170, 60)),
                (0.75, (240, 150, 0)), (1.0, (220, 30, 30)))
ZERO_GRAD_COLOUR = "#9e9e9e"
NONFINITE_GRAD_COLOUR = "#ff00ff"
_PLAIN_FILL = "white"
_BOX_FILL = "#f2f2f2"
_CONSTANT_FONT_COLOUR = "#616161"


class GraphView(graphviz.Digraph):
    """A `graphviz.Digraph` that shows itself inline in Jupyter with whichever renderer
    `viz.render` finds (Graphviz `dot`, or the pip-installed `graphviz-pure`), and carries
    `stats`: the counts of what was drawn and the gradient range of the colour scale."""

    def __init__(self, *args, stats: dict | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        self.stats = dict(stats or {})

    def _repr_image_svg_xml(self) -> str:
        return pipe(self, "svg").decode("utf-8")

    def _repr_image_png(self) -> bytes:
        return pipe(self, "png")

    def _repr_mimebundle_(self, include=None, exclude=None, **kwargs):
        if find_renderer() is None:
            return {"text/plain": f"<graph of {self.stats.get('nodes', '?')} nodes: no Graphviz renderer "
                                  f"found to display it; {INSTALL_HINT}>"}
        return super()._repr_mimebundle_(include, exclude, **kwargs)


def draw_graph(root, *, model=None, collapse: int | None = None, expand=(), rankdir: str = "LR",
               max_nodes: int = 2000, show_grad: bool = True, fmt: str | None = None) -> GraphView:
    """Draw the graph that computed `root` and return it as a `graphviz.Digraph` (a GraphView).

    root: a `Value` or a `Tensor` (or a list of them, to draw several outputs).
    model: the Module that ran, for module paths of clusters and parameter names. Without it
        they come from the outermost Module recorded in the tensors' scopes, if any.
    collapse: None draws every op. An int d draws whole modules as single boxes, one per call,
        each showing its class, input and output shapes, parameter count and the norm of its
        parameters' gradients. Which modules become boxes:
          - depth: the model is 0, each submodule one more than its parent, except containers
            that have no forward of their own (ModuleList), which keep their parent's depth and
            are always drawn open: `encoder`=1, `encoder.layers`=1, `encoder.layers.0`=2,
            `encoder.layers.0.self_attn`=3;
          - the model itself is open when d >= 1 (one box when d == 0);
          - a submodule is open when its depth < d and one of its children has submodules of
            its own; a module with nothing but single layers below it (an embedding, the
            positional encoding, an attention block) stays one box;
          - a module named in `expand` (a path such as "encoder.layers.0"), and its ancestors,
            are open;
          - each module that is not open but whose parent is becomes a box.
        So a Transformer at d=1 shows embeddings, positional encoding, encoder, decoder and
        generator; at d=2 the N encoder and N decoder layers; at d=3 each layer's attention,
        Add & Norm and feed-forward boxes.
    expand: module paths to open whatever `collapse` says.
    rankdir: "LR" (left to right, default), "TB", "RL" or "BT".
    max_nodes: refuse (ValueError) to draw more nodes than this, before any layout starts.
    show_grad: False leaves out gradients and the colouring.
    fmt: the graph's default output format (svg, png, pdf or dot) for `.render()`/`.pipe()`.
    """
    return build_scene(root, model=model, collapse=collapse, expand=expand, rankdir=rankdir,
                       max_nodes=max_nodes, show_grad=show_grad, fmt=fmt).to_graphviz(fmt)


def render(graph_or_root, out_path, fmt: str | None = None, **draw_kwargs) -> Path:
    """Write a graph to `out_path` and return the path written.

    `graph_or_root` is a `graphviz` graph (e.g. from `draw_graph`) or a Value/Tensor, which is
    drawn first with `draw_graph(graph_or_root, **draw_kwargs)`. The format comes from `fmt`
    or else from the extension: svg, png, pdf or dot; the rest is `viz.render.write_graph`'s
    (atomic writes, and the `.dot` source with a one-line warning when no renderer is installed).
    """
    path, fmt = check_output_path(out_path, fmt)
    if hasattr(graph_or_root, "source") and hasattr(graph_or_root, "body"):
        if draw_kwargs:
            raise TypeError(f"render: got a finished graph, so draw options "
                            f"{', '.join(sorted(draw_kwargs))} have nothing to apply to; "
                            "pass them to draw_graph or pass the Value/Tensor itself")
        return write_graph(graph_or_root, path, fmt)
    return write_graph(draw_graph(graph_or_root, **draw_kwargs), path, fmt)


def build_scene(root, *, model=None, collapse=None, expand=(), rankdir="LR", max_nodes=2000, show_grad=True,
                fmt=None):
    """What `draw_graph` draws, before Graphviz: `.to_graphviz(fmt)` makes the graph, and
    `.source_key`/`.target_key` (id of a Value/Tensor -> the node key its outgoing/incoming
    edges use) and `.box_path` (box key -> module path) map the engine's nodes onto it."""
    roots = _as_roots(root)
    _check_options(rankdir, max_nodes, collapse, fmt)
    expand = _as_paths(expand)
    if isinstance(roots[0], _tensor_type()):
        scene = _TensorScene(roots, model, collapse, expand, rankdir, show_grad)
    else:
        if collapse is not None or expand or model is not None:
            raise ValueError("draw_graph: collapse, expand and model apply to Tensor graphs built by "
                             "Modules; a Value graph has no modules")
        scene = _ValueScene(roots, rankdir, show_grad)
    count = len(scene.nodes)
    if count > max_nodes:
        hint = ("pass collapse=2 (one box per module at depth 2) or a higher max_nodes"
                if isinstance(scene, _TensorScene) else "draw a smaller expression or pass a higher max_nodes")
        raise ValueError(f"draw_graph: the graph has {count:,} nodes, more than max_nodes={max_nodes:,}; {hint}")
    return scene


# ---------------------------------------------------------------- argument checks
def _value_type():
    from tinygrad_lite.scalar import Value
    return Value


def _tensor_type():
    from tinygrad_lite.tensor import Tensor
    return Tensor


def _as_roots(root) -> list:
    kinds = (_value_type(), _tensor_type())
    expected = "expected a tinygrad_lite Value or Tensor (or a non-empty list of them)"
    if isinstance(root, kinds):
        return [root]
    if isinstance(root, (list, tuple)) and root:
        for kind in kinds:
            if all(isinstance(item, kind) for item in root):
                return list(root)
        odd = next((item for item in root if not isinstance(item, kinds)), None)
        got = type(odd).__name__ if odd is not None else "a mix of Values and Tensors"
        raise TypeError(f"draw_graph: root list holds {got}; {expected}, all of one kind")
    raise TypeError(f"draw_graph: root must be a Value or a Tensor, got {type(root).__name__}; {expected}")


def _check_options(rankdir, max_nodes, collapse, fmt):
    if rankdir not in RANKDIRS:
        raise ValueError(f"draw_graph: rankdir must be one of {', '.join(RANKDIRS)}, got {rankdir!r}")
    positive_int("draw_graph", "max_nodes", max_nodes)
    if collapse is not None and (isinstance(collapse, bool) or not isinstance(collapse, (int, np.integer))
                                 or collapse < 0):
        raise ValueError(f"draw_graph: collapse must be None or a module depth >= 0, got {collapse!r}")
    if fmt is not None and fmt not in FORMATS:
        raise ValueError(f"draw_graph: unknown format {fmt!r}; expected one of {', '.join(FORMATS)}")


def _as_paths(expand) -> tuple:
    if isinstance(expand, str):
        expand = (expand,)
    paths = tuple(expand or ())
    for path in paths:
        if not isinstance(path, str):
            raise TypeError(f"draw_graph: expand must hold module paths (str), got {type(path).__name__}")
    return paths


# ---------------------------------------------------------------- formatting
def _escape_record(text: str) -> str:
    """Text safe inside one field of a Graphviz record label."""
    text = str(text).replace("\\", "\\\\").replace('"', "'")
    for char in "{}|<>":
        text = text.replace(char, "\\" + char)
    return text


def _escape_plain(text: str) -> str:
    return str(text).replace("\\", "\\\\").replace('"', "'")


def _escape_html(text: str) -> str:
    return str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _record(fields, rankdir: str, across: bool) -> str:
    """A record label whose fields run across the picture (across=True) or down it."""
    body = " | ".join(_escape_record(f) for f in fields)
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


def _shape_text(shape) -> str:
    return "scalar" if len(shape) == 0 else str(tuple(int(n) for n in shape))


def _shapes_text(shapes: list) -> str:
    distinct = list(dict.fromkeys(shapes))
    text = ", ".join(_shape_text(s) for s in distinct[:3])
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


def _tint(colour: str, keep: float = 0.45) -> str:
    """`colour` mixed with white, light enough for black text on top of it."""
    rgb = [int(colour[i:i + 2], 16) for i in (1, 3, 5)]
    return "#" + "".join(f"{round(255 - (255 - c) * keep):02x}" for c in rgb)


# ---------------------------------------------------------------- the scene: what to draw
class _Scene:
    """Nodes (key -> attrs, home cluster), edges (src, dst) -> gradient norm, and clusters."""

    def __init__(self, rankdir: str, show_grad: bool):
        self.rankdir, self.show_grad = rankdir, show_grad
        self.nodes: dict[str, dict] = {}
        self.home: dict[str, str | None] = {}
        self.edges: dict[tuple, float | None] = {}
        self.norms: dict[str, float | None] = {}
        self.clusters: dict[str, tuple] = {}  # path -> (parent path or None, label)
        self.boxes = 0
        self.notes: list[str] = []
        self.source_key: dict[int, str] = {}
        self.target_key: dict[int, str] = {}
        self.box_path: dict[str, str] = {}

    def add_node(self, key: str, home: str | None, norm: float | None, **attrs):
        self.nodes[key] = attrs
        self.home[key] = home
        self.norms[key] = norm

    def add_edge(self, src: str, dst: str, norm: float | None):
        if src == dst:
            return
        old = self.edges.get((src, dst))
        self.edges[(src, dst)] = norm if old is None else (old if norm is None else max(old, norm))

    def grad_range(self):
        known = [n for n in list(self.norms.values()) + list(self.edges.values())
                 if n is not None and math.isfinite(n) and n > 0]
        if not self.show_grad or not known:
            return None
        return math.log10(min(known)), math.log10(max(known))

    def to_graphviz(self, fmt: str | None) -> GraphView:
        scale = self.grad_range()
        coloured = self.show_grad and any(n is not None for n in self.norms.values())
        graph = GraphView(name="computation_graph", format=fmt or "svg", engine="dot",
                          graph_attr={"rankdir": self.rankdir, "fontname": FONT, "fontsize": "11",
                                      "newrank": "true", "labelloc": "b", "labeljust": "l"},
                          node_attr={"fontname": FONT, "fontsize": "11"},
                          edge_attr={"fontname": FONT, "arrowsize": "0.7"},
                          stats={"nodes": len(self.nodes), "edges": len(self.edges),
                                 "clusters": len(self.clusters), "boxes": self.boxes,
                                 "grad_range": None if scale is None else (10 ** scale[0], 10 ** scale[1])})
        graph.attr(label=self._caption(scale if coloured else None, coloured))
        members = defaultdict(list)
        for key in self.nodes:
            members[self.home[key]].append(key)
        children = defaultdict(list)
        for path, (parent, _) in self.clusters.items():
            children[parent].append(path)

        def emit(target, key):
            attrs = dict(self.nodes[key])
            norm = self.norms[key]
            if coloured and norm is not None:
                colour = grad_colour(norm, *(scale or (0.0, 0.0)))
                attrs.update(color=colour, fillcolor=_tint(colour), penwidth=attrs.get("penwidth", "1.6"))
            target.node(key, **attrs)

        def build(path):
            parent_label = self.clusters[path][1]
            sub = graphviz.Digraph(name=f"cluster_{path or 'model'}",
                                   graph_attr={"label": graphviz.nohtml(_escape_plain(parent_label)),
                                               "style": "rounded", "color": "#9e9e9e", "fontsize": "11",
                                               "labeljust": "l", "labelloc": "t"})
            for key in members[path]:
                emit(sub, key)
            for child in children[path]:
                sub.subgraph(build(child))
            return sub

        for key in members[None]:
            emit(graph, key)
        for path in children[None]:
            graph.subgraph(build(path))
        for (src, dst), norm in self.edges.items():
            if coloured and norm is not None:
                colour = grad_colour(norm, *(scale or (0.0, 0.0)))
                width = 1.2 + 2.0 * _position(norm, scale)
                graph.edge(src, dst, color=colour, penwidth=f"{width:.2f}")
            else:
                graph.edge(src, dst)
        return graph

    def _caption(self, scale, coloured: bool) -> str:
        legend = ("rounded box: leaf that requires grad   dashed: constant   bold border: output"
                  + ("   3-D box: a whole module (one call)" if self.boxes else ""))
        rows = [f'<tr><td align="left" colspan="7">{_escape_html(legend)}</td></tr>']
        if scale is None and coloured:
            rows.insert(0, '<tr><td align="left" colspan="7">gradient norm: every gradient is zero (grey) '
                           'or NaN/Inf (magenta)</td></tr>')
        if scale is not None:
            low, high = scale
            cells = "".join(
                f'<td bgcolor="{grad_colour(10 ** v, low, high)}" width="46">'
                f'<font color="white">{format_norm(10 ** v)}</font></td>'
                for v in np.linspace(low, high, 5))
            rows.insert(0, f'<tr><td align="left">gradient norm (log10 colour scale)  </td>{cells}'
                           f'<td align="left">  grey: zero   magenta: NaN/Inf</td></tr>')
        rows += [f'<tr><td align="left" colspan="7">{_escape_html(note)}</td></tr>' for note in self.notes]
        return f'<<table border="0" cellspacing="2" cellpadding="2">{"".join(rows)}</table>>'


def _position(norm: float, scale) -> float:
    if scale is None or not math.isfinite(norm) or norm <= 0 or scale[1] <= scale[0]:
        return 0.5 if norm and math.isfinite(norm) else 0.0
    return min(max((math.log10(norm) - scale[0]) / (scale[1] - scale[0]), 0.0), 1.0)


def topological(roots) -> list:
    """Every node the roots depend on, inputs before outputs, by depth-first search in argument
    order (the order Value.backward uses; iterative, so deep graphs are fine)."""
    order, seen = [], set()
    for root in roots:
        if id(root) in seen:
            continue
        seen.add(id(root))
        stack = [(root, iter(root.inputs))]
        while stack:
            node, inputs = stack[-1]
            for parent in inputs:
                if id(parent) not in seen:
                    seen.add(id(parent))
                    stack.append((parent, iter(parent.inputs)))
                    break
            else:
                stack.pop()
                order.append(node)
    return order


class _ValueScene(_Scene):
    """micrograd's picture: a record per Value, a small node per op."""

    def __init__(self, roots, rankdir, show_grad):
        super().__init__(rankdir, show_grad)
        order = topological(roots)
        has_grad = show_grad and any(v.grad != 0 for v in order)
        root_ids = {id(r) for r in roots}
        key = {id(v): f"v{i}" for i, v in enumerate(order)}
        self.source_key = key
        self.target_key = {id(v): key[id(v)] + "_op" if v.inputs else key[id(v)] for v in order}
        for v in order:
            fields = ([v.label] if v.label else []) + [f"data {format_number(v.data)}"]
            if show_grad:
                fields.append(f"grad {format_number(v.grad)}")
            norm = abs(v.grad) if has_grad else None
            attrs = {"shape": "Mrecord" if not v.inputs else "record", "style": "filled",
                     "fillcolor": _PLAIN_FILL, "label": _record(fields, rankdir, across=True)}
            if id(v) in root_ids:
                attrs["penwidth"] = "3"
            self.add_node(key[id(v)], None, norm, **attrs)
            if v.inputs:
                op_key = key[id(v)] + "_op"
                self.add_node(op_key, None, norm, shape="ellipse", style="filled", fillcolor=_PLAIN_FILL,
                              fontsize="10", height="0.3", label=graphviz.nohtml(_escape_plain(v.op)))
                self.add_edge(op_key, key[id(v)], norm)
                for parent in v.inputs:
                    self.add_edge(key[id(parent)], op_key, abs(parent.grad) if has_grad else None)


def _grad_norm(t) -> float | None:
    g = getattr(t, "grad", None)
    if g is None:
        return None
    return float(np.linalg.norm(np.asarray(g, dtype=np.float64).ravel()))


def _unique(tensors) -> list:
    """Each input once, by identity (Tensor's == is elementwise, so never compare them)."""
    return list({id(t): t for t in tensors}.values())


class _UnionFind:
    def __init__(self):
        self.up = {}

    def find(self, x):
        self.up.setdefault(x, x)
        while self.up[x] != x:
            self.up[x] = self.up[self.up[x]]
            x = self.up[x]
        return x

    def union(self, a, b):
        self.up[self.find(a)] = self.find(b)


class _TensorScene(_Scene):
    """Tensor records and op nodes in module clusters; collapsed modules as boxes."""

    def __init__(self, roots, model, collapse, expand, rankdir, show_grad):
        super().__init__(rankdir, show_grad)
        order = topological(roots)
        self.order, self.roots = order, {id(r) for r in roots}
        self.tree = ModuleTree(model, order, collapse, expand)
        self.has_grad = show_grad and any(t.grad is not None for t in order)
        self.index = {id(t): i for i, t in enumerate(order)}
        self.consumers = defaultdict(list)
        for t in order:
            for p in _unique(t.inputs):
                self.consumers[id(p)].append(t)
        homes = {id(t): self.tree.home(t) for t in order}
        self.folded = {id(t) for t in order if self._is_foldable(t)}
        unit_of = self._group_into_boxes(order, homes)
        self._add_boxes(unit_of)
        for t in order:
            if id(t) not in unit_of and id(t) not in self.folded:
                self._add_tensor(t, homes[id(t)])
        self._add_edges()
        self._add_clusters()
        if self.has_grad and not any(t.grad is not None for t in order if t.inputs):
            self.notes.append("only leaves hold gradients; run backward() inside tinygrad_lite.retain_grads() "
                              "to colour every node")
        if any(t.op in FAST_OPS for t in order):
            self.notes.append("the fast path: a fused op's label says which part of the formula it runs; "
                              "record under tinygrad_lite.fast.plain() to see that formula op by op")

    def _is_foldable(self, t) -> bool:
        return (not t.inputs and not t.requires_grad and t.data.size == 1 and not t.name
                and id(t) not in self.roots and id(t) not in self.tree.param_name)

    def _is_param(self, t) -> bool:
        return id(t) in self.tree.param_name

    def _norm(self, t) -> float | None:
        return _grad_norm(t) if self.has_grad else None

    # ------------------------------------------------------------ collapsed modules
    def _group_into_boxes(self, order, homes) -> dict:
        """id(tensor) -> (box path, call number); one unit per connected call of a box module."""
        box = {id(t): self.tree.box_of(homes[id(t)]) for t in order}
        links = _UnionFind()
        for t in order:
            if box[id(t)] is None or self._is_param(t):
                continue
            links.find(id(t))
            for p in t.inputs:
                if box[id(p)] == box[id(t)] and not self._is_param(p):
                    links.union(id(p), id(t))
        # number the calls in running order: a call further from the output ran earlier
        distance = defaultdict(int)
        for t in reversed(order):
            for p in t.inputs:
                distance[id(p)] = max(distance[id(p)], distance[id(t)] + 1)
        reach: dict[tuple, int] = {}
        for t in order:
            if box[id(t)] is not None and not self._is_param(t):
                key = (box[id(t)], links.find(id(t)))
                reach[key] = max(reach.get(key, 0), distance[id(t)])
        calls: dict[str, dict] = defaultdict(dict)  # box path -> {component root: call number}
        for path, component in sorted(reach, key=lambda k: -reach[k]):
            calls[path][component] = len(calls[path])
        unit_of = {}
        for t in order:
            path = box[id(t)]
            if path is None or self._is_param(t):
                continue
            unit_of[id(t)] = (path, calls[path][links.find(id(t))])
        for t in order:
            path = box[id(t)]
            if path is None or not self._is_param(t):
                continue
            users = [unit_of[id(c)] for c in self.consumers[id(t)] if unit_of.get(id(c), (None,))[0] == path]
            if users:
                unit_of[id(t)] = users[0]
            else:
                unit_of[id(t)] = (path, calls[path].setdefault(("params", path), len(calls[path])))
        self.call_counts = {path: len(c) for path, c in calls.items()}
        return unit_of

    def _add_boxes(self, unit_of):
        members = defaultdict(list)
        for t in self.order:
            if id(t) in unit_of:
                members[unit_of[id(t)]].append(t)
        for (path, number), tensors in members.items():
            key = f"box_{len(self.nodes)}"
            self.box_path[key] = path
            inside = {id(t) for t in tensors}
            for t in tensors:
                self.source_key[id(t)] = self.target_key[id(t)] = key
            inputs = [p.shape for t in tensors for p in _unique(t.inputs)
                      if id(p) not in inside and id(p) not in self.folded and not self._is_param(p)]
            outputs = [t for t in tensors
                       if id(t) in self.roots or any(id(c) not in inside for c in self.consumers[id(t)])]
            params = self.tree.parameters(path)
            param_grads = [_grad_norm(p) for p in params]
            param_grads = [g for g in param_grads if g is not None]
            param_norm = math.sqrt(sum(g * g for g in param_grads)) if param_grads else None
            out_norms = [n for n in (_grad_norm(t) for t in outputs) if n is not None]
            title = self.tree.label(path)
            calls = self.call_counts[path]
            if calls > 1:
                title += f"  call {number + 1}/{calls}"
            flow = f"out {_shapes_text([t.shape for t in outputs])}"
            lines = [title, f"in {_shapes_text(inputs)}  ->  {flow}" if inputs else flow,
                     f"{sum(p.numel() for p in params):,} params"]
            if self.has_grad:
                if param_norm is not None:
                    lines.append(f"param grad norm {format_norm(param_norm)}")
                if out_norms:
                    lines.append(f"output grad norm {format_norm(max(out_norms))}")
            norm = param_norm if param_norm is not None else (max(out_norms) if out_norms else None)
            attrs = {"shape": "box3d", "style": "filled", "fillcolor": _BOX_FILL, "margin": "0.15,0.08",
                     "label": graphviz.nohtml("\\n".join(_escape_plain(line) for line in lines))}
            if any(id(t) in self.roots for t in tensors):
                attrs["penwidth"] = "3"
            self.add_node(key, self.tree.parent[path], norm if self.has_grad else None, **attrs)
            self.boxes += 1

    # ------------------------------------------------------------ single tensors
    def _title(self, t) -> str | None:
        name = self.tree.param_name.get(id(t)) or t.name
        if id(t) in self.roots:
            return f"{name} (output)" if name else "output"
        return name

    def _add_tensor(self, t, home):
        key = f"t{self.index[id(t)]}"
        title = self._title(t)
        fields = ([title] if title else []) + [f"{_shape_text(t.shape)} {t.dtype}"]
        norm = self._norm(t)
        if norm is not None:
            fields.append(f"grad norm {format_norm(norm)}")
        attrs = {"style": "filled", "fillcolor": _PLAIN_FILL, "label": _record(fields, self.rankdir, across=False),
                 "shape": "Mrecord" if (t.requires_grad and not t.inputs) else "record"}
        if not t.inputs and not t.requires_grad:
            attrs.update(style="filled,dashed", fontcolor=_CONSTANT_FONT_COLOUR)
        if id(t) in self.roots:
            attrs["penwidth"] = "3"
        self.add_node(key, home, norm, **attrs)
        self.source_key[id(t)] = self.target_key[id(t)] = key
        if t.inputs:
            self._add_op(t, key, home, norm)

    def _add_op(self, t, key, home, norm):
        """The op that made `t`, its folded constants, and for a fast path's fused op the formula
        it stands for (FAST_OPS) on a second line and in the tooltip."""
        op_key = key + "_op"
        constants = [format(float(p.data.reshape(-1)[0]), ".4g") for p in t.inputs if id(p) in self.folded]
        lines = [" ".join([t.op or "?"] + constants)]
        attrs = {}
        formula = FAST_OPS.get(t.op)
        if formula is not None:
            lines.append(f"= {formula}")
            attrs["tooltip"] = _escape_plain(f"{t.op}: {formula} (one op on the fast path, tinygrad_lite/fast.py)")
        self.add_node(op_key, home, norm, shape="ellipse", style="filled", fillcolor=_PLAIN_FILL, fontsize="10",
                      height="0.3", label=graphviz.nohtml("\\n".join(_escape_plain(line) for line in lines)), **attrs)
        self.add_edge(op_key, key, norm)
        self.target_key[id(t)] = op_key

    def _add_edges(self):
        for t in self.order:
            if id(t) in self.folded:
                continue
            for p in _unique(t.inputs):
                if id(p) not in self.folded:
                    self.add_edge(self.source_key[id(p)], self.target_key[id(t)], self._norm(p))

    def _add_clusters(self):
        for key in self.nodes:
            path = self.home[key]
            while path is not None and path not in self.clusters:
                self.clusters[path] = (self.tree.parent[path], self.tree.label(path))
                path = self.tree.parent[path]
