"""The live training page in a real browser: a 15-second training run with --explore, watched
from its start to its end."""
import json
import subprocess
import sys

from selenium.webdriver.support.ui import WebDriverWait
from watch_support import ROOT, TINY, start_explore_run


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
    assert count(browser, "updates") >= 5, "the page got fewer than 5 updates during the run"
    steps = [e for e in events if e["type"] == "step"]
    assert f"step {steps[-1]['step']}:" in browser.find_element("id", "summary").text
    probes = [e for e in events if e["type"] == "probe"][-1]["probes"]
    shown = [el.text for el in browser.find_elements("css selector", "#probes .en")]
    assert shown == [p["en"] or "(empty)" for p in probes]
    errors, outside = page_checks(browser)
    assert errors == [] and outside == []


def test_viz_watch_serves_a_finished_run(browser, page_checks, tmp_path):
    proc, _ = start_explore_run(tmp_path, "--max-steps", "6", "--eval-every", "3", *TINY)
    proc.communicate(timeout=180)
    watch = subprocess.Popen([sys.executable, "-m", "viz", "watch", str(tmp_path)], cwd=ROOT,
                             stdout=subprocess.PIPE, text=True)
    try:
        url = watch.stdout.readline().split("open ")[1].split()[0]
        browser.get(url)
        lines = (tmp_path / "events.jsonl").read_text(encoding="utf-8").splitlines()
        WebDriverWait(browser, 20).until(lambda d: count(d, "events") == len(lines))
        assert browser.find_element("id", "state").text == "done"
        errors, outside = page_checks(browser)
        assert errors == [] and outside == []
    finally:
        watch.terminate()
        watch.wait(timeout=10)
