"""``kvwire layouts`` (the engine KV-cache layouts ``kvwire.layout`` converts between) and ``kvwire quant-report``
(size, accuracy and speed of every KV format on a KV tensor)."""

from __future__ import annotations

from pathlib import Path

import click

from kvwire.cli.output import dumps
from kvwire.errors import KvwireError


@click.command("layouts")
@click.option("--json", "as_json", is_flag=True, help="Print the layouts as JSON rows.")
def layouts_cmd(as_json: bool) -> None:
    """List the engine KV-cache layouts kvwire.layout converts between."""
    from kvwire.kernels.layout import layouts

    rows = layouts().to_dicts()
    if as_json:
        click.echo(dumps(rows))
        return
    width = max(len(r["name"]) for r in rows)
    for r in rows:
        kind = "paged" if r["paged"] else "contiguous"
        click.echo(f"{r['name']:<{width}}  {r['version']:<13} {kind:<10}  {r['description']}")


@click.command("quant-report")
@click.argument("npy_file", required=False, type=click.Path(dir_okay=False, path_type=Path))
@click.option("--axis", default=-1, show_default=True, help="Quantisation axis (blocks run along it).")
@click.option(
    "--repeat",
    default=3,
    show_default=True,
    type=click.IntRange(1, 1000),
    help="Timing repetitions (best is reported).",
)
@click.option("--threads", type=int, default=None, help="Kernel threads (default: all cores for large inputs).")
@click.option("--json", "as_json", is_flag=True, help="Print the table as JSON rows.")
def quant_report_cmd(npy_file: Path | None, axis: int, repeat: int, threads: int | None, as_json: bool) -> None:
    """Size, accuracy and speed of every KV format on NPY_FILE (a .npy KV dump), or on a seeded synthetic
    K-cache tensor (4096 tokens x 8 heads x 128, four outlier channels) when no file is given."""
    from kvwire.kernels.report import load_kv, render, report, synthetic_kv

    try:
        x = load_kv(npy_file) if npy_file else synthetic_kv()
        df = report(x, axis=axis, repeat=repeat, threads=threads)
    except KvwireError as e:
        raise click.ClickException(str(e)) from None
    if as_json:
        click.echo(dumps(df.to_dicts()))
    else:
        click.echo(render(df, x, str(npy_file) if npy_file else "synthetic K cache (seed 0)", axis))


__all__ = ["layouts_cmd", "quant_report_cmd"]
