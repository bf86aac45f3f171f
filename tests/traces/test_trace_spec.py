"""``workload.trace.file`` in scenarios (kvwire.trace_spec): simulate reads the file with the options and
replays it, the resolved scenario echoes the file form so it reruns the same run, bad fields are named, and
``kvwire run --trace`` takes the same options.
"""

from __future__ import annotations

import json
import os
import typing
from pathlib import Path
from typing import Any

import kvwire
import kvwire.scenario as ks
import polars as pl
import pytest
from click.testing import CliRunner
from kvwire.cli import main
from kvwire.scenario import split_file_trace
from kvwire.traces.formats import FORMATS
from kvwire.traces.spec import OPTIONS, TraceFile
from shared_paths import DATA

CODE = DATA / "azure-llm-2023" / "code.csv"
MC_SYN = DATA / "mooncake" / "synthetic_trace.jsonl"
REQUEST_COLUMNS = ["arrival_s", "prompt_tokens", "output_tokens"]
SHORT = {"start_s": 300.0, "duration_s": 240.0}  # about 500 requests of the code trace


def same_requests(a: pl.DataFrame, b: pl.DataFrame) -> None:
    """Two runs' request tables are equal (every column, every row)."""
    assert a.equals(b)


def test_file_trace_equals_explicit_requests() -> None:
    """simulate with workload.trace.file and options runs exactly the run of simulate(requests=read_trace(...)
    with the same options)."""
    options = {**SHORT, "time_scale": 0.5, "sample": 0.8, "seed": 4}
    res = kvwire.simulate({"link": "eth-25g", "workload": {"trace": {"file": str(CODE), **options}}})
    ref = kvwire.simulate({"link": "eth-25g"}, requests=kvwire.read_trace(CODE, **options))  # type: ignore[arg-type]
    same_requests(res.requests, ref.requests)
    assert 0 < res.requests.height < 600


def test_echo_carries_the_file_form_and_reruns() -> None:
    """res.scenario's workload is the resolved file form (absolute path, detected format, the options), and a
    scenario whose workload is that echo runs the identical requests."""
    sc = {"decode": {"device": "a100"}, "workload": {"trace": {"file": str(CODE), **SHORT, "rate_per_s": 3.0}}}
    res = kvwire.simulate(sc)
    echo = res.scenario["workload"]
    assert echo == {
        "over_context": "warn",
        "trace": {
            "file": os.path.abspath(CODE),
            "format": "azure",
            **SHORT,
            "rate_per_s": 3.0,
            "sample": 1.0,
            "seed": 0,
        },
    }
    json.dumps(res.scenario, allow_nan=False)
    again = kvwire.simulate({**sc, "workload": echo})
    same_requests(again.requests, res.requests)
    assert again.scenario["workload"] == echo
    whole = kvwire.simulate(res.scenario)  # the complete echo reruns the same run
    same_requests(whole.requests, res.requests)
    assert whole.scenario == res.scenario


def test_relative_file_is_relative_to_the_scenario_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """In a TOML scenario file, a relative trace path is relative to the scenario's directory (whatever the
    working directory); in a dict, to the working directory."""
    (tmp_path / "traces").mkdir()
    trace = tmp_path / "traces" / "m.jsonl"
    trace.write_bytes(MC_SYN.read_bytes())
    scenario = tmp_path / "sc.toml"
    scenario.write_text('[workload.trace]\nfile = "traces/m.jsonl"\nduration_s = 120.0\n')
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    res = kvwire.simulate(scenario)
    assert res.scenario["workload"]["trace"]["file"] == str(trace)
    assert res.requests.height == kvwire.read_trace(trace, duration_s=120.0).height
    monkeypatch.chdir(tmp_path)
    assert kvwire.simulate({"workload": {"trace": {"file": "traces/m.jsonl", "duration_s": 120.0}}}).requests.equals(
        res.requests
    )


