"""The ``kvwire`` command line (README "Quick start", spec/interface.md: one scenario schema for the API, the
CLI and files; one summary shape back).

Most tests drive the click group in-process with ``CliRunner``; two run the installed ``kvwire`` entry point
as a real subprocess.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import kvwire
import pytest
from click.testing import CliRunner, Result
from kvwire.cli import main
from shared_paths import DATA

AZURE_HEADER = "TIMESTAMP,ContextTokens,GeneratedTokens\n"
CODE_CSV = DATA / "azure-llm-2023" / "code.csv"
SMALL = ["--set", "workload.requests=60"]


def run(*args: str) -> Result:
    """Invoke the CLI in-process (stdout and stderr kept apart)."""
    return CliRunner().invoke(main, list(args))


def strict_json(text: str) -> Any:
    """Parse JSON refusing NaN/Infinity."""

    def bad(name: str) -> Any:
        raise ValueError(f"non-finite number {name} in JSON output")

    return json.loads(text, parse_constant=bad)


def without_wall(summary: dict[str, Any]) -> dict[str, Any]:
    """A JSON copy of a summary without its wall-clock time."""
    out: dict[str, Any] = json.loads(json.dumps(summary))
    del out["run"]["wall_s"]
    return out


def assert_clean_failure(result: Result, *needles: str) -> None:
    """The command failed with a one-line error (non-zero exit, click's SystemExit, no traceback) that
    contains every needle."""
    assert result.exit_code != 0
    assert isinstance(result.exception, SystemExit), repr(result.exception)
    assert "Traceback" not in result.output
    for n in needles:
        assert n in result.output, (n, result.output)


# --------------------------------------------------------------------------------------------------
# kvwire run


def test_run_without_file_prints_the_report() -> None:
    """``kvwire run`` with no file runs the built-in default and prints the report: latency table with every
    metric, which TTFT definition is in use, SLO line, throughput, utilisation of every resource, occupancy,
    load against the ceilings, energy, power and hot-spot lines."""
    r = run("run")
    assert r.exit_code == 0, r.output
    out = r.stdout
    assert "latency (ms)" in out
    for metric in ("ttft", "tpot", "itl", "e2e", "handoff"):
        assert f"\n  {metric} " in out, metric
    for col in ("mean", "p50", "p90", "p95", "p99", "p99.9", "max"):
        assert col in out
    for line in ("SLO (", "throughput:", "utilisation (busy", "occupancy:", "load (offered / ceiling):", "energy:",
                 "hot-spot:", "kv link:", "ttft ends when the decode side has the KV"):  # fmt: skip
        assert line in out, line
    for res in ("prefill-0", "decode-0", "kv-link"):
        assert res in out
    assert "800" in out  # the default workload's request count
    assert "Traceback" not in r.output


def test_run_json_gives_the_summary() -> None:
    """``--json`` prints strict JSON whose summary equals the API's summary for the same scenario."""
    r = run("run", "--json", *SMALL)
    assert r.exit_code == 0, r.output
    doc = strict_json(r.stdout)
    expected = kvwire.simulate({"workload": {"requests": 60}}).summary
    assert without_wall(doc["summary"]) == without_wall(expected)
    for key in ("requests", "latency", "slo", "throughput", "utilisation", "energy", "hotspot", "run"):
        assert key in doc["summary"]


def test_set_overrides_fields() -> None:
    """``--set workload.requests=100`` changes the request count; several --set combine, with values parsed
    as JSON numbers or taken as strings (README's congested-link example)."""
    r = run("run", "--json", "--set", "workload.requests=100")
    assert r.exit_code == 0, r.output
    assert strict_json(r.stdout)["summary"]["requests"]["total"] == 100
    r = run(
        "run", "--json", "--set", "link=eth-25g", "--set", "workload.arrivals.rate_per_s=14",
        "--set", "handoff.compression=fp8", "--set", "workload.requests=80",
    )  # fmt: skip
    assert r.exit_code == 0, r.output
    sc = {"link": "eth-25g", "handoff": {"compression": "fp8"},
          "workload": {"requests": 80, "arrivals": {"rate_per_s": 14}}}  # fmt: skip
    assert without_wall(strict_json(r.stdout)["summary"]) == without_wall(kvwire.simulate(sc).summary)


@pytest.mark.parametrize("assignment", ["link.channels=2", "workload.prompt_tokens.mean=1000"])
def test_set_one_field_of_a_default_object(assignment: str) -> None:
    """``--set`` of one field inside a default object (README lists link {"preset": "ib-ndr", "channels": 1})
    keeps the object's other defaults."""
    r = run("run", "--json", *SMALL, "--set", assignment)
    assert r.exit_code == 0, r.output


def test_run_scenario_file_json_and_toml(tmp_path: Path) -> None:
    """``kvwire run FILE`` reads .json and .toml scenario files, and ``--set`` applies on top of the file."""
    pj = tmp_path / "s.json"
    pj.write_text(json.dumps({"workload": {"requests": 40, "seed": 5}, "link": "pcie5"}))
    pt = tmp_path / "s.toml"
    pt.write_text('link = "pcie5"\n\n[workload]\nrequests = 40\nseed = 5\n')
    ref = without_wall(kvwire.simulate({"workload": {"requests": 40, "seed": 5}, "link": "pcie5"}).summary)
    for p in (pj, pt):
        r = run("run", str(p), "--json")
        assert r.exit_code == 0, r.output
        assert without_wall(strict_json(r.stdout)["summary"]) == ref
    r = run("run", str(pj), "--json", "--set", "workload.requests=30")
    assert strict_json(r.stdout)["summary"]["requests"]["total"] == 30


# --------------------------------------------------------------------------------------------------
# Failures: non-zero exit, the field path, no traceback


def test_missing_scenario_file(tmp_path: Path) -> None:
    """A scenario file that does not exist fails cleanly and names the file."""
    missing = tmp_path / "nope.json"
    assert_clean_failure(run("run", str(missing)), str(missing))


@pytest.mark.parametrize(
    ("name", "text", "needle"),
    [
        ("bad.json", '{"workload": {"arrivals": {"rate_per_s": -1}}}', "workload.arrivals.rate_per_s"),
        ("bad.toml", "[workload.arrivals]\nrate_per_s = 0\n", "workload.arrivals.rate_per_s"),
        ("unknown.json", '{"decode": {"instances": 1, "bogus": true}}', "decode.bogus"),
        ("preset.json", '{"model": "gpt-5"}', "llama3-8b"),
        ("fit.json", '{"model": "llama3-70b"}', "does not fit"),
        ("type.json", '{"workload": {"requests": "many"}}', "workload.requests"),
        ("syntax.json", '{"workload": ', "invalid JSON"),
        ("syntax.toml", "[workload\n", "invalid TOML"),
        ("list.json", "[1, 2]", "object"),
        ("scenario.yaml", "workload: {}", ".json or .toml"),
    ],
)
def test_bad_scenario_file(tmp_path: Path, name: str, text: str, needle: str) -> None:
    """A scenario file with a bad field, an unknown key or preset, a model that does not fit, bad syntax or
    the wrong extension exits non-zero with the field path (or the reason) and no traceback."""
    p = tmp_path / name
    p.write_text(text)
    assert_clean_failure(run("run", str(p)), needle)


@pytest.mark.parametrize(
    ("assignment", "needle"),
    [
        ("workload.arrivals.rate_per_s=-1", "workload.arrivals.rate_per_s"),
        ("workload.requests=abc", "workload.requests"),
        ("prefill.instances=0", "prefill.instances"),
        ("metrics.warmup_fraction=1", "metrics.warmup_fraction"),
        ("noequals", "noequals"),
        ("workload..requests=3", "empty path segment"),
        ("link=carrier-pigeon", "ib-ndr"),
    ],
)
def test_bad_set_assignment(assignment: str, needle: str) -> None:
    """A bad ``--set`` value or malformed assignment exits non-zero naming the field, without a traceback."""
    assert_clean_failure(run("run", "--set", assignment), needle)


def test_bad_trace_file(tmp_path: Path) -> None:
    """``--trace`` with a missing file, an unknown extension or an out-of-order trace fails cleanly."""
    assert_clean_failure(run("run", "--trace", str(tmp_path / "none.csv")), "none.csv")
    odd = tmp_path / "t.parquet"
    odd.write_text("x")
    assert_clean_failure(run("run", "--trace", str(odd)), "unknown trace format")
    unsorted = tmp_path / "u.csv"
    unsorted.write_text(AZURE_HEADER + "2024-05-10 00:00:02,5,1\n2024-05-10 00:00:01,6,1\n")
    assert_clean_failure(run("run", "--trace", str(unsorted)), "line 3", "time order")


def test_non_numeric_token_count_in_trace(tmp_path: Path) -> None:
    """An Azure trace with a non-numeric ContextTokens fails cleanly, naming the file."""
    p = tmp_path / "bad.csv"
    p.write_text(AZURE_HEADER + "2024-05-10 00:00:01,5,1\n2024-05-10 00:00:02,abc,1\n")
    assert_clean_failure(run("run", "--trace", str(p)), "bad.csv")


def test_trace_with_generator_fields_is_refused(tmp_path: Path) -> None:
    """``--trace`` together with ``--set workload.requests=…`` is refused, naming workload.requests."""
    assert_clean_failure(run("run", "--trace", str(CODE_CSV), *SMALL), "workload.requests")


# --------------------------------------------------------------------------------------------------
# kvwire presets / scenario


def test_presets_lists_every_preset() -> None:
    """``kvwire presets`` names every model, device, link and hand-off format of the catalog."""
    r = run("presets")
    assert r.exit_code == 0, r.output
    cat = kvwire.catalog()
    for section in ("models", "devices", "links", "formats"):
        for key in cat[section]:
            assert f"  {key} " in r.stdout, (section, key)


def test_presets_json_is_the_catalog() -> None:
    """``kvwire presets --json`` prints exactly kvwire.catalog()."""
    r = run("presets", "--json")
    assert r.exit_code == 0, r.output
    assert strict_json(r.stdout) == kvwire.catalog()


def test_scenario_json_feeds_back_into_run(tmp_path: Path) -> None:
    """``kvwire scenario`` prints the default scenario as JSON; running that file gives the default run."""
    r = run("scenario")
    assert r.exit_code == 0, r.output
    assert strict_json(r.stdout) == kvwire.default_scenario()
    p = tmp_path / "default.json"
    p.write_text(r.stdout)
    out = run("run", str(p), "--json")
    assert out.exit_code == 0, out.output
    assert without_wall(strict_json(out.stdout)["summary"]) == without_wall(kvwire.simulate({}).summary)


def test_scenario_toml_feeds_back_into_run(tmp_path: Path) -> None:
    """``kvwire scenario --toml`` is valid TOML equal to the default scenario; running it gives the default
    run, and it can be edited with --set."""
    r = run("scenario", "--toml")
    assert r.exit_code == 0, r.output
    assert tomllib.loads(r.stdout) == kvwire.default_scenario()
    p = tmp_path / "default.toml"
    p.write_text(r.stdout)
    out = run("run", str(p), "--json")
    assert out.exit_code == 0, out.output
    assert without_wall(strict_json(out.stdout)["summary"]) == without_wall(kvwire.simulate({}).summary)
    out = run("run", str(p), "--json", "--set", "link.channels=2", *SMALL)
    assert out.exit_code == 0, out.output
    assert strict_json(out.stdout)["summary"]["link"]["channels"] == 2


# --------------------------------------------------------------------------------------------------
# Real trace and the real entry point


def test_run_real_azure_code_trace() -> None:
    """``kvwire run --trace`` replays the real Azure 2023 code trace: all 8,819 requests (data/README.md)."""
    r = run("run", "--trace", str(CODE_CSV), "--json")
    assert r.exit_code == 0, r.output
    s = strict_json(r.stdout)["summary"]
    assert s["requests"]["total"] == 8819
    assert s["requests"]["completed"] + s["requests"]["rejected"] == 8819
    # The trace spans about 57 minutes (18:17:03.98 to 19:14:19.93), so the run lasts at least that long.
    assert s["run"]["horizon_s"] >= 3435.9
    r = run("run", "--trace", str(CODE_CSV))
    assert r.exit_code == 0 and "8,819" in r.stdout


def _entry_point() -> list[str]:
    exe = Path(sys.executable).parent / "kvwire"
    assert exe.exists(), f"the kvwire console script is not installed next to {sys.executable}"
    return [str(exe)]


def test_entry_point_subprocess_runs() -> None:
    """The installed ``kvwire`` console script runs as a real process and prints strict JSON."""
    proc = subprocess.run(
        [*_entry_point(), "run", "--json", "--set", "workload.requests=50"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert strict_json(proc.stdout)["summary"]["requests"]["total"] == 50


def test_entry_point_subprocess_error_is_one_line() -> None:
    """A bad field through the real console script exits non-zero with the field path and no traceback."""
    proc = subprocess.run(
        [*_entry_point(), "run", "--set", "workload.arrivals.rate_per_s=-1"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode != 0
    assert "workload.arrivals.rate_per_s" in proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout
    assert proc.stdout == ""


def test_version_and_help() -> None:
    """``--version`` prints the package version and ``--help`` lists the three commands."""
    r = run("--version")
    assert r.exit_code == 0 and kvwire.__version__ in r.stdout
    r = run("--help")
    assert r.exit_code == 0
    for cmd in ("run", "presets", "scenario"):
        assert cmd in r.stdout


def test_layouts_lists_every_layout() -> None:
    """``kvwire layouts`` prints one line per layout of ``kvwire.layout.layouts()`` (and ``--json`` the rows)."""
    from kvwire import layout

    names = layout.layouts()["name"].to_list()
    out = CliRunner().invoke(main, ["layouts"])
    assert out.exit_code == 0
    assert [line.split()[0] for line in out.output.splitlines()] == names
    rows = json.loads(CliRunner().invoke(main, ["layouts", "--json"]).output)
    assert [r["name"] for r in rows] == names


def test_python_dash_m_runs_the_command_line() -> None:
    """``python -m kvwire.cli`` is the ``kvwire`` command (the package's ``__main__``), exit status included."""
    ok = subprocess.run([sys.executable, "-m", "kvwire.cli", "--version"], capture_output=True, text=True)
    assert ok.returncode == 0 and ok.stdout.startswith("kvwire, version ")
    bad = subprocess.run([sys.executable, "-m", "kvwire.cli", "no-such-command"], capture_output=True, text=True)
    assert bad.returncode == 2 and "No such command" in bad.stderr
