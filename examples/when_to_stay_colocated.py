"""When should prefill and decode stay on the same worker?

The seed article's answer is qualitative: "keep them together when the prompt is small, the expected output is
short, the network path is congested, or the decode worker cannot import the cache layout directly". This
example answers with numbers for two workloads on four H100s serving Llama-3-8B:

* chat — short prompts (mean 161 tokens, cv 1), long answers (mean 338), SLO TTFT 1 s / TPOT 50 ms;
* long-prompt RAG — mean 7,904 prompt tokens (cv 0.5), 230 output tokens, SLO TTFT 5 s / TPOT 50 ms

(the reference simulator's `chat` and `long-rag` workload presets), each over a 25 GbE link and over NVLink 4,
at a moderate and a high request rate, comparing

* colocated: four instances that both prefill and decode (a waiting prompt pre-empts the next decode step);
* disaggregated: two prefill and two decode instances, every request handed off;
* conditional: the same 2 + 2, but a request stays on its prefill instance when the link's estimated wait
  exceeds 100 ms.

It is two calls per workload: ``kvwire.sweep`` runs the split configurations over link x policy x rate, and
``kvwire.compare`` puts the same four H100s colocated beside them — at each rate, and as the highest rate each
sustains with 90% of requests within the SLO (``kvwire.capacity``, bisection from the analytic ceilings).

Run: ``python examples/when_to_stay_colocated.py`` (a few seconds). Every figure printed is computed by the
run; nothing is typed in.
"""

from __future__ import annotations

import json
from typing import Any

import kvwire
import polars as pl

WORKLOADS: dict[str, dict[str, Any]] = {
    "chat": {
        "prompt_tokens": {"dist": "lognormal", "mean": 161.31, "cv": 1.0, "max": 1024},
        "output_tokens": {"dist": "lognormal", "mean": 337.99, "cv": 1.0, "max": 1024},
        "slo": {"ttft_s": 1.0, "tpot_s": 0.05},
        "rates": [100.0, 300.0],
    },
    "rag": {
        "prompt_tokens": {"dist": "lognormal", "mean": 7904.0, "cv": 0.5, "max": 15360},
        "output_tokens": {"dist": "lognormal", "mean": 230.0, "cv": 0.48, "max": 1024},
        "slo": {"ttft_s": 5.0, "tpot_s": 0.05},
        "rates": [2.0, 5.0],
    },
}
LINKS = ["eth-25g", "nvlink4"]
POLICIES = {"disaggregated": {"policy": "always"}, "conditional": {"policy": "conditional", "max_link_wait_s": 0.1}}
CONFIGS = ["colocated", "disaggregated", "conditional"]
REQUESTS = 4000
RATE = "workload.arrivals.rate_per_s"


def split_scenario(workload: str) -> dict[str, Any]:
    """Two prefill and two decode H100s serving the workload (link, policy and rate are swept)."""
    w = WORKLOADS[workload]
    return {
        "workload": {
            "requests": REQUESTS,
            "seed": 7,
            "prompt_tokens": w["prompt_tokens"],
            "output_tokens": w["output_tokens"],
        },
        "slo": w["slo"],
        "prefill": {"device": "h100", "instances": 2},
        "decode": {"device": "h100", "instances": 2},
    }


def results(workload: str) -> tuple[pl.DataFrame, dict[str, Any]]:
    """The table of every (rate, link, config) and each link's capacity comparison."""
    w = WORKLOADS[workload]
    base = split_scenario(workload)
    split = kvwire.sweep(base, {RATE: w["rates"], "link": LINKS, "router.disaggregate": list(POLICIES.values())})
    # An object-valued swept field is a column of its JSON text (sorted keys): name the policies back.
    names = {json.dumps(v, sort_keys=True): k for k, v in POLICIES.items()}
    split = split.with_columns(config=pl.col("router.disaggregate").replace_strict(names))
    rows = [split]
    comparisons = {}
    for link in LINKS:
        # The colocated twin of the split (4 instances of the same device) at the first rate, and the capacity
        # of both modes; the twin does not depend on the link.
        cmp = kvwire.compare({**base, "link": link, "workload": {**base["workload"], "arrivals": {"rate_per_s": 1.0}}})
        comparisons[link] = cmp
    colocated = kvwire.sweep(comparisons[LINKS[0]].scenarios["colocated"], {RATE: w["rates"]})
    for link in LINKS:
        rows.append(colocated.with_columns(link=pl.lit(link), config=pl.lit("colocated")))
    table = pl.concat([r.select(RATE, "link", "config", pl.all().exclude(RATE, "link", "config")) for r in rows],
                      how="diagonal_relaxed")  # fmt: skip
    return table, comparisons


