"""Fixtures of the service tests: an in-process client of a fresh app with its store in ``tmp_path`` (a real
server process is in ``api_support.Server``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from api_support import make_client
from litestar.testing import TestClient


@pytest.fixture
def client(tmp_path: Path) -> Iterator[TestClient[Any]]:
    """A client of an app whose data directory is this test's own ``tmp_path``."""
    with make_client(tmp_path) as c:
        yield c
