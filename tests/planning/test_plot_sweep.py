"""Sweep plots people can read (issue 23, item 6): a real multi-field sweep (link x rate x decode instances,
two replicates, short runs) drawn with facets, filters and an explicit x; categorical x axes in a meaningful
order (links by bandwidth) drawn as points, not joined lines; lines that would join different configurations
refused, naming the fields; the legend outside the panels and capped; intervals inside what is possible (SLO
attainment by Wilson's score interval inside [0, 1], latencies >= 0); the TTFT rule said when the table knows
it; `kvwire plot` with the same options. Every hostile case here is a PlotError / a clean CLI message naming the
argument, never a traceback.

Expected values are written by hand (link bandwidths from the preset table in docs/reference/presets.md:
25 GbE 3.125, 100 GbE 12.5, InfiniBand NDR 50, NVLink 4 450 GB/s; Wilson intervals from Newcombe 1998, Table I)
or computed from the sweep table with Polars, never from the plotting code."""

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
from kvwire.planning import intervals, plot
from matplotlib.axes import Axes
from matplotlib.figure import Figure

RATE = "workload.arrivals.rate_per_s"
LINKS_BY_BANDWIDTH = ["eth-25g", "eth-100g", "ib-ndr", "nvlink4"]  # 3.125, 12.5, 50, 450 GB/s
GRID: dict[str, Any] = {"link": ["nvlink4", "eth-25g", "ib-ndr", "eth-100g"], RATE: [4.0, 10.0, 16.0],
                        "decode.instances": [1, 2]}  # fmt: skip


@pytest.fixture(scope="module")
def real() -> pl.DataFrame:
    """A real multi-field sweep: 4 links (not in bandwidth order) x 3 rates x 2 decode pools, 2 replicates."""
    return kvwire.sweep({"workload": {"requests": 200}}, GRID, replicates=2)


def errorbar_bounds(ax: Axes) -> list[tuple[float, float]]:
    """(low, high) of every error bar drawn in ``ax``."""
    out = []
    for c in ax.containers:
        for coll in c[2]:  # type: ignore[index]
            out.extend((float(seg[0][1]), float(seg[1][1])) for seg in coll.get_segments())
    return out


def legend_texts(fig: Figure) -> list[str]:
    """The entries of the figure's legends (the panels have none of their own)."""
    assert all(ax.get_legend() is None for ax in fig.axes)
    return [t.get_text() for leg in fig.legends for t in leg.get_texts()]


def test_facet_panels_lines_and_outside_legend(real: pl.DataFrame) -> None:
    """--facet decode.instances, --by link, x = rate: 2 rows x 3 metrics = 6 panels, 4 legend entries (links
    by bandwidth) outside the panels; every line runs left to right over the 3 rates (no zig-zag) and its points
    are the replicate means of that link and decode pool, read from the table."""
    fig = plot.metric_vs(real, RATE, by="link", facet="decode.instances")
    assert len(fig.axes) == 6
    assert legend_texts(fig) == [f"link={k}" for k in LINKS_BY_BANDWIDTH]
    for row, decode in enumerate((1, 2)):
        ax = fig.axes[row * 3]  # SLO attainment of this decode pool
        assert f"decode.instances={decode}" in ax.get_title()
        for c, link in zip(ax.containers, LINKS_BY_BANDWIDTH, strict=True):
            line = c[0]  # type: ignore[index]
            xs = np.asarray(line.get_xdata(), dtype=float)
            assert xs.tolist() == [4.0, 10.0, 16.0]
            want = (
                real.filter((pl.col("link") == link) & (pl.col("decode.instances") == decode))
                .group_by(RATE)
                .agg(pl.col("slo.attainment").mean())
                .sort(RATE)["slo.attainment"]
                .to_numpy()
            )
            np.testing.assert_allclose(np.asarray(line.get_ydata(), dtype=float), want * 100, rtol=1e-12)


