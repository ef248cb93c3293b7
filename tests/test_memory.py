"""tinygrad_lite.memory.keep_freed_memory: with glibc's thresholds fixed, arrays freed at the end of one
round of work are reused by the next instead of coming back as page faults; the environment variable
opts out; the Trainer and the CLI set it where work starts, and importing the package does not."""
import os
import subprocess
import sys
import textwrap

import pytest

import tinygrad_lite as tl
from tinygrad_lite import memory
from tinygrad_lite.checks import switched_off

GLIBC = memory.has_glibc()
PAGES = 40 * (1 << 20) // 4096  # the pages of one round below

# Rounds of a step-like pattern: 40 arrays of 1 MiB written, then all freed. By default glibc hands
# the 40 MiB free at its heap's top back to the OS after each round (its trim threshold is then
# 2 MiB) and the next round faults every page in again; with the thresholds fixed it reuses them.
ROUNDS = """
import resource, numpy as np
def rounds(n):
    for _ in range(n):
        arrays = [np.ones(1 << 18, np.float32) for _ in range(40)]
        del arrays
rounds(2)
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
rounds(5)
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


def faults_per_round(setup: str, env=None) -> float:
    code = textwrap.dedent(setup) + ROUNDS
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**os.environ, **(env or {})})
    return int(out.stdout.split()[-1]) / 5


@pytest.mark.skipif(not GLIBC, reason="glibc's malloc only")
def test_freed_memory_is_reused_instead_of_faulted_in_again():
    default = faults_per_round("")
    kept = faults_per_round("import tinygrad_lite as tl\nassert tl.keep_freed_memory()\n")
    assert default > PAGES / 2, default   # the measurement sees the faults it is meant to remove
    assert kept < PAGES / 20, (kept, default)


@pytest.mark.skipif(not GLIBC, reason="glibc's malloc only")
def test_the_environment_variable_opts_out_and_import_changes_nothing():
    opted_out = faults_per_round("import tinygrad_lite as tl\nassert not tl.keep_freed_memory()\n",
                                 {memory.ENV_VAR: "0"})
    imported = faults_per_round("import tinygrad_lite, transformer\n")
    assert opted_out > PAGES / 2 and imported > PAGES / 2, (opted_out, imported)


def test_it_is_idempotent_and_reports_what_it_did(monkeypatch):
    first = tl.keep_freed_memory()
    assert first == (GLIBC and not switched_off(memory.ENV_VAR))
    assert tl.keep_freed_memory() == first
    monkeypatch.setattr(memory, "_done", False)
    monkeypatch.setenv(memory.ENV_VAR, "off")
    assert tl.keep_freed_memory() is False


def test_the_trainer_and_the_cli_keep_freed_memory(monkeypatch, tmp_path):
    import transformer.__main__ as cli
    import transformer.train as train
    calls = []
    monkeypatch.setattr(train, "keep_freed_memory", lambda: calls.append("trainer") or True)
    train.Trainer(train.TrainConfig(out=str(tmp_path), max_steps=1))
    assert calls == ["trainer"]
    monkeypatch.setattr(memory, "keep_freed_memory", lambda: calls.append("cli") or True)
    monkeypatch.setattr(cli, "cmd_translate", lambda args: 0)
    assert cli.main(["translate", "--checkpoint", str(tmp_path / "none"), "你好"]) == 0
    assert calls == ["trainer", "cli"]
