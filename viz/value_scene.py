"""micrograd's picture of a scalar (Value) graph: a record per Value, a small node per op."""
from __future__ import annotations

import graphviz

from .graph_style import PLAIN_FILL, escape_plain, format_number, record_label
from .scene import Scene, topological


class ValueScene(Scene):
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
                     "fillcolor": PLAIN_FILL, "label": record_label(fields, rankdir, across=True)}
            if id(v) in root_ids:
                attrs["penwidth"] = "3"
            self.add_node(key[id(v)], None, norm, **attrs)
            if v.inputs:
                op_key = key[id(v)] + "_op"
                self.add_node(op_key, None, norm, shape="ellipse", style="filled", fillcolor=PLAIN_FILL,
                              fontsize="10", height="0.3", label=graphviz.nohtml(escape_plain(v.op)))
                self.add_edge(op_key, key[id(v)], norm)
                for parent in v.inputs:
                    self.add_edge(key[id(parent)], op_key, abs(parent.grad) if has_grad else None)

