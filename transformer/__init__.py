"""The Transformer of "Attention Is All You Need", built on tinygrad_lite alone."""
