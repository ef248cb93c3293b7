"""transformer.gpt.training and `python -m transformer gpt train|eval`: nanoGPT's schedule and split,
the whole-split evaluation, bit-exact resume, the time budget, a text learned, and the CLI's flags,
refusals and one-line errors. Toy sizes: each test takes seconds."""
import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tinygrad_lite import checkpoint, optim
from transformer.gpt import GPT
from transformer.gpt.__main__ import build_parser, main, nanogpt_spelling
from transformer.gpt.tokenizers import CharTokenizer
from transformer.gpt.training import (
    GPTTrainConfig,
    GPTTrainer,
    TextData,
    estimate_loss,
    evaluate_split,
    get_lr,
    load_checkpoint,
    resume_config,
)
from transformer.train import TrainingDiverged

ROOT = Path(__file__).resolve().parents[1]
TOY = dict(n_layer=1, n_head=2, n_embd=16, block_size=16, batch_size=4, eval_iters=2, minutes=None)
TOY_FLAGS = ["--n-layer", "1", "--n-head", "2", "--n-embd", "16", "--block-size", "16", "--batch-size", "4",
             "--eval-iters", "2", "--warmup-iters", "2", "--lr-decay-iters", "20", "--minutes", "0", "--no-progress"]
SENTENCE = "the quick brown fox jumps over the lazy dog. "


@pytest.fixture
def text_file(tmp_path):
    path = tmp_path / "text.txt"
    path.write_text(SENTENCE * 40, encoding="utf-8")
    return path


def toy_config(tmp_path, data, **overrides) -> GPTTrainConfig:
    settings = dict(TOY, data=str(data), out=str(tmp_path / "run"), max_iters=10, eval_interval=5,
                    warmup_iters=2, lr_decay_iters=20)
    return GPTTrainConfig(**{**settings, **overrides})


def nanogpt_get_lr(it, learning_rate, warmup_iters, lr_decay_iters, min_lr):
    """nanoGPT's train.py, as written there."""
    if it < warmup_iters:
        return learning_rate * (it + 1) / (warmup_iters + 1)
    if it > lr_decay_iters:
        return min_lr
    decay_ratio = (it - warmup_iters) / (lr_decay_iters - warmup_iters)
    assert 0 <= decay_ratio <= 1
    coeff = 0.5 * (1.0 + math.cos(math.pi * decay_ratio))
    return min_lr + coeff * (learning_rate - min_lr)


def test_get_lr_is_nanogpts_warmup_then_cosine():
    cfg = GPTTrainConfig(learning_rate=1e-3, min_lr=1e-4, warmup_iters=100, lr_decay_iters=2000)
    for it in (0, 1, 50, 99, 100, 101, 1000, 1999, 2000, 2001, 10_000):
        assert get_lr(it, cfg) == nanogpt_get_lr(it, 1e-3, 100, 2000, 1e-4)
    assert get_lr(100, cfg) == 1e-3 and get_lr(2000, cfg) == 1e-4
    assert get_lr(1050, cfg) == pytest.approx((1e-3 + 1e-4) / 2)
    flat = GPTTrainConfig(learning_rate=1e-3, decay_lr=False)
    assert {get_lr(it, flat) for it in (0, 500, 5000)} == {1e-3}



def test_without_lr_decay_iters_the_cosine_ends_with_the_run():
    untimed = GPTTrainConfig(learning_rate=1e-3, min_lr=1e-4, warmup_iters=10, max_iters=110)
    assert get_lr(60, untimed) == pytest.approx((1e-3 + 1e-4) / 2) and get_lr(110, untimed) == 1e-4
    timed = GPTTrainConfig(learning_rate=1e-3, min_lr=1e-4, warmup_iters=10, minutes=10)
    assert get_lr(5, timed, progress=0.5) == get_lr(5, untimed)                  # warmup by iterations
    assert get_lr(500, timed, progress=0.0) == pytest.approx(1e-3)
    assert get_lr(500, timed, progress=0.5) == pytest.approx((1e-3 + 1e-4) / 2)
    assert get_lr(500, timed, progress=1.0) == get_lr(500, timed, progress=1.7) == pytest.approx(1e-4)
    fixed = GPTTrainConfig(learning_rate=1e-3, min_lr=1e-4, warmup_iters=10, lr_decay_iters=20, minutes=10)
    assert get_lr(30, fixed, progress=0.1) == 1e-4                              # nanoGPT's, when given

