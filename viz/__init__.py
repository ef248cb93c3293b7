"""Pictures of the engine: Graphviz computation/backprop graphs, matplotlib plots, and the
backward stepper (`explore`: an offline page that walks the backward pass node by node)."""
from .explorer import Explorer, explore
from .graph import GraphView, draw_graph, render
from .render import RendererMissingWarning, find_renderer

__all__ = ["Explorer", "GraphView", "RendererMissingWarning", "draw_graph", "explore", "find_renderer", "render"]
