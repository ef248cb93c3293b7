"""The toy translator end to end through `python -m transformer`: train, resume, translate,
eval, a Tatoeba-format file, and one-line errors for bad input."""
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from tinygrad_lite.checkpoint import load

pytestmark = pytest.mark.cli  # whole programs and processes: the same on either path (.ci/run)

ROOT = Path(__file__).resolve().parents[1]
TATOEBA = ROOT / "tests" / "fixtures" / "tatoeba_small.tsv"
TINY = ["--d-model", "32", "--heads", "2", "--layers", "1", "--d-ff", "64", "--max-tokens", "600",
        "--no-progress"]
ENV = {**os.environ, "TINYGRAD_LITE_BACKEND": "numpy", "PYTHONPATH": str(ROOT)}


def cli(*args, timeout=300, input=None):
    return subprocess.run([sys.executable, "-m", "transformer", *map(str, args)], cwd=ROOT, env=ENV,
                          capture_output=True, text=True, timeout=timeout, input=input)


def params(out_dir) -> dict:
    arrays, _ = load(os.path.join(out_dir, "checkpoint.safetensors"))
    return {k: v for k, v in arrays.items() if k.startswith(("model.", "optim."))}


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    out = tmp_path_factory.mktemp("translator")
    run = cli("train", "--out", out, "--max-steps", "6", *TINY)
    assert run.returncode == 0, run.stderr
    return out / "checkpoint.safetensors"


def test_training_writes_checkpoint_metrics_and_curve(checkpoint):
    out = checkpoint.parent
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert records[-1]["step"] == 6 and {"train_loss", "dev_loss", "dev_bleu", "lr"} <= set(records[-1])
    assert (out / "loss.png").stat().st_size > 1000
    report = json.loads((out / "report.json").read_text())
    assert {"test", "novel"} <= set(report) and 0 <= report["test"]["exact_match"] <= 1


def test_resume_gives_exactly_the_uninterrupted_parameters(tmp_path):
    straight, split = tmp_path / "straight", tmp_path / "split"
    assert cli("train", "--out", straight, "--max-steps", "8", "--seed", "3", *TINY).returncode == 0
    assert cli("train", "--out", split, "--max-steps", "5", "--seed", "3", *TINY).returncode == 0
    resumed = cli("train", "--out", split, "--max-steps", "8", "--resume", "--no-progress")
    assert resumed.returncode == 0, resumed.stderr
    a, b = params(straight), params(split)
    assert a.keys() == b.keys() and len(a) > 10
    for key in a:
        np.testing.assert_array_equal(a[key], b[key], err_msg=key)


def test_same_seed_same_loss_curve_and_other_seed_differs(tmp_path):
    curves = []
    for name, seed in (("a", 1), ("b", 1), ("c", 2)):
        assert cli("train", "--out", tmp_path / name, "--max-steps", "4", "--seed", seed, *TINY).returncode == 0
        curves.append([json.loads(line)["train_loss"] for line in (tmp_path / name / "metrics.jsonl").open()])
    assert curves[0] == curves[1]
    assert curves[0] != curves[2]


def test_resume_refuses_a_different_model_shape(tmp_path):
    assert cli("train", "--out", tmp_path, "--max-steps", "2", *TINY).returncode == 0
    run = cli("train", "--out", tmp_path, "--resume", "--d-model", "64", "--max-steps", "4")
    assert run.returncode != 0
    assert "d_model: checkpoint 32, now 64" in run.stderr and "Traceback" not in run.stderr


