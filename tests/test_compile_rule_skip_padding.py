"""Rule skip_padding (tinygrad_lite/compiler/rules/skip_padding.py): the translator's plain training step on
padded batches, compiled with every rule on (the position-wise ops on the kept rows only), against the
plain ops compiled and eager mode; its dropout mask at rows against the padded mask; where it must not
apply."""
import sys

import numpy as np
import pytest

import tinygrad_lite as tl
from tinygrad_lite import fast
from tinygrad_lite.compiler.rules import SWITCHES
from tinygrad_lite.compiler.rules.skip_padding import keep_at_rows, kept_rows
from tinygrad_lite.kernels.dropout import keep_mask_from_seed_numba, keep_rows_from_seed_numba
from tinygrad_lite.ops.nn import keep_rows_from_seed
from tinygrad_lite.random import rng
from tinygrad_lite.tensor import dropout_keep_mask
from transformer.model import Transformer
from transformer.train import teacher_forcing_loss

sys.path.insert(0, "tests")  # this file's helpers, as pytest finds them
from rule_oracle import plan_of, sides  # noqa: E402

ROW_OPS = {"fused_attention_rows_op", "add_dropout_rows_op", "linear_relu_dropout_rows_op", "dropout_rows_op"}


def model(dtype):
    tl.manual_seed(0)
    return Transformer(13, 11, d_model=16, h=2, N=2, d_ff=32, dropout=0.2, pad_id=0, dtype=dtype)


def padded_batches(kind: str, B=4, S=7, T=6, count=3):
    """(src, tgt_in, tgt_out) batches of one shape, their <pad> (0) placed as `kind` says."""
    r = np.random.default_rng(3)
    out = []
    for i in range(count):
        src, tgt = r.integers(3, 11, (B, S)), r.integers(3, 11, (B, T + 1))
        if kind == "right":  # as batching makes them: each sentence its own length
            for b in range(B):
                src[b, r.integers(2, S + 1):] = 0
                tgt[b, r.integers(2, T + 2):] = 0
        elif kind == "anywhere":  # <pad> inside sentences too, and targets ignored before real inputs
            src[r.random((B, S)) < 0.3] = 0
            tgt[r.random((B, T + 1)) < 0.3] = 0
        elif kind == "empty sentence":  # one sentence all <pad>, on both sides
            src[i % B], tgt[i % B] = 0, 0
        out.append((src, tgt[:, :-1], tgt[:, 1:]))
    return out


def step_of(net, returns_logits=False):
    def step(src, tgt_in, tgt_out):
        loss = teacher_forcing_loss(net, src, tgt_in, tgt_out, 0.1)
        loss.backward()
        return (loss, net(src, tgt_in)) if returns_logits else loss
    return step


TOLERANCE = {np.float32: 1e-4, np.float64: 1e-10}  # issue 45's oracle; float64 tighter


def assert_agree(out: dict, dtype):
    """The kept rows' step within TOLERANCE of the plain ops (issue 45's oracle: each gradient relative to
    its own size, floored at 1e-3 of the largest, for W^K's bias, which is 0 in exact arithmetic), which
    equal eager bit for bit; the same number of random draws on every side."""
    tol = TOLERANCE[dtype]
    for (lf, gf, rf), (lp, gp, rp), (le, ge, re) in zip(out["fused"], out["plain"], out["eager"]):
        np.testing.assert_array_equal(lp, le)
        for a, b in zip(gp, ge):
            np.testing.assert_array_equal(a, b)
        np.testing.assert_allclose(lf, lp, rtol=tol / 10)
        largest = max(np.abs(b).max() for b in gp)
        for a, b in zip(gf, gp):
            assert a.dtype == b.dtype == dtype
            assert np.abs(a - b).max() <= tol * max(np.abs(b).max(), 1e-3 * largest)
        assert rf == rp == re


def row_ops(compiled) -> set:
    return {r.fn.__name__ for r in plan_of(compiled).records if r is not None} & ROW_OPS


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("kind", ["right", "anywhere", "empty sentence"])
def test_the_step_on_kept_rows_agrees_with_the_padded_plain_step(dtype, kind):
    net = model(dtype)
    out, fused, plain = sides(step_of(net), list(net.parameters()), padded_batches(kind), SWITCHES)
    assert_agree(out, dtype)  # the same losses and gradients, and the same number of draws: the same masks
    assert row_ops(fused) == ROW_OPS and not row_ops(plain)
    source = plan_of(fused).source
    assert "flatnonzero" in source and source.count("np.take(") == 3  # src and tgt ids, the targets


def test_the_rows_are_found_anew_at_each_replay():
    """One plan serves batches of its shape whatever their padding, and skips what each one pads."""
    net = model(np.float64)
    batches = padded_batches("right", count=4)
    out, fused, _ = sides(step_of(net), list(net.parameters()), batches, SWITCHES)
    assert_agree(out, np.float64)
    assert fused.captures == 1 and not fused.fallbacks
    counts = {int((src != 0).sum()) for src, _, _ in batches}
    assert len(counts) > 1  # the batches keep different numbers of rows


