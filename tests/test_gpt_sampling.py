"""transformer.gpt.sampling: the next token's distribution against hand-computed ones and many draws;
greedy, seeds, the cached path against its full-forward oracle (past block_size too), the gpt_kernel
trick against the plain path, the streaming decoders, and `gpt sample` on a tiny checkpoint."""
from __future__ import annotations

import contextlib

import numpy as np
import pytest

import tinygrad_lite as tl
from tinygrad_lite import fast, kernels
from transformer.gpt import GPT, GPTConfig
from transformer.gpt.sampling import Context, draw, generate, next_token_probs
from transformer.gpt.tokenizers import CharTokenizer, SubwordTokenizer

P = np.array([0.15, 0.5, 0.05, 0.2, 0.1])  # ranked: 1 (0.5), 3 (0.2), 0 (0.15), 4 (0.1), 2 (0.05)
LOGITS = np.log(P) + 3.0                   # softmax(LOGITS) = P


def tiny_gpt(block_size=8, dtype=np.float32, seed=0, **options) -> GPT:
    """A small GPT whose weights are scaled up, so its next-token distributions are far from uniform."""
    tl.manual_seed(seed)
    model = GPT(GPTConfig(vocab_size=11, block_size=block_size, n_layer=2, n_head=2, n_embd=16, **options), dtype)
    rng = np.random.default_rng(seed)
    for p in model.parameters():
        p.data[...] += (0.3 * rng.standard_normal(p.shape)).astype(dtype)
    return model


# ---------------------------------------------------------------- the distribution
@pytest.mark.parametrize("kwargs, expected", [
    ({}, P),
    ({"top_k": 2}, [0, 0.5 / 0.7, 0, 0.2 / 0.7, 0]),
    ({"top_k": 99}, P),                                           # more than the vocabulary: no cut
    ({"top_p": 0.8}, [0.15 / 0.85, 0.5 / 0.85, 0, 0.2 / 0.85, 0]),  # 0.5, 0.7 < 0.8, 0.85 reaches it
    ({"top_p": 0.4}, [0, 1, 0, 0, 0]),                            # the first token alone reaches it
    ({"top_p": 1.0}, P),
    ({"top_k": 3, "top_p": 0.75}, [0, 0.5 / 0.7, 0, 0.2 / 0.7, 0]),  # within the top 3: 0.59, 0.82 >= 0.75
    ({"temperature": 2.0}, np.sqrt(P) / np.sqrt(P).sum()),        # p^(1/T), renormalised
    ({"temperature": 0.5}, P ** 2 / (P ** 2).sum()),
    ({"temperature": 0}, [0, 1, 0, 0, 0]),                        # greedy
    ({"temperature": 0, "top_k": 1, "top_p": 0.1}, [0, 1, 0, 0, 0]),
])
def test_next_token_probs_equal_the_hand_computed_distribution(kwargs, expected):
    np.testing.assert_allclose(next_token_probs(LOGITS, **kwargs), expected, rtol=1e-12, atol=1e-15)


def test_next_token_probs_work_on_the_last_axis_and_break_ties_by_id():
    rows = np.stack([LOGITS, LOGITS[::-1]])
    np.testing.assert_allclose(next_token_probs(rows, top_k=2)[1], [0, 0.2 / 0.7, 0, 0.5 / 0.7, 0])
    tied = np.array([1.0, 3.0, 3.0, 0.0])
    np.testing.assert_array_equal(next_token_probs(tied, temperature=0), [0, 1, 0, 0])
    assert next_token_probs(tied, top_k=1)[1] == 1
    assert next_token_probs(np.array([-1e30, 1e30]), temperature=1e-9)[1] == 1  # no overflow


@pytest.mark.parametrize("kwargs, allowed", [({"top_k": 3}, [1, 3, 0]), ({"top_p": 0.8}, [1, 3, 0]),
                                             ({"top_k": 2, "temperature": 1.5}, [1, 3])])
def test_many_draws_hit_only_the_allowed_tokens_at_their_probabilities(kwargs, allowed):
    probs = next_token_probs(LOGITS, **kwargs)
    rng = np.random.default_rng(0)
    n = 20_000
    counts = np.bincount([draw(probs, rng) for _ in range(n)], minlength=len(P))
    assert set(np.flatnonzero(counts)) == set(allowed)
    sigma = np.sqrt(n * probs * (1 - probs))
    assert (np.abs(counts - n * probs) <= 6 * sigma + 1).all(), (counts, n * probs)


def test_a_token_of_probability_zero_is_never_drawn():
    rng = np.random.default_rng(1)
    probs = np.array([0.0, 0.5, 0.0, 0.5, 0.0])
    assert {draw(probs, rng) for _ in range(2_000)} == {1, 3}
    assert draw(np.array([0, 0, 1.0, 0]), rng) == 2


