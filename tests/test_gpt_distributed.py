"""`mpiexec -n 2 python -m transformer gpt train` trains the GPT data parallel, as the translator's
train does: every rank draws the global batch's windows and takes its own share, one all-reduce
averages the gradients, and the learning rates are x sqrt(K). Over 5 steps, with either optimizer,
the weights equal those of one process on the same global batch (batch size x K) at the same
learning rates, to 1e-5 relative (of each weight's norm: a Muon or Adam step scales the round-off of
small gradients up to full steps, so single tiny entries differ more). A two-rank run resumed ends
bit for bit where it ends uninterrupted, dropout included."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tinygrad_lite.checkpoint import load

pytestmark = pytest.mark.cli

ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "TINYGRAD_LITE_BACKEND": "numpy", "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1",
       "NUMBA_NUM_THREADS": "1"}
LR, MIN_LR, MUON_LR = 3e-3, 3e-4, 0.02
FLAGS = ["--n-layer", "1", "--n-head", "2", "--n-embd", "32", "--block-size", "16", "--eval-iters", "1",
         "--eval-interval", "100", "--warmup-iters", "2", "--max-iters", "5", "--lr-decay-iters", "5",
         "--minutes", "0", "--seed", "1", "--no-progress"]


@pytest.fixture(scope="module")
def mpiexec():
    pytest.importorskip("mpi4py", reason="mpi4py is not installed (pip install -e '.[distributed]')")
    search = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    exe = shutil.which("mpiexec", path=search)
    if exe is None:
        pytest.skip("no mpiexec found (pip install mpich)")
    return exe


@pytest.fixture(scope="module")
def text_file(tmp_path_factory) -> Path:
    rng = np.random.default_rng(0)
    words = ["the", "cat", "sat", "on", "a", "mat", "and", "dog", "ran", "far", "away", "home"]
    path = tmp_path_factory.mktemp("text") / "text.txt"
    path.write_text(" ".join(rng.choice(words, 3000)) + "\n", encoding="utf-8")
    return path


def gpt_train(out, text_file, *flags, launcher=(), iters=5):
    run = subprocess.run([*launcher, sys.executable, "-m", "transformer", "gpt", "train", "--out", str(out),
                          "--data", str(text_file), *FLAGS, *flags], cwd=ROOT, env=ENV, capture_output=True,
                         text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    arrays, meta = load(Path(out) / "checkpoint.safetensors")
    assert meta["metadata"]["iter"] == iters
    return {k: v for k, v in arrays.items() if k.startswith("model/")}, run.stdout


def rates(scale: float) -> list:
    return ["--learning-rate", repr(LR * scale), "--min-lr", repr(MIN_LR * scale), "--muon-lr", repr(MUON_LR * scale)]


@pytest.mark.parametrize("optimizer", ["muon", "adamw"])
def test_two_ranks_equal_one_process_on_the_global_batch(mpiexec, text_file, tmp_path, optimizer):
    two, stdout = gpt_train(tmp_path / "k2", text_file, "--optimizer", optimizer, "--batch-size", "2", *rates(1.0),
                            launcher=(mpiexec, "-n", "2"))
    assert "data parallel: 2 ranks" in stdout and stdout.count("training a GPT") == 1  # rank 0 prints
    one, _ = gpt_train(tmp_path / "k1", text_file, "--optimizer", optimizer, "--batch-size", "4",
                       *rates(2 ** 0.5))
    assert one.keys() == two.keys() and len(one) > 5
    for key in one:  # float32 sums in another order, each weight to 1e-5 of its norm
        assert np.linalg.norm(two[key] - one[key]) <= 1e-5 * np.linalg.norm(one[key]), key
    # the comparison can fail: one process at the unscaled learning rates ends elsewhere
    unscaled, _ = gpt_train(tmp_path / "unscaled", text_file, "--optimizer", optimizer, "--batch-size", "4",
                            *rates(1.0))
    assert max(np.abs(two[k] - unscaled[k]).max() for k in one) > 1e-4


def test_two_ranks_resumed_end_bit_for_bit_where_the_uninterrupted_run_ends(mpiexec, text_file, tmp_path):
    """With dropout each rank draws its own stream; the checkpoint keeps every rank's, so 3 iterations
    and 2 more with --resume end where 5 in one go end, weights and both optimizers' moments."""
    flags = ["--dropout", "0.1", "--batch-size", "2", "--eval-interval", "2", *rates(1.0)]
    launcher = (mpiexec, "-n", "2")
    gpt_train(tmp_path / "whole", text_file, *flags, launcher=launcher)
    gpt_train(tmp_path / "part", text_file, *flags, "--max-iters", "3", launcher=launcher, iters=3)
    gpt_train(tmp_path / "part", text_file, *flags, "--resume", launcher=launcher)
    (whole, _), (part, meta) = (load(tmp_path / name / "checkpoint.safetensors") for name in ("whole", "part"))
    assert len(meta["metadata"]["rank_rngs"]) == 2 and sum(k.startswith("optimizer/") for k in whole) > 5
    assert whole.keys() == part.keys()
    for key in whole:
        np.testing.assert_array_equal(whole[key], part[key], err_msg=key)
