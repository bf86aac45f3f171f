"""Fidelity: any timing source held against measured step times — the roofline, a calibrated device
(``kvwire calibrate``), NVIDIA's measured kernels (``aiconfigurator``) — row by row, with error percentiles per
phase and a parity plot (``docs/concepts/calibration.md``).

Each measured row is timed by :func:`kvwire.results.steps.step_times` on a colocated pool of the row's model on
its device with ``parallel.tp`` the row's tp, the scenario's other fields (cost, pool) as given, and
``cost.timing`` the source asked for: one call per (model, device, tp) group.

>>> parse_timing("calibrated:my-a100.json")
{'source': 'calibrated', 'file': 'my-a100.json'}
>>> parse_timing("aiconfigurator:h200_sxm:sglang")
{'source': 'aiconfigurator', 'system': 'h200_sxm', 'backend': 'sglang'}
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl

import kvwire._core as _core
from kvwire.errors import PlotError, ScenarioError
from kvwire.planning.calibrate import error_table
from kvwire.results.steps import step_times
from kvwire.scenario.load import load_scenario
from kvwire.timing.measured import check_table, read_measured

if TYPE_CHECKING:
    from matplotlib.figure import Figure

#: The ``--timing`` forms :func:`parse_timing` reads.
TIMING_FORMS = ("roofline", "calibrated:FILE", "aiconfigurator[:SYSTEM[:BACKEND]]")


def parse_timing(text: str) -> dict[str, Any]:
    """``cost.timing`` from its short form (:data:`TIMING_FORMS`).

    Raises:
        ScenarioError: naming ``timing``: another form.
    """
    head, _, rest = text.partition(":")
    if head == "roofline" and not rest:
        return {"source": "roofline"}
    if head == "calibrated" and rest:
        return {"source": "calibrated", "file": rest}
    if head == "aiconfigurator":
        system, _, backend = rest.partition(":")
        out: dict[str, Any] = {"source": "aiconfigurator"}
        if system:
            out["system"] = system
        if backend:
            out["backend"] = backend
        return out
    raise ScenarioError(f"timing: expected one of {', '.join(TIMING_FORMS)}, got {text!r}", "timing")


@dataclass
class FidelityResult:
    """Measured against predicted step times.

    Attributes:
        table: one row per measurement: ``phase, model, device, tp, batch, prompt_tokens, context_tokens,
            source_row, measured_s, predicted_s, error_pct`` (signed: (predicted - measured) / measured x 100),
            ``comm_s`` and ``bound`` (the core's).
        summary: per phase: ``rows``, ``median_abs_pct``, ``p90_abs_pct``, ``max_abs_pct`` (of |error %|) and
            ``mean_signed_pct`` (the mean signed error: > 0 the source is slow, < 0 fast).
        groups: the same per phase, model and tp (and per phase over all, model ``"all"``).
        timing: the ``cost.timing`` the predictions used (``None``: the scenario's own, or the roofline).
        source: the measurement file as given (``"measured"`` for a table given in memory).
    """

    table: pl.DataFrame
    summary: pl.DataFrame
    groups: pl.DataFrame
    timing: dict[str, Any] | None
    source: str

    def by_shape(self) -> pl.DataFrame:
        """The table with each shape's repeated measurements merged: ``rows`` (how many), ``measured_s`` (their
        median), ``predicted_s``, ``error_pct`` (of the median), ``first_line`` (the first source line), in the
        order the shapes first appear."""
        keys = ["phase", "model", "device", "tp", "batch", "prompt_tokens", "context_tokens"]
        out = self.table.group_by(keys, maintain_order=True).agg(
            rows=pl.len(),
            first_line=pl.col("source_row").min(),
            measured_s=pl.col("measured_s").median(),
            predicted_s=pl.col("predicted_s").first(),
            bound=pl.col("bound").first(),
        )
        return out.with_columns(error_pct=(pl.col("predicted_s") / pl.col("measured_s") - 1) * 100)

    def plot(self, path: str | Path | None = None) -> Figure:
        """A parity plot (measured against predicted step time, log-log, one colour per phase, the line y = x
        and ±25% dashed); written to ``path`` when given (the format from its suffix). Needs matplotlib
        (``pip install 'kvwire[plot]'``).

        Raises:
            PlotError: matplotlib is not installed, or the figure cannot be written (``path`` names the file).
        """
        try:
            from matplotlib.figure import Figure
        except ImportError:
            raise PlotError("the parity plot needs matplotlib: pip install 'kvwire[plot]'", "matplotlib") from None
        fig = Figure(figsize=(5.5, 5.0), layout="constrained")
        ax = fig.add_subplot()
        t = self.table
        both = np.concatenate([t["measured_s"].to_numpy(), t["predicted_s"].to_numpy()])
        lo, hi = float(np.min(both)) * 1e3 / 1.5, float(np.max(both)) * 1e3 * 1.5
        line = np.array([lo, hi])
        ax.plot(line, line, color="black", linewidth=1, label="predicted = measured")
        ax.plot(line, line * 1.25, color="grey", linewidth=0.8, linestyle="--", label="±25%")
        ax.plot(line, line / 1.25, color="grey", linewidth=0.8, linestyle="--")
        for phase, colour in (("prefill", "tab:blue"), ("decode", "tab:orange")):
            sub = t.filter(pl.col("phase") == phase)
            if sub.height:
                ax.scatter(sub["measured_s"] * 1e3, sub["predicted_s"] * 1e3, s=12, alpha=0.6, color=colour,
                           label=f"{phase} ({sub.height})")  # fmt: skip
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlim(lo, hi)
        ax.set_ylim(lo, hi)
        ax.set_xlabel("measured step time (ms)")
        ax.set_ylabel("predicted step time (ms)")
        what = (self.timing or {}).get("source", "scenario's timing")
        ax.set_title(f"{Path(self.source).name}: {what}")
        ax.legend(loc="upper left", fontsize=8)
        if path is not None:
            try:
                fig.savefig(path)
            except (OSError, ValueError) as e:
                raise PlotError(f"{path}: cannot write the figure: {e}", str(path)) from None
        return fig


def _summary(table: pl.DataFrame) -> pl.DataFrame:
    records = []
    for ph in ("prefill", "decode"):
        e = table.filter(pl.col("phase") == ph)["error_pct"].to_numpy()
        if e.size == 0:
            continue
        a = np.abs(e)
        records.append({"phase": ph, "rows": int(e.size), "median_abs_pct": float(np.median(a)),
                        "p90_abs_pct": float(np.percentile(a, 90)), "max_abs_pct": float(np.max(a)),
                        "mean_signed_pct": float(np.mean(e))})  # fmt: skip
    return pl.DataFrame(records)


def fidelity(
    measured: str | Path | pl.DataFrame,
    scenario: Mapping[str, Any] | str | Path | None = None,
    *,
    device: str | Mapping[str, Any] | None = None,
    timing: str | Mapping[str, Any] | None = None,
    model: str | None = None,
    fmt: str | None = None,
) -> FidelityResult:
    """Predict every measured step with a timing source and compare.

    Args:
        measured: a measurement file (:func:`kvwire.timing.measured.read_measured`) or its normalised table.
        scenario: the scenario whose other fields hold (``cost``, the colocated pool's fields); ``None``: the
            default.
        device: the device every row runs on (a preset name or an inline device); ``None``: each row's device
            from the file, else the scenario's colocated pool's.
        timing: ``cost.timing`` (a dict, or a short form of :func:`parse_timing`); ``None``: the scenario's.
        model: only this model's rows.
        fmt: the file's format (``None``: detected).

    Raises:
        MeasurementError: a bad measurement file or table.
        ScenarioError: a bad scenario or timing source, or a step the core refuses (naming the model and tp).
    """
    if isinstance(measured, pl.DataFrame):
        table, source = check_table(measured), "measured"
    else:
        table, source = read_measured(measured, fmt), str(measured)
    if model is not None:
        table = table.filter(pl.col("model") == model)
        if table.height == 0:
            raise ScenarioError(f"model: no rows of {model!r} in {source}", "model")
    base: dict[str, Any] = dict(load_scenario(scenario) if isinstance(scenario, str | Path) else (scenario or {}))
    cost = dict(base.get("cost") or {})
    tim: dict[str, Any] | None = None
    if timing is not None:
        tim = parse_timing(timing) if isinstance(timing, str) else dict(timing)
        cost["timing"] = tim
    pool = dict(base.get("colocated") or {})
    pool.pop("devices_per_instance", None)
    par = dict(pool.get("parallel") or {})
    fallback: Any = device if device is not None else pool.get("device")
    if fallback is None:
        probe = {k: v for k, v in base.items() if k not in ("cost", "mode", "colocated")}
        echo = json.loads(_core.echo_json(json.dumps({**probe, "mode": "colocated", "colocated": pool})))
        fallback = echo["colocated"]["device"].get("preset", "h100")
    devices: list[Any] = [
        device if device is not None else (d if d is not None else fallback) for d in table["device"].to_list()
    ]
    labels = [d if isinstance(d, str) else str(d.get("preset", "inline")) for d in devices]
    keyed = table.with_row_index("_row").with_columns(_dev=pl.Series([json.dumps(d) for d in devices]))
    predicted = np.full(table.height, np.nan)
    comm = np.full(table.height, np.nan)
    bound: list[str | None] = [None] * table.height
    for (m, tp, dev_key), sub in keyed.group_by(["model", "tp", "_dev"], maintain_order=True):
        dev = json.loads(str(dev_key))
        rows = sub["_row"].to_numpy()
        sc = {**base, "model": m, "mode": "colocated", "cost": cost,
              "colocated": {**pool, "device": dev, "parallel": {**par, "tp": int(tp)}}}  # fmt: skip
        try:
            out = step_times(sc, sub.select("phase", "batch", "prompt_tokens", "context_tokens"))
        except ScenarioError as e:
            raise ScenarioError(f"{m} at tp {tp} on {labels[int(rows[0])]}: {e}", e.path) from None
        predicted[rows] = out["time_s"].to_numpy()
        comm[rows] = out["comm_s"].to_numpy()
        for r, b in zip(rows, out["bound"].to_list(), strict=True):
            bound[int(r)] = b
    shown = table.with_columns(
        device=pl.Series(labels, dtype=pl.Utf8),
        measured_s=pl.col("time_s"),
        predicted_s=pl.Series(predicted),
        comm_s=pl.Series(comm),
        bound=pl.Series(bound, dtype=pl.Utf8),
    ).drop("time_s")
    shown = shown.with_columns(error_pct=(pl.col("predicted_s") / pl.col("measured_s") - 1) * 100)
    cols = ["phase", "model", "device", "tp", "batch", "prompt_tokens", "context_tokens", "source_row",
            "measured_s", "predicted_s", "error_pct", "comm_s", "bound"]  # fmt: skip
    shown = shown.select(cols)
    groups = error_table(shown, {"error": "error_pct"})
    return FidelityResult(table=shown, summary=_summary(shown), groups=groups, timing=tim, source=source)


__all__ = ["TIMING_FORMS", "FidelityResult", "fidelity", "parse_timing"]
