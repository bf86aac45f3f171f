"""Issue 25's performance figures for the measured timing source (``benches/README.md``):

- building a pool's step-time table cold (a fresh cache folder), from the disk cache (a fresh process's first
  read) and from memory, for Llama 3.1 8B on H100 SXM and Qwen3-235B-A22B at TP 8 x EP 8 on H200 SXM;
- a 1M-request default run's core time (``stats["wall_s"]``) on the roofline and on the measured source,
  alternated, five of each.

    taskset -c 1 python benches/issue25_timing.py

Needs ``pip install 'kvwire[measured]'``.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time

SCRIPT_RESOLVE = """
import sys, time
from kvwire.scenario.load import scenario_json
from kvwire.timing import resolve
import json
sc = json.loads(sys.argv[1])
t = time.perf_counter(); scenario_json(sc); first = time.perf_counter() - t
how = {k: v["cache"] for k, v in resolve.LAST_BUILD.items()}
t = time.perf_counter(); scenario_json(sc); again = time.perf_counter() - t
print(json.dumps({"first_s": first, "how": how, "again_s": again,
                  "per_pool_s": {k: v["seconds"] for k, v in resolve.LAST_BUILD.items()}}))
"""

CASES = {
    "llama3.1-8b, h100_sxm, TP1": {"model": "llama3.1-8b", "cost": {"timing": {"source": "aiconfigurator"}}},
    "qwen3-235b-a22b, h200_sxm, TP8 x EP8": {
        "model": "qwen3-235b-a22b",
        "prefill": {"device": "h200", "devices_per_instance": 8, "parallel": {"tp": 8, "ep": 8}},
        "decode": {"device": "h200", "devices_per_instance": 8, "parallel": {"tp": 8, "ep": 8}},
        "cost": {"timing": {"source": "aiconfigurator"}},
    },
}


def resolve_in_a_new_process(sc: dict, cache: str) -> dict:
    import json

    env = {**os.environ, "KVWIRE_CACHE_DIR": cache}
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT_RESOLVE, json.dumps(sc)], env=env, capture_output=True, text=True
    )
    if out.returncode:
        raise SystemExit(out.stderr)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    with tempfile.TemporaryDirectory() as cache:
        for name, sc in CASES.items():
            cold = resolve_in_a_new_process(sc, cache)
            warm = resolve_in_a_new_process(sc, cache)
            print(
                f"{name}: cold {cold['first_s']:.2f} s ({cold['how']}), disk cache {warm['first_s'] * 1e3:.0f} ms "
                f"({warm['how']}; per pool {', '.join(f'{v * 1e3:.0f} ms' for v in warm['per_pool_s'].values())}), "
                f"memory {warm['again_s'] * 1e3:.1f} ms"
            )
        os.environ["KVWIRE_CACHE_DIR"] = cache
        import kvwire

        measured = {"workload": {"requests": 1_000_000}, "cost": {"timing": {"source": "aiconfigurator"}}}
        roofline = {"workload": {"requests": 1_000_000}}
        kvwire.simulate({**measured, "workload": {"requests": 10}})  # the table built, not timed below
        walls: dict[str, list[float]] = {"roofline": [], "measured": []}
        for _ in range(5):
            for label, sc in (("roofline", roofline), ("measured", measured)):
                t = time.perf_counter()
                r = kvwire.simulate(sc)
                whole = time.perf_counter() - t
                walls[label].append(r.stats["wall_s"])
                print(f"  {label}: core {r.stats['wall_s']:.3f} s, whole simulate {whole:.3f} s")
        a, b = statistics.median(walls["roofline"]), statistics.median(walls["measured"])
        print(f"1M default: core median roofline {a:.3f} s, measured {b:.3f} s, ratio {b / a:.2f}")


if __name__ == "__main__":
    main()
