"""Helpers of the browser tests: a headless Chromium driven by Selenium (Debian's ``chromium`` and
``chromium-driver``), screenshots checked to be non-blank, and the browser console checked for errors.

The tests skip, saying why, when no Chromium or chromedriver is installed, unless ``KVWIRE_REQUIRE_BROWSER`` is
set: ``.ci/run`` installs both and sets it, so on CI they run or fail. Selenium is told where both are, so it
never downloads a browser or a driver."""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Callable
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path
from typing import Any

import pytest

BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
INSTALL = "apt-get install -y chromium chromium-driver"


def browser_paths() -> tuple[str, str] | None:
    """(Chromium binary, chromedriver) found on PATH, or None."""
    browser = next((p for p in map(shutil.which, BROWSERS) if p), None)
    driver = shutil.which("chromedriver")
    return (browser, driver) if browser and driver else None


def start_browser(width: int = 1280, height: int = 800) -> Any:
    """A headless Chromium at ``width`` x ``height`` with its console log kept, or a skip saying what is missing."""
    webdriver = pytest.importorskip(
        "selenium.webdriver", reason="selenium is not installed (pip install './api[test]')"
    )
    from selenium.webdriver.chrome.service import Service

    paths = browser_paths()
    if paths is None:
        why = f"no Chromium and chromedriver on PATH: the browser tests need them ({INSTALL}); CI installs them"
        if os.environ.get("KVWIRE_REQUIRE_BROWSER"):  # set by .ci/run: there, a missing browser is a failure
            pytest.fail(why)
        pytest.skip(why)
    browser, driver = paths
    options = webdriver.ChromeOptions()
    options.binary_location = browser
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu", "--hide-scrollbars",
                f"--window-size={width},{height}", "--force-color-profile=srgb", "--lang=en-US"):  # fmt: skip
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(options=options, service=Service(executable_path=driver))


def wait_for(driver: Any, condition: Callable[[], Any], what: str, timeout_s: float = 30.0) -> Any:
    """Poll ``condition`` until it is truthy; on timeout fail with ``what`` (and the last value)."""
    from selenium.common.exceptions import TimeoutException
    from selenium.webdriver.support.ui import WebDriverWait

    last: list[Any] = [None]

    def probe(_: Any) -> Any:
        last[0] = condition()
        return last[0]

    try:
        return WebDriverWait(driver, timeout_s, poll_frequency=0.05).until(probe)
    except TimeoutException:
        raise AssertionError(f"timed out after {timeout_s} s waiting for {what} (last: {last[0]!r})") from None


def js(driver: Any, script: str, *args: Any) -> Any:
    """Run ``script`` in the page and return what it returns (``driver.execute_script``)."""
    return driver.execute_script(script, *args)


def set_viewport(driver: Any, width: int, height: int) -> None:
    """Resize the window so that the page's viewport is ``width`` x ``height``."""
    driver.set_window_size(width, height)
    inner = driver.execute_script("return [window.innerWidth, window.innerHeight]")
    driver.set_window_size(2 * width - inner[0], 2 * height - inner[1])


def screenshot(driver: Any, path: Path, full: bool = False) -> Path:
    """Save the viewport (or, with ``full``, the whole page height) as PNG and check it is not blank: the pixels
    vary (standard deviation of the grey levels above 12) and hold many colours (text, charts), not a flat page."""
    from PIL import Image, ImageStat

    size = driver.get_window_size()
    if full:
        height = driver.execute_script("return document.documentElement.scrollHeight")
        driver.set_window_size(size["width"], min(int(height) + 200, 8000))
    try:
        driver.save_screenshot(str(path))
    finally:
        if full:
            driver.set_window_size(size["width"], size["height"])
    with Image.open(path) as img:
        rgb = img.convert("RGB")
        grey = ImageStat.Stat(rgb.convert("L"))
        colours = rgb.getcolors(maxcolors=1 << 20)
        assert img.width >= 300 and img.height >= 300, (path, img.size)
        assert grey.stddev[0] > 12, f"{path} looks blank (grey stddev {grey.stddev[0]:.1f})"
        assert colours is None or len(colours) > 200, f"{path} has only {len(colours or [])} colours"
    return path


#: How the browser logs a 4xx answer to a fetch: as a network error, though the page handles it.
FAILED_LOAD = re.compile(r"/(v1|schema)/\S* - Failed to load resource: the server responded with a status of (\d{3})\b")


def console_errors(driver: Any, allow_statuses: tuple[int, ...] = ()) -> list[dict[str, Any]]:
    """The browser's SEVERE console entries since the last call (JavaScript errors, failed loads, console.error),
    but the API answers with ``allow_statuses`` a test provoked on purpose (the invalid-input tests' 400 and 422,
    the token test's 401): those are logged as failed loads although the page handles them. Never a JavaScript
    error."""
    out = []
    for e in driver.get_log("browser"):
        if e["level"] != "SEVERE":
            continue
        m = FAILED_LOAD.search(e["message"]) if e.get("source") == "network" else None
        if m and int(m.group(2)) in allow_statuses:
            continue
        out.append(e)
    return out


def field_error(driver: Any, control_id: str) -> str:
    """The error line shown next to a form control: its ``<id>-error`` element, when visible, the control marked
    ``aria-invalid`` and described by it; '' otherwise."""
    return str(
        js(
            driver,
            """const c = document.getElementById(arguments[0]);
        const e = document.getElementById(arguments[0] + '-error');
        return (e && !e.hidden && c.getAttribute('aria-invalid') === 'true'
                && c.getAttribute('aria-describedby').split(' ').includes(e.id)) ? e.textContent : '';""",
            control_id,
        )
    )


def fixed(x: float, digits: int) -> str:
    """``x`` as the page writes it (``Intl.NumberFormat("en-US")``: grouping, half away from zero on the exact
    binary value), e.g. ``fixed(85.91934592, 1) == "85.9"``."""
    q = Decimal(x).quantize(Decimal(1).scaleb(-digits), rounding=ROUND_HALF_UP)
    return f"{q:,.{digits}f}"


__all__ = [
    "INSTALL",
    "browser_paths",
    "console_errors",
    "field_error",
    "fixed",
    "js",
    "screenshot",
    "set_viewport",
    "start_browser",
    "wait_for",
]
