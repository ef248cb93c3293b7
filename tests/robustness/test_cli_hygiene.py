"""Every command of `python -m transformer` and `python -m viz`, given missing files, paths of
the wrong kind, wrong types, negative sizes and unknown flags, exits non-zero with exactly one
line on stderr and no traceback; --debug (before or after the command) shows the traceback.

The many bad-input cases run `main(argv)` in-process (fast); a few run the real processes."""
import warnings
from pathlib import Path

import pytest

import transformer.__main__ as transformer_cli
import transformer.train
import viz.__main__ as viz_cli


class TrainingStarted(BaseException):
    """Raised if bad input got as far as training (a BaseException, so no `except Exception` hides it)."""


@pytest.fixture
def paths(tmp_path):
    """A directory, a file, a garbage 'checkpoint' and a path under a missing directory."""
    folder = tmp_path / "a_directory"
    folder.mkdir()
    a_file = tmp_path / "a_file.txt"
    a_file.write_text("not a checkpoint\n")
    return {"DIR": folder, "FILE": a_file, "MISSING": tmp_path / "missing.tsv",
            "UNDER_MISSING_DIR": tmp_path / "no_such_dir" / "x.safetensors",
            "UNDER_FILE": a_file / "x.svg", "OUT": tmp_path / "out"}


def fill(args, paths):
    return [str(paths[a]) if a in paths else a for a in args]


def run_in_process(main, argv, capsys, monkeypatch):
    monkeypatch.setattr("tinygrad_lite.threads.set_num_threads", lambda n: None)
    monkeypatch.setattr(transformer.train.Trainer, "run", lambda self: (_ for _ in ()).throw(TrainingStarted()))
    with warnings.catch_warnings():
        try:
            code = main(argv)
        except SystemExit as exit_:
            code = exit_.code
    return code, capsys.readouterr()


def assert_one_clean_line(code, captured, needle):
    err = captured.err
    assert code not in (0, None), f"exit code {code}; stderr: {err!r}"
    assert "Traceback" not in err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, f"expected one line on stderr, got {len(lines)}: {err!r}"
    assert needle in lines[0], lines[0]


TRANSFORMER_CASES = [
    # train: files
    (["train", "--data", "MISSING"], "does not exist"),
    (["train", "--data", "DIR"], "is a directory"),
    (["train", "--data", "UNDER_MISSING_DIR"], "does not exist"),
    (["train", "--dev", "DIR"], "is a directory"),
    (["train", "--test", "MISSING"], "does not exist"),
    (["train", "--out", "FILE"], "is a file; expected a directory"),
    (["train", "--out", "OUT", "--resume"], "no checkpoint"),
    # train: types and sizes
    (["train", "--d-model", "abc"], "--d-model: expected a whole number, got 'abc'"),
    (["train", "--epochs", "1.5"], "--epochs: expected a whole number"),
    (["train", "--lr", "abc"], "--lr: expected a number"),
    (["train", "--lr", "nan"], "--lr: must be a finite number"),
    (["train", "--lr", "-1"], "--lr: must be > 0"),
    (["train", "--minutes", "-1"], "--minutes: must be a finite number >= 0"),  # 0: no limit
    (["train", "--layers", "-1"], "--layers: must be > 0, got -1"),
    (["train", "--heads", "0"], "--heads: must be > 0"),
    (["train", "--d-ff", "-5"], "--d-ff: must be > 0"),
    (["train", "--max-tokens", "0"], "--max-tokens: must be > 0, got 0"),
    (["train", "--warmup", "0"], "--warmup: must be > 0"),
    (["train", "--save-every", "-1"], "--save-every: must be >= 0"),
    (["train", "--seed", "-3"], "--seed: must be >= 0"),
    (["train", "--dropout", "1.5"], "--dropout must be in [0, 1)"),
    (["train", "--dropout", "-0.1"], "--dropout: must be a finite number >= 0"),
    (["train", "--label-smoothing", "2"], "--label-smoothing must be in [0, 1]"),
    (["train", "--d-model", "30", "--heads", "4"], "divisible"),
    (["train", "--bogus"], "unrecognized arguments: --bogus"),
    (["train", "--max-steps"], "expected one argument"),
    # translate
    (["translate", "--checkpoint", "MISSING", "我"], "does not exist"),
    (["translate", "--checkpoint", "DIR", "我"], "is a directory"),
    (["translate", "--checkpoint", "UNDER_MISSING_DIR", "我"], "does not exist"),
    (["translate", "--checkpoint", "FILE", "我"], "not a valid safetensors checkpoint"),
    (["translate", "--beam", "1.5", "我"], "--beam: invalid int value: '1.5'"),
    (["translate", "--beam", "-1", "--checkpoint", "FILE", "我"], "--beam must be >= 1"),
    (["translate", "--temperature", "abc", "我"], "--temperature: expected a number"),
    (["translate", "--temperature", "inf", "我"], "--temperature: must be a finite number"),
    (["translate", "--seed", "-1", "我"], "--seed: must be >= 0"),
    (["translate", "--bogus", "我"], "unrecognized arguments: --bogus"),
    # eval
    (["eval", "--checkpoint", "MISSING"], "does not exist"),
    (["eval", "--checkpoint", "DIR"], "is a directory"),
    (["eval", "--checkpoint", "FILE", "--data", "DIR"], "is a directory"),
    (["eval", "--checkpoint", "FILE", "--data", "MISSING"], "does not exist"),
    (["eval", "--checkpoint", "FILE", "--data", "FILE", "--out", "DIR"], "is a directory"),
    (["eval", "--checkpoint", "FILE"], "not a valid safetensors checkpoint"),
    (["eval", "--bogus"], "unrecognized arguments: --bogus"),
    # explain (the walkthrough's flags)
    (["explain", "--bogus"], "unrecognized arguments: --bogus"),
    (["explain", "--", "--bogus"], "unrecognized arguments: --bogus"),
    (["explain", "--section"], "expected one argument"),
    (["explain", "--section", "nosuch"], "unknown section 'nosuch'"),
    (["explain", "--checkpoint", "MISSING"], "does not exist"),
    (["explain", "--checkpoint", "DIR"], "is a directory"),
    (["explain", "--figures", "FILE"], "is a file; expected a directory"),
    # no or unknown command
    ([], "required: command"),
    (["bogus"], "invalid choice: 'bogus'"),
]


