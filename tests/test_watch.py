"""The live training page without a browser: the events a real run writes with --explore
(transformer.events), its alerts, and the server (viz.watch) with its limits."""
import http.client
import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import tinygrad_lite as tl
import transformer.loop as loop_module
from tinygrad_lite.autograd import recorded
from transformer.events import TrainingEvents, module_groups
from transformer.train import TrainConfig, Trainer, TrainingDiverged, batch_loss, epoch_batches
from transformer.translator import Translator, for_display
from viz.watch import WatchServer
from viz.watch import server as watch_server

ROOT = Path(__file__).resolve().parents[1]
TINY = ["--d-model", "32", "--heads", "2", "--layers", "1", "--d-ff", "64", "--max-tokens", "600",
        "--no-progress"]
ENV = {**os.environ, "PYTHONPATH": str(ROOT),
       "TINYGRAD_LITE_BACKEND": os.environ.get("TINYGRAD_LITE_BACKEND", "numpy")}
TINY_CONFIG = dict(d_model=32, heads=2, layers=1, d_ff=64, max_tokens=600, epochs=None, progress=False)


def cli(module, *args, timeout=300):
    return subprocess.run([sys.executable, "-m", module, *map(str, args)], cwd=ROOT, env=ENV,
                          capture_output=True, text=True, timeout=timeout)


def read_events(run_dir) -> list:
    return [json.loads(line) for line in (Path(run_dir) / "events.jsonl").read_text(encoding="utf-8").splitlines()]


def of_type(events, kind) -> list:
    return [e for e in events if e["type"] == kind]


@pytest.fixture(scope="module")
def explored(tmp_path_factory):
    out = tmp_path_factory.mktemp("explored")
    run = cli("transformer", "train", "--explore", "--out", out, "--max-steps", 30, "--eval-every", 10, *TINY)
    assert run.returncode == 0, run.stderr
    assert re.search(r"live page: http://127\.0\.0\.1:\d+/", run.stdout)
    return out


def test_steps_hold_loss_lr_and_gradient_norms_by_module(explored):
    events = read_events(explored)
    start, steps = events[0], of_type(events, "step")
    assert start["type"] == "start" and events[-1]["type"] == "end"
    assert start["modules"] == ["src_embed", "tgt_embed", "encoder.layers.0", "decoder.layers.0", "generator"]
    assert [s["step"] for s in steps] == list(range(1, 31))
    metrics = [json.loads(line) for line in (explored / "metrics.jsonl").read_text().splitlines()]
    for record in metrics:  # the evaluation's train loss is the mean of the steps' losses since the last one
        window = [s["loss"] for s in steps if record["step"] - 10 < s["step"] <= record["step"]]
        assert record["train_loss"] == pytest.approx(np.mean(window), rel=1e-5)
        assert steps[record["step"] - 1]["lr"] == pytest.approx(record["lr"], rel=1e-5)
    for s in steps:
        assert set(s["norms"]) == set(start["modules"]) and all(v > 0 for v in s["norms"].values())
        assert math.sqrt(sum(v * v for v in s["norms"].values())) == pytest.approx(s["grad_norm"], rel=1e-4)
    evals = of_type(events, "eval")
    assert [(e["step"], e["dev_loss"]) for e in evals] == \
        [(m["step"], pytest.approx(m["dev_loss"], rel=1e-5)) for m in metrics]


def test_probes_are_the_models_translations_and_cross_attention(explored):
    events = read_events(explored)
    probes = of_type(events, "probe")
    assert [p["step"] for p in probes] == [10, 20, 30]
    translator = Translator.load(explored / "checkpoint.safetensors")  # saved at step 30, before the probe
    assert events[0]["probes"] == [zh for zh, _ in translator_dev()[:3]]
    for shown in probes[-1]["probes"]:
        assert shown["en"] == for_display(translator.translate(shown["zh"]))
        weights, target, source = translator.attention_maps(shown["zh"])["cross-attention"]
        assert (shown["target"], shown["source"]) == (list(target), list(source))
        assert np.array(shown["cross"]).shape == (1, 2, len(target), len(source))
        np.testing.assert_allclose(shown["cross"], weights, atol=6e-4)


def translator_dev():
    from transformer.data import builtin_corpus
    return builtin_corpus()["dev"]


def test_exploring_leaves_training_unchanged(explored, tmp_path):
    run = cli("transformer", "train", "--out", tmp_path, "--max-steps", 30, "--eval-every", 10, *TINY)
    assert run.returncode == 0, run.stderr
    assert not (tmp_path / "events.jsonl").exists()
    plain = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    explored_metrics = [json.loads(line) for line in (explored / "metrics.jsonl").read_text().splitlines()]
    assert [(m["train_loss"], m["dev_loss"]) for m in plain] == \
        [(m["train_loss"], m["dev_loss"]) for m in explored_metrics]


