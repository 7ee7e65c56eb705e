"""The run page and the comparison page in a real browser (headless Chromium, 1,280 px wide):
no console errors, charts drawn, the table sorts on a header click, zoom and links work, and
a screenshot of each page kept as an artifact (``$NPU_SIM_TEST_ARTIFACTS``, default
``test-artifacts/`` at the top of the checkout)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from npu_sim.commands.report_cmd import compare
from tests.browser import WINDOW, browser, open_page, screenshot
from tests.reports.conftest import Run

ARTIFACTS = Path(os.environ.get("NPU_SIM_TEST_ARTIFACTS") or Path(__file__).resolve().parents[2] / "test-artifacts")

#: Per chart: its marks (SVG shapes) and its drawn size.
CHARTS_JS = """
return [...document.querySelectorAll('svg')].map(s => { const r = s.getBoundingClientRect();
  return [s.getAttribute('aria-label'), s.querySelectorAll('rect, circle, line').length,
          Math.round(r.width), Math.round(r.height)]; });
"""
COLUMN_JS = """
const t = document.getElementById(arguments[0]);
const col = [...t.tHead.rows[0].cells].findIndex(c => c.textContent.replace(/[\\u25B2\\u25BC ]/g, '') === arguments[1]);
return [...t.tBodies[0].rows].map(r => parseFloat(r.cells[col].dataset.v));
"""


@pytest.fixture(scope="module")
def driver() -> Iterator[Any]:
    with browser() as d:
        yield d


def _header(driver: Any, table_id: str, text: str) -> Any:
    from selenium.webdriver.common.by import By

    return next(th for th in driver.find_elements(By.CSS_SELECTOR, f"#{table_id} th") if th.text.strip() == text)


def _sorts_by(driver: Any, table_id: str, header: str) -> None:
    """A first click sorts a column of numbers largest first (blank cells last), a second
    smallest first."""
    _header(driver, table_id, header).click()
    values = driver.execute_script(COLUMN_JS, table_id, header)
    numbers = [v for v in values if v is not None]
    assert values == numbers + [None] * (len(values) - len(numbers))
    assert numbers == sorted(numbers, reverse=True) and len(set(numbers)) > 1
    _header(driver, table_id, header).click()
    assert driver.execute_script(COLUMN_JS, table_id, header) == [None] * (len(values) - len(numbers)) + sorted(numbers)


def test_the_run_page_in_chromium(driver: Any, kws_runs: tuple[Run, Run]) -> None:
    run = kws_runs[0]
    assert open_page(driver, run.folder / "report.html") == []
    charts = {label: (marks, width, height) for label, marks, width, height in driver.execute_script(CHARTS_JS)}
    for label in ("operation cycles by bound", "busy share of the run by unit", "longest operations",
                  "per-operation Gantt", "roofline"):
        marks, width, height = charts[label]
        assert marks > 0 and width > 100 and height > 50, label
    assert driver.execute_script("return document.documentElement.scrollWidth") <= WINDOW[0]
    image = driver.execute_script("const i = document.querySelector('img.expandable'); "
                                  "return [i.naturalWidth, i.getBoundingClientRect().width]")
    assert image[0] > 1000 and 0 < image[1] < WINDOW[0]
    rows = driver.execute_script("return document.querySelectorAll('#ops tbody tr').length")
    assert rows == len(run.summary["ops"])
    table = driver.execute_script("const t = document.getElementById('ops'); "
                                  "return [t.scrollWidth, t.parentElement.clientWidth]")
    assert table[0] <= table[1] + 1   # every column in view, no sideways scrolling
    _sorts_by(driver, "ops", "cycles")
    screenshot(driver, ARTIFACTS / "report.png")


def test_the_gantt_zooms_and_a_mark_leads_to_its_row(driver: Any, kws_runs: tuple[Run, Run]) -> None:
    from selenium.webdriver.common.by import By

    assert open_page(driver, kws_runs[0].folder / "report.html") == []
    width = driver.execute_script("return document.querySelector('svg.gantt-chart').getBoundingClientRect().width")
    driver.find_element(By.CSS_SELECTOR, "button[data-zoom='2']").click()
    zoomed = driver.execute_script("return document.querySelector('svg.gantt-chart').getBoundingClientRect().width")
    assert zoomed == pytest.approx(2 * width, rel=0.01)
    driver.execute_script("document.querySelector('svg.gantt-chart g[data-row=\"op-3\"]')"
                          ".dispatchEvent(new MouseEvent('click', {bubbles: true}))")
    assert "flash" in driver.find_element(By.ID, "op-3").get_attribute("class")
    assert driver.get_log("browser") == []


def test_the_comparison_page_in_chromium(driver: Any, kws_runs: tuple[Run, Run], tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    compare(kws_runs[0].folder, kws_runs[1].folder, tmp_path / "compare.html")
    capsys.readouterr()
    assert open_page(driver, tmp_path / "compare.html") == []
    charts = driver.execute_script(CHARTS_JS)
    assert sum(1 for label, marks, width, _ in charts if label == "roofline" and marks and width > 100) == 2
    assert sum(1 for label, marks, _, _ in charts if label == "per-operation Gantt" and marks) == 2
    assert driver.execute_script("return document.documentElement.scrollWidth") <= WINDOW[0]
    _sorts_by(driver, "ops", "B-A")
    screenshot(driver, ARTIFACTS / "compare.png")
