"""The scenario echo (issue 9 item 5): ``res.scenario`` and ``kvwire run --json``'s ``scenario`` are the complete
resolved scenario in the input schema, and running the echo reproduces the run exactly — over random scenarios
(Hypothesis), through JSON and TOML files, and with a request table passed beside the scenario."""

from __future__ import annotations

import copy
import json
import math
import tomllib
from pathlib import Path
from typing import Any

import kvwire
import polars as pl
import pytest
from click.testing import CliRunner
from hypothesis import assume, given
from hypothesis import strategies as st
from kvwire.cli import main
from kvwire.scenario import to_toml
from test_properties import SETTINGS, scenarios

SECTIONS = {"model", "mode", "handoff", "workload", "slo", "metrics", "cost", "scheduler", "router", "engine"}


def same_run(a: kvwire.SimResult, b: kvwire.SimResult) -> None:
    """Identical per-request tables, core totals and summaries (wall-clock time aside)."""
    assert a.requests.equals(b.requests, null_equal=True)
    sa, sb = copy.deepcopy(a.summary), copy.deepcopy(b.summary)
    for s in (sa, sb):
        s["run"].pop("wall_s")
    assert sa == sb
    assert {k: v for k, v in a.stats.items() if k != "wall_s"} == {k: v for k, v in b.stats.items() if k != "wall_s"}
    assert a.scenario == b.scenario


def test_the_issue_reproducer_runs_again() -> None:
    """``kvwire.simulate(res.scenario)`` failed with ``model_spec: unknown field``; now it gives the same run."""
    res = kvwire.simulate({"workload": {"requests": 100}})
    same_run(res, kvwire.simulate(res.scenario))


def test_echo_is_complete() -> None:
    """The fields the old echo dropped are there: router, handoff.compress_at / decompress_at / streaming,
    engine.per_slice_streaming, link.model, prefill/decode kv_format; presets are expanded with their key."""
    sc = kvwire.simulate(
        {
            "link": {"preset": "eth-25g", "model": "shared", "channels": 2},
            "handoff": {"compression": "fp8", "compress_at": "sender", "decompress_at": "receiver"},
            "router": {"prefill": "round_robin"},
            "workload": {"requests": 20},
        }
    ).scenario
    assert set(sc) >= SECTIONS | {"prefill", "decode", "link"}
    assert sc["handoff"] == {
        "compression": "fp8_e4m3",
        "compress_at": "sender",
        "decompress_at": "receiver",
        "streaming": "whole",
        "skip_cached_prefix": False,
    }
    assert sc["router"]["prefill"] == "round_robin" and sc["router"]["disaggregate"]["policy"] == "always"
    assert sc["engine"] == {
        "macro_steps": True,
        "per_slice_streaming": False,
        "max_steps": 10**10,
        "timeline": False,
        "timeline_max_spans": 2_000_000,
    }
    assert sc["link"]["preset"] == "eth-25g" and sc["link"]["model"] == "shared" and sc["link"]["channels"] == 2
    assert sc["link"]["bandwidth_gb_per_s"] == 3.125
    assert sc["model"]["preset"] == "llama3-8b" and sc["model"]["layers"] == 32
    assert sc["decode"]["device"]["preset"] == "h100" and sc["decode"]["device"]["hbm_gb"] == 80.0


def test_echo_with_a_request_table_needs_the_table_again() -> None:
    """A run given ``requests=``: its echo says ``workload.external`` (not a silent default workload);
    ``simulate(res.scenario, requests=same)`` reproduces the run, without the table it is a clear error."""
    table = pl.DataFrame({"arrival_s": [0.0, 0.5, 0.5], "prompt_tokens": [100, 2000, 7], "output_tokens": [0, 1, 40]})
    res = kvwire.simulate({"link": "eth-25g"}, requests=table)
    assert res.scenario["workload"] == {"external": True, "over_context": "warn"}
    same_run(res, kvwire.simulate(res.scenario, requests=table))
    with pytest.raises(kvwire.ScenarioError) as e:
        kvwire.simulate(res.scenario)
    assert e.value.path == "workload.external"
    assert "pass the table again" in str(e.value)