def main() -> None:
    print(__doc__.split("\n\n")[0])
    print()
    for workload, w in WORKLOADS.items():
        mean_prompt = w["prompt_tokens"]["mean"]
        for link in LINKS:
            h = kvwire.handoff("llama3-8b", round(mean_prompt), link=link)
            print(
                f"{workload}: a mean-size hand-off is {h['handoff_bytes'] / 1e6:,.0f} MB, "
                f"{h['transfer_s'] * 1e3:,.1f} ms on {link}; hand-offs alone fill the link at "
                f"{h['link_full_rate_per_s']:,.1f} req/s"
            )
    print()
    header = f"{'workload':<8}{'req/s':>7} {'link':<9}{'config':<15}{'TTFT p99':>10}{'TPOT p99':>10}{'SLO met':>9}"
    header += f"{'goodput':>9}{'J/token':>9}{'local':>7}"
    print(header)
    verdicts = []
    capacities = []
    for workload, w in WORKLOADS.items():
        table, comparisons = results(workload)
        for rate in w["rates"]:
            for link in LINKS:
                results_by_config = {}
                for config in CONFIGS:
                    s = table.filter((pl.col(RATE) == rate) & (pl.col("link") == link) & (pl.col("config") == config))
                    r = s.row(0, named=True)
                    results_by_config[config] = r
                    transfers = r.get("link.local_decodes")
                    local = transfers / r["requests.completed"] if transfers is not None else 1.0
                    print(
                        f"{workload:<8}{rate:>7g} {link:<9}{config:<15}{r['latency.ttft_s.p99']:>9.2f}s"
                        f"{r['latency.tpot_s.p99'] * 1e3:>8.0f}ms{r['slo.attainment']:>9.1%}"
                        f"{r['slo.goodput_req_per_s'] or 0:>9.1f}{r['energy.j_per_output_token']:>9.3f}"
                        f"{local:>7.0%}"
                    )

                def rank(c: str, res: dict[str, Any] = results_by_config) -> tuple[float, float, float]:
                    r = res[c]
                    return (r["slo.attainment"], r["slo.goodput_req_per_s"] or 0.0, -r["energy.j_per_output_token"])

                best = max(CONFIGS, key=rank)
                verdicts.append((workload, rate, link, best, results_by_config))
        for link in LINKS:
            cap = comparisons[link].capacity
            capacities.append((workload, link, cap["disaggregated"], cap["colocated"]))
    print()
    print("Best configuration (SLO attainment, then goodput, then energy per token); rho = request rate / the")
    print("rate at which mean-size hand-offs alone fill the link:")
    rows = []
    for workload, rate, link, best, res in verdicts:
        full = kvwire.handoff("llama3-8b", round(WORKLOADS[workload]["prompt_tokens"]["mean"]), link=link)
        rho = rate / full["link_full_rate_per_s"]
        att = {c: res[c]["slo.attainment"] for c in CONFIGS}
        others = ", ".join(f"{c} {att[c]:.0%}" for c in CONFIGS if c != best)
        print(
            f"  {workload:<5} at {rate:>5g} req/s over {link:<8} (rho {rho:5.2f}): {best:<14} "
            f"({att[best]:.0%} of SLOs; {others})"
        )
        rows.append((rho, best, att))
    for label, sel in (("rho < 1", [r for r in rows if r[0] < 1]), ("rho >= 1", [r for r in rows if r[0] >= 1])):
        split = sum(1 for r in sel if r[1] != "colocated")
        lost = sum(1 for r in sel if r[2]["disaggregated"] < r[2]["colocated"])
        print(
            f"{label}: a split configuration was best in {split} of {len(sel)} cases; always handing off did "
            f"worse than staying colocated in {lost} of {len(sel)}."
        )
    print()
    print("Highest request rate with 90% of requests within the SLO (kvwire.compare: capacity search from the")
    print("analytic ceilings; the binding resource in brackets):")
    for workload, link, dis, col in capacities:
        print(
            f"  {workload:<5} over {link:<8}: disaggregated 2+2 {dis.capacity or 0:7.1f} req/s ({dis.binding}), "
            f"colocated 4 {col.capacity or 0:7.1f} req/s ({col.binding}); "
            f"{dis.evaluations + col.evaluations} simulations"
        )


if __name__ == "__main__":
    main()
