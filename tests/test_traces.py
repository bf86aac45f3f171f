"""Trace readers (spec/traces.md, ../shared/data/README.md): the real Azure 2023 and Mooncake files, small
files written here in each format's exact layout and quirks, and malformed files.

Expected figures for the real files are the ones data/README.md states (row counts, rounded means, time
spans), and arrival times are recomputed here with an independent parser (``csv``/``json`` and integer
nanoseconds) rather than trusted from the reader.
"""

from __future__ import annotations

import csv
import datetime as dt
import hashlib
import json
import math
from pathlib import Path

import kvwire
import numpy as np
import polars as pl
import pytest
from shared_paths import DATA

CODE = DATA / "azure-llm-2023" / "code.csv"
CONV = DATA / "azure-llm-2023" / "conv.csv"
MC_CONV = DATA / "mooncake" / "conversation_trace.jsonl"
MC_SYN = DATA / "mooncake" / "synthetic_trace.jsonl"
HEADER = "TIMESTAMP,ContextTokens,GeneratedTokens"
COLUMNS = ["arrival_s", "prompt_tokens", "output_tokens"]

#: data/README.md: file -> sha256, so the figures below are known to describe these very bytes.
SHA256 = {
    CODE: "54e9a6d2a4bd06ba1e060304b900abbc74cbea53de96506e60fe5bb4f2277fb6",
    CONV: "2f1e5b666d4e3055fdbba98598ce2ec307767b9064e03e2fa46676dbcc7d0bf8",
    MC_CONV: "b8cbb061a85206d729d91cdc2981f43c9e0d99209dce588d3af5f7934408b9df",
    MC_SYN: "bd070915a98fc0ed264d7cfef2ce746002eb3076a695ec31ba2674c0111ec131",
}


def azure_ns(ts: str) -> int:
    """Nanoseconds since the epoch of an Azure TIMESTAMP (2023: 7 fractional digits, no zone; 2024: up to 6
    digits or none, ``+00:00``), parsed by hand."""
    ts = ts.strip()
    if ts.endswith("+00:00"):
        ts = ts[: -len("+00:00")]
    whole, _, frac = ts.partition(".")
    base = dt.datetime.strptime(whole, "%Y-%m-%d %H:%M:%S").replace(tzinfo=dt.UTC)
    return int(base.timestamp()) * 10**9 + int((frac + "000000000")[:9])


def azure_reference(path: Path) -> pl.DataFrame:
    """The Azure trace table computed independently: csv module, integer nanoseconds relative to row 0."""
    with path.open(newline="") as f:
        rows = list(csv.DictReader(f))
    ns = [azure_ns(r["TIMESTAMP"]) for r in rows]
    return pl.DataFrame(
        {
            "arrival_s": [(t - ns[0]) / 1e9 for t in ns],
            "prompt_tokens": [int(r["ContextTokens"]) for r in rows],
            "output_tokens": [int(r["GeneratedTokens"]) for r in rows],
        }
    )


def mooncake_reference(path: Path) -> pl.DataFrame:
    """The Mooncake table computed independently: ms timestamps relative to the first line, in seconds."""
    recs = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    t0 = recs[0]["timestamp"]
    return pl.DataFrame(
        {
            "arrival_s": [(r["timestamp"] - t0) / 1e3 for r in recs],
            "prompt_tokens": [r["input_length"] for r in recs],
            "output_tokens": [r["output_length"] for r in recs],
        }
    )


def assert_table(df: pl.DataFrame, ref: pl.DataFrame) -> None:
    """Same columns and token counts; arrivals equal to 1 ns."""
    assert df.columns[:3] == COLUMNS
    assert df.height == ref.height
    assert df.schema["arrival_s"] == pl.Float64
    assert df.schema["prompt_tokens"].is_integer() and df.schema["output_tokens"].is_integer()
    np.testing.assert_array_equal(df["prompt_tokens"].to_numpy(), ref["prompt_tokens"].to_numpy())
    np.testing.assert_array_equal(df["output_tokens"].to_numpy(), ref["output_tokens"].to_numpy())
    np.testing.assert_allclose(df["arrival_s"].to_numpy(), ref["arrival_s"].to_numpy(), rtol=0, atol=1e-9)


def write(tmp_path: Path, name: str, text: str) -> Path:
    """Write ``text`` byte for byte (no newline translation)."""
    p = tmp_path / name
    p.write_bytes(text.encode())
    return p


# --------------------------------------------------------------------------------------------------
# The real files