def test_lines_joining_configurations_are_refused(real: pl.DataFrame) -> None:
    """--by link alone on link x rate x decode: decode.instances varies within every line (the zig-zag of the
    issue), so it is refused, naming decode.instances and its values; aggregate="max" draws one line per link."""
    with pytest.raises(plot.PlotError) as info:
        plot.metric_vs(real, RATE, by="link")
    assert info.value.path == "by"
    assert "decode.instances takes 2 values (1, 2)" in str(info.value) and "--facet decode.instances" in str(info.value)
    fig = plot.metric_vs(real, RATE, by="link", aggregate="max", metrics=["latency.ttft_s.p99"])
    (ax,) = fig.axes
    lines = [ln for ln in ax.get_lines() if len(ln.get_xdata()) == 3]
    assert len(lines) == 4
    ttft = pl.col("latency.ttft_s.p99")
    per_point = real.filter(pl.col("link") == "eth-25g").group_by(["decode.instances", RATE]).agg(ttft.mean())
    want = per_point.group_by(RATE).agg(ttft.max()).sort(RATE)
    np.testing.assert_allclose(lines[0].get_ydata(), want["latency.ttft_s.p99"].to_numpy() * 1e3, rtol=1e-12)


def test_where_filters_and_names_unknown_fields(real: pl.DataFrame) -> None:
    """--where keeps the rows with the value (numbers typed as text match numeric columns); an unknown field is
    refused naming it and listing the swept fields; a value no row has lists the values there are."""
    fig = plot.metric_vs(real, RATE, where=["decode.instances=2", "link=ib-ndr"], metrics=["slo.attainment"])
    (ax,) = fig.axes
    assert len(ax.containers) == 1 and legend_texts(fig) == []
    assert "decode.instances=2" in fig.get_suptitle() and "link=ib-ndr" in fig.get_suptitle()
    with pytest.raises(plot.PlotError) as info:
        plot.metric_vs(real, RATE, where={"lnk": "ib-ndr"})
    assert info.value.path == "lnk"
    assert "the swept fields are link, workload.arrivals.rate_per_s, decode.instances" in str(info.value)
    with pytest.raises(plot.PlotError) as info:
        plot.metric_vs(real, RATE, where=["link=ib"])
    assert "link is one of: eth-25g, eth-100g, ib-ndr, nvlink4" in str(info.value)


@pytest.mark.parametrize(
    ("kwargs", "path", "words"),
    [
        ({"where": ["link"]}, "where", "expected FIELD=VALUE"),
        ({"where": ["decode.instances=two"]}, "decode.instances", "holds numbers"),
        ({"facet": "nope"}, "nope", "no such column"),
        ({"by": ["nope"]}, "nope", "no field 'nope'"),
        ({"x": "nope"}, "nope", "no such column"),
        ({"metrics": ["slo.atainment"]}, "slo.atainment", "no such column"),
        ({"metrics": []}, "metrics", "at least one"),
        ({"facet": RATE}, "facet", "already the x axis"),
        ({"by": [RATE]}, "by", "already the x axis"),
        ({"aggregate": "median"}, "aggregate", "mean, min, max"),
        ({"first_token": "first"}, "first_token", "'prefill' or 'decode'"),
        ({"facet": "run.wall_s", "by": ["link", "decode.instances"]}, "facet", "more than 12 panels"),
        ({"metrics": ["hotspot.resource"]}, "hotspot.resource", "not numbers"),
        ({"max_series": 0}, "max_series", ">= 1"),
        ({"where": [5]}, "where", "expected FIELD=VALUE"),
        ({"where": ["decode.instances=none"]}, "decode.instances", "one of: 1, 2"),
        ({"where": ['link={"preset": 1}']}, "link", "link is one of"),
        ({"where": ["point=-1"]}, "point", "no row has point=-1"),
    ],
)
def test_hostile_options_are_plot_errors(real: pl.DataFrame, kwargs: dict[str, Any], path: str, words: str) -> None:
    """Each bad option is a PlotError naming the argument (its ``path``) and saying what is allowed."""
    args = {"x": RATE, **kwargs}
    with pytest.raises(plot.PlotError) as info:
        plot.metric_vs(real, **args)
    assert info.value.path == path and words in str(info.value)


