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

Run: ``python examples/when_to_stay_colocated.py`` (about a minute). Every figure printed is computed by the
run; nothing is typed in.
"""

from __future__ import annotations

from typing import Any

import kvwire

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
CONFIGS = ["colocated", "disaggregated", "conditional"]
REQUESTS = 4000


def scenario(workload: str, rate: float, link: str, config: str) -> dict[str, Any]:
    w = WORKLOADS[workload]
    sc: dict[str, Any] = {
        "workload": {
            "requests": REQUESTS,
            "seed": 7,
            "arrivals": {"rate_per_s": rate},
            "prompt_tokens": w["prompt_tokens"],
            "output_tokens": w["output_tokens"],
        },
        "slo": w["slo"],
    }
    if config == "colocated":
        sc.update({"mode": "colocated", "colocated": {"device": "h100", "instances": 4}})
    else:
        sc.update(
            {
                "prefill": {"device": "h100", "instances": 2},
                "decode": {"device": "h100", "instances": 2},
                "link": link,
            }
        )
        if config == "conditional":
            sc["router"] = {"disaggregate": {"policy": "conditional", "max_link_wait_s": 0.1}}
    return sc


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
    for workload, w in WORKLOADS.items():
        for rate in w["rates"]:
            for link in LINKS:
                results = {}
                for config in CONFIGS:
                    s = kvwire.simulate(scenario(workload, rate, link, config)).summary
                    results[config] = s
                    local = s["link"]["local_decodes"] / s["requests"]["completed"] if s["link"] else 1.0
                    lat = s["latency"]
                    print(
                        f"{workload:<8}{rate:>7g} {link:<9}{config:<15}{lat['ttft_s']['p99']:>9.2f}s"
                        f"{lat['tpot_s']['p99'] * 1e3:>8.0f}ms{s['slo']['attainment']:>9.1%}"
                        f"{s['slo']['goodput_req_per_s'] or 0:>9.1f}{s['energy']['j_per_output_token']:>9.3f}"
                        f"{local:>7.0%}"
                    )

                def rank(c: str, results: dict[str, Any] = results) -> tuple[float, float, float]:
                    s = results[c]
                    return (s["slo"]["attainment"], s["slo"]["goodput_req_per_s"] or 0.0,
                            -s["energy"]["j_per_output_token"])  # fmt: skip

                best = max(CONFIGS, key=rank)
                verdicts.append((workload, rate, link, best, results))
    print()
    print("Best configuration (SLO attainment, then goodput, then energy per token); rho = request rate / the")
    print("rate at which mean-size hand-offs alone fill the link:")
    rows = []
    for workload, rate, link, best, results in verdicts:
        full = kvwire.handoff("llama3-8b", round(WORKLOADS[workload]["prompt_tokens"]["mean"]), link=link)
        rho = rate / full["link_full_rate_per_s"]
        att = {c: results[c]["slo"]["attainment"] for c in CONFIGS}
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


if __name__ == "__main__":
    main()