@pytest.mark.parametrize("kwargs, words", [
    ({"temperature": -0.1}, "temperature must be finite and >= 0"),
    ({"temperature": float("nan")}, "temperature"),
    ({"top_k": 0}, "top_k must be a positive int, got 0"),
    ({"top_k": 2.5}, "top_k must be a positive int"),
    ({"top_p": 1.5}, "top_p must be finite and in (0, 1]"),
    ({"top_p": 0}, "top_p must be finite and in (0, 1]"),
])
def test_bad_sampling_arguments_are_named(kwargs, words):
    with pytest.raises(ValueError, match="next_token_probs: ") as info:
        next_token_probs(LOGITS, **kwargs)
    assert words in str(info.value)
    with pytest.raises(ValueError, match="generate: "):
        generate(tiny_gpt(), [1, 2], 5, **kwargs)  # checked when called, before the first token


def test_bad_prompts_and_lengths_are_named():
    model = tiny_gpt()
    for ids, words in (([], "T >= 1"), ([[1, 2], [3, 4]], "shape"), ([1, 11], "token id 11 is outside"),
                       ([-1], "token id -1")):
        with pytest.raises(ValueError, match=words):
            generate(model, ids, 3)
    with pytest.raises(ValueError, match="max_new_tokens must be an int >= 0"):
        generate(model, [1], -1)
    with pytest.raises(ValueError, match="NaN"):
        next_token_probs(np.array([0.0, np.nan]))
    assert list(generate(model, [1], 0)) == []


# ---------------------------------------------------------------- generate
def oracle_logits(model, prompt, tokens):
    """The logits before each of `tokens`, by the full forward of the window (the oracle)."""
    context = Context(model, prompt, use_cache=False)
    out = []
    for token in tokens:
        out.append(context.logits())
        context.append(token)
    return out


def test_greedy_is_the_argmax_of_the_full_forward_whatever_the_seed():
    model = tiny_gpt()
    tokens = list(generate(model, [3, 1, 4], 30, temperature=0, seed=1))
    assert tokens == list(generate(model, [3, 1, 4], 30, temperature=0, seed=2))
    assert tokens == [int(np.argmax(z)) for z in oracle_logits(model, [3, 1, 4], tokens)]


def test_top_k_and_top_p_samples_stay_in_their_sets_at_every_step():
    model = tiny_gpt()
    for kwargs in ({"top_k": 2}, {"top_p": 0.6}, {"top_k": 3, "top_p": 0.5}):
        tokens = list(generate(model, [3, 1, 4], 40, seed=5, **kwargs))
        for token, logits in zip(tokens, oracle_logits(model, [3, 1, 4], tokens)):
            assert next_token_probs(logits, **kwargs)[token] > 0


def test_a_seed_reproduces_a_sample_and_other_seeds_differ():
    model = tiny_gpt()
    first = list(generate(model, [2], 40, temperature=1.5, seed=7))
    assert first == list(generate(model, [2], 40, temperature=1.5, seed=7))
    assert first != list(generate(model, [2], 40, temperature=1.5, seed=8))


def test_generate_streams_and_gives_the_model_its_mode_back():
    model = tiny_gpt().train()
    stream = generate(model, [1, 2], 5, seed=0)
    assert model.training                      # nothing runs before the first token is asked for
    next(stream)
    assert not model.training                  # eval mode while the iterator runs
    assert tl.is_grad_enabled()                # no_grad stays inside each step, never leaks to the caller
    stream.close()
    assert model.training


def test_the_window_holds_the_last_block_size_tokens_then_restarts_from_half():
    """block_size 8: a long prompt is cropped to its last 8 (as nanoGPT); a full window restarts from its last 4."""
    context = Context(tiny_gpt(block_size=8), list(range(10)) + [1], use_cache=False)
    seen = [context.window()[0].tolist()]
    for token in range(2, 8):
        context.append(token)
        seen.append(context.window()[0].tolist())
    assert seen[0] == [3, 4, 5, 6, 7, 8, 9, 1]
    assert seen[1] == [8, 9, 1, 2]                          # 9 would not fit: the last 4
    assert [len(w) for w in seen] == [8, 4, 5, 6, 7, 8, 4]
    assert seen[-1] == [4, 5, 6, 7]


@contextlib.contextmanager
def kernel_switched(on: bool):
    """The gpt_kernel trick on (on the Numba backend) or off."""
    if not on:
        with fast.tricks_off("gpt_kernel"):
            yield
        return
    with kernels.use_backend("numba"), fast.tricks_on("gpt_kernel"):
        yield


