"""A run's timeline as a Chrome / Perfetto trace (``engine.timeline``).

The core records one span per batch step of every instance and one per transfer on every hop lane of the
hand-off path when the scenario sets ``"engine": {"timeline": true}`` (at most ``engine.timeline_max_spans``,
default 2,000,000; a run recording more stops with a :class:`~kvwire.errors.ScenarioError` naming that field).
:meth:`kvwire.SimResult.timeline` turns them into the Trace Event Format that ``chrome://tracing`` and
https://ui.perfetto.dev load: ``{"traceEvents": [...], "displayTimeUnit": "ms"}`` with

* one process per pool (``prefill``, ``decode`` or ``colocated``) and one thread per instance, whose complete
  events (``"ph": "X"``, ``ts``/``dur`` in microseconds of simulated time) are the batch steps, named by their
  kind, with ``args`` ``{"kind", "batch", "tokens"}`` (prompts or sequences in the step; prompt tokens of a
  prefill step, one token per sequence of a decode step); a step of an instance with a parallel layout whose
  collectives are not all hidden under compute also has ``args`` ``collective_s`` and, nested inside it, a
  ``collectives`` event (``"cat": "collective"``) of that exposed collective time, drawn as one block at the
  step's end (the engines interleave them with each layer's compute; the block shows how much of the step
  they take, not when);
* one process ``hand-off`` with a thread per hop lane (``kv-link``, ``pcie-prefill-0``, ...) and, where
  transfers overlap on a lane (several channels, a processor-sharing link), one thread per concurrent
  transfer (``kv-link #1``, ...); each transfer is a complete event ``request <id>`` with ``args``
  ``{"request", "bytes", "handoff_bytes"}`` (bytes on this hop's wire, and the KV handed off before
  compression);
* with ``faults``, each outage of an instance as a complete event ``outage`` (``"cat": "fault"``) on its thread,
  from its failure to its repair (or the run's end); the step it cut short keeps its whole span; each outage
  of a channel of the network link as ``channel <k> down`` on the ``kv-link`` thread;
* metadata events (``"ph": "M"``) naming every process and thread.
"""

from __future__ import annotations

import heapq
import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from kvwire.errors import ResourceError, ScenarioError

#: Seconds of simulated time → the trace's microseconds.
US_PER_S = 1e6


def _pool(name: str) -> str:
    """The pool of an instance name (``"decode-3"`` → ``"decode"``)."""
    return name.rsplit("-", 1)[0]


