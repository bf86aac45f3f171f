"""Fixtures of the browser tests: one headless Chromium per test module (``browser_support.start_browser``)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from browser_support import start_browser


@pytest.fixture(scope="module")
def driver() -> Iterator[Any]:
    """A headless Chromium driven by Selenium, quit when the module's tests are done."""
    d = start_browser()
    try:
        yield d
    finally:
        d.quit()
