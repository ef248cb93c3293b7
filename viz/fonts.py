"""Find a font that can draw Chinese, so token labels like '苹果' are not empty boxes.

matplotlib's default font (DejaVu Sans) has no CJK glyphs; the article's running example
("这是一个苹果" → "This is an apple") needs one. Discovery looks at the fonts matplotlib
knows, best-known CJK families first, and trusts a font only if its cmap really maps the
probe character (fontTools is a matplotlib dependency, so it is always importable). With no
such font installed, the font bundled in viz/fontdata/ is used: a 1.6 MB subset of Noto Sans SC
(SIL OFL 1.1) holding all of GB2312 and every character of the built-in and Tatoeba corpora.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from fontTools.ttLib import TTFont, TTLibError
from matplotlib import font_manager

from .font_face import BUNDLED_FONT_FAMILY, BUNDLED_FONT_PATH, is_cjk

CJK_PROBE = "苹"
FONT_ENV = "TINYGRAD_LITE_CJK_FONT"

CJK_NAME_PATTERNS = (
    "Noto Sans CJK",
    "Noto Serif CJK",
    "Noto Sans SC",
    "Noto Sans TC",
    "Noto Sans JP",
    "WenQuanYi",
    "Source Han",
    "AR PL",
    "Droid Sans Fallback",
    "Microsoft YaHei",
    "SimHei",
    "SimSun",
    "PingFang",
    "Hiragino",
    "Heiti",
)

CJK_FILE_PATTERN = re.compile(
    r"wqy|noto\w*cjk|notosans(sc|tc|jp|kr|hk)|sourcehan|ukai|uming|droidsansfallback"
    r"|msyh|simhei|simsun|pingfang|hiragino|stheiti",
    re.IGNORECASE,
)

# Fonts that map every code point to a placeholder box: "covering" CJK, drawing nothing useful.
PLACEHOLDER_FONT_NAMES = ("Last Resort",)

INSTALL_HINT = (
    "install a CJK font (e.g. `apt-get install fonts-wqy-microhei` or `fonts-noto-cjk`) "
    "or write .svg, which keeps the text as text for the browser to draw"
)


def missing_font_hint() -> str:
    """What to do when not even the bundled font is there (a broken or partial install)."""
    return (f"the font bundled with tinygrad-lite ({BUNDLED_FONT_PATH}) is missing; reinstall "
            f"tinygrad-lite, or {INSTALL_HINT}")


@dataclass(frozen=True)
class CJKFont:
    """An installed font file (face `index` inside a .ttc collection) that draws CJK."""

    name: str
    path: str
    index: int = 0

    def properties(self, size=None) -> font_manager.FontProperties:
        """FontProperties selecting exactly this face, at `size` points."""
        if self.index == 0:
            return font_manager.FontProperties(fname=self.path, size=size)
        return font_manager.FontProperties(family=self.name, size=size)


def needs_cjk_font(text: str) -> bool:
    """True if `text` has a Chinese/Japanese/Korean character that DejaVu Sans cannot draw."""
    return any(is_cjk(ch) for ch in text)


def font_covers(path: str, text: str, index: int = 0) -> bool:
    """True if the font file's cmap maps every character of `text`; unreadable fonts cover nothing."""
    cmap = _cmap(path, index)
    return bool(cmap) and all(ord(ch) in cmap for ch in text)


def _family_name(path: str, index: int = 0) -> str:
    """The font's family name from its name table, or its file name if unreadable."""
    is_collection = str(path).lower().endswith((".ttc", ".otc"))
    try:
        with TTFont(path, fontNumber=index if is_collection else -1, lazy=True) as font:
            name = font["name"].getBestFamilyName()
    except (OSError, TTLibError, AssertionError, KeyError, ValueError):
        name = None
    return name or os.path.splitext(os.path.basename(path))[0]


def _name_rank(name: str) -> int:
    for rank, pattern in enumerate(CJK_NAME_PATTERNS):
        if pattern.lower() in name.lower():
            return rank
    return len(CJK_NAME_PATTERNS)


