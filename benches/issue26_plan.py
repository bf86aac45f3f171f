"""Issue 26's performance figure for ``kvwire.plan`` (``benches/README.md``): a dense ~32B model (Qwen3-32B) on 32 x
H200 with the default space (both modes, TP 1/2/4/8 per pool, every instance count within the budget), a
5,000-request generated workload (screened at 400 requests, verified at 5,000), the default SLO at 90% attainment,
two workers. It prints, per repetition, the configurations considered, refused, pruned and evaluated, the
simulations run and the wall time (target: >= 500 configurations considered, <= 10 s on 2 cores), and the best; with
``--no-prune-too`` it also runs the same plan with ``prune=False`` once, to measure what pruning saved (simulations
and wall time).

``--case deepseek-v3`` plans DeepSeek-V3 on 64 x H200 instead (target: <= 30 s on 2 cores), with attention data
parallelism in the space (DP 1/2/4/8; each layout also with its experts spread over its TP x DP ranks, EP =
TP x DP, the plan's default for a mixture of experts): every instance must hold the FP8 weights, so most layouts
are refused by the memory check.

    python benches/issue26_plan.py [--case qwen3-32b|deepseek-v3] [--repeats 3] [--no-prune-too]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from typing import Any

import kvwire

WORKLOAD = {"requests": 5000, "seed": 1}  # the issue: the frontier verified at >= 5,000 requests per run
#: The cases: (model, budget, space).
CASES: dict[str, tuple[str, dict[str, int], dict[str, Any]]] = {
    "qwen3-32b": ("qwen3-32b", {"h200": 32}, {}),
    "deepseek-v3": ("deepseek-v3", {"h200": 64}, {"dp": [1, 2, 4, 8]}),
}


def one(case: str, prune: bool) -> dict[str, Any]:
    model, gpus, space = CASES[case]
    t = time.perf_counter()
    p = kvwire.plan(model, gpus, workload=WORKLOAD, space=space, workers=2, prune=prune)
    wall = time.perf_counter() - t
    best = p.best or {}
    return {
        "case": case,
        "prune": prune,
        "wall_s": round(wall, 3),
        "considered": p.considered,
        "refused": p.refused,
        "pruned": p.pruned,
        "evaluated": p.considered - p.refused - p.pruned,
        "simulations": p.simulations,
        "verified": int((p.table["status"] == "verified").sum()),
        "frontier": p.frontier.height,
        "best": best.get("configuration"),
        "best_gpus": best.get("gpus"),
        "best_rate_per_s": best.get("rate_per_s"),
        "best_tokens_per_s_per_gpu": best.get("output_tokens_per_s_per_gpu"),
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--case", choices=sorted(CASES), default="qwen3-32b")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--no-prune-too", action="store_true")
    args = ap.parse_args()
    print(f"cores: {len(os.sched_getaffinity(0))}, load: {os.getloadavg()[0]:.2f}, kvwire {kvwire.__version__}")
    runs = [one(args.case, True) for _ in range(args.repeats)]
    for r in runs:
        print(json.dumps(r))
    print(f"pruned plan: median wall {statistics.median(float(r['wall_s']) for r in runs):.3f} s")
    if args.no_prune_too:
        full = one(args.case, False)
        print(json.dumps(full))
        saved = int(full["simulations"]) - int(runs[0]["simulations"])
        print(f"pruning saved {saved} simulations ({saved / int(full['simulations']):.1%}) "
              f"and {float(full['wall_s']) - float(runs[0]['wall_s']):.1f} s; same best: "
              f"{full['best'] == runs[0]['best']}")  # fmt: skip


if __name__ == "__main__":
    main()
