"""Plan Qwen3-32B on 32 x H200: the frontier for chat and for long-prompt RAG, with and without disaggregation,
and what the KV link changes.

``kvwire.plan`` searches every configuration the 32 GPUs hold (each pool's instances and tensor parallelism,
colocated or disaggregated) for the most output tokens/s per GPU that still meets the SLO, and returns the
frontier of throughput per GPU against tokens/s per user (the InferenceMAX axes). For each workload this script
plans three cases:

1. **colocated** only (no disaggregation: every instance prefills and decodes);
2. **disaggregated over InfiniBand NDR** (``ib-ndr``, 400 Gb/s per GPU);
3. **disaggregated over 100 GbE** (``eth-100g``): the same search with a link a quarter as fast.

The workloads: chat (prompts around 1k tokens, answers around 256) and RAG (prompts around 8k tokens, answers
around 128), each with its SLO (TTFT and TPOT within limits for 90% of the requests). Each case prints its best
configuration, the GPUs it uses, its rate, output tokens/s per GPU and per user, the resource that binds (the
analytic ceiling the configuration hits first: prefill, decode, the KV link or the colocated instances) and the
KV link's busy share; then two lines per workload compare the cases (differences in tok/s/GPU under 5%, the
plan's capacity-search tolerance, are called a tie). A best may use fewer GPUs than the budget: throughput per
GPU can be higher on fewer. Every figure is computed by the run; nothing is typed in.

Run: ``python examples/plan_qwen3_32b.py [FRONTIER.png|.svg]`` (about 6 s on two cores; with a file name and
matplotlib installed it also draws the three frontiers of each workload side by side, with
:func:`kvwire.plot.frontier`).
"""

from __future__ import annotations

import sys
from typing import Any

import kvwire

MODEL = "qwen3-32b"
BUDGET = {"h200": 32}
#: Requests per plan's full-length runs (its screening runs use at most 400).
REQUESTS = 600

WORKLOADS: dict[str, dict[str, Any]] = {
    "chat": {
        "workload": {
            "requests": REQUESTS,
            "prompt_tokens": {"dist": "lognormal", "mean": 1024.0, "cv": 0.5, "max": 4096},
            "output_tokens": {"dist": "lognormal", "mean": 256.0, "cv": 0.5, "max": 1024},
        },
        "slo": {"ttft_s": 1.0, "tpot_s": 0.05},
    },
    "RAG, 8k-token prompts": {
        "workload": {
            "requests": REQUESTS,
            "prompt_tokens": {"dist": "lognormal", "mean": 8192.0, "cv": 0.3, "max": 16384},
            "output_tokens": {"dist": "lognormal", "mean": 128.0, "cv": 0.5, "max": 512},
        },
        "slo": {"ttft_s": 3.0, "tpot_s": 0.05},
    },
}
#: Relative differences in tok/s/GPU below this are called a tie: the plan's capacity searches stop at a 5%
#: bracket (``kvwire.plan``'s ``rel_tol``), so smaller differences are within their tolerance.
TIE = 0.05
#: The cases planned for each workload: a label and the space searched.
CASES: dict[str, dict[str, Any]] = {
    "colocated": {"mode": ["colocated"]},
    "disaggregated, ib-ndr": {"mode": ["disaggregated"], "link": ["ib-ndr"]},
    "disaggregated, eth-100g": {"mode": ["disaggregated"], "link": ["eth-100g"]},
}


def plan_all() -> dict[str, dict[str, kvwire.PlanResult]]:
    """{workload: {case: plan}}."""
    return {
        name: {case: kvwire.plan(MODEL, BUDGET, space=space, **spec) for case, space in CASES.items()}
        for name, spec in WORKLOADS.items()
    }


def line(case: str, p: kvwire.PlanResult) -> str:
    b = p.best
    if b is None:
        return f"  {case:<24} no configuration meets the SLO"
    busy = f", link busy {b['link_utilisation']:.0%}" if b.get("link_utilisation") is not None else ""
    return (
        f"  {case:<24} best {b['configuration']} ({b['gpus']} GPUs) at {b['rate_per_s']:.1f} req/s: "
        f"{b['output_tokens_per_s_per_gpu']:,.0f} tok/s/GPU, {b['output_tokens_per_s_per_user']:.1f} tok/s/user, "
        f"binding {b['binding']}{busy}; {p.frontier.height} frontier row{'' if p.frontier.height == 1 else 's'}"
    )


def verdict(plans: dict[str, kvwire.PlanResult]) -> str:
    """Disaggregation against colocation (each over its best link), and eth-100g against ib-ndr."""
    best = {c: p.best or {} for c, p in plans.items()}
    gpu = {c: b.get("output_tokens_per_s_per_gpu") or 0.0 for c, b in best.items()}
    colo, ib, eth = gpu["colocated"], gpu["disaggregated, ib-ndr"], gpu["disaggregated, eth-100g"]
    vs = max(ib, eth) / colo - 1.0 if colo else float("inf")
    link = eth / ib - 1.0 if ib else float("nan")
    if abs(vs) < TIE:
        said = f"disaggregated and colocated tie on tok/s/GPU (disaggregated {vs:+.1%}, within the 5% tolerance)"
    else:
        said = f"{'disaggregated' if vs > 0 else 'colocated'} wins on tok/s/GPU (disaggregated {vs:+.1%})"
    ib_best, eth_best = best["disaggregated, ib-ndr"], best["disaggregated, eth-100g"]
    return (
        f"  -> {said}\n  -> eth-100g instead of ib-ndr: {link:+.1%} tok/s/GPU; best {eth_best.get('configuration')} "
        f"({eth_best.get('gpus')} GPUs) instead of {ib_best.get('configuration')} ({ib_best.get('gpus')} GPUs)"
    )


def draw(results: dict[str, dict[str, kvwire.PlanResult]], path: str) -> None:
    """The three frontiers of each workload, one panel each."""
    try:
        from matplotlib.figure import Figure
    except ImportError:
        print(f"(no plot: {path} needs matplotlib: pip install 'kvwire[plot]')")
        return
    from kvwire import plot

    fig = Figure(figsize=(15, 5.5), layout="constrained")
    for ax, (name, plans) in zip(fig.subplots(1, len(results)), results.items(), strict=True):
        plot.frontier(plans, ax=ax)
        ax.set_title(f"{MODEL} on 32 x H200, {name}", fontsize="medium")
    fig.savefig(path)
    print(f"wrote {path}")


def main(argv: list[str]) -> None:
    results = plan_all()
    for name, plans in results.items():
        print(f"{MODEL} on 32 x H200, {name} (SLO TTFT {WORKLOADS[name]['slo']['ttft_s']} s, "
              f"TPOT {WORKLOADS[name]['slo']['tpot_s'] * 1e3:.0f} ms, 90% of requests):")  # fmt: skip
        for case, p in plans.items():
            print(line(case, p))
        print(verdict(plans))
    if argv:
        draw(results, argv[0])


if __name__ == "__main__":
    main(sys.argv[1:])
