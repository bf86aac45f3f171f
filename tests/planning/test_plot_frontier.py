"""kvwire.plot.frontier and `kvwire plot --kind frontier`: a plan's throughput per GPU against tokens/s per user,
its line through exactly the frontier rows, the best starred at its own coordinates, from a PlanResult, its
table or the JSON of `kvwire plan --json`; a plan without frontier rows and a file that is no plan are clear
errors."""

from __future__ import annotations

import json
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

X, Y = "output_tokens_per_s_per_user", "output_tokens_per_s_per_gpu"
#: A small plan (two TP values on four H100s): a frontier of a few rows in well under a second.
PLAN_ARGS: dict[str, Any] = {"workload": {"requests": 300}, "space": {"tp": [1, 2]}}


@pytest.fixture(scope="module")
def plans() -> dict[str, kvwire.PlanResult]:
    return {
        "both modes": kvwire.plan("llama3-8b", {"h100": 4}, **PLAN_ARGS),
        "disaggregated": kvwire.plan(
            "llama3-8b", {"h100": 4}, **{**PLAN_ARGS, "space": {"tp": [1, 2], "mode": ["disaggregated"]}}
        ),
    }


def check_image(fig: Figure, tmp_path: Path, name: str) -> None:
    """PNG and SVG files are written, the PNG is not one flat colour (as tests/planning/test_plot.py checks)."""
    png, svg = tmp_path / f"{name}.png", tmp_path / f"{name}.svg"
    fig.savefig(png)
    fig.savefig(svg)
    pixels = imread(png)
    assert pixels.shape[0] > 100 and pixels.shape[1] > 100 and float(np.std(pixels[..., :3])) > 0.01
    text = svg.read_text()
    assert "<svg" in text and len(text) > 5000


def by_gid(fig: Figure, gid: str) -> Any:
    (found,) = [a for a in fig.axes[0].get_children() if a.get_gid() == gid]
    return found


def frontier_points(frontier: pl.DataFrame) -> np.ndarray:
    """The frontier rows' (tok/s per user, tok/s per GPU), left to right."""
    return np.array(sorted(frontier.select(X, Y).rows(), key=lambda r: (r[0], -r[1])))


def test_frontier_line_and_best(tmp_path: Path, plans: dict[str, kvwire.PlanResult]) -> None:
    """The frontier line passes through exactly the frontier rows, the star sits at the best's coordinates and
    is labelled with its configuration, and every evaluated (verified or screened) row is a faint point."""
    p = plans["both modes"]
    assert p.best is not None and p.frontier.height >= 1
    fig = plot.frontier(p)
    ax = fig.axes[0]
    assert ax.get_xlabel() == "output tokens/s per user (interactivity)"
    assert ax.get_ylabel() == "output tokens/s per GPU"
    assert "llama3-8b on 4 x h100" in ax.get_title()
    assert np.allclose(by_gid(fig, "frontier-0").get_xydata(), frontier_points(p.frontier))
    star = by_gid(fig, "best-0").get_xydata()
    assert np.allclose(star, [[p.best[X], p.best[Y]]])
    assert by_gid(fig, "best-label-0").get_text().startswith(p.best["configuration"] + "\n")
    evaluated = p.table.filter(pl.col("status").is_in(["verified", "screened"]))
    points = by_gid(fig, "evaluated-0").get_offsets()
    assert len(points) == evaluated.height > p.frontier.height
    assert np.allclose(sorted(map(tuple, points)), sorted(evaluated.select(X, Y).rows()))
    check_image(fig, tmp_path, "frontier")


def test_from_the_table_and_the_json(plans: dict[str, kvwire.PlanResult]) -> None:
    """The table alone gives the same frontier (its verified Pareto rows) and best (the most tok/s per GPU) as
    the PlanResult; so does the plan's JSON."""
    p = plans["both modes"]
    want = frontier_points(p.frontier)
    for source in (p.table, json.loads(json.dumps(p.to_dict()))):
        fig = plot.frontier(source)
        assert np.allclose(by_gid(fig, "frontier-0").get_xydata(), want)
        assert np.allclose(by_gid(fig, "best-0").get_xydata(), [[p.best[X], p.best[Y]]])  # type: ignore[index]
    label = by_gid(plot.frontier(p.table), "best-label-0").get_text()
    assert label.startswith(p.best["configuration"])  # type: ignore[index]


