"""`grade compare --html` in a real browser: headless Chromium loads the synthetic class's page.

It must load without console errors (the page's Content-Security-Policy forbids every
network load, so a stray remote resource would show up here as an error), show its plots
and group tables, and open a diff on a click.  A screenshot is saved under the test's
tmp dir and copied to /tmp/compare-screenshot.png (for the README).

Needs Debian's chromium and chromium-driver and the selenium package.  Where they are
missing the test is skipped, saying so -- except with GRADER_REQUIRE_BROWSER=1 (CI),
where it fails.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from compare_class import build
from grader.compare import class_view, model, report_class, report_html

CHROMIUM = ("/usr/bin/chromium", "/usr/bin/chromium-browser")
CHROMEDRIVER = ("/usr/bin/chromedriver",)
SCREENSHOT_COPY = Path("/tmp/compare-screenshot.png")
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--window-size=1280,1600")
pytestmark = pytest.mark.slow


def _unavailable(reason: str) -> None:
    if os.environ.get("GRADER_REQUIRE_BROWSER") == "1":
        pytest.fail(f"GRADER_REQUIRE_BROWSER=1 but {reason}")
    pytest.skip(f"{reason}: install Debian's chromium and chromium-driver (apt-get install chromium "
                f"chromium-driver) and selenium to run the browser test")


def _first(paths: tuple[str, ...]) -> str | None:
    return next((p for p in paths if Path(p).is_file() and os.access(p, os.X_OK)), None)


@pytest.fixture(scope="module")
def driver(tmp_path_factory):
    chromium, chromedriver = _first(CHROMIUM), _first(CHROMEDRIVER) or shutil.which("chromedriver")
    if chromium is None:
        _unavailable("Chromium is not installed (no /usr/bin/chromium)")
    if chromedriver is None:
        _unavailable("chromedriver is not installed (no /usr/bin/chromedriver)")
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        _unavailable("the selenium package is not installed")
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={tmp_path_factory.mktemp('chromium-profile')}")
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    browser = webdriver.Chrome(service=Service(chromedriver), options=options)
    browser.set_page_load_timeout(60)
    try:
        yield browser
    finally:
        browser.quit()


@pytest.fixture(scope="module")
def page(tmp_path_factory) -> Path:
    base = tmp_path_factory.getbasetemp() / "compare-class"  # shared with test_compare.py: its cache
    _, _, analyses = build.analyse_class(base, (3,))
    path = tmp_path_factory.mktemp("compare-html") / "exercise-3.html"
    path.write_text(report_html.render(model.class_report(analyses[3])), encoding="utf-8")
    return path


def _errors(browser) -> list[str]:
    return [e["message"] for e in browser.get_log("browser") if e.get("level") in ("SEVERE", "ERROR")]


def test_report_page_in_headless_chromium(driver, page, tmp_path):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    driver.get(page.as_uri())
    WebDriverWait(driver, 30).until(lambda d: d.execute_script("return document.readyState") == "complete")
    assert _errors(driver) == []

    plots = driver.find_elements(By.CSS_SELECTOR, "svg.plot")
    assert len(plots) >= 3
    for plot in plots:
        driver.execute_script("arguments[0].scrollIntoView()", plot)
        assert plot.is_displayed() and plot.size["width"] > 100 and plot.size["height"] > 50
    for table_id in ("strategy-table", "outcome-table", "variant-table", "submission-table"):
        table = driver.find_element(By.ID, table_id)
        assert table.is_displayed()
        assert len(table.find_elements(By.CSS_SELECTOR, "tbody tr")) >= 2

    driver.set_window_size(1280, 2400)  # the top of the page: class view and outcome groups
    driver.execute_script("window.scrollTo(0, 0)")
    shot = tmp_path / "compare-report.png"
    assert driver.save_screenshot(str(shot)) and shot.stat().st_size > 10_000
    shutil.copyfile(shot, SCREENSHOT_COPY)
    driver.set_window_size(1280, 1600)

    dialog = driver.find_element(By.ID, "diff-view")
    assert not dialog.is_displayed()
    button = driver.find_element(By.CSS_SELECTOR, "#strategy-table button[data-diff]")
    driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", button)
    button.click()
    WebDriverWait(driver, 10).until(ec.visibility_of(dialog))
    body = dialog.find_element(By.CSS_SELECTOR, ".body")
    assert body.find_elements(By.CSS_SELECTOR, ".hl") and body.text.strip()
    driver.save_screenshot(str(tmp_path / "compare-diff-open.png"))
    driver.find_element(By.ID, "diff-close").click()
    WebDriverWait(driver, 10).until(ec.invisibility_of_element(dialog))

    search = driver.find_element(By.ID, "filter")
    search.send_keys("learner-00")
    shown = [r for r in driver.find_elements(By.CSS_SELECTOR, "#submission-table tbody tr") if r.is_displayed()]
    assert 1 <= len(shown) < len(driver.find_elements(By.CSS_SELECTOR, "#submission-table tbody tr"))
    assert _errors(driver) == []


@pytest.fixture(scope="module")
def class_page(tmp_path_factory) -> Path:
    """`grade class`'s overview of the small gradebook test_compare_class_view builds."""
    from grader.course.gradebook import Gradebook
    from grader.manifest import load
    from test_compare_class_view import class_gradebook

    root = tmp_path_factory.mktemp("class-view")
    class_gradebook(root / "grades.sqlite")
    manifest = load(Path(__file__).resolve().parents[1] / "exercises" / "manifest.toml")
    with Gradebook(root / "grades.sqlite", create=False) as book:
        view = class_view.overview(book.gradings(history=True),
                                   [(e.number, e.title, e.max_score) for e in manifest.exercises])
    path = root / "class.html"
    path.write_text(report_class.render(view), encoding="utf-8")
    return path


def test_class_overview_in_headless_chromium(driver, class_page, tmp_path):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    driver.get(class_page.as_uri())
    WebDriverWait(driver, 30).until(lambda d: d.execute_script("return document.readyState") == "complete")
    assert _errors(driver) == []
    assert not driver.execute_script("return window.__hostile_ran === true")
    for table_id in ("matrix", "exercise-table", "failing-table", "stuck-table"):
        table = driver.find_element(By.ID, table_id)
        assert table.is_displayed() and table.find_elements(By.CSS_SELECTOR, "tbody tr"), table_id
    rows = driver.find_elements(By.CSS_SELECTOR, "#matrix tbody tr")
    assert len(rows) == 6
    assert any("<script>" in r.text for r in rows)  # the hostile label shown as text, not run
    driver.find_element(By.ID, "filter").send_keys("cy")
    assert [r.text.split()[0] for r in rows if r.is_displayed()] == ["cy"]
    assert driver.save_screenshot(str(tmp_path / "class-overview.png"))
    assert _errors(driver) == []
