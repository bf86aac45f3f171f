"""Every JSON the service writes is strict JSON (issue 23, item 1/"strict JSON over HTTP"): no ``NaN``,
``Infinity`` or ``-Infinity`` in any response, stored document or Server-Sent Event, and no 500 because a
figure is not finite: a non-finite float is answered as ``null``.

The issue's own scenario (a summary value of ``inf``) answered 500 before: the store refused to write the
summary. Because the library is being fixed so that its summary is finite, the same paths are also driven with
figures made infinite on purpose (a wrapped ``kvwire.simulate`` and a job kind whose result and table hold
``inf`` and ``NaN``), so these tests keep proving the encoder whatever the library answers."""

from __future__ import annotations

import copy
import json
import math
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kvwire
import polars as pl
import pytest
from api_support import make_client, parse_sse, wait_for_job
from kvwire_api import jobs
from kvwire_api.jsonsafe import dumps, finite
from litestar.testing import TestClient

#: The issue's reproduction: ``load.load_factor.prefill`` was ``inf`` and ``POST /v1/simulations`` answered 500.
INFINITE_LOAD = {
    "link": "nvlink4",
    "metrics": {"warmup_fraction": 0.0},
    "workload": {
        "trace": {"arrival_s": [0.0, 2.2250738585072014e-308], "prompt_tokens": [1, 426788], "output_tokens": [0, 0]}
    },
}


def _refuse(constant: str) -> Any:
    raise AssertionError(f"not strict JSON: {constant}")


def strict(body: bytes | str) -> Any:
    """``body`` parsed by a strict parser: ``NaN``, ``Infinity`` and ``-Infinity`` fail the test."""
    return json.loads(body, parse_constant=_refuse)


def get_json(client: TestClient[Any], url: str) -> Any:
    r = client.get(url)
    assert r.status_code == 200, (url, r.status_code, r.text[:500])
    return strict(r.content)


def test_strict_parser_refuses_what_python_writes_by_default() -> None:
    """The checker itself can fail: Python's default ``json.dumps`` of an infinite value is refused."""
    with pytest.raises(AssertionError, match="Infinity"):
        strict(json.dumps({"x": math.inf}))
    assert strict(dumps({"x": math.inf, "y": [math.nan, -math.inf, 1.0]})) == {"x": None, "y": [None, None, 1.0]}
    assert finite((1.0, {"a": math.nan})) == [1.0, {"a": None}]


def check_run(client: TestClient[Any], scenario: dict[str, Any]) -> dict[str, Any]:
    """Run ``scenario`` and read every document of the run with the strict parser; returns the POST answer."""
    r = client.post("/v1/simulations", json=scenario)
    assert r.status_code == 201, (r.status_code, r.text[:500])
    created = strict(r.content)
    loc = r.headers["location"]
    assert get_json(client, loc)["summary"] == created["summary"]  # stored as answered
    for url in (f"{loc}/requests", f"{loc}/percentiles", f"{loc}/cdf", "/v1/simulations"):
        get_json(client, url)
    v = client.post("/v1/scenarios/validate", json=scenario)
    assert v.status_code == 200, v.text[:500]
    strict(v.content)
    return dict(created)


def test_the_issues_infinite_summary_is_answered_not_500(client: TestClient[Any]) -> None:
    """The issue's scenario: 201 (it was 500), and every document of the run is strict JSON."""
    check_run(client, INFINITE_LOAD)


def test_the_report_of_the_issues_run_is_text_not_500(client: TestClient[Any]) -> None:
    """``GET .../report`` of the issue's run is the report (200), not a 500: it renders the stored summary,
    whose figure that was infinite is now finite or null (this needs the library's report to read a null
    load factor, the lead's half of the fix)."""
    r = client.post("/v1/simulations", json=INFINITE_LOAD)
    assert r.status_code == 201, r.text[:500]
    report = client.get(f"{r.headers['location']}/report")
    assert report.status_code == 200 and report.text.strip(), report.text[:500]
    assert "inf" not in report.text.replace("info", "")


class _Infinite:
    """A SimResult whose summary holds ``inf``, ``-inf`` and ``NaN`` (the rest is the real result)."""

    def __init__(self, res: kvwire.SimResult) -> None:
        self._res = res
        summary = copy.deepcopy(dict(res.summary))
        summary["load"]["load_factor"]["prefill"] = math.inf
        summary["latency"]["ttft_s"]["mean"] = math.nan
        summary["run"]["made_up"] = [-math.inf]
        self.summary = summary

    def __getattr__(self, name: str) -> Any:
        return getattr(self._res, name)