def test_tables_that_cannot_be_drawn_are_plot_errors(real: pl.DataFrame) -> None:
    """No rows, not a DataFrame, a table with no swept fields and no x: PlotErrors naming the argument."""
    for table, x, path in (
        (real.head(0), RATE, "table"),
        ({"a": [1]}, RATE, "table"),
        (real.drop("replicate"), None, "x"),
    ):
        with pytest.raises(plot.PlotError) as info:
            plot.metric_vs(table, x)  # type: ignore[arg-type]
        assert info.value.path == path


def test_categorical_link_axis_in_bandwidth_order_as_points(real: pl.DataFrame) -> None:
    """x = link: the ticks are the links slowest first (not the grid's or the alphabet's order), each line's
    points sit at the categories, side by side, and are not joined by a line."""
    fig = plot.metric_vs(real, "link", where=["decode.instances=1"], metrics=["latency.tpot_s.p99"])
    (ax,) = fig.axes
    assert [t.get_text() for t in ax.get_xticklabels()] == LINKS_BY_BANDWIDTH
    data = [c[0] for c in ax.containers]  # type: ignore[index]
    assert len(data) == 3  # one per rate
    assert all(ln.get_linestyle() == "None" for ln in data)
    xs = np.array([np.asarray(ln.get_xdata(), dtype=float) for ln in data])
    assert np.all(np.abs(xs - np.arange(4)) < 0.5)  # each point within its category
    assert np.all(np.diff(xs, axis=0) > 0)  # beside each other, not on top
    eth = real.filter((pl.col("link") == "eth-25g") & (pl.col("decode.instances") == 1) & (pl.col(RATE) == 16.0))
    assert float(data[2].get_ydata()[0]) == pytest.approx(float(eth["latency.tpot_s.p99"].mean()) * 1e3)  # type: ignore[arg-type]


def test_intervals_stay_inside_what_is_possible(real: pl.DataFrame) -> None:
    """On the real sweep every attainment bar lies in [0, 100]% and every latency bar at >= 0 ms."""
    fig = plot.metric_vs(real, RATE, by="link", facet="decode.instances")
    for i, ax in enumerate(fig.axes):
        bounds = errorbar_bounds(ax)
        assert bounds
        lows, highs = zip(*bounds, strict=True)
        assert min(lows) >= 0.0
        if i % 3 == 0:
            assert max(highs) <= 100.0


def two_replicates(att: tuple[float, float], ttft: tuple[float, float]) -> pl.DataFrame:
    """A sweep table of one point and two replicates whose attainments and TTFT p99 differ widely."""
    return pl.DataFrame({"point": [0, 0], RATE: [8.0, 8.0], "replicate": [0, 1], "seed": [1, 2],
                         "requests.measured": [720, 720], "slo.attainment": list(att),
                         "latency.ttft_s.p99": list(ttft)})  # fmt: skip


def test_interval_of_widely_differing_replicates_is_bounded() -> None:
    """Two replicates at 90% and 30% attainment: mean ± t·s/√2 would reach -321% .. 441% (t = 12.71); the
    drawn bar is inside [0, 100]% and holds the mean 60%. TTFT p99 of 0.05 and 0.95 s: the bar starts at 0."""
    table = two_replicates((0.9, 0.3), (0.05, 0.95))
    fig = plot.metric_vs(table, RATE, metrics=["slo.attainment", "latency.ttft_s.p99"])
    ((lo, hi),) = errorbar_bounds(fig.axes[0])
    assert 0.0 <= lo < 60.0 < hi <= 100.0
    ((lo, hi),) = errorbar_bounds(fig.axes[1])
    assert lo == 0.0 and hi > 500.0


