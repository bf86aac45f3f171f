"""``kvwire.fidelity``: measurements made by a known timing source are predicted by that source with ~0 error
(the roofline at known parameters, and a calibrated file fitted to them, tp > 1 included), another source shows
its error with the right sign, the summary holds the percentiles per phase, the parity plot is drawn, and a bad
timing source is a ScenarioError."""

from __future__ import annotations

import sys
from pathlib import Path

import kvwire
import polars as pl
import pytest
from calibration_support import TRUE, synthetic
from kvwire.planning.fidelity import parse_timing
from matplotlib.image import imread
from shared_paths import DATA

SPLITWISE = DATA / "measured" / "splitwise_a100.csv"
TP1 = (("llama3-8b", 1),)


def test_the_generating_source_has_no_error() -> None:
    """Rows made by the roofline at known parameters, predicted by the roofline with that device inline and that
    step overhead, have ~0 error in every row; the default device has a clear error."""
    data = synthetic(groups=TP1)
    device = {"preset": "h100", "flops_eff": TRUE["flops_eff"], "bw_eff": TRUE["bw_eff"]}
    res = kvwire.fidelity(data, {"cost": {"step_overhead_s": TRUE["step_overhead_s"]}}, device=device)
    assert res.table.height == data.height
    assert res.table["error_pct"].abs().max() < 1e-9  # type: ignore[operator]
    assert res.summary["phase"].to_list() == ["prefill", "decode"]
    assert res.summary["max_abs_pct"].max() < 1e-9  # type: ignore[operator]
    default = kvwire.fidelity(data)
    assert default.summary["median_abs_pct"].min() > 1  # type: ignore[operator]


def test_a_calibrated_file_reproduces_its_measurements(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A calibration fitted to noise-free roofline rows (tp 1 and tp 4), named as cost.timing, predicts those rows
    with ~0 error: the pools get the fitted device, the tp-4 pool its fitted scale-up link."""
    monkeypatch.chdir(tmp_path)
    data = synthetic()
    kvwire.calibrate(data, device="h100", folds=0).write("cal.json")
    res = kvwire.fidelity(data, timing="calibrated:cal.json")
    assert res.timing == {"source": "calibrated", "file": "cal.json"}
    assert res.table["error_pct"].abs().max() < 0.5  # type: ignore[operator]
    assert set(res.table["tp"].unique()) == {1, 4}


def test_signed_error_and_percentiles() -> None:
    """Measurements 10% slower than the source give a signed mean of -9.09% (the source is fast) and the same
    |error| everywhere; the per-group table has one line per phase, model and tp plus the phase totals."""
    device = {"preset": "h100", "flops_eff": TRUE["flops_eff"], "bw_eff": TRUE["bw_eff"]}
    data = synthetic(groups=TP1).with_columns(time_s=pl.col("time_s") * 1.1)
    res = kvwire.fidelity(data, {"cost": {"step_overhead_s": TRUE["step_overhead_s"]}}, device=device)
    for r in res.summary.iter_rows(named=True):
        assert r["mean_signed_pct"] == pytest.approx(-100 / 11)
        assert r["median_abs_pct"] == pytest.approx(100 / 11) and r["max_abs_pct"] == pytest.approx(100 / 11)
    assert res.groups.select("phase", "model").rows() == [
        ("prefill", "llama3-8b"), ("prefill", "all"), ("decode", "llama3-8b"), ("decode", "all"),
    ]  # fmt: skip


def test_splitwise_rows_run_on_their_device() -> None:
    """A Splitwise file's rows run on the device it names (a100) at their tp, one row per measurement; merged by
    shape, the repeats of a shape become one row of their median."""
    res = kvwire.fidelity(SPLITWISE)
    assert res.table.height == 840 and set(res.table["device"]) == {"a100"}
    shapes = res.by_shape()
    assert shapes["rows"].sum() == 840 and shapes.height == 128
    one = shapes.row(0, named=True)
    same = res.table.filter((pl.col("phase") == one["phase"]) & (pl.col("source_row") >= one["first_line"]))
    same = same.filter((pl.col("batch") == one["batch"]) & (pl.col("prompt_tokens") == one["prompt_tokens"])
                       & (pl.col("context_tokens") == one["context_tokens"]) & (pl.col("tp") == one["tp"])
                       & (pl.col("model") == one["model"]))  # fmt: skip
    assert one["measured_s"] == pytest.approx(same["measured_s"].median())
    assert res.table["predicted_s"].is_finite().all() and (res.table["predicted_s"] > 0).all()
    assert set(res.table["bound"]) <= {"compute", "memory", "power"}


def test_parse_timing() -> None:
    """The short forms of --timing become cost.timing; anything else is refused naming timing."""
    assert parse_timing("roofline") == {"source": "roofline"}
    assert parse_timing("calibrated:a.json") == {"source": "calibrated", "file": "a.json"}
    assert parse_timing("aiconfigurator") == {"source": "aiconfigurator"}
    assert parse_timing("aiconfigurator:h100_sxm") == {"source": "aiconfigurator", "system": "h100_sxm"}
    for bad in ("calibrated", "roofline:x", "vidur"):
        with pytest.raises(kvwire.ScenarioError) as info:
            parse_timing(bad)
        assert info.value.path == "timing"


def test_a_source_that_cannot_time_the_rows_is_named() -> None:
    """A measured source without the rows' model (Llama-2-70B is not in the provider's list, or the provider is
    not installed) is a ScenarioError naming the model, tp and device of the group."""
    with pytest.raises(kvwire.ScenarioError, match="llama2-70b at tp 2 on a100"):
        kvwire.fidelity(SPLITWISE, timing="aiconfigurator")


def test_parity_plot(tmp_path: Path) -> None:
    """The parity plot is written as a non-blank PNG with both phases and labelled axes."""
    res = kvwire.fidelity(synthetic(groups=TP1))
    fig = res.plot(tmp_path / "parity.png")
    img = imread(tmp_path / "parity.png")
    assert img.std() > 0.01
    ax = fig.axes[0]
    assert "measured" in ax.get_xlabel() and "predicted" in ax.get_ylabel()
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert any(label.startswith("prefill") for label in labels) and any(label.startswith("decode") for label in labels)


def test_parity_plot_without_matplotlib(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without matplotlib the plot is a PlotError that says how to install it."""
    res = kvwire.fidelity(synthetic(groups=TP1))
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)
    with pytest.raises(kvwire.errors.PlotError, match="kvwire\\[plot\\]"):
        res.plot()
