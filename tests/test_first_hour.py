"""A learner's first hour with `python3 -m transformer` (issue 38): no run is overwritten unasked,
no wait is silent, a diverging run stops and says so, every error can be acted on, and the
output says what it means. The CLI runs on tiny models and a few steps, as in test_translator_cli."""
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from transformer import __main__ as cli_main
from transformer import kernel_cache
from transformer.progress import ProgressBar
from transformer.time_budget import TimeBudget
from transformer.train import TrainConfig, Trainer, TrainingReport
from transformer.translator import Translator, for_display, normalize_english

pytestmark = pytest.mark.cli  # whole programs and processes: the same on either path (.ci/run)

ROOT = Path(__file__).resolve().parents[1]
TATOEBA = ROOT / "tests" / "fixtures" / "tatoeba_small.tsv"
TINY = ["--d-model", "32", "--heads", "2", "--layers", "1", "--d-ff", "64", "--max-tokens", "600"]
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}  # the backend of the test run (numba or numpy)


def cli(*args, timeout=300, input=None, **kw):
    return subprocess.run([sys.executable, "-m", "transformer", *map(str, args)], cwd=ROOT, env=ENV,
                          capture_output=True, text=True, timeout=timeout, input=input, **kw)


def error_lines(run) -> list:
    return [line for line in run.stderr.splitlines() if line.startswith("error")]


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("first_run")
    run = cli("train", "--out", out, "--max-steps", "2", "--no-progress", *TINY)
    assert run.returncode == 0, run.stderr
    return out


# ---------------------------------------------------------------- 1. never lose a trained model
def test_a_second_train_into_the_same_out_refuses_and_leaves_the_run_untouched(run_dir):
    before = {p.name: p.read_bytes() for p in run_dir.iterdir() if p.is_file()}
    assert {"best.safetensors", "checkpoint.safetensors", "metrics.jsonl"} <= set(before)
    again = cli("train", "--out", run_dir, "--max-steps", "1", "--no-progress", *TINY)
    assert again.returncode == 2
    assert len(again.stderr.strip().splitlines()) == 1 and len(error_lines(again)) == 1, again.stderr
    assert all(flag in again.stderr for flag in ("--resume", "--out", "--overwrite"))
    after = {p.name: p.read_bytes() for p in run_dir.iterdir() if p.is_file()}
    assert after == before


def test_an_unfinished_run_is_protected_too(tmp_path):
    (tmp_path / "metrics.jsonl").write_text('{"step": 1}\n')
    run = cli("train", "--out", tmp_path, "--max-steps", "1", "--no-progress", *TINY)
    assert run.returncode == 2 and "--resume" in run.stderr
    assert (tmp_path / "metrics.jsonl").read_text() == '{"step": 1}\n'


def test_overwrite_replaces_the_run_and_resume_continues_it(tmp_path):
    first = cli("train", "--out", tmp_path, "--max-steps", "2", "--no-progress", "--seed", "1", *TINY)
    assert first.returncode == 0, first.stderr
    (tmp_path / "report.json").write_text("{}")
    replaced = cli("train", "--out", tmp_path, "--max-steps", "1", "--no-progress", "--overwrite", *TINY)
    assert replaced.returncode == 0, replaced.stderr
    records = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records] == [1]
    assert "test" in json.loads((tmp_path / "report.json").read_text())
    resumed = cli("train", "--out", tmp_path, "--max-steps", "2", "--no-progress", "--resume")
    assert resumed.returncode == 0, resumed.stderr
    both = cli("train", "--out", tmp_path, "--resume", "--overwrite")
    assert both.returncode == 2 and len(error_lines(both)) == 1


@pytest.mark.parametrize("typed, meant", [("--epoch", "--epochs"), ("--max-step", "--max-steps")])
def test_an_abbreviated_flag_is_an_error_naming_the_flag(typed, meant, tmp_path):
    run = cli("train", "--out", tmp_path, typed, "1")
    assert run.returncode == 2 and len(error_lines(run)) == 1
    assert f"did you mean {meant}?" in run.stderr
    assert not any(tmp_path.iterdir())