@pytest.mark.parametrize(
    ("successes", "n", "low", "high"),
    [(81, 263, 0.2553, 0.3662), (15, 148, 0.0624, 0.1605), (0, 20, 0.0, 0.1611), (1, 29, 0.0061, 0.1718)],
)
def test_wilson_matches_newcombe(successes: int, n: int, low: float, high: float) -> None:
    """The Wilson score interval equals the published values (Newcombe, Stat. Med. 17 (1998) 857-872, Table I,
    method 3)."""
    lo, hi = intervals.wilson(successes / n, n)
    assert (round(lo, 4), round(hi, 4)) == (low, high)


def test_attainment_interval_uses_the_replicates_spread() -> None:
    """Equal replicates: the Wilson interval over all measured requests (1,440 trials at 0.9). Replicates that
    differ more than a binomial share would: fewer effective trials, a wider interval, still inside [0, 1]."""
    c, lo, hi = intervals.attainment_interval(np.array([0.9, 0.9]), np.array([720, 720]))
    assert (c, lo, hi) == pytest.approx((0.9, *intervals.wilson(0.9, 1440)))
    c, lo2, hi2 = intervals.attainment_interval(np.array([0.95, 0.85]), np.array([720, 720]))
    assert c == pytest.approx(0.9) and 0.0 <= lo2 < lo and hi < hi2 <= 1.0
    # n_eff = p(1-p) k / s^2 = 0.09 * 2 / 0.005 = 36 trials
    assert (lo2, hi2) == pytest.approx(intervals.wilson(0.9, 36.0))


def test_too_many_lines_are_refused_and_the_legend_is_capped() -> None:
    """The issue's 60 legend entries: 5 x 12 configurations besides x are refused (the lines cannot be told
    apart), naming the fields and how to facet; 12 lines draw a legend of 12 entries outside the panels."""
    a, b, r = np.meshgrid(np.arange(5), np.arange(12), [2.0, 4.0], indexing="ij")
    n = a.size
    table = pl.DataFrame({"point": np.arange(n), "a": a.ravel(), "b": b.ravel(), RATE: r.ravel(),
                          "replicate": np.zeros(n, dtype=int), "seed": np.ones(n, dtype=int),
                          "slo.attainment": np.linspace(0, 1, n)})  # fmt: skip
    with pytest.raises(plot.PlotError) as info:
        plot.metric_vs(table, RATE, metrics=["slo.attainment"])
    assert "60 lines" in str(info.value) and "a (5 values), b (12 values)" in str(info.value)
    fig = plot.metric_vs(table, RATE, metrics=["slo.attainment"], where={"a": 0})
    assert len(legend_texts(fig)) == 12


def test_the_ttft_rule_is_said(real: pl.DataFrame, tmp_path: Path) -> None:
    """A table whose metrics.first_token column says "decode" titles the TTFT and SLO panels with it and says
    the rule under the figure's title; so does first_token="prefill" (what a sweep directory's manifest names,
    read by sweep_first_token, the default "decode" when it names none); without either, nothing is claimed."""
    table = real.with_columns(pl.lit("decode").alias("metrics.first_token"))
    fig = plot.metric_vs(table, RATE, by="link", facet="decode.instances")
    assert "once decode has the KV" in fig.axes[1].get_title() and "once decode" in fig.axes[0].get_title()
    assert "once decode" in fig.axes[2].get_title()  # TPOT too: it is timed from the first token as seen
    assert 'metrics.first_token "decode"' in fig.get_suptitle()
    fig = plot.metric_vs(real, RATE, by="link", facet="decode.instances", first_token="prefill")
    assert "first token out of prefill" in fig.axes[1].get_title()
    fig = plot.metric_vs(real, RATE, by="link", facet="decode.instances")
    assert "first token" not in fig.axes[1].get_title() and "first_token" not in fig.get_suptitle()
    out = tmp_path / "sweep"
    kvwire.sweep({"workload": {"requests": 50}, "metrics": {"first_token": "prefill"}}, {"link": ["ib-ndr"]}, out=out)
    assert plot.sweep_first_token(out) == "prefill"
    default = tmp_path / "default"
    kvwire.sweep({"workload": {"requests": 50}}, {"link": ["ib-ndr"]}, out=default)
    assert plot.sweep_first_token(default) == "decode"  # the base names no rule: the default's
    assert plot.sweep_first_token(tmp_path) is None
    (tmp_path / "manifest.json").write_bytes(b"\xff\x00")
    assert plot.sweep_first_token(tmp_path) is None


