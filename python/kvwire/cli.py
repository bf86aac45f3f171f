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
import polars as pl

from kvwire import __version__
from kvwire.cli_trace import trace_info_cmd, trace_options, trace_spec, with_trace_file
from kvwire.errors import KvwireError
from kvwire.presets import catalog
from kvwire.report import render
from kvwire.run import simulate
from kvwire.scenario import default_scenario, load_scenario, to_toml, with_overrides, without_generator


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
    "2,000,000 requests (kvwire.run.KEEP_REQUESTS_MAX).",
)
@click.option(
    "--timeline",
    "timeline_file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Record the run's timeline (engine.timeline) and write it to this .json file as a Chrome/Perfetto trace: "
    "one span per batch step and per transfer (open it in ui.perfetto.dev). At most engine.timeline_max_spans "
    "spans (2,000,000 by default).",
)
def run(
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
        click.echo(json.dumps({"summary": res.summary, "scenario": res.scenario}, indent=2))
    else:
        if not scenario_file:
            click.echo("(built-in default scenario; `kvwire scenario` prints it)\n", err=True)
        click.echo(render(res, trace_file=trace_file.name if trace_file else None))


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
        fp8 = f", FP8 {d['fp8_peak_tflops']:.0f}" if d.get("fp8_peak_tflops") else ""
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
@click.option(
    "--compress-at",
    type=click.Choice(["transit", "sender"]),
    default="transit",
    show_default=True,
    help="Where the compression runs: in transit (link stage) or on the prefill GPU.",
)
@click.option("--decode-device", default=None, help="Decode device preset (default: the prefill device).")
@click.option(
    "--decode-devices-per-instance",
    type=click.IntRange(min=1),
    default=None,
    help="Devices per decode instance (default: --devices-per-instance).",
)
@click.option(
    "--convert",
    "convert_layouts",
    type=(str, str),
    default=None,
    metavar="FROM TO",
    help="Convert the KV from layout FROM to layout TO on the way (see `kvwire layouts`).",
)
@click.option(
    "--convert-at",
    type=click.Choice(["sender", "receiver", "host"]),
    default="sender",
    show_default=True,
    help="Where --convert runs.",
)
@click.option("--from-dtype", default=None, help="--convert: the producer's KV dtype (default: the model's).")
@click.option("--to-dtype", default=None, help="--convert: the consumer's KV dtype (default: --from-dtype).")
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
    compress_at: str,
    decode_device: str | None,
    decode_devices_per_instance: int | None,
    convert_layouts: tuple[str, str] | None,
    convert_at: str,
    from_dtype: str | None,
    to_dtype: str | None,
    as_json: bool,
) -> None:
    """Closed-form hand-off of one prompt: size, transfer time, prefill, exposed time, link-full rate.

    Cross-vendor: `--decode-device` puts the decode pool on another device and `--convert FROM TO`
    (with `--convert-at`, `--from-dtype`, `--to-dtype`) converts the cache between engine layouts, e.g.
    `kvwire handoff --device mi300x --decode-device h100 --convert vllm_hnd neutral --convert-at receiver`.
    """
    from kvwire.handoff import handoff

    if convert_layouts is None and (from_dtype is not None or to_dtype is not None):
        raise click.UsageError("--from-dtype and --to-dtype describe a conversion: give --convert FROM TO too")
    convert: dict[str, Any] | None = None
    if convert_layouts is not None:
        convert = {"from": convert_layouts[0], "to": convert_layouts[1], "at": convert_at}
        if from_dtype is not None:
            convert["from_dtype"] = from_dtype
        if to_dtype is not None:
            convert["to_dtype"] = to_dtype
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
            compress_at=compress_at,  # type: ignore[arg-type]
            decode_device=decode_device,
            decode_devices_per_instance=decode_devices_per_instance,
            convert=convert,
        )
    except KvwireError as e:
        raise click.ClickException(str(e)) from None
    if as_json:
        click.echo(json.dumps(h, indent=2))
        return
    pool = device if devices_per_instance == 1 else f"{devices_per_instance} x {device}"
    where = "" if compression == "none" else f" ({'on the sender' if compress_at == 'sender' else 'in transit'})"
    decode = ""
    if decode_device is not None or decode_devices_per_instance is not None:
        n = decode_devices_per_instance or devices_per_instance
        d = decode_device or device
        decode = f", decode on {d if n == 1 else f'{n} x {d}'}"
    lines = [
        f"{model}, {prompt_tokens:,} tokens, prefill on {pool}{decode}, {link}, compression {compression}{where}, "
        f"{streaming} hand-off",
        f"  KV per token      {h['bytes_per_token']:>14,.0f} B",
        f"  hand-off          {h['handoff_bytes'] / 1e6:>14,.1f} MB",
        f"  on the wire       {h['wire_bytes'] / 1e6:>14,.1f} MB",
        f"  transfer          {h['transfer_s'] * 1e3:>14,.2f} ms",
        f"  prefill           {h['prefill_s'] * 1e3:>14,.2f} ms",
    ]
    if h["convert_at"] is not None:
        label = f"convert ({h['convert_at']})"
        lines.append(f"  {label:<18}{h['convert_s'] * 1e3:>14,.2f} ms")
    lines.append(f"  exposed after it  {h['exposed_s'] * 1e3:>14,.2f} ms")
    full = h["link_full_rate_per_s"]
    shown = f"{full:>14,.1f} req/s" if full is not None else f"{'never':>14}"
    lines.append(f"  link full at      {shown}")
    click.echo("\n".join(lines))


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
    click.echo(to_toml(sc), nl=False)


