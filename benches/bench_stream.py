"""Bounded-memory replay benchmarks (issue 13 item 3): a generated file in the published Azure 2024 layout
(``bench_traces.write_azure_2024``: the conversation week's 45 req/s) replayed end to end on a 4P4D scenario
with ``keep_requests=False`` — the file read in chunks by Polars (twice: the core counts, then runs), the
summary computed in the core — and the streamed path against the in-memory one on the 1M-request default.

A normal ``pytest`` run executes each benchmark once on a small file (smoke test). To measure:

    KVWIRE_BENCH_STREAM_ROWS=27303999 pytest benches/bench_stream.py --benchmark-enable --benchmark-only -s

Each replay runs in a child process, which reports its own figures: wall time of ``simulate``, the core's
``run.wall_s``, the time spent inside the chunk iterator (the reader: Polars scan, row checks and numpy
conversion, both reads), and peak RSS (VmHWM) above a child that only imported kvwire. Record them with the
machine, date and ``uptime`` load in ``benches/README.md``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from bench_traces import write_azure_2024

ROWS = int(os.environ.get("KVWIRE_BENCH_STREAM_ROWS", "20000"))

#: 4 prefill + 4 decode H100 (Llama-3-8B, InfiniBand NDR): room for the week's 45 req/s mean.
SCENARIO: dict[str, Any] = {"prefill": {"instances": 4}, "decode": {"instances": 4}}

_PROBE = """
import json, sys, time
import kvwire, kvwire.run as run
mode, arg = sys.argv[1], sys.argv[2]
reader = [0.0]
scan_chunks = run._scan_chunks
def timed(scan, spec):
    make = scan_chunks(scan, spec)
    def chunks():
        it = make()
        while True:
            t = time.perf_counter()
            try:
                item = next(it)
            except StopIteration:
                reader[0] += time.perf_counter() - t
                return
            reader[0] += time.perf_counter() - t
            yield item
    return chunks
run._scan_chunks = timed
out = {}
if mode != "import":
    sc = json.loads(sys.argv[3])
    if mode.startswith("replay"):
        sc["workload"] = {"trace": {"file": arg}}
    else:
        sc["workload"] = {"requests": int(arg)}
    t = time.perf_counter()
    res = kvwire.simulate(sc, keep_requests=mode in ("memory", "replay-memory"))
    s = res.summary
    out = {"wall_s": time.perf_counter() - t, "core_wall_s": res.stats["wall_s"], "reader_s": reader[0],
           "completed": s["requests"]["completed"], "table_rows_peak": res.stats["table_rows_peak"],
           "ttft_p99_s": s["latency"]["ttft_s"]["p99"], "slo": s["slo"]["attainment"],
           "utilisation": s["utilisation"]}
hwm = [l for l in open("/proc/self/status") if l.startswith("VmHWM:")][0].split()[1]
out["maxrss_kib"] = int(hwm)
print(json.dumps(out))
"""


def _child(mode: str, arg: str) -> dict[str, Any]:
    cmd = [sys.executable, "-c", _PROBE, mode, arg, json.dumps(SCENARIO if mode.startswith("replay") else {})]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True)
    return dict(json.loads(out.stdout))


@pytest.fixture(scope="module")
def azure_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The Azure 2024 conversation-week layout with ROWS requests (written once per module)."""
    path = tmp_path_factory.mktemp("stream") / "AzureLLMInferenceTrace_conv_1week.csv"
    write_azure_2024(path, ROWS)
    return path


@pytest.fixture(scope="module")
def import_kib() -> int:
    """Peak RSS of a child that only imported kvwire."""
    return int(_child("import", "-")["maxrss_kib"])


def test_replay_streamed(benchmark: Any, azure_file: Path, import_kib: int) -> None:
    """End-to-end replay of the file on 4P4D with keep_requests=False: wall, core and reader time, peak RSS."""
    r = benchmark.pedantic(_child, args=("replay", str(azure_file)), rounds=1, iterations=1)
    r["peak_mb_above_import"] = (r["maxrss_kib"] - import_kib) * 1024 / 1e6
    r["peak_mb"] = r["maxrss_kib"] * 1024 / 1e6
    r["core_minus_reader_s"] = r["core_wall_s"] - r["reader_s"]
    benchmark.extra_info.update(r)
    print(json.dumps({"rows": ROWS, **r}))
    assert r["completed"] == ROWS


@pytest.mark.skipif(ROWS > 5_000_000, reason="the whole table would not fit (~400 B per request)")
def test_replay_in_memory(benchmark: Any, azure_file: Path, import_kib: int) -> None:
    """The same replay with keep_requests=True (file read whole, table kept, exact summary): the streamed
    path's cost against it on 4P4D."""
    r = benchmark.pedantic(_child, args=("replay-memory", str(azure_file)), rounds=1, iterations=1)
    r["peak_mb_above_import"] = (r["maxrss_kib"] - import_kib) * 1024 / 1e6
    benchmark.extra_info.update(r)
    print(json.dumps({"rows": ROWS, "mode": "in memory", **r}))
    assert r["completed"] == ROWS


@pytest.mark.parametrize("mode", ["stream", "memory"])
def test_generated_streamed_vs_in_memory(benchmark: Any, mode: str, import_kib: int) -> None:
    """The default scenario (1P1D, 8 req/s) with 1M requests (KVWIRE_BENCH_STREAM_ROWS ≥ 1M; else ROWS),
    streamed against in memory (table + exact summary): rows/s and peak RSS."""
    n = min(max(ROWS, 20_000), 1_000_000)
    r = benchmark.pedantic(_child, args=(mode, str(n)), rounds=1, iterations=1)
    r["rows_per_s"] = n / r["wall_s"]
    r["peak_mb_above_import"] = (r["maxrss_kib"] - import_kib) * 1024 / 1e6
    benchmark.extra_info.update(r)
    print(json.dumps({"mode": mode, "rows": n, **r}))
    assert r["completed"] == n
