"""A learner's first hour, round 3 (issue 47), its smaller items: a busy port names --port, a failed
`train --data` leaves no empty --out behind, `.gitignore` ignores the README's venv, `viz watch
--help` says its whole description, and the CLIs' errors name no internal function."""
import errno
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tinygrad_lite import checkpoint
from tinygrad_lite.checks import message_for_user
from transformer import __main__ as transformer_cli
from viz import __main__ as viz_cli
from viz.lab import LabServer
from viz.watch.server import WatchServer

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def busy_port():
    holder = socket.socket()
    holder.bind(("127.0.0.1", 0))
    holder.listen()
    yield holder.getsockname()[1]
    holder.close()


@pytest.mark.parametrize("make", [lambda port: LabServer(lambda text, mask: {}, "127.0.0.1", port),
                                  lambda port: WatchServer(ROOT, "127.0.0.1", port)], ids=["lab", "watch"])
def test_a_busy_port_says_so_and_names_the_flag(busy_port, make):
    with pytest.raises(OSError) as caught:
        make(busy_port)
    assert caught.value.errno == errno.EADDRINUSE
    text = str(caught.value)
    assert f"port {busy_port}" in text and "already in use" in text and "--port" in text
    assert "Errno" not in text


def test_viz_watch_on_a_busy_port_is_one_line_naming_the_flag(busy_port, tmp_path):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "events.jsonl").write_text("")
    run = subprocess.run([sys.executable, "-m", "viz", "watch", str(run_dir), "--port", str(busy_port)],
                         capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert run.returncode == 2
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and "already in use" in lines[0] and "--port" in lines[0]


def test_watch_help_gives_its_whole_description(capsys):
    with pytest.raises(SystemExit):
        viz_cli.main(["watch", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "(python -m transformer train --explore writes RUN_DIR/events.jsonl), during the run or after it." in text


@pytest.mark.parametrize("content, needle", [("", "is empty"), ("no tab on this line\n", "columns")],
                         ids=["empty", "malformed"])
def test_a_data_file_that_fails_leaves_no_out_folder(tmp_path, capsys, monkeypatch, content, needle):
    data = tmp_path / "pairs.tsv"
    data.write_text(content, encoding="utf-8")
    out = tmp_path / "runs" / "mine"
    monkeypatch.chdir(tmp_path)
    code = transformer_cli.main(["train", "--data", str(data), "--out", str(out), "--no-progress"])
    assert code == 2 and needle in capsys.readouterr().err
    assert not out.exists() and not out.parent.exists()


def test_a_data_file_that_fails_keeps_an_existing_out_folder(tmp_path, capsys, monkeypatch):
    data = tmp_path / "pairs.tsv"
    data.write_text("", encoding="utf-8")
    out = tmp_path / "mine"
    out.mkdir()
    monkeypatch.chdir(tmp_path)
    assert transformer_cli.main(["train", "--data", str(data), "--out", str(out), "--no-progress"]) == 2
    assert out.is_dir()


def test_gitignore_ignores_the_readmes_venv():
    ignored = (ROOT / ".gitignore").read_text().split()
    assert "venv/" in ignored
    assert "python3 -m venv venv" in (ROOT / "README.md").read_text()


@pytest.mark.parametrize("text, expected", [
    ("checkpoint.load: 'x' is not a valid safetensors checkpoint", "'x' is not a valid safetensors checkpoint"),
    ("load_checkpoint: 'x' is not a GPT checkpoint", "'x' is not a GPT checkpoint"),
    ("CharTokenizer.encode: 2 character(s) not in the vocabulary", "2 character(s) not in the vocabulary"),
    ("lab: --port must be 0..65535, got -1", "lab: --port must be 0..65535, got -1"),
    ("--dropout must be in [0, 1), got 1.0", "--dropout must be in [0, 1), got 1.0"),
    ("'a b' does not exist", "'a b' does not exist"),
    ("a\n  b", "a b"),
])
def test_the_cli_line_drops_a_leading_code_name(text, expected):
    assert message_for_user(ValueError(text)) == expected
    assert message_for_user(ValueError("")) == "ValueError"


def test_a_bad_checkpoint_is_reported_without_the_function_name(tmp_path, capsys, monkeypatch):
    bad = tmp_path / "bad.safetensors"
    bad.write_bytes(b"not a checkpoint at all")
    with pytest.raises(checkpoint.CheckpointError, match="^checkpoint.load: "):
        checkpoint.load(str(bad))  # the library keeps the op's name
    monkeypatch.chdir(tmp_path)
    assert transformer_cli.main(["translate", "--checkpoint", str(bad), "我"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "not a valid safetensors checkpoint" in err
    assert "checkpoint.load" not in err and "load_checkpoint" not in err
    assert viz_cli.main(["attention", "--checkpoint", str(bad), "--out", str(tmp_path / "a.png"), "我"]) == 2
    err = capsys.readouterr().err.strip()
    assert "not a valid safetensors checkpoint" in err and "checkpoint.load" not in err
