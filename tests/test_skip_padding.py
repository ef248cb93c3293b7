"""Padding, outside the compiler's rule (tests/test_compile_rule_skip_padding.py): the row ops unpad and
repad (nn.fused), the benchmark's count of the products a padded batch needs, and the widened batches
(transformer/train_data.py) whose added <pad> columns a compiled step skips."""
import sys
from pathlib import Path

import numpy as np
import pytest

import tinygrad_lite as tl
from tinygrad_lite import Tensor, fast
from tinygrad_lite.gradcheck import gradcheck
from tinygrad_lite.nn import fused as fused_ops
from transformer import Transformer
from transformer.train import teacher_forcing_loss

ROOT = Path(__file__).resolve().parent.parent
PAD = 0


def padded_batch(rng, rows, width, vocab, lengths):
    ids = rng.integers(1, vocab, size=(rows, width))
    ids[np.arange(width)[None, :] >= np.asarray(lengths)[:, None]] = PAD
    return ids


# ---------------------------------------------------------------- fused_ops.unpad, fused_ops.repad
def test_unpad_takes_the_real_rows_in_order_and_repad_puts_them_back():
    x = np.arange(2 * 3 * 4, dtype=np.float64).reshape(2, 3, 4)
    real = np.array([[True, False, True], [False, True, True]])
    rows = fused_ops.unpad(Tensor(x), real)
    np.testing.assert_array_equal(rows.data, x[real])
    back = fused_ops.repad(rows, real)
    np.testing.assert_array_equal(back.data, np.where(real[..., None], x, 0))


def test_unpad_and_repad_gradients_match_finite_differences():
    rng = np.random.default_rng(0)
    real = np.array([[True, True, False], [True, False, False], [False, False, False]])
    x = Tensor(rng.standard_normal((3, 3, 2)), requires_grad=True)
    assert gradcheck(lambda t: fused_ops.unpad(t, real), x)
    rows = Tensor(rng.standard_normal((3, 2)), requires_grad=True)
    assert gradcheck(lambda t: fused_ops.repad(t, real), rows)


def test_unpad_and_repad_reject_a_mask_that_does_not_fit():
    x = Tensor(np.zeros((2, 3, 4)))
    with pytest.raises(ValueError, match=r"unpad: real must be a bool mask of shape \(2, 3\).*\(3, 2\)"):
        fused_ops.unpad(x, np.ones((3, 2), bool))
    with pytest.raises(ValueError, match="unpad: real must be a bool mask.*int64"):
        fused_ops.unpad(x, np.ones((2, 3), np.int64))
    with pytest.raises(ValueError, match=r"repad: x must have one row per True entry of real \(5\).*\(4, 4\)"):
        fused_ops.repad(Tensor(np.zeros((4, 4))), np.array([[True, True, True], [True, True, False]]))


# ---------------------------------------------------------------- the model
def model_and_batch(seed=0, **kwargs):
    tl.manual_seed(seed)
    model = Transformer(23, 29, d_model=16, h=2, N=2, d_ff=24, dropout=0.0, dtype=np.float64, **kwargs)
    rng = np.random.default_rng(seed)
    src = padded_batch(rng, 4, 7, 23, [7, 5, 2, 0])  # a source row of padding only: its queries see no key
    tgt = padded_batch(rng, 4, 6, 29, [6, 1, 4, 3])
    return model, src, tgt


# ---------------------------------------------------------------- the benchmark's FLOP count
def test_the_flop_counter_counts_the_real_rows_of_the_position_wise_products():
    sys.path.insert(0, str(ROOT / "bench"))
    import train_throughput as bench
    cfg = bench.CONFIGS["small"]
    full = cfg.batch * cfg.tokens
    padded, needed = bench.step_products(cfg), bench.step_products(cfg, full // 2, full // 4)
    linear = [(p, q) for p, q in zip(padded, needed) if p.batch == 1]
    blocks = [(p, q) for p, q in zip(padded, needed) if p.batch > 1]
    assert linear and blocks
    assert all(p == q for p, q in blocks)  # attention runs on the padded layout either way
    assert sum(q.flops for _, q in linear) < 0.5 * sum(p.flops for p, _ in linear)
    assert bench.step_flops(cfg) == sum(p.flops for p in padded)
    batches = bench.random_batches(cfg, 3)
    rows_s, rows_t = bench.real_rows(batches)
    assert rows_s == round(np.mean([(b.src != PAD).sum() for b in batches])) < full


# ---------------------------------------------------------------- widened batches (transformer/train_data.py)
def test_a_widened_batch_keeps_its_tokens_and_its_loss():
    from transformer.data import Batch
    from transformer.train_data import widened
    model, src, tgt = model_and_batch(seed=4)
    wide = widened(Batch(src, tgt), multiple=4)
    assert wide.src.shape == (4, 8) and wide.tgt.shape == (4, 9)  # tgt[:, :-1] has a multiple of 4 columns
    np.testing.assert_array_equal(wide.src[:, :7], src)
    np.testing.assert_array_equal(wide.tgt[:, :6], tgt)
    assert not wide.src[:, 7:].any() and not wide.tgt[:, 6:].any()
    assert widened(wide, multiple=4).src.shape == (4, 8)

    def loss(batch):
        return teacher_forcing_loss(model, batch.src, batch.tgt[:, :-1], batch.tgt[:, 1:], 0.1).data
    np.testing.assert_allclose(loss(wide), loss(Batch(src, tgt)), rtol=1e-12)


def test_an_epochs_batches_are_widened_only_where_a_compiled_step_skips_padding():
    from transformer.train_config import TrainConfig
    from transformer.train_data import WIDTH, build_dataset, epoch_batches
    cfg = TrainConfig()
    data = build_dataset(cfg)
    with fast.tricks_on("skip_padding"):
        wide = epoch_batches(data, cfg, 0)
    with fast.tricks_off("skip_padding"):
        plain = epoch_batches(data, cfg, 0)
    with fast.tricks_on("skip_padding"):
        eager = epoch_batches(data, TrainConfig(compile=False), 0)  # no rule skips the added columns there
    assert all(b.src.shape[1] % WIDTH == 0 and (b.tgt.shape[1] - 1) % WIDTH == 0 for b in wide)
    assert any(b.src.shape[1] % WIDTH for b in plain)
    assert [(b.src.shape, b.tgt.shape) for b in eager] == [(b.src.shape, b.tgt.shape) for b in plain]
    for w, p in zip(wide, plain):
        np.testing.assert_array_equal(w.src[:, :p.src.shape[1]], p.src)
