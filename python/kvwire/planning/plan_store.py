"""Where :func:`kvwire.plan` keeps its finished evaluations (``out=DIR``), so that a plan interrupted by a crash,
a cancel or a restart of the service resumes from them instead of searching every configuration again.

The directory holds ``plan.json`` (the fingerprint of the plan's arguments: another plan's evaluations are
never reused) and ``evaluations.jsonl``, one line per finished evaluation (a configuration's capacity search at
one run length), appended and flushed as each round ends. A plan is deterministic, so a reused evaluation is the
one the search would compute again: the resumed plan equals the uninterrupted one. A last line cut short by a
crash is ignored (that evaluation runs again).

>>> import tempfile
>>> d = tempfile.mkdtemp()
>>> s = Evaluations(d, {"model": "llama3-8b"})
>>> s.put("3:400", {"capacity_req_per_s": 1.5, "simulations": 7})
>>> Evaluations(d, {"model": "llama3-8b"}).get("3:400")
{'capacity_req_per_s': 1.5, 'simulations': 7}
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from kvwire.errors import ScenarioError

#: The files of a plan's directory.
FINGERPRINT_FILE = "plan.json"
EVALUATIONS_FILE = "evaluations.jsonl"


def fingerprint(arguments: Mapping[str, Any]) -> str:
    """A stable digest of a plan's arguments (their JSON with sorted keys; non-JSON values by their text)."""
    text = json.dumps(arguments, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


class Evaluations:
    """The evaluations already in ``out`` (read once), and appending new ones."""

    def __init__(self, out: str | os.PathLike[str], arguments: Mapping[str, Any]) -> None:
        self.dir = Path(out)
        digest = fingerprint(arguments)
        try:
            self.dir.mkdir(parents=True, exist_ok=True)
            marker = self.dir / FINGERPRINT_FILE
            if marker.exists():
                held = json.loads(marker.read_text(encoding="utf-8")).get("fingerprint")
                if held != digest:
                    raise ScenarioError(
                        f"out: {self.dir} holds another plan's evaluations (its arguments differ); give a new or "
                        "empty directory",
                        "out",
                    )
            else:
                marker.write_text(json.dumps({"fingerprint": digest}) + "\n", encoding="utf-8")
            self.done: dict[str, dict[str, Any]] = {}
            path = self.dir / EVALUATIONS_FILE
            if path.exists():
                for line in path.read_text(encoding="utf-8").splitlines():
                    try:
                        entry = json.loads(line)
                    except json.JSONDecodeError:  # a line cut short by a crash: evaluated again
                        continue
                    if isinstance(entry, dict) and isinstance(entry.get("key"), str):
                        self.done[entry["key"]] = entry["result"]
        except (OSError, json.JSONDecodeError, AttributeError) as e:
            raise ScenarioError(f"out: cannot use {self.dir} for the plan's evaluations: {e}", "out") from None

    def get(self, key: str) -> dict[str, Any] | None:
        return self.done.get(key)

    def put(self, key: str, result: Mapping[str, Any]) -> None:
        """Record one finished evaluation (appended and flushed at once)."""
        entry = json.dumps({"key": key, "result": dict(result)}, separators=(",", ":"))
        try:
            with (self.dir / EVALUATIONS_FILE).open("a", encoding="utf-8") as f:
                f.write(entry + "\n")
        except OSError as e:
            raise ScenarioError(f"out: cannot write the plan's evaluations to {self.dir}: {e}", "out") from None
        self.done[key] = dict(result)


__all__ = ["EVALUATIONS_FILE", "FINGERPRINT_FILE", "Evaluations", "fingerprint"]
