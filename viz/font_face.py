"""The bundled Chinese font as CSS a page carries inside itself, so 苹果 is drawn, not empty boxes.

A machine with no CJK font (most servers, CI, a fresh Linux) draws Chinese as tofu. A page that
is one offline file cannot fetch a font either, so `font_face_css(text)` cuts the font bundled in
viz/fontdata down to the Chinese characters `text` holds (fontTools' subsetter; fontTools comes
with matplotlib) and returns an @font-face whose source is that cut as a base64 data: URL: a few
kB for a sentence, at most `MAX_FONT_BYTES`. Pages list the family after their Latin fonts
(`font-family: ..., "TinygradLite CJK"`), so Latin keeps its font and Chinese falls back to this
one. This module imports no matplotlib: page builders and servers use it cheaply.
"""
from __future__ import annotations

import base64
import io
from pathlib import Path

BUNDLED_FONT_FAMILY = "TinygradLite CJK"
BUNDLED_FONT_PATH = str(Path(__file__).resolve().parent / "fontdata" / "TinygradLiteCJK-Regular.otf")
MAX_FONT_BYTES = 300_000  # of base64 text in a page

CJK_RANGES = (
    (0x2E80, 0x2FDF),  # radicals
    (0x3000, 0x30FF),  # CJK punctuation, kana
    (0x3100, 0x31FF),  # bopomofo, kana extensions
    (0x3400, 0x4DBF),  # extension A
    (0x4E00, 0x9FFF),  # unified ideographs
    (0xAC00, 0xD7AF),  # hangul syllables
    (0xF900, 0xFAFF),  # compatibility ideographs
    (0xFF00, 0xFFEF),  # full-width forms
    (0x20000, 0x3134F),  # extensions B and later
)


def is_cjk(ch: str) -> bool:
    """True for a Chinese/Japanese/Korean character (one DejaVu Sans cannot draw)."""
    return any(lo <= ord(ch) <= hi for lo, hi in CJK_RANGES)


def cjk_characters(text: str) -> str:
    """The distinct CJK characters of `text`, in order of first appearance."""
    return "".join(dict.fromkeys(ch for ch in text if is_cjk(ch)))


def subset_font(characters: str, path: str = BUNDLED_FONT_PATH) -> bytes:
    """The font file at `path` (OpenType/TrueType) cut down to `characters`' glyphs, as bytes of the same format."""
    from fontTools import subset
    from fontTools.ttLib import TTFont

    options = subset.Options()
    options.hinting = False          # browsers hint CJK outlines themselves
    options.desubroutinize = True    # smaller once a page's few glyphs are left
    options.layout_features = []
    with TTFont(path) as font:
        subsetter = subset.Subsetter(options)
        subsetter.populate(text=characters)
        subsetter.subset(font)
        out = io.BytesIO()
        font.save(out)
    return out.getvalue()


def font_face_css(text: str, family: str = BUNDLED_FONT_FAMILY, max_bytes: int = MAX_FONT_BYTES,
                  path: str = BUNDLED_FONT_PATH) -> str:
    """An @font-face rule for `family` holding the bundled font's glyphs for the CJK characters of
    `text` (a data: URL, so the page stays one offline file), or "" if `text` has none or the
    font file is missing. Past `max_bytes` of base64 it keeps the characters that appear first."""
    characters = cjk_characters(text)
    if not characters or not Path(path).is_file():
        return ""
    keep = len(characters)
    while True:
        encoded = base64.b64encode(subset_font(characters[:keep], path)).decode("ascii")
        if len(encoded) <= max_bytes or keep == 1:
            break
        keep = max(1, int(keep * max_bytes / len(encoded) * 0.95))
    if len(encoded) > max_bytes:
        raise ValueError(f"font_face_css: one glyph of {path} takes {len(encoded)} bytes, over max_bytes={max_bytes}")
    return (f'@font-face {{ font-family: "{family}"; font-display: block; '
            f'src: url("data:font/otf;base64,{encoded}") format("opentype"); }}')
