"""The attention lab in a real browser: it loads cleanly and offline, translates what is typed,
and masking a source token shows the Python API's translation for that mask and redraws the
attention (the masked column turns white); Chinese column labels stand upright, a new beam tree
opens at its root, and an empty submit clears the old translation and says what to do."""
import os
import subprocess
import sys
from pathlib import Path

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from transformer.lab import translate_with_mask
from transformer.translator import load_translator
from viz.lab import LabServer
from viz.lab.screenshot import lab_screenshot

ROOT = Path(__file__).resolve().parents[2]
TINY = ["--d-model", "32", "--heads", "2", "--layers", "2", "--d-ff", "64", "--max-tokens", "600", "--no-progress"]
TEXT = "我喜欢猫"
MASKED_PIXELS = """
return [...document.querySelectorAll('#attention canvas')].map((canvas) => {
  const { left, top, cell } = canvas.dataset, ratio = window.devicePixelRatio || 1;
  const ctx = canvas.getContext('2d'), rows = (canvas.height / ratio - top - 4) / cell;
  return Array.from({ length: Math.round(rows) }, (_, q) => [...ctx.getImageData(
    (Number(left) + arguments[0] * cell + cell / 2) * ratio, (Number(top) + q * cell + cell / 2) * ratio, 1, 1).data]);
});"""


