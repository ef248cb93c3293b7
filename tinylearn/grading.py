"""Grading a learner's function: each fixed input, smallest first, against the project's own code on the
formula path (fast.plain(), no compilation); then the exercise's checks (gradients against finite
differences in float64, an end-to-end run). The first failure is reported with its input, the expected
value against the learner's, and the known mistake it looks like, with that mistake's hint."""
from __future__ import annotations

import copy
import math
import warnings
from dataclasses import dataclass

import numpy as np

from tinygrad_lite.fast import plain

from .exercise import Exercise


@dataclass
class Report:
    """The outcome of one check: `passed`, and the text to show (str(report))."""

    exercise: Exercise
    passed: bool
    text: str
    mistakes: tuple = ()

    def __bool__(self):
        return self.passed

    def __str__(self):
        return self.text

    def __repr__(self):
        return self.text

    @property
    def mistake_names(self) -> list:
        return [m.name for m in self.mistakes]


def grade(exercise: Exercise, fn) -> Report:
    """Run `fn` where the project's code runs, on every case and check; the first failure ends it."""
    with plain(), warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore", RuntimeWarning)
        cases = exercise.cases()
        failures = []
        for index, case in enumerate(cases, 1):
            expected = exercise.call(exercise.solution, case)
            try:
                got = exercise.call(fn, copy.deepcopy(case))  # a learner's in-place edit stays in its copy
            except NotImplementedError:
                return _not_written(exercise)
            except Exception as error:  # the learner's code raised: that is the answer to grade
                got = error
            difference = differs(expected, got, exercise.tolerance)
            if difference:
                failures.append((f"input {index} of {len(cases)}: {case.label}", case, expected, got, difference))
        if failures:
            where, case, expected, got, difference = failures[0]
            return _failed(exercise, where, expected, got, difference, _spotted(exercise, failures))
        for check in exercise.checks:
            try:
                failure = check.run(fn)
            except NotImplementedError:
                return _not_written(exercise)
            if failure is not None:
                what, expected, got, mistakes = failure
                difference = "" if isinstance(expected, str) else differs(expected, got, exercise.tolerance)
                return _failed(exercise, what, expected, got, difference, tuple(mistakes))
    done = ", ".join([f"all {len(cases)} inputs"] + [c.says for c in exercise.checks])
    lines = [f"✓ {exercise.number} {exercise.name}: passes {done}."]
    if exercise.draw is not None:
        lines.append(f"  See your {exercise.name} {exercise.picture}: python -m tinylearn draw {exercise.number}")
    elif exercise.no_picture:
        lines.append(f"  No picture for this one: {exercise.no_picture}")
    return Report(exercise, True, "\n".join(lines))


def _spots(mistake, case, expected, got) -> bool:
    try:
        return bool(mistake.spots(case, expected, got))
    except Exception:  # a detector that cannot read this output does not match it
        return False


def _spotted(exercise, failures) -> tuple:
    """The mistake the first failure looks like: of those that spot it (listed most specific first), the
    first that also spots the later failures it can tell apart (a 1 × 1 causal mask cannot tell a masked
    diagonal from an inverted mask; a 3 × 3 one can)."""
    _, case, expected, got, _ = failures[0]
    candidates = [m for m in exercise.mistakes if _spots(m, case, expected, got)]
    for _, case, expected, got, _ in failures[1:]:
        narrower = [m for m in candidates if _spots(m, case, expected, got)]
        candidates = narrower or candidates
    return tuple(candidates[:1])


def _not_written(exercise) -> Report:
    return Report(exercise, False, f"✗ {exercise.number} {exercise.name}: not written yet (it raises "
                                   f"NotImplementedError); write {exercise.function} in "
                                   f"{exercise.number:02d}_{exercise.name}.py")