def test_split_is_the_first_90_percent_of_the_characters_and_the_vocabulary_all_of_them(tmp_path):
    path = tmp_path / "t.txt"
    path.write_text("ab" * 450 + "Z" * 100, encoding="utf-8")  # "Z" only in the last 10%
    data = TextData(GPTTrainConfig(data=str(path), block_size=8))
    assert data.tokenizer.decode(data.ids["train"]) == "ab" * 450
    assert data.tokenizer.decode(data.ids["val"]) == "Z" * 100
    assert data.tokenizer.vocab_size == 3


def test_evaluate_split_predicts_every_token_once_and_is_deterministic(tmp_path, text_file):
    trainer = GPTTrainer(toy_config(tmp_path, text_file, dropout=0.1))
    model, ids = trainer.model, trainer.data.ids["val"][:123]
    seen, original = [], model.loss

    def recording(x, y):
        assert np.array_equal(x[:, 1:], y[:, :-1])  # each row one window, targets shifted by one
        assert not model.training
        seen.append(np.asarray(y).ravel())
        return original(x, y)

    model.loss = recording
    loss = evaluate_split(model, ids, block_size=16, batch_size=3)
    del model.loss
    assert np.array_equal(np.concatenate(seen), ids[1:])  # 122 targets: 7 full windows and one of 10
    assert model.training  # the mode it was in
    assert evaluate_split(model, ids, 16, 3) == loss
    windows = [(ids[s:min(s + 16, 122)], ids[s + 1:min(s + 17, 123)]) for s in range(0, 122, 16)]
    model.eval()
    total = sum(model.loss(x[None], y[None]).item() * len(y) for x, y in windows)
    model.train()
    assert loss == pytest.approx(total / 122, rel=1e-5)
    with pytest.raises(ValueError, match="block_size 17 exceeds"):
        evaluate_split(model, ids, 17, 3)


def checkpoint_arrays(out) -> dict:
    arrays, _ = checkpoint.load(os.path.join(out, "checkpoint.safetensors"))
    return arrays


@pytest.mark.parametrize("optimizer", ["muon", "adamw"])
def test_resume_continues_bit_exactly(tmp_path, text_file, optimizer):
    """6 iterations, then 6 more with resume == 12 in one go: weights and the optimizers' moments bit
    for bit (with dropout on, so the engine's random state must come back too)."""
    straight = toy_config(tmp_path / "a", text_file, dropout=0.1, max_iters=12, eval_interval=4, optimizer=optimizer)
    GPTTrainer(straight).run()
    first = toy_config(tmp_path / "b", text_file, dropout=0.1, max_iters=6, eval_interval=4, optimizer=optimizer)
    GPTTrainer(first).run()
    summary = GPTTrainer(resume_config(first.out, {"max_iters": 12})).run()
    assert summary["iters"] == 12
    a, b = checkpoint_arrays(straight.out), checkpoint_arrays(first.out)
    assert a.keys() == b.keys() and sum(k.startswith("optimizer/") for k in a) > 10
    for key in a:
        np.testing.assert_array_equal(a[key], b[key], err_msg=key)
    iters = [int(line.split('"iter": ')[1].split(",")[0]) for line in
             Path(first.out, "metrics.jsonl").read_text().splitlines()]
    assert iters == [0, 4, 6, 8, 12]


def model_weights(out) -> dict:
    return {k[len("model/"):]: v for k, v in checkpoint_arrays(out).items() if k.startswith("model/")}


