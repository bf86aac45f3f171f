"""``kvwire calibrate`` (fit a device to measured step times and write the calibration file) and ``kvwire
fidelity`` (hold a timing source against measured step times), registered on the ``kvwire`` group by
:mod:`kvwire.cli`."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import click
import polars as pl

from kvwire.cli.output import dumps
from kvwire.errors import KvwireError

_FORMAT = click.Choice(["auto", "kvwire", "splitwise"])


def _num(v: Any, digits: int = 1) -> str:
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "-"
    return f"{v:,.{digits}f}"


def _triple(r: dict[str, Any], label: str) -> str:
    return " / ".join(_num(r[f"{label}_{k}_pct"]) for k in ("median", "p90", "max"))


def _groups_line(table: pl.DataFrame) -> str:
    parts = []
    for m in sorted(table["model"].unique().to_list()):
        tps = sorted(table.filter(pl.col("model") == m)["tp"].unique().to_list())
        parts.append(f"{m} tp {', '.join(str(t) for t in tps)}")
    return "; ".join(parts)


def _scope(r: dict[str, Any]) -> str:
    return "all" if r["model"] == "all" else f"{r['model']} tp {r['tp']}"


@click.command("calibrate")
@click.argument("measured_file", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--device", default="h100", show_default=True, help="The device preset the steps ran on.")
@click.option("--model", default=None, help="Only this model's rows (a kvwire preset; default: every model).")
@click.option(
    "--folds", type=click.IntRange(min=0), default=5, show_default=True, help="Folds of the held-out error (0: none)."
)
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the folds' order.")
@click.option("--format", "fmt", type=_FORMAT, default="auto", show_default=True, help="The file's format.")
@click.option(
    "-o",
    "--output",
    "out_file",
    type=click.Path(dir_okay=False, path_type=Path),
    help='Write the calibration file here (then cost.timing = {"source": "calibrated", "file": FILE} uses it).',
)
@click.option("--json", "as_json", is_flag=True, help="Print the calibration file's content as JSON.")
def calibrate_cmd(
    measured_file: Path,
    device: str,
    model: str | None,
    folds: int,
    seed: int,
    fmt: str,
    out_file: Path | None,
    as_json: bool,
) -> None:
    """Fit a device's efficiencies, step overhead and scale-up bandwidth per tp to the step times measured in
    MEASURED_FILE (kvwire's calibration CSV or Splitwise's perf_model.csv); print the fit and its error
    in-sample and held out (k-fold), against the default device's."""
    from kvwire.planning.calibrate import LOSS_SCALE, calibrate

    try:
        res = calibrate(measured_file, device, model, folds=folds, seed=seed, fmt=None if fmt == "auto" else fmt)
        if out_file is not None:
            res.write(out_file)
    except KvwireError as e:
        raise click.ClickException(str(e)) from None
    except OSError as e:
        raise click.ClickException(f"{out_file}: cannot write the calibration file: {e.strerror or e}") from None
    if as_json:
        click.echo(dumps(res.document()))
    else:
        src = res.source or {}
        held = f"{folds} folds by shape, seed {seed}" if folds else "no folds"
        lines = [
            f"calibrate {device} to {src.get('file')} ({src.get('format')}): {res.rows:,} rows in {res.fit_s:.1f} s",
            f"  models: {_groups_line(res.table)}",
            f"  loss: soft-L1 of ln(predicted / measured), scale {LOSS_SCALE:g}; Nelder-Mead; {held}",
            "",
            f"  {'parameter':<18}{'value':>10}  {'default':>10}  unit",
        ]
        for r in res.fit.iter_rows(named=True):
            mark = " *" if r["at_bound"] else "  "
            lines.append(f"  {r['parameter']:<18}{r['value']:>#10.4g}{mark}{r['default']:>#10.4g}  {r['unit']}")
        if res.fit["at_bound"].any():
            lines.append("  (* at a bound of its range: the data push it there)")
        held_out = f"held out ({folds} folds)" if folds else "held out"
        lines += ["", f"  {'|error| %: median / p90 / max':<31}{'rows':>5}  {'default':<24}{'in-sample':<24}{held_out}"]
        for r in res.errors.iter_rows(named=True):
            label = f"{r['phase']:<8} {_scope(r)}"
            lines.append(
                f"  {label:<31}{r['rows']:>5,}  {_triple(r, 'default'):<24}{_triple(r, 'in'):<24}"
                f"{_triple(r, 'held_out') if folds else '-'}"
            )
        click.echo("\n".join(lines))
    if out_file is not None:
        click.echo(
            f'wrote {out_file}: cost.timing = {{"source": "calibrated", "file": "{out_file}"}} uses it', err=True
        )


def _timing_label(timing: dict[str, Any] | None) -> str:
    if timing is None or timing.get("source") == "roofline":
        return "the roofline"
    if timing.get("source") == "calibrated":
        return f"the calibrated device of {timing.get('file')}"
    extra = ", ".join(str(timing[k]) for k in ("system", "backend") if k in timing)
    return f"{timing.get('source')}" + (f" ({extra})" if extra else "")


