"""The real-data training recipe: batches by real target tokens, tied embeddings, a corpus too
small for a dev split, and honest labels for a run that stops inside an epoch."""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from transformer.data import make_batches, target_token_batches

ROOT = Path(__file__).resolve().parents[1]
TINY = ["--d-model", "16", "--heads", "2", "--layers", "1", "--d-ff", "32", "--no-progress"]
ENV = {**os.environ, "TINYGRAD_LITE_BACKEND": "numpy", "PYTHONPATH": str(ROOT)}


def cli(*args, cwd=ROOT, timeout=300):
    return subprocess.run(
        [sys.executable, "-m", "transformer", *map(str, args)],
        cwd=cwd,
        env=ENV,
        check=False,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_target_token_batches_cover_every_pair_once_within_the_budget():
    lengths = np.random.default_rng(0).integers(3, 20, size=500)
    for pool in (0, 8):
        batches = target_token_batches(lengths, 60, seed=1, pool=pool)
        together = np.sort(np.concatenate(batches))
        np.testing.assert_array_equal(together, np.arange(500))
        for b in batches:
            assert (lengths[b] - 1).sum() <= 60 or len(b) == 1
        assert (
            np.mean([(lengths[b] - 1).sum() for b in batches]) > 45
        )  # batches are filled, not tiny


def test_target_token_batches_are_random_per_seed_and_pools_cut_padding():
    lengths = np.random.default_rng(0).integers(3, 20, size=2000)
    a, b = target_token_batches(lengths, 100, seed=1), target_token_batches(lengths, 100, seed=2)
    assert [list(x) for x in a] != [list(x) for x in b]
    assert [list(x) for x in a] == [list(x) for x in target_token_batches(lengths, 100, seed=1)]

    def padded(batches):
        return sum(len(x) * lengths[x].max() for x in batches)

    assert padded(target_token_batches(lengths, 100, seed=1, pool=50)) < 0.8 * padded(a)


def test_pools_sorted_by_the_longer_side_cut_source_padding_and_keep_every_pair():
    rng = np.random.default_rng(0)
    tgt = rng.integers(3, 20, size=3000)
    src = np.maximum(1, (1.3 * tgt + rng.normal(0, 4, size=3000)).astype(int))  # correlated, noisy

    def padded(batches, lengths):
        return sum(len(x) * lengths[x].max() for x in batches) / lengths.sum()

    by_target = target_token_batches(tgt, 200, seed=1, pool=20)
    by_both = target_token_batches(tgt, 200, seed=1, pool=20, src_lengths=src)
    np.testing.assert_array_equal(np.sort(np.concatenate(by_both)), np.arange(3000))
    assert all((tgt[b] - 1).sum() <= 200 for b in by_both)
    assert padded(by_both, src) < padded(by_target, src) - 0.2  # the encoder's padding falls
    assert padded(by_both, src) + padded(by_both, tgt) < padded(by_target, src) + padded(by_target, tgt) - 0.1
    with pytest.raises(ValueError, match="target_token_batches: got 2 source and 3000 target lengths"):
        target_token_batches(tgt, 200, pool=20, src_lengths=[1, 2])


def test_make_batches_counts_target_tokens_without_padding():
    src = [[5] * n for n in (2, 9, 3, 4, 8, 2)]
    tgt = [[2] + [6] * n + [3] for n in (1, 7, 2, 3, 6, 1)]
    batches = make_batches(src, tgt, 10, count="target", seed=0)
    assert sum(len(b.tgt) for b in batches) == 6
    for b in batches:
        assert (b.tgt[:, 1:] != 0).sum() <= 10 or len(b.tgt) == 1
    with pytest.raises(ValueError, match="make_batches: count must be"):
        make_batches(src, tgt, 10, count="words")


def tatoeba_file(path, pairs, repeat=1):
    lines = [f"{en}\t{zh}\tCC-BY 2.0 (France) test" for en, zh in pairs] * repeat
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_a_corpus_too_small_for_a_dev_split_trains_without_one_and_says_so(tmp_path):
    data = tatoeba_file(
        tmp_path / "three.txt",
        [("I like cats.", "我喜欢猫。"), ("Hi.", "你好。"), ("Run.", "跑。")],
        repeat=5,
    )
    run = cli("train", "--data", data, "--out", tmp_path / "out", "--max-steps", "3", *TINY)
    assert run.returncode == 0, run.stderr
    assert "list index" not in run.stderr
    assert "training without dev" in run.stdout and "3 distinct Chinese sentence(s)" in run.stdout
    assert "Warning" not in run.stderr and "(no dev split: the latest)" in run.stdout  # loss.png: train loss
    assert (tmp_path / "out" / "loss.png").stat().st_size > 0
    assert (tmp_path / "out" / "best.safetensors").exists()
    translated = cli("translate", "--checkpoint", tmp_path / "out" / "best.safetensors", "我喜欢猫")
    assert translated.returncode == 0, translated.stderr


def test_a_stop_inside_an_epoch_is_labelled_partial(tmp_path):
    run = cli("train", "--out", tmp_path, "--max-steps", "3", "--max-tokens", "600", *TINY)
    assert run.returncode == 0, run.stderr
    assert "step     3 (epoch 1, partial:" in run.stdout and "epoch 0" not in run.stdout
    (record,) = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert record["partial_epoch"] is True and 0 < record["epoch"] < 1 and record["step"] == 3


def test_real_data_recipe_ties_embeddings_and_batches_by_target_tokens(tmp_path):
    pairs = [(f"I have {n} cats.", f"我有{n}只猫。") for n in range(40)] + [
        (f"He has {n} dogs.", f"他有{n}只狗。") for n in range(40)
    ]
    data = tatoeba_file(tmp_path / "pairs.txt", pairs)
    run = cli(
        "train",
        "--data",
        data,
        "--out",
        tmp_path / "out",
        "--max-steps",
        "4",
        "--max-tokens",
        "60",
        *TINY,
    )
    assert run.returncode == 0, run.stderr
    from tinygrad_lite.checkpoint import load

    arrays, meta = load(tmp_path / "out" / "best.safetensors")
    assert meta["config"]["tie_embeddings"] is True
    np.testing.assert_array_equal(
        arrays["model.generator.weight"], arrays["model.tgt_embed.lut.weight"]
    )
    saved = load(tmp_path / "out" / "checkpoint.safetensors")[1]["train"]["train_config"]
    assert saved["batch_by"] == "target" and saved["min_freq"] == 2 and saved["epochs"] is None
    untied = cli(
        "train",
        "--data",
        data,
        "--out",
        tmp_path / "untied",
        "--max-steps",
        "2",
        "--max-tokens",
        "60",
        "--no-tie-embeddings",
        "--batch-by",
        "padded",
        *TINY,
    )
    assert untied.returncode == 0, untied.stderr
    assert load(tmp_path / "untied" / "best.safetensors")[1]["config"]["tie_embeddings"] is False


def test_minutes_is_a_budget_for_the_whole_run_without_an_epoch_cap(tmp_path):
    run = cli("train", "--out", tmp_path, "--minutes", "0.05", "--max-tokens", "600", *TINY)
    assert run.returncode == 0, run.stderr
    from tinygrad_lite.checkpoint import load

    state = load(tmp_path / "checkpoint.safetensors")[1]["train"]
    assert state["train_config"]["epochs"] is None and state["step"] > 0
    assert (tmp_path / "best.safetensors").exists()


def test_the_closing_evaluation_is_kept_in_reserve(tmp_path):
    from transformer.train import TrainConfig, Trainer

    trainer = Trainer(
        TrainConfig(out=str(tmp_path), d_model=16, heads=2, layers=1, d_ff=32, progress=False)
    )
    trainer.budget.minutes = 5.0 / 60  # 5 s left
    assert not trainer.out_of_time()
    trainer.budget.eval_seconds = 10.0  # an evaluation takes longer than what is left: stop now
    assert trainer.out_of_time()
    trainer.cfg.average, trainer.budget.eval_seconds = 5, 3.0  # averaging needs a second evaluation
    assert trainer.out_of_time()


def test_the_reserve_forgets_the_first_evaluations_one_time_costs():
    from transformer.time_budget import TimeBudget

    budget = TimeBudget(10.0)
    budget.note_evaluation(29.0)  # the first: compiling, importing
    assert budget.eval_seconds == 29.0  # all we know yet
    budget.note_evaluation(0.9)
    assert budget.eval_seconds == 0.9
    budget.note_evaluation(2.5)
    budget.note_evaluation(0.7)
    assert budget.eval_seconds == 2.5  # the longest since the first


def test_the_recipes_bucket_pool_goes_with_its_own_batch_size():
    from transformer.train_config import REAL_DATA_RECIPE, real_data_config

    assert real_data_config({}) == REAL_DATA_RECIPE
    assert REAL_DATA_RECIPE["bucket_pool"] > 0
    own_size = real_data_config({"max_tokens": 530, "warmup": 1000})
    assert own_size["bucket_pool"] == 0 and own_size["max_tokens"] == 530 and own_size["warmup"] == 1000
    assert real_data_config({"max_tokens": 530, "bucket_pool": 7})["bucket_pool"] == 7
    assert real_data_config({"bucket_pool": 3})["max_tokens"] == REAL_DATA_RECIPE["max_tokens"]
    assert REAL_DATA_RECIPE["bucket_pool"] == real_data_config({})["bucket_pool"]  # the recipe is not changed


def test_cooldown_lowers_the_lr_linearly_to_zero_over_the_budgets_last_share(tmp_path):
    from transformer.train import TrainConfig, Trainer, epoch_batches

    def lrs(cooldown):
        cfg = TrainConfig(out=str(tmp_path / str(cooldown)), d_model=16, heads=2, layers=1, d_ff=32,
                          progress=False, max_steps=10, warmup=4, cooldown=cooldown)
        trainer = Trainer(cfg)
        batch = epoch_batches(trainer.data, cfg, 0)[0]
        used, noam = [], []
        for _ in range(cfg.max_steps):
            noam.append(trainer.scheduler.get_last_lr()[0])
            trainer.train_step(batch)
            used.append(trainer.lr)
        return np.array(used), np.array(noam)

    plain, noam = lrs(0.0)
    np.testing.assert_allclose(plain, noam, rtol=0)  # off: the Noam schedule itself
    cooled, noam_again = lrs(0.4)
    np.testing.assert_allclose(noam_again, noam, rtol=0)  # the schedule underneath goes on unchanged
    spent = np.arange(10) / 10  # step k (from 0) starts with k of the 10 steps done
    np.testing.assert_allclose(cooled, noam * np.minimum(1.0, (1 - spent) / 0.4), rtol=1e-12)
    assert (cooled[:6] == noam[:6]).all() and cooled[-1] < 0.3 * noam[-1]


def test_the_budget_spent_counts_minutes_less_the_closing_reserve(tmp_path):
    from transformer.train import TrainConfig, Trainer

    trainer = Trainer(TrainConfig(out=str(tmp_path), d_model=16, heads=2, layers=1, d_ff=32, progress=False,
                                  epochs=None))
    assert trainer.budget_spent(30.0) is None  # nothing bounds the run: no cooldown
    trainer.cfg.minutes = trainer.budget.minutes = 2.0
    trainer.cfg.average, trainer.budget.eval_seconds = 0, 10.0
    assert trainer.budget_spent(54.5) == pytest.approx(54.5 / (120 - 11.0))
    trainer.cfg.max_steps, trainer.step = 10, 9
    assert trainer.budget_spent(54.5) == pytest.approx(0.9)  # the larger share wins


def test_cooldown_outside_zero_to_one_is_a_clear_error(tmp_path):
    run = cli("train", "--out", tmp_path, "--cooldown", "1.5", "--max-steps", "1", *TINY)
    assert run.returncode != 0 and "--cooldown must be a share of the budget in [0, 1], got 1.5" in run.stderr