# ---------------------------------------------------------------- 2. never silent
def test_every_module_the_notice_watches_holds_cached_kernels():
    """A module with no `cache=True` kernel never gets an index, so the notice would show on every run."""
    import importlib.util
    for modules, _ in kernel_cache.COMPILES.values():
        for module in modules:
            assert "cache=True" in Path(importlib.util.find_spec(module).origin).read_text(encoding="utf-8"), module


def test_compile_notice_when_the_numba_cache_is_cold(tmp_path, monkeypatch):
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(kernel_cache, "uses_numba", lambda: True)
    for command in ("train", "translate", "sample"):
        assert kernel_cache.compile_notice(command).startswith("compiling kernels (first run only, about ")
    for module in kernel_cache.COMPILES["translate"][0]:  # an index newer than the source: warm
        import importlib.util
        source = importlib.util.find_spec(module).origin
        folder = Path(kernel_cache.cache_dirs(source)[0])
        folder.mkdir(parents=True, exist_ok=True)
        stem = module.rsplit(".", 1)[-1]
        (folder / f"{stem}.kernel-1.py{sys.version_info.major}{sys.version_info.minor}.nbi").write_bytes(b"")
    # every module holds some kernel (as after `train`), but translate has never run: its types may still compile
    assert kernel_cache.compile_notice("translate") is not None
    kernel_cache.mark_ready("translate")
    assert kernel_cache.compile_notice("translate") is None
    assert kernel_cache.compile_notice("train") is not None  # its other modules are still cold
    monkeypatch.setattr(kernel_cache, "uses_numba", lambda: False)
    assert kernel_cache.compile_notice("train") is None


def test_translate_and_train_print_the_compile_notice(run_dir, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(kernel_cache, "compile_notice", lambda command: f"compiling kernels ({command})")
    monkeypatch.setattr(kernel_cache, "uses_numba", lambda: True)
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path / "numba"))
    code = cli_main.main(["translate", "--checkpoint", str(run_dir / "checkpoint.safetensors"), "--beam", "1",
                          "我喜欢猫"])
    assert code == 0 and "compiling kernels (translate)" in capsys.readouterr().err
    assert kernel_cache.is_ready("translate") and not kernel_cache.is_ready("sample")  # the run marked its own
    code = cli_main.main(["translate", "--checkpoint", str(run_dir / "checkpoint.safetensors"), "--sample",
                          "--seed", "1", "我喜欢猫"])
    assert code == 0 and "compiling kernels (sample)" in capsys.readouterr().err
    code = cli_main.main(["train", "--out", str(tmp_path), "--max-steps", "1", "--no-progress",
                          *TINY])
    assert code == 0 and "compiling kernels (train)" in capsys.readouterr().err


def test_one_bar_covers_the_whole_budget_and_evaluation_lines_never_mix_with_it(tmp_path):
    # stdout and stderr in one pipe, as on a terminal
    merged = subprocess.run([sys.executable, "-m", "transformer", "train", "--out", str(tmp_path),
                             "--max-steps", "3", "--eval-every", "2", *TINY], cwd=ROOT, env=ENV,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=300)
    assert merged.returncode == 0, merged.stdout
    text = merged.stdout
    assert "100%" in text and "step 3" in text  # the bar is the run's, not an epoch's (876 batches)
    evaluations = [line for line in text.split("\n") if "dev loss" in line]
    assert len(evaluations) == 2
    for line in evaluations:  # what a terminal shows of the line: the part after its last \r
        assert line.split("\r")[-1].startswith("step"), repr(line)


def test_the_bar_shows_the_eta_of_a_minutes_budget():
    budget = TimeBudget(2)
    budget.started = time.perf_counter() - 30
    cfg = SimpleNamespace(minutes=2, max_steps=None, epochs=None, average=0)
    trainer = SimpleNamespace(cfg=cfg, step=40, epoch=0, steps_per_epoch=900, budget=budget, lr=1e-3)
    trainer.budget_spent = lambda seconds=None: Trainer.budget_spent(trainer, seconds)
    bar = ProgressBar()
    try:
        bar.step(trainer, 3.2, 1000.0)
        assert 24 <= bar.bar.n <= 27  # 30 s of 120
        minutes, seconds = re.search(r"<(\d+):(\d+)", str(bar.bar)).groups()
        assert 80 <= 60 * int(minutes) + int(seconds) <= 100  # the ETA: the rest of the 2 minutes
    finally:
        bar.close()


