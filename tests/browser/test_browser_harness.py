"""The harness itself: a page's console errors and its script's results reach the test."""
from browser_support import outside_this_machine as _outside


def test_outside_means_any_host_but_this_machine():
    assert not _outside("http://127.0.0.1:8000/x") and not _outside("http://localhost/") and not _outside("file:///t")
    assert not _outside("data:text/html,hi")
    assert _outside("https://cdn.example.org/d3.js") and _outside("http://10.0.0.2/")


def test_a_page_reports_its_console_errors_and_values(browser, page_checks, tmp_path):
    page = tmp_path / "p.html"
    page.write_text("<html><body><p id=v></p><script>document.getElementById('v').textContent = 6 * 7;"
                    "console.error('deliberate');</script></body></html>", encoding="utf-8")
    browser.get(page.as_uri())
    assert browser.find_element("id", "v").text == "42"
    errors, outside = page_checks(browser)
    assert any("deliberate" in e for e in errors) and outside == []
