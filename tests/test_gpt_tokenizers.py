"""The GPT's tokenizers and built-in text: exact round trips (hypothesis, Chinese, emoji), the unknown
character's message, JSON round trips, streaming decoders that never show half a character,
builtin_text and nanoGPT's split."""
import json
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from transformer.gpt.text import builtin_text, docstrings, split
from transformer.gpt.tokenizers import (
    TOKENIZERS,
    CharTokenizer,
    SubwordTokenizer,
    tokenizer_from_dict,
    train_tokenizer,
)

pytest.importorskip("tokenizers")

CHINESE = ["我有3个iPhone。", "他们赢了。", "汤姆睡了。", "我们完成了吗？", "这是一个苹果，那是一只猫。",
           "你好，世界！"]
TRAINING = ("First Citizen:\nBefore we proceed any further, hear me speak.\n\nAll:\nSpeak, speak.\n\n"
            + "\n".join(CHINESE) + "\n\tTabs, CRLF\r\n and emoji 😀👍🏽, café, naïve.\n") * 20
any_text = st.text(st.characters(exclude_categories=("Cs",)), max_size=80)


@pytest.fixture(scope="module")
def bpe():
    return SubwordTokenizer.train(TRAINING, vocab_size=320)


@pytest.fixture(scope="module")
def english_bpe():
    """Trained on English only: every Chinese character and emoji is split into byte tokens."""
    return SubwordTokenizer.train("the quick brown fox jumps over the lazy dog. " * 50, vocab_size=300)


# ---------------------------------------------------------------- char


def test_char_vocabulary_is_the_sorted_characters():
    tok = CharTokenizer.train("hello, 世界")
    assert tok.kind == "char" and tok.chars == sorted(set("hello, 世界")) and tok.vocab_size == 8
    ids = tok.encode("lo世")
    assert ids.dtype == np.int64 and ids.tolist() == [tok.chars.index(c) for c in "lo世"]


CHAR_TOK = CharTokenizer.train(TRAINING)


@settings(max_examples=100, deadline=None)
@given(st.text(st.sampled_from(CHAR_TOK.chars), max_size=100))
def test_char_round_trip(text):
    assert CHAR_TOK.decode(CHAR_TOK.encode(text)) == text


@pytest.mark.parametrize("sentence", CHINESE)
def test_char_round_trips_chinese_one_token_a_character(sentence):
    ids = CHAR_TOK.encode(sentence)
    assert len(ids) == len(sentence) and CHAR_TOK.decode(ids) == sentence


def test_unknown_character_names_it_its_position_and_the_fix():
    tok = CharTokenizer.train("abc 我")
    with pytest.raises(ValueError) as err:
        tok.encode("ab 你😀c")
    message = str(err.value)
    assert "'你' (U+4F60) at position 3" in message and "'😀' (U+1F600) at position 4" in message
    assert "2 character(s)" in message and "bpe" in message and "train" in message.lower()


def test_char_decode_checks_ids():
    with pytest.raises(ValueError, match=r"\[0, 3\).*got 3 at position 1"):
        CharTokenizer.train("abc").decode([0, 3])
    with pytest.raises(ValueError, match="1-D"):
        CharTokenizer.train("abc").decode([[0]])
    with pytest.raises(ValueError, match="empty"):
        CharTokenizer.train("")


# ---------------------------------------------------------------- bpe


@settings(max_examples=100, deadline=None)
@given(any_text)
def test_bpe_round_trips_any_text(bpe, text):
    assert bpe.decode(bpe.encode(text)) == text


@pytest.mark.parametrize("text", [*CHINESE, "", " ", "\n\n", "  two  spaces \t\r\n", "😀👍🏽",
                                  "e\u0301 ﬁ ｆｕｌｌ ▁ \x00"])
def test_bpe_round_trips_chinese_emoji_and_whitespace(bpe, english_bpe, text):
    for tok in (bpe, english_bpe):
        ids = tok.encode(text)
        assert ids.dtype == np.int64 and tok.decode(ids) == text


def test_bpe_learns_merges_up_to_the_vocab_size(bpe):
    assert bpe.kind == "bpe" and bpe.vocab_size == 320 and len(bpe.merges) == 320 - 256
    assert len(bpe.encode(TRAINING)) < 0.75 * len(TRAINING.encode())  # the merges compress what they were learned on


def test_bpe_names_a_lone_surrogate(bpe):
    with pytest.raises(ValueError, match="lone surrogate.*U\\+D800 at position 1"):
        bpe.encode("a\ud800b")


def test_bpe_vocab_size_must_hold_the_bytes():
    with pytest.raises(ValueError, match="vocab_size must be an int >= 256, got 255"):
        SubwordTokenizer.train("abc", vocab_size=255)


def test_bpe_without_the_library_says_how_to_install_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "tokenizers", None)
    with pytest.raises(ImportError, match="pip install"):
        SubwordTokenizer.train("abc", vocab_size=260)


# ---------------------------------------------------------------- streaming


def test_char_stream_equals_decode_for_every_prefix():
    ids = CHAR_TOK.encode(CHINESE[0] + "\n😀")
    decoder, shown = CHAR_TOK.decoder(), ""
    for k, i in enumerate(ids, 1):
        shown += decoder.push(int(i))
        assert shown == CHAR_TOK.decode(ids[:k])