def test_cli_plot_options(real: pl.DataFrame, tmp_path: Path) -> None:
    """`kvwire plot --kind sweep` takes --x, --by, --facet, --where (repeatable) and --aggregate; --where also
    filters --kind stages; bad options and an unwritable output are one-line errors naming them."""
    runner = CliRunner()
    src = tmp_path / "sweep.parquet"
    real.write_parquet(src)
    ok = [
        ["--x", RATE, "--by", "link", "--facet", "decode.instances"],
        ["--x", "link", "--where", "decode.instances=1"],
        ["--x", RATE, "--where", "decode.instances=2", "--where", "link=ib-ndr", "--metric", "slo.attainment"],
        ["--x", RATE, "--by", "link", "--aggregate", "mean"],
    ]
    for i, args in enumerate(ok):
        out = tmp_path / f"s{i}.svg"
        res = runner.invoke(main, ["plot", "--kind", "sweep", str(src), *args, "-o", str(out)])
        assert res.exit_code == 0, res.output
        assert out.stat().st_size > 5000
    res = runner.invoke(
        main, ["plot", "--kind", "stages", str(src), "--where", "link=ib-ndr", "-o", str(tmp_path / "st.png")]
    )
    assert res.exit_code == 0, res.output
    bad = [
        (["--kind", "sweep", "--where", "lnk=1"], "no field 'lnk'"),
        (["--kind", "sweep", "--x", RATE, "--by", "link"], "decode.instances takes 2 values"),
        (["--kind", "stages", "--facet", "link"], "--facet: only for --kind sweep"),
        (["--kind", "split", "--where", "link=ib-ndr"], "--where: only for --kind sweep or stages"),
        (["--kind", "sweep", "--aggregate", "median"], "'median' is not one of"),
    ]
    for args, words in bad:
        res = runner.invoke(main, ["plot", str(src), *args, "-o", str(tmp_path / "x.png")])
        assert res.exit_code != 0 and words in res.output, res.output
        assert res.exception is None or isinstance(res.exception, SystemExit)
    res = runner.invoke(main, ["plot", str(src), "--kind", "sweep", "-o", str(tmp_path / "no" / "x.png")])
    assert res.exit_code == 1 and "cannot write" in res.output and isinstance(res.exception, SystemExit)


def test_sweep_directory_first_token_reaches_the_cli(tmp_path: Path) -> None:
    """A sweep directory whose base names metrics.first_token is plotted from the command line (the rule is read
    from its manifest.json); a damaged manifest is ignored, not a traceback."""
    out = tmp_path / "sweep"
    kvwire.sweep({"workload": {"requests": 50}, "metrics": {"first_token": "decode"}},
                 {RATE: [2.0, 4.0]}, out=out)  # fmt: skip
    res = CliRunner().invoke(main, ["plot", str(out), "--kind", "sweep", "-o", str(tmp_path / "a.png")])
    assert res.exit_code == 0, res.output
    (out / "manifest.json").write_text(json.dumps([1, 2]))
    res = CliRunner().invoke(main, ["plot", str(out), "--kind", "sweep", "-o", str(tmp_path / "b.png")])
    assert res.exit_code == 0, res.output
