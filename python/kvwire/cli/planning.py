"""``kvwire sweep``, ``kvwire capacity``, ``kvwire best-split``, ``kvwire compare`` and ``kvwire plot``: many runs
answering one planning question, each printed as a short table (the whole result is in the files written)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click
import polars as pl

from kvwire.cli.output import dumps
from kvwire.errors import KvwireError
from kvwire.scenario import load_scenario, with_overrides

#: Columns `kvwire sweep` prints after the swept fields (the whole table is in DIR/results.parquet).
SWEEP_SHOWN = (
    ("slo.attainment", "SLO met", "{:.1%}"),
    ("latency.ttft_s.p99", "TTFT p99 s", "{:.3f}"),
    ("latency.tpot_s.p99", "TPOT p99 ms", "{:.1f}", 1e3),
    ("throughput.req_per_s", "req/s", "{:.2f}"),
    ("energy.j_per_output_token", "J/token", "{:.3f}"),
)


def _executor_for(scheduler: str | None) -> tuple[Any, Any]:
    """(client, executor) for a Dask scheduler address, or (None, None)."""
    if scheduler is None:
        return None, None
    try:
        from distributed import Client
    except ImportError:
        raise click.ClickException("--scheduler needs Dask distributed: pip install 'kvwire[dask]'") from None
    try:
        client = Client(scheduler, timeout=30)  # type: ignore[no-untyped-call]
    except OSError as e:
        raise click.ClickException(f"--scheduler {scheduler}: cannot connect: {e}") from None
    return client, client.get_executor()  # type: ignore[no-untyped-call]


def _fmt(value: Any, fmt: str, scale: float = 1.0) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return fmt.format(value * scale)
    return str(value)


def _print_table(df: Any, leading: list[str], shown: tuple[tuple[Any, ...], ...], limit: int = 40) -> None:
    cols = [(c, c, "{:.6g}", 1.0) for c in leading] + [
        (spec[0], spec[1], spec[2], spec[3] if len(spec) > 3 else 1.0) for spec in shown if spec[0] in df.columns
    ]
    rows = [[_fmt(r.get(c), f, k) for c, _, f, k in cols] for r in df.head(limit).iter_rows(named=True)]
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, (_, h, _, _) in enumerate(cols)]
    click.echo("  ".join(h.rjust(w) for (_, h, _, _), w in zip(cols, widths, strict=True)))
    for r in rows:
        click.echo("  ".join(v.rjust(w) for v, w in zip(r, widths, strict=True)))
    if df.height > limit:
        click.echo(f"... {df.height - limit} more rows")


@click.command("sweep")
@click.argument("sweep_file", type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "-o", "--out", "out_dir", required=True, type=click.Path(file_okay=False, path_type=Path),
    help="Directory for the Parquet parts, manifest.json and results.parquet.",
)  # fmt: skip
@click.option("--resume", is_flag=True, help="Continue the sweep in --out: points already written are not run.")
@click.option("--workers", type=click.IntRange(min=1), default=None, help="Threads running points (default: cores).")
@click.option(
    "--scheduler", metavar="ADDRESS", default=None,
    help="Run points on a Dask cluster (tcp://host:port); needs pip install 'kvwire[dask]'.",
)  # fmt: skip
@click.option("--replicates", type=click.IntRange(min=1), default=None, help="Seeds per point (overrides the file).")
@click.option("--progress/--no-progress", default=None, help="Progress bar (default: on a terminal).")
def sweep_cmd(
    sweep_file: Path,
    out_dir: Path,
    resume: bool,
    workers: int | None,
    scheduler: str | None,
    replicates: int | None,
    progress: bool | None,
) -> None:
    """Run every point of SWEEP_FILE (.toml or .json: base, grid, zip, replicates) into --out DIR."""
    import time

    from kvwire.planning.progress import progress_bar
    from kvwire.planning.sweep import load_sweep, sweep

    client, executor = _executor_for(scheduler)
    start = time.perf_counter()
    try:
        definition = load_sweep(sweep_file)
        if replicates is not None:
            definition["replicates"] = replicates
        with progress_bar("sweep", enabled=progress) as bar:
            said: list[bool] = []

            def report(done: int, total: int) -> None:
                if resume and not said:  # the first call: the runs already written
                    said.append(True)
                    click.echo(
                        f"resuming: {done:,} of {total:,} runs already in {out_dir}, {total - done:,} left", err=True
                    )
                bar(done, total)

            df = sweep(definition, workers=workers, executor=executor, out=out_dir, resume=resume, progress=report)
    except KvwireError as e:
        raise click.ClickException(str(e)) from None
    except KeyboardInterrupt:
        raise click.ClickException(f"interrupted; finished points are in {out_dir} (continue with --resume)") from None
    finally:
        if client is not None:
            client.close()
    swept = [*definition["grid"], *definition["zip"]]
    n = definition["replicates"]
    if n > 1:  # one line per point: the means over its replicates
        click.echo(f"(means over {n} replicates; the 95% half-widths are the ':ci95' columns of the results)")
        points = df.filter(pl.col("replicate") == 0).select(
            *swept, *[pl.col(f"{c[0]}:mean").alias(c[0]) for c in SWEEP_SHOWN if f"{c[0]}:mean" in df.columns]
        )
        _print_table(points, swept, SWEEP_SHOWN)
    else:
        _print_table(df, swept, SWEEP_SHOWN)
    click.echo(f"{df.height} rows in {time.perf_counter() - start:.1f} s -> {out_dir / 'results.parquet'}", err=True)


def _scenario_arg(scenario_file: Path | None, overrides: tuple[str, ...]) -> dict[str, Any]:
    try:
        sc: dict[str, Any] = load_scenario(scenario_file) if scenario_file else {}
        sc = with_overrides(sc, overrides)
    except KvwireError as e:
        raise click.ClickException(str(e)) from None
    return sc


def _planning_options(f: Any) -> Any:
    """Options shared by capacity, best-split and compare."""
    for option in reversed(
        [
            click.argument("scenario_file", required=False, type=click.Path(dir_okay=False, path_type=Path)),
            click.option("--set", "overrides", multiple=True, metavar="PATH=VALUE", help="Override a field."),
            click.option(
                "--slo-attainment",
                type=click.FloatRange(0, 1, min_open=True),
                default=0.9,
                show_default=True,
                help="Share of measured requests that must meet the SLO.",
            ),
            click.option(
                "--rel-tol",
                type=click.FloatRange(0, 0.5, min_open=True, max_open=True),
                default=0.02,
                show_default=True,
                help="Relative width of the final bracket.",
            ),
            click.option("--json", "as_json", is_flag=True, help="Print the result as JSON."),
        ]
    ):
        f = option(f)
    return f


def _plan(label: str, as_json: bool, call: Any) -> Any:
    """Run a planning call with a progress bar (none for --json); print its JSON and return None for --json."""
    from kvwire.planning.progress import progress_bar

    try:
        with progress_bar(label, enabled=False if as_json else None) as bar:
            result = call(bar)
    except KvwireError as e:
        raise click.ClickException(str(e)) from None
    if as_json:
        click.echo(dumps(result.to_dict()))
        return None
    return result


def _rate(x: float | None) -> str:
    """A rate (3 decimals), or a whole-number field's capacity as the whole number it is."""
    if x is None:
        return "-"
    return f"{x:,}" if isinstance(x, int) else f"{x:,.3f}"


