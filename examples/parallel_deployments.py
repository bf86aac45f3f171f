"""Deployments as they are run: parallel placements, expert parallelism and multi-token prediction.

Two questions a serving team asks before buying or re-partitioning GPUs, answered with ``kvwire.simulate``
and ``kvwire.capacity`` on the parallel layouts of ``docs/concepts/parallelism.md``:

1. **DistServe's OPT-66B placement** (Zhong et al., OSDI 2024, their Table/Figure for OPT-66B on A100-80GB):
   prefill on TP 4, decode on TP 2 x PP 2 (one batch at a time through the two stages, and two micro-batches
   in flight as vLLM's virtual engines keep them) — against the same eight GPUs colocated as one TP 8
   instance, and as two colocated TP 4 instances. A chatbot-like workload (prompts around 512 tokens,
   answers around 256) with DistServe's chatbot SLOs (TTFT 2.5 s, TPOT 0.15 s): the highest rate each
   placement serves with 90% of requests within both SLOs.
2. **DeepSeek-V3 on 2 x 8 H200** (one node prefills, one decodes, over InfiniBand): prefill TP 8 with EP 8,
   decode attention-DP 8 with EP 8, with DeepSeek's one MTP head (one draft token per step) off and on at 85%
   acceptance (the second-token acceptance DeepSeek-V3's report gives, 85-90%).

Run: ``python examples/parallel_deployments.py`` (about a second). Every figure printed is computed by the run;
nothing is typed in. Read the OPT-66B lines with kvwire's pipeline model in mind: one batch passes the two
decode stages in turn, so TP 2 x PP 2 decodes at half the rate the same four GPUs would as TP 4; with two
micro-batches in flight each stage works on one while the other is on the next stage, every token period
reads the stage's weights twice, and decoding gains only the split of its KV reads
(``docs/concepts/parallelism.md``, "Micro-batches in the pipeline").
"""

from __future__ import annotations

from typing import Any

import kvwire

CHAT: dict[str, Any] = {
    "prompt_tokens": {"dist": "lognormal", "mean": 512.0, "cv": 0.5, "max": 1536},
    "output_tokens": {"dist": "lognormal", "mean": 256.0, "cv": 0.5, "max": 512},
}
SLO = {"ttft_s": 2.5, "tpot_s": 0.15}

PLACEMENTS: dict[str, dict[str, Any]] = {
    "disaggregated P TP4 | D TP2xPP2": {
        "prefill": {"device": "a100", "parallel": {"tp": 4}},
        "decode": {"device": "a100", "parallel": {"tp": 2, "pp": 2}},
        "link": "nvlink3",
    },
    "disaggregated P TP4 | D TP2xPP2 x2mb": {
        "prefill": {"device": "a100", "parallel": {"tp": 4}},
        "decode": {"device": "a100", "parallel": {"tp": 2, "pp": 2, "micro_batches": 2}},
        "link": "nvlink3",
    },
    "colocated 1 x TP8": {"mode": "colocated", "colocated": {"device": "a100", "instances": 1, "parallel": {"tp": 8}}},
    "colocated 2 x TP4": {"mode": "colocated", "colocated": {"device": "a100", "instances": 2, "parallel": {"tp": 4}}},
}


def opt66b(placement: dict[str, Any], rate: float, requests: int = 600) -> dict[str, Any]:
    """The OPT-66B scenario of one placement at ``rate`` requests/s."""
    return {
        "model": "opt-66b",
        **placement,
        "slo": SLO,
        "workload": {"requests": requests, "arrivals": {"rate_per_s": rate}, **CHAT},
    }


def deepseek(mtp: bool) -> dict[str, Any]:
    """DeepSeek-V3 on two 8-GPU H200 nodes, MTP off or on."""
    sc: dict[str, Any] = {
        "model": "deepseek-v3",
        "prefill": {"device": "h200", "parallel": {"tp": 8, "ep": 8}},
        "decode": {"device": "h200", "parallel": {"dp": 8, "ep": 8}},
        "link": "ib-ndr",
        "workload": {
            "requests": 2000,
            "arrivals": {"rate_per_s": 4.0},
            "prompt_tokens": {"dist": "lognormal", "mean": 2048.0, "cv": 0.5, "max": 8192},
            "output_tokens": {"dist": "lognormal", "mean": 512.0, "cv": 0.5, "max": 2048},
        },
    }
    if mtp:
        sc["speculative"] = {"method": "mtp", "tokens": 1, "acceptance": 0.85}
    return sc


def main() -> None:
    print("OPT-66B on 8 x A100-80GB, chatbot SLOs (TTFT 2.5 s, TPOT 0.15 s):")
    for name, placement in PLACEMENTS.items():
        res = kvwire.simulate(opt66b(placement, 2.0))
        s = res.summary
        comm = ", ".join(f"{k} {v['comm_fraction']:.0%}" for k, v in s["instances"].items())
        cap = kvwire.capacity(opt66b(placement, 2.0), slo_attainment=0.9)
        print(
            f"  {name:<36} at 2 req/s: TTFT p99 {s['latency']['ttft_s']['p99']:.2f} s, TPOT p50 "
            f"{s['latency']['tpot_s']['p50'] * 1e3:.1f} ms, collectives {comm}; "
            f"capacity {cap.capacity or 0.0:.2f} req/s at 90% SLO"
        )
    print("DeepSeek-V3 on 2 x 8 H200 (prefill TP8 EP8 | decode DP8 EP8, InfiniBand), 4 req/s:")
    for mtp in (False, True):
        s = kvwire.simulate(deepseek(mtp)).summary
        extra = f", {s['speculative']['tokens_per_step']:.2f} tokens per verify step" if mtp else ""
        print(
            f"  MTP {'on ' if mtp else 'off'}: TTFT p99 {s['latency']['ttft_s']['p99']:.3f} s, TPOT p50 "
            f"{s['latency']['tpot_s']['p50'] * 1e3:.2f} ms, ITL p50 {s['latency']['itl_s']['p50'] * 1e3:.2f} ms{extra}"
        )


if __name__ == "__main__":
    main()
