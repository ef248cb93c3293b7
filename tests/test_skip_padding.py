"""skip_padding for a step run op by op (transformer/plugins/real_rows.py): the position-wise layers on a
batch's real tokens only (transformer/fast/skip_padding.py, fused_ops.unpad / fused_ops.repad) against the
plain padded forward, its oracle. A compiled step's rule: tests/test_compile_rule_skip_padding.py."""
import sys
from pathlib import Path

import numpy as np
import pytest
from trick_switches import both

import tinygrad_lite as tl
from tinygrad_lite import Tensor, fast, kernels
from tinygrad_lite.gradcheck import gradcheck
from tinygrad_lite.nn import fused as fused_ops
from transformer import Transformer, train
from transformer.fast.skip_padding import forward_real_tokens
from transformer.plugins import real_rows
from transformer.positional_encoding import PositionalEncoding

ROOT = Path(__file__).resolve().parent.parent
teacher_forcing_loss = real_rows.on_real_rows(train.teacher_forcing_loss)  # the translator's loss when eager:
# TRICKS.skip_padding's choice of rows (rows_to_skip_padding, made from the batch), then forward_real_tokens
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


def test_the_rows_positional_encoding_is_the_tables_rows_at_their_positions():
    from transformer.fast.skip_padding import _columns, _positions
    pe = PositionalEncoding(8, dropout=0.0, max_len=4, dtype=np.float64)
    real = np.array([[True, False, False, False, False, True, False, False, False, False],
                     [False, False, True, False, False, False, False, False, False, True]])  # past max_len
    out = _positions(pe, Tensor(np.zeros((4, 8))), _columns(real), np.flatnonzero(real))
    np.testing.assert_array_equal(out.data, pe.table(10)[[0, 5, 2, 9]])


# ---------------------------------------------------------------- the model
def model_and_batch(seed=0, **kwargs):
    tl.manual_seed(seed)
    model = Transformer(23, 29, d_model=16, h=2, N=2, d_ff=24, dropout=0.0, dtype=np.float64, **kwargs)
    rng = np.random.default_rng(seed)
    src = padded_batch(rng, 4, 7, 23, [7, 5, 2, 0])  # a source row of padding only: its queries see no key
    tgt = padded_batch(rng, 4, 6, 29, [6, 1, 4, 3])
    return model, src, tgt


@pytest.mark.parametrize("kwargs", [{}, {"norm_first": True, "final_norm": True}, {"tie_embeddings": True}])
def test_forward_real_tokens_equals_forward_at_the_real_tokens(kwargs):
    model, src, tgt = model_and_batch(**kwargs)
    logits, rows = forward_real_tokens(model, src, tgt)
    np.testing.assert_array_equal(rows, np.flatnonzero(tgt != PAD))
    assert logits.shape == (int((tgt != PAD).sum()), 29)
    np.testing.assert_allclose(logits.data, model(src, tgt).data[tgt != PAD], rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("kwargs", [{}, {"norm_first": True, "final_norm": True}])
def test_the_loss_and_every_gradient_match_the_padded_forward(kwargs):
    """teacher_forcing_loss with the trick on (forward_real_tokens) and off (forward): one loss and the
    same gradient for every parameter, float64."""
    model, src, tgt = model_and_batch(seed=1, **kwargs)

    def step():
        model.zero_grad()
        loss = teacher_forcing_loss(model, src, tgt[:, :-1], tgt[:, 1:], label_smoothing=0.1)
        loss.backward()
        return [loss.data] + [p.grad.copy() for p in model.parameters()]
    on, off = both(step, "skip_padding")
    assert len(on) == len(off) > 10
    for a, b in zip(on, off):
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-12)
    assert np.abs(on[1:][0]).max() > 0  # gradients flowed


def test_float32_attention_reads_the_real_rows_in_place_and_matches_the_padded_forward(monkeypatch):
    """In float32 with d_k a multiple of 8 the attention of forward_real_tokens runs the tile kernels on the real
    tokens' rows (kernels.attention.attention_forward_rows, no repad): the loss and every gradient still
    match the padded forward's, to float32 rounding."""
    from tinygrad_lite.kernels import attention_tiles
    calls = []
    original = attention_tiles.forward_rows
    monkeypatch.setattr(attention_tiles, "forward_rows", lambda *a: calls.append(a[3]) or original(*a))
    tl.manual_seed(2)
    model = Transformer(23, 29, d_model=16, h=2, N=2, d_ff=24, dropout=0.0, dtype=np.float32)
    rng = np.random.default_rng(2)
    src = padded_batch(rng, 4, 7, 23, [7, 5, 2, 0])
    tgt = padded_batch(rng, 4, 6, 29, [6, 1, 4, 3])

    def step():
        model.zero_grad()
        loss = teacher_forcing_loss(model, src, tgt[:, :-1], tgt[:, 1:], label_smoothing=0.1)
        loss.backward()
        return [loss.data] + [p.grad.copy() for p in model.parameters()]
    with kernels.use_backend("numba"), fast.tricks_on("attention_kernels"):  # the tiles, whatever the process set
        on, off = both(step, "skip_padding")
    ragged = [starts for starts in calls if len(set(np.diff(starts))) > 1]  # the real rows, not the padded layout
    assert len(ragged) == 6  # 2 encoder self-attentions, 2 decoder self- and 2 cross-attentions
    for a, b in zip(on, off):
        np.testing.assert_allclose(a, b, rtol=2e-4, atol=2e-5)


