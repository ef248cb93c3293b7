"""Tokenizers and Vocab: examples, corpus round trips, and hypothesis on arbitrary Unicode."""

import json
import random
import unicodedata

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from transformer.data import (
    BOS,
    EOS,
    PAD,
    SPECIAL_TOKENS,
    UNK,
    Vocab,
    detokenize_en,
    detokenize_zh,
    iter_all_pairs,
    tokenize_en,
    tokenize_zh,
)

# Any Unicode, including control characters, surrogate-free by necessity of str encoding.
any_text = st.text(st.characters(exclude_categories=("Cs",)), max_size=60)
mixed_text = st.text(st.sampled_from(list("我有个苹果。？ aZ9.,'’-\t\n\x00😀é\u0301İ")), max_size=40)


# ---------------------------------------------------------------- Chinese


@pytest.mark.parametrize("text, tokens", [
    ("我有3个iPhone", ["我", "有", "3", "个", "iPhone"]),
    ("这是一个苹果。", ["这", "是", "一", "个", "苹", "果", "。"]),
    ("  他 喜欢\t猫 \n", ["他", "喜", "欢", "猫"]),
    ("价格是3.5元", ["价", "格", "是", "3.5", "元"]),
    ("iPhone 15 很贵", ["iPhone", "15", "很", "贵"]),
    ("", []),
])
def test_tokenize_zh_examples(text, tokens):
    assert tokenize_zh(text) == tokens


def test_detokenize_zh_keeps_latin_words_apart():
    assert detokenize_zh(["我", "有", "3", "个", "iPhone"]) == "我有3个iPhone"
    assert detokenize_zh(["iPhone", "15", "很", "贵"]) == "iPhone 15很贵"


def _visible(text: str) -> str:
    return "".join(ch for ch in text if not ch.isspace() and unicodedata.category(ch) != "Cc")


@settings(max_examples=300, deadline=None)
@given(st.one_of(any_text, mixed_text))
def test_zh_tokenizer_round_trips_any_text(text):
    tokens = tokenize_zh(text)
    assert all(tok and not any(ch.isspace() for ch in tok) for tok in tokens)
    assert "".join(tokens) == _visible(text)
    assert tokenize_zh(detokenize_zh(tokens)) == tokens


# ---------------------------------------------------------------- English


@pytest.mark.parametrize("text, tokens", [
    ("This is an apple.", ["this", "is", "an", "apple", "."]),
    ("Don't panic, it's 3.5 km!", ["don't", "panic", ",", "it's", "3.5", "km", "!"]),
    ("It’s 10:30... (maybe)", ["it's", "10:30", "...", "(", "maybe", ")"]),
    ("A well-known fact: 1,000 cats.", ["a", "well-known", "fact", ":", "1,000", "cats", "."]),
    ("Wait—what?", ["wait", "—", "what", "?"]),
    ("", []),
])
def test_tokenize_en_examples(text, tokens):
    assert tokenize_en(text) == tokens


def test_tokenize_en_can_keep_case():
    assert tokenize_en("Tom likes NYC.", lowercase=False) == ["Tom", "likes", "NYC", "."]


def test_detokenize_en():
    tokens = ["hello", ",", "world", "!", "(", "yes", ")", "it's", "3.5", "..."]
    assert detokenize_en(tokens) == "hello , world ! ( yes ) it's 3.5 ..."
    assert detokenize_en(tokens, attach_punctuation=True) == "hello, world! (yes) it's 3.5..."


@settings(max_examples=300, deadline=None)
@given(st.one_of(any_text, mixed_text), st.booleans())
def test_en_tokenizer_round_trips_any_text(text, lowercase):
    tokens = tokenize_en(text, lowercase=lowercase)
    assert all(tok and not any(ch.isspace() for ch in tok) for tok in tokens)
    assert tokenize_en(detokenize_en(tokens), lowercase=lowercase) == tokens
    attached = detokenize_en(tokens, attach_punctuation=True)
    assert "".join(attached.split(" ")) == "".join(tokens)


def test_tokenizers_reproduce_the_builtin_corpus_exactly():
    for zh, en in iter_all_pairs():
        assert tokenize_zh(zh) == list(zh)
        assert detokenize_zh(list(zh)) == zh
        assert tokenize_en(en) == en.split(" ")
        assert detokenize_en(en.split(" ")) == en