@pytest.mark.parametrize("path", list(SHA256), ids=lambda p: p.name)
def test_real_files_are_the_documented_bytes(path: Path) -> None:
    """The data files are the byte-exact copies data/README.md describes (so its figures apply)."""
    assert hashlib.sha256(path.read_bytes()).hexdigest() == SHA256[path]


@pytest.mark.parametrize(
    ("path", "rows", "mean_in", "mean_out", "span_s"),
    [
        # 18:17:03.98 -> 19:14:19.93 and 18:15:46.68 -> 19:14:08.40 (README, to the hundredth of a second)
        (CODE, 8819, 2048, 28, 57 * 60 + 15.95),
        (CONV, 19366, 1155, 211, 58 * 60 + 21.72),
    ],
    ids=["code", "conv"],
)
def test_real_azure_traces(path: Path, rows: int, mean_in: int, mean_out: int, span_s: float) -> None:
    """read_azure_csv on the real 2023 files: README's row counts, rounded means and time span; arrivals start
    at 0, never decrease and equal an independent nanosecond parse of every timestamp."""
    df = kvwire.read_azure_csv(path)
    assert df.height == rows
    assert round(float(df["prompt_tokens"].mean())) == mean_in  # type: ignore[arg-type]
    assert round(float(df["output_tokens"].mean())) == mean_out  # type: ignore[arg-type]
    a = df["arrival_s"].to_numpy()
    assert a[0] == 0.0 and (np.diff(a) >= 0).all()
    assert abs(a[-1] - span_s) < 0.01
    assert_table(df, azure_reference(path))


def test_real_azure_file_layout() -> None:
    """The real code.csv has CRLF line ends and no final newline (rows + header = terminators + 1), and the
    reader still reads the last row."""
    raw = CODE.read_bytes()
    assert raw.count(b"\r\n") == 8819 and not raw.endswith(b"\n")
    last = raw.rsplit(b"\r\n", 1)[1].decode().split(",")
    df = kvwire.read_azure_csv(CODE)
    assert df.row(-1)[1:] == (int(last[1]), int(last[2]))


@pytest.mark.parametrize(
    ("path", "rows", "mean_in", "mean_out", "last_s"),
    [(MC_CONV, 12031, 12035, 343, 3536.999), (MC_SYN, 3993, 15325, 149, 1022.025)],
    ids=["conversation", "synthetic"],
)
def test_real_mooncake_traces(path: Path, rows: int, mean_in: int, mean_out: int, last_s: float) -> None:
    """read_mooncake_jsonl on the real FAST'25 files: README's row counts, rounded means and arrival span (ms
    timestamps become seconds from the first request)."""
    df = kvwire.read_mooncake_jsonl(path)
    assert df.height == rows
    assert round(float(df["prompt_tokens"].mean())) == mean_in  # type: ignore[arg-type]
    assert round(float(df["output_tokens"].mean())) == mean_out  # type: ignore[arg-type]
    a = df["arrival_s"].to_numpy()
    assert a[0] == 0.0 and (np.diff(a) >= 0).all()
    assert math.isclose(a[-1], last_s, rel_tol=0, abs_tol=1e-9)
    assert_table(df, mooncake_reference(path))


@pytest.mark.parametrize("path", list(SHA256), ids=lambda p: p.name)
def test_read_trace_dispatches_by_extension(path: Path) -> None:
    """read_trace picks the Azure reader for .csv and the Mooncake reader for .jsonl."""
    specific = kvwire.read_azure_csv(path) if path.suffix == ".csv" else kvwire.read_mooncake_jsonl(path)
    assert kvwire.read_trace(path).equals(specific)
    assert kvwire.read_trace(str(path)).equals(specific)


@pytest.mark.parametrize(
    ("path", "scenario"),
    [
        (CONV, {}),
        (MC_SYN, {"prefill": {"instances": 4}, "decode": {"instances": 2}}),
    ],
    ids=["azure-conv", "mooncake-synthetic"],
)
def test_real_trace_end_to_end(path: Path, scenario: dict[str, object]) -> None:
    """A real trace runs through simulate: one row per trace request with its arrival and lengths unchanged,
    every request finished or rejected, and a strict-JSON summary."""
    trace = kvwire.read_trace(path)
    res = kvwire.simulate(scenario, requests=trace)
    df = res.requests
    assert df.height == trace.height
    np.testing.assert_array_equal(df["arrival_s"].to_numpy(), trace["arrival_s"].to_numpy())
    np.testing.assert_array_equal(df["prompt_tokens"].to_numpy(), trace["prompt_tokens"].to_numpy())
    np.testing.assert_array_equal(df["output_tokens"].to_numpy(), trace["output_tokens"].to_numpy())
    s = res.summary
    assert s["requests"]["total"] == trace.height
    assert s["requests"]["completed"] + s["requests"]["rejected"] == trace.height
    assert (df["rejected"] | df["finish_s"].is_not_null()).all()
    assert s["run"]["horizon_s"] >= float(trace["arrival_s"].max())  # type: ignore[arg-type]
    json.dumps(s, allow_nan=False)


