"""The report in a real headless browser: Debian's chromium driven by playwright.

`.ci/run` installs both (apt `chromium`, pip `playwright`; no `playwright install`: the
system browser is used). Without them the test is skipped with the reason.
"""
from __future__ import annotations

import shutil
import sys
import threading
from pathlib import Path

import pytest

from tuner.dashboard.report import anchor, write_report
from tuner.store import open_store

sys.path.insert(0, str(Path(__file__).parent / "fixtures"))
import synthetic_history  # noqa: E402

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]

pytestmark = [
    pytest.mark.skipif(not Path(CHROMIUM).exists() and not shutil.which("chromium"),
                       reason="chromium is not installed (apt-get install -y chromium; .ci/run does it)"),
]
sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed (pip install playwright)")


@pytest.fixture(scope="module")
def browser():
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM if Path(CHROMIUM).exists() else shutil.which("chromium"),
                              args=ARGS)
        yield b
        b.close()


def _open(browser, url: str):
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    problems: list[str] = []
    page.on("console", lambda m: problems.append(f"console {m.type}: {m.text}") if m.type in ("error", "warning") else None)
    page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
    page.on("dialog", lambda d: (problems.append(f"dialog: {d.message}"), d.dismiss()))
    page.on("requestfailed", lambda r: problems.append(f"request failed: {r.url}"))
    page.goto(url)
    page.wait_for_load_state("load")
    return page, problems


def test_report_loads_cleanly_shows_each_kernel_and_the_planted_regression(browser, tmp_path):
    db = str(tmp_path / "history.db")
    facts = synthetic_history.build(open_store(db), evil=True)
    out = write_report(open_store(db), tmp_path / "report.html")
    page, problems = _open(browser, out.as_uri())
    assert problems == []  # no console errors, no script ran (the markup in names stayed text)
    for k in facts["kernels"]:
        heading = page.locator(f"section.kernel#{anchor('kernel', k)} h2")
        assert heading.is_visible() and heading.inner_text().startswith(k)
    flagged = page.locator('.chartbox[data-regression="true"]')
    assert flagged.count() == 1
    box = page.locator(f"#{anchor(*facts['regression'], synthetic_history.GPU)}")
    assert box.is_visible() and box.get_attribute("data-regression") == "true"
    assert "regression +1" in box.inner_text() and box.locator("svg .step.regression").count() == 1
    outlier = page.locator(f"#{anchor(*facts['outlier'], synthetic_history.GPU)}")
    assert outlier.get_attribute("data-regression") == "false" and outlier.locator("svg .step").count() == 0
    assert page.locator("#regression-count .n").inner_text() == "1"
    assert page.locator("img").count() == 0  # the <img onerror> in a workload name is text, not an element
    # the regression table links to the chart
    page.locator("table.regressions a").first.click()
    assert page.url.endswith("#" + anchor(*facts["regression"], synthetic_history.GPU))
    page.close()


def test_served_page_loads_cleanly(browser, tmp_path):
    from tuner.dashboard.server import make_server

    db = str(tmp_path / "history.db")
    facts = synthetic_history.build(open_store(db))
    httpd = make_server(open_store(db), 0, refresh_s=0)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        page, problems = _open(browser, f"http://127.0.0.1:{httpd.server_address[1]}/")
        assert problems == []
        for k in facts["kernels"]:
            assert page.locator(f"section.kernel#{anchor('kernel', k)} h2").is_visible()
        assert page.locator('.chartbox[data-regression="true"]').count() == 1
        page.close()
    finally:
        httpd.shutdown()
        httpd.server_close()