def test_average_is_the_mean_of_the_last_evaluations_kept_only_if_better(tmp_path, text_file):
    """--average 3 (the paper's 6.1): evaluations at iters 0, 4, 8 and 12; the mean of the weights at
    the last 3 is scored as each evaluation is (estimate_loss), logged, and becomes best.safetensors
    only if its val loss beats every single one's. The snapshots survive a resume: 4 + 4 + 4 iterations
    in three invocations average the same weights as 12 in one."""
    straight = toy_config(tmp_path / "a", text_file, dropout=0.1, max_iters=12, eval_interval=4, average=3)
    summary = GPTTrainer(straight).run()
    records = [json.loads(line) for line in Path(straight.out, "metrics.jsonl").read_text().splitlines()]
    parts = toy_config(tmp_path / "b", text_file, dropout=0.1, max_iters=4, eval_interval=4, average=3)
    GPTTrainer(parts).run()
    weights = [model_weights(parts.out)]
    for iters in (8, 12):
        GPTTrainer(resume_config(parts.out, {"max_iters": iters})).run()
        weights.append(model_weights(parts.out))
    mean = {k: np.mean([w[k] for w in weights], axis=0).astype(np.float32) for k in weights[0]}
    for out in (straight.out, parts.out):
        arrays, meta = checkpoint.load(os.path.join(out, "checkpoint.safetensors"))
        assert len(meta["metadata"]["snapshots"]) == 3
        for i, w in enumerate(weights):
            for name, value in w.items():
                np.testing.assert_array_equal(arrays[f"metadata/snapshots/{i}/{name}"], value, err_msg=name)

    singles, averaged = records[:-1], records[-1]
    assert [r["iter"] for r in singles] == [0, 4, 8, 12] and averaged == {**averaged, "iter": 12, "averaged": 3}
    best, meta = GPT.load(summary["best"])
    model = GPT(best.config)
    model.load_state_dict(mean)
    trainer = GPTTrainer(resume_config(straight.out))
    assert averaged["val_loss"] == pytest.approx(estimate_loss(model, trainer.data.ids, trainer.cfg)["val"], rel=1e-6)
    kept = averaged["val_loss"] < min(r["val_loss"] for r in singles)
    assert (meta.get("averaged") == 3) is kept and (summary["averaged"] == 3) is kept

    trainer.best_val_loss = math.inf  # now any model is better: the mean is kept
    assert trainer.try_average() == 3
    best, meta = GPT.load(summary["best"])
    assert meta["averaged"] == 3 and meta["val_loss"] == pytest.approx(averaged["val_loss"], rel=1e-6)
    for name, value in best.state_dict().items():
        np.testing.assert_allclose(value, mean[name], rtol=1e-6, atol=1e-7, err_msg=name)


def test_resume_refuses_another_model_or_other_data(tmp_path, text_file):
    cfg = toy_config(tmp_path, text_file, max_iters=2)
    GPTTrainer(cfg).run()
    with pytest.raises(ValueError, match="n_layer: checkpoint 1, now 2"):
        resume_config(cfg.out, {"n_layer": 2})
    with pytest.raises(ValueError, match="optimizer: checkpoint 'muon', now 'adamw'"):
        resume_config(cfg.out, {"optimizer": "adamw"})
    text_file.write_text(SENTENCE * 41, encoding="utf-8")
    with pytest.raises(ValueError, match="SHA-256 differs"):
        GPTTrainer(resume_config(cfg.out))


def test_muon_takes_the_blocks_matrices_and_adamw_the_rest_on_one_schedule(tmp_path, text_file):
    """Muon for W^Q, W^K, W^V, W^O, W1, W2 of every block; AdamW for the embeddings (the tied output
    layer too) with decay and the gains without; every parameter in exactly one group; Muon's lr
    keeps its ratio to AdamW's through warmup and decay."""
    trainer = GPTTrainer(toy_config(tmp_path, text_file, n_layer=2, muon_lr=0.05, learning_rate=2e-3))
    muon, adamw = trainer.optimizer.optimizers
    assert isinstance(muon, optim.Muon) and isinstance(adamw, optim.AdamW)
    names = {id(p): n for n, p in trainer.model.named_parameters()}
    in_muon = sorted(names[id(p)].split(".", 2)[2] for g in muon.param_groups for p in g["params"])
    assert in_muon == sorted(["attn.w_q.weight", "attn.w_k.weight", "attn.w_v.weight", "attn.w_o.weight",
                              "mlp.c_fc.weight", "mlp.c_proj.weight"] * 2)
    decayed, not_decayed = ([names[id(p)] for p in g["params"]] for g in adamw.param_groups)
    assert sorted(decayed) == ["position_embedding.weight", "token_embedding.weight"]
    assert all(n.endswith((".ln_1.weight", ".ln_2.weight")) or n == "norm.weight" for n in not_decayed)
    grouped = [id(p) for g in trainer.optimizer.param_groups for p in g["params"]]
    assert sorted(grouped) == sorted(names) and len(set(grouped)) == len(grouped)
    for it in (0, 1, 5, 19):
        trainer.set_lr(get_lr(it, trainer.cfg))
        assert muon.param_groups[0]["lr"] == pytest.approx(25 * adamw.param_groups[0]["lr"], rel=1e-12)
        assert adamw.param_groups[0]["lr"] == get_lr(it, trainer.cfg)