def test_several_plans_overlaid(plans: dict[str, kvwire.PlanResult]) -> None:
    """{label: plan} draws one frontier and one star per plan, the legend naming each plan."""
    fig = plot.frontier(plans)
    for i, p in enumerate(plans.values()):
        assert np.allclose(by_gid(fig, f"frontier-{i}").get_xydata(), frontier_points(p.frontier))
        assert np.allclose(by_gid(fig, f"best-{i}").get_xydata(), [[p.best[X], p.best[Y]]])  # type: ignore[index]
    legend = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert legend[:2] == ["both modes", "disaggregated"] and "best" in legend


def test_no_frontier_is_a_plot_error(plans: dict[str, kvwire.PlanResult]) -> None:
    """A plan whose table has no verified row meeting the SLO, a table that is no plan's, and input that is no
    plan are PlotErrors naming the argument."""
    table = plans["both modes"].table.with_columns(pl.lit("screened").alias("status"))
    with pytest.raises(plot.PlotError, match="no frontier rows") as info:
        plot.frontier(table)
    assert info.value.path == "plans"
    with pytest.raises(plot.PlotError, match="no frontier rows") as info:
        plot.frontier({"a": plans["both modes"], "b": table})
    assert info.value.path == "plans['b']"
    d = plans["both modes"].to_dict()
    with pytest.raises(plot.PlotError, match="no frontier rows"):
        plot.frontier({**d, "frontier": [], "best": None})
    with pytest.raises(plot.PlotError, match="no column 'status'"):
        plot.frontier(pl.DataFrame({"x": [1.0]}))
    with pytest.raises(plot.PlotError) as info:
        plot.frontier([1, 2])
    assert info.value.path == "plans"


def test_cli_plot_frontier(tmp_path: Path, plans: dict[str, kvwire.PlanResult]) -> None:
    """`kvwire plot --kind frontier` writes a PNG and an SVG from `kvwire plan --json` and from a Parquet of the
    table, overlays two files; a file that is no plan is refused naming it."""
    runner = CliRunner()
    plan_json = tmp_path / "plan.json"
    res = runner.invoke(main, ["plan", "llama3-8b", "--gpus", "h100=4", "--set", "workload.requests=300",
                               "--tp", "1", "--tp", "2", "--json"])  # fmt: skip
    assert res.exit_code == 0, res.output
    plan_json.write_text(res.stdout)
    table = tmp_path / "table.parquet"
    plans["disaggregated"].table.write_parquet(table)
    for name, args in (("one", [str(plan_json)]), ("table", [str(table)]), ("two", [str(plan_json), str(table)])):
        for ext in ("png", "svg"):
            out = tmp_path / f"{name}.{ext}"
            res = runner.invoke(main, ["plot", *args, "--kind", "frontier", "-o", str(out)])
            assert res.exit_code == 0, res.output
            assert out.stat().st_size > 5000
    assert (tmp_path / "one.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "<svg" in (tmp_path / "one.svg").read_text()
    split = tmp_path / "split.json"
    split.write_text(json.dumps({"splits": [], "best": None}))
    sweep = tmp_path / "sweep.parquet"
    pl.DataFrame({"link": ["ib-ndr"], "slo.attainment": [1.0]}).write_parquet(sweep)
    garbage = tmp_path / "garbage.json"
    garbage.write_text("not json")
    for bad, says in ((split, "not a plan result"), (sweep, "not a plan's table"), (garbage, "cannot read")):
        res = runner.invoke(main, ["plot", str(bad), "--kind", "frontier", "-o", str(tmp_path / "x.png")])
        assert res.exit_code != 0 and str(bad) in res.output and says in res.output, res.output
