"""The GPT's built-in training text, and nanoGPT's train/validation split.

builtin_text() is text the project wrote itself, so `python -m transformer gpt train` works offline
without --data: the docstrings of tinygrad_lite, transformer and viz (read from their source files
with `ast`; nothing is imported or run) and, in a source checkout, README.md and docs/*.md.
"""
from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

from tinygrad_lite.checks import number

PACKAGES = ("tinygrad_lite", "transformer", "viz")
DOCUMENTED = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)


def package_folder(name: str) -> Path | None:
    """Where package `name`'s source files are, found without importing it (None if not installed)."""
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def docstrings(source: str) -> list[str]:
    """The module's, classes' and functions' docstrings of Python source, in source order."""
    found = []

    def visit(node):
        if isinstance(node, DOCUMENTED) and (doc := ast.get_docstring(node, clean=True)):
            found.append(doc)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(source))
    return found


def source_checkout(folder: Path) -> Path | None:
    """The project's root if the package at `folder` sits in a source checkout (next to its setup.cfg)."""
    root = folder.parent
    setup = root / "setup.cfg"
    if setup.is_file() and "name = tinygrad-lite" in setup.read_text(encoding="utf-8"):
        return root
    return None


def builtin_sources() -> dict[str, str]:
    """relative path -> its text for the built-in text: each package file's docstrings, and the
    checkout's README.md and docs/*.md when there is one."""
    found: dict[str, str] = {}
    for name in PACKAGES:
        folder = package_folder(name)
        if folder is None:
            continue
        for path in sorted(folder.rglob("*.py")):
            docs = docstrings(path.read_text(encoding="utf-8"))
            if docs:
                found[path.relative_to(folder.parent).as_posix()] = "\n\n".join(docs)
        root = source_checkout(folder)
        if root is not None:
            for path in [root / "README.md", *sorted((root / "docs").glob("*.md"))]:
                if path.is_file():
                    found[path.relative_to(root).as_posix()] = path.read_text(encoding="utf-8").strip()
    return found


def builtin_text() -> str:
    """The built-in training text: the project's docstrings and docs, each source under a
    "# <path>" line, in sorted path order (the same text on every machine for the same source)."""
    sources = builtin_sources()
    if not sources:
        raise RuntimeError("builtin_text: found none of the packages' source files; give a text file with --data")
    return "\n\n".join(f"# {path}\n\n{sources[path]}" for path in sorted(sources)) + "\n"


def split(data, fraction: float = 0.9):
    """(first fraction, the rest) of a text or an id sequence, as nanoGPT splits tiny Shakespeare:
    the first 90% of the characters train, the last 10% validate."""
    fraction = number("split", "fraction", fraction, 0, 1, low_open=True, high_open=True)
    cut = int(len(data) * fraction)
    if cut == 0 or cut == len(data):
        raise ValueError(f"split: {len(data)} items split at fraction {fraction} leave an empty part "
                         f"({cut} / {len(data) - cut}); give more data or another fraction")
    return data[:cut], data[cut:]