# --------------------------------------------------------------------------------------------------
# Small files in each format's exact layout


def test_azure_2023_layout(tmp_path: Path) -> None:
    """2023 layout: CRLF, no final newline, 7 fractional digits (100 ns resolution kept), zero outputs."""
    p = write(
        tmp_path,
        "t.csv",
        f"{HEADER}\r\n"
        "2023-11-16 18:17:03.9799600,4808,10\r\n"
        "2023-11-16 18:17:04.0319601,3180,0\r\n"
        "2023-11-16 18:17:04.0319601,12,1\r\n"
        "2023-11-16 18:18:03.9799599,7,2",
    )
    df = kvwire.read_azure_csv(p)
    assert df["prompt_tokens"].to_list() == [4808, 3180, 12, 7]
    assert df["output_tokens"].to_list() == [10, 0, 1, 2]
    expected = [0.0, 0.0520001, 0.0520001, 59.9999999]
    for got, want in zip(df["arrival_s"].to_list(), expected, strict=True):
        assert math.isclose(got, want, rel_tol=0, abs_tol=1e-12)


def test_azure_2024_layout(tmp_path: Path) -> None:
    """2024 layout: LF, final newline, 6 fractional digits with a ``+00:00`` zone, and timestamps whose
    fraction is dropped (``...:00+00:00``) — the "mixed" format of the official notebook."""
    p = write(
        tmp_path,
        "t.csv",
        f"{HEADER}\n"
        "2024-05-10 00:00:00.250000+00:00,100,20\n"
        "2024-05-10 00:00:01+00:00,200,0\n"
        "2024-05-10 00:00:01.000001+00:00,300,5\n"
        "2024-05-10 00:01:00+00:00,400,6\n",
    )
    df = kvwire.read_azure_csv(p)
    expected = [0.0, 0.75, 0.750001, 59.75]
    for got, want in zip(df["arrival_s"].to_list(), expected, strict=True):
        assert math.isclose(got, want, rel_tol=0, abs_tol=1e-12)
    assert df["prompt_tokens"].to_list() == [100, 200, 300, 400]


def test_azure_crosses_midnight(tmp_path: Path) -> None:
    """Arrivals are differences of full timestamps, so a trace crossing midnight (and a month end) keeps
    counting up: 23:59:59.9999999 -> 00:00:00.0000001 next day is 200 ns later."""
    p = write(
        tmp_path,
        "t.csv",
        f"{HEADER}\r\n2024-05-31 23:59:59.9999999,1,1\r\n2024-06-01 00:00:00.0000001,1,1\r\n"
        "2024-06-01 01:00:00.0000001,1,1",
    )
    a = kvwire.read_azure_csv(p)["arrival_s"].to_list()
    assert math.isclose(a[1], 2e-7, rel_tol=0, abs_tol=1e-13)
    assert math.isclose(a[2], 3600 + 2e-7, rel_tol=0, abs_tol=1e-9)


def test_small_azure_matches_independent_parse(tmp_path: Path) -> None:
    """A mixed-quirk Azure file read by the library equals the independent nanosecond parse."""
    lines = [f"2024-05-10 00:00:{s:02d}.{f}+00:00,{10 + s},{s % 3}" for s, f in [(1, "5"), (2, "123456"), (3, "9")]]
    lines.insert(0, "2024-05-10 00:00:01+00:00,9,0")
    p = write(tmp_path, "t.csv", HEADER + "\n" + "\n".join(lines))
    assert_table(kvwire.read_azure_csv(p), azure_reference(p))


