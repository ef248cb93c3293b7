"""The built-in toy corpus: determinism, size, exactness, grammar and the novel split."""

import hashlib
import json
import os
import pathlib
import subprocess
import sys

import pytest

from transformer import data
from transformer.data import corpus
from transformer.data.lexicon import ADJECTIVES_BY_KEY, NOUNS_BY_ZH, VERBS, indefinite_article

TRANSFORMER_DIR = pathlib.Path(data.__file__).resolve().parents[1]


def _digest(splits) -> str:
    return hashlib.sha256(json.dumps(splits, ensure_ascii=False).encode()).hexdigest()


@pytest.fixture(scope="module")
def splits():
    return data.builtin_corpus(seed=0)


@pytest.fixture(scope="module")
def all_pairs():
    return list(data.iter_all_pairs())


def test_generation_is_deterministic_within_a_process(splits):
    corpus._language.cache_clear()
    assert data.builtin_corpus(seed=0) == splits


def test_generation_ignores_hash_seed_and_never_imports_the_model(splits):
    """Run in fresh interpreters with different PYTHONHASHSEEDs; set iteration must not leak.

    The subprocess imports transformer.data without transformer/__init__ (the model), which
    also checks that the data code does not need tinygrad_lite.
    """
    script = (
        "import sys, types, json, hashlib\n"
        "pkg = types.ModuleType('transformer'); pkg.__path__ = [sys.argv[1]]\n"
        "sys.modules['transformer'] = pkg\n"
        "from transformer.data import builtin_corpus\n"
        "assert not any(m.startswith('tinygrad_lite') for m in sys.modules), 'imports the model'\n"
        "s = json.dumps(builtin_corpus(seed=0), ensure_ascii=False)\n"
        "print(hashlib.sha256(s.encode()).hexdigest())\n"
    )
    expected = _digest(splits)
    for hash_seed in ("1", "4242"):
        env = dict(os.environ, PYTHONHASHSEED=hash_seed)
        out = subprocess.run([sys.executable, "-c", script, str(TRANSFORMER_DIR)], env=env,
                             capture_output=True, text=True, check=True)
        assert out.stdout.strip() == expected


def test_seed_moves_sentences_between_splits_but_keeps_the_language(splits):
    other = data.builtin_corpus(seed=1)
    assert other["test"] != splits["test"]
    def seen(parts):
        return {pair for name in ("train", "dev", "test") for pair in parts[name]}

    assert seen(other) == seen(splits)


def test_at_least_20000_distinct_pairs(all_pairs):
    assert len(set(all_pairs)) == len(all_pairs) >= 20_000


def test_chinese_to_english_is_a_function(all_pairs):
    translations = {}
    for zh, en in all_pairs:
        assert translations.setdefault(zh, en) == en, zh
    assert len(translations) == len(all_pairs)


def test_normal_form(all_pairs):
    for zh, en in all_pairs:
        assert zh[-1] in "。？" and not any(ch.isspace() or ch.isascii() for ch in zh), zh
        assert en == en.lower() and en == " ".join(en.split()), en
        assert en.endswith((" .", " ?")), en
        assert (zh[-1] == "？") == en.endswith("?"), (zh, en)
        assert en.count(".") + en.count("?") == 1, en


def test_sentences_are_short_and_vocabularies_modest(all_pairs):
    assert max(len(zh) for zh, _ in all_pairs) <= corpus.MAX_ZH_CHARS <= 16
    assert max(len(en.split()) for _, en in all_pairs) <= corpus.MAX_EN_TOKENS <= 14
    assert len({ch for zh, _ in all_pairs for ch in zh}) <= 300
    assert len({word for _, en in all_pairs for word in en.split()}) <= 400


