"""Pictures of the engine: Graphviz computation/backprop graphs and matplotlib plots."""
from .graph import GraphView, draw_graph
from .render import RendererMissingWarning, find_renderer, render

__all__ = ["GraphView", "RendererMissingWarning", "draw_graph", "find_renderer", "render"]
