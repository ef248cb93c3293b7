"""The attention lab: a page on 127.0.0.1 where a learner types Chinese, sees the beam translation,
every layer's and head's attention and the beam search as a tree, and masks source tokens to see
what changes. viz/lab/server.py serves it; the data comes from a callable it is given
(transformer.lab.translate_with_mask, wired by `python -m viz lab`)."""
from .server import LabServer, parse_mask, static_file

__all__ = ["LabServer", "parse_mask", "static_file"]
