"""Tokenizers for the translator: Chinese by character, English by word and punctuation.

Chinese has no spaces between words, so the toy model reads it one character a token
(the article's translator does the same); runs of Latin letters and digits stay whole so
"iPhone" or "2024" is one token, not six. English splits on words and punctuation.
Both must accept any Unicode string, and ``detokenize`` must give back text that
tokenizes to the same tokens.
"""

from __future__ import annotations

import re
import unicodedata

# Latin letters (with accents) and digits form the words kept whole inside Chinese text.
_LATIN_OR_DIGIT = r"[0-9A-Za-z\u00C0-\u024F]"
_ZH_WORD = re.compile(rf"{_LATIN_OR_DIGIT}+(?:[.,'’\-]{_LATIN_OR_DIGIT}+)*")
_ZH_JOINERS = ".,'’-"
_ZH_TOKEN = re.compile(rf"{_ZH_WORD.pattern}|\S")

# English: numbers with separators (3.5, 1,000, 10:30), words with inner ' or - (don't,
# it's, well-known), an ellipsis, or any other single non-space character.
_EN_TOKEN = re.compile(
    r"\d+(?:[.,:]\d+)+"
    r"|[^\W_]+(?:['\-][^\W_]+)*"
    r"|\.\.\."
    r"|\S"
)
_ATTACH_LEFT = frozenset(".,!?;:%)]}…") | {"..."}
_ATTACH_RIGHT = frozenset("([{")


def _require_text(operation: str, text) -> None:
    if not isinstance(text, str):
        raise TypeError(f"{operation}: expected a str, got {type(text).__name__}")


def _require_tokens(operation: str, tokens) -> list[str]:
    if isinstance(tokens, str):
        raise TypeError(f"{operation}: expected a sequence of str tokens, got a str")
    tokens = list(tokens)
    for token in tokens:
        if not isinstance(token, str):
            raise TypeError(f"{operation}: expected str tokens, got {type(token).__name__}")
    return tokens


def _is_control(token: str) -> bool:
    return len(token) == 1 and unicodedata.category(token) == "Cc"


def tokenize_zh(text: str) -> list[str]:
    """Split Chinese text into characters, keeping Latin words and numbers whole.

    Whitespace and control characters are dropped: 我有3个iPhone → 我 有 3 个 iPhone.
    """
    _require_text("tokenize_zh", text)
    return [token for token in _ZH_TOKEN.findall(text) if not _is_control(token)]


def _glues(char: str) -> bool:
    return re.fullmatch(_LATIN_OR_DIGIT, char) is not None or char in _ZH_JOINERS


def detokenize_zh(tokens) -> str:
    """Join Chinese tokens without spaces, except where two tokens would merge into one."""
    tokens = _require_tokens("detokenize_zh", tokens)
    pieces: list[str] = []
    for token in tokens:
        if not token:
            continue
        if pieces and _glues(pieces[-1][-1]) and _glues(token[0]):
            pieces.append(" ")
        pieces.append(token)
    return "".join(pieces)


def tokenize_en(text: str, lowercase: bool = True) -> list[str]:
    """Split English into words and punctuation; "don't" and "3.5" stay one token each.

    Lower-casing happens before splitting, so the tokens of a lower-cased text always
    tokenize back to themselves. A curly apostrophe inside a word becomes a straight one.
    """
    _require_text("tokenize_en", text)
    if lowercase:
        text = text.lower()
    text = re.sub(r"(?<=\w)’(?=\w)", "'", text)
    return [token for token in _EN_TOKEN.findall(text) if not _is_control(token)]


def detokenize_en(tokens, attach_punctuation: bool = False) -> str:
    """Join English tokens with single spaces.

    With ``attach_punctuation`` closing punctuation sticks to the word before and opening
    brackets to the word after ("hello , world !" → "hello, world!"); without it the
    result is the corpus normal form ("this is an apple .").
    """
    tokens = [token for token in _require_tokens("detokenize_en", tokens) if token]
    if not attach_punctuation:
        return " ".join(tokens)
    pieces: list[str] = []
    for token in tokens:
        if pieces and token not in _ATTACH_LEFT and pieces[-1] not in _ATTACH_RIGHT:
            pieces.append(" ")
        pieces.append(token)
    return "".join(pieces)
