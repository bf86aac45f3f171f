"""``engine.timeline``: the Chrome/Perfetto trace of a run (``res.timeline()``, ``kvwire run --timeline``).

Each test says what it proves; the oracle is the per-request table (when each request's prefill, transfer and
decode happened), never the recorder itself.
"""

from __future__ import annotations

import bisect
import json
from collections import defaultdict
from itertools import pairwise
from pathlib import Path
from typing import Any

import kvwire
import numpy as np
import polars as pl
import pytest
from click.testing import CliRunner
from kvwire.cli import main
from kvwire.errors import ScenarioError

GAMMA = {"process": "gamma", "rate_per_s": 20.0, "cv": 2.0}
DISAGG: dict[str, Any] = {
    "prefill": {"instances": 2},
    "decode": {"instances": 3},
    "link": {"preset": "eth-100g", "channels": 2},
    "workload": {"requests": 150, "seed": 3, "arrivals": GAMMA},
}
COLOCATED: dict[str, Any] = {
    "mode": "colocated",
    "colocated": {"device": "h100", "instances": 2},
    "workload": {"requests": 120, "seed": 4, "arrivals": GAMMA},
}
HOST_STAGED: dict[str, Any] = {
    "prefill": {"instances": 2},
    "decode": {"instances": 2},
    "link": {"preset": "ib-ndr", "model": "host_staged"},
    "workload": {"requests": 80, "seed": 5, "arrivals": GAMMA},
}
#: Float slack for times that went through µs: a few ulps of the largest timestamp.
US_TOL = 1e-6


def timed(scenario: dict[str, Any], **engine: Any) -> dict[str, Any]:
    """``scenario`` with ``engine.timeline`` on (and other engine fields)."""
    return {**scenario, "engine": {**scenario.get("engine", {}), "timeline": True, **engine}}


def check_schema(trace: dict[str, Any]) -> None:
    """Every event of a Chrome trace as the Trace Event Format defines the ones used here; every thread and
    process of a span is named; spans on one thread never overlap."""
    assert set(trace) == {"traceEvents", "displayTimeUnit"}
    names: dict[tuple[int, int], str] = {}
    procs: dict[int, str] = {}
    spans: dict[tuple[int, int], list[tuple[float, float]]] = defaultdict(list)
    for ev in trace["traceEvents"]:
        assert isinstance(ev["pid"], int)
        if ev["ph"] == "M":
            assert ev["name"] in ("process_name", "process_sort_index", "thread_name"), ev
            if ev["name"] == "thread_name":
                assert isinstance(ev["tid"], int) and isinstance(ev["args"]["name"], str)
                names[(ev["pid"], ev["tid"])] = ev["args"]["name"]
            elif ev["name"] == "process_name":
                procs[ev["pid"]] = ev["args"]["name"]
            else:
                assert isinstance(ev["args"]["sort_index"], int)
            continue
        assert ev["ph"] == "X", ev
        assert set(ev) == {"name", "cat", "ph", "ts", "dur", "pid", "tid", "args"}, ev
        assert isinstance(ev["ts"], float) and isinstance(ev["dur"], float)
        assert np.isfinite(ev["ts"]) and ev["ts"] >= 0 and np.isfinite(ev["dur"]) and ev["dur"] >= 0, ev
        if ev["cat"] == "step":
            assert ev["name"] in ("prefill", "decode") and ev["args"]["kind"] == ev["name"]
            assert set(ev["args"]) == {"kind", "batch", "tokens"} and ev["args"]["batch"] >= 1
        else:
            assert ev["cat"] == "transfer"
            assert set(ev["args"]) == {"request", "bytes", "handoff_bytes"}
            assert ev["name"] == f"request {ev['args']['request']}" and ev["args"]["bytes"] > 0
        spans[(ev["pid"], ev["tid"])].append((ev["ts"], ev["ts"] + ev["dur"]))
    for key, xs in spans.items():
        assert key in names and key[0] in procs, key
        xs.sort()
        for a, b in pairwise(xs):
            assert b[0] >= a[1] - US_TOL * a[1], (names[key], a, b)


