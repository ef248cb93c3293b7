"""tinylearn: build it yourself. Graded exercises along the reading path (docs/reading.md), offline: write
softmax, its backward, attention..., and `check` runs yours where the project's own code runs, on the
formula path, and names the mistake when it finds one ("no max shift: your softmax overflows at x = 1000").

    python -m tinylearn list / start 6 / check 6 / hint 6 / solution 6 / reset 6   (docs/learn.md)

    import tinylearn as learn
    learn.check("softmax", my_softmax)      # a Report: truthy when it passes, printed as the verdict

It sits above the engine and the model (it imports both; neither imports it).
"""
from __future__ import annotations

from .commands import check, draw, find, hint, listing, reset, solution, start
from .exercises import EXERCISES
from .grading import Report

__all__ = ["EXERCISES", "Report", "check", "draw", "find", "hint", "listing", "reset", "solution", "start"]
