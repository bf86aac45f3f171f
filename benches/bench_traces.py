"""Trace reader benchmarks (pytest-benchmark): ``kvwire.read_trace`` on files generated here, in a temporary
directory, in the published layouts — Azure 2024 (``TIMESTAMP,ContextTokens,GeneratedTokens``, microsecond
timestamps with ``+00:00``, the fraction dropped on whole seconds), the same gzip-compressed, BurstGPT_1/_2
(``Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type``, integer seconds, ~2% failed
requests) and BurstGPT_3 (``Session ID`` UUIDs and ``Elapsed time`` added, float seconds).

A normal ``pytest`` run executes each benchmark once on small files (smoke test). To measure:

    KVWIRE_BENCH_TRACE_ROWS=5000000 pytest benches/bench_traces.py --benchmark-enable --benchmark-only

and record rows/s and peak RSS with the machine, date and ``uptime`` load in ``benches/README.md``.
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import kvwire
import numpy as np
import polars as pl
import pytest

ROWS = int(os.environ.get("KVWIRE_BENCH_TRACE_ROWS", "20000"))
ALL_KINDS = ["azure-2024", "azure-2024-gz", "burstgpt", "burstgpt-session"]
#: KVWIRE_BENCH_TRACE_KINDS=azure-2024 limits a large run to some kinds (comma-separated).
KINDS = [k for k in os.environ.get("KVWIRE_BENCH_TRACE_KINDS", ",".join(ALL_KINDS)).split(",") if k in ALL_KINDS]


def write_azure_2024(path: Path, n: int, seed: int = 0) -> None:
    """Azure 2024 layout at the conversation week's mean rate (27,303,999 requests in 7 days ≈ 45 req/s)."""
    rng = np.random.default_rng(seed)
    us = np.cumsum(rng.exponential(1e6 / 45.0, n)).astype(np.int64)
    whole = rng.random(n) < 0.01  # some requests on a whole second: pandas then drops the fraction
    us[whole] = us[whole] // 1_000_000 * 1_000_000
    us = np.maximum.accumulate(us) + int(np.datetime64("2024-05-12T00:00:00", "us").astype(np.int64))
    t = pl.col("t")
    stamps = pl.when(t.dt.microsecond() == 0).then(t.dt.to_string("%Y-%m-%d %H:%M:%S"))
    stamps = stamps.otherwise(t.dt.to_string("%Y-%m-%d %H:%M:%S%.6f")) + "+00:00"
    pl.DataFrame({"t": pl.Series(us).cast(pl.Datetime("us"))}).select(
        TIMESTAMP=stamps,
        ContextTokens=pl.Series(rng.lognormal(7.0, 1.0, n).astype(np.int64) + 1),
        GeneratedTokens=pl.Series(rng.lognormal(5.0, 1.0, n).astype(np.int64)),
    ).write_csv(path)


