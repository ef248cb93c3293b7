"""Pictures of the engine: Graphviz computation/backprop graphs and matplotlib plots."""