@pytest.mark.parametrize(
    ("trace", "path"),
    [
        ({"file": "x.csv", "zz_bogus": 1}, "workload.trace.zz_bogus"),
        ({"file": 3}, "workload.trace.file"),
        ({"file": ""}, "workload.trace.file"),
        ({"file": "x.csv", "format": "splitwise"}, "workload.trace.format"),
        ({"file": "x.csv", "start_s": -1}, "workload.trace.start_s"),
        ({"file": "x.csv", "duration_s": 0}, "workload.trace.duration_s"),
        ({"file": "x.csv", "time_scale": "fast"}, "workload.trace.time_scale"),
        ({"file": "x.csv", "rate_per_s": 2.0, "time_scale": 0.5}, "workload.trace.rate_per_s"),
        ({"file": "x.csv", "sample": 1.5}, "workload.trace.sample"),
        ({"file": "x.csv", "seed": -3}, "workload.trace.seed"),
        ({"file": "x.csv", "keep_failed": "yes"}, "workload.trace.keep_failed"),
        ({"file": "x.csv", "model": []}, "workload.trace.model"),
        ({"file": "x.csv", "arrival_s": [0.0]}, "workload.trace.arrival_s"),
    ],
)
def test_bad_trace_fields_are_named(trace: dict[str, Any], path: str) -> None:
    """A bad field of the file form is a ScenarioError naming it, from simulate and from validate."""
    for call in (kvwire.simulate, kvwire.validate):
        with pytest.raises(kvwire.ScenarioError) as info:
            call({"workload": {"trace": trace}})
        assert info.value.path == path, str(info.value)


def test_generator_fields_and_requests_conflict() -> None:
    """A trace file with generator fields, or with requests= as well, is refused naming the field."""
    with pytest.raises(kvwire.ScenarioError) as info:
        kvwire.simulate({"workload": {"requests": 10, "trace": {"file": str(CODE)}}})
    assert info.value.path == "workload.requests"
    with pytest.raises(kvwire.ScenarioError) as info:
        kvwire.simulate({"workload": {"trace": {"file": str(CODE)}}}, requests=kvwire.read_trace(CODE))
    assert info.value.path == "workload.trace"


def test_file_problems_name_the_file(tmp_path: Path) -> None:
    """A missing file, a BurstGPT filter on an Azure trace, and options that leave no requests are refused by
    simulate (and the first two by validate, which does not read the requests)."""
    missing = {"workload": {"trace": {"file": str(tmp_path / "none.csv")}}}
    for call in (kvwire.simulate, kvwire.validate):
        with pytest.raises(kvwire.TraceFileError, match=r"none\.csv"):
            call(missing)
        with pytest.raises(kvwire.ScenarioError) as info:
            call({"workload": {"trace": {"file": str(CODE), "model": "GPT-4"}}})
        assert info.value.path == "workload.trace.model"
    with pytest.raises(kvwire.ScenarioError) as info:
        kvwire.simulate({"workload": {"trace": {"file": str(CODE), "start_s": 1e6}}})
    assert info.value.path == "workload.trace.start_s" and "no requests" in str(info.value)
    with pytest.raises(kvwire.ScenarioError) as info:
        kvwire.simulate({"workload": {"trace": {"file": str(CODE), "duration_s": 1e-9, "rate_per_s": 1.0}}})
    assert info.value.path == "workload.trace.rate_per_s"


def test_bad_row_deep_in_the_file_comes_from_simulate(tmp_path: Path) -> None:
    """A bad row is a TraceFileError from simulate naming the line (validate checks only the format)."""
    p = tmp_path / "t.csv"
    p.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n2024-05-10 00:00:00,5,1\n2024-05-10 00:00:01,-5,1\n")
    kvwire.validate({"workload": {"trace": {"file": str(p)}}})
    with pytest.raises(kvwire.TraceFileError) as info:
        kvwire.simulate({"workload": {"trace": {"file": str(p)}}})
    assert (info.value.line, info.value.column) == (3, "ContextTokens")


def test_inline_traces_still_reach_the_core() -> None:
    """The inline form (columns) is untouched by the file handling: split_file_trace leaves it to the core."""
    inline = {"workload": {"trace": {"arrival_s": [0.0, 1.0], "prompt_tokens": [5, 6], "output_tokens": [1, 2]}}}
    assert split_file_trace(inline) == (inline, None)
    assert kvwire.simulate(inline).requests.height == 2