def test_the_time_budget_stops_the_run_and_saves(tmp_path, text_file):
    cfg = toy_config(tmp_path, text_file, max_iters=10**6, minutes=0.02)
    summary = GPTTrainer(cfg).run()
    assert summary["iters"] < 10**6
    _, meta = checkpoint.load(summary["checkpoint"])
    assert meta["metadata"]["iter"] == summary["iters"] == meta["metadata"]["evaluated_at"]
    assert os.path.exists(summary["best"])


def test_a_repeated_sentence_is_learned(tmp_path, text_file):
    """Uniform guessing scores log(vocab) = 3.3; the sentence is predictable from a few characters
    back (only a window's first characters are not), so a model that learns goes far below."""
    cfg = toy_config(tmp_path, text_file, n_embd=32, max_iters=150, eval_interval=150, learning_rate=1e-2,
                     lr_decay_iters=150, warmup_iters=10)
    trainer = GPTTrainer(cfg)
    trainer.run()
    uniform = math.log(trainer.data.tokenizer.vocab_size)
    loss = evaluate_split(trainer.model, trainer.data.ids["val"], 16, 4)
    assert loss < 0.15 * uniform


def test_checkpoints_load_with_their_tokenizer(tmp_path, text_file):
    summary = GPTTrainer(toy_config(tmp_path, text_file, max_iters=3)).run()
    best, meta = load_checkpoint(summary["best"])
    last, last_meta = load_checkpoint(summary["checkpoint"])
    assert isinstance(best, GPT) and best.config == last.config
    assert meta["tokenizer"] == last_meta["tokenizer"] == CharTokenizer.train(SENTENCE).to_dict()
    assert GPT.load(summary["best"])[0].config == best.config  # best.safetensors is a plain GPT checkpoint


def test_ctrl_c_stops_after_the_iteration_and_saves_a_checkpoint_that_resumes(tmp_path, text_file):
    import signal

    from transformer.gpt.training import Interrupted
    from transformer.train import TrainingReport

    class CtrlCAtIter3(TrainingReport):
        def step(self, trainer, loss, tokens_per_s):
            if trainer.iter == 3:
                os.kill(os.getpid(), signal.SIGINT)

    cfg = toy_config(tmp_path, text_file, max_iters=8)
    with pytest.raises(Interrupted, match="interrupted at iter 3: checkpoint saved"):
        GPTTrainer(cfg, CtrlCAtIter3()).run()
    _, meta = checkpoint.load(os.path.join(cfg.out, "checkpoint.safetensors"))
    assert meta["metadata"]["iter"] == 3
    assert GPTTrainer(resume_config(cfg.out)).run()["iters"] == 8


def test_a_nan_loss_stops_the_run_naming_the_op(tmp_path, text_file):
    trainer = GPTTrainer(toy_config(tmp_path, text_file))
    trainer.model.token_embedding.weight.data[:] = np.nan
    with pytest.raises(TrainingDiverged, match="diverged: the loss became nan at iter 0"):
        trainer.run()


# ---------------------------------------------------------------- the command line
def test_help_lists_nanogpts_flags(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["train", "--help"])
    assert exit_.value.code == 0
    text = capsys.readouterr().out
    for flag in ("--n-layer", "--n-head", "--n-embd", "--block-size", "--batch-size", "--max-iters",
                 "--lr-decay-iters", "--dropout", "--learning-rate", "--min-lr", "--warmup-iters",
                 "--weight-decay", "--beta2", "--grad-clip", "--eval-interval", "--eval-iters", "--bias",
                 "--data", "--val", "--out", "--resume", "--overwrite", "--minutes", "--seed", "--tokenizer",
                 "--optimizer", "--muon-lr"):
        assert flag in text
    assert "built-in text" in text


def test_nanogpt_spellings_are_accepted_and_abbreviations_are_not(capsys):
    parser = build_parser()
    args = parser.parse_args(nanogpt_spelling(["train", "--n_layer=3", "--bias=True", "--decay_lr=False",
                                               "--optimizer=adamw"], parser.flags))
    assert (args.n_layer, args.bias, args.decay_lr, args.optimizer) == (3, True, False, "adamw")
    with pytest.raises(SystemExit):
        main(["train", "--n-lay", "3"])
    assert "did you mean --n-layer" in capsys.readouterr().err


