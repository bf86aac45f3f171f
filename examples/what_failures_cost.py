"""What does a decode instance that fails once a day cost?

Four prefill and four decode H100s serve Llama-3-8B (prompts of 1,024 tokens on average, answers of 512;
SLO TTFT 1 s, TPOT 50 ms) at 80% of the decode pool's analytic ceiling. Each decode instance fails about once
a day (MTBF 24 h) and is back ten minutes later (MTTR). A failed decode instance loses every sequence it was
decoding and every hand-off waiting on it: those requests start over (prefilled again, handed off again), and
for ten minutes the other three decode instances carry 4/3 of their load.

The answer comes two ways:

1. **One failure, priced**: an hour with one decode instance down for ten minutes against the same hour
   without, same requests — the SLO-meeting requests the failure costs, the requests that started over and
   the work thrown away. Times the expected failures a day (4 instances x 24 h / (24 h + 10 min)), over a
   day's SLO-meeting requests, that is the goodput a day of failures costs.
2. **A day, simulated**: 24 h of traffic with random failures (exponential up times of mean 24 h, repairs of
   mean 10 min) against the same day without, which also says how many failures that day had.

Not modelled yet: recovery that re-sends KV a prefill instance still holds (paged KV holding), which would
spare the re-prefill. Run: ``python examples/what_failures_cost.py`` (about half a minute: two simulated days
of 6.4M requests). Every figure printed is computed by the run.
"""

from __future__ import annotations

from typing import Any

import kvwire

HOUR_S = 3600.0
DAY_S = 24 * HOUR_S
MTBF_S = DAY_S
MTTR_S = 600.0
LOAD = 0.8

BASE: dict[str, Any] = {
    "prefill": {"device": "h100", "instances": 4},
    "decode": {"device": "h100", "instances": 4},
    "workload": {
        "seed": 11,
        "prompt_tokens": {"dist": "lognormal", "mean": 1024, "cv": 0.5, "max": 8192},
        "output_tokens": {"dist": "lognormal", "mean": 512, "cv": 0.5, "max": 4096},
    },
    "slo": {"ttft_s": 1.0, "tpot_s": 0.05},
    "metrics": {"warmup_fraction": 0.0},
}


def scenario(rate: float, seconds: float, faults: dict[str, Any] | None = None) -> dict[str, Any]:
    """BASE at ``rate`` req/s for ``seconds`` of arrivals, with ``faults`` if given."""
    sc: dict[str, Any] = {**BASE, "workload": {**BASE["workload"], "requests": round(rate * seconds)}}
    sc["workload"]["arrivals"] = {"process": "poisson", "rate_per_s": rate}
    if faults is not None:
        sc["faults"] = faults
    return sc


def met(summary: dict[str, Any]) -> int:
    """Requests that met the SLO (attainment x measured; warm-up is off, so every request is measured)."""
    return round(summary["slo"]["attainment"] * summary["requests"]["measured"])


def main() -> None:
    ceiling = kvwire.ceilings(scenario(1.0, 2000.0))
    rate = LOAD * ceiling["decode_req_per_s"]
    print(
        f"4P4D H100, Llama-3-8B: decode ceiling {ceiling['decode_req_per_s']:.1f} req/s "
        f"(binding: {ceiling['binding']}); offered {rate:.1f} req/s ({LOAD:.0%})"
    )

    # 1. One failure in an hour, against the same hour without it.
    hour = scenario(rate, HOUR_S)
    outage = {"events": [{"instance": "decode-0", "at_s": 20 * 60.0, "for_s": MTTR_S}]}
    plain, failed = kvwire.simulate(hour).summary, kvwire.simulate({**hour, "faults": outage}).summary
    cost = met(plain) - met(failed)
    f = failed["faults"]
    print(
        f"one decode failure (10 min down): {cost:,} fewer requests within the SLO "
        f"({met(plain):,} -> {met(failed):,} of {plain['requests']['total']:,} in the hour); "
        f"{f['retried_requests']:,} started over, {f['lost_work_s'] / 3600:.2f} h of work thrown away, "
        f"{f['failed_requests']} failed"
    )
    per_day = 4 * DAY_S / (MTBF_S + MTTR_S)
    day_met = met(plain) * DAY_S / HOUR_S
    print(
        f"expected: {per_day:.2f} failures a day x {cost:,} = {per_day * cost:,.0f} requests a day, "
        f"{per_day * cost / day_met:.2%} of the day's goodput"
    )

    # 2. A day with random failures, against the same day without.
    day = scenario(rate, DAY_S)
    random = {"instance": {"mtbf_s": MTBF_S, "mttr_s": MTTR_S, "pools": ["decode"]}, "max_retries": 10}
    day_plain = kvwire.simulate(day, keep_requests=False).summary
    day_faults = kvwire.simulate({**day, "faults": random}).summary
    g = day_faults["faults"]
    lost = met(day_plain) - met(day_faults)
    print(
        f"a simulated day: {g['instance_failures']} decode failures, availability {g['availability']:.5f}; "
        f"{lost:,} fewer requests within the SLO ({lost / met(day_plain):.2%} of the day's goodput), "
        f"{g['retried_requests']:,} started over; per failure {lost / max(g['instance_failures'], 1):,.0f} "
        f"(the priced hour: {cost:,})"
    )


if __name__ == "__main__":
    main()
