"""``kvwire run`` (a scenario, or the built-in default, with ``--set``, ``--trace`` and ``--timeline``),
``kvwire scenario`` (the default written out) and ``kvwire presets`` (what a scenario can name)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from kvwire.cli.output import dumps
from kvwire.cli.trace import trace_options, trace_spec, with_trace_file
from kvwire.errors import KvwireError
from kvwire.presets import catalog
from kvwire.results.report import render
from kvwire.results.run import simulate
from kvwire.scenario import default_scenario, load_scenario, to_toml, with_overrides, without_generator


@click.command("run")
@click.argument("scenario_file", required=False, type=click.Path(dir_okay=False, path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON instead of the report.")
@click.option(
    "--set",
    "overrides",
    multiple=True,
    metavar="PATH=VALUE",
    help="Override a field, e.g. --set workload.arrivals.rate_per_s=14 (repeatable). VALUE is read as JSON "
    '(14, true, null, \'{"preset": "eth-25g", "channels": 2}\') and otherwise taken as a string (link=eth-25g). '
    "Preset names (model=, link=, prefill.device=, ...) apply before field overrides, whatever the order.",
)
@click.option(
    "--trace",
    "trace_file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Replay a trace file (Azure, BurstGPT, Mooncake or a kvwire request table; the format is detected) "
    "instead of generating requests: the scenario's workload.trace.file (it replaces the scenario's "
    "workload.requests, seed, arrivals and length distributions).",
)
@trace_options
@click.option(
    "-o",
    "--output",
    "requests_file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Also write the per-request table to this .parquet or .csv file (a run that keeps no table writes it "
    "as requests finish, in row groups).",
)
@click.option(
    "--keep-requests/--no-requests",
    "keep_requests",
    default=None,
    help="Keep the per-request table in memory, or not (bounded memory: the summary is computed as requests "
    "finish, a trace file is read in chunks, percentiles come from a quantile sketch). Default: keep it up to "
    "2,000,000 requests (kvwire.results.run.KEEP_REQUESTS_MAX).",
)
@click.option(
    "--timeline",
    "timeline_file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Record the run's timeline (engine.timeline) and write it to this .json file as a Chrome/Perfetto trace: "
    "one span per batch step and per transfer (open it in ui.perfetto.dev). At most engine.timeline_max_spans "
    "spans (2,000,000 by default).",
)
def run_cmd(
    scenario_file: Path | None,
    as_json: bool,
    overrides: tuple[str, ...],
    trace_file: Path | None,
    requests_file: Path | None,
    keep_requests: bool | None,
    timeline_file: Path | None,
    **trace: Any,
) -> None:
    """Run SCENARIO_FILE (.json or .toml), or the built-in default scenario when none is given."""
    if requests_file is not None and requests_file.suffix.lower() not in (".parquet", ".csv"):
        raise click.BadParameter("the file name must end in .parquet or .csv", param_hint="'-o' / '--output'")
    options = trace_spec(trace)
    if options and trace_file is None:
        flags = ", ".join("--" + name.replace("_", "-") for name in trace if trace[name] not in (None, ()))
        raise click.UsageError(f"{flags}: only with --trace FILE")
    try:
        sc: dict[str, Any] = load_scenario(scenario_file) if scenario_file else {}
        if trace_file is not None:
            sc = without_generator(sc)  # the trace replaces the file's generator fields (not a --set of them)
        sc = with_overrides(sc, overrides)
        if trace_file is not None:
            sc = with_trace_file(sc, trace_file, options)
        if timeline_file is not None:
            sc = {**sc, "engine": {**sc.get("engine", {}), "timeline": True}}
        res = simulate(sc, keep_requests=keep_requests, out=requests_file)
        if timeline_file is not None:
            res.timeline(timeline_file)
    except KvwireError as e:
        raise click.ClickException(str(e)) from None
    if as_json:
        click.echo(dumps({"summary": res.summary, "scenario": res.scenario}))
    else:
        if not scenario_file:
            click.echo("(built-in default scenario; `kvwire scenario` prints it)\n", err=True)
        click.echo(render(res, trace_file=trace_file.name if trace_file else None))
    # What was written, on stderr (stdout stays the report or the JSON).
    if requests_file is not None:
        click.echo(f"wrote {res.summary['requests']['total']:,} request rows to {requests_file}", err=True)
    if timeline_file is not None:
        click.echo(f"wrote the timeline to {timeline_file}", err=True)


def transfer_layer(lk: dict[str, Any]) -> str:
    """A link's transfer layer in words when it is not the reference's ideal one (one NIC at line rate, no
    launch overhead, a pre-registered pool), else "".

    >>> transfer_layer({"nics": 4, "nic_efficiency": 0.87, "gpus_per_nic": 1, "launch_overhead_us": 0.0,
    ...                 "registration": "pool"})
    ', 4 NICs at 0.870 of line rate'
    """
    parts = []
    nics, eff = lk.get("nics", 1), lk.get("nic_efficiency")
    if nics > 1 or eff not in (None, 1.0):
        at = "" if eff is None else f" at {eff:.3f} of line rate"
        parts.append(f"{nics} NIC{'s' if nics > 1 else ''}{at}")
    if lk.get("gpus_per_nic", 1) > 1:
        parts.append(f"{lk['gpus_per_nic']} GPUs per NIC")
    if lk.get("launch_overhead_us", 0.0) > 0:
        parts.append(f"launch {lk['launch_overhead_us'] / 1e3:g} ms")
    if lk.get("registration", "pool") != "pool":
        parts.append(f"registration per transfer {lk['registration_ms_per_gb']:g} ms/GB")
    return "".join(", " + p for p in parts)


@click.command("presets")
@click.option("--json", "as_json", is_flag=True, help="Print everything as JSON.")
def presets_cmd(as_json: bool) -> None:
    """List the model, device and link presets and the hand-off formats."""
    cat = catalog()
    if as_json:
        click.echo(dumps(cat))
        return
    click.echo("models:")
    for k, m in cat["models"].items():
        click.echo(
            f"  {k:<12} {m['name']:<14} {m['params'] / 1e9:6.2f} B params, {m['layers']:>3} layers, "
            f"KV {m['kv_bytes_per_token'] / 1024:,.0f} KiB/token"
        )
    click.echo("devices:")
    for k, d in cat["devices"].items():
        fp8 = f", FP8 {d['fp8_peak_tflops']:.0f}" if d.get("fp8_peak_tflops") else ""
        fp8 += f", FP4 {d['fp4_peak_tflops']:.0f}" if d.get("fp4_peak_tflops") else ""
        click.echo(
            f"  {k:<12} {d['name']:<14} {d['peak_tflops']:6.0f} TFLOP/s BF16{fp8}, {d['hbm_tb_per_s']:5.2f} TB/s, "
            f"{d['hbm_gb']:5.0f} GB {d.get('memory', 'HBM')}, TDP {d['tdp_w']:.0f} W"
            + ("" if d.get("converts_kv", True) else ", runs no KV conversion")
            + ("  [ILLUSTRATIVE: announced figures, guessed coefficients]" if d.get("illustrative") else "")
        )
    click.echo("links:")
    for k, lk in cat["links"].items():
        click.echo(
            f"  {k:<12} {lk['name']:<34} {lk['bandwidth_gb_per_s']:7.3f} GB/s, {lk['latency_us']:4.0f} us, "
            f"{lk['pj_per_bit']:4.0f} pJ/bit" + transfer_layer(lk)
        )
    click.echo("hand-off formats (handoff.compression):")
    for k, f in cat["formats"].items():
        click.echo(
            f"  {k:<12} {f['bits_per_value']:6.3f} bits/value, ratio {f['ratio_vs_bf16']:.4f}  {f['description']}"
        )
    click.echo("\nsources: `kvwire presets --json` gives every preset's source.")


@click.command("scenario")
@click.option("--toml", "as_toml", is_flag=True, help="Print as TOML instead of JSON.")
def scenario_cmd(as_toml: bool) -> None:
    """Print the built-in default scenario (a starting point for a scenario file)."""
    sc = default_scenario()
    if not as_toml:
        click.echo(dumps(sc))
        return
    click.echo(to_toml(sc), nl=False)


__all__ = ["presets_cmd", "run_cmd", "scenario_cmd", "transfer_layer"]
