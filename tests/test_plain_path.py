"""fast.plain() is the formula path end to end (every trick off, the kernels' NumPy twins), and
the oracle of the fast path: one training step of the SMALL benchmark config and a 20-token
greedy decode give the same numbers either way, to float32 rounding, on either backend."""
import numpy as np
import pytest

import tinygrad_lite as tl
from tinygrad_lite import fast, kernels
from transformer import Transformer
from transformer.decoding import greedy_decode
from transformer.fast.decoder_steps import decoder_steps
from transformer.train import teacher_forcing_loss

BACKENDS = ["numpy", pytest.param("numba", marks=pytest.mark.skipif(
    kernels.backend.load_numba() is None, reason="numba is not installed"))]
SMALL = dict(src_vocab=1000, tgt_vocab=1000, d_model=128, h=4, N=2, d_ff=512)  # bench/train_throughput.py
BATCH, LENGTH = 64, 16


def small_model(**extra):
    tl.manual_seed(0)
    return Transformer(**SMALL, **extra)


def small_batch():
    """64 sentences of up to 16 tokens, right-padded so that a quarter of the positions are
    <pad> (the skip_padding trick fires from 10%)."""
    rng = np.random.default_rng(1)
    src, tgt = rng.integers(3, 1000, size=(BATCH, LENGTH)), rng.integers(3, 1000, size=(BATCH, LENGTH + 1))
    for row, n in enumerate(rng.integers(LENGTH // 3, LENGTH + 1, size=BATCH)):
        src[row, n:] = 0
        tgt[row, n + 1:] = 0
    return src, tgt


def training_step():
    """The loss and every gradient; dropout 0, so that the paths draw no random numbers and must
    agree to rounding (label smoothing on, as trained)."""
    model = small_model(dropout=0.0)
    src, tgt = small_batch()
    loss = teacher_forcing_loss(model, src, tgt[:, :-1], tgt[:, 1:], label_smoothing=0.1)
    loss.backward()
    return float(loss.item()), [p.grad.copy() for p in model.parameters()]


def worst_relative(arrays, oracle) -> float:
    """The largest ||a - b|| / ||b|| over the pairs. A gradient that is zero in exact arithmetic,
    and rounding noise (1e-9) in both paths, counts against 1e-3 of the largest norm: W^K's
    bias, since softmax(s + c) = softmax(s) makes the scores blind to a shift shared by all keys."""
    floor = 1e-3 * max(np.linalg.norm(b) for b in oracle)
    return max(float(np.linalg.norm(np.asarray(a, np.float64) - b) / max(np.linalg.norm(b), floor))
               for a, b in zip(arrays, oracle))


@pytest.fixture(scope="module")
def plain_step():
    with fast.plain():
        return training_step()


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_small_training_step_matches_the_formula_path(plain_step, backend):
    with kernels.use_backend(backend), fast.tricks_on():
        loss, grads = training_step()
    plain_loss, plain_grads = plain_step
    assert abs(loss - plain_loss) <= 1e-5 * abs(plain_loss)
    assert len(grads) == len(plain_grads) > 20
    worst = worst_relative(grads, plain_grads)
    assert worst <= 1e-4, f"a gradient differs by {worst:.2e} (relative norm)"


def greedy(model, src):
    tokens, scores = greedy_decode(model, src, bos_id=1, eos_id=2, max_len=20, steps=decoder_steps(model))
    return tokens, scores


@pytest.fixture(scope="module")
def decode_case():
    model = small_model(dropout=0.1).eval()
    src = small_batch()[0][:8]
    with fast.plain():
        tokens, scores = greedy(model, src)
        prefix = np.concatenate([np.ones((len(src), 1), np.int64), tokens[:, :-1]], axis=1)
        with tl.no_grad():
            logits = model(src, prefix).data                             # (8, 20, V)
    top2 = np.sort(logits, axis=-1)[..., -2:]
    return model, src, tokens, scores, float((top2[..., 1] - top2[..., 0]).min())


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_20_token_greedy_decode_matches_the_formula_path(decode_case, backend):
    model, src, plain_tokens, plain_scores, margin = decode_case
    assert plain_tokens.shape == (8, 20)
    assert margin > 1e-4  # every choice clear by 100x float32's rounding here: equal tokens are owed
    with kernels.use_backend(backend), fast.tricks_on():
        tokens, scores = greedy(model, src)
    np.testing.assert_array_equal(tokens, plain_tokens)
    np.testing.assert_allclose(scores, plain_scores, rtol=1e-5)


def test_plain_switches_every_trick_off_selects_the_numpy_twins_and_restores_both():
    with kernels.use_backend("numba"), fast.tricks_on():
        with fast.plain():
            assert not any(getattr(fast.TRICKS, name) for name in fast.NAMES)
            assert kernels.get_backend() == "numpy"
        assert all(getattr(fast.TRICKS, name) for name in fast.NAMES)
        assert kernels.backend.requested_backend() == "numba"
