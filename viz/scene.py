"""The scene: what a graph drawing holds before Graphviz (nodes, edges with their gradient norms,
module clusters), and its Graphviz form, a GraphView; `topological` walks the engine's graph for it."""
from __future__ import annotations

import math
from collections import defaultdict

import graphviz
import numpy as np

from .graph_style import FONT, escape_html, escape_plain, format_norm, grad_colour, gradient_position, tint
from .render import INSTALL_HINT, find_renderer, pipe


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


class Scene:
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
        graph = self._empty_graph(fmt, scale)
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
                attrs.update(color=colour, fillcolor=tint(colour), penwidth=attrs.get("penwidth", "1.6"))
            target.node(key, **attrs)

        def build(path):
            parent_label = self.clusters[path][1]
            sub = graphviz.Digraph(name=f"cluster_{path or 'model'}",
                                   graph_attr={"label": graphviz.nohtml(escape_plain(parent_label)),
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
        self._draw_edges(graph, scale, coloured)
        return graph

    def _empty_graph(self, fmt: str | None, scale) -> GraphView:
        """The graph's settings and `stats`, before any node is drawn."""
        return GraphView(name="computation_graph", format=fmt or "svg", engine="dot",
                         graph_attr={"rankdir": self.rankdir, "fontname": FONT, "fontsize": "11",
                                     "newrank": "true", "labelloc": "b", "labeljust": "l"},
                         node_attr={"fontname": FONT, "fontsize": "11"},
                         edge_attr={"fontname": FONT, "arrowsize": "0.7"},
                         stats={"nodes": len(self.nodes), "edges": len(self.edges),
                                "clusters": len(self.clusters), "boxes": self.boxes,
                                "grad_range": None if scale is None else (10 ** scale[0], 10 ** scale[1])})

    def _draw_edges(self, graph: GraphView, scale, coloured: bool):
        """Each edge coloured by the gradient flowing along it, and wider the larger it is."""
        for (src, dst), norm in self.edges.items():
            if coloured and norm is not None:
                colour = grad_colour(norm, *(scale or (0.0, 0.0)))
                width = 1.2 + 2.0 * gradient_position(norm, scale)
                graph.edge(src, dst, color=colour, penwidth=f"{width:.2f}")
            else:
                graph.edge(src, dst)

    def _caption(self, scale, coloured: bool) -> str:
        legend = ("rounded box: leaf that requires grad   dashed: constant   bold border: output"
                  + ("   3-D box: a whole module (one call)" if self.boxes else ""))
        rows = [f'<tr><td align="left" colspan="7">{escape_html(legend)}</td></tr>']
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
        rows += [f'<tr><td align="left" colspan="7">{escape_html(note)}</td></tr>' for note in self.notes]
        return f'<<table border="0" cellspacing="2" cellpadding="2">{"".join(rows)}</table>>'



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

