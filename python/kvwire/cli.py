"""The ``kvwire`` command line.

``kvwire run [FILE]`` runs a scenario (the built-in default when no file is given) and prints a report,
or the summary as JSON with ``--json``. ``kvwire presets`` lists models, devices, links and formats.
``kvwire scenario`` prints the default scenario, to start a file from. ``kvwire layouts`` lists the engine
KV-cache layouts of :mod:`kvwire.layout`. ``kvwire trace-info FILE`` describes a trace
(:mod:`kvwire.cli_trace`).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from kvwire import __version__
from kvwire.cli_trace import trace_info_cmd, trace_options, trace_spec, with_trace_file
from kvwire.errors import KvwireError
from kvwire.presets import catalog
from kvwire.report import render
from kvwire.run import simulate
from kvwire.scenario import default_scenario, load_scenario, with_override


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="kvwire")
def main() -> None:
    """kvwire: what does moving the KV cache cost? Simulate disaggregated LLM serving."""


@main.command()
@click.argument("scenario_file", required=False, type=click.Path(dir_okay=False, path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON instead of the report.")
@click.option(
    "--set",
    "overrides",
    multiple=True,
    metavar="PATH=VALUE",
    help="Override a field, e.g. --set workload.arrivals.rate_per_s=14 (repeatable).",
)
@click.option(
    "--trace",
    "trace_file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Replay a trace file (Azure, BurstGPT, Mooncake or a kvwire request table; the format is detected) "
    "instead of generating requests: the scenario's workload.trace.file.",
)
@trace_options
def run(
    scenario_file: Path | None, as_json: bool, overrides: tuple[str, ...], trace_file: Path | None, **trace: Any
) -> None:
    """Run SCENARIO_FILE (.json or .toml), or the built-in default scenario when none is given."""
    options = trace_spec(trace)
    if options and trace_file is None:
        flags = ", ".join("--" + name.replace("_", "-") for name in trace if trace[name] not in (None, ()))
        raise click.UsageError(f"{flags}: only with --trace FILE")
    try:
        sc: dict[str, Any] = load_scenario(scenario_file) if scenario_file else {}
        for o in overrides:
            sc = with_override(sc, o)
        if trace_file is not None:
            sc = with_trace_file(sc, trace_file, options)
        res = simulate(sc)
    except KvwireError as e:
        raise click.ClickException(str(e)) from None
    if as_json:
        click.echo(json.dumps({"summary": res.summary, "scenario": res.scenario}, indent=2))
    else:
        if not scenario_file:
            click.echo("(built-in default scenario; `kvwire scenario` prints it)\n", err=True)
        click.echo(render(res))


@main.command()
@click.option("--json", "as_json", is_flag=True, help="Print everything as JSON.")
def presets(as_json: bool) -> None:
    """List the model, device and link presets and the hand-off formats."""
    cat = catalog()
    if as_json:
        click.echo(json.dumps(cat, indent=2))
        return
    click.echo("models:")
    for k, m in cat["models"].items():
        click.echo(
            f"  {k:<12} {m['name']:<14} {m['params'] / 1e9:6.2f} B params, {m['layers']:>3} layers, "
            f"KV {m['kv_bytes_per_token'] / 1024:,.0f} KiB/token"
        )
    click.echo("devices:")
    for k, d in cat["devices"].items():
        click.echo(
            f"  {k:<12} {d['name']:<14} {d['peak_tflops']:6.0f} TFLOP/s, {d['hbm_tb_per_s']:5.2f} TB/s, "
            f"{d['hbm_gb']:5.0f} GB, TDP {d['tdp_w']:.0f} W"
        )
    click.echo("links:")
    for k, lk in cat["links"].items():
        click.echo(
            f"  {k:<12} {lk['name']:<34} {lk['bandwidth_gb_per_s']:7.3f} GB/s, {lk['latency_us']:4.0f} us, "
            f"{lk['pj_per_bit']:4.0f} pJ/bit"
        )
    click.echo("hand-off formats (handoff.compression):")
    for k, f in cat["formats"].items():
        click.echo(
            f"  {k:<12} {f['bits_per_value']:6.3f} bits/value, ratio {f['ratio_vs_bf16']:.4f}  {f['description']}"
        )
    click.echo("\nsources: `kvwire presets --json` gives every preset's source.")


@main.command("handoff")
@click.option("--model", default="llama3-8b", show_default=True, help="Model preset.")
@click.option("--prompt-tokens", default=2048, show_default=True, help="Prompt length.")
@click.option("--link", default="ib-ndr", show_default=True, help="Link preset.")
@click.option("--compression", default="none", show_default=True, help="Format of the hand-off.")
@click.option("--streaming", type=click.Choice(["whole", "layer"]), default="whole", show_default=True)
@click.option("--device", default="h100", show_default=True, help="Prefill (and decode) device preset.")
@click.option(
    "--devices-per-instance",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="Devices per prefill (and decode) instance, for models that do not fit one device.",
)
@click.option("--lm-head", type=click.Choice(["last", "all"]), default="last", show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print the figures as JSON.")
def handoff_cmd(
    model: str,
    prompt_tokens: int,
    link: str,
    compression: str,
    streaming: str,
    device: str,
    devices_per_instance: int,
    lm_head: str,
    as_json: bool,
) -> None:
    """Closed-form hand-off of one prompt: size, transfer time, prefill, exposed time, link-full rate."""
    from kvwire.handoff import handoff

    try:
        h = handoff(
            model,
            prompt_tokens,
            link=link,
            compression=compression,
            streaming=streaming,  # type: ignore[arg-type]
            device=device,
            devices_per_instance=devices_per_instance,
            cost={"prefill_lm_head": lm_head},
        )
    except KvwireError as e:
        raise click.ClickException(str(e)) from None
    if as_json:
        click.echo(json.dumps(h, indent=2))
        return
    pool = device if devices_per_instance == 1 else f"{devices_per_instance} x {device}"
    click.echo(
        f"{model}, {prompt_tokens:,} tokens, prefill on {pool}, {link}, compression {compression}, "
        f"{streaming} hand-off\n"
        f"  KV per token      {h['bytes_per_token']:>14,.0f} B\n"
        f"  hand-off          {h['handoff_bytes'] / 1e6:>14,.1f} MB\n"
        f"  on the wire       {h['wire_bytes'] / 1e6:>14,.1f} MB\n"
        f"  transfer          {h['transfer_s'] * 1e3:>14,.2f} ms\n"
        f"  prefill           {h['prefill_s'] * 1e3:>14,.2f} ms\n"
        f"  exposed after it  {h['exposed_s'] * 1e3:>14,.2f} ms\n"
        f"  link full at      {h['link_full_rate_per_s']:>14,.1f} req/s"
    )


@main.command("layouts")
@click.option("--json", "as_json", is_flag=True, help="Print the layouts as JSON rows.")
def layouts_cmd(as_json: bool) -> None:
    """List the engine KV-cache layouts kvwire.layout converts between."""
    from kvwire.layout import layouts

    rows = layouts().to_dicts()
    if as_json:
        click.echo(json.dumps(rows, indent=2))
        return
    width = max(len(r["name"]) for r in rows)
    for r in rows:
        kind = "paged" if r["paged"] else "contiguous"
        click.echo(f"{r['name']:<{width}}  {r['version']:<13} {kind:<10}  {r['description']}")


@main.command("quant-report")
@click.argument("npy_file", required=False, type=click.Path(dir_okay=False, path_type=Path))
@click.option("--axis", default=-1, show_default=True, help="Quantisation axis (blocks run along it).")
@click.option("--repeat", default=3, show_default=True, help="Timing repetitions (best is reported).")
@click.option("--threads", type=int, default=None, help="Kernel threads (default: all cores for large inputs).")
@click.option("--json", "as_json", is_flag=True, help="Print the table as JSON rows.")
def quant_report(npy_file: Path | None, axis: int, repeat: int, threads: int | None, as_json: bool) -> None:
    """Size, accuracy and speed of every KV format on NPY_FILE (a .npy KV dump), or on a seeded synthetic
    K-cache tensor (4096 tokens x 8 heads x 128, four outlier channels) when no file is given."""
    from kvwire.quant_report import load_kv, render, report, synthetic_kv

    try:
        x = load_kv(npy_file) if npy_file else synthetic_kv()
        df = report(x, axis=axis, repeat=max(1, repeat), threads=threads)
    except KvwireError as e:
        raise click.ClickException(str(e)) from None
    if as_json:
        click.echo(json.dumps(df.to_dicts(), indent=2))
    else:
        click.echo(render(df, x, str(npy_file) if npy_file else "synthetic K cache (seed 0)", axis))


@main.command()
@click.option("--toml", "as_toml", is_flag=True, help="Print as TOML instead of JSON.")
def scenario(as_toml: bool) -> None:
    """Print the built-in default scenario (a starting point for a scenario file)."""
    sc = default_scenario()
    if not as_toml:
        click.echo(json.dumps(sc, indent=2))
        return
    click.echo(_to_toml(sc))


def _to_toml(d: dict[str, Any], prefix: str = "") -> str:
    """Minimal TOML writer for the default scenario (scalars and nested tables only)."""
    scalars, tables = [], []
    for k, v in d.items():
        if isinstance(v, dict):
            tables.append((k, v))
        else:
            scalars.append(f"{k} = {json.dumps(v)}")
    out = []
    if prefix and scalars:
        out.append(f"[{prefix}]")
    out.extend(scalars)
    for k, v in tables:
        sub = _to_toml(v, f"{prefix}.{k}" if prefix else k)
        if sub:
            out.append("")
            out.append(sub)
    return "\n".join(out)


main.add_command(trace_info_cmd)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