def _print_ceilings(c: dict[str, Any] | None) -> None:
    if not c:
        return
    parts = [
        f"{name} {_rate(c.get(key))}"
        for name, key in (
            ("prefill", "prefill_req_per_s"),
            ("decode", "decode_req_per_s"),
            ("kv-link", "kv_link_req_per_s"),
            ("colocated", "colocated_req_per_s"),
        )
        if c.get(key) is not None
    ]
    click.echo(f"analytic ceilings (req/s): {', '.join(parts)}; binding: {c['binding']}")


@click.command("capacity")
@_planning_options
@click.option("--field", default="workload.arrivals.rate_per_s", show_default=True, help="The field to search.")
@click.option("--bounds", type=(float, float), default=None, metavar="LOW HIGH",
              help="Search between these values (needed for a field other than the rate).")  # fmt: skip
def capacity_cmd(
    scenario_file: Path | None, overrides: tuple[str, ...], slo_attainment: float, rel_tol: float, as_json: bool,
    field: str, bounds: tuple[float, float] | None,
) -> None:  # fmt: skip
    """The highest arrival rate (or --field value) at which SCENARIO_FILE still meets its SLO."""
    from kvwire.planning.capacity import capacity

    sc = _scenario_arg(scenario_file, overrides)
    r = _plan("capacity", as_json, lambda bar: capacity(
        sc, slo_attainment=slo_attainment, field=field, rel_tol=rel_tol, bounds=bounds, progress=bar))  # fmt: skip
    if r is None:
        return
    _print_ceilings(r.ceilings)
    _print_table(r.points, [field, "met"], SWEEP_SHOWN)
    click.echo(
        f"capacity: {_rate(r.capacity)} (SLO met by >= {slo_attainment:.0%}), missed at {_rate(r.failed_at)}; "
        f"{r.evaluations} simulations"
    )
    if r.note:
        click.echo(f"note: {r.note}")