@pytest.mark.parametrize("kernel", [False, True], ids=["plain", "gpt_kernel"])
@pytest.mark.parametrize("prompt", [[3, 1, 4], list(range(11)) + [5, 5]], ids=["short", "longer-than-block"])
def test_cached_sampling_equals_the_full_recomputation_past_block_size(kernel, prompt):
    """The same tokens for the same seed (the window restarts four times), logits within 1e-5."""
    model = tiny_gpt(block_size=8)
    with kernel_switched(kernel):
        cached = list(generate(model, prompt, 40, temperature=1.2, top_k=6, seed=3))
        context = Context(model, prompt)
        assert (context.kernel is not None) == kernel
        logits = []
        for token in cached:
            logits.append(context.logits())
            context.append(token)
    assert cached == list(generate(model, prompt, 40, temperature=1.2, top_k=6, seed=3, use_cache=False))
    full = oracle_logits(model, prompt, cached)
    assert max(np.abs(a - b).max() for a, b in zip(logits, full)) < 1e-5


@pytest.mark.parametrize("options, dtype", [
    ({}, np.float32),                                                            # nanoGPT's: pre-LN, gelu_tanh
    ({"bias": True, "norm_first": False, "activation": "gelu", "positions": "sinusoidal"}, np.float32),
    ({"bias": True, "activation": "relu"}, np.float64),
])
def test_the_gpt_kernel_equals_the_plain_cached_path(options, dtype):
    model = tiny_gpt(block_size=6, dtype=dtype, **options)
    prompt, tokens = [1, 2, 3, 4], list(np.random.default_rng(0).integers(0, 11, 20))
    runs = []
    for on in (True, False):
        with kernel_switched(on):
            context = Context(model, prompt)
            assert (context.kernel is not None) == on
            out = []
            for token in tokens:
                out.append(context.logits())
                context.append(token)
            runs.append(np.stack(out))
    np.testing.assert_allclose(runs[0], runs[1], atol=1e-5 if dtype == np.float32 else 1e-12, rtol=0)


# ---------------------------------------------------------------- streaming text
def test_streaming_decoders_give_decode_of_all_ids():
    text = "ROMEO: 你好, wörld — ok\n"
    ids = list(generate(tiny_gpt(), [1], 50, seed=4))           # any ids of the 11 characters
    char = CharTokenizer(sorted(set(text))[:11])
    decoder = char.decoder()
    assert "".join(decoder.push(i) for i in ids) + decoder.flush() == char.decode(ids)
    try:
        bpe = SubwordTokenizer.train(text * 20, 280)
    except ImportError:
        pytest.skip("HuggingFace tokenizers is not installed")
    ids = bpe.encode(text * 2)
    decoder = bpe.decoder()
    pieces = [decoder.push(i) for i in ids]
    assert "".join(pieces) + decoder.flush() == bpe.decode(ids) == text * 2
    assert all("\ufffd" not in piece for piece in pieces)      # never half a character


# ---------------------------------------------------------------- python -m transformer gpt sample
TEXT = "ROMEO: hello wörld, 你好!\n"


@pytest.fixture
def checkpoint(tmp_path):
    """A tiny GPT saved as gpt train's best.safetensors is: GPT.save with the tokenizer in the metadata."""
    tokenizer = CharTokenizer.train(TEXT)
    tl.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=tokenizer.vocab_size, block_size=8, n_layer=1, n_head=2, n_embd=16))
    path = tmp_path / "tiny.safetensors"
    model.save(path, {"tokenizer": tokenizer.to_dict()})
    return path, model, tokenizer


class Recorder:
    """sys.stdout for the CLI: what each write got, and the flushes."""

    def __init__(self):
        self.writes, self.flushes = [], 0

    def write(self, text):
        self.writes.append(text)
        return len(text)

    def flush(self):
        self.flushes += 1


def run_cli(argv) -> int:
    from transformer.gpt.__main__ import main
    try:
        return main(argv)
    except SystemExit as e:  # argparse's own errors
        return e.code


def test_sample_prints_the_prompt_then_the_tokens_as_they_come(checkpoint, monkeypatch, capsys):
    path, model, tokenizer = checkpoint
    out = Recorder()
    monkeypatch.setattr("sys.stdout", out)
    args = ["sample", "--checkpoint", str(path), "--prompt", "ROMEO:", "--max-new-tokens", "30", "--seed", "1",
            "--temperature", "0.9", "--top-k", "10", "--top-p", "0.95"]
    assert run_cli(args) == 0
    ids = list(generate(model, tokenizer.encode("ROMEO:"), 30, temperature=0.9, top_k=10, top_p=0.95, seed=1))
    assert "".join(out.writes) == "ROMEO:" + tokenizer.decode(ids) + "\n"
    assert out.flushes >= 30                       # one per token: the text streams
    assert "seed" not in capsys.readouterr().err   # a given seed is not repeated back


