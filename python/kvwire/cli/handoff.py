"""``kvwire handoff``: the closed-form hand-off of one prompt (size, transfer, prefill, exposed time, the rate
that fills the link), across vendors with ``--decode-device`` and ``--convert``."""

from __future__ import annotations

from typing import Any

import click

from kvwire.cli.output import dumps
from kvwire.errors import KvwireError


@click.command("handoff")
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
    from kvwire.results.handoff import handoff

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
        click.echo(dumps(h))
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


__all__ = ["handoff_cmd"]
