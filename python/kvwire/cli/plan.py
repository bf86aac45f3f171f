"""``kvwire plan``: the best deployment of a model on a GPU budget (:func:`kvwire.plan`), printed as its report
or as JSON.

>>> from click.testing import CliRunner
>>> r = CliRunner().invoke(plan_cmd, ["llama3-8b", "--gpus", "h100=1", "--set", "workload.requests=100"])
>>> r.exit_code, r.output.splitlines()[0]
(0, 'plan: llama3-8b on 1 x h100, objective throughput_per_gpu, timing roofline')
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from kvwire.cli.output import dumps
from kvwire.errors import KvwireError
from kvwire.scenario import load_scenario, with_overrides


def _budget(texts: tuple[str, ...]) -> dict[str, int]:
    """``--gpus h100=16 --gpus h200=16`` as ``{"h100": 16, "h200": 16}`` (a kind given twice is refused)."""
    out: dict[str, int] = {}
    for text in texts:
        device, sep, count = text.partition("=")
        device = device.strip()
        if not sep or not device or not count.strip().isdigit():
            raise click.BadParameter(f"expected DEVICE=COUNT (e.g. h200=32), got {text!r}", param_hint="--gpus")
        if device in out:
            raise click.BadParameter(f"{device} given twice", param_hint="--gpus")
        out[device] = int(count)
    return out


@click.command("plan")
@click.argument("model")
@click.option("--gpus", "gpus_text", required=True, multiple=True, metavar="DEVICE=COUNT",
              help="The budget, e.g. h200=32; repeat for several kinds (heterogeneous pools).")  # fmt: skip
@click.option("--scenario", "scenario_file", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="A base scenario (workload, SLO, scheduler, cost, ...).")  # fmt: skip
@click.option("--set", "overrides", multiple=True, metavar="PATH=VALUE", help="Override a base scenario field.")
@click.option("--slo-ttft", type=click.FloatRange(0, min_open=True), default=None, help="TTFT SLO, seconds.")
@click.option("--slo-tpot", type=click.FloatRange(0, min_open=True), default=None, help="TPOT SLO, seconds.")
@click.option("--slo-attainment", type=click.FloatRange(0, 1, min_open=True), default=0.9, show_default=True,
              help="Share of measured requests that must meet the SLO.")  # fmt: skip
@click.option("--objective", type=click.Choice(["throughput_per_gpu", "min_gpus"]), default="throughput_per_gpu",
              show_default=True, help="Most output tokens/s per GPU, or fewest GPUs for --rate.")  # fmt: skip
@click.option("--rate", "rate_per_s", type=click.FloatRange(0, min_open=True), default=None,
              help="Target arrival rate, req/s (--objective min_gpus).")  # fmt: skip
@click.option("--mode", "modes", multiple=True, type=click.Choice(["disaggregated", "colocated"]),
              help="Modes to consider (repeat; default both).")  # fmt: skip
@click.option("--tp", "tps", multiple=True, type=click.IntRange(min=1), help="TP degrees (repeat; default: all).")
@click.option("--screen-requests", type=click.IntRange(min=1), default=400, show_default=True,
              help="Requests per screening run.")  # fmt: skip
@click.option("--no-prune", "no_prune", is_flag=True, help="Evaluate every configuration (a complete frontier).")
@click.option("--workers", type=click.IntRange(min=1), default=None, help="Threads (default: cores).")
@click.option("--json", "as_json", is_flag=True, help="Print the whole result as JSON.")
def plan_cmd(
    model: str, gpus_text: tuple[str, ...], scenario_file: Path | None, overrides: tuple[str, ...],
    slo_ttft: float | None, slo_tpot: float | None, slo_attainment: float, objective: str, rate_per_s: float | None,
    modes: tuple[str, ...], tps: tuple[int, ...], screen_requests: int, no_prune: bool, workers: int | None,
    as_json: bool,
) -> None:  # fmt: skip
    """The best serving configuration of MODEL on the --gpus budget: every configuration the budget holds,
    pruned with the analytic ceilings, each survivor's capacity at the SLO, the frontier and launch settings."""
    from kvwire.planning.plan import plan

    gpus = _budget(gpus_text)
    try:
        base: dict[str, Any] = load_scenario(scenario_file) if scenario_file else {}
        base = with_overrides(base, overrides)
        slo: dict[str, Any] = {"attainment": slo_attainment}
        if slo_ttft is not None:
            slo["ttft_s"] = slo_ttft
        if slo_tpot is not None:
            slo["tpot_s"] = slo_tpot
        space: dict[str, Any] = {}
        if modes:
            space["mode"] = list(modes)
        if tps:
            space["tp"] = list(tps)
        base.pop("model", None)
        result = plan(
            model, gpus, scenario=base, slo=slo, objective=objective, rate_per_s=rate_per_s, space=space,
            screen_requests=screen_requests, prune=not no_prune, workers=workers,
        )  # fmt: skip
    except KvwireError as e:
        raise click.ClickException(str(e)) from None
    click.echo(dumps(result.to_dict()) if as_json else result.report())


__all__ = ["plan_cmd"]