GRAMMAR = {
    # the headline example and measure words
    "这是一个苹果。": "this is an apple .",
    "这是一只猫。": "this is a cat .",
    "这是一本书。": "this is a book .",
    "这是一辆车。": "this is a car .",
    "这是一杯水。": "this is a cup of water .",
    # a / an, also decided by the adjective
    "这是一个鸡蛋。": "this is an egg .",
    "那是一把伞。": "that is an umbrella .",
    "这是一个大苹果。": "this is a big apple .",
    "这是一辆旧车。": "this is an old car .",
    "这是一个红色的苹果。": "this is a red apple .",
    # plurals, this is / these are
    "这些是苹果。": "these are apples .",
    "那些是盒子。": "those are boxes .",
    "这些是孩子。": "these are children .",
    "那些是草莓。": "those are strawberries .",
    "这些是鱼。": "these are fish .",
    "那些是刀。": "those are knives .",
    "这些是我的书。": "these are my books .",
    "那是我的书。": "that is my book .",
    # agreement, negation, questions
    "他喜欢苹果。": "he likes apples .",
    "他们喜欢苹果。": "they like apples .",
    "我喜欢茶。": "i like tea .",
    "她不喜欢咖啡。": "she does not like coffee .",
    "我不喜欢苹果。": "i do not like apples .",
    "他喜欢猫吗？": "does he like cats ?",
    "你喜欢苹果吗？": "do you like apples ?",
    "你吃什么？": "what do you eat ?",
    "这是什么？": "what is this ?",
    "这是一个苹果吗？": "is this an apple ?",
    "我没有猫。": "i do not have any cats .",
    "我是学生。": "i am a student .",
    "他们是老师。": "they are teachers .",
    "这只猫很大。": "this cat is big .",
    "那辆车不贵。": "that car is not expensive .",
    # place and time move to the end in English
    "我在家吃苹果。": "i eat apples at home .",
    "他在公园看书。": "he reads books in the park .",
    "我每天喝茶。": "i drink tea every day .",
    "我今天买了一本书。": "i bought a book today .",
    "他昨天吃了一个苹果。": "he ate an apple yesterday .",
}


@pytest.mark.parametrize("zh", list(GRAMMAR))
def test_grammar_spot_checks(all_pairs, zh):
    assert dict(all_pairs).get(zh) == GRAMMAR[zh]


@pytest.mark.parametrize("word, article", [
    ("apple", "an"), ("egg", "an"), ("umbrella", "an"), ("old", "an"), ("book", "a"),
    ("cup", "a"), ("hour", "an"), ("university", "a"),
])
def test_indefinite_article(word, article):
    assert indefinite_article(word) == article


def test_splits_are_disjoint_and_sized(splits):
    assert set(splits) == {"train", "dev", "test", "novel"}
    assert len(splits["dev"]) == len(splits["test"]) == 800
    assert 300 <= len(splits["novel"]) <= 1000
    sources = {name: {zh for zh, _ in pairs} for name, pairs in splits.items()}
    for name, pairs in splits.items():
        assert len(sources[name]) == len(pairs), f"{name} repeats a Chinese sentence"
    names = list(splits)
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            assert not sources[a] & sources[b], (a, b)


def _held_out_english_forms():
    """For each held-out combination: (word forms of part 1, word forms of the noun)."""
    forms = []
    for adj, noun in data.HELD_OUT_ADJ_NOUN:
        n = NOUNS_BY_ZH[noun]
        forms.append(({ADJECTIVES_BY_KEY[adj].en}, {n.en, n.en_plural}))
    for verb, noun in data.HELD_OUT_VERB_OBJECT:
        n = NOUNS_BY_ZH[noun]
        senses = [v for v in VERBS if v.zh == verb and set(v.kinds) & set(n.kinds)]
        assert len(senses) == 1
        forms.append(({senses[0].en, senses[0].en_third, senses[0].en_past}, {n.en, n.en_plural}))
    return forms


def _uses(en: str, first: set, noun: set) -> bool:
    words = set(en.split())
    return bool(words & first) and bool(words & noun)


def test_held_out_combinations_only_in_novel(splits):
    held_out = _held_out_english_forms()
    for name in ("train", "dev", "test"):
        for zh, en in splits[name]:
            assert not any(_uses(en, *combo) for combo in held_out), (name, zh, en)
    for zh, en in splits["novel"]:
        assert any(_uses(en, *combo) for combo in held_out), (zh, en)
    for combo in held_out:
        assert any(_uses(en, *combo) for _, en in splits["novel"]), combo


def test_novel_words_all_appear_in_train(splits):
    train_chars = {ch for zh, _ in splits["train"] for ch in zh}
    train_words = {w for _, en in splits["train"] for w in en.split()}
    novel_chars = {ch for zh, _ in splits["novel"] for ch in zh}
    novel_words = {w for _, en in splits["novel"] for w in en.split()}
    assert novel_chars <= train_chars
    assert novel_words <= train_words
    for adj, noun in data.HELD_OUT_ADJ_NOUN:
        assert any(adj in zh and noun not in zh for zh, _ in splits["train"]), adj
    for verb, noun in data.HELD_OUT_VERB_OBJECT:
        assert any(verb in zh and noun not in zh for zh, _ in splits["train"]), verb
        assert any(noun in zh and verb not in zh for zh, _ in splits["train"]), noun


def test_builtin_corpus_rejects_bad_sizes():
    with pytest.raises(ValueError, match="builtin_corpus: dev_size"):
        data.builtin_corpus(dev_size=-1)
    with pytest.raises(ValueError, match="no training data"):
        data.builtin_corpus(dev_size=10**6)
