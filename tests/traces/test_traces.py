"""Trace readers (spec/traces.md, ../shared/data/README.md): the real Azure 2023 and Mooncake files, small
files written here in each format's exact published layout and quirks (headers with spaces, every timestamp
variant, zero-output rows, gzip), kvwire's own tables, format detection, and malformed files.

Expected figures for the real files are the ones data/README.md states (row counts, rounded means, time
spans), and arrival times are recomputed here with an independent parser (``csv``/``json`` and integer
nanoseconds) rather than trusted from the reader.
"""

from __future__ import annotations

import csv
import datetime as dt
import gzip
import hashlib
import json
import math
import pickle
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
def test_read_trace_detects_the_format(path: Path) -> None:
    """read_trace recognises each real file from its first line (CSV header or JSON), gives the same table as
    the format-specific reader plus the format's extra columns (hash_ids for Mooncake, as a list column)."""
    specific = kvwire.read_azure_csv(path) if path.suffix == ".csv" else kvwire.read_mooncake_jsonl(path)
    table = kvwire.read_trace(path)
    assert table.select(COLUMNS).equals(specific)
    assert kvwire.read_trace(str(path), extra=False).equals(specific)
    if path.suffix == ".jsonl":
        assert table.columns == [*COLUMNS, "hash_ids"]
        with path.open() as f:
            first = json.loads(f.readline())
        assert table["hash_ids"][0].to_list() == first["hash_ids"]
        assert kvwire.scan_trace(path).format == "mooncake"
    else:
        assert table.columns == COLUMNS
        assert kvwire.scan_trace(path).format == "azure"


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


def test_azure_every_fraction_length(tmp_path: Path) -> None:
    """Timestamps with 0 to 9 fractional digits, with and without ``+00:00``, give the nanoseconds an
    independent integer parse gives (so a 2025 file with any precision reads exactly)."""
    lines = []
    for digits in range(10):
        frac = "" if digits == 0 else "." + "123456789"[:digits]
        for zone in ("", "+00:00"):
            lines.append(f"2024-10-15 00:{len(lines):02d}:07{frac}{zone},{10 + digits},{digits}")
    p = write(tmp_path, "t.csv", HEADER + "\n" + "\n".join(lines) + "\n")
    assert_table(kvwire.read_trace(p), azure_reference(p))
    a = kvwire.read_trace(p)["arrival_s"].to_list()
    # row 1 is a minute after row 0 and row 2 two minutes and 0.1 s: correctly rounded quotients of the
    # nanosecond differences, as Python's division gives them
    assert a[:3] == [0.0, 60.0, 120_100_000_000 / 1e9]


def test_azure_2025_multimodal_layout(tmp_path: Path) -> None:
    """The 2025 multimodal trace adds ``NumImages`` between TIMESTAMP and the token columns: detected as
    Azure, columns found by name, ``num_images`` kept as an extra column (and left out by read_azure_csv)."""
    p = write(
        tmp_path,
        "mm.csv",
        "TIMESTAMP,NumImages,ContextTokens,GeneratedTokens\n"
        "2024-10-15 00:00:00.0000000,2,900,120\n"
        "2024-10-15 00:00:01.5000000,0,35,0\n"
        "2024-10-15 00:00:03.2500000,5,4100,77\n",
    )
    scan = kvwire.scan_trace(p)
    assert (scan.format, scan.source.layout) == ("azure", "azure-multimodal")
    df = kvwire.read_trace(p)
    assert df.columns == [*COLUMNS, "num_images"]
    assert df["arrival_s"].to_list() == [0.0, 1.5, 3.25]
    assert df["prompt_tokens"].to_list() == [900, 35, 4100]
    assert df["output_tokens"].to_list() == [120, 0, 77]
    assert df["num_images"].to_list() == [2, 0, 5]
    assert kvwire.read_azure_csv(p).columns == COLUMNS


BURST_HEADER = "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type"
BURST_ROWS = [  # Timestamp (s from 0:00 of day 1), Model, request, response (0 = failed), total, log type
    ("5", "ChatGPT", 472, 18, "Conversation log"),
    ("45", "ChatGPT", 1087, 230, "Conversation log"),
    ("118", "GPT-4", 417, 276, "Conversation log"),
    ("120", "GPT-4", 300, 0, "API log"),
    ("131", "ChatGPT", 52, 9, "API log"),
    ("131", "GPT-4", 1904, 0, "Conversation log"),
    ("200", "GPT-4", 96, 33, "API log"),
]