def _tracks(start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """For spans in any order, the lowest track each can use so that spans on one track never overlap (a span
    may start where the previous one ended)."""
    track = np.zeros(len(start), dtype=np.int64)
    free: list[tuple[float, int]] = []  # (end, track) of busy tracks
    spare: list[int] = []
    used = 0
    for i in np.lexsort((end, start)):
        while free and free[0][0] <= start[i]:
            heapq.heappush(spare, heapq.heappop(free)[1])
        if spare:
            k = heapq.heappop(spare)
        else:
            k, used = used, used + 1
        track[i] = k
        heapq.heappush(free, (float(end[i]), k))
    return track


def trace_events(spans: Mapping[str, Any], stats: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
    """The trace's events, metadata first: ``spans`` is the core's timeline columns, ``stats`` the core's run
    totals (their instance and hop-lane names)."""
    names = [str(i["name"]) for i in stats["instances"]]
    pools = list(dict.fromkeys(_pool(n) for n in names))
    pid = {p: k + 1 for k, p in enumerate(pools)}
    link_pid = len(pools) + 1
    for p in pools:
        yield {"ph": "M", "name": "process_name", "pid": pid[p], "args": {"name": f"{p} pool"}}
        yield {"ph": "M", "name": "process_sort_index", "pid": pid[p], "args": {"sort_index": pid[p]}}
    for i, n in enumerate(names):
        yield {"ph": "M", "name": "thread_name", "pid": pid[_pool(n)], "tid": i, "args": {"name": n}}
    x = spans["transfers"]
    lane = np.asarray(x["lane"], dtype=np.int64)
    start_t, end_t = np.asarray(x["start_s"]), np.asarray(x["end_s"])
    tid = np.zeros(len(lane), dtype=np.int64)
    links = [str(lk["resource"]) for lk in stats["links"]]
    if links:
        yield {"ph": "M", "name": "process_name", "pid": link_pid, "args": {"name": "hand-off"}}
        yield {"ph": "M", "name": "process_sort_index", "pid": link_pid, "args": {"sort_index": link_pid}}
    next_tid = 0
    for j, resource in enumerate(links):
        on = np.flatnonzero(lane == j)
        track = _tracks(start_t[on], end_t[on])
        for k in range(int(track.max(initial=0)) + 1):
            name = resource if k == 0 else f"{resource} #{k}"
            yield {"ph": "M", "name": "thread_name", "pid": link_pid, "tid": next_tid + k, "args": {"name": name}}
        tid[on] = next_tid + track
        next_tid += int(track.max(initial=0)) + 1
    s = spans["steps"]
    kinds = list(spans["kinds"])
    instance = np.asarray(s["instance"], dtype=np.int64)
    start_s, end_s = np.asarray(s["start_s"]), np.asarray(s["end_s"])
    kind, batch, tokens = np.asarray(s["kind"]), np.asarray(s["batch"]), np.asarray(s["tokens"])
    comm = _comm(s)
    step_pid = [pid[_pool(n)] for n in names]
    for k in range(len(instance)):
        i = int(instance[k])
        name = kinds[int(kind[k])]
        args: dict[str, Any] = {"kind": name, "batch": int(batch[k]), "tokens": int(tokens[k])}
        c = float(comm[k])
        if c > 0.0:
            args["collective_s"] = c
        yield {
            "name": name,
            "cat": "step",
            "ph": "X",
            "ts": float(start_s[k]) * US_PER_S,
            "dur": (float(end_s[k]) - float(start_s[k])) * US_PER_S,
            "pid": step_pid[i],
            "tid": i,
            "args": args,
        }
        if c > 0.0:
            yield {
                "name": "collectives",
                "cat": "collective",
                "ph": "X",
                "ts": (float(end_s[k]) - c) * US_PER_S,
                "dur": c * US_PER_S,
                "pid": step_pid[i],
                "tid": i,
                "args": {"exposed_s": c},
            }
    o = _outages(spans)
    for k in range(len(o["instance"])):
        i = int(o["instance"][k])
        a, b = float(o["start_s"][k]), float(o["end_s"][k])
        yield {
            "name": "outage",
            "cat": "fault",
            "ph": "X",
            "ts": a * US_PER_S,
            "dur": (b - a) * US_PER_S,
            "pid": step_pid[i],
            "tid": i,
            "args": {"down_s": b - a},
        }
    lo = _outages(spans, "link_outages")
    for k in range(len(lo["channel"])):
        a, b = float(lo["start_s"][k]), float(lo["end_s"][k])
        yield {
            "name": f"channel {int(lo['channel'][k])} down",
            "cat": "fault",
            "ph": "X",
            "ts": a * US_PER_S,
            "dur": (b - a) * US_PER_S,
            "pid": link_pid,
            "tid": 0,
            "args": {"channel": int(lo["channel"][k]), "down_s": b - a},
        }
    request, wire, handoff = np.asarray(x["request"]), np.asarray(x["wire_bytes"]), np.asarray(x["handoff_bytes"])
    for k in range(len(lane)):
        r = int(request[k])
        yield {
            "name": f"request {r}",
            "cat": "transfer",
            "ph": "X",
            "ts": float(start_t[k]) * US_PER_S,
            "dur": (float(end_t[k]) - float(start_t[k])) * US_PER_S,
            "pid": link_pid,
            "tid": int(tid[k]),
            "args": {"request": r, "bytes": float(wire[k]), "handoff_bytes": float(handoff[k])},
        }


#: Memory of one event of the trace held as a Python dict (its dict, ``args`` dict, keys and numbers; about
#: 0.9 kB measured with ``sys.getsizeof`` over an event's objects, rounded up).
EVENT_BYTES = 1_000


def _comm(steps: Mapping[str, Any]) -> np.ndarray:
    """Each step's exposed collective time, s (zeros for a timeline recorded without the column)."""
    if "comm_s" in steps:
        return np.asarray(steps["comm_s"], dtype=np.float64)
    return np.zeros(len(steps["instance"]))


def _outages(spans: Mapping[str, Any], key: str = "outages") -> Mapping[str, Any]:
    """The instances' (``outages``) or the link channels' (``link_outages``) outage columns (empty for a
    timeline recorded without them)."""
    who = "instance" if key == "outages" else "channel"
    return spans.get(key) or {who: [], "start_s": [], "end_s": []}


def span_count(spans: Mapping[str, Any]) -> int:
    """The trace's complete events: the batch steps, their collective blocks, the transfers and the outages
    recorded."""
    steps = spans["steps"]
    comm = int(np.count_nonzero(_comm(steps) > 0.0))
    outages = len(_outages(spans)["instance"]) + len(_outages(spans, "link_outages")["channel"])
    return len(steps["instance"]) + comm + len(spans["transfers"]["request"]) + outages


def trace_dict(spans: Mapping[str, Any], stats: Mapping[str, Any], available: int | None = None) -> dict[str, Any]:
    """The whole trace as one dict (``{"traceEvents": [...], "displayTimeUnit": "ms"}``).

    Raises:
        ResourceError: the events (about :data:`EVENT_BYTES` each as dicts) would not fit in ``available``
            bytes (``None``: not checked); the message says to write it to a file instead, which holds one
            event at a time.
    """
    n = span_count(spans)
    if available is not None and n * EVENT_BYTES > available:
        raise ResourceError(
            f"timeline: {n:,} events as a dict need about {n * EVENT_BYTES / 1e9:,.1f} GB but "
            f"{available / 1e9:,.1f} GB of memory is available; write it to a file instead (res.timeline(PATH), "
            "one event in memory at a time)",
            "timeline",
        )
    return {"traceEvents": list(trace_events(spans, stats)), "displayTimeUnit": "ms"}


def write_trace(path: str | Path, spans: Mapping[str, Any], stats: Mapping[str, Any]) -> Path:
    """Write the trace to ``path`` event by event (never the whole list in memory); returns the path. Written
    under a temporary name and renamed when complete; on failure the partial file is removed.

    Raises:
        ScenarioError: ``path`` is not a path, or the file cannot be written (a missing folder, no permission,
            a full disk); the message names ``path`` and the reason.
    """
    if not isinstance(path, (str, Path)) or (isinstance(path, str) and not path):
        raise ScenarioError(f"timeline: path must be a file path (str or pathlib.Path), got {path!r}", "path")
    path = Path(path)
    tmp = path.with_name(path.name + ".part")
    try:
        with tmp.open("w", encoding="utf-8") as f:
            f.write('{"displayTimeUnit": "ms", "traceEvents": [\n')
            for k, ev in enumerate(trace_events(spans, stats)):
                if k:
                    f.write(",\n")
                f.write(json.dumps(ev, separators=(",", ":")))
            f.write("\n]}\n")
        tmp.replace(path)
    except OSError as e:
        tmp.unlink(missing_ok=True)
        raise ScenarioError(f"timeline: cannot write {path}: {e.strerror or e}", "path") from None
    return path


__all__ = ["EVENT_BYTES", "US_PER_S", "span_count", "trace_dict", "trace_events", "write_trace"]
