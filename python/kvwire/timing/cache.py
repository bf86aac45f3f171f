"""The on-disk cache of step-time tables: one JSON file per table, named by the hash of everything the table
depends on (the provider and its version, the system, engine and engine version, the model, the parallel
layout, the formats and the grid's version), so that changing any of them misses the cache.

The folder is ``$KVWIRE_CACHE_DIR/timing`` when that variable is set, else ``$XDG_CACHE_HOME/kvwire/timing``,
else ``~/.cache/kvwire/timing``. A file that cannot be read back (cut short, edited) is a miss and is
rebuilt; a folder that cannot be written leaves the table uncached (the run goes on).

>>> key_of({"system": "h100_sxm", "tp": 1}) == key_of({"tp": 1, "system": "h100_sxm"})
True
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any


def folder() -> Path:
    """Where the tables are kept."""
    base = os.environ.get("KVWIRE_CACHE_DIR")
    if base:
        return Path(base) / "timing"
    xdg = os.environ.get("XDG_CACHE_HOME")
    root = Path(xdg) if xdg else Path.home() / ".cache"
    return root / "kvwire" / "timing"


def key_of(key: dict[str, Any]) -> str:
    """The hash naming a table (of the key's canonical JSON)."""
    text = json.dumps(key, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def load(key: dict[str, Any]) -> dict[str, Any] | None:
    """The cached entry for ``key`` (``{"key", "table", "bound", ...}``), or ``None``."""
    path = folder() / f"{key_of(key)}.json"
    try:
        entry = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(entry, dict) or entry.get("key") != key or "table" not in entry:
        return None
    return entry


def store(key: dict[str, Any], entry: dict[str, Any]) -> Path | None:
    """Write ``entry`` for ``key`` (atomically: a reader never sees half a file); ``None`` if it could not."""
    d = folder()
    path = d / f"{key_of(key)}.json"
    try:
        d.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=d, suffix=".tmp")
        with os.fdopen(fd, "w") as f:
            json.dump({**entry, "key": key}, f, separators=(",", ":"))
        os.replace(tmp, path)
    except OSError:
        return None
    return path


__all__ = ["folder", "key_of", "load", "store"]
