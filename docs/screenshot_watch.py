"""docs/img/watch.png: the live training page, photographed from a real run.

    python3 docs/screenshot_watch.py      (needs chromium, chromium-driver and selenium)

watch_screenshot(driver) trains a small translator with --explore on the built-in corpus,
follows its page until the run ends, and saves the page."""
from __future__ import annotations

import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "browser"))

from watch_support import start_explore_run  # noqa: E402

RUN = ["--d-model", "64", "--heads", "4", "--layers", "2", "--d-ff", "128", "--max-tokens", "1500",
       "--max-steps", "600", "--eval-every", "100", "--warmup", "200"]


def watch_screenshot(driver, out=ROOT / "docs" / "img" / "watch.png") -> Path:
    """Train (RUN, about two minutes), watch the page to the run's end, write `out` (PNG)."""
    from selenium.webdriver.support.ui import WebDriverWait

    with tempfile.TemporaryDirectory() as run_dir:
        proc, url = start_explore_run(run_dir, *RUN)
        driver.set_window_size(1300, 1480)
        driver.get(url)
        proc.wait(timeout=1200)
        WebDriverWait(driver, 30).until(lambda d: d.find_element("id", "state").text == "done")
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    driver.save_screenshot(str(out))
    return out


def headless_chromium():
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--hide-scrollbars"):
        options.add_argument(flag)
    return webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)


if __name__ == "__main__":
    browser = headless_chromium()
    try:
        print(watch_screenshot(browser))
    finally:
        browser.quit()
