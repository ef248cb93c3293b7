"""Shared by the robustness suite: a tally of hypothesis examples (printed at the end of the
run, so a property test that silently ran 0 examples shows up) and a runner for the CLIs."""
import collections
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = collections.Counter()

# The CLIs run on the NumPy twins: a toy model's step takes milliseconds, and Numba would spend
# seconds compiling first in every fresh process.
CLI_ENV = {**os.environ, "TINYGRAD_LITE_BACKEND": "numpy",
           "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
CLI_ENV.pop("TINYGRAD_LITE_DETECT_ANOMALY", None)


@pytest.fixture(scope="session")
def count_example():
    """count_example(name): record one example run by a property test (session-scoped, so
    hypothesis accepts it inside @given)."""
    def count(name: str) -> None:
        EXAMPLES[name] += 1
    return count


@pytest.fixture(scope="session")
def cli_env() -> dict:
    """The environment the CLI subprocesses run in."""
    return dict(CLI_ENV)


@pytest.fixture(scope="session")
def cli():
    """cli(module, *args, cwd=..., timeout=..., env=...): run `python -m module args...` with the
    repo importable and the NumPy backend; returns the CompletedProcess (text stdout/stderr)."""
    def run(module: str, *args, cwd, timeout: float = 120, env=None) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", module, *map(str, args)], cwd=cwd, check=False,
                              env={**CLI_ENV, **(env or {})}, capture_output=True, text=True,
                              timeout=timeout)
    return run


def pytest_terminal_summary(terminalreporter):
    if not EXAMPLES:
        return
    terminalreporter.write_sep("-", "examples run by tests/robustness (hypothesis examples, kill points)")
    for name, n in sorted(EXAMPLES.items()):
        terminalreporter.write_line(f"{n:>7}  {name}")
    terminalreporter.write_line(f"{sum(EXAMPLES.values()):>7}  in total")
