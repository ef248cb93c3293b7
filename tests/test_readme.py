"""The README and the docs/ pages it links to, as a newcomer uses them: every Python block runs as
pasted (a fresh namespace, a fresh working directory), every command of the README's tables and
code blocks parses with the CLI it names, writes its files under runs/, the links lead to files,
and the README stays short."""
from __future__ import annotations

import contextlib
import io
import re
import shlex
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
PAGES = [README, *sorted((ROOT / "docs").glob("*.md"))]
BLOCK = re.compile(r"^```python\n(.*?)^```", re.MULTILINE | re.DOTALL)


def python_blocks() -> list[tuple[str, str]]:
    blocks = []
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        blocks += [(f"{page.relative_to(ROOT)}:{text.count(chr(10), 0, m.start()) + 1}", m.group(1))
                   for m in BLOCK.finditer(text)]
    return blocks


def test_readme_has_python_blocks():
    assert sum(where.startswith("README") for where, _ in python_blocks()) >= 2
    assert len(python_blocks()) >= 4, "the Python examples were not found"


@pytest.mark.parametrize("where, code", python_blocks(), ids=[w for w, _ in python_blocks()])
def test_block_runs_as_pasted(where, code, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, where, "exec"), {"__name__": "__readme__"})  # noqa: S102
    if "detect_anomaly" in code:
        assert "sqrt" in out.getvalue() and "Inf" in out.getvalue(), out.getvalue()


def test_readme_fits_its_reader():
    text = README.read_text(encoding="utf-8")
    assert text.count("\n") < 250
    first_screen = "\n".join(text.splitlines()[:20])
    assert "python3 -m venv venv" in first_screen and "venv/bin/python -m transformer train" in first_screen
    assert "venv/bin/python -m pytest" in first_screen


def test_every_link_of_the_readme_leads_to_a_file():
    links = re.findall(r"\]\(([^)#]+)\)", README.read_text(encoding="utf-8"))
    assert links and all((ROOT / link).exists() for link in links if "://" not in link)


def readme_commands() -> list[str]:
    """`python3 -m viz|transformer ...` commands in the README's tables and bash blocks."""
    text = README.read_text(encoding="utf-8")
    found = re.findall(r"`(python3 -m (?:viz|transformer) [^`]+)`", text)
    for block in re.findall(r"^```bash\n(.*?)^```", text, re.MULTILINE | re.DOTALL):
        found += [line.split("  #")[0].strip() for line in block.splitlines()
                  if line.startswith("python3 -m viz") or line.startswith("python3 -m transformer")]
    return sorted(set(c.split(" | ")[0].split(" && ")[0] for c in found))


def test_the_readme_names_its_commands():
    assert len(readme_commands()) >= 12


@pytest.mark.parametrize("command", readme_commands())
def test_each_readme_command_parses_and_writes_under_runs(command):
    """The CLIs' own parsers accept the command (a renamed flag or subcommand fails here); the
    commands themselves run in tests/test_translator_cli.py, test_first_hour.py, test_viz_cli.py."""
    argv = shlex.split(command)[3:]
    module = shlex.split(command)[2]
    if module == "viz":
        from viz.__main__ import build_parser
        build_parser().parse_args(argv)
    elif argv[:1] == ["gpt"]:
        from transformer.gpt.__main__ import build_parser, nanogpt_spelling
        parser = build_parser()
        parser.parse_args(nanogpt_spelling(argv[1:], parser.flags))
    else:
        from transformer.__main__ import parse
        parse(argv)
    outputs = [argv[i + 1] for i, a in enumerate(argv[:-1]) if a in ("--out", "--show-attention")]
    if argv[:2] == ["gpt", "train"]:
        outputs.append(argv[argv.index("--out") + 1] if "--out" in argv else "runs/gpt")
    assert all(o.startswith("runs/") for o in outputs), outputs
