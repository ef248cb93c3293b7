"""Every speed trick of tinygrad_lite/fast.py against its plain twin: values and gradients agree,
the switches work, and each trick really fires (so a test of it can fail)."""
import contextlib
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from trick_switches import both

import tinygrad_lite as tl
from tinygrad_lite import Tensor, dispatch, fast, kernels, nn
from tinygrad_lite.nn import functional as F
from tinygrad_lite.nn import fused as fused_ops
from tinygrad_lite.tensor import dropout_keep_mask
from transformer import Transformer
from transformer.decoding import greedy_decode

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(autouse=True)
def tricks_restored():
    """Every test starts and ends with the switches as the process set them."""
    before = repr(fast.TRICKS)
    yield
    assert repr(fast.TRICKS) == before


def assert_same(on, off):
    assert len(on) == len(off)
    for a, b in zip(on, off):
        assert a is not None and b is not None
        np.testing.assert_array_equal(a, b)


# ---------------------------------------------------------------- the switches
def test_switches_nest_restore_and_reject_unknown_names():
    with fast.tricks_off():
        assert not any(getattr(fast.TRICKS, n) for n in fast.NAMES)
        with fast.tricks_on("fused_ffn"):
            assert fast.TRICKS.fused_ffn and not fast.TRICKS.fused_residual
        assert not fast.TRICKS.fused_ffn
    with pytest.raises(ValueError, match=r"unknown trick\(s\) \['flash'\]"):
        with fast.tricks_off("flash"):
            pass


@pytest.mark.parametrize("value, on", [("0", False), ("off", False), ("1", True), ("", True)])
def test_the_environment_variable_sets_every_switch(value, on):
    code = "from tinygrad_lite import fast; print(repr(fast.TRICKS))"
    env = {**os.environ, fast.ENV_VAR: value}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True,
                         cwd=ROOT).stdout
    assert out.count(f"={on}") == len(fast.NAMES)


# ---------------------------------------------------------------- a whole model, every trick at once
def transformer_step(dtype=np.float64):
    """Loss, logits and every gradient of one training step of a small Transformer (dropout off,
    so the tricks must not change a single bit)."""
    tl.manual_seed(0)
    model = Transformer(src_vocab=11, tgt_vocab=13, d_model=16, h=2, N=2, d_ff=32, dropout=0.0, dtype=dtype)
    rng = np.random.default_rng(1)
    src, tgt = rng.integers(1, 11, size=(3, 6)), rng.integers(1, 13, size=(3, 5))
    src[0, 4:] = 0
    logits = model(src, tgt[:, :-1])
    loss = F.cross_entropy(logits.reshape(-1, 13), tgt[:, 1:].reshape(-1), ignore_index=0, label_smoothing=0.1)
    (loss * 2.0 + 1.0).backward()
    return [loss.data, logits.data] + [p.grad for p in model.parameters()]


ROUNDED = ("decoder_kernel", "decoder_layouts", "skip_padding", "panel_products", "mkl_products", "fused_attention",
           "attention_kernels", "gpt_kernel")
# equal to rounding only: tests/test_decoder_kernel.py, tests/test_skip_padding.py, tests/test_panels.py,
#   tests/test_mkl.py, tests/test_fused_attention.py, tests/test_plain_path.py, tests/test_gpt_sampling.py, below
BIT_EXACT = tuple(n for n in fast.NAMES if n not in ROUNDED)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_a_training_step_is_bit_identical_with_every_trick_off(dtype):
    assert_same(*both(lambda: transformer_step(dtype), *BIT_EXACT))


def test_greedy_decoding_is_identical_with_every_trick_off():
    def decode():
        tl.manual_seed(0)
        model = Transformer(src_vocab=11, tgt_vocab=13, d_model=16, h=2, N=2, d_ff=32, dropout=0.0).eval()
        src = np.random.default_rng(2).integers(1, 11, size=(2, 7))
        tokens, scores = greedy_decode(model, src, 1, 2, max_len=8)
        with tl.no_grad():
            scaled = model.src_embed(src) * 3.0 + 1  # the scalar-operand path, under no_grad
        return [tokens, scores, scaled.data]
    assert_same(*both(decode, *BIT_EXACT))  # decoder_kernel: tests/test_decoder_kernel.py, to rounding


# ---------------------------------------------------------------- dropout: one mask on both paths
def fast_or_plain(plain):
    """The formula path (fast.plain()), or every trick on with the Numba twins."""
    return fast.plain() if plain else both_on()


@contextlib.contextmanager
def both_on():
    with fast.tricks_on(), kernels.use_backend("numba"):
        yield


@pytest.mark.parametrize("p", [0.1, 0.5, 0.3, 1e-6])
@pytest.mark.parametrize("plain", [True, False])
def test_dropout_masks_keep_one_minus_p(p, plain):
    with fast_or_plain(plain):
        tl.manual_seed(0)
        n = 400_000
        kept = dropout_keep_mask((n,), p).mean()
    sigma = np.sqrt(p * (1 - p) / n)
    assert abs((1 - kept) - p) < 6 * sigma + 1e-4 * min(p, 1 - p)