def tiny_trainer(tmp_path, **config) -> tuple[Trainer, TrainingEvents]:
    trainer = Trainer(TrainConfig(out=str(tmp_path), **{**TINY_CONFIG, **config}))
    events = TrainingEvents(trainer)
    trainer.report, trainer.on_eval = events, events.on_eval()
    return trainer, events


def test_a_resumed_run_cuts_its_events_back_to_the_checkpoint(tmp_path, monkeypatch):
    """Killed after its step-5 checkpoint, a run has logged steps 6-8 already: --resume cuts them off
    (as it does metrics.jsonl) and logs them again, so each step and evaluation is there once, the
    same as in the uninterrupted run."""
    config = dict(max_steps=8, eval_every=5)
    tiny_trainer(tmp_path / "whole", **config)[0].run()
    save = Trainer.save
    monkeypatch.setattr(Trainer, "save", lambda self, every_rank=True: self.step <= 5 and save(self, every_rank))
    tiny_trainer(tmp_path / "killed", **config)[0].run()  # the checkpoint stays at step 5, as after a kill
    monkeypatch.undo()
    tiny_trainer(tmp_path / "killed", resume=True, **config)[0].run()

    def story(folder):
        return [(e["type"], e["step"], e.get("loss"), e.get("dev_loss")) for e in read_events(folder)
                if e["type"] in ("step", "eval", "probe", "end")]
    resumed = read_events(tmp_path / "killed")
    assert [(e["step"], e["resumed"]) for e in of_type(resumed, "start")] == [(0, False), (5, True)]
    assert [e["step"] for e in of_type(resumed, "step")] == list(range(1, 9))
    assert story(tmp_path / "killed") == story(tmp_path / "whole")


@pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning")  # the NaN the test injects
def test_a_nonfinite_loss_is_flagged_naming_the_op(tmp_path):
    trainer, _ = tiny_trainer(tmp_path, max_steps=3)
    trainer.model.generator.weight.data[0, 0] = np.inf
    batch = epoch_batches(trainer.data, trainer.cfg, 0)[0]
    with pytest.raises(tl.AnomalyError) as anomaly, tl.detect_anomaly():
        batch_loss(trainer.model, batch, 0.0)[0].backward()
    op = re.search(r"op '([^']+)'", str(anomaly.value)).group(1)
    with pytest.raises(TrainingDiverged) as stopped:
        trainer.run()
    events = read_events(tmp_path)
    alerts = of_type(events, "alert")
    assert [a["kind"] for a in alerts] == ["nonfinite"]
    assert alerts[0]["message"] == str(stopped.value) and f"op '{op}'" in alerts[0]["message"]
    assert events[-1]["type"] == "end" and events[-1]["error"] == str(stopped.value)


def test_a_gradient_norm_spike_is_flagged(tmp_path, monkeypatch):
    clip, norms = loop_module.clip_grad_norm_, []

    @recorded  # as the clipping it replaces: a compiled step makes it at each replay
    def clip_with_a_spike(parameters, max_norm):
        parameters = list(parameters)
        if len(norms) == 14:  # step 15's gradients, 1000 times too large
            for p in parameters:
                p.grad *= 1000.0
        norms.append(clip(parameters, max_norm))
        return norms[-1]

    monkeypatch.setattr(loop_module, "clip_grad_norm_", clip_with_a_spike)
    trainer, _ = tiny_trainer(tmp_path, max_steps=20)
    trainer.run()
    events = read_events(tmp_path)
    assert [s["grad_norm"] for s in of_type(events, "step")] == [pytest.approx(n, rel=1e-5) for n in norms]
    alerts = of_type(events, "alert")
    assert [(a["kind"], a["step"]) for a in alerts] == [("spike", 15)]
    assert "spike at step 15" in alerts[0]["message"]


def test_module_groups_are_top_level_modules_and_layers(tmp_path):
    trainer = Trainer(TrainConfig(out=str(tmp_path), **{**TINY_CONFIG, "layers": 2}))
    groups = module_groups(trainer.model)
    assert list(groups) == ["src_embed", "tgt_embed", "encoder.layers.0", "encoder.layers.1",
                            "decoder.layers.0", "decoder.layers.1", "generator"]
    assert sum(len(ps) for ps in groups.values()) == len(list(trainer.model.parameters()))


