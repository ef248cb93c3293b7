"""The word table of the built-in toy language: every Chinese word with its English forms.

One row a word, so the whole vocabulary can be read at a glance. The sentence templates
in :mod:`transformer.data.corpus` only combine these rows; all English morphology that is
not regular (irregular plurals, irregular past tenses, a/an) is spelled out here.

Semantic classes (``kinds``) keep the sentences sensible: a verb takes only objects of the
kinds it lists, and an adjective describes only nouns of the kinds it lists (colours are
listed per noun, so apples are red/green/yellow but never blue).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Noun:
    """A noun: Chinese, English singular/plural, its measure word and semantic kinds.

    Mass nouns (``countable=False``) are counted through a container: 一杯茶 → "a cup of
    tea"; ``unit``/``unit_plural`` give that container in English.
    """

    zh: str
    en: str
    en_plural: str
    measure: str
    countable: bool
    kinds: tuple[str, ...]
    colours: tuple[str, ...] = ()
    unit: str = ""
    unit_plural: str = ""
    possessable: bool = True  # False: no 我的男人 ("my man")


@dataclass(frozen=True)
class Adjective:
    """An adjective; ``attributive`` is the Chinese form before a noun, ``predicative`` after 很."""

    key: str
    attributive: str
    predicative: str
    en: str
    kinds: tuple[str, ...]
    is_colour: bool = False


@dataclass(frozen=True)
class Verb:
    """A transitive verb sense. 看 has two senses (read/watch) chosen by the object's kind."""

    zh: str
    en: str
    en_third: str
    en_past: str
    kinds: tuple[str, ...]
    stative: bool


@dataclass(frozen=True)
class Pronoun:
    """A personal pronoun with its possessive; ``person`` drives English agreement."""

    zh: str
    en: str
    en_possessive: str
    person: str  # "1sg", "2sg", "3sg", "1pl", "2pl", "3pl"


def _mass(zh: str, en: str, measure: str, unit: str, unit_plural: str, kinds, colours=()):
    return Noun(zh, en, "", measure, False, kinds, colours, unit, unit_plural)


def _count(zh: str, en: str, plural: str, measure: str, kinds, colours=()):
    return Noun(zh, en, plural, measure, True, kinds, colours)


_PRODUCE = ("produce",)
NOUNS: tuple[Noun, ...] = (
    _count("苹果", "apple", "apples", "个", _PRODUCE, ("红色", "绿色", "黄色")),
    _count("香蕉", "banana", "bananas", "根", _PRODUCE, ("黄色", "绿色")),
    _count("橙子", "orange", "oranges", "个", _PRODUCE),
    _count("梨", "pear", "pears", "个", _PRODUCE, ("黄色", "绿色")),
    _count("桃子", "peach", "peaches", "个", _PRODUCE),
    _count("草莓", "strawberry", "strawberries", "个", _PRODUCE, ("红色",)),
    _count("西红柿", "tomato", "tomatoes", "个", _PRODUCE, ("红色", "绿色")),
    _count("鸡蛋", "egg", "eggs", "个", ("food",), ("白色",)),
    _count("蛋糕", "cake", "cakes", "个", ("food",), ("白色",)),
    _mass("米饭", "rice", "碗", "bowl", "bowls", ("food",)),
    _mass("面包", "bread", "块", "piece", "pieces", ("food",)),
    _mass("肉", "meat", "块", "piece", "pieces", ("food",)),
    _mass("水", "water", "杯", "cup", "cups", ("drink",)),
    _mass("茶", "tea", "杯", "cup", "cups", ("drink",)),
    _mass("咖啡", "coffee", "杯", "cup", "cups", ("drink",)),
    _mass("牛奶", "milk", "杯", "cup", "cups", ("drink",)),
    _mass("果汁", "juice", "杯", "cup", "cups", ("drink",)),
    _count("猫", "cat", "cats", "只", ("animal",), ("白色", "黑色")),
    _count("狗", "dog", "dogs", "只", ("animal",), ("白色", "黑色")),
    _count("鸟", "bird", "birds", "只", ("animal",), ("蓝色", "黄色")),
    _count("马", "horse", "horses", "匹", ("animal",), ("白色", "黑色")),
    _count("兔子", "rabbit", "rabbits", "只", ("animal",), ("白色", "黑色")),
    _count("鱼", "fish", "fish", "条", ("animal", "food"), ("红色",)),
    _count("书", "book", "books", "本", ("reading",), ("红色", "蓝色", "绿色", "黑色", "白色")),
    _count("杂志", "magazine", "magazines", "本", ("reading",)),
    _count("报纸", "newspaper", "newspapers", "份", ("reading",)),
    _count("电影", "movie", "movies", "部", ("film",)),
    _count("车", "car", "cars", "辆", ("vehicle",), ("红色", "蓝色", "白色", "黑色", "黄色")),
    _count("自行车", "bike", "bikes", "辆", ("vehicle",), ("红色", "蓝色", "黑色", "橙色")),
    _count("包", "bag", "bags", "个", ("thing",), ("红色", "黑色", "蓝色", "橙色")),
    _count("盒子", "box", "boxes", "个", ("thing",), ("白色", "红色")),
    _count("手机", "phone", "phones", "部", ("thing",), ("黑色", "白色")),
    _count("电脑", "computer", "computers", "台", ("thing",), ("黑色", "白色")),
    _count("笔", "pen", "pens", "支", ("thing",), ("红色", "蓝色", "黑色")),
    _count("桌子", "table", "tables", "张", ("thing",)),
    _count("椅子", "chair", "chairs", "把", ("thing",)),
    _count("伞", "umbrella", "umbrellas", "把", ("thing",), ("红色", "黑色", "橙色")),
    _count("钥匙", "key", "keys", "把", ("thing",)),
    _count("刀", "knife", "knives", "把", ("thing",)),
    _count("帽子", "hat", "hats", "顶", ("thing",), ("红色", "黑色", "白色")),
    _count("花", "flower", "flowers", "朵", ("plant",), ("红色", "白色", "黄色")),
    _count("朋友", "friend", "friends", "个", ("person",)),
    _count("老师", "teacher", "teachers", "个", ("person",)),
    _count("学生", "student", "students", "个", ("person",)),
    _count("孩子", "child", "children", "个", ("person",)),
    Noun("男人", "man", "men", "个", True, ("person",), possessable=False),
    Noun("女人", "woman", "women", "个", True, ("person",), possessable=False),
)
NOUNS_BY_ZH: dict[str, Noun] = {noun.zh: noun for noun in NOUNS}

