"""Every Python block of the README runs as pasted: a fresh namespace, a fresh working directory."""
from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
BLOCK = re.compile(r"^```python\n(.*?)^```", re.MULTILINE | re.DOTALL)


def python_blocks() -> list[tuple[int, str]]:
    text = README.read_text(encoding="utf-8")
    return [(text.count("\n", 0, m.start()) + 1, m.group(1)) for m in BLOCK.finditer(text)]


def test_readme_has_python_blocks():
    assert len(python_blocks()) >= 3, "the README's Python examples were not found"


@pytest.mark.parametrize("line, code", python_blocks(), ids=lambda v: f"line{v}" if isinstance(v, int) else "")
def test_readme_block_runs_as_pasted(line, code, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, f"README.md:{line}", "exec"), {"__name__": "__readme__"})  # noqa: S102
    if "detect_anomaly" in code:
        assert "sqrt" in out.getvalue() and "Inf" in out.getvalue(), out.getvalue()
