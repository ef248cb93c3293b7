"""The browser tests: a real headless Chromium driven by selenium (Debian's `chromium` and
`chromium-driver`; .ci/run installs them with apt). Without a browser, a driver or selenium, each
test skips and says which is missing; the pip-only suite never needs one.

Fixtures:
    browser      a headless Chromium (selenium WebDriver) that records the console and the network
    page_checks  page_checks(driver) -> (console errors, requests outside 127.0.0.1 and file://)
"""
from __future__ import annotations

import json
import shutil

import pytest
from browser_support import outside_this_machine

BROWSERS = ("chromium", "chromium-browser", "google-chrome")
DRIVERS = ("chromedriver",)


def _first(names) -> str | None:
    return next((path for path in map(shutil.which, names) if path), None)


def pytest_collection_modifyitems(items):
    for item in items:
        if "tests/browser/" in str(item.fspath).replace("\\", "/"):
            item.add_marker(pytest.mark.browser)


@pytest.fixture(scope="session")
def browser():
    webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed "
                                    "(python3 -m pip install -e '.[dev]')")
    binary, driver_path = _first(BROWSERS), _first(DRIVERS)
    if binary is None or driver_path is None:
        pytest.skip("no headless browser: apt-get install chromium chromium-driver "
                    f"(found browser={binary}, driver={driver_path})")
    options = webdriver.ChromeOptions()
    options.binary_location = binary
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 "--window-size=1400,1000", "--no-first-run", "--disable-extensions",
                 "--disable-background-networking", "--disable-component-update"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL", "performance": "ALL"})
    from selenium.webdriver.chrome.service import Service
    driver = webdriver.Chrome(service=Service(driver_path), options=options)
    driver.set_page_load_timeout(60)
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture
def page_checks():
    """Call after a page has loaded: (console errors, outside requests) since the last call."""
    def check(driver):
        errors = [entry["message"] for entry in driver.get_log("browser") if entry["level"] == "SEVERE"]
        outside = []
        for entry in driver.get_log("performance"):
            message = json.loads(entry["message"])["message"]
            if message.get("method") == "Network.requestWillBeSent":
                url = message["params"]["request"]["url"]
                if outside_this_machine(url):
                    outside.append(url)
        return errors, outside
    return check