def test_mooncake_layout(tmp_path: Path) -> None:
    """Mooncake layout: ms timestamps relative to the first request (which need not be 0), hash_ids and extra
    keys ignored, LF with or without a final newline, or CRLF."""
    recs = [
        {"timestamp": 100, "input_length": 1000, "output_length": 2, "hash_ids": [0, 1]},
        {"timestamp": 100, "input_length": 513, "output_length": 0, "hash_ids": [0, 2]},
        {"timestamp": 1600, "input_length": 12, "output_length": 1, "hash_ids": [3], "session_id": "a"},
    ]
    body = [json.dumps(r) for r in recs]
    for name, text in [
        ("lf.jsonl", "\n".join(body) + "\n"),
        ("nofinal.jsonl", "\n".join(body)),
        ("crlf.jsonl", "\r\n".join(body) + "\r\n"),
    ]:
        df = kvwire.read_mooncake_jsonl(write(tmp_path, name, text))
        assert df.columns[:3] == COLUMNS
        assert df["arrival_s"].to_list() == [0.0, 0.0, 1.5]
        assert df["prompt_tokens"].to_list() == [1000, 513, 12]
        assert df["output_tokens"].to_list() == [2, 0, 1]


def test_small_trace_runs_end_to_end(tmp_path: Path) -> None:
    """A small trace with zero and one output tokens runs through simulate; those rows have no TPOT."""
    p = write(tmp_path, "t.csv", f"{HEADER}\r\n2023-11-16 18:17:03.9799600,48,0\r\n2023-11-16 18:17:04.0,30,1")
    res = kvwire.simulate({}, requests=kvwire.read_trace(p))
    assert res.summary["requests"]["completed"] == 2
    assert res.requests["tpot_s"].is_null().all()


# --------------------------------------------------------------------------------------------------
# Malformed files


def test_azure_bad_timestamp_names_the_row(tmp_path: Path) -> None:
    """An unparseable TIMESTAMP is a TraceError naming the (0-based data) row and quoting the value."""
    p = write(tmp_path, "t.csv", f"{HEADER}\n2024-05-10 00:00:00,5,1\nyesterday,6,0\n")
    with pytest.raises(kvwire.TraceError) as info:
        kvwire.read_azure_csv(p)
    assert "row 1" in str(info.value) and "yesterday" in str(info.value)
    assert str(p) in info.value.path and "[1]" in info.value.path


def test_azure_other_time_zone_is_refused(tmp_path: Path) -> None:
    """Only the ``+00:00`` zone of the 2024 files is understood; another offset is refused, not ignored."""
    p = write(tmp_path, "t.csv", f"{HEADER}\n2024-05-10 00:00:00+00:00,5,1\n2024-05-10 00:00:01+01:00,5,1\n")
    with pytest.raises(kvwire.TraceError) as info:
        kvwire.read_azure_csv(p)
    assert "row 1" in str(info.value)


def test_azure_unsorted_names_the_row(tmp_path: Path) -> None:
    """Out-of-order rows are a TraceError naming the first row that arrives before its predecessor."""
    p = write(
        tmp_path,
        "t.csv",
        f"{HEADER}\n2024-05-10 00:00:01,5,1\n2024-05-10 00:00:02,5,1\n2024-05-10 00:00:00,5,1\n"
        "2024-05-10 00:00:03,5,1\n",
    )
    with pytest.raises(kvwire.TraceError) as info:
        kvwire.read_azure_csv(p)
    assert "row 2" in str(info.value)


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("TIMESTAMP,ContextTokens\n2024-05-10 00:00:00,5\n", "GeneratedTokens"),
        (f"{HEADER}\n", "no requests"),
        ("", ""),
        ("a,b,c\n1,2,3\n", "TIMESTAMP"),
    ],
    ids=["missing-column", "header-only", "empty-file", "wrong-header"],
)
def test_azure_structural_errors(tmp_path: Path, text: str, needle: str) -> None:
    """A missing column, a header without rows, an empty file or another CSV is a TraceError naming the
    file."""
    p = write(tmp_path, "t.csv", text)
    with pytest.raises(kvwire.TraceError) as info:
        kvwire.read_azure_csv(p)
    assert str(p) in str(info.value)
    assert needle in str(info.value)


def test_azure_missing_token_value_is_named_by_simulate(tmp_path: Path) -> None:
    """An empty token field reaches simulate as a null, which is a TraceError naming column and row."""
    p = write(tmp_path, "t.csv", f"{HEADER}\n2024-05-10 00:00:00,5,1\n2024-05-10 00:00:01,,1\n")
    try:
        table = kvwire.read_azure_csv(p)
    except kvwire.TraceError as e:  # refusing it in the reader is fine too
        assert "1" in str(e)
        return
    with pytest.raises(kvwire.TraceError) as info:
        kvwire.simulate({}, requests=table)
    assert info.value.path == "requests.prompt_tokens[1]"


