"""The picture of a Tensor graph: tensor records and op nodes in module clusters, and whole
modules collapsed into boxes (one per call)."""
from __future__ import annotations

import math
from collections import defaultdict

import graphviz
import numpy as np

from .fast_ops import FAST_OPS
from .graph_style import (
    BOX_FILL,
    CONSTANT_FONT_COLOUR,
    PLAIN_FILL,
    escape_plain,
    format_norm,
    record_label,
    shape_text,
    shapes_text,
)
from .module_tree import ModuleTree
from .scene import Scene, topological


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


class TensorScene(Scene):
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
            flow = f"out {shapes_text([t.shape for t in outputs])}"
            lines = [title, f"in {shapes_text(inputs)}  ->  {flow}" if inputs else flow,
                     f"{sum(p.numel() for p in params):,} params"]
            if self.has_grad:
                if param_norm is not None:
                    lines.append(f"param grad norm {format_norm(param_norm)}")
                if out_norms:
                    lines.append(f"output grad norm {format_norm(max(out_norms))}")
            norm = param_norm if param_norm is not None else (max(out_norms) if out_norms else None)
            attrs = {"shape": "box3d", "style": "filled", "fillcolor": BOX_FILL, "margin": "0.15,0.08",
                     "label": graphviz.nohtml("\\n".join(escape_plain(line) for line in lines))}
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
        fields = ([title] if title else []) + [f"{shape_text(t.shape)} {t.dtype}"]
        norm = self._norm(t)
        if norm is not None:
            fields.append(f"grad norm {format_norm(norm)}")
        attrs = {"style": "filled", "fillcolor": PLAIN_FILL, "label": record_label(fields, self.rankdir, across=False),
                 "shape": "Mrecord" if (t.requires_grad and not t.inputs) else "record"}
        if not t.inputs and not t.requires_grad:
            attrs.update(style="filled,dashed", fontcolor=CONSTANT_FONT_COLOUR)
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
            attrs["tooltip"] = escape_plain(f"{t.op}: {formula} (one op on the fast path, tinygrad_lite/fast.py)")
        self.add_node(op_key, home, norm, shape="ellipse", style="filled", fillcolor=PLAIN_FILL, fontsize="10",
                      height="0.3", label=graphviz.nohtml("\\n".join(escape_plain(line) for line in lines)), **attrs)
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