@click.command("best-split")
@_planning_options
@click.option("--instances", type=click.IntRange(min=2), required=True, help="Instances to share between the pools.")
@click.option("--workers", type=click.IntRange(min=1), default=None, help="Splits searched at once (default: cores).")
def best_split_cmd(
    scenario_file: Path | None, overrides: tuple[str, ...], slo_attainment: float, rel_tol: float, as_json: bool,
    instances: int, workers: int | None,
) -> None:  # fmt: skip
    """Capacity of every prefill:decode split of --instances instances, and the best split."""
    from kvwire.planning.capacity import best_split

    sc = _scenario_arg(scenario_file, overrides)
    r = _plan("splits", as_json, lambda bar: best_split(
        sc, instances, slo_attainment=slo_attainment, rel_tol=rel_tol, workers=workers, progress=bar))  # fmt: skip
    if r is None:
        return
    click.echo(f"{'prefill:decode':>14}  {'capacity req/s':>14}  {'ceiling':>9}  {'binding':<9}  simulations")
    for s in r.splits:
        mark = "  <- best" if r.best is s else ""
        click.echo(
            f"{s['prefill']:>8}:{s['decode']:<5}  {_rate(s['capacity']):>14}  {_rate(s['ceiling']):>9}  "
            f"{s['binding'] or '-':<9}  {s['evaluations']:>11}{mark}"
        )


@click.command("compare")
@_planning_options
@click.option("--capacity/--no-capacity", "with_capacity", default=True, show_default=True,
              help="Also search each mode's highest sustainable rate.")  # fmt: skip
def compare_cmd(
    scenario_file: Path | None, overrides: tuple[str, ...], slo_attainment: float, rel_tol: float, as_json: bool,
    with_capacity: bool,
) -> None:  # fmt: skip
    """SCENARIO_FILE disaggregated and colocated on the same instances, side by side."""
    from kvwire.planning.capacity import compare

    sc = _scenario_arg(scenario_file, overrides)
    r = _plan("compare", as_json, lambda bar: compare(
        sc, with_capacity=with_capacity, slo_attainment=slo_attainment, rel_tol=rel_tol, progress=bar))  # fmt: skip
    if r is None:
        return
    shown = (*SWEEP_SHOWN, ("capacity", "capacity req/s", "{:.3f}"))
    _print_table(r.points, ["mode"], shown)


PLOT_KINDS = ("cdf", "sweep", "split", "stages", "frontier")


def _frontier_figure(plot: Any, results: tuple[Path, ...], tables: list[Any]) -> Any:
    """``--kind frontier``: one plan (a ``kvwire plan --json`` file or its table), or several overlaid, each
    labelled by its file name; a file that is no plan is refused naming it."""
    for path, table in zip(results, tables, strict=True):
        if isinstance(table, dict) and not isinstance(table.get("table"), list):
            raise click.ClickException(
                f"{path}: not a plan result (kvwire plan --json writes one, with 'table', 'frontier' and 'best')"
            )
    if len(results) == 1:
        try:
            return plot.frontier(tables[0])
        except KvwireError as e:
            raise click.ClickException(f"{results[0]}: {e}") from None
    labels = [p.stem for p in results]
    if len(set(labels)) < len(labels):
        labels = [str(p) for p in results]
    return plot.frontier(dict(zip(labels, tables, strict=True)))