def burst_text(rows: list[tuple[str, str, int, int, str]], *, fails: bool = True) -> str:
    """A BurstGPT_1/_2 file (``fails=False``: the without_fails release, zero-response rows removed)."""
    body = [f"{t},{m},{q},{r},{q + r},{lt}" for t, m, q, r, lt in rows if fails or r > 0]
    return BURST_HEADER + "\n" + "\n".join(body) + "\n"


def test_burstgpt_layout_with_fails(tmp_path: Path) -> None:
    """BurstGPT_1/_2: header with spaces; failed requests (Response tokens 0) dropped by default and kept with
    keep_failed; arrivals are seconds after the first kept request; Model and Log Type kept as columns."""
    p = write(tmp_path, "BurstGPT_1.csv", burst_text(BURST_ROWS))
    scan = kvwire.scan_trace(p)
    assert (scan.format, scan.source.layout) == ("burstgpt", "burstgpt")
    df = kvwire.read_trace(p)
    ok = [r for r in BURST_ROWS if r[3] > 0]
    assert df.columns == [*COLUMNS, "model", "log_type"]
    assert df["arrival_s"].to_list() == [float(r[0]) - 5.0 for r in ok]
    assert df["prompt_tokens"].to_list() == [r[2] for r in ok]
    assert df["output_tokens"].to_list() == [r[3] for r in ok]
    assert df["model"].to_list() == [r[1] for r in ok]
    assert df["log_type"].to_list() == [r[4] for r in ok]
    kept = kvwire.read_trace(p, keep_failed=True)
    assert kept.height == len(BURST_ROWS)
    assert kept["output_tokens"].to_list() == [r[3] for r in BURST_ROWS]


def test_burstgpt_without_fails_layout(tmp_path: Path) -> None:
    """BurstGPT_without_fails_*: same header, no zero-response rows: the same table as the file with failures
    read with the default (failures dropped)."""
    with_fails = kvwire.read_trace(write(tmp_path, "a.csv", burst_text(BURST_ROWS)))
    without = kvwire.read_trace(write(tmp_path, "BurstGPT_without_fails_1.csv", burst_text(BURST_ROWS, fails=False)))
    assert without.equals(with_fails)
    assert without.equals(kvwire.read_trace(tmp_path / "BurstGPT_without_fails_1.csv", keep_failed=True))


def test_burstgpt_filters(tmp_path: Path) -> None:
    """``model=`` and ``log_type=`` keep the matching rows (one value or several); arrivals count from the first
    kept request; a filter that keeps nothing is a TraceFileError saying so."""
    p = write(tmp_path, "b.csv", burst_text(BURST_ROWS))
    gpt4 = kvwire.read_trace(p, model="GPT-4", keep_failed=True)
    rows = [r for r in BURST_ROWS if r[1] == "GPT-4"]
    assert gpt4["prompt_tokens"].to_list() == [r[2] for r in rows]
    assert gpt4["arrival_s"].to_list() == [float(r[0]) - 118.0 for r in rows]
    api = kvwire.read_trace(p, log_type="API log")
    assert api["prompt_tokens"].to_list() == [r[2] for r in BURST_ROWS if r[4] == "API log" and r[3] > 0]
    both = kvwire.read_trace(p, model=["GPT-4", "ChatGPT"], log_type=["API log", "Conversation log"])
    assert both.equals(kvwire.read_trace(p))
    with pytest.raises(kvwire.TraceFileError, match="no requests are left after the filters"):
        kvwire.read_trace(p, model="GPT-5")


