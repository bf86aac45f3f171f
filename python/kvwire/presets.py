"""Presets and formats the scenario can name.

>>> from kvwire.presets import catalog
>>> cat = catalog()
>>> sorted(cat)
['devices', 'format_aliases', 'formats', 'links', 'models']
>>> cat["links"]["eth-25g"]["bandwidth_gb_per_s"]
3.125
"""

from __future__ import annotations

import json
from functools import cache
from typing import Any

import kvwire._core as _core


@cache
def _catalog_text() -> str:
    return _core.catalog_json()


def catalog() -> dict[str, dict[str, dict[str, Any]]]:
    """Every model, device and link preset (with its ``source``) and every hand-off format."""
    out: dict[str, dict[str, dict[str, Any]]] = json.loads(_catalog_text())
    return out


__all__ = ["catalog"]
