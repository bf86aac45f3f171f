"""Synthetic step-time measurements for the calibration and fidelity tests: the core's own roofline (through
``kvwire.step_times``) at known device efficiencies, per-step overhead and scale-up bandwidth, times seeded
multiplicative noise, with a few outliers when asked."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import kvwire
import numpy as np
import polars as pl

#: Known parameters the synthetic rows are generated with (H100: NVLink 4 at 450 GB/s, 5 us).
TRUE: dict[str, float] = {"flops_eff": 0.42, "bw_eff": 0.63, "step_overhead_s": 0.004, "scale_up_eff_tp4": 0.35}
#: (model, tp) groups of the synthetic rows: tp 1 rows pin flops_eff, tp 4 rows the scale-up efficiency.
GROUPS: tuple[tuple[str, int], ...] = (("llama3-8b", 1), ("llama3-8b", 4))
NVLINK4_GB_PER_S = 450.0


def shapes() -> pl.DataFrame:
    """Prefills of 1-16 prompts of 128-2,048 tokens and decodes of 1-64 sequences at 512 and 4,096 tokens."""
    rows = [("prefill", b, p, 0) for b in (1, 4, 16) for p in (128, 512, 2048)]
    rows += [("decode", b, 0, c) for b in (1, 8, 64) for c in (512, 4096)]
    return pl.DataFrame(rows, schema=["phase", "batch", "prompt_tokens", "context_tokens"], orient="row")


def scenario(values: Mapping[str, float], model: str, tp: int, device: str = "h100") -> dict[str, Any]:
    """The colocated pool the rows are timed on, with ``values`` as the device and overhead."""
    dev: dict[str, Any] = {"preset": device, "flops_eff": values["flops_eff"], "bw_eff": values["bw_eff"]}
    eff = values.get(f"scale_up_eff_tp{tp}")
    if eff is not None:
        dev["scale_up"] = {"domain": 8, "bandwidth_gb_per_s": eff * NVLINK4_GB_PER_S, "latency_us": 5.0}
    return {
        "model": model,
        "mode": "colocated",
        "colocated": {"device": dev, "parallel": {"tp": tp}, "devices_per_instance": tp},
        "cost": {"step_overhead_s": values["step_overhead_s"]},
    }


def synthetic(
    values: Mapping[str, float] = TRUE,
    *,
    groups: Sequence[tuple[str, int]] = GROUPS,
    repeats: int = 3,
    noise: float = 0.0,
    outliers: int = 0,
    seed: int = 1,
) -> pl.DataFrame:
    """The normalised measurement table (``kvwire.timing.measured``) of every shape of every group, ``repeats``
    times, each time x exp(N(0, noise)); ``outliers`` rows (seeded) then x 0.2 or x 5."""
    parts = []
    for model, tp in groups:
        t = kvwire.step_times(scenario(values, model, tp), shapes())["time_s"]
        base = shapes().with_columns(model=pl.lit(model), device=pl.lit("h100"), tp=pl.lit(tp), time_s=t)
        parts += [base] * repeats
    out = pl.concat(parts)
    rng = np.random.default_rng(seed)
    factor = np.exp(rng.normal(0.0, noise, out.height)) if noise else np.ones(out.height)
    if outliers:
        at = rng.choice(out.height, outliers, replace=False)
        factor[at] *= rng.choice([0.2, 5.0], outliers)
    return out.with_columns(time_s=pl.col("time_s") * pl.Series(factor), source_row=pl.int_range(2, out.height + 2))


def write_csv(table: pl.DataFrame, path: Path) -> Path:
    """``table`` as kvwire's calibration CSV (with a ``device`` column and a comment line)."""
    cols = ["phase", "model", "tp", "batch", "prompt_tokens", "context_tokens", "time_s", "device"]
    with path.open("w", encoding="utf-8") as f:
        f.write("# format: kvwire calibration CSV (synthetic: the core's roofline at known parameters)\n")
        table.select(cols).write_csv(f, float_precision=9)
    return path
