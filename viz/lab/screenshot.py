"""docs/img/lab.png from a real run: the lab page in a browser (a selenium WebDriver), a sentence
translated and one source token masked, saved as a PNG. The README's picture of the lab, made by

    python3 -m transformer train --out runs/lab --minutes 6 --d-model 64 --heads 4 --layers 2 --d-ff 256
    python3 -m viz lab --checkpoint runs/lab/best.safetensors --port 8765 &
    lab_screenshot(driver, "http://127.0.0.1:8765/", "docs/img/lab.png", text="我昨天买了三本书", mask=1)
"""
from __future__ import annotations

import time
from pathlib import Path


def wait_for(driver, script: str, timeout: float = 30.0):
    """Poll `return <script>` in the page until it is truthy; TimeoutError after `timeout` s."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = driver.execute_script(f"return {script}")
        if value:
            return value
        time.sleep(0.05)
    raise TimeoutError(f"lab screenshot: the page never satisfied {script!r} within {timeout} s")


def lab_screenshot(driver, url: str, out="docs/img/lab.png", text: str = "我喜欢猫", mask: int = 1,
                   width: int = 1280) -> Path:
    """Open the lab at `url`, translate `text`, mask source token `mask`, and save the whole page
    at `out` (PNG). Returns the path."""
    driver.get(url)
    wait_for(driver, "document.body.dataset.results >= 1")
    driver.execute_script("document.getElementById('text').value = arguments[0];"
                          "document.getElementById('go').click();", text)
    wait_for(driver, "document.body.dataset.results >= 2")
    driver.execute_script(f"document.querySelector('.token[data-position=\"{int(mask)}\"]').click()")
    wait_for(driver, "document.body.dataset.results >= 3")
    height = driver.execute_script("return document.documentElement.scrollHeight")
    size = driver.get_window_size()
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    try:
        driver.set_window_size(width, min(int(height) + 140, 2400))
        if not driver.save_screenshot(str(out)):
            raise RuntimeError(f"lab screenshot: the browser could not write {out}")
    finally:
        driver.set_window_size(size["width"], size["height"])
    return out
