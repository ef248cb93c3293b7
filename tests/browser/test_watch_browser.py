"""The live training page in a real browser: a 15-second training run with --explore, watched
from its start to its end; a finished run's page says it is done, explains each curve and draws
one gradient-norm chart a module; a page whose server goes without an end says so."""
import json
import subprocess
import sys

import pytest
from selenium.webdriver.support.ui import WebDriverWait
from watch_support import ROOT, TINY, start_explore_run

from viz.watch import WatchServer


def count(driver, element_id) -> int:
    return int(driver.find_element("id", element_id).get_attribute("data-count"))


def test_the_page_follows_a_15_second_run(browser, page_checks, tmp_path):
    proc, url = start_explore_run(tmp_path, "--minutes", "0.25", "--eval-every", "20", *TINY)
    try:
        browser.get(url)
        WebDriverWait(browser, 60).until(lambda d: count(d, "events") > 0)
        proc.wait(timeout=180)  # the run stops by itself (--minutes 0.25)
    finally:
        if proc.poll() is None:
            proc.kill()
    out, err = proc.communicate()
    assert proc.returncode == 0, err
    events = [json.loads(line) for line in (tmp_path / "events.jsonl").read_text(encoding="utf-8").splitlines()]
    WebDriverWait(browser, 10).until(lambda d: count(d, "events") == len(events))
    assert events[-1]["type"] == "end" and browser.find_element("id", "state").text == "done"
    assert browser.find_element("id", "finished").is_displayed() and browser.title == "Training, done"
    assert count(browser, "updates") >= 5, "the page got fewer than 5 updates during the run"
    steps = [e for e in events if e["type"] == "step"]
    assert f"step {steps[-1]['step']}:" in browser.find_element("id", "summary").text
    probes = [e for e in events if e["type"] == "probe"][-1]["probes"]
    shown = [el.text for el in browser.find_elements("css selector", "#probes .en")]
    assert shown == [p["en"] or "(empty)" for p in probes]
    errors, outside = page_checks(browser)
    assert errors == [] and outside == []


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory):
    """A 6-step run with --explore, evaluated every 3 steps, over."""
    run_dir = tmp_path_factory.mktemp("finished")
    proc, _ = start_explore_run(run_dir, "--max-steps", "6", "--eval-every", "3", *TINY)
    proc.communicate(timeout=180)
    assert proc.returncode == 0
    return run_dir


def read_events(run_dir) -> list:
    return [json.loads(line) for line in (run_dir / "events.jsonl").read_text(encoding="utf-8").splitlines()]


@pytest.fixture
def finished_page(browser, finished_run):
    """The finished run's page, read to its last event."""
    server = WatchServer(finished_run)
    server.start()
    try:
        browser.get(server.url)
        total = len(read_events(finished_run))
        WebDriverWait(browser, 20).until(lambda d: count(d, "events") == total)
        yield browser
    finally:
        server.stop()


def test_viz_watch_serves_a_finished_run(browser, page_checks, finished_run):
    watch = subprocess.Popen([sys.executable, "-m", "viz", "watch", str(finished_run)], cwd=ROOT,
                             stdout=subprocess.PIPE, text=True)
    try:
        url = watch.stdout.readline().split("open ")[1].split()[0]
        browser.get(url)
        lines = (finished_run / "events.jsonl").read_text(encoding="utf-8").splitlines()
        WebDriverWait(browser, 20).until(lambda d: count(d, "events") == len(lines))
        assert browser.find_element("id", "state").text == "done"
        errors, outside = page_checks(browser)
        assert errors == [] and outside == []
    finally:
        watch.terminate()
        watch.wait(timeout=10)


def test_a_finished_run_says_it_is_done_in_its_title_and_on_the_page(finished_page, finished_run):
    end = read_events(finished_run)[-1]
    assert end["type"] == "end" and "error" not in end
    assert finished_page.title == "Training, done"
    assert finished_page.find_element("id", "heading").text == "Training, done"
    line = finished_page.find_element("id", "finished")
    assert line.is_displayed()
    assert f"Training is done: it ended at step {end['step']}" in line.text and "stopped updating" in line.text


def test_a_run_that_failed_says_so_with_its_error(browser, page_checks, finished_run, tmp_path):
    events = read_events(finished_run)
    error = f"train: diverged: the loss became nan at step {events[-1]['step']}"
    events[-1] = {**events[-1], "error": error}  # the end a failed run writes (TrainingEvents.failed)
    (tmp_path / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events), encoding="utf-8")
    server = WatchServer(tmp_path)
    server.start()
    try:
        browser.get(server.url)
        WebDriverWait(browser, 20).until(lambda d: count(d, "events") == len(events))
        line = browser.find_element("id", "finished")
        assert browser.title == "Training, stopped" and line.is_displayed()
        assert line.text.startswith(f"Training stopped on an error at step {events[-1]['step']}: {error}. ")
        assert browser.find_element("id", "state").text == "stopped on an error"
    finally:
        server.stop()
    errors, outside = page_checks(browser)
    assert errors == [] and outside == []


def test_each_curve_is_explained_in_one_line(finished_page, finished_run):
    charts = finished_page.find_elements("css selector", "main > figure:not(.wide)")
    explained = [figure.find_element("css selector", ".explain").text for figure in charts]
    assert len(explained) == 4 and all(explained)
    config = read_events(finished_run)[0]["config"]
    assert f"dropout (p = {config['dropout']})" in explained[0] and "label smoothing" in explained[0]
    assert "so dev can sit below train" in explained[0]


DRAWN_PIXELS = """return [...document.querySelectorAll('#norms canvas')].map(canvas => {
  const data = canvas.getContext('2d').getImageData(0, 0, canvas.width, canvas.height).data;
  let blue = 0;
  for (let i = 0; i < data.length; i += 4) blue += data[i + 3] > 0 && data[i + 2] > data[i] + 60;
  return blue;
});"""


def test_gradient_norms_are_one_small_chart_a_module(finished_page, finished_run):
    start = read_events(finished_run)[0]
    figures = finished_page.find_elements("css selector", "#norms figure")
    assert [f.get_attribute("data-module") for f in figures] == ["total", *start["modules"]]
    assert [f.find_element("css selector", "figcaption").text for f in figures] == ["total", *start["modules"]]
    drawn = finished_page.execute_script(DRAWN_PIXELS)
    assert len(drawn) == len(figures) and all(pixels > 0 for pixels in drawn[1:])  # each module's own blue line


def test_a_page_whose_server_goes_without_an_end_says_so(browser, page_checks, finished_run, tmp_path):
    lines = (finished_run / "events.jsonl").read_text(encoding="utf-8").splitlines()
    assert json.loads(lines[-1])["type"] == "end"
    (tmp_path / "events.jsonl").write_text("\n".join(lines[:-1]) + "\n", encoding="utf-8")
    server = WatchServer(tmp_path)
    server.start()
    try:
        browser.get(server.url)
        WebDriverWait(browser, 20).until(lambda d: count(d, "events") == len(lines) - 1)
        assert not browser.find_element("id", "finished").is_displayed()
    finally:
        server.stop()
    line = browser.find_element("id", "finished")
    WebDriverWait(browser, 10).until(lambda d: line.is_displayed())
    assert "lost its server" in line.text and "reload" in line.text
    assert browser.title != "Training, live"
    errors, outside = page_checks(browser)  # (read here, so the next test does not see them)
    assert outside == [] and all("/events?since=" in e and "ERR_CONNECTION_REFUSED" in e for e in errors)