@pytest.mark.parametrize("plain", [True, False])
def test_dropout_applies_the_mask_it_draws_to_values_and_gradients(plain):
    """dropout(x) = x · keep / (1 - p), and the gradient is g · keep / (1 - p), with `keep` what
    the mask generator draws from the same seed."""
    x = Tensor(np.random.default_rng(3).standard_normal((4, 50)), requires_grad=True)
    g = np.random.default_rng(4).standard_normal((4, 50))
    with fast_or_plain(plain):
        tl.manual_seed(5)
        keep = dropout_keep_mask(x.shape, 0.3)
        tl.manual_seed(5)
        out = x.dropout(0.3)
    out.backward(g)
    scale = 1 / (1 - 0.3)
    np.testing.assert_array_equal(out.data, x.data * scale * keep)
    np.testing.assert_array_equal(x.grad, g * scale * keep)
    assert 0 < keep.mean() < 1


@pytest.mark.parametrize("p", [0.1, 0.5, 0.01])
def test_the_plain_and_the_fast_path_draw_the_same_mask_from_one_rng_word(p):
    """Both run dropout's formula, a counter-based stream seeded by one word of the engine's rng
    (the fast path through its Numba twin), so a plain run drops what a fast run drops."""
    drawn = []
    for plain in (True, False):
        with fast_or_plain(plain):
            tl.manual_seed(6)
            drawn.append(dropout_keep_mask((7, 300), p))
            drawn.append(tl.random.rng().bit_generator.state)
    tl.manual_seed(6)
    seed = tl.random.rng().bit_generator.random_raw()
    assert drawn[1] == drawn[3] == tl.random.rng().bit_generator.state
    np.testing.assert_array_equal(drawn[0], drawn[2])
    bits = 16 if p in (0.1, 0.5) else 32
    expected = dispatch.formula("keep_mask_from_seed")(seed, 2100, bits, round(p * 2 ** bits))
    np.testing.assert_array_equal(drawn[0].ravel(), expected)


@pytest.mark.parametrize("plain", [True, False])
def test_fused_attention_draws_what_the_unfused_dropout_draws_either_way(plain):
    rng = np.random.default_rng(7)
    q, k, v = (Tensor(rng.standard_normal((2, 3, 2, 4))) for _ in range(3))
    with fast_or_plain(plain):
        tl.manual_seed(8)
        fused = fused_ops.fused_attention(q, k, v, dropout_p=0.4, training=True)
        tl.manual_seed(8)
        qh, kh, vh = (t.transpose(1, 2) for t in (q, k, v))
        weights = (qh @ kh.transpose(-2, -1)).softmax(-1, scale=0.5).dropout(0.4)
        plain_out = (weights @ vh).transpose(1, 2)
    np.testing.assert_allclose(fused.data, plain_out.data, rtol=1e-12, atol=1e-14)


# ---------------------------------------------------------------- Module's registry
def rearranged_module():
    """A module changed in every way a member can change; returns it and what reads see."""
    holder = nn.Module()
    holder.extra = nn.Linear(2, 2)
    holder.extra = None
    holder.register_buffer("pe", np.zeros(2, np.float32))
    holder.pe = np.ones(2, np.float32)
    holder.seq = block = nn.Sequential(nn.Linear(2, 2), nn.LayerNorm(2))
    block[1].weight = nn.Parameter(np.full(2, 3.0, np.float32))
    del block[1].bias
    block[0] = nn.Tanh()
    block.insert(0, nn.ReLU())
    del block[2]
    reads = [holder.extra, type(block[0]).__name__, type(block[1]).__name__, holder.pe.data, getattr(block, "0")]
    return block, reads


def test_attribute_reads_follow_registration_changes():
    block, (extra, first, second, pe, zeroth) = rearranged_module()
    norm = nn.LayerNorm(2)
    assert extra is None and (first, second) == ("ReLU", "Tanh") and zeroth is block._modules["0"]
    np.testing.assert_array_equal(pe, np.ones(2))
    assert not hasattr(block, "2")
    assert "weight" not in vars(norm) and norm.weight is norm._parameters["weight"]  # read via __getattr__
    lin = nn.Linear(2, 2)
    lin.weight = None
    assert lin.weight is None and "weight" not in vars(lin)


