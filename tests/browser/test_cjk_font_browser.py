"""Chinese is drawn with glyphs, not tofu, on a machine with no CJK system font (this one and CI's):
the explorer's page carries the bundled font cut to its own characters, and the lab's input box
shows its first text (这是一个苹果) with the bundled font before anyone types.

Each check measures what the browser drew: a CJK glyph of the bundled font is one em wide, while
the missing-glyph box a font without CJK draws instead is narrower (0.6 em in DejaVu Sans)."""
from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

REPO = Path(__file__).resolve().parents[2]
FAMILY = "TinygradLite CJK"
# widths of a CJK character as the page draws it and as a font without CJK draws it (tofu), in ems
DRAWN_WIDTHS = f"""
const cjk = /[\\u3000-\\u9fff\\uff00-\\uffef]/, out = {{}};
const widthIn = (node, at) => {{ const range = document.createRange(); range.setStart(node, at);
  range.setEnd(node, at + 1); return range.getBoundingClientRect().width; }};
const text = [...document.querySelectorAll('#graph svg text')].find((t) => cjk.test(t.textContent));
out.graph = text.getSubStringLength(text.textContent.search(cjk), 1) / parseFloat(getComputedStyle(text).fontSize);
const title = document.getElementById('node-title').firstChild;
out.panel = widthIn(title, title.textContent.search(cjk)) / parseFloat(getComputedStyle(title.parentNode).fontSize);
const probe = document.createElement('span');
probe.style.font = '40px "DejaVu Sans"';
probe.textContent = '我';
document.body.appendChild(probe);
out.tofu = widthIn(probe.firstChild, 0) / 40;
probe.remove();
out.faces = [...document.fonts].filter((f) => f.family.replace(/"/g, '') === '{FAMILY}').map((f) => f.status);
return out;"""


@pytest.fixture(scope="module")
def translator_checkpoint(tmp_path_factory):
    """An untrained translator in the real checkpoint format; its corpus pair is Chinese."""
    from tinygrad_lite import manual_seed
    from transformer import Transformer
    from transformer.data import Vocab, builtin_corpus, tokenize_en, tokenize_zh
    from transformer.translator import Translator

    zh, en = builtin_corpus()["train"][0]
    manual_seed(0)
    src_vocab, tgt_vocab = Vocab(tokenize_zh(zh)), Vocab(tokenize_en(en))
    model = Transformer(len(src_vocab), len(tgt_vocab), d_model=16, h=2, N=1, d_ff=32, dropout=0.1)
    path = tmp_path_factory.mktemp("cjk") / "translator.safetensors"
    Translator(model, src_vocab, tgt_vocab).save(path)
    return path


def test_the_explorer_draws_its_chinese_labels_with_glyphs(browser, page_checks, tmp_path, translator_checkpoint):
    out = tmp_path / "translator.html"
    done = subprocess.run([sys.executable, "-m", "viz", "explore", "--checkpoint", str(translator_checkpoint),
                           "--out", str(out)], cwd=REPO, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    browser.get(out.as_uri())
    WebDriverWait(browser, 10).until(lambda d: d.execute_script("return document.fonts.status") == "loaded")
    widths = browser.execute_script(DRAWN_WIDTHS)
    assert widths["tofu"] < 0.8, f"this machine draws CJK without the page's font: {widths}"
    assert widths["graph"] == pytest.approx(1.0, abs=0.05), widths
    assert widths["panel"] == pytest.approx(1.0, abs=0.05), widths
    assert widths["faces"] == ["loaded"]
    assert page_checks(browser) == ([], [])


def ink_columns(png: bytes, inset: int = 4) -> int:
    """How many pixels wide the dark text inside an element's screenshot is (its border left out)."""
    from PIL import Image

    image = Image.open(io.BytesIO(png)).convert("L")
    width, height = image.size
    dark = [x for x in range(inset, width - inset)
            if min(image.getpixel((x, y)) for y in range(inset, height - inset)) < 100]
    return dark[-1] - dark[0] + 1 if dark else 0


def test_the_labs_first_text_is_drawn_with_glyphs_before_anyone_types(browser, page_checks, translator_checkpoint):
    from transformer.lab import translate_with_mask
    from transformer.translator import load_translator
    from viz.lab import LabServer

    translator = load_translator(translator_checkpoint)
    lab = LabServer(lambda text, mask: translate_with_mask(translator, text, mask)).start()
    try:
        browser.get(lab.url)
        WebDriverWait(browser, 60).until(
            lambda d: int(d.execute_script("return document.body.dataset.results || 0")) >= 1)
        WebDriverWait(browser, 10).until(lambda d: d.execute_script("return document.fonts.status") == "loaded")
        box = browser.find_element(By.ID, "text")
        text = box.get_attribute("value")
        em = float(browser.execute_script("return parseFloat(getComputedStyle(arguments[0]).fontSize)", box))
        assert text and all("\u4e00" <= ch <= "\u9fff" for ch in text)
        drawn = ink_columns(box.screenshot_as_png) / em
        assert drawn == pytest.approx(len(text), abs=0.5), \
            f"{text!r} is {drawn:.2f} em wide, expected {len(text)} (tofu draws ~{0.6 * len(text):.1f})"
        assert page_checks(browser) == ([], [])
    finally:
        lab.stop()
