"""Bounded-memory runs (``kvwire.simulate(..., keep_requests=False)``, issue 13 item 3).

The oracle for every streamed figure is the in-memory run of the same scenario (whose own figures the
reference-figure and queueing-theory tests check): counts, sums, energy, utilisation and SLO figures must be
equal, means equal to rounding (a double-double sum against numpy's pairwise sum), and percentiles within the
sketch's stated relative error (``summary["accuracy"]["relative_error"]`` = 2⁻¹³) of numpy's exact ones.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import kvwire
import numpy as np
import polars as pl
import pytest
from kvwire.results.run import KEEP_REQUESTS_MAX
from shared_paths import DATA

CODE = DATA / "azure-llm-2023" / "code.csv"
MC_CONV = DATA / "mooncake" / "conversation_trace.jsonl"

#: Keys whose values differ between two runs of one scenario by nature (wall clock) or by design (accuracy).
_SKIP = {"run.wall_s", "accuracy.requests_kept", "accuracy.approximate"}
_PERCENTILES = {"p50", "p90", "p95", "p99", "p99_9"}


def _compare(exact: Any, streamed: Any, rel_error: float, path: str = "") -> None:
    """Every figure of ``streamed`` against ``exact``: percentiles within ``rel_error`` (plus rounding), other
    floats to 1e-12 relative (means: summation order), everything else equal."""
    if path.lstrip(".") in _SKIP:
        return
    if isinstance(exact, dict):
        assert set(exact) == set(streamed), path
        for k in exact:
            _compare(exact[k], streamed[k], rel_error, f"{path}.{k}")
    elif isinstance(exact, float) and isinstance(streamed, float):
        tol = (rel_error + 1e-12) * abs(exact) if path.rsplit(".", 1)[-1] in _PERCENTILES else 1e-12 * abs(exact)
        assert abs(streamed - exact) <= tol, f"{path}: streamed {streamed} vs exact {exact}"
    else:
        assert streamed == exact, f"{path}: streamed {streamed!r} vs exact {exact!r}"


SCENARIOS: dict[str, dict[str, Any]] = {
    "disaggregated": {"workload": {"requests": 4000, "arrivals": {"rate_per_s": 12}}},
    "colocated": {
        "mode": "colocated",
        "colocated": {"instances": 2},
        "workload": {"requests": 3000, "arrivals": {"rate_per_s": 10}},
    },
    "2p3d-layer-eth": {
        "prefill": {"instances": 2},
        "decode": {"instances": 3},
        "link": "eth-25g",
        "handoff": {"streaming": "layer", "compression": "fp8"},
        "metrics": {"first_token": "decode"},
        "workload": {
            "requests": 3000,
            "arrivals": {"rate_per_s": 20},
            "output_tokens": {"dist": "uniform", "min": 0, "max": 300},
        },
    },
}


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_streamed_summary_matches_in_memory(name: str) -> None:
    """A streamed run of a generated workload (disaggregated, colocated, multi-instance with layer streaming,
    compression, outputs of 0-1 tokens and the first token seen after decode) gives the in-memory summary:
    same counts, energy, utilisation, SLO attainment and goodput, means to rounding, percentiles within the
    stated sketch error; and it says which percentiles are approximate."""
    sc = SCENARIOS[name]
    exact = kvwire.simulate(sc)
    streamed = kvwire.simulate(sc, keep_requests=False)
    acc = streamed.summary["accuracy"]
    assert acc == {
        "requests_kept": False,
        "approximate": ["ttft_s", "tpot_s", "itl_s", "e2e_s", "handoff_s"],
        "relative_error": 2.0**-13,
    }
    assert exact.summary["accuracy"]["approximate"] == ["itl_s"] and exact.summary["accuracy"]["requests_kept"]
    _compare(exact.summary, streamed.summary, acc["relative_error"])
    assert streamed.percentiles().to_dicts() != [] and streamed.percentiles().columns == exact.percentiles().columns
    _compare(
        {r["metric"]: r for r in exact.percentiles().to_dicts()},
        {r["metric"]: r for r in streamed.percentiles().to_dicts()},
        acc["relative_error"],
    )
    # Not vacuous: the streamed percentiles did come from the sketch (some differ from the exact ones).
    differ = [
        (m, p)
        for m in ("ttft_s", "tpot_s", "e2e_s")
        for p in _PERCENTILES
        if streamed.summary["latency"][m][p] != exact.summary["latency"][m][p]
    ]
    assert differ


def test_streamed_trace_file_matches_in_memory(tmp_path: Path) -> None:
    """Replaying a real trace (the Azure 2023 code trace, 8,819 requests, and the Mooncake conversation
    trace) through the chunked reader gives the in-memory figures, within the sketch's error; the scenario
    echo names the file either way."""
    for path, extra in ((CODE, {}), (MC_CONV, {"start_s": 0, "duration_s": 600})):
        sc = {
            "prefill": {"instances": 2},
            "decode": {"instances": 2},
            "workload": {"trace": {"file": str(path), **extra}},
        }
        exact = kvwire.simulate(sc, keep_requests=True)
        streamed = kvwire.simulate(sc, keep_requests=False)
        _compare(exact.summary, streamed.summary, 2.0**-13)
        assert streamed.scenario == exact.scenario
        assert streamed.scenario["workload"]["trace"]["file"] == str(path)


@pytest.mark.parametrize("rows", [1, 7, 1000, None])
def test_chunk_boundaries_do_not_change_results(rows: int | None, monkeypatch: pytest.MonkeyPatch) -> None:
    """The requests reach the core in chunks of 1, 7, 1000 rows or all at once: the streamed summary is the
    same, bit for bit, whatever the chunking (a request table passed as ``requests=``)."""
    import kvwire.results.run as run

    reqs = kvwire.read_trace(CODE).head(1500)
    sc = {"decode": {"instances": 2}}
    monkeypatch.setattr(run, "STREAM_CHUNK_ROWS", 1 << 20)
    whole = kvwire.simulate(sc, requests=reqs, keep_requests=False).summary
    monkeypatch.setattr(run, "STREAM_CHUNK_ROWS", rows or reqs.height)
    chunked = kvwire.simulate(sc, requests=reqs, keep_requests=False).summary
    whole["run"].pop("wall_s")
    chunked["run"].pop("wall_s")
    assert chunked == whole
    # And trace-file chunks (TraceScan.batches of that size) too (five minutes of the trace: ~700 requests).
    scan = kvwire.scan_trace(CODE, duration_s=300)
    file_summary = kvwire.simulate(sc, requests=scan, keep_requests=False).summary
    monkeypatch.setattr(run, "STREAM_CHUNK_ROWS", 1 << 20)
    file_whole = kvwire.simulate(sc, requests=scan, keep_requests=False).summary
    file_summary["run"].pop("wall_s")
    file_whole["run"].pop("wall_s")
    assert file_summary == file_whole


def test_parquet_in_row_groups_equals_the_in_memory_table(tmp_path: Path) -> None:
    """``out=`` on a run that keeps no table writes it as requests finish, in several Parquet row groups, and
    the file equals ``res.requests`` of the in-memory run (every column, nulls and derived latencies)."""
    import pyarrow.parquet as pq

    sc = SCENARIOS["2p3d-layer-eth"]
    exact = kvwire.simulate(sc).requests
    out = tmp_path / "requests.parquet"
    import kvwire.results.run as run

    old = run.OUT_ROWS
    run.OUT_ROWS = 500
    try:
        res = kvwire.simulate(sc, keep_requests=False, out=out)
    finally:
        run.OUT_ROWS = old
    assert res.out == out and not res.requests_kept
    assert pq.ParquetFile(out).metadata.num_row_groups == math.ceil(exact.height / 500)
    written = pl.read_parquet(out)
    assert written.equals(exact), "the streamed Parquet table differs from the in-memory table"
    with pytest.raises(kvwire.RequestsNotKeptError, match="written to"):
        _ = res.requests
    # CSV, and the in-memory path with out= (the table written once) agree too.
    csv_out = tmp_path / "requests.csv"
    kvwire.simulate(sc, keep_requests=False, out=csv_out)
    assert pl.read_csv(csv_out, schema=exact.schema).equals(exact)
    kept = kvwire.simulate(sc, out=tmp_path / "kept.parquet")
    assert pl.read_parquet(tmp_path / "kept.parquet").equals(kept.requests)


def test_requests_not_kept_says_why_and_how() -> None:
    """``res.requests`` of a run without its table raises a kvwire error naming keep_requests and out=."""
    res = kvwire.simulate({"workload": {"requests": 100}}, keep_requests=False)
    assert not res.requests_kept and "table not kept" in repr(res)
    with pytest.raises(kvwire.RequestsNotKeptError) as e:
        _ = res.requests
    assert e.value.path == "requests"
    assert "keep_requests=True" in str(e.value) and "out=" in str(e.value)
    assert isinstance(e.value, kvwire.KvwireError)


def test_above_the_threshold_the_table_is_not_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    """``keep_requests=None`` keeps the table up to KEEP_REQUESTS_MAX requests and streams above it (generated
    workloads, request tables and trace files alike); ``keep_requests=True`` overrides."""
    import kvwire.results.run as run

    assert KEEP_REQUESTS_MAX == 2_000_000
    monkeypatch.setattr(run, "KEEP_REQUESTS_MAX", 150)
    assert kvwire.simulate({"workload": {"requests": 150}}).requests_kept
    assert not kvwire.simulate({"workload": {"requests": 151}}).requests_kept
    assert kvwire.simulate({"workload": {"requests": 151}}, keep_requests=True).requests_kept
    reqs = kvwire.read_trace(CODE).head(151)
    assert not kvwire.simulate({}, requests=reqs).requests_kept
    assert not kvwire.simulate({"workload": {"trace": {"file": str(CODE)}}}).requests_kept
    small = kvwire.simulate({"workload": {"trace": {"file": str(CODE), "duration_s": 10}}})
    assert small.requests_kept and small.requests.height <= 150


def test_bad_chunks_give_the_whole_table_errors() -> None:
    """A streamed request table with a bad row gives the error the in-memory run gives (same class, path and
    message), the row counted from the table's start even in a later chunk."""
    import kvwire.results.run as run

    n = 50
    base = {"arrival_s": np.arange(n, dtype=float), "prompt_tokens": np.full(n, 10), "output_tokens": np.full(n, 3)}
    cases = [
        ("arrival_s", 37, 1.5, "requests.arrival_s[37]"),
        ("prompt_tokens", 41, 0, "requests.prompt_tokens[41]"),
        ("output_tokens", 45, -2, "requests.output_tokens[45]"),
        ("arrival_s", 30, float("nan"), "requests.arrival_s[30]"),
    ]
    old = run.STREAM_CHUNK_ROWS
    run.STREAM_CHUNK_ROWS = 16
    try:
        for column, row, value, path in cases:
            bad = {k: v.copy() for k, v in base.items()}
            bad[column] = bad[column].astype(float) if column == "arrival_s" else bad[column]
            bad[column][row] = value
            with pytest.raises(kvwire.TraceError) as in_memory:
                kvwire.simulate({}, requests=bad)
            with pytest.raises(kvwire.TraceError) as streamed:
                kvwire.simulate({}, requests=bad, keep_requests=False)
            assert type(streamed.value) is type(in_memory.value)
            assert streamed.value.path == in_memory.value.path == path
            assert str(streamed.value) == str(in_memory.value)
        fractional = {**base, "prompt_tokens": np.where(np.arange(n) == 33, 2.5, 10.0)}
        with pytest.raises(kvwire.TraceError, match=r"requests\.prompt_tokens\[33\]: token counts must be whole"):
            kvwire.simulate({}, requests=fractional, keep_requests=False)
    finally:
        run.STREAM_CHUNK_ROWS = old


