"""Issue 23's results and reports: every summary number finite or ``None`` and every JSON strict; a run whose
every request is refused says so instead of calling itself overloaded; the timeline and ``out=`` fail with a
kvwire error naming the argument and leave nothing behind (a full disk is real here: ``/dev/full``); the report's
words (durations, occupancy above 100%, contexts, the does-not-fit advice); and the TTFT that shows the
hand-off by default. Each test is a reproduction from the issue and failed before its fix."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import kvwire
import polars as pl
import pytest
from click.testing import CliRunner
from kvwire.cli import main
from kvwire.results.report import render
from kvwire.results.timeline import trace_dict

#: The issue's reproduction: two arrivals 2.2e-308 s apart make the offered rate 4.5e307 req/s and its ratio
#: to the prefill ceiling overflow to inf (``load.load_factor.prefill``).
SUBNORMAL = {
    "link": "nvlink4",
    "metrics": {"warmup_fraction": 0.0},
    "workload": {
        "trace": {"arrival_s": [0.0, 2.2250738585072014e-308], "prompt_tokens": [1, 426788], "output_tokens": [0, 0]}
    },
}

#: Every request larger than the decode pool's KV capacity: all refused at arrival.
ALL_REJECTED = {
    "workload": {"trace": {"arrival_s": [0.0, 1.0, 2.0], "prompt_tokens": [10**7] * 3, "output_tokens": [5] * 3}}
}


def strict(text: str) -> Any:
    """``json.loads`` that refuses ``Infinity``, ``-Infinity`` and ``NaN`` (RFC 8259 JSON only)."""

    def refuse(token: str) -> None:
        raise ValueError(f"not strict JSON: {token}")

    return json.loads(text, parse_constant=refuse)


def numbers(value: Any) -> list[float]:
    """Every float in a nested dict/list."""
    if isinstance(value, float):
        return [value]
    if isinstance(value, dict):
        return [x for v in value.values() for x in numbers(v)]
    if isinstance(value, list):
        return [x for v in value for x in numbers(v)]
    return []


def test_strict_parser_refuses_infinity() -> None:
    """The oracle itself: the parser used below does refuse what ``json.dumps`` writes for inf and NaN."""
    for bad in (float("inf"), float("nan")):
        with pytest.raises(ValueError, match="not strict JSON"):
            strict(json.dumps({"x": bad}))


def test_summary_is_finite_with_an_overflowing_ratio() -> None:
    """The overflowing load factor is ``None``, not inf; every number of the summary is finite; the summary
    passes the strict parser; the offered rate itself (finite) is kept."""
    res = kvwire.simulate(SUBNORMAL)
    s = res.summary
    assert s["load"]["load_factor"]["prefill"] is None
    assert s["load"]["offered_req_per_s"] > 1e307
    assert all(x == x and abs(x) != float("inf") for x in numbers(s))
    strict(json.dumps(s))


def test_report_of_an_overflowing_ratio() -> None:
    """The report prints no ``inf%`` and no 300-digit rate (three significant digits beyond ten million)."""
    text = render(kvwire.simulate(SUBNORMAL))
    assert "inf" not in text.lower()
    assert "4.49e+307 req/s offered" in text
    assert max(len(w) for w in text.split()) < 40


def test_cli_json_is_strict(tmp_path: Path) -> None:
    """``kvwire run --json`` wrote ``Infinity`` (invalid JSON); now strict JSON with ``null``."""
    f = tmp_path / "sub.json"
    f.write_text(json.dumps(SUBNORMAL))
    r = CliRunner().invoke(main, ["run", str(f), "--json"])
    assert r.exit_code == 0, r.output
    out = strict(r.stdout)
    assert out["summary"]["load"]["load_factor"]["prefill"] is None


def test_all_rejected_says_what_happened() -> None:
    """Every request refused at arrival: ``load`` reported finite ceilings and "overloaded ... its queue grows";
    now not overloaded, ``all_rejected``, no load factors, and a note saying nothing was served (also in the
    report)."""
    res = kvwire.simulate(ALL_REJECTED)
    assert res.summary["requests"]["rejected"] == 3
    load = res.summary["load"]
    assert (load["overloaded"], load["all_rejected"], load["load_factor"]) == (False, True, None)
    assert load["overload_note"].startswith("nothing was served: every request was rejected at arrival")
    assert "queue grows" not in load["overload_note"]
    assert load["overload_note"] in render(res)
    served = kvwire.simulate({"workload": {"requests": 50}}).summary["load"]
    assert served["all_rejected"] is False


# --------------------------------------------------------------------------------------------------
# The timeline and out=: errors that name the argument, nothing left behind


def timeline_run() -> kvwire.SimResult:
    return kvwire.simulate({"workload": {"requests": 30}, "engine": {"timeline": True}})


@pytest.mark.parametrize("bad", [5, 3.5, b"x.json", ""])
def test_timeline_path_of_the_wrong_type(bad: Any) -> None:
    """``res.timeline(5)`` raised a raw TypeError from pathlib; now a ScenarioError naming ``path``."""
    with pytest.raises(kvwire.ScenarioError, match="path must be a file path") as e:
        timeline_run().timeline(bad)
    assert e.value.path == "path"


def test_timeline_to_a_missing_folder(tmp_path: Path) -> None:
    """A path in a folder that does not exist raised FileNotFoundError; now a ScenarioError naming ``path``."""
    with pytest.raises(kvwire.ScenarioError, match="cannot write") as e:
        timeline_run().timeline(tmp_path / "no" / "such" / "t.json")
    assert e.value.path == "path"


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs Linux's /dev/full")
def test_timeline_on_a_full_disk_leaves_nothing(tmp_path: Path) -> None:
    """A full disk (the temporary file is a link to ``/dev/full``, which answers every write with ENOSPC) raised
    OSError and left ``t.json.part`` behind; now a ScenarioError, no partial file, no output file."""
    (tmp_path / "t.json.part").symlink_to("/dev/full")
    with pytest.raises(kvwire.ScenarioError, match="No space left on device"):
        timeline_run().timeline(tmp_path / "t.json")
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_timeline_dict_beyond_memory() -> None:
    """The trace as a dict is refused when it would not fit the memory available (here: 1 MB for 60 events
    of about 1 kB each is enough; 10 kB is not), with a ResourceError saying to write it to a file."""
    res = timeline_run()
    spans, stats = res._timeline, res.stats
    assert spans is not None
    assert trace_dict(spans, stats, available=10**6)["traceEvents"]
    with pytest.raises(kvwire.ResourceError, match=r"res\.timeline\(PATH\)"):
        trace_dict(spans, stats, available=10_000)


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs Linux's /dev/full")
@pytest.mark.parametrize("name", ["r.parquet", "r.csv"])
def test_out_on_a_full_disk(tmp_path: Path, name: str) -> None:
    """``simulate(..., keep_requests=True, out=<full disk>)`` raised Polars' ComputeError (Parquet) or OSError
    (CSV); now a ScenarioError naming ``out``, and neither the partial nor the output file is left."""
    (tmp_path / f".{name}.tmp").symlink_to("/dev/full")
    with pytest.raises(kvwire.ScenarioError, match="out: cannot write") as e:
        kvwire.simulate({"workload": {"requests": 2000}}, keep_requests=True, out=tmp_path / name)
    assert e.value.path == "out"
    assert sorted(p.name for p in tmp_path.iterdir()) == []


# --------------------------------------------------------------------------------------------------
# Words


def test_does_not_fit_names_the_fields_to_set() -> None:
    """The does-not-fit error gives the ``--set`` fields to change (``<pool>.devices_per_instance``, the
    device) for the pool that does not fit."""
    with pytest.raises(kvwire.DoesNotFitError) as e:
        kvwire.validate(
            {"model": "llama3-70b", "prefill": {"devices_per_instance": 2}, "decode": {"device": "a100-40g"}}
        )
    text = str(e.value)
    assert "--set decode.devices_per_instance=4" in text and "decode.device" in text


def test_prefill_occupancy_above_100_is_explained() -> None:
    """A prompt longer than the step budget runs alone: occupancy above 100% now says why."""
    res = kvwire.simulate(
        {"workload": {"trace": {"arrival_s": [0.0], "prompt_tokens": [20_000], "output_tokens": [4]}}}
    )
    line = next(x for x in render(res).splitlines() if x.startswith("occupancy:"))
    assert "over 100%: prompts longer than the budget ran alone" in line


def test_many_over_context_suggests_a_longer_context_model() -> None:
    """Many requests over Llama-3-8B's 8,192 tokens: the report names catalogue models with a longer context."""
    res = kvwire.simulate(
        {"workload": {"trace": {"arrival_s": [0.0, 1.0], "prompt_tokens": [9000, 100], "output_tokens": [4, 4]}}}
    )
    line = next(x for x in render(res).splitlines() if x.startswith("context:"))
    assert "a longer-context model fits more of them" in line and "131,072 tokens" in line


