"""Simulations as executor tasks: what a capacity search (and so a best split) sends to an executor, a Dask
cluster's say, when it is given one (``executor=``). The task is a plain module-level function, picklable and
deterministic in its argument, so a search gives the same answer on any executor as in process.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Executor, wait
from typing import Any

from kvwire.errors import Cancelled
from kvwire.results.run import simulate


def evaluate(scenario: dict[str, Any]) -> dict[str, Any]:
    """The summary of one simulation: what an executor's worker runs."""
    return dict(simulate(scenario).summary)


def summary_on(
    executor: Executor, scenario: dict[str, Any], cancel: threading.Event | None, cancelled: Callable[[], Cancelled]
) -> dict[str, Any]:
    """:func:`evaluate` as one task on ``executor``, waited for. Its worker may be another process or machine,
    which cannot share ``cancel``: once it is set, the task is cancelled (its result, if it still comes, is
    dropped) and ``cancelled()`` is raised."""
    fut = executor.submit(evaluate, scenario)
    while True:
        done, _ = wait([fut], timeout=0.1)
        if done:
            result: dict[str, Any] = fut.result()
            return result
        if cancel is not None and cancel.is_set():
            fut.cancel()
            raise cancelled()


__all__ = ["evaluate", "summary_on"]
