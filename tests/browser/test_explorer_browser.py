"""The backward stepper in a real browser: `python -m viz explore xor|transformer` pages open from
file:// with no console error and no outside request; the right arrow walks the nodes in
backward's order and the gradient the page shows at each step is the engine's .grad for that
node (computed here by the CLI's own step, not read from the page); hover shows value, grad and
shape; clicking a module box opens it and clicking its frame closes it."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[2]
STEPS = 24


def write_page(tmp_path, model) -> Path:
    out = tmp_path / f"{model}.html"
    done = subprocess.run([sys.executable, "-m", "viz", "explore", model, "--out", str(out)], cwd=REPO,
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    return out


def engine_gradients(model) -> list:
    """The engine's gradients in the order its backward visits the nodes, from the CLI's step."""
    from tinygrad_lite.autograd import toposort
    from viz.__main__ import STEPS as BUILDERS
    from viz.__main__ import build_parser

    loss, _ = BUILDERS[model](build_parser().parse_args(["explore", model, "--out", "unused.html"]))
    if hasattr(loss, "requires_grad"):
        return [np.asarray(t.grad, dtype=np.float64).reshape(-1) for t in reversed(toposort(loss))]
    order = list(reversed(loss.topological_order()))  # zeroes interior grads: backward again
    for v in order:
        v.grad = 0.0
    loss.backward()
    return [np.array([v.grad]) for v in order]


def shown_gradient(driver, step: int) -> np.ndarray:
    from selenium.webdriver.support.ui import WebDriverWait

    WebDriverWait(driver, 5).until(lambda d: d.find_element("id", "grad-view").get_attribute("data-step") == str(step))
    return np.array([float(e.text) for e in driver.find_elements("css selector", "#grad-view .num")])


@pytest.mark.parametrize("model", ["xor", "transformer"])
def test_stepping_shows_the_engines_gradients(browser, page_checks, tmp_path, model):
    from selenium.webdriver.common.keys import Keys

    page = write_page(tmp_path, model)
    expected = engine_gradients(model)
    browser.get(page.as_uri())
    body = browser.find_element("tag name", "body")
    for step in range(min(STEPS, len(expected))):
        if step:
            body.send_keys(Keys.ARROW_RIGHT)
        shown = shown_gradient(browser, step)
        assert shown.size == min(16, expected[step].size)
        np.testing.assert_allclose(shown, expected[step][:16], rtol=1e-5, atol=1e-12)
        assert browser.find_elements("css selector", "g.node.current"), f"step {step} highlights nothing"
    assert len(expected) >= 20
    errors, outside = page_checks(browser)
    assert errors == [] and outside == []


def test_hover_shows_value_grad_and_shape(browser, page_checks, tmp_path):
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.support.ui import WebDriverWait

    browser.get(write_page(tmp_path, "xor").as_uri())
    node = browser.find_element("css selector", "g.node.current")
    ActionChains(browser).move_to_element(node).perform()
    tip = browser.find_element("id", "tip")
    WebDriverWait(browser, 5).until(lambda d: tip.is_displayed())
    text = tip.text
    assert "value" in text and "grad" in text and "shape" in text and "norm" in text
    assert tip.get_attribute("data-node") == browser.find_element("id", "grad-view").get_attribute("data-node")
    assert page_checks(browser) == ([], [])


def test_clicking_a_module_opens_and_closes_it(browser, page_checks, tmp_path):
    from selenium.webdriver.support.ui import WebDriverWait

    browser.get(write_page(tmp_path, "transformer").as_uri())
    graph = browser.find_element("id", "graph")
    box = next(g for g in browser.find_elements("css selector", "g.node.clickable")
               if g.get_attribute("data-opens") == "module:encoder.layers.0")
    box.click()
    WebDriverWait(browser, 5).until(lambda d: graph.get_attribute("data-view") == "module:encoder.layers.0")
    frame = browser.find_element("css selector", 'g.cluster.clickable[data-key="cluster_encoder.layers.0"] text')
    frame.click()
    WebDriverWait(browser, 5).until(lambda d: graph.get_attribute("data-view") == "default")
    assert page_checks(browser) == ([], [])


def rgb(css: str) -> tuple:
    """'rgb(1, 2, 3)' or '#010203' -> (1, 2, 3)."""
    if css.startswith("#"):
        return tuple(int(css[k:k + 2], 16) for k in (1, 3, 5))
    return tuple(int(float(part)) for part in css[css.index("(") + 1:css.index(")")].split(",")[:3])


def legend_colours() -> list:
    """Every colour the graph's legend gives a state: the gradient-norm scale, zero, NaN/Inf."""
    from viz.graph import NONFINITE_GRAD_COLOUR, ZERO_GRAD_COLOUR, grad_colour

    return [rgb(grad_colour(10 ** (k / 50), 0.0, 1.0)) for k in range(51)] + \
        [rgb(ZERO_GRAD_COLOUR), rgb(NONFINITE_GRAD_COLOUR)]