@pytest.mark.parametrize("text", [CHINESE[4], "héllo 😀👍🏽 世界\n", TRAINING[:300]])
def test_bpe_stream_never_shows_half_a_character(english_bpe, bpe, text):
    for tok in (english_bpe, bpe):
        ids = tok.encode(text)
        decoder, shown, held_back = tok.decoder(), "", 0
        for k in range(1, len(ids) + 1):
            shown += decoder.push(ids[k - 1])
            prefix = b"".join(tok.token_bytes[i] for i in ids[:k])
            assert shown == prefix.decode("utf-8", errors="ignore") and text.startswith(shown)
            if shown.encode() == prefix:
                assert shown == tok.decode(ids[:k])
            else:
                held_back += 1
        assert decoder.flush() == "" and shown == tok.decode(ids) == text
    assert held_back > 0  # a character was split across tokens (English-only merges cannot join Chinese bytes)


def test_bpe_stream_of_an_invalid_sequence_matches_decode(english_bpe):
    """A sampled sequence need not be valid UTF-8: the stream shows what decode shows (U+FFFD)."""
    byte_id = {b[0]: i for i, b in enumerate(english_bpe.token_bytes) if len(b) == 1}
    ids = [byte_id[0xE6], byte_id[ord("a")], byte_id[0xE6], byte_id[0x88]]
    decoder = english_bpe.decoder()
    streamed = "".join(decoder.push(i) for i in ids) + decoder.flush()
    assert streamed == english_bpe.decode(ids) == "\ufffda\ufffd"


# ---------------------------------------------------------------- to_dict / from_dict


@pytest.mark.parametrize("kind", TOKENIZERS)
def test_to_dict_survives_json_and_gives_the_same_tokenizer(kind):
    tok = train_tokenizer(kind, TRAINING, 300 if kind == "bpe" else None)
    back = tokenizer_from_dict(json.loads(json.dumps(tok.to_dict())))
    assert type(back) is type(tok) and back.kind == kind and back.vocab_size == tok.vocab_size
    assert np.array_equal(back.encode(TRAINING), tok.encode(TRAINING))
    assert back.decode(tok.encode(TRAINING)) == TRAINING


@pytest.mark.parametrize("d, message", [
    ({"kind": "pickle"}, "kind must be one of"),
    ({"chars": "abc"}, "with a 'kind' key"),
    ("char", "with a 'kind' key"),
    ({"kind": "char", "chars": "aab"}, "distinct"),
    ({"kind": "char", "chars": ["a", "b"]}, "string"),
    ({"kind": "bpe", "vocab": {"a": 1}, "merges": []}, "ids must be 0"),
    ({"kind": "bpe", "vocab": {"a": "0"}, "merges": []}, "int ids"),
])
def test_from_dict_rejects_what_it_cannot_read(d, message):
    with pytest.raises(ValueError, match=message):
        tokenizer_from_dict(d)


def test_from_dict_rejects_a_bpe_whose_merges_make_no_token(bpe):
    d = bpe.to_dict()
    with pytest.raises(ValueError, match="not a byte-level vocabulary"):
        tokenizer_from_dict({**d, "vocab": {**d["vocab"], "☃": len(d["vocab"])}})
    with pytest.raises(ValueError, match="merges"):
        tokenizer_from_dict({**d, "merges": [*d["merges"], ["a", "b", "c"]]})


def test_train_tokenizer_checks_its_arguments():
    with pytest.raises(ValueError, match="kind must be one of"):
        train_tokenizer("word", "abc")
    with pytest.raises(ValueError, match="vocab_size must be None"):
        train_tokenizer("char", "abc", 512)
    assert train_tokenizer("bpe", "abc abc").vocab_size <= 1024


def test_importing_the_tokenizers_does_not_import_the_library():
    code = ("import sys, transformer.gpt, transformer.gpt.tokenizers as t, transformer.gpt.text; "
            "t.CharTokenizer.train('ab').encode('ba'); print('tokenizers' in sys.modules)")
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout == "False\n"


# ---------------------------------------------------------------- the built-in text and the split


def test_builtin_text_is_deterministic_and_large():
    text = builtin_text()
    assert text == builtin_text() and len(text) > 200_000
    assert "# tinygrad_lite/tensor.py" in text and "# transformer/gpt/text.py" in text
    assert "The GPT's built-in training text" in text  # this module's own docstring, read with ast


def test_docstrings_are_read_in_source_order_without_running_the_source():
    source = ('"""module"""\nraise SystemExit\nclass A:\n    """a"""\n    def f(self):\n        """f"""\n'
              'def g():\n    pass\n')
    assert docstrings(source) == ["module", "a", "f"]


@pytest.mark.parametrize("data", ["x" * 1000, np.arange(1000), list(range(1000))])
def test_split_keeps_the_first_ninety_percent_for_training(data):
    train, val = split(data)
    assert len(train) == 900 and len(val) == 100
    assert list(train[-1:]) + list(val[:1]) == list(data[899:901])
    assert [len(part) for part in split(data, 0.5)] == [500, 500]


@pytest.mark.parametrize("data, fraction, message", [
    ("abcdefghij", 0.0, r"fraction must be finite and in \(0, 1\)"),
    ("abcdefghij", 1.0, r"fraction must be"),
    ("abcdefghij", 1.5, r"fraction must be"),
    ("abc", 0.1, "leave an empty part"),
    ("a", 0.9, "leave an empty part"),
])
def test_split_rejects_an_empty_part(data, fraction, message):
    with pytest.raises(ValueError, match=message):
        split(data, fraction)
