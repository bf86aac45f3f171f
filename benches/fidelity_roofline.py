"""The roofline default held against NVIDIA's measured kernel database (``aiconfigurator-core``, vLLM data):
prefill and decode step times on H100, H200 and B200 for dense (Llama 3.1 8B and 70B, Qwen3 32B) and MoE
(Qwen3-235B-A22B, DeepSeek-V3) models at TP 1-8, across prompt lengths and batches. Both sides are kvwire's own
step times (``kvwire.step_times``): the roofline as the default scenario computes it (with
``parallel = {"tp": n}``: its all-reduces on NVLink), and the measured source at points of its grid, where it is
the provider's value exactly.

    python benches/fidelity_roofline.py            # the tables of docs/fidelity.md
    python benches/fidelity_roofline.py --json     # every row

Error = (roofline - measured) / measured. Needs ``pip install 'kvwire[measured]'``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from typing import Any

import kvwire
import polars as pl

DEVICES = {"h100": "h100_sxm", "h200": "h200_sxm", "b200": "b200_sxm"}
#: (model preset, layouts).
MODELS: list[tuple[str, list[dict[str, int]]]] = [
    ("llama3.1-8b", [{"tp": 1}, {"tp": 2}, {"tp": 4}, {"tp": 8}]),
    ("llama3.1-70b", [{"tp": 2}, {"tp": 4}, {"tp": 8}]),
    ("qwen3-32b", [{"tp": 1}, {"tp": 2}, {"tp": 4}]),
    ("qwen3-235b-a22b", [{"tp": 4, "ep": 4}, {"tp": 8, "ep": 8}]),
    ("deepseek-v3", [{"tp": 8, "ep": 8}]),
]
PROMPTS = [512, 2048, 8192]
DECODE = [(1, 2048), (16, 2048), (64, 2048), (256, 2048), (16, 8192), (64, 8192)]


def shapes() -> pl.DataFrame:
    rows = [("prefill", 1, p, 0) for p in PROMPTS] + [("decode", b, 0, c) for b, c in DECODE]
    return pl.DataFrame(rows, schema=["phase", "batch", "prompt_tokens", "context_tokens"], orient="row")


def compare(device: str, model: str, par: dict[str, int]) -> pl.DataFrame | None:
    pool = {"device": device, "devices_per_instance": par["tp"], "parallel": par}
    base: dict[str, Any] = {"model": model, "prefill": pool, "decode": pool}
    try:
        roof = kvwire.step_times(base, shapes())
    except kvwire.ScenarioError as e:  # the model does not fit this layout (DoesNotFitError or a rank's fit)
        if "does not fit" not in str(e):
            raise
        return None
    timing = {"source": "aiconfigurator", "system": DEVICES[device], "backend": "vllm"}
    meas = kvwire.step_times({**base, "cost": {"timing": timing}}, shapes())
    layout = "TP" + str(par["tp"]) + (f" EP{par['ep']}" if par.get("ep", 1) > 1 else "")
    return roof.select(
        pl.lit(device).alias("device"),
        pl.lit(model).alias("model"),
        pl.lit(layout).alias("layout"),
        "phase",
        "batch",
        "prompt_tokens",
        "context_tokens",
        (pl.col("time_s") * 1e3).alias("roofline_ms"),
        (meas["time_s"] * 1e3).alias("measured_ms"),
    ).with_columns(((pl.col("roofline_ms") / pl.col("measured_ms") - 1) * 100).alias("error_pct"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", action="store_true", help="print every row as JSON")
    args, _ = ap.parse_known_args()  # (run in process by the docs test, beside pytest's own arguments)
    parts = [
        df
        for dev in DEVICES
        for model, layouts in MODELS
        for par in layouts
        if (df := compare(dev, model, par)) is not None
    ]
    rows = pl.concat(parts)
    if args.json:
        print(json.dumps(rows.to_dicts(), indent=1))
        return
    print("| device | model | layout | prefill error, % (512 / 2k / 8k tokens) | decode error, % (median, range) |")
    print("|---|---|---|---|---|")
    for (dev, model, layout), g in rows.group_by(["device", "model", "layout"], maintain_order=True):
        pre = g.filter(pl.col("phase") == "prefill")["error_pct"].to_list()
        dec = g.filter(pl.col("phase") == "decode")["error_pct"].to_list()
        print(
            f"| {dev} | {model} | {layout} | {' / '.join(f'{e:+.0f}' for e in pre)} | "
            f"{statistics.median(dec):+.0f} ({min(dec):+.0f} to {max(dec):+.0f}) |"
        )
    for phase in ("prefill", "decode"):
        e = rows.filter(pl.col("phase") == phase)["error_pct"].abs()
        print(
            f"\n{phase}: {e.len()} steps, median |error| {e.median():.0f}%, "
            f"90th percentile {e.quantile(0.9):.0f}%, max {e.max():.0f}%",
            end="",
        )
    print()
    sys.stdout.flush()


if __name__ == "__main__":
    main()