def test_sample_writes_num_samples_with_successive_seeds(checkpoint, capsys):
    path, model, tokenizer = checkpoint
    assert run_cli(["sample", "--checkpoint", str(path), "--prompt", "he", "--max-new-tokens", "12",
                    "--num-samples", "2", "--seed", "5", "--temperature", "0"]) == 0
    greedy = "he" + tokenizer.decode(list(generate(model, tokenizer.encode("he"), 12, temperature=0)))
    assert capsys.readouterr().out == f"{greedy}\n---------------\n{greedy}\n"
    assert run_cli(["sample", "--checkpoint", str(path), "--max-new-tokens", "3", "--num-samples", "2"]) == 0
    seed = capsys.readouterr().err.strip().splitlines()[-1]
    assert seed.startswith("(seed ") and "--seed" in seed   # a fresh seed is shown, to write it again


@pytest.mark.parametrize("flags, words", [
    (["--top-k", "0"], "--top-k: must be > 0, got 0"),
    (["--top-p", "1.5"], "--top-p must be in (0, 1], got 1.5"),
    (["--top-p", "0"], "--top-p: must be > 0"),
    (["--temperature", "-0.5"], "--temperature: must be a finite number >= 0"),
    (["--prompt", "ROMEO: Zzz"], "'Z' (U+005A) at position 7"),
    (["--prompt", ""], "--prompt is empty"),
    (["--max-new-tokens", "-1"], "--max-new-tokens: must be >= 0"),
])
def test_sample_refuses_bad_arguments_in_one_line(checkpoint, capsys, flags, words):
    path = checkpoint[0]
    assert run_cli(["sample", "--checkpoint", str(path), *flags]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert len(captured.err.strip().splitlines()) == 1 and words in captured.err


def test_sample_refuses_a_missing_or_wrong_checkpoint(tmp_path, capsys):
    assert run_cli(["sample", "--checkpoint", str(tmp_path / "nope.safetensors")]) == 2
    assert "does not exist" in capsys.readouterr().err
    (tmp_path / "bad.safetensors").write_bytes(b"not a checkpoint at all")
    assert run_cli(["sample", "--checkpoint", str(tmp_path / "bad.safetensors")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "bad.safetensors" in err[0]
    GPT(GPTConfig(vocab_size=5, block_size=4, n_layer=1, n_head=1, n_embd=4)).save(tmp_path / "bare.safetensors")
    assert run_cli(["sample", "--checkpoint", str(tmp_path / "bare.safetensors")]) == 2
    assert "holds no tokenizer" in capsys.readouterr().err


def test_sample_never_splits_a_character_across_writes(tmp_path, monkeypatch):
    """A bpe checkpoint whose "sample" is text cut mid-character by its tokens: every write is whole characters."""
    try:
        tokenizer = SubwordTokenizer.train(TEXT * 30, 262)
    except ImportError:
        pytest.skip("HuggingFace tokenizers is not installed")
    tl.manual_seed(0)
    GPT(GPTConfig(vocab_size=tokenizer.vocab_size, block_size=8, n_layer=1, n_head=2, n_embd=16)).save(
        tmp_path / "bpe.safetensors", {"tokenizer": tokenizer.to_dict()})
    ids = tokenizer.encode(TEXT * 2)
    assert any(not is_utf8(tokenizer.token_bytes[i]) for i in ids)     # some token holds part of a character
    monkeypatch.setattr("transformer.gpt.sampling.generate", lambda *args, **kwargs: iter(ids))
    out = Recorder()
    monkeypatch.setattr("sys.stdout", out)
    assert run_cli(["sample", "--checkpoint", str(tmp_path / "bpe.safetensors"), "--prompt", "你"]) == 0
    assert "".join(out.writes) == "你" + TEXT * 2 + "\n"
    assert not any("\ufffd" in w for w in out.writes)                # never half a character


def is_utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


# ---------------------------------------------------------------- the benchmark still runs
def test_the_sampling_benchmark_runs(tmp_path):
    """bench/gpt_sample.py --quick: every side writes its tokens; ours and the cached twin, greedy on the same
    weights, agree (on at least half the tokens: random weights leave near-ties float32 may break apart)."""
    pytest.importorskip("torch")
    import json
    import subprocess
    import sys
    from pathlib import Path
    root = Path(__file__).resolve().parents[1]
    out = tmp_path / "s.jsonl"
    done = subprocess.run([sys.executable, str(root / "bench" / "gpt_sample.py"), "--quick", "--json", str(out)],
                          cwd=root, capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    rows = {r["mode"]: r for r in map(json.loads, out.read_text().splitlines())}
    assert set(rows) == {"greedy", "sampled"}
    for row in rows.values():
        assert all(row[f"tok_s_{side}"] > 0 for side in ("ours", "ours-plain", "torch", "torch+cache"))
    assert rows["greedy"]["greedy_agreement"] >= rows["greedy"]["new_tokens"] // 2
    assert "| greedy |" in done.stdout and "| sampled |" in done.stdout
