"""Faults (issue 28 item 1, instance failures) seen from Python: the ``retries``, ``lost_s`` and ``failed``
columns and the ``faults`` summary section, SLO attainment counting failed requests as misses, the in-memory
run a trace file takes with faults, and the errors. The engine's behaviour (what a failure loses, counted
against the run without it; availability; macro-steps against step by step; determinism) is tested in
``rust/kvwire-core/tests/faults.rs``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import kvwire
import polars as pl
import pytest

#: 2P3D under load: every decode instance holds sequences at any time.
CLUSTER: dict[str, Any] = {
    "prefill": {"instances": 2},
    "decode": {"instances": 3},
    "workload": {"requests": 400, "seed": 7, "arrivals": {"process": "poisson", "rate_per_s": 12.0}},
}


def with_faults(faults: dict[str, Any], base: dict[str, Any] = CLUSTER) -> dict[str, Any]:
    return {**base, "faults": faults}


def test_without_faults_there_are_no_fault_columns_or_keys() -> None:
    """The new columns and key appear only with ``faults``: a run without it has the table and summary it
    always had."""
    res = kvwire.simulate(CLUSTER)
    assert not {"retries", "lost_s", "failed"} & set(res.requests.columns)
    assert "faults" not in res.summary


def test_a_scheduled_decode_failure_is_counted_in_the_table_and_the_summary() -> None:
    """One outage of decode-1: the requests it held (from the run without it: landed there, not finished at
    the failure) are exactly the retried ones; the summary's totals equal the table's; nothing fails; and the
    availability is 1 - 10 s / (5 instances x the run's length)."""
    at, down = 15.0, 10.0
    plain = kvwire.simulate(CLUSTER).requests
    on_it = (pl.col("decode_instance") == 1) & (pl.col("kv_ready_s") <= at) & (pl.col("finish_s") > at)
    held = plain.filter(on_it)["id"].to_list()
    res = kvwire.simulate(with_faults({"events": [{"instance": "decode-1", "at_s": at, "for_s": down}]}))
    df = res.requests
    assert df.filter(pl.col("retries") > 0)["id"].to_list() == held
    assert len(held) >= 5
    f = res.summary["faults"]
    assert f["instance_failures"] == 1
    assert f["retried_requests"] == len(held)
    assert f["failed_requests"] == 0 and not df["failed"].any()
    assert f["lost_work_s"] == pytest.approx(df["lost_s"].sum(), rel=1e-12)
    horizon = res.summary["run"]["horizon_s"]
    assert f["downtime_s"] == pytest.approx(down, rel=1e-12)
    assert f["availability"] == pytest.approx(1 - down / (5 * horizon), rel=1e-12)
    assert res.summary["requests"]["completed"] == 400


def test_failed_requests_miss_their_slo() -> None:
    """With ``max_retries`` 0 the requests a failure hits fail: they never finish, are not completions, and
    SLO attainment counts them as misses — recomputed here from the table's columns and the SLO."""
    sc = with_faults({"max_retries": 0, "events": [{"instance": "decode-0", "at_s": 12.0, "for_s": 5.0}]})
    sc = {**sc, "slo": {"ttft_s": 5.0, "tpot_s": 1.0}}  # loose: every finished request meets it
    res = kvwire.simulate(sc)
    df = res.requests
    failed = df.filter(pl.col("failed"))
    assert failed.height > 0 and failed["finish_s"].is_null().all()
    assert res.summary["faults"]["failed_requests"] == failed.height
    assert res.summary["requests"]["completed"] == 400 - failed.height
    m = df.filter(pl.col("measured"))
    met = m.filter(
        ~pl.col("failed") & (pl.col("ttft_s") <= 5.0) & (pl.col("tpot_s").is_null() | (pl.col("tpot_s") <= 1.0))
    ).height
    assert met < m.height
    assert res.summary["slo"]["attainment"] == pytest.approx(met / m.height, rel=1e-12)


def test_random_failures_are_deterministic_per_seed() -> None:
    sc = with_faults({"instance": {"mtbf_s": 10.0, "mttr_s": 2.0}, "seed": 5})
    a, b = kvwire.simulate(sc), kvwire.simulate(sc)
    assert a.requests.equals(b.requests)
    assert a.summary["faults"] == b.summary["faults"]
    assert a.summary["faults"]["instance_failures"] > 5
    other = kvwire.simulate(with_faults({"instance": {"mtbf_s": 10.0, "mttr_s": 2.0}, "seed": 6}))
    assert other.summary["faults"] != a.summary["faults"]


def test_a_trace_file_with_faults_runs_in_memory(tmp_path: Path) -> None:
    """A trace file is streamed by default; faults need the table in memory, so the run keeps it (and
    ``keep_requests=False`` is refused by the core, naming ``faults``)."""
    path = tmp_path / "trace.csv"
    pl.DataFrame(
        {"arrival_s": [0.05 * i for i in range(200)], "prompt_tokens": [1024] * 200, "output_tokens": [128] * 200}
    ).write_csv(path)
    sc = with_faults(
        {"events": [{"instance": "decode-0", "at_s": 3.0, "for_s": 2.0}]},
        {**CLUSTER, "workload": {"trace": {"file": str(path)}}},
    )
    res = kvwire.simulate(sc)
    assert res.requests.height == 200
    assert res.summary["faults"]["instance_failures"] == 1
    with pytest.raises(kvwire.ScenarioError, match="faults") as e:
        kvwire.simulate(sc, keep_requests=False)
    assert e.value.path == "faults"


@pytest.mark.parametrize(
    ("faults", "field"),
    [
        ({"events": [{"instance": "decode-9", "at_s": 1.0, "for_s": 1.0}]}, "faults.events[0].instance"),
        ({"events": [{"instance": "decode-0", "at_s": 1.0, "for_s": -1.0}]}, "faults.events[0].for_s"),
        ({"instance": {"mtbf_s": 0, "mttr_s": 1.0}}, "faults.instance.mtbf_s"),
        ({"instance": {"mtbf_s": 5.0, "mttr_s": 1.0, "pools": ["gpu"]}}, "faults.instance.pools[0]"),
        ({"link": {"mtbf_s": 5.0}}, "faults.link"),
        ({"events": [{"link": "kv-link", "channel": 3, "at_s": 1.0, "for_s": 1.0}]}, "faults.events[0].channel"),
        ({"transfer_failure_p": 2}, "faults.transfer_failure_p"),
        ({"events": [["decode-0", 1.0, 1.0]]}, "faults.events[0]"),
    ],
)
def test_bad_faults_are_refused_naming_the_field(faults: dict[str, Any], field: str) -> None:
    with pytest.raises(kvwire.ScenarioError) as e:
        kvwire.simulate(with_faults(faults))
    assert e.value.path == field, str(e.value)


def test_combinations_not_modelled_yet_are_refused() -> None:
    sc = with_faults({"events": []}, {**CLUSTER, "kv": {"policy": "paged"}})
    with pytest.raises(kvwire.ScenarioError) as e:
        kvwire.simulate(sc)
    assert e.value.path == "kv.policy"


def test_the_timeline_shows_outages() -> None:
    """With ``engine.timeline``, each outage is an ``outage`` event on its instance's thread, from the failure
    to the repair; the one still open at the run's end ends there."""
    events = [
        {"instance": "decode-2", "at_s": 5.0, "for_s": 4.0},
        {"instance": "prefill-0", "at_s": 30.0, "for_s": 1e6},
    ]
    res = kvwire.simulate({**with_faults({"events": events}), "engine": {"timeline": True}})
    trace = res.timeline()
    assert isinstance(trace, dict)
    ev = trace["traceEvents"]
    names = {(e["pid"], e["tid"]): e["args"]["name"] for e in ev if e.get("name") == "thread_name"}
    outages = [e for e in ev if e.get("cat") == "fault"]
    shown = [(names[e["pid"], e["tid"]], e["name"]) for e in outages]
    assert shown == [("prefill-0", "outage"), ("decode-2", "outage")]
    horizon = res.summary["run"]["horizon_s"]
    assert outages[0]["ts"] == pytest.approx(30e6) and outages[0]["dur"] == pytest.approx((horizon - 30.0) * 1e6)
    assert outages[1]["ts"] == pytest.approx(5e6) and outages[1]["dur"] == pytest.approx(4e6)


def test_failed_transfers_are_counted() -> None:
    """With ``transfer_failure_p`` the summary counts the failed transfers, each one try again of its request:
    their total equals the table's ``retries``, and the link's transfers count every attempt."""
    res = kvwire.simulate(with_faults({"transfer_failure_p": 0.2, "retry_s": 0.01, "max_retries": 50}))
    f = res.summary["faults"]
    retries = int(res.requests["retries"].sum())
    assert f["transfer_failures"] == retries > 20
    assert f["retried_requests"] == res.requests.filter(pl.col("retries") > 0).height
    assert res.summary["link"]["transfers"] == 400 + retries


def test_the_report_says_what_faults_cost() -> None:
    """``kvwire run``'s report has a faults line with the summary's figures; a run without faults has none."""
    from kvwire.results.report import render

    res = kvwire.simulate(with_faults({"events": [{"instance": "decode-1", "at_s": 15.0, "for_s": 10.0}]}))
    f = res.summary["faults"]
    line = next(x for x in render(res).splitlines() if x.startswith("faults: "))
    assert line.startswith("faults: 1 instance, 0 link and 0 transfer failures")
    assert f"{f['retried_requests']:,} requests tried again, 0 failed" in line
    assert not any(x.startswith("faults: ") for x in render(kvwire.simulate(CLUSTER)).splitlines())


def test_a_sweep_over_fault_rates_is_the_same_on_one_thread_and_two() -> None:
    """Faults are deterministic across threads: a sweep over MTBFs gives the same table on one worker and on
    two (each point its own keyed draws), and more failures as the MTBF shrinks."""
    base = with_faults({"instance": {"mtbf_s": 10.0, "mttr_s": 1.0}, "max_retries": 20})
    grid = {"faults.instance.mtbf_s": [5.0, 20.0, 80.0]}
    one = kvwire.sweep(base, grid, workers=1)
    two = kvwire.sweep(base, grid, workers=2)
    drop = [c for c in one.columns if "wall" in c]
    assert one.drop(drop).equals(two.drop(drop))
    assert "faults.instance_failures" in one.columns
    failures = one["faults.instance_failures"].to_list()
    assert failures[0] > failures[1] > failures[2]


def test_the_timeline_shows_link_outages() -> None:
    """A link channel's outage is a ``channel <k> down`` event on the ``kv-link`` thread of the hand-off."""
    sc = {
        **with_faults({"events": [{"link": "kv-link", "at_s": 6.0, "for_s": 2.0}]}),
        "engine": {"timeline": True},
    }
    trace = kvwire.simulate(sc).timeline()
    assert isinstance(trace, dict)
    ev = trace["traceEvents"]
    names = {(e["pid"], e["tid"]): e["args"]["name"] for e in ev if e.get("name") == "thread_name"}
    down = [e for e in ev if e.get("name") == "channel 0 down"]
    assert len(down) == 1 and names[down[0]["pid"], down[0]["tid"]] == "kv-link"
    assert down[0]["ts"] == pytest.approx(6e6) and down[0]["dur"] == pytest.approx(2e6)