def threads(trace: dict[str, Any]) -> dict[tuple[int, int], str]:
    return {(e["pid"], e["tid"]): e["args"]["name"] for e in trace["traceEvents"] if e["name"] == "thread_name"}


def step_spans(trace: dict[str, Any]) -> dict[tuple[str, str], np.ndarray]:
    """(instance name, kind) → sorted [start, end] rows in seconds."""
    names = threads(trace)
    out: dict[tuple[str, str], list[tuple[float, float]]] = defaultdict(list)
    for e in trace["traceEvents"]:
        if e["ph"] == "X" and e["cat"] == "step":
            out[(names[(e["pid"], e["tid"])], e["name"])].append((e["ts"] / 1e6, (e["ts"] + e["dur"]) / 1e6))
    return {k: np.array(sorted(v)) for k, v in out.items()}


def close(a: float, b: float) -> bool:
    return abs(a - b) <= US_TOL * max(abs(b), 1.0) * 1e-3 + 1e-12


def test_trace_file_is_valid_chrome_trace_json(tmp_path: Path) -> None:
    """``res.timeline(path)`` writes a file that ``json.load`` reads as a Chrome trace: every event checked
    against the format (complete events with µs times, metadata naming each process and thread, spans on a
    thread never overlapping), one process per pool plus ``hand-off``, one thread per instance, and the
    returned dict equal to the file's contents."""
    res = kvwire.simulate(timed(DISAGG))
    path = res.timeline(tmp_path / "run.json")
    assert path == tmp_path / "run.json" and not (tmp_path / "run.json.part").exists()
    trace = json.loads(path.read_text())
    check_schema(trace)
    assert trace == res.timeline()
    procs = {e["args"]["name"] for e in trace["traceEvents"] if e["name"] == "process_name"}
    assert procs == {"prefill pool", "decode pool", "hand-off"}
    names = set(threads(trace).values())
    assert {"prefill-0", "prefill-1", "decode-0", "decode-1", "decode-2", "kv-link"} <= names
    steps = sum(1 for e in trace["traceEvents"] if e["ph"] == "X" and e["cat"] == "step")
    assert steps == res.summary["run"]["steps"]


@pytest.mark.parametrize("scenario", [DISAGG, COLOCATED], ids=["2P3D", "colocated-2"])
def test_step_spans_match_the_request_table(scenario: dict[str, Any]) -> None:
    """Each request's prefill ran in exactly one prefill span of its prefill instance, from its
    ``prefill_start_s`` to its ``first_token_s``; from its ``decode_start_s`` to its ``finish_s`` its decode
    instance's spans tile the time back to back (an instance steps without a gap while anything runs; a
    colocated one interleaves prefill steps), output - 1 of them decode steps (one token each after the
    prefill's first)."""
    res = kvwire.simulate(timed(scenario))
    trace = res.timeline()
    check_schema(trace)
    spans = step_spans(trace)
    colocated = "colocated" in scenario
    pool = ("colocated", "colocated") if colocated else ("prefill", "decode")
    done = res.requests.filter(pl.col("finish_s").is_not_null() & ~pl.col("rejected"))
    assert done.height == scenario["workload"]["requests"]
    checked = 0
    for r in done.iter_rows(named=True):
        pre = spans[(f"{pool[0]}-{r['prefill_instance']}", "prefill")]
        hit = (np.abs(pre[:, 0] - r["prefill_start_s"]) <= 1e-9) & (np.abs(pre[:, 1] - r["first_token_s"]) <= 1e-9)
        assert hit.sum() == 1, r
        if r["output_tokens"] < 2:
            continue
        name = f"{pool[1]}-{r['decode_instance']}"
        steps = np.concatenate([spans.get((name, k), np.empty((0, 2))) for k in ("prefill", "decode")])
        steps = steps[np.argsort(steps[:, 0])]
        inside = steps[(steps[:, 0] >= r["decode_start_s"] - 1e-9) & (steps[:, 1] <= r["finish_s"] + 1e-9)]
        assert abs(inside[0, 0] - r["decode_start_s"]) <= 1e-9 and abs(inside[-1, 1] - r["finish_s"]) <= 1e-9, r
        assert np.all(np.abs(inside[1:, 0] - inside[:-1, 1]) <= 1e-9), r
        decodes = spans[(name, "decode")]
        n_decode = ((decodes[:, 0] >= r["decode_start_s"] - 1e-9) & (decodes[:, 1] <= r["finish_s"] + 1e-9)).sum()
        assert n_decode == r["output_tokens"] - 1, r
        checked += 1
    assert checked > 50


