"""File loaders, split_pairs and batching.

The fixture ``tests/fixtures/tatoeba_small.tsv`` holds simple sentence pairs written for
this project; its third column only imitates the layout of Tatoeba's attribution column.
"""

import pathlib
import random
import tempfile

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from transformer.data import (
    PAD,
    Vocab,
    bucket_indices,
    builtin_corpus,
    load_pairs,
    make_batches,
    split_pairs,
    tokenize_en,
    tokenize_zh,
)

FIXTURES = pathlib.Path(__file__).parent / "fixtures"
SMALL = FIXTURES / "tatoeba_small.tsv"
MALFORMED = FIXTURES / "tatoeba_malformed.tsv"


def _fixture_rows():
    """(en, zh, attribution) rows of the small fixture, parsed independently of the loader."""
    return [line.split("\t") for line in SMALL.read_text(encoding="utf-8").splitlines()]


# ---------------------------------------------------------------- load_pairs


def test_loads_the_tatoeba_fixture():
    result = load_pairs(SMALL)
    rows = _fixture_rows()
    assert result.format == "tatoeba"
    assert result.bad_lines == []
    assert result.n_lines == len(rows) == 60
    assert result.pairs == [(zh, en) for en, zh, _ in rows]
    assert ("这是一个苹果。", "This is an apple.") in result.pairs
    assert all(a.startswith("CC-BY 2.0 (France) Attribution: tatoeba.org #")
               for a in result.attributions)
    assert load_pairs(str(SMALL), fmt="tatoeba").pairs == result.pairs


@pytest.mark.parametrize("fmt, make_line", [
    ("zh-en", lambda en, zh: f"{zh}\t{en}"),
    ("en-zh", lambda en, zh: f"{en}\t{zh}"),
])
def test_loads_two_column_files_in_either_order(tmp_path, fmt, make_line):
    rows = _fixture_rows()
    path = tmp_path / "pairs.tsv"
    path.write_text("\ufeff" + "\n".join(make_line(en, zh) for en, zh, _ in rows) + "\n",
                    encoding="utf-8")
    result = load_pairs(path)
    assert result.format == fmt
    assert result.pairs == [(zh, en) for en, zh, _ in rows]
    assert result.bad_lines == []
    assert load_pairs(path, fmt=fmt).pairs == result.pairs


def test_reports_malformed_lines_by_number():
    result = load_pairs(MALFORMED)
    assert result.format == "tatoeba"
    assert result.pairs == [("我喜欢茶。", "I like tea."), ("我们是朋友。", "We are friends."),
                            ("晚安。", "Good night."), ("明天见。", "See you tomorrow.")]
    assert result.attributions[2].endswith("(fixture)")  # the CRLF line lost its \r
    reasons = dict(result.bad_lines)
    assert [n for n, _ in result.bad_lines] == [2, 4, 5, 6, 7, 8, 10]
    assert "expected 3 tab-separated columns, got 1" in reasons[2]
    assert "got 4" in reasons[4]
    assert "empty Chinese side" in reasons[5]
    assert "not valid UTF-8" in reasons[6]
    assert "blank line" in reasons[7]
    assert "empty English side" in reasons[8]
    assert "no Chinese character" in reasons[10]
    assert result.n_lines == 11
    assert "line 2:" in result.summary() and "4 pairs" in result.summary()


def test_wrong_explicit_format_marks_every_line_bad(tmp_path):
    with pytest.raises(ValueError, match=r"load_pairs: no usable line in .*tatoeba_small\.tsv"):
        load_pairs(SMALL, fmt="zh-en")


def test_missing_empty_and_unreadable_files(tmp_path):
    missing = tmp_path / "nope.tsv"
    with pytest.raises(FileNotFoundError, match="nope.tsv"):
        load_pairs(missing)
    empty = tmp_path / "empty.tsv"
    empty.write_bytes(b"\n \n")
    with pytest.raises(ValueError, match="empty.tsv.* is empty"):
        load_pairs(empty)
    english_only = tmp_path / "english.tsv"
    english_only.write_text("hello\tworld\n", encoding="utf-8")
    with pytest.raises(ValueError, match="cannot detect the format of .*english.tsv.*fmt="):
        load_pairs(english_only)
    with pytest.raises(ValueError, match="load_pairs: fmt must be"):
        load_pairs(SMALL, fmt="csv")
    with pytest.raises(IsADirectoryError, match="load_pairs"):
        load_pairs(tmp_path)


def _check_accounting(result):
    numbers = [n for n, _ in result.bad_lines]
    assert numbers == sorted(set(numbers))
    assert all(1 <= n <= result.n_lines for n in numbers)
    assert len(result.pairs) + len(result.bad_lines) == result.n_lines
    assert len(result.attributions) == len(result.pairs)


GOOD_LINE = "I like tea.\t我喜欢茶。\tCC-BY 2.0 (France) Attribution: tatoeba.org #1 (x) & #2 (y)"


@settings(max_examples=100, deadline=None)
@given(st.lists(st.one_of(st.just(None), st.binary(max_size=30).map(
    lambda b: b.replace(b"\n", b""))), min_size=1, max_size=12))
def test_good_lines_survive_among_garbage(segments):
    """Lines of random bytes spoil only themselves: every good line is still read."""
    good_numbers = [i for i, seg in enumerate(segments, start=1) if seg is None]
    raw = b"\n".join(GOOD_LINE.encode() if seg is None else seg for seg in segments) + b"\n"
    with tempfile.TemporaryDirectory() as folder:
        path = pathlib.Path(folder) / "mixed.tsv"
        path.write_bytes(raw)
        if not good_numbers:
            return
        result = load_pairs(path, fmt="tatoeba")
    _check_accounting(result)
    assert result.n_lines == len(segments)
    assert result.pairs.count(("我喜欢茶。", "I like tea.")) >= len(good_numbers)
    assert not {n for n, _ in result.bad_lines} & set(good_numbers)


