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

from pathlib import Path

import numpy as np

from tinygrad_lite.checks import positive_int

from .graph_style import (
    COLOUR_STOPS,
    FONT,
    NONFINITE_GRAD_COLOUR,
    ZERO_GRAD_COLOUR,
    format_norm,
    format_number,
    grad_colour,
)
from .render import FORMATS, check_output_path, write_graph
from .scene import GraphView, topological
from .tensor_scene import TensorScene
from .value_scene import ValueScene

# the scene and its style have files of their own (viz/scene.py, viz/graph_style.py); their names stay here too
__all__ = ["COLOUR_STOPS", "FONT", "NONFINITE_GRAD_COLOUR", "RANKDIRS", "ZERO_GRAD_COLOUR", "GraphView", "build_scene",
           "draw_graph", "format_norm", "format_number", "grad_colour", "render", "topological"]
RANKDIRS = ("LR", "TB", "RL", "BT")


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
        scene = TensorScene(roots, model, collapse, expand, rankdir, show_grad)
    else:
        if collapse is not None or expand or model is not None:
            raise ValueError("draw_graph: collapse, expand and model apply to Tensor graphs built by "
                             "Modules; a Value graph has no modules")
        scene = ValueScene(roots, rankdir, show_grad)
    count = len(scene.nodes)
    if count > max_nodes:
        hint = ("pass collapse=2 (one box per module at depth 2) or a higher max_nodes"
                if isinstance(scene, TensorScene) else "draw a smaller expression or pass a higher max_nodes")
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