@click.command("plot")
@click.argument("results", nargs=-1, required=True, type=click.Path(exists=True, path_type=Path))
@click.option(
    "--kind", type=click.Choice(PLOT_KINDS), required=True,
    help="cdf: latency CDF of per-request tables (kvwire run -o); sweep: metrics vs a swept field; "
    "split: capacity per prefill:decode split (kvwire best-split --json); stages: stage breakdown of a sweep; "
    "frontier: a plan's tok/s per GPU vs tok/s per user (kvwire plan --json, or its table; several overlaid).",
)  # fmt: skip
@click.option("-o", "--output", "out_file", required=True, type=click.Path(dir_okay=False, path_type=Path),
              help="Image file: .png or .svg.")  # fmt: skip
@click.option("--metric", multiple=True, help="cdf: ttft_s (default), tpot_s, e2e_s, handoff_s; sweep: columns.")
@click.option("--x", "x_field", default=None, metavar="FIELD",
              help="sweep: the field on the x axis (default: the first swept one); text fields (links, models) "
              "are drawn as points per category, links ordered by bandwidth.")  # fmt: skip
@click.option("--by", multiple=True, metavar="FIELD",
              help="sweep: fields telling the lines apart (default: the other swept fields that vary).")  # fmt: skip
@click.option("--facet", default=None, metavar="FIELD", help="sweep: one row of panels per value of FIELD.")
@click.option("--where", multiple=True, metavar="FIELD=VALUE",
              help="sweep, stages: keep only the rows with FIELD=VALUE (repeatable).")  # fmt: skip
@click.option("--aggregate", type=click.Choice(("mean", "min", "max")), default=None,
              help="sweep: combine the points of fields varying beyond --x/--by/--facet (else refused).")  # fmt: skip
def plot_cmd(
    results: tuple[Path, ...], kind: str, out_file: Path, metric: tuple[str, ...], x_field: str | None,
    by: tuple[str, ...], facet: str | None, where: tuple[str, ...], aggregate: str | None,
) -> None:  # fmt: skip
    """Draw RESULTS (sweep directories, .parquet/.csv tables or .json results, plans' included) into a PNG or SVG
    file."""
    if out_file.suffix.lower() not in (".png", ".svg"):
        raise click.BadParameter("the file name must end in .png or .svg", param_hint="'-o' / '--output'")
    try:
        from kvwire.planning import plot
    except ImportError as e:  # pragma: no cover - the extra is missing
        raise click.ClickException(f"plots need matplotlib: pip install 'kvwire[plot]' ({e})") from None
    sweep_only = [n for n, v in (("--x", x_field), ("--by", by), ("--facet", facet), ("--aggregate", aggregate)) if v]
    if kind != "sweep" and sweep_only:
        raise click.UsageError(f"{', '.join(sweep_only)}: only for --kind sweep")
    if kind not in ("sweep", "stages") and where:
        raise click.UsageError("--where: only for --kind sweep or stages")
    if kind == "frontier" and metric:
        raise click.UsageError("--metric: not for --kind frontier (its axes are tok/s per user and per GPU)")
    try:
        tables = [plot.read_table(p) for p in results]
        if kind == "cdf":
            named = {p.stem: t for p, t in zip(results, tables, strict=True)}
            fig = plot.latency_cdf(named, metric[0] if metric else "ttft_s")  # type: ignore[arg-type]
        elif kind == "split":
            fig = plot.capacity_vs_split(tables[0])
        elif kind == "frontier":
            fig = _frontier_figure(plot, results, tables)
        else:
            table = tables[0]
            if not isinstance(table, pl.DataFrame):
                raise click.ClickException(f"{results[0]}: expected a sweep table (a directory or .parquet)")
            if kind == "stages":
                fig = plot.stage_breakdown(table, where=list(where))
            else:
                rule = plot.sweep_first_token(results[0])
                kwargs: dict[str, Any] = {"by": list(by) if by else None, "facet": facet, "where": list(where),
                                          "aggregate": aggregate, "first_token": rule}  # fmt: skip
                if metric:
                    kwargs["metrics"] = list(metric)
                fig = plot.metric_vs(table, x_field, **kwargs)
        fig.savefig(out_file)
    except KvwireError as e:
        raise click.ClickException(str(e)) from None
    except OSError as e:
        raise click.ClickException(f"-o {out_file}: cannot write: {e.strerror or e}") from None
    click.echo(f"wrote {out_file}", err=True)


__all__ = ["best_split_cmd", "capacity_cmd", "compare_cmd", "plot_cmd", "sweep_cmd"]