def test_a_step_that_returns_a_padded_tensor_keeps_the_padded_ops():
    """The logits of every position leave the step: no row may be skipped, and the rule does not apply."""
    net = model(np.float64)
    calls = padded_batches("right", count=1)
    fused = tl.compiler.compile(step_of(net, returns_logits=True))
    loss, logits = fused(*calls[0])
    assert logits.shape == (4, 6, 11) and not row_ops(fused)


def test_a_loss_that_reads_every_position_keeps_the_padded_ops():
    """A penalty on the encoder's output at every position, <pad> ones too: no row may be skipped."""
    net = model(np.float64)

    def step(src, tgt_in, tgt_out):
        memory = net.encode(src)
        loss = teacher_forcing_loss(net, src, tgt_in, tgt_out, 0.1) + (memory * memory).mean()
        loss.backward()
        return loss
    out, fused, _ = sides(step, list(net.parameters()), padded_batches("right", count=2), SWITCHES)
    assert_agree(out, np.float64)
    assert not row_ops(fused) and plan_of(fused).fusions  # the other rules still fuse


@pytest.mark.parametrize("twin", ["formula", "numba"])
@pytest.mark.parametrize("bits, threshold", [(16, 6554), (16, 0), (16, 65535), (32, 42949673)])
def test_the_mask_at_rows_is_the_padded_masks_rows(twin, bits, threshold):
    impl = keep_rows_from_seed.formula if twin == "formula" else keep_rows_from_seed_numba
    r = np.random.default_rng(5)
    for width in (1, 3, 4, 5, 16, 130):
        for seed in (0, 12345, 2 ** 64 - 1):
            rows = np.flatnonzero(r.random(23) < 0.6)
            padded = keep_mask_from_seed_numba(seed, 23 * width, bits, threshold).reshape(23, width)
            np.testing.assert_array_equal(impl(seed, rows, width, bits, threshold), padded[rows])


def test_the_mask_at_rows_takes_one_word_of_the_engine_rng_as_the_padded_mask():
    rows = np.array([0, 2, 3, 7])
    tl.manual_seed(4)
    at_rows = keep_at_rows(rows, 24, 0.1)
    after = rng().bit_generator.state
    tl.manual_seed(4)
    np.testing.assert_array_equal(at_rows, dropout_keep_mask((8, 24), 0.1)[rows])
    assert rng().bit_generator.state == after


def test_a_space_keeps_its_visible_keys_and_its_counted_targets():
    real = np.array([[1, 1, 0, 0], [1, 0, 0, 0]], dtype=bool)
    causal = np.tril(np.ones((4, 4), dtype=bool))[None, None]
    np.testing.assert_array_equal(kept_rows(np.zeros((2, 4)), (real[:, None, None, :],), ()), real)
    np.testing.assert_array_equal(kept_rows(np.zeros((2, 4)), (real[:, None, None, :] & causal,), ()), real)
    targets = np.array([3, 0, 5, 0, 0, 0, 0, 4])  # (B·T,): a counted target after the real keys
    expected = real | np.array([[0, 0, 1, 0], [0, 0, 0, 1]], dtype=bool)
    np.testing.assert_array_equal(kept_rows(np.zeros((2, 4)), (real[:, None, None, :],), ((targets, 0),)), expected)
    assert kept_rows(np.zeros((2, 4)), (None,), ()).all()  # attention without a mask sees every key


def test_one_plan_serves_every_shape_and_bench_compile_keys_counts_its_captures():
    """The trainer's step on (src, tgt) batches of many shapes: one family, captured again only where a length
    grows past the largest seen or a dim moves that has not yet; bench/compile_keys.py's count is the step's."""
    sys.path.insert(0, "bench")
    from compile_keys import captures
    net = model(np.float64)

    def step(src, tgt):
        loss = teacher_forcing_loss(net, src, tgt[:, :-1], tgt[:, 1:], 0.1)
        loss.backward()
        return loss
    compiled = tl.compiler.compile(step, any_shape=True)
    shapes = [(4, 7, 6), (5, 9, 8), (3, 5, 4), (6, 9, 5), (4, 12, 6), (2, 3, 11), (5, 9, 8), (7, 4, 3), (3, 8, 8)]
    keys = []
    for B, S, T in shapes:
        src, tgt_in, tgt_out = padded_batches("right", B=B, S=S, T=T, count=1)[0]
        tgt = np.concatenate([tgt_in[:, :1], tgt_out], axis=1)
        losses = []
        for run in (compiled, step):
            for p in net.parameters():
                p.grad = None
            tl.manual_seed(B * S * T)
            with fast.tricks_on(*SWITCHES):  # the rules, whatever the process has (TINYGRAD_LITE_FAST=0: all off)
                losses.append(run(src, tgt).item())
        assert abs(losses[0] - losses[1]) <= 1e-10 * abs(losses[1])
        keys.append((B, S, B, T + 1))
    assert len(compiled.plans) == 1 and compiled.joined == compiled.captures - 1 and not compiled.fallbacks
    assert compiled.captures == captures(keys) < len(shapes)