@pytest.mark.parametrize("function", [tokenize_zh, tokenize_en])
def test_tokenizers_reject_non_text(function):
    with pytest.raises(TypeError, match=function.__name__):
        function(b"bytes")


@pytest.mark.parametrize("function", [detokenize_zh, detokenize_en])
def test_detokenizers_reject_a_bare_string(function):
    with pytest.raises(TypeError, match=function.__name__):
        function("not a token list")


# ---------------------------------------------------------------- Vocab


def test_vocab_specials_and_order():
    vocab = Vocab.build([["b", "a", "c"], ["a", "c"], ["a", "d"]])
    assert vocab.tokens[:4] == list(SPECIAL_TOKENS) == ["<pad>", "<unk>", "<bos>", "<eos>"]
    assert (PAD, UNK, BOS, EOS) == (0, 1, 2, 3)
    assert vocab.tokens[4:] == ["a", "c", "b", "d"]  # by count, then alphabetically
    assert len(vocab) == 8


def test_vocab_min_freq_and_max_size():
    sentences = [["x"] * 3 + ["y"] * 2 + ["z"]]
    assert Vocab.build(sentences, min_freq=2).tokens[4:] == ["x", "y"]
    assert Vocab.build(sentences, max_size=5).tokens[4:] == ["x"]
    with pytest.raises(ValueError, match="Vocab.build: min_freq"):
        Vocab.build(sentences, min_freq=0)
    with pytest.raises(ValueError, match="Vocab.build: max_size"):
        Vocab.build(sentences, max_size=2)


def test_vocab_does_not_depend_on_input_order():
    sentences = [tokenize_en(en) for _, en in list(iter_all_pairs())[:2000]]
    shuffled = sentences[:]
    random.Random(3).shuffle(shuffled)
    assert Vocab.build(sentences) == Vocab.build(shuffled)


def test_vocab_encode_decode():
    vocab = Vocab.build([["i", "like", "tea", "."]])
    ids = vocab.encode(["i", "like", "coffee", "."], add_bos=True, add_eos=True)
    assert ids[0] == BOS and ids[-1] == EOS and ids[3] == UNK
    assert vocab.decode(ids) == ["i", "like", "<unk>", "."]
    assert vocab.decode(ids + [PAD, PAD], strip_special=False)[-3:] == ["<eos>", "<pad>", "<pad>"]
    assert vocab.decode(ids[:-1] + [EOS, vocab.token_to_id("tea")]) == ["i", "like", "<unk>", "."]
    assert vocab.unknown_tokens(["coffee", "i", "milk", "coffee"]) == ["coffee", "milk"]
    with pytest.raises(ValueError, match="Vocab.decode: expected an integer id in 0..7"):
        vocab.decode([8])
    with pytest.raises(TypeError, match="Vocab.encode"):
        vocab.encode("i like tea")


def test_vocab_json_round_trip():
    vocab = Vocab.build([tokenize_zh(zh) for zh, _ in list(iter_all_pairs())[:500]])
    restored = Vocab.from_dict(json.loads(json.dumps(vocab.to_dict())))
    assert restored == vocab
    assert [restored.token_to_id(t) for t in vocab.tokens] == list(range(len(vocab)))
    with pytest.raises(ValueError, match="Vocab.from_dict: expected format"):
        Vocab.from_dict({"format": "other", "tokens": []})
    with pytest.raises(ValueError, match="Vocab.from_dict: expected specials"):
        Vocab.from_dict({**vocab.to_dict(), "specials": ["<pad>"]})


token = st.text(min_size=1, max_size=4).filter(lambda t: t not in SPECIAL_TOKENS)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(token, max_size=8), max_size=8), st.booleans(), st.booleans())
def test_vocab_round_trips_every_seen_token(sentences, add_bos, add_eos):
    vocab = Vocab.build(sentences)
    assert len(vocab) == 4 + len({t for s in sentences for t in s})
    for sentence in sentences:
        ids = vocab.encode(sentence, add_bos=add_bos, add_eos=add_eos)
        assert UNK not in ids
        assert len(ids) == len(sentence) + add_bos + add_eos
        assert vocab.decode(ids) == sentence
        assert vocab.unknown_tokens(sentence) == []
    assert Vocab.from_dict(json.loads(json.dumps(vocab.to_dict()))) == vocab