@pytest.fixture(scope="module")
def translator(tmp_path_factory):
    out = tmp_path_factory.mktemp("lab") / "run"
    env = {**os.environ, "TINYGRAD_LITE_BACKEND": "numpy", "PYTHONPATH": str(ROOT)}
    run = subprocess.run([sys.executable, "-m", "transformer", "train", "--out", str(out), "--max-steps", "6",
                          *TINY], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr
    return load_translator(out / "best.safetensors")


@pytest.fixture(scope="module")
def lab(translator):
    running = LabServer(lambda text, mask: translate_with_mask(translator, text, mask)).start()
    yield running
    running.stop()


def results_reach(count):
    return lambda driver: int(driver.execute_script("return document.body.dataset.results || 0")) >= count


def test_the_lab_translates_masks_and_redraws(browser, page_checks, lab, translator):
    browser.get(lab.url)
    wait = WebDriverWait(browser, 60)
    wait.until(results_reach(1))
    box = browser.find_element(By.ID, "text")
    box.clear()
    box.send_keys(TEXT)
    browser.find_element(By.ID, "go").click()
    wait.until(results_reach(2))
    assert browser.find_element(By.ID, "translation").text == translate_with_mask(translator, TEXT)["translation"]
    tokens = browser.find_elements(By.CSS_SELECTOR, "#source .token")
    assert [t.get_attribute("data-position") for t in tokens] == ["0", "1", "2", "3", "4"]
    assert len(browser.find_elements(By.CSS_SELECTOR, "#attention canvas")) == 2        # the heads of layer 1
    before = browser.execute_script(MASKED_PIXELS, 1)
    drawn = int(browser.find_element(By.ID, "attention").get_attribute("data-drawn"))

    tokens[1].click()
    wait.until(results_reach(3))
    expected = translate_with_mask(translator, TEXT, [1])
    assert browser.find_element(By.ID, "translation").text == expected["translation"]
    assert "masked" in browser.find_elements(By.CSS_SELECTOR, "#source .token")[1].get_attribute("class")
    assert int(browser.find_element(By.ID, "attention").get_attribute("data-drawn")) > drawn
    after = browser.execute_script(MASKED_PIXELS, 1)
    white = [255, 255, 255, 255]
    assert any(pixel != white for head in before for pixel in head)
    assert all(pixel == white for head in after for pixel in head) and len(after) == 2
    nodes = browser.find_elements(By.CSS_SELECTOR, "#beam g.node")
    assert len(nodes) == len(expected["beam"]["nodes"])
    assert browser.find_element(By.CSS_SELECTOR, "#beam g.best").get_attribute("data-id") == \
        str(expected["beam"]["best"])

    errors, outside = page_checks(browser)
    assert errors == [] and outside == []


def test_a_bad_mask_shows_the_servers_reason(browser, page_checks, lab):
    browser.get(lab.url)
    WebDriverWait(browser, 60).until(results_reach(1))
    browser.execute_script("state.mask.add(99); translate();")
    error = browser.find_element(By.ID, "error")
    WebDriverWait(browser, 60).until(lambda driver: error.is_displayed())
    assert "masked position 99 is outside" in error.text
    errors, outside = page_checks(browser)
    assert outside == [] and all("400" in e for e in errors)


def test_the_screenshot_is_written(browser, lab, tmp_path):
    out = lab_screenshot(browser, lab.url, tmp_path / "lab.png", text=TEXT, mask=1)
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and out.stat().st_size > 10_000


LABEL_INK = """
const canvas = document.querySelector('#attention canvas'), ratio = window.devicePixelRatio || 1;
const { left, top, cell } = canvas.dataset, k = arguments[0];
const x0 = Math.round((Number(left) + k * cell + 2) * ratio);
const x1 = Math.round((Number(left) + (k + 1) * cell - 3) * ratio);
const height = Math.round((Number(top) - 2) * ratio);
const data = canvas.getContext('2d').getImageData(x0, 0, x1 - x0, height).data;
let xs = [], ys = [];
for (let y = 0; y < height; y++) for (let x = 0; x < x1 - x0; x++)
  if (data[4 * (y * (x1 - x0) + x) + 3] > 128) { xs.push(x); ys.push(y); }
return xs.length ? [Math.max(...xs) - Math.min(...xs) + 1, Math.max(...ys) - Math.min(...ys) + 1] : [0, 0];"""


def test_chinese_column_labels_stand_upright(browser, lab):
    """一 (one) is a single horizontal stroke: upright its ink is wide and flat, turned it stands tall."""
    browser.get(lab.url)
    WebDriverWait(browser, 60).until(results_reach(1))
    assert browser.find_element(By.ID, "text").get_attribute("value")[2] == "一"
    width, height = browser.execute_script(LABEL_INK, 2)
    assert width >= 4 and width > 2 * height, (width, height)


TREE_VIEW = """
const view = document.querySelector('.tree-scroll').getBoundingClientRect();
const root = document.querySelector('#beam g.node[data-id="0"] rect').getBoundingClientRect();
return root.left >= view.left && root.right <= view.right && root.top >= view.top && root.bottom <= view.bottom;"""


def test_a_new_beam_tree_opens_at_its_root(browser, lab):
    """A learner scrolls the tree to its far corner, then masks two tokens: each new tree shows its root."""
    browser.get(lab.url)
    wait = WebDriverWait(browser, 60)
    wait.until(results_reach(1))
    browser.execute_script("document.querySelector('.tree-scroll').style.maxHeight = '6rem'")  # a small screen
    for count, position in enumerate([1, 2], start=2):
        browser.execute_script("const view = document.querySelector('.tree-scroll');"
                               "view.scrollTop = view.scrollHeight; view.scrollLeft = view.scrollWidth;")
        browser.find_elements(By.CSS_SELECTOR, "#source .token")[position].click()
        wait.until(results_reach(count))
        taller = "const v = document.querySelector('.tree-scroll'); return v.scrollHeight > v.clientHeight"
        assert browser.execute_script(taller), "the tree fits its box: nothing to scroll"
        assert browser.execute_script(TREE_VIEW), f"after mask {count - 1} the root is out of view"


@pytest.mark.parametrize("typed", ["", "   "], ids=["empty", "spaces"])
def test_an_empty_submit_clears_the_translation_and_says_what_to_do(browser, page_checks, lab, typed):
    browser.get(lab.url)
    WebDriverWait(browser, 60).until(results_reach(1))
    assert browser.find_element(By.ID, "translation").text
    box = browser.find_element(By.ID, "text")
    box.clear()
    box.send_keys(typed)
    browser.find_element(By.ID, "go").click()
    error = browser.find_element(By.ID, "error")
    WebDriverWait(browser, 30).until(lambda driver: error.is_displayed())
    assert "type some Chinese" in error.text
    assert browser.find_element(By.ID, "translation").text == ""
    assert browser.find_elements(By.CSS_SELECTOR, "#source .token, #attention canvas, #beam g.node") == []
    errors, outside = page_checks(browser)
    assert errors == [] and outside == []