_COLOUR_NAMES = (
    ("红色", "red"), ("黄色", "yellow"), ("绿色", "green"), ("白色", "white"),
    ("黑色", "black"), ("蓝色", "blue"), ("橙色", "orange"),
)
_SIZED = ("produce", "animal", "vehicle", "thing")
_MADE = ("reading", "vehicle", "thing")
ADJECTIVES: tuple[Adjective, ...] = tuple(
    Adjective(zh, zh + "的", "是" + zh + "的", en, (), is_colour=True) for zh, en in _COLOUR_NAMES
) + (
    Adjective("大", "大", "很大", "big", _SIZED),
    Adjective("小", "小", "很小", "small", _SIZED),
    Adjective("新", "新", "很新", "new", _MADE),
    Adjective("旧", "旧", "很旧", "old", _MADE),
    Adjective("好", "好", "很好", "good", ("reading", "film", "drink")),
    Adjective("热", "热", "很热", "hot", ("drink",)),
    Adjective("冷", "冷", "很冷", "cold", ("drink",)),
    Adjective("便宜", "便宜的", "很便宜", "cheap", ("produce",) + _MADE),
    Adjective("贵", "很贵的", "很贵", "expensive", _MADE),
    Adjective("漂亮", "漂亮的", "很漂亮", "beautiful", ("animal", "vehicle", "plant")),
    Adjective("可爱", "可爱的", "很可爱", "cute", ("animal",)),
)
ADJECTIVES_BY_KEY: dict[str, Adjective] = {adj.key: adj for adj in ADJECTIVES}

_GOODS = ("produce", "food", "drink", "reading", "vehicle", "thing", "plant")
VERBS: tuple[Verb, ...] = (
    Verb("有", "have", "has", "had", _GOODS + ("animal", "person"), stative=True),
    Verb("喜欢", "like", "likes", "liked", _GOODS + ("animal", "film", "person"), stative=True),
    Verb("要", "want", "wants", "wanted", _GOODS + ("animal",), stative=True),
    Verb("吃", "eat", "eats", "ate", ("produce", "food"), stative=False),
    Verb("喝", "drink", "drinks", "drank", ("drink",), stative=False),
    Verb("看", "read", "reads", "read", ("reading",), stative=False),
    Verb("看", "watch", "watches", "watched", ("film",), stative=False),
    Verb("买", "buy", "buys", "bought", _GOODS + ("animal",), stative=False),
    Verb("卖", "sell", "sells", "sold", ("produce", "reading", "vehicle", "thing", "plant"),
         stative=False),
    Verb("洗", "wash", "washes", "washed", ("produce", "vehicle"), stative=False),
    Verb("喂", "feed", "feeds", "fed", ("animal",), stative=False),
    Verb("画", "draw", "draws", "drew", ("animal", "produce", "plant", "vehicle"), stative=False),
)

PRONOUNS: tuple[Pronoun, ...] = (
    Pronoun("我", "i", "my", "1sg"),
    Pronoun("你", "you", "your", "2sg"),
    Pronoun("他", "he", "his", "3sg"),
    Pronoun("她", "she", "her", "3sg"),
    Pronoun("我们", "we", "our", "1pl"),
    Pronoun("你们", "you", "your", "2pl"),
    Pronoun("他们", "they", "their", "3pl"),
)

#: 两, not 二, counts things before a measure word (两本书, never 二本书).
NUMBERS: tuple[tuple[str, str], ...] = (
    ("一", "one"), ("两", "two"), ("三", "three"), ("四", "four"), ("五", "five"),
    ("六", "six"), ("七", "seven"), ("八", "eight"), ("九", "nine"), ("十", "ten"),
)

#: (Chinese, English, plural?) demonstratives; 这些/那些 take no measure word.
DEMONSTRATIVES: tuple[tuple[str, str, bool], ...] = (
    ("这", "this", False), ("那", "that", False), ("这些", "these", True), ("那些", "those", True),
)

PLACES: tuple[tuple[str, str], ...] = (
    ("在家", "at home"), ("在学校", "at school"), ("在公园", "in the park"),
    ("在商店", "at the shop"), ("在饭馆", "at the restaurant"),
)

#: Time words and the English tense they select; 今天/昨天 are used with 了 (past).
TIMES: tuple[tuple[str, str, str], ...] = (
    ("每天", "every day", "habit"), ("明天", "tomorrow", "future"),
    ("昨天", "yesterday", "past"), ("今天", "today", "past"),
)

_AN_EXCEPTIONS = {"hour": "an", "honest": "an", "university": "a", "one": "a", "european": "a"}


def indefinite_article(next_word: str) -> str:
    """'a' or 'an' for the word that follows: by its first letter, with a few sound exceptions."""
    if not next_word:
        raise ValueError("indefinite_article: got an empty word, expected the word after a/an")
    if next_word in _AN_EXCEPTIONS:
        return _AN_EXCEPTIONS[next_word]
    return "an" if next_word[0] in "aeiou" else "a"