# --------------------------------------------------------------------------------------------------
# Sweeps and capacity planning (kvwire.sweep, kvwire.capacity)

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


@main.command("sweep")
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

    from kvwire.progress import progress_bar
    from kvwire.sweep import load_sweep, sweep

    client, executor = _executor_for(scheduler)
    start = time.perf_counter()
    try:
        definition = load_sweep(sweep_file)
        if replicates is not None:
            definition["replicates"] = replicates
        with progress_bar("sweep", enabled=progress) as bar:
            df = sweep(definition, workers=workers, executor=executor, out=out_dir, resume=resume, progress=bar)
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
    from kvwire.progress import progress_bar

    try:
        with progress_bar(label, enabled=False if as_json else None) as bar:
            result = call(bar)
    except KvwireError as e:
        raise click.ClickException(str(e)) from None
    if as_json:
        click.echo(json.dumps(result.to_dict(), indent=2))
        return None
    return result


def _rate(x: float | None) -> str:
    return "-" if x is None else f"{x:,.3f}"


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


@main.command("capacity")
@_planning_options
@click.option("--field", default="workload.arrivals.rate_per_s", show_default=True, help="The field to search.")
@click.option("--bounds", type=(float, float), default=None, metavar="LOW HIGH",
              help="Search between these values (needed for a field other than the rate).")  # fmt: skip
def capacity_cmd(
    scenario_file: Path | None, overrides: tuple[str, ...], slo_attainment: float, rel_tol: float, as_json: bool,
    field: str, bounds: tuple[float, float] | None,
) -> None:  # fmt: skip
    """The highest arrival rate (or --field value) at which SCENARIO_FILE still meets its SLO."""
    from kvwire.capacity import capacity

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


@main.command("best-split")
@_planning_options
@click.option("--instances", type=click.IntRange(min=2), required=True, help="Instances to share between the pools.")
@click.option("--workers", type=click.IntRange(min=1), default=None, help="Splits searched at once (default: cores).")
def best_split_cmd(
    scenario_file: Path | None, overrides: tuple[str, ...], slo_attainment: float, rel_tol: float, as_json: bool,
    instances: int, workers: int | None,
) -> None:  # fmt: skip
    """Capacity of every prefill:decode split of --instances instances, and the best split."""
    from kvwire.capacity import best_split

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


@main.command("compare")
@_planning_options
@click.option("--capacity/--no-capacity", "with_capacity", default=True, show_default=True,
              help="Also search each mode's highest sustainable rate.")  # fmt: skip
def compare_cmd(
    scenario_file: Path | None, overrides: tuple[str, ...], slo_attainment: float, rel_tol: float, as_json: bool,
    with_capacity: bool,
) -> None:  # fmt: skip
    """SCENARIO_FILE disaggregated and colocated on the same instances, side by side."""
    from kvwire.capacity import compare

    sc = _scenario_arg(scenario_file, overrides)
    r = _plan("compare", as_json, lambda bar: compare(
        sc, with_capacity=with_capacity, slo_attainment=slo_attainment, rel_tol=rel_tol, progress=bar))  # fmt: skip
    if r is None:
        return
    shown = (*SWEEP_SHOWN, ("capacity", "capacity req/s", "{:.3f}"))
    _print_table(r.points, ["mode"], shown)


