"""The trace parts of the command line: the reader options shared by ``kvwire run --trace`` and
``kvwire trace-info``, and the ``trace-info`` command (registered on the ``kvwire`` group by
:mod:`kvwire.cli`).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from kvwire.cli.output import dumps
from kvwire.errors import KvwireError

F = TypeVar("F", bound=Callable[..., Any])

#: click option name -> ``workload.trace`` key.
TRACE_KEYS = {
    "trace_format": "format",
    "trace_model": "model",
    "trace_log_type": "log_type",
    "keep_failed": "keep_failed",
    "start_s": "start_s",
    "duration_s": "duration_s",
    "time_scale": "time_scale",
    "rate": "rate_per_s",
    "sample": "sample",
    "seed": "seed",
}

_FORMAT_CHOICE = click.Choice(["auto", "azure", "burstgpt", "mooncake", "kvwire"])


def trace_options(f: F) -> F:
    """The reader options (all default to "not given", so that only what the user set reaches the scenario)."""
    options = [
        click.option("--trace-format", type=_FORMAT_CHOICE, help="Trace format (default: detected from the file)."),
        click.option(
            "--trace-model", multiple=True, metavar="NAME", help="BurstGPT: keep only this Model (repeatable)."
        ),
        click.option(
            "--trace-log-type", multiple=True, metavar="TYPE", help="BurstGPT: keep only this Log Type (repeatable)."
        ),
        click.option(
            "--keep-failed", is_flag=True, default=None, help="BurstGPT: keep failed requests (Response tokens 0)."
        ),
        click.option("--start-s", type=float, help="Start of the time window, seconds after the first request."),
        click.option("--duration-s", type=float, help="Length of the time window in seconds (default: to the end)."),
        click.option(
            "--time-scale", type=float, help="Multiply every arrival time by this (0.5 replays twice as fast)."
        ),
        click.option("--rate", type=float, help="Instead of --time-scale: rescale to this mean rate (req/s)."),
        click.option("--sample", type=float, help="Keep each request with this probability (seeded thinning)."),
        click.option("--seed", type=int, help="Seed of --sample (default 0)."),
    ]
    for option in reversed(options):
        f = option(f)
    return f


def trace_spec(values: dict[str, Any]) -> dict[str, Any]:
    """The ``workload.trace`` options the user gave (click's values by option name)."""
    spec: dict[str, Any] = {}
    for name, key in TRACE_KEYS.items():
        value = values.get(name)
        if value is None or value == ():
            continue
        spec[key] = list(value) if isinstance(value, tuple) else value
    return spec


def with_trace_file(scenario: dict[str, Any], file: Path, options: dict[str, Any]) -> dict[str, Any]:
    """``scenario`` replaying ``file`` with ``options`` (its ``workload.trace`` set; other workload keys stay,
    so a generator field set alongside is refused by name)."""
    workload = dict(scenario.get("workload") or {})
    workload["trace"] = {"file": str(file), **options}
    return {**scenario, "workload": workload}


@click.command("trace-info")
@click.argument("trace_file", type=click.Path(dir_okay=False, path_type=Path))
@trace_options
@click.option("--bin-s", type=float, help="Width of the rate-over-time bins in seconds (default: ≤ 200 bins).")
@click.option("--json", "as_json", is_flag=True, help="Print the figures as JSON.")
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Also plot the request rate over time to this PNG (needs matplotlib: pip install 'kvwire[plot]').",
)
def trace_info_cmd(trace_file: Path, bin_s: float | None, as_json: bool, output: Path | None, **values: Any) -> None:
    """Describe TRACE_FILE: request count, span, rate over time, prompt/output length percentiles,
    burstiness (CV of inter-arrival times) and, for Mooncake, prefix-block reuse."""
    from kvwire.traces.stats import plot_rate, render, trace_info

    options = trace_spec(values)
    try:
        info = trace_info(trace_file, bin_s=bin_s, **options)
        if output is not None:
            plot_rate(info, output)
    except KvwireError as e:
        raise click.ClickException(str(e)) from None
    if as_json:
        click.echo(dumps(info))  # strict JSON: a figure that is not finite is null
    else:
        click.echo(render(info))
        if output is not None:
            click.echo(f"rate plot: {output}")


__all__ = ["trace_info_cmd", "trace_options", "trace_spec", "with_trace_file"]