def test_stepping_opens_the_module_a_node_is_folded_into_and_marks_it_in_no_legend_colour(
        browser, page_checks, tmp_path):
    """At --depth 2 the steps walk into closed layer boxes: each step opens the box it is in, so
    the highlight sits on the node itself (never on a box that could open), in a colour at least
    150 (RGB distance) from every state colour of the legend."""
    from selenium.webdriver.common.keys import Keys

    browser.get(write_page(tmp_path, "transformer").as_uri())
    body, graph = browser.find_element("tag name", "body"), browser.find_element("id", "graph")
    legend = legend_colours()
    views, highlighted = set(), []
    for step in range(40):
        if step:
            body.send_keys(Keys.ARROW_RIGHT)
        shown_gradient(browser, step)
        current = browser.find_elements("css selector", "g.node.current")
        assert current, f"step {step} highlights nothing"
        assert not [g.get_attribute("data-opens") for g in current if g.get_attribute("data-opens")], \
            f"step {step} highlights a closed module box"
        views.add(graph.get_attribute("data-view"))
        highlighted.append(current[0].get_attribute("data-key"))
        stroke = rgb(browser.execute_script(
            "return getComputedStyle(arguments[0].querySelector('polygon, path, ellipse')).stroke", current[0]))
        assert min(np.linalg.norm(np.subtract(stroke, c)) for c in legend) >= 150, stroke
    assert len(views) > 1 and len(set(highlighted)) > 30
    assert "current step" in browser.find_element("css selector", ".help").text
    assert page_checks(browser) == ([], [])


def test_a_modules_tooltip_goes_when_its_box_opens(browser, page_checks, tmp_path):
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.support.ui import WebDriverWait

    browser.get(write_page(tmp_path, "transformer").as_uri())
    box = next(g for g in browser.find_elements("css selector", "g.node.clickable")
               if g.get_attribute("data-opens") == "module:encoder.layers.0")
    ActionChains(browser).move_to_element(box).perform()
    tip = browser.find_element("id", "tip")
    WebDriverWait(browser, 5).until(lambda d: tip.is_displayed())
    assert tip.text.startswith("module encoder.layers.0:")
    box.click()
    WebDriverWait(browser, 5).until(
        lambda d: d.find_element("id", "graph").get_attribute("data-view") == "module:encoder.layers.0")
    assert not tip.is_displayed() or not tip.text.startswith("module encoder.layers.0:"), tip.text
    assert page_checks(browser) == ([], [])


def test_the_hover_pictures_have_labels_and_a_scale(browser, page_checks, tmp_path):
    """The heatmap says what it shows (which rows and columns of which shape) and has a colour
    scale from -max|x| to +max|x|; the histogram says how many values in how many bins and has its
    value axis from the smallest to the largest value: all numbers the page's data holds."""
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support.ui import WebDriverWait

    from viz.explorer.page import embedded_data

    page = write_page(tmp_path, "mlp")
    data = embedded_data(page.read_text(encoding="utf-8"))
    step = next(k for k, i in enumerate(data["steps"]) if len(data["nodes"][i]["grad"]["shape"]) == 2)
    grad = data["nodes"][data["steps"][step]]["grad"]
    browser.get(page.as_uri())
    body = browser.find_element("tag name", "body")
    for _ in range(step):
        body.send_keys(Keys.ARROW_RIGHT)
    shown_gradient(browser, step)
    ActionChains(browser).move_to_element(browser.find_element("css selector", "g.node.current")).perform()
    tip = browser.find_element("id", "tip")
    WebDriverWait(browser, 5).until(lambda d: tip.is_displayed())
    rows, cols = grad["shape"]
    heat = tip.find_element("css selector", "figure.heatmap")
    assert heat.find_element("tag name", "figcaption").text.startswith(
        f"its gradient, heatmap: rows 1–{min(rows, 12)} × columns 1–{min(cols, 12)} of {rows} × {cols}")
    big = max(abs(x) for row in grad["grid"] for x in row)
    assert float(heat.find_element("css selector", ".scale-hi").text) == pytest.approx(big, rel=5e-3)
    assert float(heat.find_element("css selector", ".scale-lo").text) == pytest.approx(-big, rel=5e-3)
    hist = tip.find_element("css selector", "figure.histogram")
    assert hist.find_element("tag name", "figcaption").text.startswith(
        f"its gradient, histogram of all {grad['n']} values in {len(grad['hist']['counts'])} bins")
    assert f"the tallest: {max(grad['hist']['counts'])}" in hist.text
    assert float(hist.find_element("css selector", ".axis-lo").text) == pytest.approx(grad["hist"]["lo"], rel=5e-3)
    assert float(hist.find_element("css selector", ".axis-hi").text) == pytest.approx(grad["hist"]["hi"], rel=5e-3)
    assert page_checks(browser) == ([], [])