def test_bad_trace_file_rows_name_the_file_line_and_column(tmp_path: Path) -> None:
    """A malformed trace replayed in chunks raises the reader's own TraceFileError (file, line, column),
    unchanged through the core; options that leave no request give the window error."""
    p = tmp_path / "t.csv"
    lines = ["TIMESTAMP,ContextTokens,GeneratedTokens"]
    lines += [f"2023-11-16 18:17:{i:02d}.0000000,100,{i}" for i in range(40)]
    lines[31] = "2023-11-16 18:17:05.0000000,100,3"  # goes back in time
    p.write_text("\n".join(lines) + "\n")
    with pytest.raises(kvwire.TraceFileError) as e:
        kvwire.simulate({"workload": {"trace": {"file": str(p)}}}, keep_requests=False)
    assert "line 32" in str(e.value) and "t.csv" in str(e.value)
    good = tmp_path / "g.csv"
    good.write_text("\n".join([lines[0], *lines[1:20]]) + "\n")
    with pytest.raises(kvwire.ScenarioError, match=r"workload\.trace\.start_s: no requests"):
        kvwire.simulate({"workload": {"trace": {"file": str(good), "start_s": 1e6}}}, keep_requests=False)
    assert not (tmp_path / ".out.parquet.tmp").exists()
    with pytest.raises(kvwire.TraceFileError):
        kvwire.simulate({"workload": {"trace": {"file": str(p)}}}, keep_requests=False, out=tmp_path / "out.parquet")
    assert not (tmp_path / "out.parquet").exists() and not (tmp_path / ".out.parquet.tmp").exists()