def test_ctrl_c_saves_a_checkpoint_that_resumes(tmp_path):
    proc = subprocess.Popen([sys.executable, "-m", "transformer", "train", "--out", str(tmp_path),
                             "--epochs", "1", "--save-every", "2", *TINY], cwd=ROOT, env=ENV,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    ckpt = tmp_path / "checkpoint.safetensors"
    deadline = time.time() + 120
    while not ckpt.exists() and proc.poll() is None and time.time() < deadline:
        time.sleep(0.1)
    assert proc.poll() is None, "training ended before it could be interrupted"
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert "checkpoint saved" in out and "--resume" in out and "Traceback" not in err
    step = load(ckpt)[1]["train"]["step"]
    assert step > 0
    resumed = cli("train", "--out", tmp_path, "--resume", "--max-steps", step + 2, "--no-progress")
    assert resumed.returncode == 0, resumed.stderr
    assert load(ckpt)[1]["train"]["step"] == step + 2


def test_translate_and_eval_on_the_builtin_splits(checkpoint, tmp_path):
    run = cli("translate", "--checkpoint", checkpoint, "这是一个苹果")
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip()  # a tiny model translates badly, but it translates
    stdin = cli("translate", "--checkpoint", checkpoint, input="这是一个苹果\n我喜欢猫\n")
    assert stdin.returncode == 0 and len(stdin.stdout.strip().splitlines()) == 2
    beam = cli("translate", "--checkpoint", checkpoint, "--beam", "3", "我喜欢猫")
    sample = cli("translate", "--checkpoint", checkpoint, "--sample", "--temperature", "0.5", "--seed", "1", "我喜欢猫")
    assert beam.returncode == 0 and sample.returncode == 0
    ev = cli("eval", "--checkpoint", checkpoint, "--out", tmp_path / "hyp")
    assert ev.returncode == 0, ev.stderr
    assert "BLEU" in ev.stdout and "chrF" in ev.stdout and "compositional" in ev.stdout
    assert len((tmp_path / "hyp.test.txt").read_text().splitlines()) == 800


def test_attention_pictures(checkpoint, tmp_path):
    run = cli("translate", "--checkpoint", checkpoint, "这是一个苹果", "--show-attention", tmp_path / "attn.png")
    assert run.returncode == 0, run.stderr
    assert [p.name for p in tmp_path.iterdir()] == ["attn.png"]  # all three kinds in the one figure


def test_tatoeba_file_end_to_end(tmp_path):
    out = tmp_path / "tatoeba"
    run = cli("train", "--data", TATOEBA, "--out", out, "--epochs", "3", *TINY)
    assert run.returncode == 0, run.stderr
    translated = cli("translate", "--checkpoint", out / "checkpoint.safetensors", "我赢了！")
    assert translated.returncode == 0 and translated.stdout.strip()
    ev = cli("eval", "--checkpoint", out / "checkpoint.safetensors", "--data", TATOEBA, "--out", tmp_path / "h.txt")
    assert ev.returncode == 0, ev.stderr
    assert "exact match" in ev.stdout
    assert len((tmp_path / "h.txt").read_text().splitlines()) == 60
    ev = cli("eval", "--checkpoint", out / "checkpoint.safetensors", "--data", TATOEBA, "--beam", "1")
    assert ev.returncode == 0, ev.stderr  # without --out: next to the checkpoint, named after the data file
    named = out / f"hypotheses.{Path(TATOEBA).stem}.txt"
    assert str(named) in ev.stdout and len(named.read_text().splitlines()) == 60


@pytest.mark.parametrize("args, message", [
    (["translate", ""], "the sentence is empty"),
    (["translate", "--beam", "0", "我"], "--beam must be >= 1"),
    (["translate", "--temperature", "-1", "--sample", "我"], "--temperature must be > 0"),
    (["translate", "--checkpoint", "/nonexistent/ckpt.safetensors", "我"], "does not exist"),
    (["eval", "--checkpoint", "/nonexistent/ckpt.safetensors"], "does not exist"),
    (["train", "--data", "/nonexistent.tsv"], "does not exist"),
    (["train", "--d-model", "-3"], "must be > 0"),
    (["train", "--d-model", "30", "--heads", "4"], "divisible"),
    (["train", "--bogus"], "unrecognized arguments"),
])
def test_bad_input_is_one_line_without_traceback(args, message, checkpoint, tmp_path):
    args = [a if a != "CKPT" else checkpoint for a in args]
    if args[0] == "translate" and "--checkpoint" not in args:
        args = [args[0], "--checkpoint", checkpoint, *args[1:]]
    run = cli(*args)
    assert run.returncode != 0
    assert message in run.stderr
    assert "Traceback" not in run.stderr
    assert len([line for line in run.stderr.splitlines() if line.startswith("error")]) == 1


def test_corrupt_checkpoint_and_data_without_valid_lines(tmp_path, checkpoint):
    bad = tmp_path / "bad.safetensors"
    bad.write_bytes(checkpoint.read_bytes()[:500])
    run = cli("translate", "--checkpoint", bad, "我")
    assert run.returncode != 0 and "Traceback" not in run.stderr and bad.name in run.stderr
    junk = tmp_path / "junk.tsv"
    junk.write_text("no tabs here\nnor here\n")
    run = cli("train", "--data", junk, "--out", tmp_path / "o", *TINY)
    assert run.returncode != 0 and "Traceback" not in run.stderr and "junk.tsv" in run.stderr


def test_unseen_characters_and_long_sentences_still_translate(checkpoint):
    run = cli("translate", "--checkpoint", checkpoint, "我喜欢龘")
    assert run.returncode == 0 and run.stdout.strip()
    assert "龘" in run.stderr and "<unk>" in run.stderr
    long_run = cli("translate", "--checkpoint", checkpoint, "我喜欢苹果" * 8)
    assert long_run.returncode == 0 and "longer than any training sentence" in long_run.stderr