def test_burstgpt_session_layout(tmp_path: Path) -> None:
    """BurstGPT_3 (v2.0): ``Session ID`` (UUIDs) and ``Elapsed time`` columns, float timestamps that do not
    start at 0 (seconds since 0:00 of the first day): Session ID kept as ``session_id``, Elapsed time as
    ``elapsed_s``; arrivals relative to the first kept request."""
    text = (
        "Timestamp,Session ID,Elapsed time,Model,Request tokens,Response tokens,Total tokens,Log Type\n"
        "19440110.0,1722ac82-0a46-4bf0-aa08-89794e7a2b3f,43,GPT-4,906,446,1352,Conversation log\n"
        "19440161.0,d5983bf9-4b48-497b-892b-a58995247443,2,ChatGPT,36,29,65,Conversation log\n"
        "19440161.5,d5983bf9-4b48-497b-892b-a58995247443,0,ChatGPT,12,0,12,Conversation log\n"
        "19440254.0,8b74c7d8-1643-4bba-8c69-91cb4548c506,3,ChatGPT,935,178,1113,API log\n"
    )
    p = write(tmp_path, "BurstGPT_3.csv", text)
    assert kvwire.scan_trace(p).source.layout == "burstgpt-session"
    df = kvwire.read_trace(p)
    assert df.columns == [*COLUMNS, "model", "log_type", "session_id", "elapsed_s"]
    assert df["arrival_s"].to_list() == [0.0, 51.0, 144.0]
    assert df["session_id"].to_list() == [
        "1722ac82-0a46-4bf0-aa08-89794e7a2b3f",
        "d5983bf9-4b48-497b-892b-a58995247443",
        "8b74c7d8-1643-4bba-8c69-91cb4548c506",
    ]
    assert df["elapsed_s"].to_list() == [43.0, 2.0, 3.0]
    kept = kvwire.read_trace(p, keep_failed=True, extra=False)
    assert kept.columns == COLUMNS and kept["arrival_s"].to_list() == [0.0, 51.0, 51.5, 144.0]


def test_mooncake_keeps_hash_ids_and_skips_blank_lines(tmp_path: Path) -> None:
    """read_trace keeps Mooncake's ``hash_ids`` as a list column (for prefix caching), ignores unknown keys
    (DynoSim's ``session_id``) and skips blank lines."""
    text = (
        '{"timestamp": 27482, "input_length": 6955, "output_length": 52, "hash_ids": [46, 47, 48]}\n\n'
        '{"timestamp": 27482, "input_length": 513, "output_length": 0, "hash_ids": [46, 49], "session_id": "s"}\n'
        '{"timestamp": 30000, "input_length": 12, "output_length": 1, "hash_ids": []}\n'
    )
    df = kvwire.read_trace(write(tmp_path, "m.jsonl", text))
    assert df.schema["hash_ids"] == pl.List(pl.Int64)
    assert df["hash_ids"].to_list() == [[46, 47, 48], [46, 49], []]
    assert df["arrival_s"].to_list() == [0.0, 0.0, 2.518]


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("azure.csv", f"{HEADER}\r\n2023-11-16 18:17:03.9799600,4808,10\r\n2023-11-16 18:17:04.0319600,3180,0"),
        ("burst.csv", burst_text(BURST_ROWS)),
        (
            "mooncake.jsonl",
            '{"timestamp": 0, "input_length": 5, "output_length": 1, "hash_ids": [1]}\n'
            '{"timestamp": 7, "input_length": 6, "output_length": 0, "hash_ids": [1, 2]}\n',
        ),
    ],
)
def test_gzip_is_detected_and_read(tmp_path: Path, name: str, text: str) -> None:
    """A gzip-compressed file (whatever its name) reads to exactly the table of the plain file."""
    plain = write(tmp_path, name, text)
    packed = tmp_path / (name + ".gz")
    packed.write_bytes(gzip.compress(text.encode()))
    odd_name = tmp_path / ("renamed-" + name)
    odd_name.write_bytes(gzip.compress(text.encode()))
    expected = kvwire.read_trace(plain)
    assert kvwire.scan_trace(packed).source.compressed
    assert kvwire.read_trace(packed).equals(expected)
    assert kvwire.read_trace(odd_name).equals(expected)


