"""What an exercise is, as data: the function a learner writes (its stub: signature and docstring), the
project's own version of it, fixed inputs ordered by size, and the mistakes learners make with it, each
with a way to recognise it and a hint. The grader (tinylearn.grading) reads nothing else."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable


@dataclass(frozen=True)
class Case:
    """One fixed input: `label` says what it is in the learner's words; `args`/`kwargs` go to the call;
    `tags` name what it tests ("large", "masked row", "zero-size"), for the mistakes' detectors."""

    label: str
    args: tuple
    kwargs: dict = field(default_factory=dict)
    tags: frozenset = frozenset()


@dataclass(frozen=True)
class Mistake:
    """A mistake learners make: its name, the hint that fixes it, and `spots(case, expected, got)`, True
    when a failure on `case` looks like it (`got` is the learner's output, or the exception it raised).
    An exercise lists its mistakes most specific first: a failure is named after the first that spots it."""

    name: str
    hint: str
    spots: Callable


@dataclass(frozen=True)
class Check:
    """A property checked once every case agrees: `run(fn)` returns None, or a Failure-like tuple
    (what, expected, got, mistakes) when the learner's function fails it; `says` names it for the report."""

    says: str
    run: Callable


@dataclass(frozen=True)
class Exercise:
    """One idea to build.

    function: the name the learner's file defines; stub: its signature and docstring (the formula, the
    shapes, the paper's section), without a body; imports: the lines the file starts with.
    solution: the project's code, called as the learner's function is; shown: what `solution` prints
    (the engine's own function or method); why: why the project writes it that way.
    call(fn, case): runs a function on a case, through the engine where the exercise plugs into it.
    checks: the properties run after the cases (gradients against finite differences, an end-to-end run).
    draw(fn, path): draws the learner's op in the backward graph (or, for an exercise that is not an op,
    the picture of its idea, which `picture` names), after a pass; None if it has none, and `no_picture`
    then says why.
    """

    number: int
    name: str
    title: str
    reads: str
    function: str
    stub: str
    hints: tuple
    solution: Callable
    shown: Callable
    why: str
    cases: Callable
    mistakes: tuple
    imports: str = "import numpy as np\n"
    call: Callable = lambda fn, case: fn(*case.args, **case.kwargs)
    checks: tuple = ()
    tolerance: float = 1e-6
    draw: Callable | None = None
    picture: str = "in the backward graph"
    no_picture: str = ""
