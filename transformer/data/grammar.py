"""The toy language's grammar: noun phrases, English agreement and the sentence templates (one
small function each), from the word table in :mod:`transformer.data.lexicon`.
:func:`generate_sentences` yields every sentence; :mod:`transformer.data.corpus` keeps the short
ones, checks that each Chinese sentence has one translation, and splits them.

Chinese → English
    * Word order. Chinese is S [time] [不/没] [place] V [了] O; English is
      S [aux] V O [place] [time]: 我每天在家喝茶。 → ``i drink tea at home every day .``
    * Tense comes from the time word: none or 每天 → present simple ("every day" at the
      end); 明天 → ``will``; 了, 昨天+了, 今天+了 → simple past. 喜欢/有/要 (stative) are
      used only in the present.
    * Negation: 不 → ``do/does not`` (``will not`` with 明天); 没 → ``did not`` (past);
      没有 → ``do/does not have``. Questions: …吗？ → ``do/does/did/will`` S V O ?;
      S V 什么？ → ``what do/does/did/will`` S V ?; 这是什么？ → ``what is this ?``.
    * Agreement: he/she and singular noun subjects take ``likes``, ``is``, ``does``;
      ``i am``; everything else ``are``/``do``.
    * Noun phrases: 一 + measure word + N → ``a``/``an`` N (by the next word's first
      letter); 两…十 + measure word + N → number + plural; mass nouns count through their
      container (一杯茶 → ``a cup of tea``, 三碗米饭 → ``three bowls of rice``); 这/那 + measure
      word + N → ``this/that`` N; 这些/那些 + N → ``these/those`` + plural; 我的 N → ``my`` N.
    * A bare Chinese object is generic: countable nouns become bare plurals, mass nouns
      stay bare (我喜欢苹果 → ``i like apples``, 我喜欢茶 → ``i like tea``). After ``have`` in
      negatives and questions, and after ``did not``, a generic object takes ``any``
      (我没有猫 → ``i do not have any cats``).
    * Adjectives: 大/小/新/旧/好/热/冷 attach directly (大苹果), others with 的 (红色的苹果,
      很贵的车); predicates use 很 + adjective or 是 + colour + 的, and ``is/are`` in English.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass

from .lexicon import (
    ADJECTIVES,
    DEMONSTRATIVES,
    NOUNS,
    NUMBERS,
    PLACES,
    PRONOUNS,
    TIMES,
    VERBS,
    Adjective,
    Noun,
    Pronoun,
    Verb,
    indefinite_article,
)

#: Fixed seed of the language itself; the ``seed`` of :func:`~transformer.data.corpus.builtin_corpus`
#: only moves sentences between train/dev/test.
_GRAMMAR_SEED = 20170612
_PLACE_PROBABILITY = 0.35


@dataclass(frozen=True)
class _Phrase:
    """A piece of a sentence in both languages: its English agreement person, the
    (adjective, noun) combinations it uses and, for noun phrases, its head noun."""

    zh: str
    en: tuple[str, ...]
    person: str = "3sg"
    combos: tuple[tuple[str, str, str], ...] = ()
    noun: str = ""


@dataclass(frozen=True)
class Sentence:
    """A sentence in both languages and the (kind, word, noun) combinations it uses."""

    zh: str
    en: str
    combos: tuple[tuple[str, str, str], ...]


# ---------------------------------------------------------------- noun phrases


def _describes(adj: Adjective, noun: Noun) -> bool:
    if adj.is_colour:
        return adj.key in noun.colours
    return bool(set(adj.kinds) & set(noun.kinds))


def _adjectives_for(noun: Noun) -> tuple[Adjective, ...]:
    return tuple(adj for adj in ADJECTIVES if _describes(adj, noun))


def _adj_parts(noun: Noun, adj: Adjective | None):
    if adj is None:
        return "", (), ()
    return adj.attributive, (adj.en,), (("adj", adj.key, noun.zh),)


def _np_generic(noun: Noun, adj: Adjective | None = None, with_any: bool = False) -> _Phrase:
    adj_zh, adj_en, combos = _adj_parts(noun, adj)
    head = noun.en_plural if noun.countable else noun.en
    person = "3pl" if noun.countable else "3sg"
    return _Phrase(adj_zh + noun.zh, ("any",) * with_any + adj_en + (head,), person, combos,
                   noun.zh)


def _np_counted(noun: Noun, number: int, adj: Adjective | None = None) -> _Phrase:
    num_zh, num_en = NUMBERS[number - 1]
    adj_zh, adj_en, combos = _adj_parts(noun, adj)
    if noun.countable:
        words = adj_en + ((noun.en,) if number == 1 else (noun.en_plural,))
    else:
        unit = noun.unit if number == 1 else noun.unit_plural
        words = (unit, "of") + adj_en + (noun.en,)
    determiner = indefinite_article(words[0]) if number == 1 else num_en
    person = "3sg" if number == 1 else "3pl"
    return _Phrase(num_zh + noun.measure + adj_zh + noun.zh, (determiner,) + words, person,
                   combos, noun.zh)


def _np_demonstrative(noun: Noun, dem: int, adj: Adjective | None = None) -> _Phrase:
    dem_zh, dem_en, plural = DEMONSTRATIVES[dem]
    adj_zh, adj_en, combos = _adj_parts(noun, adj)
    if plural:
        return _Phrase(dem_zh + adj_zh + noun.zh, (dem_en,) + adj_en + (noun.en_plural,),
                       "3pl", combos, noun.zh)
    container = () if noun.countable else (noun.unit, "of")
    return _Phrase(dem_zh + noun.measure + adj_zh + noun.zh,
                   (dem_en,) + container + adj_en + (noun.en,), "3sg", combos, noun.zh)


def _np_possessive(noun: Noun, owner: Pronoun, plural: bool = False) -> _Phrase:
    head = noun.en_plural if plural else noun.en
    return _Phrase(owner.zh + "的" + noun.zh, (owner.en_possessive, head),
                   "3pl" if plural else "3sg", (), noun.zh)


def _demonstratives_for(noun: Noun) -> tuple[int, ...]:
    return tuple(i for i, (_, _, plural) in enumerate(DEMONSTRATIVES)
                 if noun.countable or not plural)


def _pronoun(pronoun: Pronoun) -> _Phrase:
    return _Phrase(pronoun.zh, (pronoun.en,), pronoun.person)


def _subjects() -> tuple[_Phrase, ...]:
    """Pronouns, 我的朋友-style and 这个孩子-style subjects (people only)."""
    people = tuple(noun for noun in NOUNS if "person" in noun.kinds)
    subjects = [_pronoun(p) for p in PRONOUNS]
    subjects += [_np_possessive(noun, owner) for owner in PRONOUNS for noun in people
                 if noun.possessable]
    subjects += [_np_demonstrative(noun, dem) for dem in range(len(DEMONSTRATIVES))
                 for noun in people]
    return tuple(subjects)


def _pick_subject(rng: random.Random, subjects: tuple[_Phrase, ...]) -> _Phrase:
    """Pronouns half of the time, otherwise a noun-phrase subject."""
    if rng.random() < 0.5:
        return subjects[rng.randrange(len(PRONOUNS))]
    return subjects[rng.randrange(len(PRONOUNS), len(subjects))]


# ---------------------------------------------------------------- English agreement


def _be(person: str) -> str:
    return {"1sg": "am", "3sg": "is"}.get(person, "are")


def _do(person: str) -> str:
    return "does" if person == "3sg" else "do"


def _finish(zh: str, en: tuple[str, ...], question: bool, combos=()) -> Sentence:
    zh_end, en_end = ("？", "?") if question else ("。", ".")
    return Sentence(zh + zh_end, " ".join(en + (en_end,)), tuple(combos))


# ---------------------------------------------------------------- templates


def _clause(verb: Verb, subject: _Phrase, obj: _Phrase | None, tense: str, negated: bool,
            mode: str, place: tuple[str, str] | None, time: tuple[str, str, str] | None):
    """S [time] [不/没] [place] V [了] O — the one template for every sentence with a verb.

    ``obj`` is None for 什么 questions. ``mode`` is statement, yesno (吗) or what (什么).
    """
    past = tense == "past"
    neg_zh = ("没" if past or verb.zh == "有" else "不") if negated else ""
    place_zh = place[0] if place else ""
    # 没有 stays together: 我在家没有猫, but 我明天不在家喝茶.
    adverbials = place_zh + neg_zh if verb.zh == "有" else neg_zh + place_zh
    obj_zh = "什么" if mode == "what" else obj.zh
    zh = (subject.zh + (time[0] if time else "") + adverbials + verb.zh
          + ("了" if past and not negated else "") + obj_zh + ("吗" if mode == "yesno" else ""))

    aux = {"future": "will", "past": "did"}.get(tense, _do(subject.person))
    obj_en = () if obj is None else obj.en
    if mode == "yesno":
        en = (aux,) + subject.en + (verb.en,) + obj_en
    elif mode == "what":
        en = ("what", aux) + subject.en + (verb.en,)
    elif negated:
        en = subject.en + (aux, "not", verb.en) + obj_en
    elif tense == "future":
        en = subject.en + ("will", verb.en) + obj_en
    elif past:
        en = subject.en + (verb.en_past,) + obj_en
    else:
        en = subject.en + (verb.en_third if subject.person == "3sg" else verb.en,) + obj_en
    en += (tuple(place[1].split()) if place else ()) + (tuple(time[1].split()) if time else ())

    combos = obj.combos + (("verb", verb.zh, obj.noun),) if obj is not None else ()
    return _finish(zh, en, mode != "statement", combos)


# Object forms: G generic, A generic with adjective, N generic with "any", C counted,
# D demonstrative, P possessive.
_ACTION_FRAMES = (
    ("present", False, "statement", "GA"),
    ("present", True, "statement", "GA"),
    ("present", False, "yesno", "GA"),
    ("present", False, "what", ""),
    ("habit", False, "statement", "GAC"),
    ("habit", False, "yesno", "GC"),
    ("habit", False, "what", ""),
    ("future", False, "statement", "CDP"),
    ("future", True, "statement", "GDP"),
    ("future", False, "yesno", "CDP"),
    ("future", False, "what", ""),
    ("past", False, "statement", "CDP"),
    ("past", True, "statement", "NDP"),
    ("past", False, "yesno", "CDP"),
    ("past", False, "what", ""),
)
_STATIVE_FRAMES = {
    "喜欢": (("present", False, "statement", "GADP"), ("present", True, "statement", "GADP"),
            ("present", False, "yesno", "GADP"), ("present", False, "what", "")),
    "有": (("present", False, "statement", "GCP"), ("present", True, "statement", "NDP"),
          ("present", False, "yesno", "NCP"), ("present", False, "what", "")),
    "要": (("present", False, "statement", "GCD"), ("present", True, "statement", "GD"),
          ("present", False, "yesno", "GCD"), ("present", False, "what", "")),
}
_TIME_BY_TENSE = {
    "present": (None,),
    "habit": (TIMES[0],),
    "future": (TIMES[1],),
    "past": (None, TIMES[2], TIMES[3]),
}


def _objects(noun: Noun, forms: str, rng: random.Random) -> list[_Phrase]:
    """The object noun phrases of the given forms for one noun (numbers sampled)."""
    adjectives = _adjectives_for(noun)
    phrases: list[_Phrase] = []
    for form in forms:
        if form == "G":
            phrases.append(_np_generic(noun))
        elif form == "N":
            phrases.append(_np_generic(noun, with_any=True))
        elif form == "A":
            phrases += [_np_generic(noun, adj) for adj in adjectives]
        elif form == "C":
            for adj in (None,) + adjectives:
                numbers = [1] + rng.sample(range(2, len(NUMBERS) + 1), 2)
                phrases += [_np_counted(noun, n, adj) for n in numbers]
        elif form == "D":
            phrases += [_np_demonstrative(noun, dem) for dem in _demonstratives_for(noun)]
            if adjectives:
                dem = rng.choice(_demonstratives_for(noun))
                phrases.append(_np_demonstrative(noun, dem, rng.choice(adjectives)))
        elif form == "P" and noun.possessable:
            phrases += [_np_possessive(noun, owner) for owner in rng.sample(PRONOUNS, 3)]
    return phrases


def _verb_sentences(rng: random.Random, subjects) -> Iterator[Sentence]:
    """Every verb sense × frame × object noun phrase, with a random subject/place/time."""
    for verb in VERBS:
        frames = _STATIVE_FRAMES[verb.zh] if verb.stative else _ACTION_FRAMES
        takes_place = not verb.stative or verb.zh == "有"
        nouns = [noun for noun in NOUNS if set(noun.kinds) & set(verb.kinds)]
        for tense, negated, mode, forms in frames:
            if mode == "what":
                if verb.zh == "看":
                    continue  # 看什么 would be ambiguous between read and watch
                for _ in range(120):
                    yield _random_clause(rng, verb, subjects, None, tense, negated, mode,
                                         takes_place)
                continue
            for noun in nouns:
                noun_forms = forms
                if verb.zh == "有" and "person" in noun.kinds:
                    noun_forms = forms.replace("D", "").replace("P", "")  # not 我有你的老师
                for obj in _objects(noun, noun_forms, rng):
                    yield _random_clause(rng, verb, subjects, obj, tense, negated, mode,
                                         takes_place)


def _random_clause(rng, verb, subjects, obj, tense, negated, mode, takes_place):
    place = rng.choice(PLACES) if takes_place and rng.random() < _PLACE_PROBABILITY else None
    time = rng.choice(_TIME_BY_TENSE[tense])
    return _clause(verb, _pick_subject(rng, subjects), obj, tense, negated, mode, place, time)


def _core_sentences() -> Iterator[Sentence]:
    """The simplest frames with pronoun subjects, all enumerated, so the basics are certain:
    我喜欢苹果。 你吃什么？ 我在家吃苹果。 我每天喝茶。 我今天买了一本书。"""
    for subject in map(_pronoun, PRONOUNS):
        for verb in VERBS:
            if verb.zh != "看":
                yield _clause(verb, subject, None, "present", False, "what", None, None)
            for noun in NOUNS:
                if not set(noun.kinds) & set(verb.kinds):
                    continue
                generic = _np_generic(noun)
                with_any = _np_generic(noun, with_any=True) if verb.zh == "有" else generic
                yield _clause(verb, subject, generic, "present", False, "statement", None, None)
                yield _clause(verb, subject, with_any, "present", True, "statement", None, None)
                yield _clause(verb, subject, with_any, "present", False, "yesno", None, None)
                if verb.stative:
                    continue
                yield _clause(verb, subject, generic, "habit", False, "statement", None, TIMES[0])
                for place in PLACES:
                    yield _clause(verb, subject, generic, "present", False, "statement", place,
                                  None)
                for time in _TIME_BY_TENSE["past"]:
                    yield _clause(verb, subject, _np_counted(noun, 1), "past", False,
                                  "statement", None, time)


def _identity_sentences() -> Iterator[Sentence]:
    """这是一个苹果。 → this is an apple . ; 这些是我的书吗？ → are these my books ? …"""
    for dem_zh, dem_en, plural in DEMONSTRATIVES:
        person = "3pl" if plural else "3sg"
        yield _finish(dem_zh + "是什么", ("what", _be(person), dem_en), question=True)
        for noun in NOUNS:
            if plural and not noun.countable:
                continue
            for complement in _identity_complements(noun, plural):
                for negated, question in ((False, False), (True, False), (False, True)):
                    zh = dem_zh + ("不" if negated else "") + "是" + complement.zh
                    if question:
                        en = (_be(person), dem_en) + complement.en
                        zh += "吗"
                    else:
                        en = (dem_en, _be(person)) + ("not",) * negated + complement.en
                    yield _finish(zh, en, question, complement.combos)


def _identity_complements(noun: Noun, plural: bool) -> list[_Phrase]:
    adjectives = (None,) + _adjectives_for(noun)
    if plural:
        phrases = [_np_generic(noun, adj) for adj in adjectives]
    else:
        phrases = [_np_counted(noun, 1, adj) for adj in adjectives]
        if not noun.countable:
            phrases.append(_np_generic(noun))
    if noun.possessable:
        phrases += [_np_possessive(noun, owner, plural) for owner in PRONOUNS]
    return phrases


def _person_sentences(subjects) -> Iterator[Sentence]:
    """他是老师。 → he is a teacher . ; 你们是我的朋友吗？ → are you my friends ?"""
    people = [noun for noun in NOUNS if "person" in noun.kinds]
    for subject in subjects[: len(PRONOUNS)]:
        plural = subject.person.endswith("pl")
        for noun in people:
            complements = [_np_generic(noun)] if plural else [_np_counted(noun, 1)]
            bare = _Phrase(noun.zh, complements[0].en)
            complements += [_np_possessive(noun, owner, plural) for owner in PRONOUNS
                            if noun.possessable and not _same_group(owner.zh, subject.zh)]
            if not plural:
                complements.insert(0, bare)
            for complement in complements:
                for negated, question in ((False, False), (True, False), (False, True)):
                    zh = subject.zh + ("不" if negated else "") + "是" + complement.zh
                    be = _be(subject.person)
                    if question:
                        en = (be,) + subject.en + complement.en
                        zh += "吗"
                    else:
                        en = subject.en + (be,) + ("not",) * negated + complement.en
                    yield _finish(zh, en, question)


def _same_group(owner: str, subject: str) -> bool:
    """我 and 我们 (or 你 and 你们) overlap: no 我是我们的朋友."""
    return owner[0] == subject[0] and owner[0] in "我你"


def _description_sentences() -> Iterator[Sentence]:
    """这只猫很大。 → this cat is big . ; 我的车是红色的吗？ → is my car red ?"""
    for noun in NOUNS:
        adjectives = _adjectives_for(noun)
        if not adjectives:
            continue
        subjects = [_np_demonstrative(noun, dem) for dem in _demonstratives_for(noun)]
        subjects += [_np_possessive(noun, owner) for owner in PRONOUNS if noun.possessable]
        for subject in subjects:
            be = _be(subject.person)
            for adj in adjectives:
                combos = (("adj", adj.key, noun.zh),)
                if adj.is_colour:
                    forms = ("是" + adj.key + "的", "不是" + adj.key + "的", "是" + adj.key + "的吗")
                else:
                    forms = (adj.predicative, "不" + adj.key, adj.key + "吗")
                yield _finish(subject.zh + forms[0], subject.en + (be, adj.en), False, combos)
                yield _finish(subject.zh + forms[1], subject.en + (be, "not", adj.en), False,
                              combos)
                yield _finish(subject.zh + forms[2], (be,) + subject.en + (adj.en,), True, combos)


def generate_sentences() -> Iterator[Sentence]:
    """Every sentence of every template, in a fixed order (a Chinese sentence may come twice)."""
    rng = random.Random(_GRAMMAR_SEED)
    subjects = _subjects()
    yield from _core_sentences()
    yield from _identity_sentences()
    yield from _person_sentences(subjects)
    yield from _description_sentences()
    yield from _verb_sentences(rng, subjects)