def test_kvwire_tables_round_trip(tmp_path: Path) -> None:
    """A request table saved as Parquet or CSV (e.g. a run's ``res.requests``, every column) reads back to
    exactly its request columns; arrival times are kept as they are (not re-based to the first request)."""
    res = kvwire.simulate({"workload": {"requests": 300}})
    table = res.requests.with_columns(pl.col("arrival_s") + 7.25)  # a table whose first arrival is not 0
    table.write_parquet(tmp_path / "r.parquet")
    table.drop("id").write_csv(tmp_path / "r.csv")
    expected = table.select(COLUMNS).with_columns(pl.col(c).cast(pl.Int64) for c in COLUMNS[1:])
    for name in ("r.parquet", "r.csv"):
        scan = kvwire.scan_trace(tmp_path / name)
        assert scan.format == "kvwire"
        assert scan.collect().equals(expected), name
    assert kvwire.read_trace(tmp_path / "r.parquet", format="kvwire").equals(expected)


@pytest.mark.parametrize(
    ("name", "text", "fmt", "needle"),
    [
        ("a.csv", f"{HEADER}\n2024-05-10 00:00:00,5,1\n", "burstgpt", "missing column(s) 'Timestamp'"),
        ("a.csv", f"{HEADER}\n2024-05-10 00:00:00,5,1\n", "mooncake", "expects JSON Lines"),
        ("m.jsonl", '{"timestamp": 0, "input_length": 5, "output_length": 1}\n', "azure", "expects a CSV header"),
        ("k.csv", "arrival_s,prompt_tokens\n0.0,5\n", "auto", "missing column(s) 'output_tokens'"),
        ("x.csv", "when,what\n1,2\n", "auto", "unknown trace format"),
    ],
)
def test_format_mismatch(tmp_path: Path, name: str, text: str, fmt: str, needle: str) -> None:
    """An explicit format the file does not match, or a header of no known format, is a TraceFileError at
    line 1 saying what was expected."""
    p = write(tmp_path, name, text)
    with pytest.raises(kvwire.TraceFileError) as info:
        kvwire.read_trace(p, format=fmt)
    assert needle in str(info.value) and str(p) in str(info.value)
    assert info.value.file == str(p) and info.value.line == 1


def test_bad_format_and_filter_arguments(tmp_path: Path) -> None:
    """An unknown format name, and BurstGPT filters on another format, are refused naming the argument."""
    p = write(tmp_path, "a.csv", f"{HEADER}\n2024-05-10 00:00:00,5,1\n")
    with pytest.raises(kvwire.TraceError) as info:
        kvwire.read_trace(p, format="splitwise")
    assert info.value.path == "format" and "azure" in str(info.value)
    for option in ({"model": "GPT-4"}, {"log_type": "API log"}, {"keep_failed": True}):
        with pytest.raises(kvwire.TraceError) as info:
            kvwire.read_trace(p, **option)  # type: ignore[arg-type]
        assert info.value.path == next(iter(option)) and "BurstGPT" in str(info.value)


# --------------------------------------------------------------------------------------------------
# Malformed files: a TraceFileError (never a raw Polars or Unicode exception) naming file, line and column

BURST_BAD = BURST_HEADER + "\n5,ChatGPT,472,18,490,Conversation log\n"
J0 = b'{"timestamp": 0, "input_length": 5, "output_length": 1}\n'  # a good Mooncake line at t = 0

