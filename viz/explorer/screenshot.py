"""The README's picture of the backward stepper, made from a real page by a real browser."""
from __future__ import annotations

from pathlib import Path

SHOT = Path(__file__).resolve().parents[2] / "docs" / "img" / "explorer.png"


def write_screenshot(driver, page, out=SHOT, steps: int = 12) -> Path:
    """Open `page` (an explore HTML file) in `driver` (a selenium WebDriver), walk `steps` nodes
    with the right arrow, open the module boxes it sits in, hover it, and save the window as a PNG at `out`."""
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
    for _ in range(4):  # open the modules the step is in, so the picture shows its op
        box = driver.find_elements(By.CSS_SELECTOR, "g.node.current.clickable")
        if not box:
            break
        view = box[0].get_attribute("data-opens")
        box[0].click()
        WebDriverWait(driver, 10).until(lambda d, view=view: d.find_element(By.ID, "graph")
                                        .get_attribute("data-view") == view)
    current = driver.find_elements(By.CSS_SELECTOR, "g.node.current")
    if current:
        ActionChains(driver).move_to_element(current[-1]).perform()
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    driver.save_screenshot(str(out))
    return out
