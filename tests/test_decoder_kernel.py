"""The decoder_kernel trick (transformer/fast/) against its plain twin, the Tensor
decoder with its key/value cache: the same tokens and the same log-probs within float rounding,
greedy and beam search, on post-/pre-LN, final norm, tied embeddings, float32/float64, batch 1 and
ragged padded batches whose rows finish at different steps; and the plain path where it must run."""
import numba
import numpy as np
import pytest
import trick_switches

import tinygrad_lite as tl
from tinygrad_lite import fast, kernels
from tinygrad_lite.kernels import panels
from transformer import Transformer, decoding
from transformer.fast import decode_memory, decoder_kernel, decoder_weights, numpy_sgemm
from transformer.fast.decoder_steps import decoder_steps

BOS, PAD = 2, 0
NEVER = -1  # an <eos> that never comes: every row runs max_len steps

VARIANTS = {
    "post-LN": {},
    "pre-LN, final norm": {"norm_first": True, "final_norm": True},
    "post-LN, final norm, tied": {"final_norm": True, "tie_embeddings": True},
    "pre-LN, tied, 1 layer": {"norm_first": True, "tie_embeddings": True, "N": 1},
}
TOLERANCE = {np.float32: 2e-5, np.float64: 1e-10}


@pytest.fixture(autouse=True)
def numba_backend():
    with kernels.use_backend("numba"):
        yield


def model_of(variant: str, dtype, seed: int = 0):
    tl.manual_seed(seed)
    options = {"N": 2, **VARIANTS[variant]}
    return Transformer(src_vocab=23, tgt_vocab=29, d_model=16, h=2, d_ff=32, dropout=0.0, dtype=dtype,
                       **options).eval()


def ragged_sources(batch: int, seed: int = 1) -> np.ndarray:
    """(batch, 9) source ids; row i keeps 9 - (i % 4) real tokens, then <pad>."""
    src = np.random.default_rng(seed).integers(4, 23, size=(batch, 9))
    for i in range(batch):
        src[i, 9 - i % 4:] = PAD
    return src


def greedy_decode(model, src, *args, **kwargs):
    """decoding.greedy_decode with the steps the translator picks (decoder_steps: the kernels if on)."""
    return decoding.greedy_decode(model, src, *args, steps=decoder_steps(model), **kwargs)


def beam_search_batch(model, src, *args, **kwargs):
    """decoding.beam_search_batch with the steps the translator picks."""
    return decoding.beam_search_batch(model, src, *args, steps=decoder_steps(model), **kwargs)


def both(fn):
    """fn() with the kernel (its switch on), then on the plain path (switch off)."""
    return trick_switches.both(fn, "decoder_kernel")


def assert_close(a, b, dtype):
    np.testing.assert_allclose(a, b, rtol=TOLERANCE[dtype], atol=TOLERANCE[dtype])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("variant", list(VARIANTS))
