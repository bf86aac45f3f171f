"""The summary's ``sessions`` entry for a closed-loop multi-turn workload (``workload.sessions``).

The core sends one row per turn that arrives (columns ``session``, ``turn``), session-major; a session ends
early when its next turn would exceed the model's context (never sent) or when a turn is refused (the refused
turn is a row with ``rejected``; the later ones are never sent). See ``docs/concepts/sessions.md``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import polars as pl


def _column(df: pl.DataFrame | Mapping[str, np.ndarray], name: str) -> np.ndarray:
    if isinstance(df, pl.DataFrame):
        return df[name].to_numpy()
    return np.asarray(df[name])


def sessions_summary(df: pl.DataFrame | Mapping[str, np.ndarray], scenario: Mapping[str, Any]) -> dict[str, Any] | None:
    """The ``sessions`` summary of a run of ``scenario`` (its resolved echo) whose per-request table is ``df``
    (the Polars table or the core's columns); ``None`` when the workload has no sessions.

    >>> import kvwire
    >>> sc = {"workload": {"sessions": {"count": 3, "turns": 2, "think_s": 1.0}}}
    >>> s = kvwire.simulate(sc).summary["sessions"]
    >>> s["count"], s["turns_planned"], s["turns_sent"] + s["turns_not_sent"]
    (3, 6, 6)
    """
    spec = scenario.get("workload", {}).get("sessions")
    if spec is None:
        return None
    count, turns = int(spec["count"]), int(spec["turns"])
    session = _column(df, "session").astype(np.int64)
    rejected = _column(df, "rejected").astype(bool)
    sent = np.bincount(session, minlength=count)
    refused = np.bincount(session, weights=rejected, minlength=count) > 0
    completed = int(np.count_nonzero((sent == turns) & ~refused))
    by_refusal = int(np.count_nonzero(refused))
    turns_sent = int(session.size)
    return {
        "count": count,
        "turns": turns,
        "think_s": float(spec["think_s"]),
        "turns_planned": count * turns,
        "turns_sent": turns_sent,
        "turns_not_sent": count * turns - turns_sent,
        "turns_refused": int(np.count_nonzero(rejected)),
        "turns_per_session_mean": turns_sent / count,
        "completed": completed,
        "ended_early": count - completed,
        "ended_by_refusal": by_refusal,
        "ended_by_context": count - completed - by_refusal,
    }


def session_line(s: Mapping[str, Any]) -> str:
    """The report's line about a sessions workload, from the summary's ``sessions`` entry.

    >>> session_line({"count": 2, "turns": 3, "think_s": 1.0, "turns_sent": 5, "turns_per_session_mean": 2.5,
    ...               "completed": 1, "ended_early": 1, "ended_by_context": 1, "ended_by_refusal": 0})
    'sessions: 2 of up to 3 turns (think 1 s): 5 turns sent (2.50 per session); 1 completed every turn, ...'
    """
    return (
        f"sessions: {s['count']:,} of up to {s['turns']:,} turns (think {s['think_s']:g} s): "
        f"{s['turns_sent']:,} turns sent ({s['turns_per_session_mean']:.2f} per session); "
        f"{s['completed']:,} completed every turn, {s['ended_early']:,} ended early "
        f"({s['ended_by_context']:,} by the context, {s['ended_by_refusal']:,} by a refused turn)"
    )


__all__ = ["session_line", "sessions_summary"]