def test_python_m_transformer_gpt_forwards_to_the_gpt_cli():
    run = subprocess.run([sys.executable, "-m", "transformer", "gpt", "train", "--help"], cwd=ROOT,
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0 and "--lr-decay-iters" in run.stdout


def test_train_then_eval_prints_the_val_loss_last(tmp_path, text_file, capsys, monkeypatch):
    from transformer import kernel_cache
    monkeypatch.setattr(kernel_cache, "compile_notice", lambda command: f"compiling kernels ({command})")
    out = tmp_path / "run"
    assert main(["train", "--data", str(text_file), "--out", str(out), "--max-iters", "4", *TOY_FLAGS]) == 0
    printed = capsys.readouterr()
    assert "best model:" in printed.out and (out / "loss.png").stat().st_size > 1000
    assert "compiling kernels (gpt train)" in printed.err
    assert main(["eval", "--checkpoint", str(out / "best.safetensors")]) == 0
    last = capsys.readouterr().out.strip().splitlines()[-1]
    match = re.match(r"val loss (\d+\.\d+)  perplexity (\d+\.\d+)  bits per character (\d+\.\d+)$", last)
    assert match, last
    model, meta = load_checkpoint(out / "best.safetensors")
    data = TextData(GPTTrainConfig(**{**meta["train_config"], "resume": False}), CharTokenizer.train(SENTENCE))
    expected = evaluate_split(model, data.ids["val"], 16, 4)
    assert float(match[1]) == pytest.approx(expected, abs=1e-4)
    assert float(match[3]) == pytest.approx(expected / math.log(2), abs=1e-3)  # char: a token a character


def test_eval_bits_per_character_counts_characters_for_bpe(tmp_path, text_file, capsys):
    out = tmp_path / "bpe"
    assert main(["train", "--data", str(text_file), "--out", str(out), "--max-iters", "2", "--tokenizer", "bpe",
                 "--vocab-size", "280", *TOY_FLAGS]) == 0
    capsys.readouterr()
    assert main(["eval", "--checkpoint", str(out / "checkpoint.safetensors"), "--val", str(text_file)]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    characters, tokens = (int(n.replace(",", "")) for n in re.findall(r"([\d,]+) (?:characters|tokens)", lines[-2]))
    loss, bits = (float(x) for x in re.findall(r"val loss (\S+)  perplexity \S+  bits per character (\S+)",
                                                lines[-1])[0])
    assert tokens < characters
    assert bits == pytest.approx(loss / math.log(2) * tokens / characters, abs=1e-3)


def test_a_run_in_out_is_never_overwritten_unasked(tmp_path, text_file, capsys):
    out = tmp_path / "run"
    out.mkdir()
    (out / "metrics.jsonl").write_text("{}\n")
    assert main(["train", "--data", str(text_file), "--out", str(out), *TOY_FLAGS]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "already holds a run" in err and "--overwrite" in err
    assert main(["train", "--data", str(text_file), "--out", str(out), "--max-iters", "1", "--overwrite",
                 *TOY_FLAGS]) == 0
    assert (out / "checkpoint.safetensors").exists()


@pytest.mark.parametrize("problem, message", [
    ("missing", "does not exist"),
    ("empty", "is empty"),
    ("short", "too few for block_size 16"),
])
def test_bad_data_is_one_line_and_exit_2(tmp_path, problem, message, capsys):
    path = tmp_path / "data.txt"
    if problem != "missing":
        path.write_text({"empty": "", "short": "just a few words, far too short"}[problem], encoding="utf-8")
    assert main(["train", "--data", str(path), "--out", str(tmp_path / "run"), *TOY_FLAGS]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1 and message in err
    assert not (tmp_path / "run").exists()


def test_a_nan_loss_is_a_clear_error_and_a_nonzero_exit(tmp_path, text_file, capsys, monkeypatch):
    monkeypatch.setattr(GPT, "init_weights", lambda self: [p.data.fill(np.nan) for p in self.parameters()])
    assert main(["train", "--data", str(text_file), "--out", str(tmp_path / "run"), *TOY_FLAGS]) == 2
    assert "error: gpt train: diverged: the loss became nan" in capsys.readouterr().err
