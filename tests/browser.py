"""Headless Chromium for the tests of the HTML pages (Debian's ``chromium`` and
``chromium-driver`` packages, driven by selenium from the ``test`` extra).

:func:`browser` starts one browser (1,280 px wide, the width the pages are made for) or
skips the test with the reason when none can be had; ``.ci/run`` installs the packages on
a fresh Debian machine, so CI always has one.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

WINDOW = (1280, 900)
#: Where the browser and its driver are looked for (``NPU_SIM_CHROMIUM`` / ``NPU_SIM_CHROMEDRIVER`` first).
CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome")
DRIVER_NAMES = ("chromedriver",)


def _find(env: str, names: tuple[str, ...]) -> str | None:
    explicit = os.environ.get(env)
    if explicit:
        return explicit
    return next((found for found in map(shutil.which, names) if found), None)


@contextmanager
def browser() -> Iterator[Any]:
    """A headless Chromium WebDriver logging the page's console; skips when there is none."""
    try:
        from selenium import webdriver
        from selenium.common.exceptions import WebDriverException
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        pytest.skip("selenium is not installed (pip install -e '.[test]')")
    binary = _find("NPU_SIM_CHROMIUM", CHROMIUM_NAMES)
    driver_path = _find("NPU_SIM_CHROMEDRIVER", DRIVER_NAMES)
    if binary is None or driver_path is None:
        pytest.skip("no headless browser: install Debian's chromium and chromium-driver "
                    "(apt-get install chromium chromium-driver; .ci/run does)")
    options = webdriver.ChromeOptions()
    options.binary_location = binary
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                f"--window-size={WINDOW[0]},{WINDOW[1]}", "--hide-scrollbars"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    try:
        driver = webdriver.Chrome(options=options, service=Service(driver_path))
    except WebDriverException as exc:
        pytest.skip(f"chromium does not start here: {exc.msg}")
    try:
        yield driver
    finally:
        driver.quit()


def open_page(driver: Any, page: Path) -> list[dict[str, Any]]:
    """Load ``page`` and return what it logged to the console at warning level or above
    (script errors, failed loads)."""
    driver.get(page.resolve().as_uri())
    driver.execute_script("return document.readyState")
    return [entry for entry in driver.get_log("browser") if entry.get("level") in ("SEVERE", "WARNING")]


def screenshot(driver: Any, path: Path, full_page: bool = True) -> Path:
    """A PNG of the page (the whole height with ``full_page``), kept as the test's artifact."""
    width, height = WINDOW
    driver.execute_script("window.scrollTo(0, 0); document.querySelectorAll('.tablebox').forEach(b => b.scrollTop = 0)")
    if full_page:
        height = int(driver.execute_script("return document.documentElement.scrollHeight"))
        driver.set_window_size(width, min(height + 100, 16000))
    path.parent.mkdir(parents=True, exist_ok=True)
    driver.save_screenshot(str(path))
    if full_page:
        driver.set_window_size(*WINDOW)
    return path