def test_each_step_gives_the_plain_log_probs(variant, dtype):
    """Teacher-forced: the same prefix fed to both, step by step, on a ragged batch."""
    model = model_of(variant, dtype)
    src = ragged_sources(5)
    prefix = np.random.default_rng(3).integers(4, 29, size=(5, 7))
    prefix[:, 0] = BOS
    owner = np.arange(5)
    with tl.no_grad():
        fused = decoder_kernel.DecoderKernel(model, src, src != PAD, 5, 7)
        plain = decoding.CachedSteps(model, src, decoding.padding_mask(src, PAD))
        for t in range(1, 8):
            got, want = fused.step(prefix[:, :t], owner), plain.step(prefix[:, :t], owner)
            assert got.dtype == want.dtype == dtype and got.shape == want.shape == (5, 29)
            assert_close(got, want, dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("variant", list(VARIANTS))
@pytest.mark.parametrize("batch", [1, 6, 20])  # float32 products of 2+ rows take NumPy's sgemm
def test_greedy_gives_the_plain_tokens_and_scores(variant, dtype, batch):
    model = model_of(variant, dtype)
    src = ragged_sources(batch)
    (tokens, scores), (plain_tokens, plain_scores) = both(lambda: greedy_decode(model, src, BOS, NEVER, 12))
    assert tokens.shape == plain_tokens.shape == (batch, 12)
    np.testing.assert_array_equal(tokens, plain_tokens)
    assert_close(scores, plain_scores, dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_greedy_takes_the_first_of_tied_logits_and_a_nan_as_np_argmax_does(dtype):
    """The kernel's argmax (a SIMD max, then a scan) keeps np.argmax's answers: the first of equal
    maxima, as the plain path; and with a NaN logit, the NaN's index (and a NaN score)."""
    model = model_of("post-LN", dtype)
    generator = model.generator
    generator.weight.data[[5, 9]] = 0
    generator.bias.data[[5, 9]] = 100  # classes 5 and 9 tie, far above the rest, in every row
    src = ragged_sources(6)
    (tokens, scores), (plain_tokens, plain_scores) = both(lambda: greedy_decode(model, src, BOS, NEVER, 4))
    assert (tokens == 5).all() and (plain_tokens == 5).all()
    assert_close(scores, plain_scores, dtype)
    generator.bias.data[7] = np.nan   # after the first maximum's index and before the second
    with fast.tricks_on("decoder_kernel"):  # (the plain path's log-softmax makes the whole row NaN: token 0)
        tokens, scores = greedy_decode(model, src, BOS, NEVER, 4)
    assert (tokens == 7).all() and np.isnan(scores).all()


def test_first_max_is_np_argmax_on_rows_without_nan():
    decoder_kernel._kernels()
    first_max = numba.njit(lambda a, r: decoder_kernel._first_max(a, r))
    rng = np.random.default_rng(0)
    for dtype in (np.float32, np.float64):
        for n in (1, 7, 64, 1000):
            rows = rng.standard_normal((6, n)).astype(dtype)
            rows[1] = np.round(rows[1])                 # many ties
            rows[2] = -np.inf
            rows[3, n // 2:] = np.inf
            rows[4, n // 3] = rows[4].max()             # the maximum twice
            for r in range(rows.shape[0]):
                assert first_max(rows, r) == np.argmax(rows[r]), (dtype, n, r)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_rows_that_finish_at_different_steps(dtype):
    """<eos> is a token the plain path produces early in row 0 only, so rows end apart (checked)."""
    model = model_of("post-LN", dtype, seed=4)
    src = ragged_sources(6)
    with fast.tricks_off("decoder_kernel"):
        free_run, _ = greedy_decode(model, src, BOS, NEVER, 12)
    eos = int(free_run[0, 1])
    ends = [list(row).index(eos) if eos in row else 12 for row in free_run]
    assert len(set(ends)) > 1, ends  # the premise: rows finish at different steps
    (tokens, scores), (plain_tokens, plain_scores) = both(lambda: greedy_decode(model, src, BOS, eos, 12))
    np.testing.assert_array_equal(tokens, plain_tokens)
    assert (tokens == PAD).any()  # finished rows are padded
    assert_close(scores, plain_scores, dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("variant", ["post-LN", "pre-LN, final norm"])
def test_beam_search_gives_the_plain_hypotheses(variant, dtype):
    model = model_of(variant, dtype, seed=5)
    src = ragged_sources(4)
    with fast.tricks_off("decoder_kernel"):
        free_run, _ = greedy_decode(model, src, BOS, NEVER, 10)
    eos = int(free_run[1, 2])
    fused, plain = both(lambda: beam_search_batch(model, src, BOS, eos, beam_size=3, max_len=10,
                                                  length_penalty=0.6))
    for (tokens, logp, norm), (plain_tokens, plain_logp, plain_norm) in zip(fused, plain):
        np.testing.assert_array_equal(tokens, plain_tokens)
        assert_close([logp, norm], [plain_logp, plain_norm], dtype)


def test_the_kernel_runs_when_on_and_the_plain_path_otherwise(monkeypatch):
    model = model_of("post-LN", np.float32)
    src = ragged_sources(2)
    made = []
    real = decoder_kernel.DecoderKernel
    monkeypatch.setattr(decoder_kernel, "DecoderKernel", lambda *a: made.append(1) or real(*a))
    with fast.tricks_on("decoder_kernel"):
        greedy_decode(model, src, BOS, NEVER, 3)
        beam_search_batch(model, src, BOS, NEVER, beam_size=2, max_len=3)
        assert len(made) == 3  # greedy, beam search, and beam search's greedy candidate
        greedy_decode(model, src, BOS, NEVER, 3, use_cache=False)
        with kernels.use_backend("numpy"):
            greedy_decode(model, src, BOS, NEVER, 3)
            beam_search_batch(model, src, BOS, NEVER, beam_size=2, max_len=3)
        model.decoder.layers[0].add_norm2.norm.bias = None  # not something the kernel implements
        assert not decoder_kernel.supports(model)
        greedy_decode(model, src, BOS, NEVER, 3)
    with fast.tricks_off("decoder_kernel"):
        greedy_decode(model_of("post-LN", np.float32), src, BOS, NEVER, 3)
    assert len(made) == 3


def test_the_translator_decodes_with_the_kernels_it_picks_and_the_same_text_without(monkeypatch):
    """transformer.decoding never picks the kernels; the translator does (decoder_steps), for greedy,
    batched and beam translations and its attention maps, and translates the same text with the switch off."""
    from transformer.data import Vocab, tokenize_en, tokenize_zh
    from transformer.translator import Translator
    tl.manual_seed(0)
    src_vocab, tgt_vocab = Vocab.build([tokenize_zh("这是一个苹果")]), Vocab.build([tokenize_en("this is an apple")])
    model = Transformer(len(src_vocab), len(tgt_vocab), d_model=16, h=2, N=1, d_ff=32, dropout=0.0).eval()
    translator = Translator(model, src_vocab, tgt_vocab, max_train_len=4)
    made = []
    real = decoder_kernel.DecoderKernel
    monkeypatch.setattr(decoder_kernel, "DecoderKernel", lambda *a: made.append(1) or real(*a))

    def translate():
        return (translator.translate("这是苹果"), translator.translate("这是苹果", beam=3),
                translator.translate_batch(["这是苹果", "一个苹果"]), translator.translate_batch(["苹果"], beam=2),
                translator.attention_maps("这是苹果")["cross-attention"][0].shape)
    fused, plain = both(translate)
    assert len(made) == 7  # greedy, beam + its greedy candidate, batch, batch beam + greedy, attention maps
    assert fused == plain
    with fast.tricks_on("decoder_kernel"):
        decoding.greedy_decode(model, np.array([[4, 5]]), BOS, NEVER, 3)
    assert len(made) == 7  # decoding's default steps: the plain path


def test_a_model_without_final_norm_bias_still_decodes_on_the_plain_path():
    model = model_of("pre-LN, final norm", np.float64)
    model.decoder.norm.bias = None
    src = ragged_sources(3)
    (tokens, scores), (plain_tokens, plain_scores) = both(lambda: greedy_decode(model, src, BOS, NEVER, 5))
    np.testing.assert_array_equal(tokens, plain_tokens)
    np.testing.assert_array_equal(scores, plain_scores)  # both ran the plain path


def test_an_encoder_the_kernels_do_not_implement_takes_the_plain_path():
    model = model_of("post-LN", np.float64)
    assert decoder_kernel.supports(model)
    model.encoder.layers[1].add_norm2.norm.bias = None
    assert not decoder_kernel.supports(model)
    (tokens, scores), (plain_tokens, plain_scores) = both(lambda: greedy_decode(model, ragged_sources(2), BOS,
                                                                                NEVER, 4))
    np.testing.assert_array_equal(tokens, plain_tokens)
    np.testing.assert_array_equal(scores, plain_scores)  # both ran the plain path


def test_without_scipy_numbas_blas_is_missing_so_decoding_takes_the_plain_path(monkeypatch):
    """Numba's np.dot calls SciPy's BLAS bindings: a venv without SciPy must decode, not crash."""
    model = model_of("post-LN", np.float32)
    assert decoder_kernel.supports(model)
    real_find_spec = decoder_weights.importlib.util.find_spec
    monkeypatch.setattr(decoder_weights.importlib.util, "find_spec",
                        lambda name, *a: None if name == "scipy" else real_find_spec(name, *a))
    assert not decoder_kernel.supports(model)
    made = []
    monkeypatch.setattr(decoder_kernel, "DecoderKernel", lambda *a: made.append(1))
    with fast.tricks_on("decoder_kernel"):
        tokens, _ = greedy_decode(model, ragged_sources(2), BOS, NEVER, 3)
    assert made == [] and tokens.shape[0] == 2


def test_scipy_is_a_dependency_because_the_kernels_need_it():
    from pathlib import Path
    setup = (Path(__file__).resolve().parents[1] / "setup.cfg").read_text()
    requires = setup.split("install_requires =", 1)[1].split("\n\n", 1)[0].split("[", 1)[0]
    assert "scipy" in requires


def test_bad_source_ids_get_the_plain_paths_error():
    model = model_of("post-LN", np.float32)
    for switch in (fast.tricks_on, fast.tricks_off):
        with switch("decoder_kernel"), pytest.raises(ValueError, match="token id 99 outside the vocabulary"):
            greedy_decode(model, np.array([[4, 99]]), BOS, NEVER, 3)
        with switch("decoder_kernel"), pytest.raises(ValueError, match="token id 99 outside the vocabulary"):
            beam_search_batch(model, np.array([[4, 99]]), BOS, NEVER, beam_size=2, max_len=3)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_a_source_of_padding_only_decodes_as_on_the_plain_path(dtype):
    """The kernel's encoder skips <pad> rows; a sentence with no real token at all still gets the
    plain path's tokens (every key masked: zero attention)."""
    model = model_of("pre-LN, final norm", dtype)
    src = ragged_sources(3)
    src[1] = PAD
    (tokens, scores), (plain_tokens, plain_scores) = both(lambda: greedy_decode(model, src, BOS, NEVER, 6))
    np.testing.assert_array_equal(tokens, plain_tokens)
    assert_close(scores, plain_scores, dtype)


def test_greedy_decoding_leaves_the_model_in_its_mode():
    model = model_of("post-LN", np.float32).train()
    greedy_decode(model, ragged_sources(2), BOS, NEVER, 3)
    assert model.training and all(m.training for m in model.modules())


def test_beam_searchs_top_pick_is_the_head_of_a_stable_argsort():
    """Ties (integer values), -inf and NaN included: the partition shortcut picks what sorting
    everything picked, in the same order."""
    rng = np.random.default_rng(0)
    shortcut = 0
    for _ in range(2000):
        values = rng.integers(-4, 4, size=rng.integers(1, 60)).astype(float)
        values[rng.integers(0, values.size)] = rng.choice([-np.inf, np.nan, 0.0])
        count = int(rng.integers(1, 12))
        shortcut += count < values.size and not np.isnan(values).any()
        np.testing.assert_array_equal(decoding.best_first(values, count),
                                      np.argsort(-values, kind="stable")[:count])
    assert shortcut > 500  # the partition path ran, not only the full sort


def test_numpy_sgemm_gives_np_dots_log_probs(monkeypatch):
    """float32 steps of 20 rows: the products through NumPy's own sgemm equal those through np.dot
    (SciPy's OpenBLAS) within rounding; and the kernels use it whenever NumPy's library has it."""
    from types import SimpleNamespace
    real = decoder_kernel._kernels()
    assert real.numpy_sgemm == (numpy_sgemm.numpy_sgemm_address() != 0)
    if not real.numpy_sgemm:
        pytest.skip("this NumPy bundles no OpenBLAS with scipy_cblas_sgemm64_")
    model, src = model_of("pre-LN, final norm", np.float32), ragged_sources(20)
    prefix = np.random.default_rng(5).integers(4, 29, size=(20, 4))
    prefix[:, 0] = BOS

    def steps():
        with tl.no_grad(), fast.tricks_on("decoder_layouts"):
            kernel = decoder_kernel.DecoderKernel(model, src, src != PAD, 20, 4)
            return kernel.stack.numpy_sgemm, [kernel.step(prefix[:, :t], np.arange(20)) for t in range(1, 5)]
    used, with_sgemm = steps()
    monkeypatch.setattr(decoder_kernel, "_kernels", lambda: SimpleNamespace(**{**vars(real), "numpy_sgemm": False}))
    unused, with_dot = steps()
    assert used and not unused
    for a, b in zip(with_sgemm, with_dot):
        assert_close(a, b, np.float32)


def test_without_numpy_sgemm_the_kernels_bind_a_stand_in_and_decode_with_np_dot():
    """A NumPy build without its own OpenBLAS: the symbol is bound to a portable stand-in (a C
    callback, never called) and every product goes through np.dot, with the plain path's tokens."""
    import os
    import subprocess
    import sys
    from pathlib import Path
    code = """
import numpy as np
import tinygrad_lite as tl
from transformer import decoding
from transformer.fast import decoder_kernel, numpy_sgemm
numpy_sgemm.numpy_sgemm_address = lambda: 0
import sys
sys.path.insert(0, "tests")  # this file's helpers (trick_switches), as pytest finds them
import test_decoder_kernel as t
model, src = t.model_of("post-LN", np.float32), t.ragged_sources(20)
with tl.no_grad():
    kernel = decoder_kernel.DecoderKernel(model, src, src != t.PAD, 20, 4)
assert kernel.stack.numpy_sgemm is False and decoder_kernel._kernels().numpy_sgemm is False
with tl.fast.tricks_on("decoder_kernel"):
    fast_tokens = t.greedy_decode(model, src, t.BOS, t.NEVER, 6)[0]
with tl.fast.tricks_off("decoder_kernel"):
    plain_tokens = t.greedy_decode(model, src, t.BOS, t.NEVER, 6)[0]
np.testing.assert_array_equal(fast_tokens, plain_tokens)
print("ok")
"""
    root = Path(__file__).resolve().parents[1]
    env = {**os.environ, "TINYGRAD_LITE_BACKEND": "numba", "PYTHONPATH": str(root)}
    run = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True, timeout=600, env=env)
    assert run.returncode == 0 and run.stdout.strip() == "ok", run.stderr


def kept_block():
    return getattr(decode_memory.DecodeMemory._kept, "block", None)


def shares_block(kernel, block) -> bool:
    return all(np.shares_memory(a, block) for a in (kernel.self_k, kernel.self_v, kernel.cross_k, kernel.cross_v))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_a_decode_reuses_the_memory_of_the_one_before_whatever_it_left_there(dtype):
    """The second decode of a size runs in the first one's block; the block filled with NaN
    bytes in between (garbage a decode of another model could leave) changes no token or score."""
    decode_memory.release_decode_memory()
    model = model_of("pre-LN, final norm", dtype)
    src = ragged_sources(6)
    with tl.no_grad():
        want = decoder_kernel.DecoderKernel(model, src, src != PAD, 6, 12).greedy(BOS, NEVER, PAD, 12)
        assert kept_block() is None  # the first decode learnt its size; the next one takes a block
        decoder_kernel.DecoderKernel(model, src, src != PAD, 6, 12).greedy(BOS, NEVER, PAD, 12)
        block = kept_block()
        assert block is not None
        block[:] = 0xFF  # every float in it a NaN
        kernel = decoder_kernel.DecoderKernel(model, src, src != PAD, 6, 12)
        assert kept_block() is None and shares_block(kernel, block)
        got = kernel.greedy(BOS, NEVER, PAD, 12)
        del kernel
        assert kept_block() is block
    np.testing.assert_array_equal(got[0], want[0])
    assert_close(got[1], want[1], dtype)


def test_two_kernels_alive_at_once_do_not_share_memory():
    model = model_of("post-LN", np.float32)
    src = ragged_sources(4)
    with tl.no_grad():
        for _ in range(2):  # the second decode's kernel takes the kept block
            want = decoder_kernel.DecoderKernel(model, src, src != PAD, 4, 8).greedy(BOS, NEVER, PAD, 8)
        first = decoder_kernel.DecoderKernel(model, src, src != PAD, 4, 8)
        second = decoder_kernel.DecoderKernel(model, src, src != PAD, 4, 8)
        arrays = [k.__dict__[name] for k in (first, second) for name in ("self_k", "self_v", "cross_k", "cross_v")]
        assert not any(np.shares_memory(a, b) for i, a in enumerate(arrays) for b in arrays[i + 1:])
        got_second = second.greedy(BOS, NEVER, PAD, 8)
        got_first = first.greedy(BOS, NEVER, PAD, 8)
    for got in (got_first, got_second):
        np.testing.assert_array_equal(got[0], want[0])
        assert_close(got[1], want[1], np.float32)


def test_a_larger_decode_gets_a_larger_block_and_release_frees_it():
    model = model_of("post-LN", np.float32)
    with tl.no_grad():
        for batch in (2, 2, 9, 9):
            src = ragged_sources(batch)
            kernel = decoder_kernel.DecoderKernel(model, src, src != PAD, batch, 10)
            tokens, scores = kernel.greedy(BOS, NEVER, PAD, 10)
            del kernel
            plain_tokens, plain_scores = fast_off_greedy(model, src, 10)
            np.testing.assert_array_equal(tokens, plain_tokens)
            assert_close(scores, plain_scores, np.float32)
        block = kept_block()
        src = ragged_sources(9)
        kernel = decoder_kernel.DecoderKernel(model, src, src != PAD, 9, 10)
        assert shares_block(kernel, block)  # 9 rows fit the block the first 9-row decode asked for
        del kernel
    decode_memory.release_decode_memory()
    assert kept_block() is None


def fast_off_greedy(model, src, max_len):
    with fast.tricks_off("decoder_kernel"):
        return greedy_decode(model, src, BOS, NEVER, max_len)


LAYOUTS = {  # (TRANSPOSED_FROM_ROWS, PANELS_FROM_ROWS): the decoder's weights (out, in), (in, out), panels
    "rows": (10 ** 9, 10 ** 9), "transposed": (1, 10 ** 9), "panels": (10 ** 9, 1)}


def use_layout(monkeypatch, layout):
    transposed_from, panels_from = LAYOUTS[layout]
    monkeypatch.setattr(decoder_weights, "TRANSPOSED_FROM_ROWS", transposed_from)
    monkeypatch.setattr(decoder_weights, "PANELS_FROM_ROWS", panels_from)
    monkeypatch.setattr(fast.TRICKS, "decoder_layouts", True)  # the trick that picks them, on (TINYGRAD_LITE_FAST=0)
    monkeypatch.setattr(panels, "wide_vectors", lambda: True)  # correct on any CPU, used on AVX-512 ones


def layout_of(kernel) -> str:
    stack = kernel.stack
    if stack.qkv_w.ndim == 4:
        assert stack.attn_w.ndim == 5 and stack.w_1.ndim == stack.w_2.ndim == 4
        assert kernel.generator[0].ndim == 3
        return "panels"
    return "transposed" if stack.transposed else "rows"


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("variant", list(VARIANTS))
@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_every_weight_layout_gives_the_plain_tokens_and_scores(layout, variant, dtype, monkeypatch):
    """Decodes of TRANSPOSED_FROM_ROWS rows or more store the decoder's weights as (in, out); in
    float32, from PANELS_FROM_ROWS rows on a CPU with AVX-512, packed into panels instead."""
    model = model_of(variant, dtype)
    src = ragged_sources(6)
    plain_tokens, plain_scores = fast_off_greedy(model, src, 12)
    use_layout(monkeypatch, layout)
    with tl.no_grad():
        kernel = decoder_kernel.DecoderKernel(model, src, src != PAD, 6, 12)
        assert layout_of(kernel) == ("rows" if layout == "panels" and dtype == np.float64 else layout)
        tokens, scores = kernel.greedy(BOS, NEVER, PAD, 12)
        del kernel
    np.testing.assert_array_equal(tokens, plain_tokens)
    assert_close(scores, plain_scores, dtype)


@pytest.mark.parametrize("layout, rows", [("transposed", 1), ("transposed", 5),  # one row: np.dot; more: sgemm
                                          ("panels", 2), ("panels", 9), ("panels", 20)])
def test_each_weight_layout_gives_each_steps_plain_log_probs(layout, rows, monkeypatch):
    use_layout(monkeypatch, layout)
    model = model_of("pre-LN, final norm" if layout == "transposed" else "post-LN, final norm, tied", np.float32)
    src = ragged_sources(rows)
    prefix = np.random.default_rng(3).integers(4, 29, size=(rows, 7))
    prefix[:, 0] = BOS
    with tl.no_grad():
        fused = decoder_kernel.DecoderKernel(model, src, src != PAD, rows, 7)
        assert layout_of(fused) == layout
        plain = decoding.CachedSteps(model, src, decoding.padding_mask(src, PAD))
        for t in range(1, 8):
            assert_close(fused.step(prefix[:, :t], np.arange(rows)), plain.step(prefix[:, :t], np.arange(rows)),
                         np.float32)


def test_beam_search_on_panels_gives_the_plain_hypotheses(monkeypatch):
    use_layout(monkeypatch, "panels")
    model = model_of("post-LN, final norm, tied", np.float32)
    fused, plain = both(lambda: beam_search_batch(model, ragged_sources(3), BOS, 5, beam_size=3, max_len=6))
    for (tokens, logp, norm), (plain_tokens, plain_logp, plain_norm) in zip(fused, plain):
        np.testing.assert_array_equal(tokens, plain_tokens)
        assert_close([logp, norm], [plain_logp, plain_norm], np.float32)


def test_by_default_one_row_keeps_the_weights_as_they_are_and_more_rows_take_panels_on_avx512():
    model = model_of("post-LN", np.float32)
    with tl.no_grad(), fast.tricks_on("decoder_layouts"):
        for rows in (1, 2, 40):
            src = ragged_sources(rows)
            kernel = decoder_kernel.DecoderKernel(model, src, src != PAD, rows, 4)
            expected = ("panels" if panels.wide_vectors() else "transposed" if rows >= 32 else "rows") if rows >= 2 \
                else "rows"
            assert layout_of(kernel) == expected
            del kernel


@pytest.mark.parametrize("rows", [1, 64])
def test_decoder_layouts_off_keeps_the_linears_layout_and_np_dot_with_the_same_tokens(rows):
    """TRICKS.decoder_layouts off: (out, in) weights and np.dot at every row count; greedy decoding
    and beam search (rows = sentences × beam) give the tokens and log-probs the trick's layouts give."""
    model = model_of("pre-LN, final norm", np.float32)
    src = ragged_sources(rows)
    beam_src, beam_size = (ragged_sources(1), 1) if rows == 1 else (ragged_sources(16), 4)
    with fast.tricks_on("decoder_kernel"), tl.no_grad():
        for switch in (fast.tricks_on, fast.tricks_off):
            with switch("decoder_layouts"):
                kernel = decoder_kernel.DecoderKernel(model, src, src != PAD, rows, 4)
                plain = switch is fast.tricks_off
                assert (layout_of(kernel) == "rows") == (plain or rows == 1), layout_of(kernel)
                assert kernel.stack.numpy_sgemm == (not plain and decoder_kernel._kernels().numpy_sgemm)
                del kernel
        (tokens, scores), (plain_tokens, plain_scores) = trick_switches.both(
            lambda: greedy_decode(model, src, BOS, NEVER, 12), "decoder_layouts")
        beams, plain_beams = trick_switches.both(
            lambda: beam_search_batch(model, beam_src, BOS, 5, beam_size=beam_size, max_len=8), "decoder_layouts")
    assert tokens.shape == (rows, 12)
    np.testing.assert_array_equal(tokens, plain_tokens)
    assert_close(scores, plain_scores, np.float32)
    for (tokens, logp, norm), (plain_tokens, plain_logp, plain_norm) in zip(beams, plain_beams, strict=True):
        np.testing.assert_array_equal(tokens, plain_tokens)
        assert_close([logp, norm], [plain_logp, plain_norm], np.float32)