@pytest.mark.parametrize("args, needle", TRANSFORMER_CASES, ids=[" ".join(a) or "<none>" for a, _ in TRANSFORMER_CASES])
def test_transformer_cli_bad_input_is_one_line(args, needle, paths, capsys, monkeypatch):
    code, captured = run_in_process(transformer_cli.main, fill(args, paths), capsys, monkeypatch)
    assert_one_clean_line(code, captured, needle)


VIZ_CASES = [
    (["xor", "--out", "DIR"], "is a directory"),
    (["xor", "--out", "UNDER_FILE"], "is a file, not a directory"),
    (["xor"], "required: --out"),
    (["xor", "--out", "x.txt"], "unknown format 'txt'"),
    (["xor", "--out", "x.svg", "--hidden", "abc"], "--hidden: expected a positive int, got 'abc'"),
    (["xor", "--out", "x.svg", "--hidden", "-1"], "--hidden: expected a positive int, got -1"),
    (["xor", "--out", "x.svg", "--points", "7"], "--points: invalid choice"),
    (["xor", "--out", "x.svg", "--max-nodes", "0"], "--max-nodes: expected a positive int"),
    (["xor", "--out", "x.svg", "--bogus"], "unrecognized arguments: --bogus"),
    (["mlp", "--out", "DIR"], "is a directory"),
    (["mlp", "--out", "x.svg", "--sizes", "2,x,1"], "--sizes: expected comma-separated layer widths"),
    (["mlp", "--out", "x.svg", "--sizes", "2,-1,1"], "--sizes: expected positive widths"),
    (["mlp", "--out", "x.svg", "--depth", "-1"], "--depth: expected a module depth >= 0"),
    (["mlp", "--out", "x.svg", "--act", "swish"], "--act: invalid choice"),
    (["transformer", "--out", "UNDER_FILE"], "is a file, not a directory"),
    (["transformer", "--out", "x.svg", "--layers", "-1"], "--layers: expected a positive int, got -1"),
    (["transformer", "--out", "x.svg", "--d-model", "abc"], "--d-model: expected a positive int, got 'abc'"),
    (["transformer", "--out", "x.svg", "--heads", "0"], "--heads: expected a positive int, got 0"),
    (["transformer", "--out", "x.svg", "--batch", "0"], "--batch: expected a positive int"),
    (["transformer", "--out", "x.svg", "--vocab", "2"], "--vocab must be at least 3"),
    (["transformer", "--out", "x.svg", "--d-model", "30", "--heads", "4"], "divisible"),
    (["transformer", "--out", "x.svg", "--expand", "no.such.module"], "not a module path"),
    (["attention", "--checkpoint", "MISSING", "--out", "a.png", "我"], "does not exist"),
    (["attention", "--checkpoint", "DIR", "--out", "a.png", "我"], "is a directory"),
    (["attention", "--checkpoint", "UNDER_MISSING_DIR", "--out", "a.png", "我"], "does not exist"),
    (["attention", "--checkpoint", "FILE", "--out", "a.png", "我"], "not a valid safetensors checkpoint"),
    (["attention", "--checkpoint", "FILE", "--out", "a.dot", "我"], "unknown format 'dot'"),
    (["attention", "--checkpoint", "FILE", "--out", "a.png", "--kind", "all-of-them", "我"], "--kind: invalid choice"),
    (["attention", "--checkpoint", "FILE", "--out", "a.png"], "required: sentence"),
    ([], "required: command"),
    (["bogus"], "invalid choice: 'bogus'"),
]