@click.command("fidelity")
@click.argument("measured_file", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--device", default=None, help="The device preset every row runs on (default: the file's).")
@click.option(
    "--timing",
    default=None,
    metavar="SOURCE",
    help="roofline, calibrated:FILE or aiconfigurator[:SYSTEM[:BACKEND]] (default: the scenario's, the roofline).",
)
@click.option(
    "--set",
    "overrides",
    multiple=True,
    metavar="PATH=VALUE",
    help="Override a scenario field first, e.g. --set cost.comm_overlap=0.5 (repeatable; as for kvwire run).",
)
@click.option("--model", default=None, help="Only this model's rows.")
@click.option("--format", "fmt", type=_FORMAT, default="auto", show_default=True, help="The file's format.")
@click.option(
    "--top", type=click.IntRange(min=0), default=10, show_default=True, help="Rows furthest off to list (0: all)."
)
@click.option(
    "--by-shape", is_flag=True, help="List shapes (repeated measurements merged: their median) instead of rows."
)
@click.option("--plot", "plot_file", type=click.Path(dir_okay=False, path_type=Path), help="Write a parity plot.")
@click.option("--json", "as_json", is_flag=True, help="Print the percentiles and every row as JSON.")
def fidelity_cmd(
    measured_file: Path,
    device: str | None,
    timing: str | None,
    overrides: tuple[str, ...],
    model: str | None,
    fmt: str,
    top: int,
    by_shape: bool,
    plot_file: Path | None,
    as_json: bool,
) -> None:
    """Predict every measured step of MEASURED_FILE with a timing source and compare: the error percentiles per
    phase (and per model and tp) and the rows furthest off."""
    from kvwire.planning.fidelity import fidelity
    from kvwire.scenario import with_overrides

    try:
        base = with_overrides({}, overrides)
        res = fidelity(
            measured_file, base, device=device, timing=timing, model=model, fmt=None if fmt == "auto" else fmt
        )
        if plot_file is not None:
            res.plot(plot_file)
    except KvwireError as e:
        raise click.ClickException(str(e)) from None
    if as_json:
        click.echo(
            dumps(
                {
                    "timing": res.timing,
                    "summary": res.summary.to_dicts(),
                    "groups": res.groups.to_dicts(),
                    "rows": res.table.to_dicts(),
                }
            )
        )
    else:
        t = res.table
        lines = [
            f"fidelity of {_timing_label(res.timing)} on {measured_file.name}: {t.height:,} steps "
            f"({_groups_line(t)}) on {', '.join(sorted(t['device'].unique().to_list()))}",
            f"  {'|error| %':<18}{'rows':>6}{'median':>9}{'p90':>9}{'max':>10}{'mean signed':>13}",
        ]
        for r in res.summary.iter_rows(named=True):
            lines.append(
                f"  {r['phase']:<18}{r['rows']:>6,}{_num(r['median_abs_pct']):>9}{_num(r['p90_abs_pct']):>9}"
                f"{_num(r['max_abs_pct']):>10}{r['mean_signed_pct']:>+13.1f}"
            )
        lines += ["", "  by model and tp (|error| %: median / p90 / max)"]
        for r in res.groups.filter(pl.col("model") != "all").iter_rows(named=True):
            lines.append(f"  {r['phase']:<9}{_scope(r):<20}{r['rows']:>6,}   {_triple(r, 'error')}")
        listed = res.by_shape() if by_shape else t.with_columns(rows=pl.lit(1), first_line=pl.col("source_row"))
        unit = "shapes" if by_shape else "rows"
        worst = listed.with_columns(pl.col("error_pct").abs().alias("_abs")).sort(
            "_abs", descending=True, maintain_order=True
        )
        shown = worst if top == 0 else worst.head(top)
        n = listed.height
        what = f"every {unit[:-1]}" if top == 0 or top >= n else f"the {shown.height} {unit} furthest off (of {n:,})"
        count = f"{'n':>4}" if by_shape else ""
        lines += [
            "",
            f"  {what}" + (" (n measurements each, their median)" if by_shape else ""),
            f"  {'line':>5}  {'phase':<8}{'model':<12}{'tp':>4}{'batch':>7}{'prompt':>8}{'context':>8}{count}"
            f"{'measured ms':>13}{'predicted ms':>14}{'error %':>10}  bound",
        ]
        for r in shown.iter_rows(named=True):
            n_col = f"{r['rows']:>4}" if by_shape else ""
            lines.append(
                f"  {r['first_line']:>5}  {r['phase']:<8}{r['model']:<12}{r['tp']:>4}{r['batch']:>7}"
                f"{r['prompt_tokens']:>8}{r['context_tokens']:>8}{n_col}{r['measured_s'] * 1e3:>13,.2f}"
                f"{r['predicted_s'] * 1e3:>14,.2f}{r['error_pct']:>+10.1f}  {r['bound']}"
            )
        click.echo("\n".join(lines))
    if plot_file is not None:
        click.echo(f"wrote the parity plot to {plot_file}", err=True)


__all__ = ["calibrate_cmd", "fidelity_cmd"]
