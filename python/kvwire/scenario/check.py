"""Checking a scenario without running it, and the one place a scenario meets a trace file: the file form
``workload.trace = {"file": ..., <options>}`` split from the rest (a relative path is relative to the scenario
file).

>>> rest, spec = split_file_trace({"link": "eth-25g", "workload": {"trace": {"file": "t.csv"}}})
>>> rest, spec.file.endswith("t.csv")
({'link': 'eth-25g', 'workload': {}}, True)
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import kvwire._core as _core
from kvwire.errors import ScenarioError
from kvwire.scenario.load import load_scenario, scenario_json
from kvwire.traces.spec import GENERATOR_KEYS, INLINE_COLUMNS, WHERE, TraceFile


def split_file_trace(
    scenario: Mapping[str, Any] | str | Path | None,
) -> tuple[Mapping[str, Any] | str | Path | None, TraceFile | None]:
    """``(scenario without the file form, the file form)``, or ``(scenario, None)`` when the scenario has
    no ``workload.trace.file`` (an inline trace is the core's business). A scenario file is loaded here (a
    relative trace path is relative to it).

    Raises:
        ScenarioError: the file form mixed with inline columns or with generator fields
            (``workload.requests`` ...), or a bad option; ``path`` names the field.

    >>> rest, spec = split_file_trace({"link": "eth-25g", "workload": {"trace": {"file": "t.csv"}}})
    >>> rest, spec.file.endswith("t.csv")
    ({'link': 'eth-25g', 'workload': {}}, True)
    """
    base: Path | None = None
    if isinstance(scenario, str | Path):
        base = Path(os.path.abspath(scenario)).parent
        scenario = load_scenario(scenario)
    if not isinstance(scenario, Mapping):
        return scenario, None
    workload = scenario.get("workload")
    if not isinstance(workload, Mapping):
        return scenario, None
    trace = workload.get("trace")
    if not isinstance(trace, Mapping) or "file" not in trace:
        return scenario, None
    inline = [k for k in INLINE_COLUMNS if k in trace]
    if inline:
        path = f"{WHERE}.{inline[0]}"
        raise ScenarioError(
            f"{path}: give either a trace file or the columns {', '.join(INLINE_COLUMNS)}, not both", path
        )
    for key in GENERATOR_KEYS:
        if key in workload:
            raise ScenarioError(
                f"workload.{key}: not used with a trace file ({WHERE}.file); remove it", f"workload.{key}"
            )
    spec = TraceFile.from_dict(trace, base)
    rest = {**scenario, "workload": {k: v for k, v in workload.items() if k != "trace"}}
    return rest, spec


def validate(scenario: Mapping[str, Any] | str | Path | None) -> None:
    """Check a scenario without running it; raises the same errors as :func:`kvwire.simulate`.

    >>> validate({"decode": {"device": "a100"}})
    """
    scenario, trace_file = split_file_trace(scenario)
    if trace_file is not None:
        trace_file.check()  # the file's format and the options, without reading the requests
    _core.validate(scenario_json(scenario))


__all__ = ["split_file_trace", "validate"]