def test_the_trick_fires_only_when_switched_on(monkeypatch):
    model, src, tgt = model_and_batch()
    calls = []
    original = real_rows.forward_real_tokens
    monkeypatch.setattr(real_rows, "forward_real_tokens", lambda *a: calls.append(1) or original(*a))
    with fast.tricks_on("skip_padding"):
        teacher_forcing_loss(model, src, tgt[:, :-1], tgt[:, 1:], 0.0)
    with fast.tricks_off("skip_padding"):
        teacher_forcing_loss(model, src, tgt[:, :-1], tgt[:, 1:], 0.0)
    assert calls == [1]


def test_a_target_after_a_pad_input_keeps_the_padded_path():
    """A real target at a <pad> input position would drop out of the packed loss: the plain
    forward runs instead, and the loss counts it."""
    model, src, tgt = model_and_batch(seed=2)
    tgt_in, tgt_out = tgt[:, :-1].copy(), tgt[:, 1:].copy()
    tgt_in[1, 2], tgt_out[1, 2] = PAD, 5
    on, off = both(lambda: teacher_forcing_loss(model, src, tgt_in, tgt_out, 0.0).item(), "skip_padding")
    assert on == off
    logits = model(src, tgt_in).data.reshape(-1, 29)
    counted = tgt_out.reshape(-1) != PAD
    logp = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    expected = -logp[counted, tgt_out.reshape(-1)[counted]].mean()
    assert on == pytest.approx(expected, rel=1e-10)


def test_with_dropout_a_packed_step_trains_every_weight_the_plain_one_does():
    """With dropout the draws differ (fewer rows), but the same parameters receive gradient, and
    the <pad> embedding row none."""
    model, src, tgt = model_and_batch(seed=3)
    model.train()
    for module in model.modules():
        if hasattr(module, "p") and type(module).__name__ == "Dropout":
            module.p = 0.3

    def grads():
        model.zero_grad()
        teacher_forcing_loss(model, src, tgt[:, :-1], tgt[:, 1:], 0.1).backward()
        return [p.grad is not None and bool(np.abs(p.grad).max() > 0) for p in model.parameters()]
    on, off = both(grads, "skip_padding")
    assert on == off and all(on)
    model.zero_grad()
    with fast.tricks_on("skip_padding"):
        teacher_forcing_loss(model, src, tgt[:, :-1], tgt[:, 1:], 0.1).backward()
    assert not model.src_embed.lut.weight.grad[PAD].any()


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


def test_every_right_padded_batch_takes_the_rows_and_no_other(monkeypatch):
    """However little <pad> a right-padded batch holds it runs on its real rows (one plan family for a compiled
    step); a batch with a real target after a <pad> input token runs padded, or its loss would lose that target."""
    model, _, _ = model_and_batch()
    rng = np.random.default_rng(4)
    calls = []
    original = real_rows.forward_real_tokens
    monkeypatch.setattr(real_rows, "forward_real_tokens", lambda *a: calls.append(1) or original(*a))
    src = rng.integers(1, 23, size=(5, 10))
    tgt = rng.integers(1, 29, size=(5, 11))
    src[-1, -1] = PAD                      # one <pad> in 105 positions
    left = tgt.copy()
    left[0, 3] = PAD                       # a <pad> input token with a real target after it
    with fast.tricks_on("skip_padding"):
        teacher_forcing_loss(model, src, tgt[:, :-1], tgt[:, 1:], 0.0)
        assert calls == [1]
        teacher_forcing_loss(model, src, left[:, :-1], left[:, 1:], 0.0)
        assert calls == [1]
    with fast.tricks_off("skip_padding"):
        teacher_forcing_loss(model, src, tgt[:, :-1], tgt[:, 1:], 0.0)
        assert calls == [1]


