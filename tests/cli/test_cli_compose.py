"""CLI composition (issue 9 item 6): a scenario file with ``--trace``, presets and their overrides in any
order, a distribution's kind changed by ``--set``, and ``--help`` saying that ``--set`` values are JSON.
Each case is the issue's exact command line, run in-process through the click group."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import kvwire
import pytest
from click.testing import CliRunner
from kvwire.cli import main
from kvwire.scenario import to_toml, with_overrides
from shared_paths import DATA

CODE_CSV = DATA / "azure-llm-2023" / "code.csv"


def run_json(*args: str) -> dict[str, Any]:
    r = CliRunner().invoke(main, ["run", "--json", *args])
    assert r.exit_code == 0, r.output
    out: dict[str, Any] = json.loads(r.stdout)
    return out


def test_scenario_file_with_a_trace(tmp_path: Path) -> None:
    """``kvwire run my.toml --trace FILE``: the file (here ``kvwire scenario --toml``, which has a generated
    workload) failed with "workload.requests: not used with explicit requests"; the trace now replaces the
    file's generator fields and the file's other settings (link, over_context) apply."""
    sc = kvwire.default_scenario()
    sc["link"] = "eth-100g"
    sc["workload"]["over_context"] = "clip"
    f = tmp_path / "my.toml"
    f.write_text(to_toml(sc), encoding="utf-8")
    out = run_json(str(f), "--trace", str(CODE_CSV))
    assert out["summary"]["requests"]["total"] == 8819  # data/README.md: the code trace's rows
    assert out["scenario"]["link"]["preset"] == "eth-100g"
    workload = out["scenario"]["workload"]
    assert workload["over_context"] == "clip"
    # The echo names the trace file (absolute, with its detected format), so the run can be repeated.
    assert workload["trace"]["file"] == os.path.abspath(CODE_CSV)
    assert workload["trace"]["format"] == "azure"
    assert "requests" not in workload and "external" not in workload


def test_a_set_generator_field_with_a_trace_is_still_an_error() -> None:
    """What the user sets explicitly is not dropped: ``--trace`` with ``--set workload.requests=60`` is a
    conflict named by its field."""
    r = CliRunner().invoke(main, ["run", "--trace", str(CODE_CSV), "--set", "workload.requests=60"])
    assert r.exit_code != 0
    assert "workload.requests" in r.output and "Traceback" not in r.output


@pytest.mark.parametrize(
    "sets",
    [
        ["link.channels=2", "link=eth-25g"],
        ["link=eth-25g", "link.channels=2"],
    ],
)
def test_preset_after_its_override_keeps_the_override(sets: list[str]) -> None:
    """``--set link=eth-25g`` after ``--set link.channels=2`` silently dropped the channel count; presets now
    apply first, so both orders give two channels of 25 GbE."""
    args = [x for s in sets for x in ("--set", s)]
    out = run_json(*args, "--set", "workload.requests=20")
    link = out["scenario"]["link"]
    assert (link["preset"], link["channels"], link["bandwidth_gb_per_s"]) == ("eth-25g", 2, 3.125)
    assert out["summary"]["link"]["channels"] == 2


def test_device_preset_and_its_override_in_any_order() -> None:
    """The same rule for pools: ``decode.device.tdp_w=650`` before ``decode.device=h200`` is an H200 at 650 W."""
    sc = with_overrides({}, ["decode.device.tdp_w=650", "decode.device=h200"])
    echo = kvwire.simulate({**sc, "workload": {"requests": 5}}).scenario
    assert echo["decode"]["device"]["preset"] == "h200"
    assert echo["decode"]["device"]["tdp_w"] == 650
    assert echo["decode"]["device"]["hbm_gb"] == 141


def test_changing_a_distribution_kind_drops_the_old_defaults() -> None:
    """``--set workload.prompt_tokens.dist=fixed --set workload.prompt_tokens.value=1000`` failed on the
    lognormal defaults (mean, cv, min, max) left beside ``dist``; they fall away with the old kind."""
    out = run_json("--set", "workload.prompt_tokens.dist=fixed", "--set", "workload.prompt_tokens.value=1000",
                   "--set", "workload.requests=30")  # fmt: skip
    assert out["scenario"]["workload"]["prompt_tokens"] == {"dist": "fixed", "value": 1000}
    # The arrival process too: gamma needs its cv, and poisson takes none.
    out = run_json("--set", "workload.arrivals.process=gamma", "--set", "workload.arrivals.cv=2",
                   "--set", "workload.requests=30")  # fmt: skip
    assert out["scenario"]["workload"]["arrivals"] == {"process": "gamma", "rate_per_s": 8.0, "cv": 2.0}


def test_a_user_set_field_that_conflicts_with_the_new_kind_is_an_error() -> None:
    """A field the user set (here ``mean``) is kept when ``dist`` changes, and the core refuses it by name."""
    r = CliRunner().invoke(main, ["run", "--set", "workload.prompt_tokens.mean=500",
                                  "--set", "workload.prompt_tokens.dist=fixed",
                                  "--set", "workload.prompt_tokens.value=9"])  # fmt: skip
    assert r.exit_code != 0
    assert "workload.prompt_tokens.mean" in r.output and 'not used by dist "fixed"' in r.output


def test_help_says_set_values_are_json() -> None:
    """``kvwire run --help`` says how a ``--set`` value is read."""
    r = CliRunner().invoke(main, ["run", "--help"])
    text = " ".join(r.output.split())
    assert "VALUE is read as JSON" in text
    assert "otherwise taken as a string" in text
    assert "apply before field overrides" in text


def test_kind_fields_match_the_core() -> None:
    """``KIND_FIELDS`` (which siblings each ``dist`` / ``process`` uses) agrees with the core: each kind
    validates with exactly its fields, and refuses each other field of its object by name."""
    from kvwire.scenario import KIND_FIELDS

    values = {"value": 5, "min": 1, "max": 9, "mean": 4.0, "cv": 0.5, "rate_per_s": 2.0}
    for key, kinds in KIND_FIELDS.items():
        where, every = ("prompt_tokens", {"value", "min", "max", "mean", "cv"}) if key == "dist" else (
            "arrivals", {"rate_per_s", "cv"})  # fmt: skip
        for kind, uses in kinds.items():
            obj = {key: kind, **{f: values[f] for f in uses}}
            kvwire.validate({"workload": {where: obj}})
            for extra in every - uses:
                with pytest.raises(kvwire.ScenarioError) as e:
                    kvwire.validate({"workload": {where: {**obj, extra: values[extra]}}})
                assert e.value.path == f"workload.{where}.{extra}", (kind, extra)