PLOT_KINDS = ("cdf", "sweep", "split", "stages")


@main.command("plot")
@click.argument("results", nargs=-1, required=True, type=click.Path(exists=True, path_type=Path))
@click.option(
    "--kind", type=click.Choice(PLOT_KINDS), required=True,
    help="cdf: latency CDF of per-request tables (kvwire run -o); sweep: metrics vs a swept field; "
    "split: capacity per prefill:decode split (kvwire best-split --json); stages: stage breakdown of a sweep.",
)  # fmt: skip
@click.option("-o", "--output", "out_file", required=True, type=click.Path(dir_okay=False, path_type=Path),
              help="Image file: .png or .svg.")  # fmt: skip
@click.option("--metric", multiple=True, help="cdf: ttft_s (default), tpot_s, e2e_s, handoff_s; sweep: columns.")
@click.option("--x", "x_field", default=None, help="sweep: the swept field on the x axis (default: the first).")
@click.option("--by", multiple=True, help="sweep: columns telling configurations apart (default: other swept).")
def plot_cmd(
    results: tuple[Path, ...], kind: str, out_file: Path, metric: tuple[str, ...], x_field: str | None,
    by: tuple[str, ...],
) -> None:  # fmt: skip
    """Draw RESULTS (sweep directories, .parquet/.csv tables or .json results) into a PNG or SVG file."""
    if out_file.suffix.lower() not in (".png", ".svg"):
        raise click.BadParameter("the file name must end in .png or .svg", param_hint="'-o' / '--output'")
    try:
        from kvwire import plot
    except ImportError as e:  # pragma: no cover - the extra is missing
        raise click.ClickException(f"plots need matplotlib: pip install 'kvwire[plot]' ({e})") from None
    try:
        tables = [plot.read_table(p) for p in results]
        if kind == "cdf":
            named = {p.stem: t for p, t in zip(results, tables, strict=True)}
            fig = plot.latency_cdf(named, metric[0] if metric else "ttft_s")  # type: ignore[arg-type]
        elif kind == "split":
            fig = plot.capacity_vs_split(tables[0])
        else:
            table = tables[0]
            if not isinstance(table, pl.DataFrame):
                raise click.ClickException(f"{results[0]}: expected a sweep table (a directory or .parquet)")
            if kind == "stages":
                fig = plot.stage_breakdown(table)
            else:
                swept = table.columns[1 : table.columns.index("replicate")] if "replicate" in table.columns else []
                x = x_field or (swept[0] if swept else None)
                if x is None:
                    raise click.ClickException("--x: name the swept field for the x axis")
                kwargs: dict[str, Any] = {"by": list(by) if by else None}
                if metric:
                    kwargs["metrics"] = list(metric)
                fig = plot.metric_vs(table, x, **kwargs)
        fig.savefig(out_file)
    except KvwireError as e:
        raise click.ClickException(str(e)) from None
    click.echo(f"wrote {out_file}", err=True)


@main.command(
    "serve",
    context_settings={"ignore_unknown_options": True, "allow_extra_args": True, "help_option_names": []},
    add_help_option=False,
)
@click.pass_context
def serve_cmd(ctx: click.Context) -> None:
    """Serve kvwire over HTTP: kvwire serve [--host 127.0.0.1] [--port 8000] [--data-dir DIR].

    Needs the service package (pip install ./api); `kvwire serve --help` lists its options.
    """
    try:
        from kvwire_api.server import main as serve_main
    except ModuleNotFoundError as e:
        if e.name and e.name.split(".")[0] == "kvwire_api":
            raise click.ClickException(
                "`kvwire serve` needs the service package kvwire-api, which is not installed: "
                "run `pip install ./api` from the kvwire repository"
            ) from None
        raise click.ClickException(f"kvwire-api is installed but cannot start: missing module {e.name!r}") from None
    serve_main.main(args=ctx.args, prog_name="kvwire serve")


main.add_command(trace_info_cmd)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