def test_streamed_runs_are_deterministic() -> None:
    """Same scenario and seed, streamed twice: identical summaries (wall clock aside)."""
    sc = {"workload": {"requests": 2000, "seed": 5, "arrivals": {"process": "gamma", "rate_per_s": 10, "cv": 2}}}
    a = kvwire.simulate(sc, keep_requests=False).summary
    b = kvwire.simulate(sc, keep_requests=False).summary
    a["run"].pop("wall_s")
    b["run"].pop("wall_s")
    assert a == b


def test_streamed_memory_stays_bounded() -> None:
    """The core holds only the requests in flight: at 8 req/s a 30,000-request run never holds more than a
    few hundred rows (``stats["table_rows_peak"]``), where the in-memory run holds all 30,000. (Peak RSS is
    measured in ``benches/bench_stream.py``, not asserted here.)"""
    sc = {"workload": {"requests": 30_000, "arrivals": {"rate_per_s": 8}}}
    streamed = kvwire.simulate(sc, keep_requests=False)
    assert streamed.stats["table_rows_peak"] < 300
    assert kvwire.simulate({"workload": {"requests": 1000}}).stats["table_rows_peak"] == 1000


def test_keep_requests_and_out_are_checked(tmp_path: Path) -> None:
    """Bad arguments are refused before any work, naming the argument."""
    with pytest.raises(kvwire.ScenarioError) as e:
        kvwire.simulate({}, keep_requests="no")  # type: ignore[arg-type]
    assert e.value.path == "keep_requests"
    with pytest.raises(kvwire.ScenarioError) as e:
        kvwire.simulate({}, out=tmp_path / "x.txt")
    assert e.value.path == "out"
    with pytest.raises(kvwire.ScenarioError) as e:
        kvwire.simulate({}, out=tmp_path / "missing" / "x.parquet")
    assert e.value.path == "out"


