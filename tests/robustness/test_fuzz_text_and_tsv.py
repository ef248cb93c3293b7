"""Hostile text and files for the translator's data path: tokenizers, Vocab (through a real
checkpoint's JSON metadata) and translation take any Unicode string — emoji sequences,
control and bidi characters, lone surrogates, mixed scripts, the empty string — without
crashing; the TSV loader reads any bytes and names every bad line."""
import pathlib
import tempfile
import unicodedata
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tinygrad_lite as tl
from tinygrad_lite.checkpoint import load, save
from transformer import Transformer
from transformer.data import (
    SPECIAL_TOKENS,
    UNK,
    Vocab,
    detokenize_en,
    detokenize_zh,
    load_pairs,
    tokenize_en,
    tokenize_zh,
)
from transformer.translator import Translator, TranslatorError

NASTY = [
    "👩‍👩‍👧", "🇨🇳", "👍🏽", "❤️", "🏳️‍🌈", "\U0001F600",                       # emoji: ZWJ, flags, modifiers, VS16
    "\x00", "\x07", "\x1b", "\x7f", "\x85", "\x9f", "\r", "\t", "\n", "\x0b", "\x0c",   # C0/C1 controls
    "\u200b", "\u200c", "\u200d", "\u2028", "\u2029", "\u202e", "\u2066", "\ufeff", "\u00a0", "\u3000",
    "\ud800", "\udfff", "\udcff",                                            # lone surrogates
    "中", "文", "𠀀", "龘", "。", "，", "？", "ｉＰｈｏｎｅ", "１２３", "٣", "e\u0301", "İ", "ß", "ẞ", "ﬁ",
    "שלום", "مرحبا", "नमस्ते", "Привет", "Ελλάδα", "日本語", "한국어", "ไทย",
    "don't", "3.5", "1,000", "10:30", "...", "—", "’", "iPhone", "<pad>", "<unk>", "<bos>", "<eos>",
]
pieces = st.one_of(st.sampled_from(NASTY), st.text(max_size=6),
                   st.characters(codec=None, categories=None, exclude_categories=()))
hostile_text = st.one_of(st.just(""), st.lists(pieces, max_size=12).map("".join))


def _clean_tokens(tokens):
    return all(isinstance(t, str) and t and not any(ch.isspace() for ch in t)
               and not (len(t) == 1 and unicodedata.category(t) == "Cc") for t in tokens)


@settings(max_examples=400, deadline=None)
@given(hostile_text)
def test_zh_tokenizer_round_trips_hostile_text(count_example, text):
    tokens = tokenize_zh(text)
    assert _clean_tokens(tokens)
    assert tokenize_zh(detokenize_zh(tokens)) == tokens
    count_example("tokenize_zh/detokenize_zh round trip")


@settings(max_examples=400, deadline=None)
@given(hostile_text, st.booleans(), st.booleans())
def test_en_tokenizer_round_trips_hostile_text(count_example, text, lowercase, attach):
    tokens = tokenize_en(text, lowercase=lowercase)
    assert _clean_tokens(tokens)
    again = tokenize_en(detokenize_en(tokens), lowercase=lowercase)
    assert again == tokens
    assert isinstance(detokenize_en(tokens, attach_punctuation=attach), str)
    count_example("tokenize_en/detokenize_en round trip")


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(st.sampled_from(NASTY + [""]), st.text(max_size=4)), max_size=8))
def test_detokenizers_accept_any_token_list(count_example, tokens):
    for function in (detokenize_zh, detokenize_en):
        assert isinstance(function(tokens), str)
    count_example("detokenize_* on arbitrary token lists")


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(hostile_text, min_size=1, max_size=5))
def test_vocab_of_hostile_tokens_survives_a_checkpoint(count_example, sentences):
    """Tokens with surrogates, NULs and emoji go through safetensors' JSON metadata and back."""
    token_lists = [tokenize_zh(s) + tokenize_en(s, lowercase=False) for s in sentences]
    vocab = Vocab.build(token_lists)
    with tempfile.TemporaryDirectory() as folder:
        path = pathlib.Path(folder) / "vocab.safetensors"
        save({"ids": np.arange(len(vocab))}, path, {"vocab": vocab.to_dict()})
        arrays, meta = load(path)
    restored = Vocab.from_dict(meta["vocab"])
    assert restored == vocab and arrays["ids"].tolist() == list(range(len(vocab)))
    for tokens in token_lists:
        ids = restored.encode(tokens, add_bos=True, add_eos=True)
        expected = [t for t in tokens if t not in SPECIAL_TOKENS]
        assert [t for t in restored.decode(ids) if t not in SPECIAL_TOKENS] == expected
        assert all(i != UNK for i, t in zip(ids[1:], tokens) if t not in SPECIAL_TOKENS)
    count_example("Vocab through a checkpoint")


@pytest.fixture(scope="module")
def tiny_translator():
    tl.manual_seed(0)
    src = Vocab.build([list("这是一个苹果。我喜欢茶")])
    tgt = Vocab.build([["this", "is", "an", "apple", "."]])
    model = Transformer(len(src), len(tgt), d_model=8, h=2, N=1, d_ff=16, dropout=0.0)
    model.eval()
    return Translator(model, src, tgt, max_train_len=8, complete_punctuation=True)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(hostile_text.filter(lambda s: len(s) <= 40))