def _failed(exercise, where, expected, got, difference, mistakes) -> Report:
    lines = [f"✗ {exercise.number} {exercise.name}: differs on {where}",
             f"  expected {show(expected)}", f"       got {show(got)}"]
    if difference:
        lines.append(f"  ({difference})")
    for mistake in mistakes:
        lines.append(f"  The mistake: {mistake.name} — {mistake.hint}")
    if not mistakes:
        lines.append(f"  No known mistake matches; `python -m tinylearn hint {exercise.number}` gives a hint.")
    return Report(exercise, False, "\n".join(lines), tuple(mistakes))


def show(value, width: int = 300) -> str:
    """A value on one line (arrays rounded to 4 digits), cut at `width` characters."""
    if isinstance(value, str):
        text = value
    elif isinstance(value, BaseException):
        text = f"{type(value).__name__}: {value}"
    elif isinstance(value, np.ndarray):
        text = np.array2string(value, precision=4, suppress_small=True, max_line_width=10**6, threshold=40)
        text = f"{text} (shape {value.shape})" if value.ndim else text
    elif isinstance(value, dict):
        text = "{" + ", ".join(f"{k}: {show(v, width)}" for k, v in value.items()) + "}"
    elif isinstance(value, (tuple, list)):
        text = "(" + ", ".join(show(v, width) for v in value) + ")"
    else:
        text = repr(value)
    text = " ".join(text.split())
    return text if len(text) <= width else text[:width - 1] + "…"


def differs(expected, got, tolerance: float) -> str:
    """'' if got equals expected (numbers within tolerance, NaN where NaN), else what differs."""
    if isinstance(got, BaseException):
        return "it raised an error"
    if isinstance(expected, dict):
        if not isinstance(got, dict):
            return f"expected a dict, got {type(got).__name__}"
        return next((f"{key}: {d}" for key in expected
                     if (d := differs(expected[key], got.get(key), tolerance))), "")
    if isinstance(expected, (tuple, list)):
        if not isinstance(got, (tuple, list)) or len(got) != len(expected):
            return f"expected {len(expected)} results, got {show(got, 60)}"
        return next((f"result {i + 1}: {d}" for i, (e, g) in enumerate(zip(expected, got))
                     if (d := differs(e, g, tolerance))), "")
    if expected is None:
        return "" if got is None else f"expected None, got {show(got, 60)}"
    if isinstance(expected, str):
        return "" if got == expected else f"expected {expected!r}, got {show(got, 60)}"
    return _differs_as_numbers(np.asarray(expected), got, tolerance)


def _differs_as_numbers(expected: np.ndarray, got, tolerance: float) -> str:
    try:
        got = np.asarray(got.data if hasattr(got, "data") and not isinstance(got, np.ndarray) else got)
    except Exception:
        return f"expected numbers, got {type(got).__name__}"
    if got.dtype == object or got.dtype.kind not in "biuf":
        return f"expected numbers, got {type(got).__name__}"
    if got.shape != expected.shape:
        return f"shape {got.shape}, expected {expected.shape}"
    if expected.dtype == np.bool_ or got.dtype == np.bool_:
        if expected.dtype != got.dtype:
            return f"dtype {got.dtype}, expected {expected.dtype}"
        wrong = np.flatnonzero(expected != got)
    else:
        e, g = expected.astype(np.float64), got.astype(np.float64)
        close = np.isclose(g, e, rtol=tolerance, atol=tolerance * 1e-3, equal_nan=True)
        wrong = np.flatnonzero(~close)
    if not wrong.size:
        return ""
    first = np.unravel_index(wrong[0], expected.shape) if expected.ndim else ()
    return f"{wrong.size} of {expected.size} entries differ, the first at index {tuple(int(i) for i in first)}"


def finite(value) -> bool:
    """Whether every number in value (an array, a Value-like .data, a sequence) is finite."""
    try:
        return bool(np.isfinite(np.asarray(value, dtype=np.float64)).all())
    except Exception:
        return math.isfinite(float(value))


def close(a, b, tolerance: float = 1e-6) -> bool:
    """Whether b equals a as numbers of one shape (for detectors: the learner's output against the
    value a known mistake gives)."""
    if isinstance(a, BaseException) or isinstance(b, BaseException):
        return False
    return not differs(np.asarray(a), b, tolerance)