@pytest.mark.parametrize("scenario", [DISAGG, HOST_STAGED], ids=["one-hop", "host-staged"])
def test_transfer_spans_match_the_request_table(scenario: dict[str, Any]) -> None:
    """One transfer span per handed-off request on each hop lane: on the network hop of a one-hop path it runs
    from the table's ``kv_start_s`` to its ``kv_ready_s``; on a host-staged path the first hop starts at
    ``kv_start_s``, the last ends at ``kv_ready_s``, each hop starts no earlier than the previous one ended,
    and the wire bytes are the request's KV (prompt tokens x 131,072 B for Llama-3-8B, no compression)."""
    res = kvwire.simulate(timed(scenario))
    trace = res.timeline()
    check_schema(trace)
    hops: dict[int, list[tuple[float, float, float]]] = defaultdict(list)
    for e in trace["traceEvents"]:
        if e["ph"] == "X" and e["cat"] == "transfer":
            hops[e["args"]["request"]].append((e["ts"] / 1e6, (e["ts"] + e["dur"]) / 1e6, e["args"]["bytes"]))
    handed = res.requests.filter(~pl.col("rejected") & ~pl.col("local_decode") & (pl.col("output_tokens") >= 2))
    assert set(hops) == set(handed["id"].to_list())
    n_hops = 3 if scenario is HOST_STAGED else 1
    for r in handed.iter_rows(named=True):
        h = sorted(hops[r["id"]])
        assert len(h) == n_hops, r
        assert abs(h[0][0] - r["kv_start_s"]) <= 1e-9 and abs(h[-1][1] - r["kv_ready_s"]) <= 1e-9, (h, r)
        assert all(b[0] >= a[1] - 1e-9 for a, b in pairwise(h)), h
        assert all(x[2] == r["prompt_tokens"] * 131_072 for x in h), h


def test_over_the_bound_is_a_clear_error() -> None:
    """A run recording more spans than ``engine.timeline_max_spans`` stops with a ScenarioError naming that
    field (no truncated timeline); a bound of 0 is refused at validation; asking an unrecorded run for its
    timeline names ``engine.timeline``."""
    with pytest.raises(ScenarioError, match=r"engine\.timeline_max_spans") as e:
        kvwire.simulate(timed(DISAGG, timeline_max_spans=100))
    assert e.value.path == "engine.timeline_max_spans" and "more than 100 spans" in str(e.value)
    with pytest.raises(ScenarioError) as e:
        kvwire.simulate(timed(DISAGG, timeline_max_spans=0))
    assert e.value.path == "engine.timeline_max_spans"
    with pytest.raises(ScenarioError) as e:
        kvwire.simulate(DISAGG).timeline()
    assert e.value.path == "engine.timeline"