def test_translating_hostile_text_gives_text_or_a_clear_error(count_example, tiny_translator, text):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            out = tiny_translator.translate(text)
        except TranslatorError as error:
            assert "translate:" in str(error)
            assert not tokenize_zh(tiny_translator.normalize_source(text)) or not text.strip()
        else:
            assert isinstance(out, str)
            assert all(t in tiny_translator.tgt_vocab for t in tokenize_en(out, lowercase=False))
    count_example("Translator.translate on hostile text")


# ---------------------------------------------------------------- the TSV loader
GOOD_EN = st.text(st.characters(codec="utf-8", exclude_characters="\t\n\r"), min_size=1, max_size=12) \
    .filter(lambda s: s.strip())
GOOD_ZH = st.lists(st.sampled_from(list("我你他是的一个苹果茶喜欢中文龘𠀀")), min_size=1, max_size=6).map("".join)
NO_TAB = st.text(st.characters(codec="utf-8", exclude_characters="\t\n\r"), max_size=10)


@st.composite
def tsv_lines(draw):
    """(raw line bytes, expected pair or the start of the expected reason)."""
    kind = draw(st.sampled_from(["good", "good", "good", "blank", "columns", "empty zh", "empty en",
                                 "no chinese", "bad utf-8"]))
    if kind == "good":
        zh, en = draw(GOOD_ZH), draw(GOOD_EN)
        pad = draw(st.sampled_from(["", " ", "\u3000"]))
        return f"{pad}{zh}{pad}\t{en}".encode(), (zh, en.strip())
    if kind == "blank":
        return draw(st.sampled_from(["", " ", "  ", "\u3000", "\t", " \t "])).encode(), "blank line"
    if kind == "columns":
        parts = draw(st.lists(GOOD_ZH, min_size=3, max_size=5)) if draw(st.booleans()) else [draw(GOOD_ZH)]
        return "\t".join(parts).encode(), "expected 2 tab-separated columns"
    if kind == "empty zh":
        return f" \t{draw(GOOD_EN)}".encode(), "empty Chinese side"
    if kind == "empty en":
        return f"{draw(GOOD_ZH)}\t ".encode(), "empty English side"
    if kind == "no chinese":
        latin = draw(st.text("abcXYZ019 !?", min_size=1, max_size=8).filter(lambda s: s.strip()))
        return f"{latin}\t{draw(GOOD_EN)}".encode(), "Chinese column has no Chinese character"
    zh = draw(GOOD_ZH)
    junk = draw(st.sampled_from([b"\xff", b"\xc3\x28", b"\xe4\xb8", b"\xed\xa0\x80", b"\xf8\x88\x80\x80\x80"]))
    return zh.encode() + junk + b"\t" + draw(GOOD_EN).encode(), "not valid UTF-8"


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(tsv_lines(), min_size=1, max_size=15), st.sampled_from([b"\n", b"\r\n"]), st.booleans(),
       st.booleans())
def test_loader_keeps_every_good_line_and_names_every_bad_one(count_example, lines, newline, bom, final_newline):
    raw = newline.join(line for line, _ in lines) + (newline if final_newline else b"")
    if not final_newline and lines[-1][0] == b"":
        lines = lines[:-1]  # "a\n" + "" is "a\n": the last newline ends no line
    if bom:
        raw = "\ufeff".encode() + raw
    good = [(n, want) for n, (_, want) in enumerate(lines, start=1) if isinstance(want, tuple)]
    bad = [(n, want) for n, (_, want) in enumerate(lines, start=1) if isinstance(want, str)]
    with tempfile.TemporaryDirectory() as folder:
        path = pathlib.Path(folder) / "pairs.tsv"
        path.write_bytes(raw)
        if not raw.strip():
            with pytest.raises(ValueError, match="pairs.tsv.* is empty"):
                load_pairs(path, fmt="zh-en")
        elif not good:
            with pytest.raises(ValueError, match=r"no usable line in .*pairs.tsv.*line \d+"):
                load_pairs(path, fmt="zh-en")
        else:
            result = load_pairs(path, fmt="zh-en")
            assert result.pairs == [want for _, want in good]
            assert [n for n, _ in result.bad_lines] == [n for n, _ in bad]
            for (_, reason), (_, want) in zip(result.bad_lines, bad):
                assert reason.startswith(want), (reason, want)
            assert result.n_lines == len(lines)
    count_example("load_pairs on generated good/bad lines")


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=2000), st.sampled_from(["auto", "zh-en", "en-zh", "tatoeba"]))
def test_loader_on_random_bytes_parses_or_reports_the_file(count_example, raw, fmt):
    with tempfile.TemporaryDirectory() as folder:
        path = pathlib.Path(folder) / "random.tsv"
        path.write_bytes(raw)
        try:
            result = load_pairs(path, fmt=fmt)
        except ValueError as error:
            assert "random.tsv" in str(error) and "\n" not in str(error)
        else:
            numbers = [n for n, _ in result.bad_lines]
            assert numbers == sorted(set(numbers)) and all(1 <= n <= result.n_lines for n in numbers)
            assert len(result.pairs) + len(numbers) == result.n_lines
            assert all(zh.strip() == zh and en.strip() == en and zh and en for zh, en in result.pairs)
            assert len(result.attributions) == len(result.pairs)
    count_example("load_pairs on random bytes")