# ---------------------------------------------------------------- 3. divergence
def tiny_trainer(tmp_path, **kw):
    return Trainer(TrainConfig(out=str(tmp_path), d_model=16, heads=2, layers=1, d_ff=32, max_tokens=600,
                               progress=False, **kw))


def test_a_nan_loss_stops_training_naming_the_op(tmp_path):
    trainer = tiny_trainer(tmp_path, max_steps=2)
    trainer.model.generator.weight.data[:] = np.nan
    with pytest.raises(FloatingPointError) as info:
        trainer.run()
    message = str(info.value)
    assert "the loss became nan at step 1" in message and "anomaly: " in message
    assert "op '" in message and "--lr" in message and "\n" not in message
    assert not (tmp_path / "best.safetensors").exists()


def test_a_loss_far_above_its_start_warns_with_the_fix(tmp_path):
    lines = []

    class Lines(TrainingReport):
        def write(self, text):
            lines.append(text)
    trainer = tiny_trainer(tmp_path)
    trainer.report = Lines()
    for loss in (5.0, 6.0, 11.0, 12.0):
        trainer.watch_loss(loss)
    assert len(lines) == 1 and "warning" in lines[0] and "--lr" in lines[0] and "--clip" in lines[0]


def test_a_diverged_run_exits_non_zero_and_keeps_no_best_model(tmp_path):
    run = cli("train", "--out", tmp_path, "--lr", "1e7", "--max-steps", "30", "--no-progress", *TINY)
    assert run.returncode != 0
    assert len(error_lines(run)) == 1 and "diverged" in run.stderr and "Traceback" not in run.stderr
    assert not (tmp_path / "best.safetensors").exists()


# ---------------------------------------------------------------- 4. errors to act on
def test_mlp_example_without_scikit_learn_says_how_to_install_it(tmp_path):
    fake = tmp_path / "no_sklearn" / "sklearn"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ModuleNotFoundError(\"No module named 'sklearn'\", name='sklearn')\n")
    env = {**ENV, "PYTHONPATH": os.pathsep.join([str(fake.parent), str(ROOT)])}
    run = subprocess.run([sys.executable, str(ROOT / "examples" / "mlp.py"), "--epochs", "1", "--out",
                          str(tmp_path / "out")], cwd=tmp_path, env=env, capture_output=True, text=True,
                         timeout=300)
    assert run.returncode == 2
    assert run.stderr.strip().count("\n") == 0 and "Traceback" not in run.stderr
    assert 'python3 -m pip install -e ".[examples]"' in run.stderr


def test_a_file_without_tabs_says_what_its_lines_must_look_like(tmp_path):
    notabs = tmp_path / "notabs.tsv"
    notabs.write_text("我喜欢猫 I like cats\n你好 hello\n", encoding="utf-8")
    run = cli("train", "--data", notabs, "--out", tmp_path / "o", "--no-progress", *TINY)
    assert run.returncode == 2 and len(error_lines(run)) == 1
    assert "fmt=" not in run.stderr and "Chinese<TAB>English" in run.stderr


