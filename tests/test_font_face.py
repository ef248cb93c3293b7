"""viz.font_face: the bundled Chinese font cut to a page's own characters, as an @font-face a page
carries inline (a base64 data: URL), within its byte budget."""
import base64
import io
import re

import pytest
from fontTools.ttLib import TTFont

from viz.font_face import BUNDLED_FONT_FAMILY, BUNDLED_FONT_PATH, cjk_characters, font_face_css

DATA_URL = re.compile(r'url\("data:font/otf;base64,([A-Za-z0-9+/=]+)"\)')


def embedded_font(css: str) -> tuple[TTFont, int]:
    """The font an @font-face rule carries, and the length of its base64 text."""
    encoded = DATA_URL.search(css).group(1)
    return TTFont(io.BytesIO(base64.b64decode(encoded))), len(encoded)


def test_the_face_holds_exactly_the_pages_chinese_characters():
    text = "loss on 这是一个苹果 → this is an apple; 苹果！"
    css = font_face_css(text)
    assert css.startswith("@font-face") and f'font-family: "{BUNDLED_FONT_FAMILY}"' in css
    font, size = embedded_font(css)
    mapped = {chr(c) for c in font.getBestCmap()}
    assert mapped == set("这是一个苹果！")
    assert all(font.getGlyphSet()[font.getBestCmap()[ord(ch)]].width == 1000 for ch in "这是一个苹果")
    assert size < 20_000


def test_text_without_chinese_needs_no_face():
    assert font_face_css("backward, step by step: xor → loss 0.25") == ""
    assert cjk_characters("ab 苹果 c 苹") == "苹果"


def test_past_the_budget_the_first_characters_are_kept():
    with TTFont(BUNDLED_FONT_PATH) as bundled:
        text = "".join(chr(c) for c in sorted(bundled.getBestCmap()) if 0x4E00 <= c <= 0x9FFF)[:600]
    whole = embedded_font(font_face_css(text))
    assert len(whole[0].getBestCmap()) == len(text)
    css = font_face_css(text, max_bytes=whole[1] // 4)
    font, size = embedded_font(css)
    kept = "".join(sorted(chr(c) for c in font.getBestCmap()))
    assert size <= whole[1] // 4 and 0 < len(kept) < len(whole[0].getBestCmap())
    assert text.startswith(kept)


def test_a_missing_font_file_gives_no_face_and_a_tiny_budget_says_so(tmp_path):
    assert font_face_css("苹果", path=str(tmp_path / "missing.otf")) == ""
    with pytest.raises(ValueError, match="font_face_css: one glyph .* over max_bytes=10"):
        font_face_css("苹果", max_bytes=10)