# ---------------------------------------------------------------- the benchmark still runs
def test_the_speed_tricks_benchmark_runs(tmp_path):
    out = tmp_path / "tricks.jsonl"
    done = subprocess.run([sys.executable, str(ROOT / "bench" / "speed_tricks.py"), "--quick", "--json", str(out)],
                          cwd=ROOT, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    import json
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert {r["trick"] for r in rows} == set(fast.NAMES) | {"all", "none"}
    assert all(r["same"] and r["ms_on"] > 0 and r["ms_off"] > 0 for r in rows)


# ---------------------------------------------------------------- the fused chains' kernels (the rules add_dropout and
# linear_relu_dropout run them: tests/test_compile_rules*.py)
@pytest.mark.parametrize("backend", ["numba", "numpy"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_fused_kernels_match_their_numpy_twins(backend, dtype):
    from tinygrad_lite.kernels import fused, use_backend
    rng = np.random.default_rng(3)
    x, s, g = (rng.standard_normal((4, 5, 6)).astype(dtype) for _ in range(3))
    keep, scale = rng.random((4, 5, 6)) >= 0.3, dtype(1 / 0.7)
    y, b = rng.standard_normal((20, 6)).astype(dtype), rng.standard_normal(6).astype(dtype)
    with use_backend(backend):
        assert_same([fused.add_dropout(x, s, keep, scale), fused.dropout_backward(g, keep, scale)],
                    [fused.add_dropout_numpy(x, s, keep, scale), fused.dropout_backward_numpy(g, keep, scale)])
        for mask in (keep.reshape(20, 6), None):
            h = fused.bias_relu_dropout_(y.copy(), b, mask, scale)
            assert_same([h, fused.relu_dropout_backward(g.reshape(20, 6), h, scale)],
                        [fused.bias_relu_dropout_numpy(y.copy(), b, mask, scale),
                         fused.relu_dropout_backward_numpy(g.reshape(20, 6), h, scale)])
    assert (h > 0).any() and (h == 0).any() and np.isin(fused.add_dropout_numpy(x, s, keep, scale), x).any()



# ---------------------------------------------------------------- attention_kernels
TOL = {np.float32: {"rtol": 1e-4, "atol": 1e-5}, np.float64: {"rtol": 1e-11, "atol": 1e-12}}


def assert_close(on, off, dtype):
    assert len(on) == len(off)
    for a, b in zip(on, off):
        assert a is not None and b is not None and a.shape == b.shape
        np.testing.assert_allclose(a, b, **TOL[dtype])


def attention_step(dtype, T_q, d, rows):
    """fused_attention's output and q, k, v gradients, dropout on, padded (B, T, h·d) or on the real rows."""
    tl.manual_seed(4)
    rng = np.random.default_rng(T_q * d)
    B, T_k, h = 3, 7, 2
    lengths_q, lengths_k = [T_q, max(T_q - 2, 1), 1], [7, 4, 2]
    q_real = np.arange(T_q)[None, :] < np.array(lengths_q)[:, None]
    k_real = np.arange(T_k)[None, :] < np.array(lengths_k)[:, None]
    n_q, n_k = (int(q_real.sum()), int(k_real.sum())) if rows else (B * T_q, B * T_k)
    q, k, v = (Tensor(rng.standard_normal((n,) + (h * d,)).astype(dtype), requires_grad=True)
               for n in (n_q, n_k, n_k))
    if rows:
        out = fused_ops.fused_attention(q, k, v, dropout_p=0.2, heads=h, real=(q_real, k_real))
    else:
        q4, k4, v4 = q.reshape(B, T_q, h * d), k.reshape(B, T_k, h * d), v.reshape(B, T_k, h * d)
        out = fused_ops.fused_attention(q4, k4, v4, mask=k_real[:, None, None, :], dropout_p=0.2, heads=h)
    (out * Tensor(rng.standard_normal(out.shape).astype(dtype))).sum().backward()
    return [out.data, q.grad, k.grad, v.grad]


@pytest.mark.parametrize("backend", ["numba", "numpy"])
@pytest.mark.parametrize("dtype, T_q, d, rows", [
    (np.float32, 5, 8, False),    # numba: the tile kernels
    (np.float32, 1, 8, False),    # numba: the per-query kernel
    (np.float64, 4, 5, False),    # numba: BLAS around the Numba softmax
    (np.float32, 5, 8, True),     # numba: the tile kernels on the real rows, in place
    (np.float64, 4, 5, True)])    # numba: the rows back in the padded layout
def test_attention_kernels_off_runs_the_numpy_twin_and_matches(monkeypatch, backend, dtype, T_q, d, rows):
    from tinygrad_lite.kernels import attention, use_backend
    twin_calls = []
    for name in ("attention_forward_numpy", "attention_forward_rows_numpy"):
        original = getattr(attention, name)
        monkeypatch.setattr(attention, name, lambda *a, f=original, n=name: twin_calls.append(n) or f(*a))
    with use_backend(backend):
        with fast.tricks_on("attention_kernels"):
            on = attention_step(dtype, T_q, d, rows)
        on_calls, twin_calls[:] = list(twin_calls), []
        with fast.tricks_off("attention_kernels"):
            off = attention_step(dtype, T_q, d, rows)
    assert twin_calls == (["attention_forward_rows_numpy", "attention_forward_numpy"] if rows
                          else ["attention_forward_numpy"])
    assert on_calls == ([] if backend == "numba" else ["attention_forward_numpy"])
    assert_close(on, off, dtype)
    assert all(np.abs(g).max() > 0 for g in on)