@pytest.mark.parametrize("flag", ["--dev", "--test"])
def test_dev_or_test_without_data_is_an_error(flag, tmp_path):
    held_out = tmp_path / "held_out.tsv"
    held_out.write_text("我喜欢猫。\tI like cats.\n", encoding="utf-8")
    run = cli("train", flag, held_out, "--out", tmp_path / "o", "--max-steps", "1", "--no-progress", *TINY)
    assert run.returncode == 2 and len(error_lines(run)) == 1
    assert f"{flag} needs --data" in run.stderr
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("args", [["explain"], ["translate", "--beam", "1", *["我喜欢猫"] * 3000]])
def test_a_closed_pipe_ends_quietly(args, run_dir):
    if args[0] == "translate":
        args = [args[0], "--checkpoint", str(run_dir / "checkpoint.safetensors"), *args[1:]]
    proc = subprocess.Popen([sys.executable, "-m", "transformer", *args], cwd=ROOT, env=ENV,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    proc.stdout.readline()
    proc.stdout.close()  # `| head -1`
    err = proc.stderr.read()
    assert proc.wait(timeout=300) == 0, err
    assert "Broken pipe" not in err and "BrokenPipeError" not in err and "error" not in err


# ---------------------------------------------------------------- 5. honest output
def test_english_input_says_the_model_translates_chinese(run_dir):
    run = cli("translate", "--checkpoint", run_dir / "checkpoint.safetensors", "I like cats.")
    assert run.returncode == 2 and len(error_lines(run)) == 1
    assert "translates Chinese to English" in run.stderr and run.stdout == ""


def test_two_sentences_in_a_line_come_back_as_two_translations(run_dir):
    ckpt = run_dir / "checkpoint.safetensors"
    both = cli("translate", "--checkpoint", ckpt, "--beam", "1", "我喜欢猫。他有一个苹果。")
    one = cli("translate", "--checkpoint", ckpt, "--beam", "1", "我喜欢猫。")
    two = cli("translate", "--checkpoint", ckpt, "--beam", "1", "他有一个苹果。")
    assert both.returncode == one.returncode == two.returncode == 0
    assert both.stdout.strip() == f"{one.stdout.strip()} {two.stdout.strip()}"


def test_translations_print_detokenized_in_sentence_case_while_eval_keeps_tokens(run_dir, tmp_path):
    assert for_display("i got a lot of books from him .") == "I got a lot of books from him."
    assert for_display("i'm here . are you ? yes , i am !") == "I'm here. Are you? Yes, I am!"
    ckpt = run_dir / "checkpoint.safetensors"
    tokens = Translator.load(ckpt).translate("我喜欢猫。", beam=1)
    run = cli("translate", "--checkpoint", ckpt, "--beam", "1", "我喜欢猫。")
    assert run.returncode == 0 and run.stdout.strip() == for_display(tokens)
    ev = cli("eval", "--checkpoint", ckpt, "--beam", "1", "--out", tmp_path / "hyp")
    assert ev.returncode == 0, ev.stderr
    hypotheses = (tmp_path / "hyp.test.txt").read_text(encoding="utf-8").splitlines()
    assert hypotheses and all(h == normalize_english(h) for h in hypotheses)


def test_the_unk_warning_does_not_call_rare_training_words_unseen(tmp_path):
    out = tmp_path / "tatoeba"
    run = cli("train", "--data", TATOEBA, "--out", out, "--max-steps", "1", "--min-freq", "2", "--no-progress",
              *TINY)
    assert run.returncode == 0, run.stderr
    translator = Translator.load(out / "checkpoint.safetensors")
    counts = {}
    for line in TATOEBA.read_text(encoding="utf-8").splitlines():
        for char in line.split("\t")[1]:
            counts[char] = counts.get(char, 0) + 1
    once = next(c for c, n in counts.items() if n == 1 and c not in translator.src_vocab and c.strip())
    translated = cli("translate", "--checkpoint", out / "checkpoint.safetensors", f"我{once}")
    assert translated.returncode == 0, translated.stderr
    assert once in translated.stderr and "<unk>" in translated.stderr
    assert "never seen in training" not in translated.stderr and "fewer than 2 times" in translated.stderr


@pytest.mark.parametrize("smoothing, dropout, label", [
    (0.0, 0.1, "train loss (with dropout)"),
    (0.1, 0.1, "train loss (with label smoothing and dropout)"),
    (0.0, 0.0, "train loss"),
])
def test_the_loss_curve_label_names_only_what_the_run_used(smoothing, dropout, label, tmp_path):
    metrics = tmp_path / "metrics.jsonl"
    metrics.write_text("\n".join(json.dumps({"step": s, "epoch": 0, "train_loss": 5.0 - s, "dev_loss": 5.5 - s})
                                 for s in (1, 2)) + "\n")
    result = cli_main.draw_loss_curve(tmp_path, True, smoothing, dropout)(metrics)
    assert result.data["labels"]["train_loss"] == label