def test_cli_no_requests_streams_to_parquet(tmp_path: Path) -> None:
    """``kvwire run --trace FILE --no-requests -o out.parquet`` replays the trace in chunks, writes the table
    as requests finish (equal to the in-memory run's table) and says in the report that percentiles come
    from the sketch; ``--json`` carries the accuracy keys."""
    from click.testing import CliRunner
    from kvwire.cli import main

    out = tmp_path / "out.parquet"
    r = CliRunner().invoke(main, ["run", "--trace", str(CODE), "--duration-s", "900", "--no-requests", "-o", str(out)])
    assert r.exit_code == 0, r.output
    assert "quantile sketch" in r.output
    exact = kvwire.simulate({"workload": {"trace": {"file": str(CODE), "duration_s": 900}}}, keep_requests=True)
    assert pl.read_parquet(out).equals(exact.requests)
    r = CliRunner().invoke(main, ["run", "--trace", str(CODE), "--duration-s", "900", "--no-requests", "--json"])
    assert r.exit_code == 0, r.output
    assert '"requests_kept": false' in r.output
    r = CliRunner().invoke(
        main, ["run", "--set", "workload.requests=300", "--keep-requests", "-o", str(tmp_path / "k.csv")]
    )
    assert r.exit_code == 0, r.output
    assert pl.read_csv(tmp_path / "k.csv").height == 300 and "quantile sketch" not in r.output


_CTRL_C_CHILD = """
import sys, kvwire, polars as pl
n = 50_000
reqs = pl.DataFrame({"arrival_s": [0.0] * n, "prompt_tokens": [1] * n, "output_tokens": [400_000] * n})
sc = {"scheduler": {"max_decode_batch": 1}, "engine": {"max_steps": 10**15}}
print("started", flush=True)
try:
    kvwire.simulate(sc, requests=reqs, keep_requests=False)  # chunks from a Python iterator
    print("finished", flush=True)
except KeyboardInterrupt:
    print("interrupted", flush=True)
print("usable", kvwire.simulate({"workload": {"requests": 10}}, keep_requests=False).summary["requests"]["completed"])
"""


def test_ctrl_c_stops_a_streamed_run(tmp_path: Path) -> None:
    """A streamed run fed by a Python chunk iterator (hours of work) stops on SIGINT with KeyboardInterrupt and
    the process stays usable: the GIL is not held while the core runs. The 120 s bound only guards a hang."""
    import contextlib
    import signal
    import subprocess
    import sys

    script = tmp_path / "child.py"
    script.write_text(_CTRL_C_CHILD, encoding="utf-8")
    p = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert p.stdout is not None and p.stdout.readline().strip() == "started"
        with contextlib.suppress(subprocess.TimeoutExpired):
            p.wait(timeout=1.0)
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=120)
    finally:
        p.kill()
    assert out.split("\n")[:2] == ["interrupted", "usable 10"], (out, err)
    assert "Traceback" not in err


def test_cancel_event_stops_a_streamed_run() -> None:
    """``cancel=`` (a threading.Event set from another thread) stops a streamed run of hours with
    ``kvwire.Cancelled``, as it does an in-memory one; the next run works."""
    import threading

    n = 20_000
    reqs = pl.DataFrame({"arrival_s": [0.0] * n, "prompt_tokens": [1] * n, "output_tokens": [400_000] * n})
    sc = {"scheduler": {"max_decode_batch": 1}, "engine": {"max_steps": 10**15}}
    stop = threading.Event()
    threading.Timer(0.3, stop.set).start()
    with pytest.raises(kvwire.Cancelled):
        kvwire.simulate(sc, requests=reqs, keep_requests=False, cancel=stop)
    assert kvwire.simulate({"workload": {"requests": 10}}, keep_requests=False).summary["requests"]["completed"] == 10