def find_cjk_font(
    entries: Iterable | None = None,
    probe: str = CJK_PROBE,
    covers: Callable[[str, str, int], bool] | None = None,
) -> CJKFont | None:
    """The best font that draws `probe`, or None.

    `entries` are matplotlib FontEntry-like objects (`.name`, `.fname`, optional `.index`);
    by default matplotlib's font list, then CJK-named font files the system has but
    matplotlib's cached list missed (e.g. installed after the cache was built), and last the
    font bundled with the package (see `bundled_cjk_font`). The environment variable
    TINYGRAD_LITE_CJK_FONT overrides the default search: a font file's path, "bundled", or
    "none" (pretend no CJK font exists).
    """
    if entries is None and probe == CJK_PROBE and covers is None:
        override = os.environ.get(FONT_ENV, "").strip()
        if override:
            return _chosen_font(override)
        return _installed_cjk_font() or bundled_cjk_font()
    return _search(entries, probe, covers or font_covers)


def _chosen_font(choice: str) -> CJKFont | None:
    if choice.lower() == "none":
        return None
    if choice.lower() == "bundled":
        return bundled_cjk_font()
    if not os.path.isfile(choice):
        raise FileNotFoundError(f"find_cjk_font: {FONT_ENV}={choice!r} is no font file "
                                "(expected a path to a .ttf/.otf/.ttc, 'bundled' or 'none')")
    if not font_covers(choice, CJK_PROBE):
        raise ValueError(f"find_cjk_font: {FONT_ENV}={choice!r} has no Chinese glyphs "
                         f"(no glyph for {CJK_PROBE!r})")
    return CJKFont(name=_family_name(choice), path=choice)


@functools.lru_cache(maxsize=1)
def bundled_cjk_font() -> CJKFont | None:
    """The Chinese font shipped in viz/fontdata/, registered with matplotlib's font manager
    (so `family="TinygradLite CJK"` works too); None if the file is missing."""
    if not os.path.isfile(BUNDLED_FONT_PATH):
        return None
    font_manager.fontManager.addfont(BUNDLED_FONT_PATH)
    return CJKFont(name=BUNDLED_FONT_FAMILY, path=BUNDLED_FONT_PATH)


def uncovered_characters(font: CJKFont, text: str) -> str:
    """The distinct characters of `text` that `font` has no glyph for, in order of appearance."""
    cmap = _cmap(font.path, font.index)
    return "".join(dict.fromkeys(ch for ch in text if not ch.isspace() and ord(ch) not in cmap))


def _cmap(path: str, index: int = 0) -> frozenset:
    """The code points the font maps (empty if unreadable), cached per file version."""
    try:
        version = os.stat(path).st_mtime_ns
    except OSError:
        return frozenset()
    return _read_cmap(str(path), index, version)


@functools.lru_cache(maxsize=64)
def _read_cmap(path: str, index: int, version: int) -> frozenset:
    is_collection = str(path).lower().endswith((".ttc", ".otc"))
    try:
        with TTFont(path, fontNumber=index if is_collection else -1, lazy=True) as font:
            return frozenset(font.getBestCmap() or {})
    except (OSError, TTLibError, AssertionError, KeyError, ValueError):
        return frozenset()


@functools.lru_cache(maxsize=1)
def _installed_cjk_font() -> CJKFont | None:
    found = _search(None, CJK_PROBE, font_covers)
    if found is not None:
        return found
    known = {os.path.realpath(entry.fname) for entry in font_manager.fontManager.ttflist}
    for path in sorted(font_manager.findSystemFonts()):
        if os.path.realpath(path) in known or not CJK_FILE_PATTERN.search(os.path.basename(path)):
            continue
        if font_covers(path, CJK_PROBE):
            return CJKFont(name=_family_name(path), path=path)
    return None


def _search(entries, probe: str, covers) -> CJKFont | None:
    if entries is None:
        entries = font_manager.fontManager.ttflist
    candidates = [
        entry
        for entry in entries
        if not any(bad.lower() in entry.name.lower() for bad in PLACEHOLDER_FONT_NAMES)
    ]
    candidates.sort(key=lambda entry: _name_rank(entry.name))
    checked = set()
    for entry in candidates:
        index = getattr(entry, "index", 0) or 0
        key = (entry.fname, index)
        if key in checked:
            continue
        checked.add(key)
        if covers(entry.fname, probe, index):
            return CJKFont(name=entry.name, path=entry.fname, index=index)
    return None
