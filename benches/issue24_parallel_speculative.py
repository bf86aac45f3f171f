"""1M requests of Mixtral-8x7B with and without parallel layouts and speculative decoding: the core's wall time
(``stats.wall_s``), decode steps and mean decode batch per scenario (issue 24's performance target; the table
is in ``benches/HISTORY.md``, 2026-12-03). Run: ``taskset -c 1 python benches/issue24_parallel_speculative.py``.
"""

from __future__ import annotations

from typing import Any

import kvwire

BASE: dict[str, Any] = {"model": "mixtral-8x7b", "workload": {"requests": 1_000_000}}
EIGHT = {"prefill": {"devices_per_instance": 8}, "decode": {"devices_per_instance": 8}}
PARALLEL = {"prefill": {"parallel": {"tp": 8, "ep": 8}}, "decode": {"parallel": {"tp": 8, "ep": 8}}}
MTP = {"speculative": {"method": "mtp", "tokens": 3, "acceptance": 0.7}}

SCENARIOS: dict[str, dict[str, Any]] = {
    "default (Llama-3-8B)": {"workload": {"requests": 1_000_000}},
    "8 devices, no parallel": {**BASE, **EIGHT},
    "8 devices, macro-steps off": {**BASE, **EIGHT, "engine": {"macro_steps": False}},
    "TP 8 x EP 8": {**BASE, **PARALLEL},
    "TP 8 x EP 8 + MTP": {**BASE, **PARALLEL, **MTP},
    "8 devices + MTP": {**BASE, **EIGHT, **MTP},
}


def main() -> None:
    for name, sc in SCENARIOS.items():
        res = kvwire.simulate(sc)
        dec = res.stats["instances"][-1]
        steps = dec["decode_steps"]
        batch = dec["decode_batch_sum"] / max(1, steps)
        print(f"{name:<28} {res.stats['wall_s']:.3f} s, decode steps {steps:,}, mean batch {batch:.1f}")


if __name__ == "__main__":
    main()
