"""`python -m transformer gpt train` on an iteration schedule (--max-iters, --lr-decay-iters, no
--minutes), killed with SIGKILL after each new checkpoint and continued with --resume, ends bit for
bit where the uninterrupted run of the same command ends: the weights, both optimizers' moments,
the run's metadata but for its clock readings, and the metrics log but for its clock readings. One
process, and two ranks under `mpiexec -n 2` (data parallel) when mpi4py and mpiexec are installed, on the
Numba kernels, as users run it; one process again on their NumPy twins. Also: a resumed timed run says
what is left of its budget."""
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from process_tree import LAUNCH_IDS, LAUNCHES, Launcher, kill_tree

from tinygrad_lite.checkpoint import load

pytestmark = pytest.mark.cli  # whole programs and killed processes: the same on either path (.ci/run)

ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "TINYGRAD_LITE_BACKEND": "numpy", "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1",
       "NUMBA_NUM_THREADS": "1"}  # the budget test's; the kill test's launcher chooses its backend
ITERS = 240
FLAGS = ["--n-layer", "1", "--n-head", "2", "--n-embd", "32", "--block-size", "32", "--batch-size", "8",
         "--dropout", "0.1", "--eval-iters", "2", "--eval-interval", "30", "--warmup-iters", "10",
         "--max-iters", str(ITERS), "--lr-decay-iters", "200", "--minutes", "0", "--seed", "3", "--average", "3",
         "--no-progress"]
CLOCK_READINGS = {"elapsed", "eval_seconds", "tokens_per_s", "budget"}


@pytest.fixture(params=LAUNCHES, ids=LAUNCH_IDS)
def launcher(request) -> Launcher:
    return Launcher(*request.param, ENV)


def command(out, *extra, launcher=(sys.executable,)):
    return [*launcher, "-m", "transformer", "gpt", "train", "--out", str(out), *FLAGS, *extra]


def saved_iter(out: Path) -> int:
    try:
        return int(load(out / "checkpoint.safetensors")[1]["metadata"]["iter"])
    except (OSError, KeyError, ValueError):
        return -1


def kill_after_the_next_checkpoint(cmd, env: dict, out: Path) -> bool:
    """Start `cmd`; SIGKILL it once its checkpoint moves on. False if it finished first."""
    before = saved_iter(out)
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 300
    while proc.poll() is None and time.monotonic() < deadline:
        if saved_iter(out) > before:
            return kill_tree(proc)
        time.sleep(0.02)
    assert proc.wait(timeout=300) == 0, proc.stderr.read().decode()[-3000:]
    return False


def without_clock(meta: dict) -> dict:
    run = dict(meta["metadata"])
    for key in CLOCK_READINGS | {"train_config"}:
        run.pop(key, None)
    return run


def metrics(out: Path) -> list:
    return [{k: v for k, v in json.loads(line).items() if k not in CLOCK_READINGS}
            for line in (out / "metrics.jsonl").read_text().splitlines()]


def test_sigkill_then_resume_equals_the_uninterrupted_run(tmp_path, launcher):
    whole = tmp_path / "whole"
    subprocess.run(command(whole, launcher=launcher.head), cwd=ROOT, env=launcher.env, check=True, capture_output=True,
                   timeout=600)
    killed = tmp_path / "killed"
    kills = 0
    while kill_after_the_next_checkpoint(command(killed, *(["--resume"] if kills else []), launcher=launcher.head),
                                         launcher.env, killed):
        kills += 1
        assert load(killed / "checkpoint.safetensors")  # every checkpoint a kill leaves loads
    assert kills >= 3, "the run must have been killed several times along the way"
    (a, meta_a), (b, meta_b) = load(whole / "checkpoint.safetensors"), load(killed / "checkpoint.safetensors")
    assert a.keys() == b.keys() and sum(k.startswith("optimizer/") for k in a) > 10
    for key in a:
        np.testing.assert_array_equal(a[key], b[key], err_msg=key)
    assert without_clock(meta_a) == without_clock(meta_b) and meta_b["metadata"]["iter"] == ITERS
    assert metrics(whole) == metrics(killed)


def test_a_resumed_timed_run_says_what_is_left_of_its_budget(tmp_path):
    out = tmp_path / "run"
    timed = [f for f in FLAGS[:FLAGS.index("--max-iters")]] + ["--minutes", "5", "--no-progress"]
    head = [sys.executable, "-m", "transformer", "gpt", "train", "--out", str(out), *timed]
    subprocess.run([*head, "--max-iters", "20"], cwd=ROOT, env=ENV, check=True, capture_output=True, timeout=600)
    again = subprocess.run([*head, "--max-iters", "40", "--resume"], cwd=ROOT, env=ENV, capture_output=True,
                           text=True, timeout=600)
    assert again.returncode == 0, again.stderr[-3000:]
    line = next(line for line in again.stdout.splitlines() if line.startswith("budget: "))
    assert line.startswith("budget: 5 min in all: ") and " min spent, " in line and " min left" in line