MALFORMED = [
    # id, file name, content (bytes), line, column, words the message must hold
    ("empty", "t.csv", b"", None, None, "empty"),
    ("blank-only", "t.csv", b"\n\n \n", None, None, "blank lines"),
    ("header-only", "t.csv", f"{HEADER}\n".encode(), None, None, "no requests"),
    ("missing-column", "t.csv", b"TIMESTAMP,ContextTokens\n2024-05-10 00:00:00,5\n", 1, None, "GeneratedTokens"),
    ("bad-timestamp", "t.csv", f"{HEADER}\n2024-05-10 00:00:00,5,1\nyesterday,6,0\n".encode(), 3, "TIMESTAMP",
     "'yesterday' is not a timestamp"),
    ("impossible-date", "t.csv", f"{HEADER}\n2024-02-30 00:00:00,5,1\n".encode(), 2, "TIMESTAMP", "not a timestamp"),
    ("other-zone", "t.csv", f"{HEADER}\n2024-05-10 00:00:00+00:00,5,1\n2024-05-10 00:00:01+01:00,5,1\n".encode(),
     3, "TIMESTAMP", "+01:00"),
    ("seconds-60", "t.csv", f"{HEADER}\n2024-05-10 00:00:60.5,5,1\n".encode(), 2, "TIMESTAMP", "not a timestamp"),
    ("non-monotone", "t.csv",
     f"{HEADER}\n2024-05-10 00:00:01,5,1\n2024-05-10 00:00:02,5,1\n2024-05-10 00:00:00,5,1\n".encode(),
     4, "TIMESTAMP", "arrives before the request on line 3"),
    ("non-numeric", "t.csv", f"{HEADER}\n2024-05-10 00:00:00,5,1\n2024-05-10 00:00:01,abc,1\n".encode(),
     3, "ContextTokens", "'abc' is not a whole number"),
    ("fractional", "t.csv", f"{HEADER}\n2024-05-10 00:00:00,5,1\n2024-05-10 00:00:01,6.5,1\n".encode(),
     3, "ContextTokens", "'6.5' is not a whole number"),
    ("above-int64", "t.csv", f"{HEADER}\n2024-05-10 00:00:00,5,99999999999999999999999\n".encode(),
     2, "GeneratedTokens", "out of range"),
    ("above-2^32", "t.csv", f"{HEADER}\n2024-05-10 00:00:00,4294967296,1\n".encode(), 2, "ContextTokens",
     "4294967296 is out of range (token counts are below 2^32)"),
    ("negative", "t.csv", f"{HEADER}\n2024-05-10 00:00:00,5,1\n2024-05-10 00:00:01,5,-3\n".encode(),
     3, "GeneratedTokens", "-3 is negative"),
    ("empty-field", "t.csv", f"{HEADER}\n2024-05-10 00:00:00,5,1\n2024-05-10 00:00:01,,1\n".encode(),
     3, "ContextTokens", "empty"),
    ("too-many-fields", "t.csv", f"{HEADER}\n2024-05-10 00:00:00,5,1\n2024-05-10 00:00:01,5,1,7\n".encode(),
     3, None, "4 fields"),
    ("nul-bytes", "t.csv", HEADER.encode() + b"\n\x00\x00\x01\x02junk", 2, None, "not UTF-8 text: binary data"),
    ("bad-utf8", "t.csv", f"{HEADER}\n2024-05-10 00:00:00,5,1\n".encode() + b"\xff\xfe\xfa,1,2\n", 3, None,
     "not UTF-8"),
    ("utf16-bom", "t.csv", f"{HEADER}\n2024-05-10 00:00:00,5,1\n".encode("utf-16"), None, None,
     "not UTF-8 text: the file is UTF-16"),
    ("utf16-no-bom", "t.csv", f"{HEADER}\n2024-05-10 00:00:00,5,1\n".encode("utf-16-le"), None, None, "UTF-16"),
    ("truncated-gzip", "t.csv.gz", gzip.compress(f"{HEADER}\n2024-05-10 00:00:00,5,1\n".encode())[:12], None, None,
     "gzip"),
    ("burst-nan-time", "b.csv", (BURST_BAD + "nan,GPT-4,1,1,2,API log\n").encode(), 3, "Timestamp",
     "not a finite number of seconds"),
    ("burst-text-time", "b.csv", (BURST_BAD + "soon,GPT-4,1,1,2,API log\n").encode(), 3, "Timestamp",
     "'soon' is not a number"),
    ("json-truncated", "t.jsonl", J0 + b'{"timestamp": 10, "input_length": 5\n',
     2, None, "invalid JSON"),
    ("json-missing-field", "t.jsonl",
     J0 + b'{"timestamp": 10, "output_length": 1}\n',
     2, "input_length", "missing"),
    ("json-null-time", "t.jsonl", b'{"timestamp": null, "input_length": 5, "output_length": 1}\n', 1, "timestamp",
     "missing or null"),
    ("json-not-object", "t.jsonl", J0 + b'\n[1, 2, 3]\n', 3, None,
     "not a JSON object"),
    ("json-string-length", "t.jsonl", b'{"timestamp": 0, "input_length": "many", "output_length": 1}\n', 1,
     "input_length", "'many' is not a whole number"),
    ("json-float-length", "t.jsonl", b'{"timestamp": 0, "input_length": 10.7, "output_length": 1}\n', 1,
     "input_length", "10.7 is not a whole number"),
    ("json-bool-length", "t.jsonl", b'{"timestamp": 0, "input_length": true, "output_length": 1}\n', 1,
     "input_length", "not a whole number"),
    ("json-above-int64", "t.jsonl",
     J0 + b'{"timestamp": 1, "input_length": 99999999999999999999999, "output_length": 1}\n',
     2, "input_length", "out of range"),
    ("json-negative", "t.jsonl", b'{"timestamp": 0, "input_length": 5, "output_length": -1}\n', 1, "output_length",
     "negative"),
    ("json-non-monotone-after-blank", "t.jsonl",
     b'{"timestamp": 5, "input_length": 1, "output_length": 1}\n\n\n'
     b'{"timestamp": 4, "input_length": 1, "output_length": 1}\n',
     4, "timestamp", "arrives before the request on line 1"),
    ("json-too-deep", "t.jsonl", J0 + b'{"timestamp": 1, "input_length": 2, "x": ' + b"[" * 100_000 + b"]" * 100_000
     + b"}\n", 2, None, "nested too deeply"),
    ("json-2^32-length", "t.jsonl", b'{"timestamp": 0, "input_length": 4294967296, "output_length": 1}\n', 1,
     "input_length", "out of range"),
    ("json-bom", "t.jsonl", b"\xef\xbb\xbf" + J0, 1, None, "byte-order mark"),
    ("json-bad-hash-ids", "t.jsonl",
     b'{"timestamp": 0, "input_length": 5, "output_length": 1, "hash_ids": [1, "x"]}\n',
     1, "hash_ids", "list of integer"),
    ("kvwire-header-only", "k.csv", b"arrival_s,prompt_tokens,output_tokens\n", None, None, "no requests"),
    ("kvwire-negative-arrival", "k.csv", b"arrival_s,prompt_tokens,output_tokens\n-1.0,5,1\n0.5,5,1\n", 2,
     "arrival_s", "negative"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("name", "data", "line", "column", "needle"), [m[1:] for m in MALFORMED], ids=[m[0] for m in MALFORMED]
)
def test_malformed_file(
    tmp_path: Path, name: str, data: bytes, line: int | None, column: str | None, needle: str
) -> None:
    """Each malformed file is a kvwire.TraceFileError (not a Polars, Unicode or JSON exception) whose message
    names the file and gives the reason, and whose attributes (and message) give the line and column."""
    p = tmp_path / name
    p.write_bytes(data)
    with pytest.raises(kvwire.TraceFileError) as info:
        kvwire.read_trace(p)
    e = info.value
    message = str(e)
    assert message.startswith(f"{p}: "), message
    assert needle in message, message
    assert (e.file, e.line, e.column) == (str(p), line, column), message
    if line is not None:
        assert f"line {line}" in message and e.path.startswith(f"{p}:{line}")
    if column is not None:
        assert repr(column) in message and e.path.endswith(f":{column}")
    assert isinstance(e, kvwire.TraceError) and isinstance(e, ValueError)


def test_missing_file_and_directory(tmp_path: Path) -> None:
    """A missing file and a directory are TraceFileErrors naming the path, for every reader."""
    for reader in (kvwire.read_trace, kvwire.read_azure_csv, kvwire.read_mooncake_jsonl, kvwire.scan_trace):
        with pytest.raises(kvwire.TraceFileError) as info:
            reader(tmp_path / "none.csv")
        assert "none.csv" in str(info.value)
    with pytest.raises(kvwire.TraceFileError, match="directory"):
        kvwire.read_trace(tmp_path)


def test_error_far_into_a_file_names_its_line(tmp_path: Path) -> None:
    """Problems beyond the first 64 KiB (what detection reads) are found by the full scan and named by line:
    an invalid UTF-8 byte on line 5,002 of a gzip file, and a non-numeric count on line 6,001 of a plain one."""
    rows = "".join(f"2024-05-10 00:{i // 60 % 60:02d}:{i % 60:02d}.5+00:00,{i + 1},{i % 7}\n" for i in range(6000))
    junk = (HEADER + "\n" + rows[: rows.index("\n", 5000 * 38) + 1]).encode()
    cut = junk.count(b"\n")  # the next line is line cut + 1
    packed = tmp_path / "t.csv.gz"
    packed.write_bytes(gzip.compress(junk + b"2024-05-10 \xc3\x28:00:00,1,1\n"))
    with pytest.raises(kvwire.TraceFileError) as info:
        kvwire.read_trace(packed)
    assert info.value.line == cut + 1 and "not UTF-8" in str(info.value)
    plain = write(tmp_path, "t.csv", HEADER + "\n" + rows + "2024-05-10 02:00:00+00:00,many,1\n")
    with pytest.raises(kvwire.TraceFileError) as info:
        kvwire.read_trace(plain)
    assert (info.value.line, info.value.column) == (6002, "ContextTokens")


def test_huge_field_is_quoted_short(tmp_path: Path) -> None:
    """A 1 MB field is quoted in at most a few dozen characters: error messages stay one short line."""
    p = write(tmp_path, "t.csv", f"{HEADER}\n2024-05-10 00:00:00,{'9' * 1_000_000}x,1\n")
    with pytest.raises(kvwire.TraceFileError) as info:
        kvwire.read_trace(p)
    assert len(str(info.value)) < 300 + len(str(p)) and info.value.line == 2


def test_trace_file_error_pickles() -> None:
    """A TraceFileError survives pickling (Dask workers send errors back) with all its attributes."""
    e = kvwire.TraceFileError("f.csv: line 3, column 'C': bad", "f.csv:3:C", "f.csv", 3, "C")
    back = pickle.loads(pickle.dumps(e))
    assert (type(back), str(back), back.path, back.file, back.line, back.column) == (
        kvwire.TraceFileError, str(e), "f.csv:3:C", "f.csv", 3, "C")  # fmt: skip


def test_blank_lines_in_csv_are_skipped(tmp_path: Path) -> None:
    """Blank lines (every field empty) inside or at the end of a CSV are skipped, not read as requests."""
    p = write(tmp_path, "t.csv", f"{HEADER}\n2024-05-10 00:00:00,5,1\n\n2024-05-10 00:00:02,6,0\n\n\n")
    df = kvwire.read_trace(p)
    assert df["prompt_tokens"].to_list() == [5, 6] and df["arrival_s"].to_list() == [0.0, 2.0]


def test_missing_token_value_after_blank_lines_names_the_line(tmp_path: Path) -> None:
    """An empty token field is named by its physical line even after skipped blank lines."""
    p = write(tmp_path, "t.csv", f"{HEADER}\n2024-05-10 00:00:00,5,1\n\n\n2024-05-10 00:00:01,7,\n")
    with pytest.raises(kvwire.TraceFileError) as info:
        kvwire.read_trace(p)
    assert (info.value.line, info.value.column) == (5, "GeneratedTokens")


def test_columns_are_contiguous(tmp_path: Path) -> None:
    """read_trace (and every batch) returns one buffer per column, so the numpy arrays simulate hands to the
    core are views of the table, not copies (the requests are held once)."""
    rows = [f"2024-05-10 {i // 3600:02d}:{i // 60 % 60:02d}:{i % 60:02d},{i + 1},{i % 5}\n" for i in range(20_000)]
    p = write(tmp_path, "t.csv", HEADER + "\n" + "".join(rows))  # Polars' streaming scan reads it in morsels
    for df in (kvwire.read_trace(p), *kvwire.scan_trace(p).batches(rows=6_000)):
        assert df.n_chunks("all") == [1, 1, 1]
        for c in COLUMNS:
            assert np.shares_memory(df[c].to_numpy(), df[c].to_numpy())


def test_csv_with_utf8_bom(tmp_path: Path) -> None:
    """A CSV saved with a UTF-8 byte-order mark (as Excel does) reads like the same file without it."""
    text = f"{HEADER}\r\n2023-11-16 18:17:03.9799600,4808,10\r\n2023-11-16 18:17:04.0319600,3180,0\r\n"
    plain = write(tmp_path, "a.csv", text)
    bom = tmp_path / "b.csv"
    bom.write_bytes(b"\xef\xbb\xbf" + text.encode())
    assert kvwire.read_trace(bom).equals(kvwire.read_trace(plain))
