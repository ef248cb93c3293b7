"""What `python -m tinylearn` and `import tinylearn` both do: list, start, check, hint, solution, reset and
draw, each taking an exercise's number or name. The learner's files and progress live in `folder` (the
working folder by default)."""
from __future__ import annotations

import difflib
import inspect
import textwrap
from pathlib import Path

from . import workfolder
from .exercises import EXERCISES
from .grading import Report, grade

MARKS = {"passed": "✓", "failed": "✗", "started": "✗"}


def find(key):
    """The exercise numbered or named `key` (6, "6" or "softmax")."""
    text = str(key).strip()
    for exercise in EXERCISES:
        if text in (str(exercise.number), exercise.name, f"{exercise.number:02d}"):
            return exercise
    names = [e.name for e in EXERCISES]
    meant = difflib.get_close_matches(text, names, n=1)
    raise LookupError(f"tinylearn: no exercise {text!r}; give a number 1-{len(EXERCISES)} or a name"
                   + (f" (did you mean {meant[0]}?)" if meant else f": {', '.join(names)}"))


def listing(folder=".") -> str:
    """The exercises in reading order, each ✓ (passes), ✗ (started, not passing yet) or not started."""
    progress = workfolder.read_progress(folder)
    lines = []
    for exercise in EXERCISES:
        status = progress.get(exercise.name, {}).get("status")
        mark = MARKS.get(status, " ")
        said = {"passed": "", "failed": "  (not passing yet)", "started": "  (started)"}.get(status, "")
        lines.append(f"{mark} {exercise.number:2d}  {exercise.name:<20} {exercise.title}{said}")
    passed = sum(1 for e in EXERCISES if progress.get(e.name, {}).get("status") == "passed")
    lines.append(f"{passed} of {len(EXERCISES)} pass. Start one: python -m tinylearn start N")
    return "\n".join(lines)


def start(key, folder=".") -> str:
    exercise = find(key)
    path, written = workfolder.start(exercise, folder)
    if not written:
        return f"{path.name} is already there: edit it, then `python -m tinylearn check {exercise.number}` " \
               f"(`reset {exercise.number}` starts it again)"
    return f"wrote {path}: write {exercise.function} there, then `python -m tinylearn check {exercise.number}`"


def check(key, fn=None, folder=".") -> Report:
    """Grade `fn` (or, if None, the function in the learner's exercise file, recording the outcome in the
    progress file) on exercise `key`; the Report is truthy when it passes and prints as the verdict."""
    exercise = find(key)
    from_file = fn is None
    if from_file:
        fn = workfolder.learner_function(exercise, folder)
    elif not callable(fn):
        raise TypeError(f"tinylearn.check: expected your {exercise.function} function, got {type(fn).__name__}")
    report = grade(exercise, fn)
    if from_file:
        workfolder.record(folder, exercise, status="passed" if report.passed else "failed")
    return report


def hint(key, folder=".") -> str:
    """The next hint of exercise `key` (the file holds the first), one more each call."""
    exercise = find(key)
    shown = workfolder.read_progress(folder).get(exercise.name, {}).get("hints", 0)
    number = min(shown + 1, len(exercise.hints) - 1)
    workfolder.record(folder, exercise, hints=number)
    last = " (the last one; `solution` shows the project's code)" if number == len(exercise.hints) - 1 else ""
    return f"Hint {number + 1} of {len(exercise.hints)}{last}: {exercise.hints[number]}"


def solution(key) -> str:
    """The project's own code for exercise `key`, with why it is written that way."""
    exercise = find(key)
    code = textwrap.dedent(inspect.getsource(exercise.shown))
    why = textwrap.fill(exercise.why, 100, initial_indent="Why: ", subsequent_indent="     ")
    return f"# {exercise.reads}\n{code.rstrip()}\n\n{why}"


def reset(key, folder=".") -> str:
    exercise = find(key)
    path = workfolder.reset(exercise, folder)
    return f"wrote {path} afresh (your version is in {path.name}.bak); progress on {exercise.name} forgotten"


def draw(key, out=None, fn=None, folder=".") -> Path:
    """Draw the learner's op (from their file if fn is None) in the backward graph of a small step, or the
    picture of the exercise's idea made with it."""
    exercise = find(key)
    if exercise.draw is None:
        raise ValueError(f"tinylearn draw: exercise {exercise.number} ({exercise.name}) has no picture: "
                         f"{exercise.no_picture}")
    fn = workfolder.learner_function(exercise, folder) if fn is None else fn
    return exercise.draw(fn, Path(out or f"{exercise.number:02d}_{exercise.name}.svg"))
