"""`python -m transformer gpt train --explore`: the live page's events (transformer.events) for a GPT,
as the translator writes them (tests/test_watch.py): steps with gradient norms by block, the
evaluations' val loss, probes that are the model's own greedy continuations and self-attention, no
change to training, and a resume that logs each step once."""
import json
import math
from pathlib import Path

import numpy as np
import pytest

from transformer.gpt.__main__ import main
from transformer.gpt.sampling import generate
from transformer.gpt.training import load_checkpoint

TOY = ["--n-layer", "1", "--n-head", "2", "--n-embd", "16", "--block-size", "24", "--batch-size", "4",
       "--eval-iters", "2", "--eval-interval", "5", "--warmup-iters", "2", "--lr-decay-iters", "20",
       "--minutes", "0", "--dropout", "0.1", "--no-progress"]
TEXT = "the quick brown fox jumps over the lazy dog.\n" * 40


def train(tmp_path, out, *flags):
    data = tmp_path / "text.txt"
    data.write_text(TEXT, encoding="utf-8")
    assert main(["train", "--data", str(data), "--out", str(out), *TOY, *flags]) == 0


def read(path) -> list:
    return [json.loads(line) for line in Path(path).read_text(encoding="utf-8").splitlines()]


def of_type(events, kind) -> list:
    return [e for e in events if e["type"] == kind]


@pytest.fixture(scope="module")
def explored(tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("gpt-explored")
    train(tmp_path, tmp_path / "run", "--max-iters", "10", "--explore")
    return tmp_path / "run"


def test_steps_hold_loss_lr_and_gradient_norms_by_block(explored):
    events = read(explored / "events.jsonl")
    start, steps = events[0], of_type(events, "step")
    assert start["type"] == "start" and start["task"] == "language model" and events[-1]["type"] == "end"
    assert start["modules"] == ["token_embedding", "position_embedding", "blocks.0", "norm"]
    assert start["config"]["d_model"] == 16 and start["config"]["layers"] == 1
    assert [s["step"] for s in steps] == list(range(1, 11))
    for s in steps:
        assert set(s["norms"]) == set(start["modules"]) and all(v > 0 for v in s["norms"].values())
        assert math.sqrt(sum(v * v for v in s["norms"].values())) == pytest.approx(s["grad_norm"], rel=1e-4)
    metrics = [m for m in read(explored / "metrics.jsonl") if "averaged" not in m]
    assert [(e["step"], e["val_loss"]) for e in of_type(events, "eval")] == \
        [(m["iter"], pytest.approx(m["val_loss"], rel=1e-5)) for m in metrics]


def test_probes_are_the_models_greedy_continuations_and_self_attention(explored):
    events = read(explored / "events.jsonl")
    probes = of_type(events, "probe")
    assert [p["step"] for p in probes] == [0, 5, 10]
    model, meta = load_checkpoint(explored / "checkpoint.safetensors")  # saved at iter 10, right after the probe
    from transformer.gpt.tokenizers import tokenizer_from_dict
    tokenizer = tokenizer_from_dict(meta["tokenizer"])
    assert events[0]["probes"] == [p["input"] for p in probes[-1]["probes"]]
    for shown in probes[-1]["probes"]:
        prompt = tokenizer.encode(shown["input"])
        new = list(generate(model, prompt, 12, temperature=0.0))
        assert shown["output"] == tokenizer.decode(new)
        ids = np.concatenate([prompt, new])
        assert len(shown["source"]) == len(shown["target"]) == len(ids) == 24
        np.testing.assert_allclose(shown["attention"], model.attention_maps(ids), atol=6e-4)


def test_exploring_leaves_training_unchanged(explored, tmp_path):
    train(tmp_path, tmp_path / "plain", "--max-iters", "10")
    assert not (tmp_path / "plain" / "events.jsonl").exists()

    def losses(out):
        return [(m.get("train_loss"), m["val_loss"]) for m in read(out / "metrics.jsonl")]
    assert losses(tmp_path / "plain") == losses(explored)


def test_a_resumed_run_logs_each_step_once(explored, tmp_path):
    """10 iterations, then 5 more with --resume: the events hold steps 1-15 once each, two starts and
    one end, as one run of 15 would."""
    train(tmp_path, tmp_path / "run", "--max-iters", "10", "--explore")
    train(tmp_path, tmp_path / "run", "--max-iters", "15", "--explore", "--resume")
    events = read(tmp_path / "run" / "events.jsonl")
    assert [(e["step"], e["resumed"]) for e in of_type(events, "start")] == [(0, False), (10, True)]
    assert [e["step"] for e in of_type(events, "step")] == list(range(1, 16))
    assert [e["step"] for e in of_type(events, "end")] == [15]