@pytest.mark.parametrize("scenario", [DISAGG, COLOCATED, HOST_STAGED], ids=["2P3D", "colocated", "host-staged"])
def test_timeline_changes_nothing_else(scenario: dict[str, Any]) -> None:
    """With the timeline on, the request table and the summary are those of the run without it (but the wall
    clock), and a streamed run (``keep_requests=False``) records the same trace as the in-memory run."""
    off = kvwire.simulate(scenario)
    on = kvwire.simulate(timed(scenario))
    assert on.requests.equals(off.requests)
    a, b = dict(on.summary), dict(off.summary)
    a["run"] = {k: v for k, v in a["run"].items() if k != "wall_s"}
    b["run"] = {k: v for k, v in b["run"].items() if k != "wall_s"}
    assert a == b
    streamed = kvwire.simulate(timed(scenario), keep_requests=False)
    assert streamed.timeline() == on.timeline()


def test_cli_writes_the_timeline(tmp_path: Path) -> None:
    """``kvwire run --timeline FILE.json`` runs with the timeline on and writes a valid trace with one step span
    per batch step of the summary; over the bound the command fails with the field's name."""
    out = tmp_path / "t.json"
    r = CliRunner().invoke(main, ["run", "--json", "--set", "workload.requests=40", "--timeline", str(out)])
    assert r.exit_code == 0, r.output
    trace = json.loads(out.read_text())
    check_schema(trace)
    steps = sum(1 for e in trace["traceEvents"] if e["ph"] == "X" and e["cat"] == "step")
    assert steps == json.loads(r.stdout)["summary"]["run"]["steps"]
    bad = CliRunner().invoke(
        main, ["run", "--set", "engine.timeline_max_spans=10", "--timeline", str(tmp_path / "u.json")]
    )
    assert bad.exit_code != 0 and "engine.timeline_max_spans" in bad.output
    assert not (tmp_path / "u.json").exists()


PARALLEL: dict[str, Any] = {
    "model": "llama3-70b",
    "prefill": {"instances": 1, "parallel": {"tp": 4}},
    "decode": {"instances": 1, "parallel": {"tp": 4}},
    "workload": {"requests": 60, "seed": 6},
}


def test_collective_blocks_nest_in_their_steps_and_sum_to_the_summarys_share() -> None:
    """With a parallel layout, each step whose collectives are exposed has a ``collectives`` block nested in it,
    ending with it; per instance, the blocks' total over the steps' total equals the summary's
    ``comm_fraction`` (accounted apart, by the instance's timer); without a layout there is no block."""
    res = kvwire.simulate(timed(PARALLEL))
    events = res.timeline()["traceEvents"]
    steps = [e for e in events if e.get("cat") == "step"]
    blocks = [e for e in events if e.get("cat") == "collective"]
    assert blocks and len(blocks) == sum(1 for s in steps if "collective_s" in s["args"])
    starts: dict[tuple[int, int], list[dict[str, Any]]] = defaultdict(list)
    per_instance: dict[tuple[int, int], list[float]] = defaultdict(lambda: [0.0, 0.0])
    for s in steps:
        per_instance[(s["pid"], s["tid"])][1] += s["dur"]
        starts[(s["pid"], s["tid"])].append(s)
    for b in blocks:
        lane = starts[(b["pid"], b["tid"])]  # in start order; the block's step is the last one starting before it
        step = lane[bisect.bisect_right([s["ts"] for s in lane], b["ts"]) - 1]
        assert step["ts"] <= b["ts"] and b["dur"] <= step["dur"]
        assert b["ts"] + b["dur"] == pytest.approx(step["ts"] + step["dur"], rel=1e-12)
        assert b["args"]["exposed_s"] == step["args"]["collective_s"] > 0.0
        per_instance[(b["pid"], b["tid"])][0] += b["dur"]
    names = {(e["pid"], e["tid"]): e["args"]["name"] for e in events if e.get("name") == "thread_name"}
    for key, (comm_us, busy_us) in per_instance.items():
        share = res.summary["instances"][names[key]]["comm_fraction"]
        assert comm_us / busy_us == pytest.approx(share, rel=1e-9)
    assert not [e for e in kvwire.simulate(timed(DISAGG)).timeline()["traceEvents"] if e.get("cat") == "collective"]