def test_trace_file_dict_matches_the_parser() -> None:
    """TraceFileDict (the type of the file form) declares exactly the keys the parser accepts, ``file``
    required, and its format Literal lists exactly auto and the readers' formats."""
    hints = typing.get_type_hints(ks.TraceFileDict)
    assert set(hints) == set(OPTIONS)
    assert ks.TraceFileDict.__required_keys__ == frozenset({"file"})
    assert set(typing.get_args(hints["format"])) == {"auto", *FORMATS}
    trace_ann = typing.get_type_hints(ks.WorkloadDict)["trace"]
    assert set(typing.get_args(trace_ann)) == {ks.TraceDict, ks.TraceFileDict}


def test_to_dict_round_trips() -> None:
    """The echo of a parsed file form parses back to the same spec (with the format resolved)."""
    spec = TraceFile.from_dict({"file": str(CODE), "start_s": 10, "sample": 0.5, "seed": 2})
    again = TraceFile.from_dict(spec.to_dict())
    assert again == TraceFile(**{**spec.__dict__, "format": "azure"})


# --------------------------------------------------------------------------------------------------
# kvwire run --trace FILE with the reader options


def cli(*args: str) -> Any:
    return CliRunner().invoke(main, list(args))


def test_run_trace_options() -> None:
    """``kvwire run --trace FILE --start-s --duration-s --time-scale --sample --seed --json`` replays the same
    requests as read_trace with those options, and the JSON scenario carries the file form."""
    r = cli(
        "run", "--trace", str(CODE), "--start-s", "300", "--duration-s", "240", "--time-scale", "0.5",
        "--sample", "0.5", "--seed", "3", "--json",
    )  # fmt: skip
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    expected = kvwire.read_trace(CODE, start_s=300, duration_s=240, time_scale=0.5, sample=0.5, seed=3)
    assert out["summary"]["requests"]["total"] == expected.height
    assert out["scenario"]["workload"]["trace"] == {
        "file": os.path.abspath(CODE), "format": "azure", "start_s": 300.0, "duration_s": 240.0, "time_scale": 0.5,
        "sample": 0.5, "seed": 3,
    }  # fmt: skip


def test_run_trace_rate_and_format(tmp_path: Path) -> None:
    """``--rate`` and ``--trace-format`` reach the scenario; BurstGPT filters too."""
    p = tmp_path / "b.csv"
    rows = [f"{5 * i},{'GPT-4' if i % 2 else 'ChatGPT'},{100 + i},{i % 4},{100 + i + i % 4},API log" for i in range(40)]
    p.write_text("Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n" + "\n".join(rows) + "\n")
    r = cli("run", "--trace", str(p), "--trace-format", "burstgpt", "--trace-model", "GPT-4", "--keep-failed",
            "--rate", "2", "--json")  # fmt: skip
    assert r.exit_code == 0, r.output
    trace = json.loads(r.stdout)["scenario"]["workload"]["trace"]
    assert (trace["format"], trace["model"], trace["keep_failed"], trace["rate_per_s"]) == (
        "burstgpt",
        ["GPT-4"],
        True,
        2.0,
    )
    assert json.loads(r.stdout)["summary"]["requests"]["total"] == 20


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--sample", "0.5"], "--trace"),
        (["--trace", str(CODE), "--sample", "2"], "workload.trace.sample"),
        (["--trace", str(CODE), "--time-scale", "2", "--rate", "3"], "workload.trace.rate_per_s"),
        (["--trace", str(CODE), "--trace-model", "GPT-4"], "workload.trace.model"),
    ],
)
def test_run_trace_option_errors(args: list[str], needle: str) -> None:
    """Trace options without --trace, or bad values, fail with one clean line naming the option or field."""
    r = cli("run", *args)
    assert r.exit_code != 0 and isinstance(r.exception, SystemExit)
    assert needle in r.output and "Traceback" not in r.output


def test_echo_into_keeps_other_workload_keys() -> None:
    """echo_into replaces what the core said about the table (inline columns, a row count, the ``external``
    marker) with the file form and keeps the workload's other keys (e.g. an over-context policy)."""
    spec = TraceFile.from_dict({"file": str(CODE)})
    core_echo = {"link": "ib-ndr", "workload": {"external": True, "trace_rows": 5, "over_context": "warn"}}
    assert spec.echo_into(core_echo) == {
        "link": "ib-ndr",
        "workload": {"over_context": "warn", "trace": {"file": os.path.abspath(CODE), "format": "azure",
                                                       "start_s": 0.0, "time_scale": 1.0, "sample": 1.0, "seed": 0}},
    }  # fmt: skip
