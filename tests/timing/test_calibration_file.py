"""The calibrated timing source end to end: a calibration file written by ``kvwire.calibrate`` and named in
``cost.timing = {"source": "calibrated", "file": ...}`` puts the fitted device into the pools of its base device
(the pool's tp's scale-up link), sets the step overhead, and the run's echo carries the provenance; a bad file or
a scenario with no pool on the device is a ScenarioError naming ``cost.timing.file``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import kvwire
import kvwire._core as core
import polars as pl
import pytest
from calibration_support import synthetic
from kvwire.scenario.load import scenario_json
from kvwire.timing.calibration import KIND, VERSION, apply_calibration

ROWS = pl.DataFrame(
    {"phase": ["prefill", "decode", "prefill"], "batch": [4, 32, 1], "prompt_tokens": [1024, 0, 256],
     "context_tokens": [0, 2048, 0]}
)  # fmt: skip


@pytest.fixture(scope="module")
def calibration() -> kvwire.CalibrationResult:
    return kvwire.calibrate(synthetic(noise=0.01), device="h100", folds=0)


@pytest.fixture
def cal_file(calibration: kvwire.CalibrationResult, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.chdir(tmp_path)
    calibration.write(tmp_path / "my-h100.json")
    return "my-h100.json"


def calibrated(file: str, **extra: Any) -> dict[str, Any]:
    return {"cost": {"timing": {"source": "calibrated", "file": file}}, **extra}


def echo(scenario: dict[str, Any]) -> dict[str, Any]:
    """The scenario as the core echoes it (what a run's ``scenario`` shows), timing resolved."""
    out: dict[str, Any] = json.loads(core.echo_json(scenario_json(scenario)))
    return out


def test_simulate_uses_the_fitted_device_and_echoes_the_provenance(
    calibration: kvwire.CalibrationResult, cal_file: str
) -> None:
    """A run with the calibrated source has the fitted device in both pools and the fitted step overhead, its
    steps take what the fitted device says (the same as giving that device inline), and the echo carries the
    file as given and a provenance naming what was fitted."""
    res = kvwire.simulate({**calibrated(cal_file), "workload": {"requests": 50}})
    shown = res.scenario
    for pool in ("prefill", "decode"):
        assert shown[pool]["device"]["flops_eff"] == pytest.approx(calibration.device["flops_eff"])
        assert shown[pool]["device"]["bw_eff"] == pytest.approx(calibration.device["bw_eff"])
    assert shown["cost"]["step_overhead_s"] == pytest.approx(calibration.step_overhead_s)
    timing = shown["cost"]["timing"]
    assert timing["source"] == "calibrated" and timing["file"] == cal_file
    prov = timing["provenance"]
    assert prov["base_device"] == "h100" and prov["rows"] == calibration.rows
    assert set(prov["fitted"]) == {"flops_eff", "bw_eff", "step_overhead_s", "scale_up_eff_tp4"}
    assert sorted(prov["pools"]) == ["decode", "prefill"]
    got = kvwire.step_times(calibrated(cal_file), ROWS)["time_s"]
    inline = {
        "prefill": {"device": calibration.device},
        "decode": {"device": calibration.device},
        "cost": {"step_overhead_s": calibration.step_overhead_s},
    }
    assert got.to_list() == kvwire.step_times(inline, ROWS)["time_s"].to_list()
    assert got.to_list() != kvwire.step_times({}, ROWS)["time_s"].to_list()
    default = kvwire.simulate({"workload": {"requests": 50}})
    assert res.summary["latency"]["ttft_s"]["mean"] != default.summary["latency"]["ttft_s"]["mean"]


def test_provenance_is_deterministic_and_has_no_folder(cal_file: str, tmp_path: Path) -> None:
    """The echoed provenance is the same on every run and names no folder (no absolute path, no date)."""
    a = echo(calibrated(cal_file))["cost"]["timing"]
    b = echo(calibrated(cal_file))["cost"]["timing"]
    assert a == b
    text = json.dumps(a)
    assert str(tmp_path) not in text and "/" not in text


def test_the_pools_tp_gets_its_scale_up_link(calibration: kvwire.CalibrationResult, cal_file: str) -> None:
    """A pool with parallel.tp = 4 gets the scale-up bandwidth fitted at tp 4; its step times are those of the
    device inline with that link."""
    sc = calibrated(cal_file, model="llama3-8b", mode="colocated", colocated={"device": "h100", "parallel": {"tp": 4}})
    out = echo(sc)
    su = out["colocated"]["device"]["scale_up"]
    assert su["bandwidth_gb_per_s"] == pytest.approx(calibration.scale_up_by_tp[4]["bandwidth_gb_per_s"])
    assert out["cost"]["timing"]["provenance"]["pools"]["colocated"] == {"tp": 4, "scale_up": "fitted at tp 4"}
    inline = {
        "model": "llama3-8b",
        "mode": "colocated",
        "colocated": {
            "device": {**calibration.device, "scale_up": calibration.scale_up_by_tp[4]},
            "parallel": {"tp": 4},
        },
        "cost": {"step_overhead_s": calibration.step_overhead_s},
    }
    assert kvwire.step_times(sc, ROWS)["time_s"].to_list() == kvwire.step_times(inline, ROWS)["time_s"].to_list()


def test_only_the_base_devices_pools_change(calibration: kvwire.CalibrationResult, cal_file: str) -> None:
    """A pool on another device keeps its own; an inline device with the base preset keeps its other fields
    (here its memory) and gets the fitted ones."""
    sc = calibrated(cal_file, prefill={"device": {"preset": "h100", "hbm_gb": 40}}, decode={"device": "a100"})
    out = echo(sc)
    assert out["prefill"]["device"]["hbm_gb"] == 40
    assert out["prefill"]["device"]["flops_eff"] == pytest.approx(calibration.device["flops_eff"])
    assert out["decode"]["device"]["flops_eff"] == kvwire.catalog()["devices"]["a100"]["flops_eff"]
    assert list(out["cost"]["timing"]["provenance"]["pools"]) == ["prefill"]


def _doc(**changes: Any) -> dict[str, Any]:
    doc = {"kind": KIND, "version": VERSION, "base_device": "h100", "step_overhead_s": 0.001,
           "device": {"preset": "h100", "flops_eff": 0.5, "bw_eff": 0.7}, "scale_up_by_tp": {}}  # fmt: skip
    return {**doc, **changes}


@pytest.mark.parametrize(
    ("content", "words"),
    [
        (None, "cannot read"),
        ("{not json", "not JSON"),
        (json.dumps([1, 2]), "not a kvwire calibration file"),
        (json.dumps({"kind": "something-else"}), "not a kvwire calibration file"),
        (json.dumps(_doc(version=VERSION + 1)), f"reads version {VERSION}"),
        (json.dumps(_doc(version="1")), "version must be a whole number"),
        (json.dumps(_doc(base_device=3)), "base_device"),
        (json.dumps(_doc(device={"preset": "a100"})), "preset is the base_device"),
        (json.dumps(_doc(step_overhead_s=-1)), "step_overhead_s must be"),
        (json.dumps(_doc(scale_up_by_tp={"x": {}})), "scale_up_by_tp"),
        (json.dumps(_doc(base_device="mi300x", device={"preset": "mi300x"})), "no pool of this scenario runs on it"),
    ],
)
def test_bad_calibration_files_name_the_field(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, content: str | None, words: str
) -> None:
    """A missing, unreadable, non-JSON, foreign, newer or malformed file, or one whose device no pool runs on, is
    a ScenarioError naming cost.timing.file, and the next valid run still works."""
    monkeypatch.chdir(tmp_path)
    if content is not None:
        (tmp_path / "c.json").write_text(content, encoding="utf-8")
    with pytest.raises(kvwire.ScenarioError) as info:
        kvwire.validate(calibrated("c.json"))
    assert info.value.path == "cost.timing.file"
    assert words in str(info.value) and "cost.timing.file" in str(info.value)
    assert kvwire.simulate({"workload": {"requests": 20}}).summary["requests"]["completed"] == 20


@pytest.mark.parametrize("file", [None, "", 3])
def test_no_file_given(file: Any) -> None:
    """source "calibrated" without a file path is refused naming cost.timing.file."""
    timing = {"source": "calibrated"} if file is None else {"source": "calibrated", "file": file}
    with pytest.raises(kvwire.ScenarioError) as info:
        apply_calibration({"cost": {"timing": timing}}, timing)
    assert info.value.path == "cost.timing.file"


def test_the_written_file_reads_back(calibration: kvwire.CalibrationResult, tmp_path: Path) -> None:
    """The file holds its kind and version, the device usable inline, the fit and error tables, the method and
    the source, and no NaN (strict JSON)."""
    doc = json.loads(calibration.write(tmp_path / "x.json").read_text(encoding="utf-8"))
    assert doc["kind"] == KIND and doc["version"] == VERSION and doc["base_device"] == "h100"
    assert echo({"prefill": {"device": doc["device"]}})["prefill"]["device"]["bw_eff"] == doc["device"]["bw_eff"]
    assert [r["parameter"] for r in doc["fit"]] == calibration.fit["parameter"].to_list()
    assert doc["method"]["loss"] == "soft_l1" and doc["source"] is None
    assert "NaN" not in (tmp_path / "x.json").read_text(encoding="utf-8")


def test_a_scenario_files_relative_calibration_is_beside_it(
    calibration: kvwire.CalibrationResult, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A scenario file naming its calibration by a relative path finds it beside itself (as a trace file or
    model.hf_config), wherever the working directory is; the same name from a dict is relative to the working
    directory."""
    folder = tmp_path / "deploy"
    folder.mkdir()
    calibration.write(folder / "my-h100.json")
    (folder / "sc.toml").write_text('[cost.timing]\nsource = "calibrated"\nfile = "my-h100.json"\n')
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    got = echo(kvwire.load_scenario(folder / "sc.toml"))
    assert got["prefill"]["device"]["flops_eff"] == calibration.device["flops_eff"]
    with pytest.raises(kvwire.ScenarioError) as e:
        kvwire.validate(calibrated("my-h100.json"))
    assert e.value.path == "cost.timing.file"
