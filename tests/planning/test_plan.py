"""kvwire.plan: the best deployment of a model on a GPU budget.

Oracle: a brute force written here, independently of the planner — every configuration of the space built as
a scenario by hand, its capacity found with :func:`kvwire.capacity`, capped at its :func:`kvwire.ceilings`
ceiling (the plan's documented capacity), and scored as capacity x mean output tokens / GPUs. Runs are short
(a few hundred requests) and screening runs at the workload's full length (``screen_requests=None``), so the
planner's evaluations are exact and its answer must equal the brute force's.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import kvwire
import pytest
from calibration_support import synthetic
from hypothesis import given, settings
from hypothesis import strategies as st

WORKLOAD: dict[str, Any] = {"requests": 200, "seed": 7}


def brute_force(
    model: str,
    device: str,
    budget: int,
    *,
    modes: list[str],
    tps: list[int],
    batches: list[int],
    links: list[str],
    workload: dict[str, Any],
) -> list[dict[str, Any]]:
    """Every configuration's objective, evaluated with kvwire.capacity and kvwire.ceilings (no planner code)."""
    out = []
    for mode in modes:
        if mode == "colocated":
            shapes: list[Any] = [(n, t) for t in tps for n in range(1, budget // t + 1)]
        else:
            shapes = [
                (p, tp, d, td)
                for tp, td in itertools.product(tps, tps)
                for p in range(1, budget // tp + 1)
                for d in range(1, (budget - p * tp) // td + 1)
            ]
        for shape, batch in itertools.product(shapes, batches):
            for link in links if mode == "disaggregated" else [None]:
                sc: dict[str, Any] = {
                    "model": model,
                    "mode": mode,
                    "workload": workload,
                    "scheduler": {"max_decode_batch": batch},
                }
                if mode == "colocated":
                    n, t = shape
                    sc["colocated"] = {"device": device, "instances": n, "parallel": {"tp": t}}
                    gpus = n * t
                else:
                    p, tp, d, td = shape
                    sc["prefill"] = {"device": device, "instances": p, "parallel": {"tp": tp}}
                    sc["decode"] = {"device": device, "instances": d, "parallel": {"tp": td}}
                    sc["link"] = link
                    gpus = p * tp + d * td
                try:
                    c = kvwire.ceilings(sc)
                except kvwire.ScenarioError:
                    continue
                r = kvwire.capacity(sc, slo_attainment=0.9, rel_tol=0.05)
                value = None
                if r.capacity is not None:
                    cap = min(float(r.capacity), c["ceiling_req_per_s"])
                    value = cap * c["output_tokens_mean"] / gpus
                out.append({"mode": mode, "shape": shape, "batch": batch, "link": link, "gpus": gpus, "value": value})
    return out


def planned_shape(row: dict[str, Any]) -> tuple[int, ...]:
    if row["mode"] == "colocated":
        return (row["colocated_instances"], row["colocated_tp"])
    return (row["prefill_instances"], row["prefill_tp"], row["decode_instances"], row["decode_tp"])


def test_best_equals_brute_force_on_a_small_space() -> None:
    """On llama3-8b x 4 H100 (both modes, TP 1 and 2), the plan's best configuration and its throughput per GPU
    equal the brute force's best over every configuration, and every evaluated row's value agrees with it."""
    space = {"tp": [1, 2]}
    p = kvwire.plan("llama3-8b", {"h100": 4}, workload=WORKLOAD, space=space, screen_requests=None)
    bf = brute_force(
        "llama3-8b", "h100", 4, modes=["disaggregated", "colocated"], tps=[1, 2], batches=[256], links=["ib-ndr"],
        workload=WORKLOAD,
    )  # fmt: skip
    assert p.considered == len(bf)
    top = max(r["value"] for r in bf if r["value"] is not None)
    assert p.best is not None
    assert p.best["output_tokens_per_s_per_gpu"] == pytest.approx(top, rel=1e-12)
    winners = {(r["mode"], r["shape"]) for r in bf if r["value"] == top}
    best_row = p.table.filter(kvwire_col_status("verified")).sort("output_tokens_per_s_per_gpu").row(-1, named=True)
    assert (best_row["mode"], planned_shape(best_row)) in winners
    by_key = {(r["mode"], r["shape"]): r["value"] for r in bf}
    for row in p.table.filter(kvwire_col_status("verified", "screened")).iter_rows(named=True):
        assert row["output_tokens_per_s_per_gpu"] == pytest.approx(by_key[(row["mode"], planned_shape(row))])
    # The best's scenario runs as is, at the planned rate, and meets the SLO target there.
    s = kvwire.simulate(p.best["scenario"]).summary
    assert s["slo"]["attainment"] >= 0.9
    assert p.best["scenario"]["workload"]["arrivals"]["rate_per_s"] == p.best["rate_per_s"]


def kvwire_col_status(*statuses: str) -> Any:
    import polars as pl

    return pl.col("status").is_in(list(statuses))


def test_frontier_is_not_dominated() -> None:
    """No frontier row is beaten on both throughput per GPU and tokens/s per user by any verified or screened
    row of the table (screening is exact here), and the frontier is sorted by throughput per GPU."""
    p = kvwire.plan("llama3-8b", {"h100": 4}, workload=WORKLOAD, space={"tp": [1, 2, 4]}, screen_requests=None)
    rows = p.table.filter(kvwire_col_status("verified", "screened")).to_dicts()
    rows = [r for r in rows if r["output_tokens_per_s_per_gpu"] is not None]
    assert p.frontier.height >= 1
    for f in p.frontier.iter_rows(named=True):
        fx, fy = f["output_tokens_per_s_per_gpu"], f["output_tokens_per_s_per_user"]
        for r in rows:
            rx, ry = r["output_tokens_per_s_per_gpu"], r["output_tokens_per_s_per_user"]
            assert not (rx >= fx and ry >= fy and (rx > fx or ry > fy)), (f, r)
    xs = p.frontier["output_tokens_per_s_per_gpu"].to_list()
    assert xs == sorted(xs, reverse=True)


def test_each_frontier_row_has_its_scenario_at_capacity() -> None:
    """``frontier_scenarios[k]`` is frontier row k's configuration at its capacity: run as is, it has the row's
    pools and layouts, its arrival rate is the row's capacity, and it meets the SLO target there (screening is
    exact here, so the run is the one the plan verified); the best's scenario is among them."""
    p = kvwire.plan("llama3-8b", {"h100": 4}, workload=WORKLOAD, space={"tp": [1, 2]}, screen_requests=None)
    assert len(p.frontier_scenarios) == p.frontier.height >= 1
    for row, sc in zip(p.frontier.iter_rows(named=True), p.frontier_scenarios, strict=True):
        assert sc["mode"] == row["mode"]
        pools = ["colocated"] if row["mode"] == "colocated" else ["prefill", "decode"]
        for pool in pools:
            assert sc[pool]["instances"] == row[f"{pool}_instances"]
            assert sc[pool]["parallel"]["tp"] == row[f"{pool}_tp"]
        assert sc["workload"]["arrivals"]["rate_per_s"] == row["capacity_req_per_s"]
        assert kvwire.simulate(sc).summary["slo"]["attainment"] >= 0.9
    assert p.best is not None and p.best["scenario"] in p.frontier_scenarios


def test_a_pipelined_layout_keeps_one_micro_batch_per_stage() -> None:
    """A configuration with PP 2 runs its pipeline as engines do, one group of sequences per stage in flight
    (``micro_batches = pp``); with PP 1 the layout has none."""
    space: dict[str, Any] = {"tp": [1], "mode": ["colocated"]}
    piped = kvwire.plan("llama3-8b", {"h100": 2}, workload=WORKLOAD, space={**space, "pp": [2]})
    assert piped.best is not None
    assert piped.best["scenario"]["colocated"]["parallel"] == {"tp": 1, "pp": 2, "ep": 1, "dp": 1, "micro_batches": 2}
    flat = kvwire.plan("llama3-8b", {"h100": 2}, workload=WORKLOAD, space={**space, "pp": [1]})
    assert flat.best is not None
    assert "micro_batches" not in flat.best["scenario"]["colocated"]["parallel"]


@settings(max_examples=6, deadline=None)
@given(
    budget=st.integers(2, 3),
    modes=st.sampled_from([["disaggregated"], ["colocated"], ["disaggregated", "colocated"]]),
    tps=st.sampled_from([[1], [1, 2]]),
    batches=st.sampled_from([[256], [16, 256]]),
    links=st.sampled_from([["ib-ndr"], ["eth-25g", "ib-ndr"]]),
    seed=st.integers(1, 50),
)
def test_pruning_never_discards_a_better_configuration(
    budget: int, modes: list[str], tps: list[int], batches: list[int], links: list[str], seed: int
) -> None:
    """Over random small spaces, every configuration the ceilings pruned is, by the brute force, no better than
    the plan's best, and the plan's best equals the brute force's best."""
    workload = {"requests": 150, "seed": seed}
    space = {"mode": modes, "tp": tps, "max_decode_batch": batches, "link": links}
    p = kvwire.plan("llama3-8b", {"h100": budget}, workload=workload, space=space, screen_requests=None)
    bf = brute_force("llama3-8b", "h100", budget, modes=modes, tps=tps, batches=batches, links=links, workload=workload)
    values = [r["value"] for r in bf if r["value"] is not None]
    if not values:
        assert p.best is None
        return
    assert p.best is not None
    assert p.best["output_tokens_per_s_per_gpu"] == pytest.approx(max(values), rel=1e-12)
    by_key = {(r["mode"], r["shape"], r["batch"], r["link"]): r["value"] for r in bf}
    for row in p.table.filter(kvwire_col_status("pruned")).iter_rows(named=True):
        value = by_key[(row["mode"], planned_shape(row), row["max_decode_batch"], row["link"])]
        assert value is None or value <= p.best["output_tokens_per_s_per_gpu"] * (1 + 1e-12)


def test_same_plan_on_one_and_two_workers() -> None:
    """The same seed gives the same plan — table, frontier and best — on 1 and on 2 workers (with short
    screening runs and full-length verification)."""
    args: dict[str, Any] = {"workload": {"requests": 300, "seed": 3}, "space": {"tp": [1, 2]}, "screen_requests": 120}
    one = kvwire.plan("llama3-8b", {"h100": 4}, workers=1, **args)
    two = kvwire.plan("llama3-8b", {"h100": 4}, workers=2, **args)
    assert json.dumps(one.to_dict(), sort_keys=True) == json.dumps(two.to_dict(), sort_keys=True)
    assert one.simulations == two.simulations > 0


def test_a_budget_too_small_says_the_smallest_that_holds_the_model() -> None:
    """llama3-70b (141 GB of weights) on one H100 is refused with a DoesNotFitError naming ``gpus`` and the
    smallest budget that holds it: two H100s (TP 2, one colocated instance)."""
    with pytest.raises(kvwire.DoesNotFitError) as e:
        kvwire.plan("llama3-70b", {"h100": 1}, workload={"requests": 100})
    assert e.value.path == "gpus"
    assert e.value.devices_needed == 2
    assert "2 x h100" in str(e.value)
    with pytest.raises(kvwire.DoesNotFitError) as e2:
        kvwire.plan("llama3-70b", {"h100": 3}, workload={"requests": 100}, space={"mode": ["disaggregated"]})
    assert e2.value.devices_needed == 4
    with pytest.raises(kvwire.DoesNotFitError) as e3:
        kvwire.plan("llama3-70b", {"h100": 8}, workload={"requests": 100}, space={"tp": [1]})
    assert e3.value.path == "gpus" and "whatever the budget" in str(e3.value)


def test_min_gpus_finds_the_fewest_gpus_meeting_the_rate() -> None:
    """objective="min_gpus": the plan's GPUs equal the fewest of any configuration whose brute-force capacity
    reaches the target rate, and the best's capacity reaches it."""
    target = 15.0
    p = kvwire.plan(
        "llama3-8b", {"h100": 4}, workload=WORKLOAD, space={"tp": [1]}, objective="min_gpus", rate_per_s=target,
        screen_requests=None,
    )  # fmt: skip
    bf = brute_force(
        "llama3-8b", "h100", 4, modes=["disaggregated", "colocated"], tps=[1], batches=[256], links=["ib-ndr"],
        workload=WORKLOAD,
    )  # fmt: skip
    out_mean = kvwire.ceilings({"model": "llama3-8b", "workload": WORKLOAD})["output_tokens_mean"]
    meeting = [r["gpus"] for r in bf if r["value"] is not None and r["value"] * r["gpus"] / out_mean >= target]
    assert p.best is not None and p.best["gpus"] == min(meeting)
    assert p.best["rate_per_s"] >= target


@pytest.mark.parametrize(
    ("kwargs", "path"),
    [
        ({"gpus": {"h100": 0}}, "gpus"),
        ({"gpus": {"nope": 2}}, "gpus"),
        ({"gpus": {}}, "gpus"),
        ({"gpus": {"h100": 2, "h200": True}}, "gpus"),
        ({"progress": True}, "progress"),
        ({"executor": object()}, "executor"),
        ({"objective": "fastest"}, "objective"),
        ({"objective": "min_gpus"}, "rate_per_s"),
        ({"space": {"colour": ["red"]}}, "space.colour"),
        ({"space": {"tp": []}}, "space.tp"),
        ({"slo": {"attainment": 1.5}}, "slo.attainment"),
        ({"screen_requests": 0}, "screen_requests"),
        ({"slo": {"ttft_s": -1.0}}, "slo.ttft_s"),
        ({"workload": {"requests": -1}}, "workload.requests"),
    ],
)
def test_bad_arguments_name_themselves(kwargs: dict[str, Any], path: str) -> None:
    """Each bad argument is a ScenarioError naming it, before any simulation."""
    args: dict[str, Any] = {"gpus": {"h100": 2}, "workload": {"requests": 50}, **kwargs}
    gpus = args.pop("gpus")
    with pytest.raises(kvwire.ScenarioError) as e:
        kvwire.plan("llama3-8b", gpus, **args)
    assert e.value.path == path


def test_heterogeneous_budget_equals_brute_force_over_both_kinds() -> None:
    """On 2 x H100 + 2 x A100 (TP 1), the plan's best equals a brute force over every colocated pool of one kind
    and every disaggregated pair of kinds (prefill on one, decode on either, each within its own count); the
    table holds exactly those configurations, each naming its pools' devices, and no pool exceeds its kind."""
    budget = {"h100": 2, "a100": 2}
    p = kvwire.plan("llama3-8b", budget, workload=WORKLOAD, space={"tp": [1]}, screen_requests=None)
    out_mean = kvwire.ceilings({"model": "llama3-8b", "workload": WORKLOAD})["output_tokens_mean"]
    expected: dict[tuple[Any, ...], float | None] = {}
    shapes: list[tuple[Any, ...]] = [("colocated", dev, n) for dev in budget for n in range(1, budget[dev] + 1)]
    for dp, dd in itertools.product(budget, budget):
        for np_ in range(1, budget[dp] + 1):
            left = budget[dd] - (np_ if dp == dd else 0)
            shapes += [("disaggregated", dp, np_, dd, nd) for nd in range(1, left + 1)]
    for shape in shapes:
        sc: dict[str, Any] = {"model": "llama3-8b", "mode": shape[0], "workload": WORKLOAD}
        if shape[0] == "colocated":
            sc["colocated"] = {"device": shape[1], "instances": shape[2], "parallel": {"tp": 1}}
            gpus = shape[2]
        else:
            sc["prefill"] = {"device": shape[1], "instances": shape[2], "parallel": {"tp": 1}}
            sc["decode"] = {"device": shape[3], "instances": shape[4], "parallel": {"tp": 1}}
            gpus = shape[2] + shape[4]
        r = kvwire.capacity(sc, slo_attainment=0.9, rel_tol=0.05)
        ceiling = kvwire.ceilings(sc)["ceiling_req_per_s"]
        expected[shape] = None if r.capacity is None else min(float(r.capacity), ceiling) * out_mean / gpus
    assert p.considered == len(shapes) and p.gpus == {"a100": 2, "h100": 2}

    def shape_of(row: dict[str, Any]) -> tuple[Any, ...]:
        if row["mode"] == "colocated":
            return ("colocated", row["colocated_device"], row["colocated_instances"])
        return ("disaggregated", row["prefill_device"], row["prefill_instances"], row["decode_device"],
                row["decode_instances"])  # fmt: skip

    rows = p.table.to_dicts()
    assert {shape_of(r) for r in rows} == set(shapes)
    for r in rows:
        for dev in budget:
            used = sum(r[f"{pool}_instances"] or 0 for pool in ("prefill", "decode", "colocated")
                       if r[f"{pool}_device"] == dev)  # fmt: skip
            assert used <= budget[dev]
    top = max(v for v in expected.values() if v is not None)
    assert p.best is not None
    assert p.best["output_tokens_per_s_per_gpu"] == pytest.approx(top, rel=1e-12)
    best_row = p.table.filter(kvwire_col_status("verified")).sort("output_tokens_per_s_per_gpu").row(-1, named=True)
    assert expected[shape_of(best_row)] == pytest.approx(top, rel=1e-12)
    assert p.report().splitlines()[0].startswith("plan: llama3-8b on 2 x a100 + 2 x h100")


def test_progress_counts_configurations_and_ends_at_the_total() -> None:
    """progress(done, total) is called with a fixed total (the configurations kvwire accepts): first with 0 (before
    any simulation), then after each round, never decreasing, ending at done == total; the plan is the same with
    and without it."""
    calls: list[tuple[int, int]] = []
    space = {"tp": [1, 2]}
    p = kvwire.plan(
        "llama3-8b", {"h100": 4}, workload=WORKLOAD, space=space, progress=lambda d, t: calls.append((d, t))
    )
    q = kvwire.plan("llama3-8b", {"h100": 4}, workload=WORKLOAD, space=space)
    accepted = p.considered - p.refused
    assert calls and {t for _, t in calls} == {accepted}
    assert [d for d, _ in calls] == sorted(d for d, _ in calls) and calls[-1] == (accepted, accepted)
    assert calls[0] == (0, accepted) and len(calls) >= 3
    assert p.table.equals(q.table)


def test_same_plan_on_an_executor_and_cancel_stops_it() -> None:
    """On a caller's executor (here a spawn process pool: nothing shared with the caller; Polars' threads rule
    out fork) the plan equals the threaded one; a cancel set before the first round raises Cancelled."""
    import multiprocessing
    import threading
    from concurrent.futures import ProcessPoolExecutor

    space = {"tp": [1, 2]}
    q = kvwire.plan("llama3-8b", {"h100": 2}, workload=WORKLOAD, space=space)
    with ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("spawn")) as ex:
        p = kvwire.plan("llama3-8b", {"h100": 2}, workload=WORKLOAD, space=space, executor=ex)
        assert p.table.equals(q.table) and p.best == q.best
        stop = threading.Event()
        stop.set()
        with pytest.raises(kvwire.Cancelled):
            kvwire.plan("llama3-8b", {"h100": 2}, workload=WORKLOAD, space=space, executor=ex, cancel=stop)


def test_report_names_the_timing_source_and_launch_settings() -> None:
    """The report says which timing source was used, how many configurations were pruned and simulated, and
    gives vLLM and SGLang flags for the best's TP and batch limit."""
    p = kvwire.plan("llama3-8b", {"h100": 2}, workload={"requests": 150}, space={"tp": [2], "mode": ["colocated"]})
    text = p.report()
    assert "timing roofline" in text and "pruned" in text
    assert "--tensor-parallel-size 2" in text and "--tp-size 2" in text and "--max-num-seqs 256" in text
    assert p.timing == "roofline"


def test_without_pruning_the_best_is_the_same_and_the_frontier_complete() -> None:
    """prune=False evaluates every configuration: the best is the pruned plan's, nothing is pruned, and no
    evaluated row beats a frontier row on both axes."""
    args: dict[str, Any] = {"workload": WORKLOAD, "space": {"tp": [1, 2]}, "screen_requests": None}
    pruned = kvwire.plan("llama3-8b", {"h100": 3}, **args)
    full = kvwire.plan("llama3-8b", {"h100": 3}, prune=False, **args)
    assert pruned.best is not None and full.best is not None
    assert full.best["output_tokens_per_s_per_gpu"] == pytest.approx(pruned.best["output_tokens_per_s_per_gpu"])
    assert full.pruned == 0 and pruned.pruned > 0
    rows = [r for r in full.table.to_dicts() if r["output_tokens_per_s_per_gpu"] is not None]
    for f in full.frontier.iter_rows(named=True):
        fx, fy = f["output_tokens_per_s_per_gpu"], f["output_tokens_per_s_per_user"]
        assert not any(
            r["output_tokens_per_s_per_gpu"] >= fx
            and r["output_tokens_per_s_per_user"] >= fy
            and (r["output_tokens_per_s_per_gpu"] > fx or r["output_tokens_per_s_per_user"] > fy)
            for r in rows
        )


def test_cli_plan_prints_the_report_and_json() -> None:
    """`kvwire plan MODEL --gpus DEVICE=N` prints the report; --json the whole result; a budget too small is an
    error naming gpus and the smallest budget; a malformed --gpus is a usage error; --gpus repeats for several
    kinds."""
    from click.testing import CliRunner
    from kvwire.cli import main

    runner = CliRunner()
    base = ["plan", "llama3-8b", "--gpus", "h100=2", "--set", "workload.requests=150", "--tp", "1"]
    r = runner.invoke(main, base)
    assert r.exit_code == 0, r.output
    assert "best:" in r.output and "vllm serve meta-llama/Meta-Llama-3-8B" in r.output
    j = runner.invoke(main, [*base, "--json", "--slo-ttft", "0.5", "--mode", "colocated"])
    assert j.exit_code == 0, j.output
    out = json.loads(j.output)
    assert out["best"]["scenario"]["slo"]["ttft_s"] == 0.5 and out["best"]["scenario"]["mode"] == "colocated"
    small = runner.invoke(main, ["plan", "llama3-70b", "--gpus", "h100=1", "--set", "workload.requests=50"])
    assert small.exit_code == 1 and "gpus:" in small.output and "2 x h100" in small.output
    bad = runner.invoke(main, ["plan", "llama3-8b", "--gpus", "h100"])
    assert bad.exit_code == 2 and "DEVICE=COUNT" in bad.output
    # Several kinds: --gpus repeated; a kind given twice is a usage error.
    two = runner.invoke(main, [*base[:3], "h100=1", "--gpus", "a100=1", *base[4:], "--json"])
    assert two.exit_code == 0, two.output
    assert json.loads(two.output)["gpus"] == {"a100": 1, "h100": 1}
    twice = runner.invoke(main, [*base[:3], "h100=1", "--gpus", "h100=1"])
    assert twice.exit_code == 2 and "h100 given twice" in twice.output


def test_a_calibrated_timing_source_is_used_and_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With cost.timing a calibrated file (fitted to a slower H100 than the preset), the plan says it used the
    calibrated source, its best scenario carries that timing and runs as is, and its capacity is the one
    kvwire.capacity finds on that scenario with the calibrated timing (lower than the roofline's)."""
    monkeypatch.chdir(tmp_path)
    kvwire.calibrate(synthetic(groups=(("llama3-8b", 1),)), device="h100", folds=0).write("cal.json")
    timing = {"source": "calibrated", "file": "cal.json"}
    args: dict[str, Any] = {"workload": WORKLOAD, "space": {"tp": [1], "mode": ["colocated"]}, "screen_requests": None}
    cal = kvwire.plan("llama3-8b", {"h100": 1}, timing=timing, **args)
    roof = kvwire.plan("llama3-8b", {"h100": 1}, **args)
    assert cal.timing == "calibrated" and roof.timing == "roofline"
    assert "timing calibrated" in cal.report()
    assert cal.best is not None and roof.best is not None
    assert cal.best["scenario"]["cost"]["timing"]["source"] == "calibrated"
    sc = {"model": "llama3-8b", "mode": "colocated", "workload": WORKLOAD, "cost": {"timing": timing},
          "colocated": {"device": "h100", "instances": 1, "parallel": {"tp": 1}}}  # fmt: skip
    r = kvwire.capacity(sc, rel_tol=0.05)
    assert r.capacity is not None
    assert cal.best["rate_per_s"] == pytest.approx(min(float(r.capacity), r.ceilings["ceiling_req_per_s"]))
    assert cal.best["rate_per_s"] < roof.best["rate_per_s"]
    kvwire.simulate(cal.best["scenario"])


def test_a_trace_file_workload_is_planned_at_its_rescaled_rate(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With a trace file as the workload, the plan searches its rate (workload.trace.rate_per_s, arrivals
    rescaled): the best equals a brute force of kvwire.capacity over that field between 1e-3 x and 1 x each
    configuration's ceiling (computed on the trace's requests), and its scenario runs as is at that rate."""
    monkeypatch.chdir(tmp_path)
    rows = ["arrival_s,prompt_tokens,output_tokens"]
    rows += [f"{0.1 * i:.3f},{500 + (i * 337) % 2500},{50 + (i * 71) % 350}" for i in range(200)]
    Path("t.csv").write_text("\n".join(rows) + "\n")
    workload = {"trace": {"file": "t.csv"}}
    p = kvwire.plan("llama3-8b", {"h100": 2}, workload=workload, space={"tp": [1]})
    requests = kvwire.read_trace("t.csv")
    values = []
    for sc in (
        {"mode": "colocated", "colocated": {"device": "h100", "instances": 2, "parallel": {"tp": 1}}},
        {"mode": "colocated", "colocated": {"device": "h100", "instances": 1, "parallel": {"tp": 1}}},
        {"prefill": {"device": "h100", "parallel": {"tp": 1}}, "decode": {"device": "h100", "parallel": {"tp": 1}}},
    ):
        c = kvwire.ceilings({"model": "llama3-8b", **sc}, requests)
        ceiling = c["ceiling_req_per_s"]
        gpus = 2 if sc.get("colocated", {}).get("instances") == 2 or "prefill" in sc else 1
        r = kvwire.capacity(
            {"model": "llama3-8b", "workload": workload, **sc}, field="workload.trace.rate_per_s",
            bounds=(ceiling * 1e-3, ceiling), rel_tol=0.05,
        )  # fmt: skip
        if r.capacity is not None:
            values.append(float(r.capacity) * c["output_tokens_mean"] / gpus)
    assert p.best is not None
    assert p.best["output_tokens_per_s_per_gpu"] == pytest.approx(max(values), rel=1e-12)
    assert p.best["scenario"]["workload"]["trace"]["rate_per_s"] == p.best["rate_per_s"]
    kvwire.simulate(p.best["scenario"])
    with pytest.raises(kvwire.ScenarioError) as e:
        kvwire.plan("llama3-8b", {"h100": 1}, workload={"trace": {"arrival_s": [0.0], "prompt_tokens": [9],
                                                                   "output_tokens": [9]}})  # fmt: skip
    assert e.value.path == "workload.trace"


def test_moe_layouts_spread_the_experts_and_the_best_is_on_the_frontier() -> None:
    """For a mixture of experts (Mixtral-8x7B on 4 H100) the default space has each TP layout also with EP =
    TP; the best is a frontier row (ties on throughput per GPU go to the more tokens/s per user), and the report
    names the fields a space varies in each configuration."""
    p = kvwire.plan("mixtral-8x7b", {"h100": 4}, workload={"requests": 150}, space={"mode": ["colocated"]})
    eps = {(r["colocated_tp"], r["colocated_ep"]) for r in p.table.iter_rows(named=True)}
    assert {(2, 1), (2, 2), (4, 1), (4, 4)} <= eps
    assert p.best is not None
    front = [(r["output_tokens_per_s_per_gpu"], r["output_tokens_per_s_per_user"]) for r in p.frontier.to_dicts()]
    assert (p.best["output_tokens_per_s_per_gpu"], p.best["output_tokens_per_s_per_user"]) in front
    q = kvwire.plan(
        "llama3-8b", {"h100": 1}, workload={"requests": 100}, space={"tp": [1], "max_decode_batch": [32, 256]}
    )
    assert q.varied == ("max_decode_batch",)
    assert q.best is not None and ", batch " in q.best["configuration"]


def test_a_plan_with_out_resumes_and_equals_the_uninterrupted_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``out=DIR``: a plan cancelled after its first round, run again with the same DIR, evaluates only what the
    first run had not finished and gives the uninterrupted plan's table, best and simulation count; a third run
    evaluates nothing; a plan with other arguments is refused at ``out``, and a last line cut short is evaluated
    again."""
    import threading

    from kvwire.planning import plan as plan_module

    args: dict[str, Any] = {"workload": WORKLOAD, "space": {"tp": [1, 2]}, "screen_requests": 100}
    full = kvwire.plan("llama3-8b", {"h100": 4}, **args)
    calls: list[int] = []
    real = plan_module._evaluate

    def counted(*a: Any, **k: Any) -> dict[str, Any]:
        calls.append(1)
        return real(*a, **k)

    monkeypatch.setattr(plan_module, "_evaluate", counted)
    kvwire.plan("llama3-8b", {"h100": 4}, **args)
    n_full = len(calls)  # the evaluations of an uninterrupted plan
    calls.clear()
    stop = threading.Event()

    def stop_after_the_first_round(done: int, total: int) -> None:
        if done > 0:
            stop.set()

    with pytest.raises(kvwire.Cancelled):
        kvwire.plan("llama3-8b", {"h100": 4}, **args, out=tmp_path, progress=stop_after_the_first_round, cancel=stop)
    first = len(calls)
    assert first > 0
    resumed = kvwire.plan("llama3-8b", {"h100": 4}, **args, out=tmp_path)
    second = len(calls) - first
    assert resumed.table.equals(full.table) and resumed.best == full.best
    assert resumed.simulations == full.simulations
    assert 0 < second < n_full <= first + second  # the resumed run did only what was left (and what was cut)
    keys = [json.loads(line)["key"] for line in (tmp_path / "evaluations.jsonl").read_text().splitlines()]
    assert len(keys) == len(set(keys)) == n_full  # each evaluation recorded once
    again = kvwire.plan("llama3-8b", {"h100": 4}, **args, out=tmp_path)
    assert len(calls) == first + second and again.table.equals(full.table)
    with pytest.raises(kvwire.ScenarioError) as e:
        kvwire.plan("llama3-8b", {"h100": 4}, **{**args, "space": {"tp": [1]}}, out=tmp_path)
    assert e.value.path == "out" and "another plan" in str(e.value)
    evals = tmp_path / "evaluations.jsonl"
    lines = evals.read_text().splitlines()
    evals.write_text("\n".join(lines[:-1]) + "\n" + lines[-1][: len(lines[-1]) // 2])  # a crash mid-line
    cut = kvwire.plan("llama3-8b", {"h100": 4}, **args, out=tmp_path)
    assert len(calls) == first + second + 1 and cut.table.equals(full.table)