def write_burstgpt(path: Path, n: int, *, sessions: bool, seed: int = 1) -> None:
    """BurstGPT layout: ~0.5 req/s like the 121-day release (5.29 M lines), ChatGPT/GPT-4, conversation/API
    logs, 2% failed requests (Response tokens 0); with ``sessions``, the v2.0 BurstGPT_3 columns."""
    rng = np.random.default_rng(seed)
    seconds = np.cumsum(rng.exponential(2.0, n)).astype(np.int64) + 19_440_110
    request = rng.lognormal(6.0, 1.0, n).astype(np.int64) + 1
    response = np.where(rng.random(n) < 0.02, 0, rng.lognormal(5.0, 1.0, n).astype(np.int64) + 1)
    columns: dict[str, Any] = {
        "Timestamp": pl.Series(seconds).cast(pl.Float64) if sessions else pl.Series(seconds),
        "Model": pl.Series(np.where(rng.random(n) < 0.15, "GPT-4", "ChatGPT")),
        "Request tokens": request,
        "Response tokens": response,
        "Total tokens": request + response,
        "Log Type": pl.Series(np.where(rng.random(n) < 0.05, "Conversation log", "API log")),
    }
    if sessions:
        ids = [str(uuid.UUID(int=int(x))) for x in rng.integers(0, 2**63, max(1, n // 3), dtype=np.int64)]
        columns = {
            "Timestamp": columns["Timestamp"],
            "Session ID": pl.Series(ids).gather(rng.integers(0, len(ids), n)),
            "Elapsed time": rng.integers(0, 120, n),
            **{k: v for k, v in columns.items() if k != "Timestamp"},
        }
    pl.DataFrame(columns).write_csv(path)


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """One generated file per kind (module-scoped: written once, deleted with the temporary directory)."""
    root = tmp_path_factory.mktemp("traces")
    out = {
        "azure-2024": root / "AzureLLMInferenceTrace_conv_1week.csv",
        "burstgpt": root / "BurstGPT_1.csv",
        "burstgpt-session": root / "BurstGPT_3.csv",
    }
    write_azure_2024(out["azure-2024"], ROWS)
    if "burstgpt" in KINDS:
        write_burstgpt(out["burstgpt"], ROWS, sessions=False)
    if "burstgpt-session" in KINDS:
        write_burstgpt(out["burstgpt-session"], ROWS, sessions=True)
    if "azure-2024-gz" in KINDS:
        out["azure-2024-gz"] = root / "AzureLLMInferenceTrace_conv_1week.csv.gz"
        with out["azure-2024"].open("rb") as src, gzip.open(out["azure-2024-gz"], "wb", compresslevel=6) as dst:
            shutil.copyfileobj(src, dst, 1 << 20)
    return out


@pytest.mark.parametrize("kind", KINDS)
def test_read_trace(benchmark: Any, files: dict[str, Path], kind: str) -> None:
    """read_trace of the whole file (BurstGPT: failed requests dropped, extra columns kept)."""
    path = files[kind]
    df = benchmark.pedantic(kvwire.read_trace, args=(path,), rounds=3, iterations=1)
    benchmark.extra_info["rows"] = ROWS
    benchmark.extra_info["file_bytes"] = path.stat().st_size
    assert df.height == ROWS if kind.startswith("azure") else 0.95 * ROWS < df.height < ROWS
    assert (df["arrival_s"].diff().drop_nulls() >= 0).all()


def test_batches(benchmark: Any, files: dict[str, Path]) -> None:
    """TraceScan.batches over the Azure file in 1M-row chunks (what a streaming consumer would do)."""

    def consume() -> int:
        return sum(b.height for b in kvwire.scan_trace(files["azure-2024"]).batches(rows=1 << 20))

    assert benchmark.pedantic(consume, rounds=3, iterations=1) == ROWS


# Peak RSS from VmHWM of a child process (its own address space): the reader on one file, and a baseline
# child that only imports kvwire.
_PROBE = """
import json, sys, kvwire
if sys.argv[2] == "batches":
    assert sum(b.height for b in kvwire.scan_trace(sys.argv[1]).batches(rows=1 << 20)) > 0
elif sys.argv[1] != "-":
    assert kvwire.read_trace(sys.argv[1]).height > 0
hwm = [l for l in open("/proc/self/status") if l.startswith("VmHWM:")][0].split()[1]
print(json.dumps({"maxrss_kib": int(hwm)}))
"""


def _peak_kib(path: str, how: str = "read") -> int:
    out = subprocess.run([sys.executable, "-c", _PROBE, path, how], capture_output=True, text=True, check=True)
    return int(json.loads(out.stdout)["maxrss_kib"])


@pytest.fixture(scope="module")
def baseline_kib() -> int:
    """Peak RSS of a process that only imported kvwire."""
    return _peak_kib("-")


@pytest.mark.parametrize("kind", KINDS)
def test_peak_memory(benchmark: Any, files: dict[str, Path], baseline_kib: int, kind: str) -> None:
    """Peak RSS of reading the whole file, above a process that only imported kvwire (MB and bytes per row);
    the table itself is 24 bytes per row (arrival f64 + two i64 counts) plus the extra columns."""

    def measure() -> float:
        return (_peak_kib(str(files[kind])) - baseline_kib) * 1024.0

    extra_bytes = benchmark.pedantic(measure, rounds=1, iterations=1)
    benchmark.extra_info["peak_mb_above_import"] = extra_bytes / 1e6
    benchmark.extra_info["peak_bytes_per_row"] = extra_bytes / ROWS
    assert extra_bytes > 0


def test_peak_memory_batches(benchmark: Any, files: dict[str, Path], baseline_kib: int) -> None:
    """Peak RSS of consuming the Azure file through TraceScan.batches (1M-row chunks, each dropped after use),
    above a process that only imported kvwire: what a streaming consumer would hold."""

    def measure() -> float:
        return (_peak_kib(str(files["azure-2024"]), "batches") - baseline_kib) * 1024.0

    extra_bytes = benchmark.pedantic(measure, rounds=1, iterations=1)
    benchmark.extra_info["peak_mb_above_import"] = extra_bytes / 1e6
    assert extra_bytes > 0
