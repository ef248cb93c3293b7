"""The README's picture of the backward stepper, made from a real page by a real browser:

    python3 -m transformer train --out runs/translator --max-steps 300
    python3 -m viz explore --checkpoint runs/translator/best.safetensors --out runs/explore.html
    write_screenshot(driver, "runs/explore.html", steps=1)      # driver: headless Chromium, 1400x1000

One step back from the loss, so the picture holds the corpus pair's Chinese (drawn with the font the
page embeds), the gradient arriving from the loss, and the hover's numbers, heatmap and histogram.
"""
from __future__ import annotations

from pathlib import Path

from tinygrad_lite.files import atomic_write

SHOT = Path(__file__).resolve().parents[2] / "docs" / "img" / "explorer.png"


def write_screenshot(driver, page, out=SHOT, steps: int = 1) -> Path:
    """Open `page` (an explore HTML file) in `driver` (a selenium WebDriver), walk `steps` nodes
    with the right arrow (the page opens the modules the step is in), hover the current node, and
    save the window as a PNG at `out`."""
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support.ui import WebDriverWait

    driver.get(Path(page).resolve().as_uri())
    body = driver.find_element(By.TAG_NAME, "body")
    for _ in range(steps):
        body.send_keys(Keys.ARROW_RIGHT)
    WebDriverWait(driver, 10).until(
        lambda d: d.find_element(By.ID, "grad-view").get_attribute("data-step") == str(steps))
    WebDriverWait(driver, 10).until(lambda d: d.execute_script("return document.fonts.status") == "loaded")
    current = driver.find_elements(By.CSS_SELECTOR, "g.node.current")
    if current:
        ActionChains(driver).move_to_element(current[-1]).perform()
    out = Path(out)
    with atomic_write(out, durable=False, op="write_screenshot", make_parents=True) as temp:
        temp.write_bytes(driver.get_screenshot_as_png())
    return out
