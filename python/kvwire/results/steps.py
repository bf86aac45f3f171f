"""Single steps timed as the engine charges them: the step time of given shapes on a scenario's pools, from
whichever timing source the scenario names (``cost.timing``) — what calibration fits and the fidelity table
holds against measurements.

>>> import kvwire, polars as pl
>>> rows = pl.DataFrame({"phase": ["prefill", "decode"], "batch": [1, 8], "prompt_tokens": [2048, 0],
...                      "context_tokens": [0, 2048]})
>>> out = kvwire.step_times({}, rows)
>>> [round(t * 1e3, 1) for t in out["time_s"]]
[55.1, 6.9]
>>> out["bound"].to_list()
['compute', 'memory']
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import polars as pl

import kvwire._core as _core
from kvwire.errors import ScenarioError
from kvwire.scenario.load import scenario_json

_ROW = re.compile(r"rows\[(\d+)\]")

#: The columns a table of step shapes must have.
COLUMNS = ("phase", "batch", "prompt_tokens", "context_tokens")


def step_times(
    scenario: Mapping[str, Any] | str | Path | None,
    rows: pl.DataFrame,
    pool: str | None = None,
) -> pl.DataFrame:
    """The time of each step of ``rows`` alone on one instance (no queue, no hand-off pass).

    Args:
        scenario: the scenario (dict, file or ``None`` for the default); its ``cost.timing`` is the source.
        rows: one step per row: ``phase`` (``"prefill"``: ``batch`` prompts of ``prompt_tokens`` computed
            tokens after ``context_tokens`` cached ones each; ``"decode"``: ``batch`` sequences of
            ``context_tokens`` tokens of KV each, one new token each), ``batch``, ``prompt_tokens``,
            ``context_tokens`` (whole numbers ≥ 0; ``batch`` ≥ 1).
        pool: the pool to time them on (``"prefill"``, ``"decode"`` or ``"colocated"``); ``None``: prefill
            rows on the prefill pool and decode rows on the decode pool (both on the colocated pool).

    Returns:
        ``rows`` with ``time_s``, ``flops``, ``bytes``, ``comm_s`` (collective time not hidden, s) and
        ``bound`` (``compute``, ``memory`` or ``power``) added.

    Raises:
        ScenarioError: a bad scenario, or a row the core refuses (``path`` names ``rows[i].field``).
    """
    if not isinstance(rows, pl.DataFrame):
        raise ScenarioError(f"rows: expected a polars DataFrame, got {type(rows).__name__}", "rows")
    missing = [c for c in COLUMNS if c not in rows.columns]
    if missing:
        raise ScenarioError(f"rows: missing column(s) {', '.join(missing)} (needs {', '.join(COLUMNS)})", "rows")
    for c in COLUMNS[1:]:
        col = rows[c]
        if not col.dtype.is_integer():
            raise ScenarioError(f"rows.{c}: expected whole numbers, got {col.dtype}", f"rows.{c}")
        if col.null_count() or (rows.height and col.min() < 0):  # type: ignore[operator]
            i = next(i for i, v in enumerate(col.to_list()) if v is None or v < 0)
            raise ScenarioError(f"rows[{i}].{c}: must be a whole number ≥ 0, got {col[i]}", f"rows[{i}].{c}")
    text = scenario_json(scenario)
    colocated = json.loads(text).get("mode") == "colocated"
    phases = rows["phase"].cast(pl.Utf8).to_list()
    if pool is None:
        pools = ["colocated" if colocated else (p if p in ("prefill", "decode") else "prefill") for p in phases]
    else:
        pools = [pool] * rows.height
    answers: list[dict[str, Any]] = [{}] * rows.height
    batch, prompt, context = (rows[c].to_list() for c in COLUMNS[1:])
    for name in dict.fromkeys(pools):
        idx = [i for i, p in enumerate(pools) if p == name]
        try:
            out = json.loads(
                _core.step_times_json(
                    text,
                    name,
                    [phases[i] if phases[i] is not None else "" for i in idx],
                    [int(batch[i]) for i in idx],
                    [int(prompt[i]) for i in idx],
                    [int(context[i]) for i in idx],
                )
            )
        except ScenarioError as e:
            m = _ROW.match(e.path)
            if m is None:
                raise
            i = idx[int(m.group(1))]
            field = e.path[m.end() :]
            raise ScenarioError(f"rows[{i}]{field}: {str(e).split(': ', 1)[-1]}", f"rows[{i}]{field}") from None
        for i, a in zip(idx, out, strict=True):
            answers[i] = a
    extra = pl.DataFrame(answers, schema={"time_s": pl.Float64, "flops": pl.Float64, "bytes": pl.Float64,
                                         "comm_s": pl.Float64, "bound": pl.Utf8})  # fmt: skip
    return pl.concat([rows, extra], how="horizontal")


__all__ = ["COLUMNS", "step_times"]
