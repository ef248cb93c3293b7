"""Two ranks under mpiexec stop together: an error on one rank, a rank that hangs, a killed rank and
Ctrl-C each end every rank within seconds, never a hang, and leave a checkpoint that resumes
(with any number of ranks). Skipped without mpi4py or mpiexec."""
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_distributed import ENV, ROOT, TOY, WORKER, corpus, mpiexec  # noqa: F401  (fixtures)

from tinygrad_lite.checkpoint import load

pytestmark = pytest.mark.cli  # whole programs and processes: the same on either path (.ci/run)


def start(mpiexec, out, *args, env=None):  # noqa: F811
    return subprocess.Popen([mpiexec, "-n", "2", sys.executable, str(WORKER), *map(str, args), "--out", str(out),
                             *TOY], cwd=ROOT, env=env or ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


def wait_for(path: Path, proc, seconds=120):
    deadline = time.time() + seconds
    while not path.exists() and proc.poll() is None and time.time() < deadline:
        time.sleep(0.1)
    assert proc.poll() is None, "training ended before the test could act: " + proc.communicate()[1]
    assert path.exists(), f"{path} did not appear within {seconds} s"


def test_an_error_on_one_rank_stops_every_rank(mpiexec, corpus, tmp_path):  # noqa: F811
    proc = start(mpiexec, tmp_path, "fail-at", 3, *corpus, "--max-steps", 50)
    out, err = proc.communicate(timeout=300)
    assert proc.returncode not in (0, None)
    assert "error: injected failure at step 3" in err
    assert "rank 1 of 2: the error above; stopping all 2 ranks (MPI_Abort)" in err


def test_a_rank_that_hangs_is_caught_by_the_timeout(mpiexec, corpus, tmp_path):  # noqa: F811
    env = {**ENV, "TINYGRAD_LITE_DIST_TIMEOUT": "2"}
    proc = start(mpiexec, tmp_path, "hang-at", 3, *corpus, "--max-steps", 50, env=env)
    wait_for(tmp_path / "rank1.pid", proc)
    out, err = proc.communicate(timeout=300)
    assert proc.returncode not in (0, None)
    assert proc.returncode == 3, (out, err)
    assert "rank 0 of 2: all_reduce_gradients got no answer from the other ranks for 2 s" in err


def test_a_killed_rank_ends_the_others_within_seconds(mpiexec, corpus, tmp_path):  # noqa: F811
    proc = start(mpiexec, tmp_path, "train", *corpus, "--epochs", 1000, "--save-every", 2)
    wait_for(tmp_path / "checkpoint.safetensors", proc)
    os.kill(int((tmp_path / "rank1.pid").read_text()), signal.SIGKILL)
    killed = time.time()
    out, err = proc.communicate(timeout=60)
    assert time.time() - killed < 10
    # Which report comes first is a race: mpiexec naming the rank that was killed, or the surviving rank's
    # MPI library failing the collective it was in (MPICH: "Fatal error in internal_Allreduce_c").
    reported = "Killed" in out + err or "Fatal error in" in err
    assert proc.returncode != 0 and reported, (proc.returncode, err[-2000:])
    assert load(tmp_path / "checkpoint.safetensors")[1]["train"]["step"] > 0  # atomic: never half-written


def test_ctrl_c_stops_both_ranks_after_one_step_and_one_process_resumes(mpiexec, corpus, tmp_path):  # noqa: F811
    proc = start(mpiexec, tmp_path, "train", *corpus, "--epochs", 1000, "--save-every", 2)
    wait_for(tmp_path / "checkpoint.safetensors", proc)
    proc.send_signal(signal.SIGINT)  # mpiexec passes Ctrl-C on to every rank
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert out.count("checkpoint saved") == 1 and "Traceback" not in err  # rank 0 alone reports
    step = load(tmp_path / "checkpoint.safetensors")[1]["train"]["step"]
    resumed = subprocess.run([sys.executable, "-m", "transformer", "train", "--out", str(tmp_path), "--resume",
                              "--max-steps", str(step + 2), "--no-progress"], cwd=ROOT, env=ENV,
                             capture_output=True, text=True, timeout=300)
    assert resumed.returncode == 0, resumed.stderr
    assert load(tmp_path / "checkpoint.safetensors")[1]["train"]["step"] == step + 2


def test_two_ranks_resume_a_one_process_run(mpiexec, corpus, tmp_path):  # noqa: F811
    first = subprocess.run([sys.executable, "-m", "transformer", "train", *corpus, "--out", str(tmp_path), *TOY,
                            "--max-steps", "3"], cwd=ROOT, env=ENV, capture_output=True, text=True, timeout=300)
    assert first.returncode == 0, first.stderr
    resumed = subprocess.run([mpiexec, "-n", "2", sys.executable, "-m", "transformer", "train", "--out",
                              str(tmp_path), "--resume", "--max-steps", "5", "--no-progress"], cwd=ROOT, env=ENV,
                             capture_output=True, text=True, timeout=300)
    assert resumed.returncode == 0, resumed.stderr
    meta = load(tmp_path / "checkpoint.safetensors")[1]
    assert (meta["train"]["step"], meta["train"]["batch_in_epoch"]) == (5, 3 + 2 * 2)  # 3 batches alone, 2 a step
    assert meta["scheduler"]["base_lrs"] == [2 ** 0.5]  # the schedule goes on at the 2 ranks' multiplier
