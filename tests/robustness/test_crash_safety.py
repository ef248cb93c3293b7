"""kill -9 in the middle of writing a checkpoint loses nothing: the last complete checkpoint
loads, `--resume` continues from it, and the run ends bit-for-bit where an uninterrupted run
of the same seed and number of steps ends (every model.* and optim.* tensor)."""
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from tinygrad_lite.checkpoint import load
from transformer.translator import Translator

pytestmark = pytest.mark.cli  # whole programs and processes: the same on either path (.ci/run)

TINY = ["--d-model", "32", "--heads", "2", "--layers", "1", "--d-ff", "64", "--max-tokens", "600",
        "--no-progress", "--seed", "5", "--save-every", "1"]
STEPS = 12  # long enough that the kill lands while training runs, even if polls miss saves
CHECKPOINT = "checkpoint.safetensors"


def trained_tensors(out: Path) -> dict:
    arrays, _ = load(out / CHECKPOINT)
    return {k: v for k, v in arrays.items() if k.startswith(("model.", "optim."))}


def temp_files(out: Path) -> list:
    """The atomic writer's hidden `.checkpoint.safetensors.*.tmp` files."""
    return [n for n in os.listdir(out) if n.startswith(f".{CHECKPOINT}.") and n.endswith(".tmp")]


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory, cli):
    out = tmp_path_factory.mktemp("uninterrupted")
    run = cli("transformer", "train", "--out", out, "--max-steps", STEPS, *TINY, cwd=out, timeout=300)
    assert run.returncode == 0, run.stderr
    return trained_tensors(out)


def kill_during_a_save(out: Path, save_number: int, delay: float, env: dict) -> tuple[int, bool]:
    """Start training, SIGKILL it `delay` seconds after the temp file of its `save_number`-th
    checkpoint write appears; returns (saves seen, whether that write was cut short)."""
    child = subprocess.Popen([sys.executable, "-m", "transformer", "train", "--out", str(out),
                              "--max-steps", str(STEPS), *TINY], cwd=out, env=env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    seen = set()
    try:
        while child.poll() is None and len(seen) < save_number:
            seen.update(temp_files(out))
            time.sleep(0.0002)
        deadline = time.perf_counter() + delay
        while time.perf_counter() < deadline:
            pass
    finally:
        child.send_signal(signal.SIGKILL)
        _, stderr = child.communicate(timeout=60)
    assert child.returncode == -signal.SIGKILL, f"training ended before the kill: {stderr.decode()}"
    return len(seen), bool(temp_files(out))


@pytest.mark.parametrize("kill_seed", range(5))
def test_sigkill_mid_save_then_resume_equals_the_uninterrupted_run(kill_seed, uninterrupted, tmp_path, cli,
                                                                  cli_env, count_example):
    rng = np.random.default_rng(kill_seed)
    save_number = int(rng.integers(2, 6))
    delay = float(rng.choice([0.0, rng.uniform(0, 0.002)]))
    saves_seen, cut_short = kill_during_a_save(tmp_path, save_number, delay, cli_env)
    count_example("crash safety: kills that cut a checkpoint write short" if cut_short else
                  "crash safety: kills just after a checkpoint write")

    _, meta = load(tmp_path / CHECKPOINT)  # the last complete checkpoint
    step = meta["train"]["step"]
    # polling sees most saves but can miss a fast one, so it only bounds the step from below
    assert saves_seen - 1 <= step < STEPS
    Translator.load(tmp_path / CHECKPOINT)

    resumed = cli("transformer", "train", "--out", tmp_path, "--resume", "--max-steps", STEPS, "--no-progress",
                  cwd=tmp_path, timeout=300)
    assert resumed.returncode == 0, resumed.stderr
    assert f"resuming from step {step} " in resumed.stdout
    final = trained_tensors(tmp_path)
    assert final.keys() == uninterrupted.keys() and len(final) > 10
    for name in final:
        np.testing.assert_array_equal(final[name], uninterrupted[name], err_msg=name)
