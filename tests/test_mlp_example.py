"""examples/mlp.py: the digits MLP reaches 97% test accuracy with its defaults, the spirals run
draws its decision boundary, the lr sweep shows the three regimes, and divergence stops cleanly."""
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from example_scripts import load_example

pytest.importorskip("sklearn")
ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "examples" / "mlp.py"


mlp = load_example("mlp")


def run_script(*args, cwd):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    return subprocess.run([sys.executable, str(SCRIPT), *args], cwd=cwd, capture_output=True, text=True,
                          timeout=300, env=env, check=False)


@pytest.mark.parametrize("optimizer", ["adam", "sgd", "momentum"])
def test_digits_with_default_settings_reaches_97_percent(optimizer):
    result = mlp.train_digits(optimizer)
    assert result["acc"] >= 0.97
    n_test = result["confusion"].sum()
    assert n_test == 359  # 20% of 1,797
    assert np.trace(result["confusion"]) == round(result["acc"] * n_test)
    losses = result["epoch_losses"]
    assert losses[-1] < 0.1 * losses[0]
    assert len(result["losses"]) == 30 * int(np.ceil((1797 - 359) / 32))


def test_split_is_fixed_by_the_seed_and_standardised_on_train():
    a, b = mlp.load_digits_split(0), mlp.load_digits_split(0)
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y)
    X_train, X_test, _y_train, y_test = a
    assert X_train.shape == (1438, 64) and X_test.shape == (359, 64) and X_train.dtype == np.float32
    assert np.abs(X_train.mean(axis=0)).max() < 1e-4
    assert not np.array_equal(mlp.load_digits_split(1)[3], y_test)


def test_lr_sweep_shows_too_small_good_and_too_large():
    results = mlp.lr_sweep(epochs=4)
    small, good, large = (results[lr]["epoch_losses"] for lr in mlp.SWEEP_LRS)
    assert good[-1] < small[-1] and good[-1] < 0.2
    assert small[-1] > 0.5 * small[0]  # barely moved downhill
    assert large[-1] > large[0] or results[mlp.SWEEP_LRS[2]]["diverged"]  # overshoots: loss goes up


def test_divergence_raises_naming_the_step():
    with pytest.raises(mlp.TrainingDiverged, match=r"at step \d+ \(epoch 1\).*lower --lr"):
        mlp.train_digits("sgd", lr=1e6, epochs=1)


def test_confusion_matrix_counts_and_formats():
    cm = mlp.confusion_matrix(np.array([0, 1, 1, 2]), np.array([0, 2, 1, 2]), 3)
    assert cm.tolist() == [[1, 0, 0], [0, 1, 1], [0, 0, 1]]
    text = mlp.format_confusion(cm)
    assert text.splitlines()[2].split() == ["1", "0", "1", "1"]


def test_script_spirals_saves_the_decision_boundary(tmp_path):
    out = tmp_path / "figs"
    proc = run_script("--task", "spirals", "--epochs", "60", "--out", str(out), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    for name in ("spirals_boundary.png", "spirals_loss.png"):
        data = (out / name).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 5000
    accuracy = float(proc.stdout.split("training accuracy")[1].split()[0])
    assert accuracy > 0.9


def test_script_stops_on_nan_with_a_one_line_message(tmp_path):
    proc = run_script("--optimizer", "sgd", "--lr", "1e6", "--epochs", "2", "--out", str(tmp_path), cwd=tmp_path)
    assert proc.returncode != 0
    lines = [line for line in proc.stderr.splitlines() if line.startswith("mlp.py:")]
    assert len(lines) == 1
    assert "at step" in lines[0] and "--lr" in lines[0]
    assert "Traceback" not in proc.stderr