def test_cli_json_echo_runs_again(tmp_path: Path) -> None:
    """``kvwire run --json``'s ``scenario``, saved as JSON and as TOML, runs to the same summary."""
    r = CliRunner().invoke(main, ["run", "--json", "--set", "workload.requests=50", "--set", "link=eth-25g"])
    assert r.exit_code == 0, r.output
    first = json.loads(r.stdout)
    first["summary"]["run"].pop("wall_s")
    for name, text in [("echo.json", json.dumps(first["scenario"])), ("echo.toml", to_toml(first["scenario"]))]:
        f = tmp_path / name
        f.write_text(text, encoding="utf-8")
        again = CliRunner().invoke(main, ["run", "--json", str(f)])
        assert again.exit_code == 0, again.output
        out = json.loads(again.stdout)
        out["summary"]["run"].pop("wall_s")
        assert out["summary"] == first["summary"], name
        assert out["scenario"] == first["scenario"], name


def test_toml_writer_drops_nulls_and_round_trips() -> None:
    """The hand-written TOML writer broke on nulls (``x = null`` is not TOML); ``to_toml`` (tomli-w) leaves a
    null out — a null field means its default — and writes what ``tomllib`` reads back."""
    sc = {"prefill": {"device": "h100", "power_cap_w": None}, "router": {"disaggregate": {"max_link_wait_s": None}}}
    assert tomllib.loads(to_toml(sc)) == {"prefill": {"device": "h100"}, "router": {"disaggregate": {}}}
    echo = kvwire.simulate({"workload": {"requests": 10}}).scenario
    assert tomllib.loads(to_toml(echo)) == echo
    with pytest.raises(kvwire.ScenarioError) as e:
        to_toml({"slo": {"ttft_s": math.inf}})
    assert e.value.path == "slo.ttft_s"


# --------------------------------------------------------------------------------------------------
# Hypothesis: random scenarios, with the hand-off and routing features the base strategy leaves out.


@st.composite
def rich_scenarios(draw: st.DrawFn) -> tuple[dict[str, Any], pl.DataFrame | None]:
    sc, requests = draw(scenarios(max_requests=40))
    if sc["mode"] == "disaggregated":
        h = sc["handoff"]
        if h["compression"] != "none":
            h["compress_at"] = draw(st.sampled_from(["transit", "sender"]))
            h["decompress_at"] = draw(st.sampled_from(["none", "receiver"]))
        link_model = draw(st.sampled_from(["fcfs", "fcfs", "shared", "host_staged"]))
        sc["link"]["model"] = link_model
        if link_model == "fcfs":
            h["streaming"] = draw(st.sampled_from(["whole", "layer"]))
            sc["engine"]["per_slice_streaming"] = draw(st.booleans())
        if draw(st.booleans()):
            at = (
                "host"
                if link_model == "host_staged" and draw(st.booleans())
                else draw(st.sampled_from(["sender", "receiver"]))
            )
            h["convert"] = {"from": "vllm_nhd", "to": draw(st.sampled_from(["sglang", "vllm_hnd"])), "at": at}
        if draw(st.booleans()):
            sc["router"]["disaggregate"] = {
                "policy": "conditional",
                "min_prompt_tokens": draw(st.integers(0, 3000)),
                "min_output_tokens": draw(st.integers(0, 5)),
            }
            if draw(st.booleans()):
                sc["router"]["disaggregate"]["max_link_wait_s"] = draw(st.floats(0.0, 2.0))
        if draw(st.booleans()):
            sc["link"]["latency_us"] = draw(st.floats(0.0, 100.0))
    if draw(st.booleans()):
        sc["model"] = {"preset": sc["model"], "kv_bytes_per_value": draw(st.sampled_from([1.0, 2.0]))}
    if draw(st.booleans()):
        sc["slo"] = {"ttft_s": draw(st.floats(0.01, 5.0)), "tpot_s": draw(st.floats(0.001, 0.1))}
    try:
        kvwire.validate(sc) if requests is None else kvwire.simulate(sc, requests=requests)
    except kvwire.ScenarioError:
        assume(False)
    return sc, requests


@SETTINGS
@given(rich_scenarios())
def test_echo_reproduces_every_run(case: tuple[dict[str, Any], pl.DataFrame | None]) -> None:
    """For random scenarios, ``simulate(res.scenario)`` (``requests=`` the same table when one was passed)
    reproduces the run exactly, and so does the echo written to TOML and read back."""
    sc, requests = case
    res = kvwire.simulate(copy.deepcopy(sc), requests=requests)
    same_run(res, kvwire.simulate(res.scenario, requests=requests))
    same_run(res, kvwire.simulate(tomllib.loads(to_toml(res.scenario)), requests=requests))