@pytest.fixture
def infinite_summaries(monkeypatch: pytest.MonkeyPatch) -> None:
    """``kvwire.simulate`` (as the service calls it) answers summaries with non-finite values."""
    real = kvwire.simulate
    monkeypatch.setattr(kvwire, "simulate", lambda *a, **k: _Infinite(real(*a, **k)))


@pytest.mark.usefixtures("infinite_summaries")
def test_a_summary_with_non_finite_values_is_stored_and_answered_as_null(client: TestClient[Any]) -> None:
    """Summaries made non-finite on purpose: 201, answered and stored with ``null`` in their place."""
    created = check_run(client, {"workload": {"requests": 200}})
    assert created["summary"]["load"]["load_factor"]["prefill"] is None
    assert created["summary"]["latency"]["ttft_s"]["mean"] is None
    assert created["summary"]["run"]["made_up"] == [None]


def _infinite_job(
    definition: dict[str, Any], out: Path, progress: jobs.Progress, cancel: threading.Event, workers: int | None
) -> tuple[pl.DataFrame, dict[str, Any] | None]:
    """A capacity job whose result and table hold non-finite floats."""
    progress(0, 2)
    progress(2, 2)
    table = pl.DataFrame({"x": [1.0, math.inf, math.nan, -math.inf], "met": [True, False, True, False]})
    return table, {"capacity": math.inf, "failed_at": math.nan, "splits": [{"ceiling": -math.inf}]}


@pytest.fixture
def infinite_client(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[TestClient[Any]]:
    """A client whose capacity jobs end with non-finite results."""
    monkeypatch.setitem(jobs.KINDS, "capacity", _infinite_job)
    with make_client(tmp_path) as c:
        yield c


def check_job(client: TestClient[Any], base: str, body: dict[str, Any]) -> dict[str, Any]:
    """Start a job, follow it to the end, and read its status, list, events and result table strictly."""
    r = client.post(base, json=body)
    assert r.status_code == 202, r.text[:500]
    strict(r.content)
    loc = r.headers["location"]
    job = wait_for_job(client, loc)  # type: ignore[arg-type]
    assert job["status"] == "done", job
    status = get_json(client, loc)
    get_json(client, base)
    with client.stream("GET", f"{loc}/events") as s:
        events = parse_sse(s.read().decode())
    assert events and events[-1]["event"] == "done"
    for e in events:
        strict(e["data"])
    get_json(client, f"{loc}/results")
    return dict(status)


def test_job_results_and_events_with_non_finite_values_are_strict(infinite_client: TestClient[Any]) -> None:
    """A job whose result and table hold ``inf``/``NaN``: done (not failed), and its status, events and JSON
    table have ``null`` there."""
    status = check_job(infinite_client, "/v1/capacity", {"scenario": {"workload": {"requests": 100}}})
    assert status["result"] == {"capacity": None, "failed_at": None, "splits": [{"ceiling": None}]}
    rows = get_json(infinite_client, f"/v1/capacity/{status['id']}/results")
    assert [row["x"] for row in rows] == [1.0, None, None, None]


def test_sweep_split_and_plan_documents_are_strict(client: TestClient[Any]) -> None:
    """A sweep over the issue's scenario (its table holds the summary that was infinite), a best split and a
    plan (its table has pruned and refused rows with null figures): status, list, events and tables all strict
    JSON."""
    check_job(client, "/v1/sweeps", {"base": INFINITE_LOAD, "grid": {"metrics.warmup_fraction": [0.0, 0.1]}})
    check_job(client, "/v1/splits", {"scenario": {"workload": {"requests": 200}}, "total_instances": 3})
    plan = {"model": "llama3-70b", "gpus": {"h100": 4}, "workload": {"requests": 100}, "space": {"tp": [1, 4]}}
    check_job(client, "/v1/plans", plan)


def test_trace_and_reference_documents_are_strict(client: TestClient[Any]) -> None:
    """An uploaded trace's stats (list and one) and the reference endpoints parse strictly."""
    csv = (
        b"TIMESTAMP,ContextTokens,GeneratedTokens\n"
        b"2023-11-16 18:15:46.6805900,374,44\n2023-11-16 18:15:46.6805901,396,109\n"
    )
    r = client.post("/v1/traces", content=csv, headers={"Content-Type": "text/csv"})
    assert r.status_code == 201, r.text[:500]
    info = strict(r.content)
    get_json(client, f"/v1/traces/{info['id']}")
    get_json(client, "/v1/traces")
    for url in ("/health", "/v1/presets", "/v1/formats", "/v1/layouts", "/v1/limits", "/v1/scenarios/default"):
        get_json(client, url)
    h = client.post("/v1/handoff", json={"model": "llama3-8b", "link": "nvlink4", "prompt_tokens": 1})
    assert h.status_code == 200, h.text[:500]
    strict(h.content)