def test_azure_non_numeric_token_count(tmp_path: Path) -> None:
    """A non-numeric ContextTokens value is a TraceError naming the file (and the row)."""
    p = write(tmp_path, "t.csv", f"{HEADER}\n2024-05-10 00:00:00,5,1\n2024-05-10 00:00:01,abc,1\n")
    with pytest.raises(kvwire.TraceError) as info:
        kvwire.read_azure_csv(p)
    assert str(p) in str(info.value)


def test_azure_fractional_token_count(tmp_path: Path) -> None:
    """Token counts are integers (traces.md); a fractional count is refused, not truncated."""
    p = write(tmp_path, "t.csv", f"{HEADER}\n2024-05-10 00:00:00,5,1\n2024-05-10 00:00:01,6.5,1\n")
    with pytest.raises(kvwire.TraceError):
        kvwire.read_azure_csv(p)


@pytest.mark.parametrize(
    ("lines", "line_no"),
    [
        (
            [
                '{"timestamp": 0, "input_length": 5, "output_length": 1}',
                '{"timestamp": 10, "input_length": 5',
            ],
            2,
        ),
        (
            [
                '{"timestamp": 0, "input_length": 5, "output_length": 1}',
                '{"timestamp": 10, "output_length": 1}',
            ],
            2,
        ),
        (['{"timestamp": null, "input_length": 5, "output_length": 1}'], 1),
        (['{"timestamp": 0, "input_length": 5, "output_length": 1}', "", "[1, 2, 3]"], 3),
        (['{"timestamp": 0, "input_length": "many", "output_length": 1}'], 1),
    ],
    ids=["truncated-json", "missing-field", "null-timestamp", "not-an-object", "non-numeric"],
)
def test_mooncake_bad_line_names_the_line(tmp_path: Path, lines: list[str], line_no: int) -> None:
    """A line that is not a Mooncake record is a TraceError naming its 1-based line number."""
    p = write(tmp_path, "t.jsonl", "\n".join(lines) + "\n")
    with pytest.raises(kvwire.TraceError) as info:
        kvwire.read_mooncake_jsonl(p)
    assert f"line {line_no}" in str(info.value)
    assert info.value.path == f"{p}:{line_no}"


def test_mooncake_unsorted_and_empty(tmp_path: Path) -> None:
    """Decreasing timestamps name the offending row; an empty or blank-only file has no requests."""
    p = write(
        tmp_path,
        "u.jsonl",
        '{"timestamp": 5, "input_length": 1, "output_length": 1}\n'
        '{"timestamp": 4, "input_length": 1, "output_length": 1}\n',
    )
    with pytest.raises(kvwire.TraceError) as info:
        kvwire.read_mooncake_jsonl(p)
    assert "row 1" in str(info.value)
    for name, text in [("e.jsonl", ""), ("b.jsonl", "\n\n")]:
        with pytest.raises(kvwire.TraceError) as info:
            kvwire.read_mooncake_jsonl(write(tmp_path, name, text))
        assert "no requests" in str(info.value)


@pytest.mark.parametrize("value", ["10.7", "true"])
def test_mooncake_non_integer_length(tmp_path: Path, value: str) -> None:
    """input_length must be an integer: a fractional or boolean value is refused, not coerced."""
    p = write(tmp_path, "t.jsonl", f'{{"timestamp": 0, "input_length": {value}, "output_length": 2}}\n')
    with pytest.raises(kvwire.TraceError):
        kvwire.read_mooncake_jsonl(p)


def test_unreadable_and_unknown_files(tmp_path: Path) -> None:
    """Missing files and unknown extensions are TraceErrors naming the path, for every reader."""
    for reader, name in [
        (kvwire.read_azure_csv, "none.csv"),
        (kvwire.read_mooncake_jsonl, "none.jsonl"),
        (kvwire.read_trace, "none.csv"),
        (kvwire.read_trace, "none.jsonl"),
    ]:
        with pytest.raises(kvwire.TraceError) as info:
            reader(tmp_path / name)
        assert name in str(info.value)
    with pytest.raises(kvwire.TraceError) as info:
        kvwire.read_trace(write(tmp_path, "t.parquet", "x"))
    assert "t.parquet" in str(info.value)


def test_readers_return_exactly_the_request_columns() -> None:
    """Both readers return exactly the three request columns simulate() takes, in order (no extra columns
    such as hash_ids or the raw TIMESTAMP)."""
    for path in (CODE, MC_SYN):
        assert kvwire.read_trace(path).columns == COLUMNS
