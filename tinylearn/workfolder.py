"""The learner's working folder: one file per exercise started (NN_name.py, its number first so the
folder lists in reading order and no file shadows a module), and the progress file beside them,
tinylearn-progress.json, written atomically. Nothing is ever written into the installed package."""
from __future__ import annotations

import importlib.util
import json
import sys
import textwrap
from pathlib import Path

import tinygrad_lite
import transformer
import viz
from tinygrad_lite.files import atomic_write

from .exercise import Exercise

PROGRESS = "tinylearn-progress.json"
PACKAGES = tuple(Path(m.__file__).resolve().parent for m in (tinygrad_lite, transformer, viz)) + (
    Path(__file__).resolve().parent,)


def exercise_file(exercise: Exercise, folder) -> Path:
    return Path(folder) / f"{exercise.number:02d}_{exercise.name}.py"


def file_text(exercise: Exercise) -> str:
    """The exercise file: what to build and where the project's version lives, then the stub, its first
    hint, and `raise NotImplementedError`."""
    header = (f'"""Exercise {exercise.number}: {exercise.title}.\n\n'
              f"The project's version lives in {exercise.reads}. Write `{exercise.function}` below, then:\n\n"
              f"    python -m tinylearn check {exercise.number}     (or: check {exercise.name})\n"
              f"    python -m tinylearn hint {exercise.number}      one more hint each time\n"
              '"""\n')
    hint = textwrap.fill(f"Hint: {exercise.hints[0]}", 100, initial_indent="    # ", subsequent_indent="    # ")
    body = f"{hint}\n    raise NotImplementedError\n"
    return f"{header}{exercise.imports}\n\n{exercise.stub.rstrip()}\n{body}"


def outside_the_packages(folder) -> Path:
    """`folder`, resolved, once it is known not to lie inside an installed package of this project."""
    folder = Path(folder).resolve()
    for package in PACKAGES:
        if folder == package or package in folder.parents:
            raise ValueError(f"tinylearn: {folder} is inside the package {package.name}; run tinylearn from a "
                             "folder of your own (your exercise files go there, never into the package)")
    return folder


def start(exercise: Exercise, folder) -> tuple[Path, bool]:
    """Write the exercise file unless it exists: (its path, whether it was written now)."""
    path = exercise_file(exercise, outside_the_packages(folder))
    if path.exists():
        return path, False
    with atomic_write(path, durable=False, op="tinylearn start") as temp:
        temp.write_text(file_text(exercise), encoding="utf-8")
    record(folder, exercise, status="started")
    return path, True


def reset(exercise: Exercise, folder) -> Path:
    """Write the exercise file anew (the learner's version is kept beside it as .bak) and forget its
    progress."""
    path = exercise_file(exercise, folder)
    if path.exists():
        path.replace(path.with_suffix(".py.bak"))
    progress = read_progress(folder)
    progress.pop(exercise.name, None)
    write_progress(folder, progress)
    start(exercise, folder)
    return path


def learner_function(exercise: Exercise, folder):
    """The learner's function, loaded from their exercise file (a fresh module on every call)."""
    path = exercise_file(exercise, folder)
    if not path.exists():
        raise FileNotFoundError(f"tinylearn: no {path.name} in {Path(folder).resolve()}; "
                                f"run `python -m tinylearn start {exercise.number}` first")
    spec = importlib.util.spec_from_file_location(f"tinylearn_exercise_{exercise.number:02d}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules.pop(spec.name, None)
    spec.loader.exec_module(module)
    fn = getattr(module, exercise.function, None)
    if not callable(fn):
        raise AttributeError(f"tinylearn: {path.name} defines no function {exercise.function}; "
                             f"the exercise asks for `def {exercise.function}(...)`")
    return fn


def read_progress(folder) -> dict:
    """exercise name -> {"status": "started" | "passed" | "failed", "hints": shown so far}."""
    path = Path(folder) / PROGRESS
    if not path.exists():
        return {}
    try:
        progress = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise ValueError(f"tinylearn: cannot read {path}: {error}; delete it to start the progress afresh") from None
    return progress if isinstance(progress, dict) else {}


def write_progress(folder, progress: dict) -> None:
    with atomic_write(Path(folder) / PROGRESS, durable=False, op="tinylearn progress") as temp:
        temp.write_text(json.dumps(progress, indent=1, sort_keys=True) + "\n", encoding="utf-8")


def record(folder, exercise: Exercise, status: str | None = None, hints: int | None = None) -> dict:
    """Update one exercise's entry in the progress file; returns the entry."""
    progress = read_progress(folder)
    entry = progress.setdefault(exercise.name, {"status": "started", "hints": 0})
    if status is not None:
        entry["status"] = status
    if hints is not None:
        entry["hints"] = hints
    write_progress(folder, progress)
    return entry