# ---------------------------------------------------------------- the server
@pytest.fixture
def served(tmp_path):
    lines = [json.dumps({"type": "step", "step": i, "loss": 1.0 / (i + 1)}) for i in range(2500)]
    (tmp_path / "events.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    server = WatchServer(tmp_path)
    server.start()
    yield server, tmp_path
    server.stop()


def get(server, path):
    host, port = server.server_address[:2]
    connection = http.client.HTTPConnection(host, port, timeout=10)
    connection.request("GET", path)
    response = connection.getresponse()
    body = response.read()
    connection.close()
    return response.status, body


def events_page(server, since):
    status, body = get(server, f"/events?since={since}")
    assert status == 200
    return json.loads(body)


def test_events_come_in_pages_from_a_line_on(served):
    server, run_dir = served
    first = events_page(server, 0)
    assert (len(first["lines"]), first["next"], first["total"]) == (watch_server.LIMIT, 2000, 2500)
    rest = events_page(server, first["next"])
    assert [e["step"] for e in rest["lines"]] == list(range(2000, 2500)) and rest["next"] == 2500
    assert events_page(server, 2500)["lines"] == []
    with open(run_dir / "events.jsonl", "a", encoding="utf-8") as f:
        f.write('{"type": "end", "step": 2500}\n{"type": "st')  # the second line is still being written
    assert [e["type"] for e in events_page(server, 2500)["lines"]] == ["end"]
    assert get(server, "/events?since=x")[0] == 400


def test_a_new_run_in_the_directory_is_read_from_its_start(served):
    server, run_dir = served
    assert events_page(server, 0)["total"] == 2500
    (run_dir / "events.jsonl").write_text('{"type": "start", "step": 0}\n', encoding="utf-8")
    page = events_page(server, 0)
    assert page["total"] == 1 and page["lines"] == [{"type": "start", "step": 0}]


def test_a_file_cut_back_and_written_on_between_two_reads_is_read_again(tmp_path):
    """A resumed run cuts events.jsonl back to its checkpoint and writes on: even when the file is
    longer again by the next read, what is read is the new file, not the old offsets."""
    from viz.watch.events_file import EventsFile
    path = tmp_path / "events.jsonl"
    lines = [json.dumps({"type": "step", "step": i}) for i in range(1, 4)]
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    events = EventsFile(path)
    assert events.lines(0, 10) == (lines, 3)
    again = [json.dumps({"type": "start", "step": 1, "resumed": True})] + \
        [json.dumps({"type": "step", "step": i, "loss": 1.0}) for i in (2, 3)]
    with open(path, "r+", encoding="utf-8") as f:
        f.truncate(len(lines[0]) + 1)
        f.seek(0, 2)
        f.write("".join(line + "\n" for line in again))
    assert path.stat().st_size > events.end
    assert events.lines(0, 10) == ([lines[0], *again], 4)


def test_nothing_outside_the_static_files_and_the_events_can_be_read(served, tmp_path_factory, monkeypatch):
    server, run_dir = served
    assert get(server, "/")[0] == 200 and b"<canvas" in get(server, "/")[1]
    assert get(server, "/static/watch.js")[0] == 200
    for path in ("/static/../server.py", "/static/..%2Fserver.py", "/static/%2e%2e/%2e%2e/__init__.py",
                 "/static//etc/passwd", "/static/%2Fetc%2Fpasswd", "/../../setup.cfg", "/events.jsonl",
                 "/static/", "/static/.hidden", "/etc/passwd", "/static/watch.js%00.html"):
        assert get(server, path)[0] == 404, path
    outside = tmp_path_factory.mktemp("outside") / "secret.txt"
    outside.write_text("secret")
    static = tmp_path_factory.mktemp("static")
    (static / "link.js").symlink_to(outside)
    monkeypatch.setattr(watch_server, "STATIC", static)
    assert get(server, "/static/link.js")[0] == 404


def test_the_page_asks_for_nothing_outside(served):
    for path in watch_server.STATIC.iterdir():
        text = path.read_text(encoding="utf-8")
        assert not re.search(r"(https?:)?//[a-z0-9.-]+\.[a-z]{2,}", text, re.I), path.name


def test_served_on_this_machine_only_by_default(tmp_path):
    server = WatchServer(tmp_path)
    try:
        assert server.server_address[0] == "127.0.0.1"
    finally:
        server.server_close()
    from transformer.__main__ import build_parser
    from viz.__main__ import build_parser as viz_parser
    assert build_parser().parse_args(["train", "--explore"]).host == "127.0.0.1"
    assert viz_parser().parse_args(["watch", str(tmp_path)]).host == "127.0.0.1"


@pytest.mark.parametrize("make", [lambda d: d / "missing", lambda d: d])
def test_watch_without_a_run_is_one_line_and_exit_2(tmp_path, make):
    (tmp_path / "metrics.jsonl").write_text("{}\n")
    run = cli("viz", "watch", make(tmp_path), timeout=60)
    assert run.returncode == 2
    assert len(run.stderr.strip().splitlines()) == 1 and "Traceback" not in run.stderr
    assert str(make(tmp_path)) in run.stderr and "events" in run.stderr or "does not exist" in run.stderr
