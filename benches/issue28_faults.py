"""1M requests with and without instance faults: the core's wall time (``stats.wall_s``), in pairs, default
first (issue 28's performance target: faults with each instance failing about ten times ≤ 1.5x the default;
its KV tiers are not built yet). The MTBF is a tenth of the default run's length, so each of the two instances
fails about ten times; the repairs take 1% of it. Run: ``taskset -c 1 python benches/issue28_faults.py [pairs]``.
"""

from __future__ import annotations

import statistics
import sys
from typing import Any

import kvwire

DEFAULT: dict[str, Any] = {"workload": {"requests": 1_000_000}}


def main(pairs: int) -> None:
    horizon = kvwire.simulate(DEFAULT).stats["horizon_s"]
    cycle = horizon / 10
    faults = {**DEFAULT, "faults": {"instance": {"mtbf_s": 0.99 * cycle, "mttr_s": 0.01 * cycle}, "max_retries": 100}}
    base_s, fault_s = [], []
    for _ in range(pairs):
        base_s.append(kvwire.simulate(DEFAULT).stats["wall_s"])
        res = kvwire.simulate(faults)
        fault_s.append(res.stats["wall_s"])
    f = res.summary["faults"]
    ratios = [b / a for a, b in zip(base_s, fault_s, strict=True)]
    print(
        f"failures {f['instance_failures']} over 2 instances, {f['retried_requests']:,} requests started over, "
        f"availability {f['availability']:.4f}"
    )
    print(f"default: median {statistics.median(base_s):.3f} s ({min(base_s):.3f}-{max(base_s):.3f})")
    print(f"faults:  median {statistics.median(fault_s):.3f} s ({min(fault_s):.3f}-{max(fault_s):.3f})")
    print(f"pair ratio faults/default: median {statistics.median(ratios):.3f} ({min(ratios):.3f}-{max(ratios):.3f})")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 5)
