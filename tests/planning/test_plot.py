"""kvwire.plot and `kvwire plot`: every kind renders a non-empty PNG and SVG with labelled axes and the
expected number of curves, bars or panels; bad input is a PlotError naming the argument."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import kvwire
import numpy as np
import polars as pl
import pytest
from click.testing import CliRunner
from kvwire.cli import main
from kvwire.planning import plot
from matplotlib.figure import Figure
from matplotlib.image import imread

SMALL: dict[str, Any] = {"workload": {"requests": 300}}


@pytest.fixture(scope="module")
def table() -> pl.DataFrame:
    return kvwire.sweep(
        SMALL, {"link": ["ib-ndr", "eth-25g"], "workload.arrivals.rate_per_s": [4.0, 10.0, 14.0]}, replicates=2
    )


def check_image(fig: Figure, tmp_path: Path, name: str) -> None:
    """PNG and SVG files are written, the PNG is not one flat colour, and every panel has axis labels."""
    for ax in fig.axes:
        if ax.get_label() == "<colorbar>":
            continue
        assert ax.get_xlabel() and ax.get_ylabel() and ax.get_title()
    png, svg = tmp_path / f"{name}.png", tmp_path / f"{name}.svg"
    fig.savefig(png)
    fig.savefig(svg)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    pixels = imread(png)
    assert pixels.shape[0] > 100 and pixels.shape[1] > 100
    assert float(np.std(pixels[..., :3])) > 0.01
    text = svg.read_text()
    assert text.lstrip().startswith("<?xml") and "<svg" in text and len(text) > 5000


def test_latency_cdf(tmp_path: Path) -> None:
    """One curve per run, reaching 100% at the largest measured value (scaled to ms)."""
    runs = {
        "ib-ndr": kvwire.simulate({**SMALL, "link": "ib-ndr"}),
        "eth-25g": kvwire.simulate({**SMALL, "link": "eth-25g", "workload": {"requests": 300,
                                                                             "arrivals": {"rate_per_s": 14}}}),
    }  # fmt: skip
    fig = plot.latency_cdf(runs, "tpot_s")
    lines = fig.axes[0].get_lines()
    assert len(lines) == 2
    assert fig.axes[0].get_xlabel() == "TPOT (ms)"
    x, y = lines[1].get_data()
    measured = runs["eth-25g"].requests.filter(pl.col("measured"))["tpot_s"].drop_nulls()
    assert float(y[-1]) == 100.0 and float(x[-1]) == pytest.approx(float(measured.max()) * 1e3)  # type: ignore[arg-type]
    check_image(fig, tmp_path, "cdf")


def test_metric_vs_field_with_replicates(tmp_path: Path, table: pl.DataFrame) -> None:
    """Three panels (attainment, TTFT p99, TPOT p99), one line per link (the legend outside the panels, the
    slower link first), each point the replicate mean."""
    fig = plot.metric_vs(table, "workload.arrivals.rate_per_s")
    assert len(fig.axes) == 3
    ax = fig.axes[0]
    assert ax.get_xlabel() == "arrival rate (req/s)" and ax.get_ylabel() == "SLO attainment (%)"
    assert ax.get_legend() is None
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert labels == ["link=eth-25g", "link=ib-ndr"]
    bars = ax.containers  # one ErrorbarContainer per line: (data line, caps, bars)
    assert len(bars) == 2
    lines = [c.lines[0] for c in bars]  # type: ignore[attr-defined]
    want = table.filter((pl.col("link") == "eth-25g") & (pl.col("replicate") == 0)).sort(
        "workload.arrivals.rate_per_s"
    )["slo.attainment:mean"]
    assert np.allclose(lines[0].get_ydata(), want.to_numpy() * 100)
    check_image(fig, tmp_path, "vs")


def test_stage_breakdown(tmp_path: Path, table: pl.DataFrame) -> None:
    """One stacked bar per sweep point (six stages each), or per run."""
    fig = plot.stage_breakdown(table)
    assert len(fig.axes[0].patches) == 6 * 6
    check_image(fig, tmp_path, "stages")
    fig = plot.stage_breakdown({"a": kvwire.simulate(SMALL), "b": kvwire.simulate({**SMALL, "link": "eth-25g"})})
    assert len(fig.axes[0].patches) == 2 * 6


def test_capacity_vs_split_from_dict(tmp_path: Path) -> None:
    """A bar per split, the best one in another colour."""
    d = {"field": "workload.arrivals.rate_per_s", "slo_attainment": 0.9,
         "splits": [{"prefill": 1, "decode": 3, "capacity": 5.0}, {"prefill": 2, "decode": 2, "capacity": 9.0},
                    {"prefill": 3, "decode": 1, "capacity": None}],
         "best": {"prefill": 2, "decode": 2, "capacity": 9.0}}  # fmt: skip
    fig = plot.capacity_vs_split(d)
    bars = fig.axes[0].patches
    assert [b.get_height() for b in bars] == [5.0, 9.0, 0.0]
    assert bars[1].get_facecolor() != bars[0].get_facecolor()
    check_image(fig, tmp_path, "split")


def test_bad_input_is_a_plot_error(table: pl.DataFrame) -> None:
    """A missing column or metric is a PlotError naming it."""
    with pytest.raises(plot.PlotError) as info:
        plot.metric_vs(table, "workload.arrivals.rate", metrics=["slo.attainment"])
    assert info.value.path == "workload.arrivals.rate"
    with pytest.raises(plot.PlotError) as info:
        plot.latency_cdf(kvwire.simulate(SMALL), "ttft_ms")
    assert info.value.path == "metric"


def test_cli_plot_every_kind(tmp_path: Path, table: pl.DataFrame) -> None:
    """`kvwire plot` draws each kind from files written by the other commands."""
    runner = CliRunner()
    sweep_file = tmp_path / "sweep.parquet"
    table.write_parquet(sweep_file)
    assert runner.invoke(main, ["run", "-o", str(tmp_path / "a.parquet")]).exit_code == 0
    cases = [
        ["--kind", "cdf", str(tmp_path / "a.parquet")],
        ["--kind", "sweep", str(sweep_file), "--x", "workload.arrivals.rate_per_s"],
        ["--kind", "sweep", str(sweep_file), "--metric", "energy.j_per_output_token"],
        ["--kind", "stages", str(sweep_file)],
    ]
    for i, args in enumerate(cases):
        for ext in ("png", "svg"):
            out = tmp_path / f"p{i}.{ext}"
            res = runner.invoke(main, ["plot", *args, "-o", str(out)])
            assert res.exit_code == 0, res.output
            assert out.stat().st_size > 5000
    bad = runner.invoke(
        main, ["plot", "--kind", "sweep", str(sweep_file), "--x", "nope", "-o", str(tmp_path / "x.png")]
    )
    assert bad.exit_code != 0 and "nope" in bad.output
    bad = runner.invoke(main, ["plot", "--kind", "cdf", str(tmp_path / "a.parquet"), "-o", str(tmp_path / "x.pdf")])
    assert bad.exit_code != 0 and ".png or .svg" in bad.output