# ---------------------------------------------------------------- split_pairs


def _many_pairs():
    pairs = [(f"句子{i}", f"sentence {i}") for i in range(200)]
    pairs += [("句子7", "another sentence 7"), ("句子7", "sentence 7")]  # second is a duplicate
    return pairs


def test_split_pairs_is_deterministic_and_order_free():
    pairs = _many_pairs()
    shuffled = pairs[:]
    random.Random(5).shuffle(shuffled)
    first = split_pairs(pairs, dev_frac=0.1, test_frac=0.1, seed=3)
    assert first == split_pairs(shuffled, dev_frac=0.1, test_frac=0.1, seed=3)
    assert first != split_pairs(pairs, dev_frac=0.1, test_frac=0.1, seed=4)


def test_split_pairs_keeps_sources_apart_and_drops_duplicates():
    parts = split_pairs(_many_pairs(), dev_frac=0.1, test_frac=0.1, seed=0)
    sources = {name: {zh for zh, _ in pairs} for name, pairs in parts.items()}
    assert not sources["train"] & sources["test"]
    assert not sources["train"] & sources["dev"]
    assert not sources["dev"] & sources["test"]
    assert len(sources["test"]) == len(sources["dev"]) == 20
    everything = [pair for pairs in parts.values() for pair in pairs]
    assert sorted(everything) == sorted(set(_many_pairs()))
    home = next(name for name, s in sources.items() if "句子7" in s)
    assert ("句子7", "another sentence 7") in parts[home] and ("句子7", "sentence 7") in parts[home]


def test_split_pairs_rejects_bad_arguments():
    with pytest.raises(ValueError, match="split_pairs: dev_frac"):
        split_pairs(_many_pairs(), dev_frac=1.5)
    with pytest.raises(ValueError, match="dev_frac \\+ test_frac"):
        split_pairs(_many_pairs(), dev_frac=0.5, test_frac=0.5)
    with pytest.raises(ValueError, match="too few"):
        split_pairs([("一", "one"), ("二", "two")], dev_frac=0.45, test_frac=0.45)
    with pytest.raises(TypeError, match="split_pairs: expected"):
        split_pairs([("一", "one", "extra")])


# ---------------------------------------------------------------- batching


def _random_sequences(n, seed, max_len=12):
    rng = random.Random(seed)
    return [[rng.randint(1, 50) for _ in range(rng.randint(1, max_len))] for _ in range(n)]


@pytest.mark.parametrize("shuffle", [True, False])
def test_batches_are_padded_within_budget_and_cover_every_pair(shuffle):
    src, tgt = _random_sequences(300, 1), _random_sequences(300, 2, max_len=15)
    batches = make_batches(src, tgt, max_tokens=64, shuffle=shuffle, seed=7)
    groups = bucket_indices([len(s) for s in src], [len(t) for t in tgt], 64, shuffle, 7)
    assert np.array_equal(np.sort(np.concatenate(groups)), np.arange(300))
    for batch, group in zip(batches, groups, strict=True):
        assert batch.src.dtype == batch.tgt.dtype == np.int64
        b, s = batch.src.shape
        assert batch.tgt.shape[0] == b == len(group)
        assert b * s <= 64 and b * batch.tgt.shape[1] <= 64
        for row, index in enumerate(group):
            for array, seqs in ((batch.src, src), (batch.tgt, tgt)):
                n = len(seqs[index])
                assert array[row, :n].tolist() == seqs[index]
                assert (array[row, n:] == PAD).all()
        assert s == max(len(src[i]) for i in group)


def test_batches_are_deterministic_and_seed_dependent():
    src, tgt = _random_sequences(200, 3), _random_sequences(200, 4)
    a = make_batches(src, tgt, max_tokens=48, seed=1)
    b = make_batches(src, tgt, max_tokens=48, seed=1)
    c = make_batches(src, tgt, max_tokens=48, seed=2)
    assert all(np.array_equal(x.src, y.src) and np.array_equal(x.tgt, y.tgt) for x, y in zip(a, b))
    assert len(a) != len(c) or any(not np.array_equal(x.src, y.src) for x, y in zip(a, c))


def test_bucketing_wastes_little_padding_on_the_builtin_corpus():
    train = builtin_corpus()["train"][:3000]
    src_vocab = Vocab.build(tokenize_zh(zh) for zh, _ in train)
    tgt_vocab = Vocab.build(tokenize_en(en) for _, en in train)
    src = [src_vocab.encode(tokenize_zh(zh)) for zh, _ in train]
    tgt = [tgt_vocab.encode(tokenize_en(en), add_bos=True, add_eos=True) for _, en in train]
    batches = make_batches(src, tgt, max_tokens=512, seed=0)
    real = sum(len(s) for s in src)
    padded = sum(batch.src.size for batch in batches)
    assert padded < 1.1 * real


def test_batching_rejects_bad_input():
    with pytest.raises(ValueError, match="make_batches: got 2 source and 1 target"):
        make_batches([[1], [2]], [[1]], max_tokens=8)
    with pytest.raises(ValueError, match=r"src_ids_list\[1\] is empty"):
        make_batches([[1], []], [[1], [2]], max_tokens=8)
    with pytest.raises(ValueError, match="pair 0 has 9 tokens .* max_tokens=8"):
        make_batches([[1] * 9], [[1]], max_tokens=8)
    with pytest.raises(ValueError, match="max_tokens must be a positive int"):
        make_batches([[1]], [[1]], max_tokens=0)