# ---------------------------------------------------------------- rows as inputs, for a compiled step
def test_rows_found_before_the_step_give_the_same_logits_and_a_bad_one_is_refused():
    from transformer.fast.skip_padding import real_rows
    model, src, tgt = model_and_batch(seed=3)
    rows = (real_rows(src, PAD), real_rows(tgt, PAD))
    np.testing.assert_array_equal(rows[1], np.flatnonzero(tgt != PAD))
    given, found = forward_real_tokens(model, src, tgt, rows), forward_real_tokens(model, src, tgt)
    np.testing.assert_array_equal(given[0].data, found[0].data)
    for bad in (rows[0][::-1], np.sort(np.append(rows[0], np.flatnonzero(src == PAD)[0]))):  # reversed; a <pad>
        with pytest.raises(ValueError, match=r"forward_real_tokens: rows must be the flat positions of the real "
                                             r"tokens in order \(real_rows\)"):
            forward_real_tokens(model, src, tgt, (bad, rows[1]))


def test_the_target_mask_made_from_the_inputs_is_masks_target_mask():
    from transformer.fast.skip_padding import _columns, _target_mask
    from transformer.masks import target_mask
    _, _, tgt = model_and_batch()
    real = tgt != PAD
    np.testing.assert_array_equal(_target_mask(real, _columns(real)), target_mask(tgt, PAD))


@pytest.mark.parametrize("tricks", ["on", "off"])
def test_a_compiled_step_on_rows_serves_every_shape_and_count_from_one_plan_bit_for_bit(tricks):
    """The rows reach the plan as inputs and nothing in forward_real_tokens is a constant made from a
    shape: with any_shape, batches of other shapes and counts replay the plan its second capture
    confirmed, with the eager step's losses and weights bit for bit."""
    from tinygrad_lite.compiler import compile
    from tinygrad_lite.nn.functional import cross_entropy
    from tinygrad_lite.optim import Adam
    from transformer.fast.skip_padding import real_rows

    def run(compiled):
        tl.manual_seed(0)
        model = Transformer(23, 29, d_model=16, h=2, N=2, d_ff=24, dropout=0.1)
        opt = Adam(model.parameters(), lr=1e-3)

        def step(src, tgt_in, tgt_out, rows):
            logits, positions = forward_real_tokens(model, src, tgt_in, rows)
            loss = cross_entropy(logits, np.take(tgt_out, positions), ignore_index=PAD, label_smoothing=0.1)
            opt.zero_grad()
            loss.backward()
            opt.step()
            return loss
        stepper = compile(step, any_shape=True) if compiled else step
        rng, losses = np.random.default_rng(5), []
        tl.manual_seed(1)
        for b, s, t in ((4, 7, 6), (3, 9, 5), (5, 6, 8), (2, 7, 6), (6, 8, 7)):
            src = padded_batch(rng, b, s, 23, rng.integers(1, s + 1, b))
            tgt = padded_batch(rng, b, t, 29, rng.integers(2, t + 1, b))
            rows = (real_rows(src, PAD), real_rows(tgt[:, :-1], PAD))
            losses.append(stepper(src, tgt[:, :-1], tgt[:, 1:], rows).data.copy())
        return losses, [p.data.copy() for p in model.parameters()], stepper
    with (fast.tricks_on if tricks == "on" else fast.tricks_off)("fused_attention", "fused_ffn", "fused_residual"):
        eager_losses, eager_weights, _ = run(False)
        losses, weights, stepper = run(True)
    assert stepper.captures == 2 and stepper.joined == 1 and len(stepper.plans) == 1 and stepper.fallbacks == 0
    for a, b in zip(eager_losses + eager_weights, losses + weights):
        np.testing.assert_array_equal(a, b)


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
    for switch in (fast.tricks_on, fast.tricks_off):
        with switch("skip_padding"):
            np.testing.assert_allclose(loss(wide), loss(Batch(src, tgt)), rtol=1e-12)


def test_an_epochs_batches_are_widened_only_where_padding_is_skipped():
    from transformer.train_config import TrainConfig
    from transformer.train_data import WIDTH, build_dataset, epoch_batches
    cfg = TrainConfig()
    data = build_dataset(cfg)
    with fast.tricks_on("skip_padding"):
        wide = epoch_batches(data, cfg, 0)
    with fast.tricks_off("skip_padding"):
        plain = epoch_batches(data, cfg, 0)
    assert all(b.src.shape[1] % WIDTH == 0 and (b.tgt.shape[1] - 1) % WIDTH == 0 for b in wide)
    assert any(b.src.shape[1] % WIDTH for b in plain)
    for w, p in zip(wide, plain):
        np.testing.assert_array_equal(w.src[:, :p.src.shape[1]], p.src)