def test_hot_spot_of_a_long_replay_in_seconds() -> None:
    """A hot spot of minutes is printed in seconds, not as "1,448,804.6 ms"."""
    arrivals = [0.0] * 40
    res = kvwire.simulate(
        {
            "workload": {"trace": {"arrival_s": arrivals, "prompt_tokens": [8000] * 40, "output_tokens": [2000] * 40}},
            "decode": {"instances": 1},
            "scheduler": {"max_decode_batch": 1},
        }
    )
    line = next(x for x in render(res).splitlines() if x.startswith("hot-spot:"))
    assert " s)" in line and " ms)" not in line, line


def test_run_output_says_what_it_wrote(tmp_path: Path) -> None:
    """``kvwire run -o`` and ``--timeline`` say on stderr what they wrote (stdout stays the report)."""
    f, t = tmp_path / "r.parquet", tmp_path / "t.json"
    r = CliRunner().invoke(main, ["run", "--set", "workload.requests=40", "-o", str(f), "--timeline", str(t)])
    assert r.exit_code == 0, r.output
    assert f"wrote 40 request rows to {f}" in r.stderr
    assert f"wrote the timeline to {t}" in r.stderr
    assert pl.read_parquet(f).height == 40 and strict(t.read_text())["traceEvents"]


# --------------------------------------------------------------------------------------------------
# The TTFT that shows the hand-off (item 5)


def link_sweep(first_token: str | None) -> dict[str, float]:
    """TTFT p99 per link of the README's link sweep (examples/sweep_links.toml) at 8 req/s, 600 requests."""
    base: dict[str, Any] = {"workload": {"requests": 600, "arrivals": {"rate_per_s": 8.0}}}
    if first_token is not None:
        base["metrics"] = {"first_token": first_token}
    return {
        link: kvwire.simulate({**base, "link": link}).summary["latency"]["ttft_s"]["p99"]
        for link in ("nvlink4", "ib-ndr", "eth-100g", "eth-25g")
    }


def test_default_ttft_grows_from_nvlink_to_25gbe() -> None:
    """By default TTFT ends when the decode side has the KV: on a link sweep its p99 grows from NVLink to
    25 GbE (before, it was identical on every link); with the reference's rule ("prefill") it is still
    identical on every link, as before. The default is what the echo says."""
    default = link_sweep(None)
    order = list(default.values())
    assert order == sorted(order) and order[-1] > order[0] * 1.05, default
    reference = link_sweep("prefill")
    assert len(set(reference.values())) == 1, reference
    assert kvwire.simulate({"workload": {"requests": 5}}).scenario["metrics"]["first_token"] == "decode"
