"""The reference simulator's published figures (``../shared/spec/handoff.md``, "Figures the simulator must
reproduce") against kvwire run in the reference's configuration: LM head on every prompt token, TTFT at the
first token out of prefill, the seed-1 workload of 800 requests.

    python benches/fidelity_reference.py
"""

from __future__ import annotations

from typing import Any

import kvwire

REFERENCE: dict[str, Any] = {"cost": {"prefill_lm_head": "all"}, "metrics": {"first_token": "prefill"}}

#: (configuration, scenario fields, [(figure, published value, how to read it from the summary)]).
CASES: list[tuple[str, dict[str, Any], list[tuple[str, float, Any]]]] = [
    (
        "8 req/s, H100 -> H100, InfiniBand",
        {},
        [
            ("TTFT p99, ms", 353.6, lambda s: s["latency"]["ttft_s"]["p99"] * 1e3),
            ("TPOT p99, ms", 8.8, lambda s: s["latency"]["tpot_s"]["p99"] * 1e3),
            ("SLO met, %", 100.0, lambda s: s["slo"]["attainment"] * 100),
            ("J per output token", 0.326, lambda s: s["energy"]["j_per_output_token"]),
        ],
    ),
    (
        "same, decode on A100",
        {"decode": {"device": "a100"}},
        [
            ("TPOT p99, ms", 16.8, lambda s: s["latency"]["tpot_s"]["p99"] * 1e3),
            ("J per output token", 0.299, lambda s: s["energy"]["j_per_output_token"]),
        ],
    ),
    (
        "prefill on A100, decode on H100",
        {"prefill": {"device": "a100"}},
        [("TTFT p99, s", 47.1, lambda s: s["latency"]["ttft_s"]["p99"])],
    ),
    (
        "two A100 prefill instances",
        {"prefill": {"device": "a100", "instances": 2}},
        [
            ("TTFT p99, ms", 1093.5, lambda s: s["latency"]["ttft_s"]["p99"] * 1e3),
            ("SLO met, %", 96.9, lambda s: s["slo"]["attainment"] * 100),
        ],
    ),
    (
        "8 req/s over 25 GbE",
        {"link": "eth-25g"},
        [("TPOT p99, ms", 11.6, lambda s: s["latency"]["tpot_s"]["p99"] * 1e3)],
    ),
    (
        "14 req/s over 25 GbE",
        {"link": "eth-25g", "workload": {"arrivals": {"rate_per_s": 14.0}}},
        [
            ("hand-off p99, ms", 9657.8, lambda s: s["latency"]["handoff_s"]["p99"] * 1e3),
            ("TPOT p99, ms", 77.2, lambda s: s["latency"]["tpot_s"]["p99"] * 1e3),
            ("SLO met, %", 41.0, lambda s: s["slo"]["attainment"] * 100),
        ],
    ),
    (
        "14 req/s over 25 GbE, fp8 in the link",
        {"link": "eth-25g", "workload": {"arrivals": {"rate_per_s": 14.0}}, "handoff": {"compression": "fp8"}},
        [
            ("hand-off p99, ms", 166.6, lambda s: s["latency"]["handoff_s"]["p99"] * 1e3),
            ("TPOT p99, ms", 11.5, lambda s: s["latency"]["tpot_s"]["p99"] * 1e3),
        ],
    ),
]


def main() -> None:
    print(f"{'configuration':<40} {'figure':<20} {'published':>10} {'kvwire':>10}")
    for name, fields, figures in CASES:
        sc = {**REFERENCE, **fields}
        s = kvwire.simulate(sc).summary
        for figure, published, read in figures:
            digits = 3 if published < 1 else 1
            print(f"{name:<40} {figure:<20} {published:>10.{digits}f} {read(s):>10.{digits}f}")


if __name__ == "__main__":
    main()