@pytest.mark.parametrize("args, needle", VIZ_CASES, ids=[" ".join(a) or "<none>" for a, _ in VIZ_CASES])
def test_viz_cli_bad_input_is_one_line(args, needle, paths, capsys, monkeypatch):
    monkeypatch.chdir(paths["OUT"].parent)
    code, captured = run_in_process(viz_cli.main, fill(args, paths), capsys, monkeypatch)
    assert_one_clean_line(code, captured, needle)


# ---------------------------------------------------------------- the real processes
@pytest.mark.parametrize("module, args, needle", [
    ("transformer", ["train", "--layers", "-1"], "must be > 0"),
    ("transformer", ["translate", "--checkpoint", "DIR", "我"], "is a directory"),
    ("transformer", ["explain", "--figures", "FILE"], "is a file"),
    ("viz", ["attention", "--checkpoint", "UNDER_MISSING_DIR", "--out", "a.png", "我"], "does not exist"),
])
def test_the_processes_exit_2_with_one_line(module, args, needle, paths, cli, tmp_path):
    run = cli(module, *fill(args, paths), cwd=tmp_path)
    assert run.returncode == 2
    assert "Traceback" not in run.stderr
    assert len(run.stderr.strip().splitlines()) == 1 and needle in run.stderr


@pytest.mark.parametrize("module, args, error", [
    ("transformer", ["--debug", "translate", "--checkpoint", "MISSING", "我"], "CLIError"),
    ("transformer", ["translate", "--checkpoint", "MISSING", "我", "--debug"], "CLIError"),
    ("transformer", ["--debug", "explain", "--checkpoint", "DIR"], "CLIError"),
    ("transformer", ["explain", "--figures", "FILE", "--debug"], "CLIError"),
    ("viz", ["--debug", "attention", "--checkpoint", "MISSING", "--out", "a.png", "我"], "FileNotFoundError"),
    ("viz", ["xor", "--out", "DIR", "--debug"], "Error"),
])
def test_debug_before_or_after_the_command_shows_the_traceback(module, args, error, paths, cli, tmp_path):
    run = cli(module, *fill(args, paths), cwd=tmp_path)
    assert run.returncode != 0
    assert "Traceback (most recent call last)" in run.stderr and error in run.stderr


def test_training_that_diverges_is_one_line_naming_the_step_and_the_fix(cli, tmp_path):
    out = tmp_path / "diverged"
    run = cli("transformer", "train", "--out", out, "--d-model", "32", "--heads", "2", "--layers", "1",
              "--d-ff", "64", "--max-tokens", "600", "--no-progress", "--lr", "1e30", "--warmup", "1",
              "--max-steps", "200", cwd=tmp_path, timeout=300)
    assert run.returncode == 2
    assert "Traceback" not in run.stderr
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1, run.stderr
    assert "the loss became nan at step" in lines[0] and "try a lower --lr (now 1e+30)" in lines[0]

    anomaly = cli("transformer", "train", "--out", out, "--d-model", "32", "--heads", "2", "--layers", "1",
                  "--d-ff", "64", "--max-tokens", "600", "--no-progress", "--lr", "1e30", "--warmup", "1",
                  "--max-steps", "200", cwd=tmp_path, timeout=300, env={"TINYGRAD_LITE_DETECT_ANOMALY": "1"})
    assert anomaly.returncode == 2
    lines = anomaly.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: anomaly: the output of op '"), anomaly.stderr
    assert "module '" in lines[0] and "transformer" + "/" in lines[0].replace("\\", "/")
    assert not Path(out, "checkpoint.safetensors").exists()
