"""Hostile trace files and arguments (issue 23, "every failure named"): each is refused with a kvwire exception
naming the file, column, row or argument — never a raw ``EOFError``/``ValueError``/numpy error, never a wrong
answer, never a huge allocation.

Expected arrival times are computed here independently (Python's ``datetime`` and integer arithmetic), not
taken from the reader.
"""

from __future__ import annotations

import bz2
import datetime as dt
import gzip
import json
import lzma
import zipfile
from pathlib import Path

import kvwire
import polars as pl
import pytest
from click.testing import CliRunner
from kvwire.cli import main
from shared_paths import DATA

HEADER = "arrival_s,prompt_tokens,output_tokens"
AZURE = "TIMESTAMP,ContextTokens,GeneratedTokens"


def kvwire_csv(rows: int) -> bytes:
    """A kvwire request table of ``rows`` requests, 1 ms apart."""
    return (HEADER + "\n" + "".join(f"{i / 1000},{100 + i % 50},10\n" for i in range(rows))).encode()


def truncated_gzip(tmp_path: Path) -> Path:
    """A gzip file of 200,000 requests (about 3 MB of text: far past the 64 KiB detection reads and the first
    chunk) cut at two thirds of its compressed bytes."""
    packed = gzip.compress(kvwire_csv(200_000))
    p = tmp_path / "cut.csv.gz"
    p.write_bytes(packed[: len(packed) * 2 // 3])
    return p


def assert_truncated(e: kvwire.TraceFileError, p: Path) -> None:
    assert str(e).startswith(f"{p}: "), str(e)
    assert "truncated" in str(e) and "gzip" in str(e), str(e)
    assert e.file == str(p)


# --------------------------------------------------------------------------------------------------
# 1. A gzip file cut short


def test_truncated_gzip_is_named_when_read_whole(tmp_path: Path) -> None:
    """read_trace and trace_info of a gzip file cut past its first chunk: a TraceFileError naming the file and
    saying it is truncated (was a raw EOFError from the diagnosis's second read)."""
    p = truncated_gzip(tmp_path)
    for call in (kvwire.read_trace, kvwire.trace_info):
        with pytest.raises(kvwire.TraceFileError) as info:
            call(p)
        assert_truncated(info.value, p)


def test_truncated_gzip_is_named_in_batches(tmp_path: Path) -> None:
    """scan_trace(...).batches() of the same file: the same TraceFileError, raised by the chunk that meets the
    cut (was a raw EOFError)."""
    p = truncated_gzip(tmp_path)
    with pytest.raises(kvwire.TraceFileError) as info:
        for _ in kvwire.scan_trace(p).batches(rows=1000):
            pass
    assert_truncated(info.value, p)


def test_truncated_gzip_in_a_streamed_run_leaves_no_file(tmp_path: Path) -> None:
    """A streamed run (keep_requests=False) of a scenario replaying the file: the TraceFileError, and no output
    file (nor a temporary one) left behind."""
    p = truncated_gzip(tmp_path)
    out = tmp_path / "out" / "requests.parquet"
    out.parent.mkdir()
    with pytest.raises(kvwire.TraceFileError) as info:
        kvwire.simulate({"workload": {"trace": {"file": str(p)}}}, keep_requests=False, out=out)
    assert_truncated(info.value, p)
    assert list(out.parent.iterdir()) == []


def test_corrupt_gzip_is_named(tmp_path: Path) -> None:
    """A gzip file whose compressed bytes are damaged past the detection head (CRC or data error): a
    TraceFileError saying the gzip file is corrupt."""
    packed = bytearray(gzip.compress(kvwire_csv(200_000)))
    packed[-8] ^= 0xFF  # the CRC-32 of the trailer
    p = tmp_path / "bad.csv.gz"
    p.write_bytes(bytes(packed))
    with pytest.raises(kvwire.TraceFileError, match="gzip file is corrupt") as info:
        kvwire.read_trace(p)
    assert info.value.file == str(p)


# --------------------------------------------------------------------------------------------------
# 2. Integers beyond Python's 4,300-digit limit


HUGE = "9" * 5000


@pytest.mark.parametrize(
    ("name", "text", "line", "column"),
    [
        ("t.csv", f"{HEADER}\n0,1,1\n1,{HUGE},1\n", 3, "prompt_tokens"),
        ("a.csv", f"{AZURE}\n2023-11-16 18:17:03.97,1,1\n2023-11-16 18:17:04.0,1,{HUGE}\n", 3, "GeneratedTokens"),
        ("b.csv", "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n"
                  f"5,ChatGPT,{HUGE},18,490,Conversation log\n", 2, "Request tokens"),
        ("m.jsonl", '{"timestamp": 0, "input_length": 9, "output_length": 1}\n'
                    f'{{"timestamp": 1, "input_length": {HUGE}, "output_length": 1}}\n', 2, "input_length"),
        ("first.jsonl", f'{{"timestamp": 0, "input_length": 9, "output_length": {HUGE}}}\n', 1, "output_length"),
    ],
    ids=["kvwire", "azure", "burstgpt", "mooncake", "mooncake-first-line"],
)  # fmt: skip
def test_token_count_of_5000_digits(tmp_path: Path, name: str, text: str, line: int, column: str) -> None:
    """A token count of 5,000 digits: a TraceFileError naming the line and column and saying it is out of range
    (was Python's ValueError "Exceeds the limit (4300 digits) for integer string conversion")."""
    p = tmp_path / name
    p.write_text(text)
    with pytest.raises(kvwire.TraceFileError) as info:
        kvwire.read_trace(p)
    e = info.value
    assert (e.line, e.column) == (line, column), str(e)
    assert "5,000 digits" in str(e) and "out of range" in str(e)


# --------------------------------------------------------------------------------------------------
# 3, 4. trace_info's bins and a table's arrival times


def table(arrivals: list[float]) -> pl.DataFrame:
    n = len(arrivals)
    return pl.DataFrame({"arrival_s": arrivals, "prompt_tokens": [1] * n, "output_tokens": [1] * n})


def test_bin_count_is_bounded() -> None:
    """bin_s = 1e-9 over a 512 s span (5e11 bins, ~477 GiB of counts): refused before allocating, naming
    bin_s, giving the bound and the smallest bin_s that fits; that bin_s itself is accepted."""
    t = table([0.0, 512.0])
    with pytest.raises(kvwire.ScenarioError) as info:
        kvwire.trace_info(t, bin_s=1e-9)
    e = info.value
    assert e.path == "bin_s" and "10,000,000 bins" in str(e)
    smallest = float(str(e).split("bin_s ≥ ")[1].split(" s")[0])
    assert 512 / 9_999_999 <= smallest < 512 / 9_999_999 * 1.01
    assert kvwire.trace_info(t, bin_s=smallest)["rate"]["bins"] <= 10_000_000


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -1.0, 0.0, 1e-12, True, "1"])
def test_bin_s_must_be_finite_and_positive(bad: object) -> None:
    """A bin width that is not a finite number of at least a nanosecond: a ScenarioError naming bin_s."""
    with pytest.raises(kvwire.ScenarioError) as info:
        kvwire.trace_info(table([0.0, 1.0]), bin_s=bad)  # type: ignore[arg-type]
    assert info.value.path == "bin_s"


def test_default_bins_of_a_very_long_span() -> None:
    """A span beyond 200 weeks (the widest round bin) is cut into about 200 bins, not span / 1 week of them."""
    info = kvwire.trace_info(table([0.0, 1e300]))
    assert 200 <= info["rate"]["bins"] <= 201


@pytest.mark.parametrize(("value", "row"), [(float("nan"), 1), (float("inf"), 2), (float("-inf"), 0)])
def test_non_finite_arrival_in_a_table(value: float, row: int) -> None:
    """trace_info of a table whose arrival_s holds NaN or ±inf: a TraceError naming requests.arrival_s and the
    row (was numpy's "'list' argument must have no negative elements")."""
    arrivals = [0.0, 1.0, 2.0]
    arrivals[row] = value
    with pytest.raises(kvwire.TraceError) as info:
        kvwire.trace_info(table(arrivals))
    assert info.value.path == f"requests.arrival_s[{row}]"


def test_unsorted_and_overflowing_tables() -> None:
    """A table out of time order, a span beyond the range of a float, a negative or null token count: each a
    TraceError naming the column (and row); every figure of a table with huge but finite gaps is finite."""
    with pytest.raises(kvwire.TraceError) as info:
        kvwire.trace_info(table([0.0, 2.0, 1.0]))
    assert info.value.path == "requests.arrival_s[2]"
    with pytest.raises(kvwire.TraceError) as info:
        kvwire.trace_info(table([-1e308, 1.7e308]))
    assert info.value.path == "requests.arrival_s"
    t = table([0.0, 1.0]).with_columns(prompt_tokens=pl.Series([5, -1]))
    with pytest.raises(kvwire.TraceError) as info:
        kvwire.trace_info(t)
    assert info.value.path == "requests.prompt_tokens[1]"
    t = table([0.0, 1.0]).with_columns(output_tokens=pl.Series([5, None]))
    with pytest.raises(kvwire.TraceError) as info:
        kvwire.trace_info(t)
    assert info.value.path == "requests.output_tokens[1]"
    info_ = kvwire.trace_info(table([0.0, 1e300, 1.7e308]))
    gaps = info_["interarrival"]
    assert gaps["cv"] == pytest.approx(0.99999998823529, rel=1e-9)  # |1e300 - 1.69999999e308| / sum, by hand
    assert gaps["mean_s"] == pytest.approx(8.5e307)


def test_subnormal_span_has_no_rate() -> None:
    """Two requests 5e-324 s apart: the mean rate (1 / 5e-324) is beyond a float, so it is None, not inf."""
    assert kvwire.trace_info(table([0.0, 5e-324]))["mean_rate_per_s"] is None


# --------------------------------------------------------------------------------------------------
# 5. batches(rows=...)


@pytest.mark.parametrize("rows", [0, -5, 1.5, True, None])
def test_batches_rows_is_named(tmp_path: Path, rows: object) -> None:
    """batches(rows=0) (or another value that is not a whole number ≥ 1): a ScenarioError naming rows, raised
    by the call itself (was a plain ValueError on the first chunk)."""
    p = tmp_path / "t.csv"
    p.write_bytes(kvwire_csv(3))
    scan = kvwire.scan_trace(p)
    with pytest.raises(kvwire.ScenarioError) as info:
        scan.batches(rows=rows)  # type: ignore[arg-type]
    assert info.value.path == "rows"


# --------------------------------------------------------------------------------------------------
# 6. Timestamps more than 292 years apart


def test_azure_years_0001_and_9999(tmp_path: Path) -> None:
    """Azure timestamps in years 0001, 2023 and 9999 (spans beyond 64-bit nanoseconds, which wrapped around to
    61.6 years): arrivals equal integer nanoseconds from Python's datetime, divided by 1e9."""
    stamps = ["0001-01-01 00:00:00.000000001", "2023-11-16 18:17:03.9799600", "9999-12-31 23:59:59.999999999"]
    p = tmp_path / "a.csv"
    p.write_text(AZURE + "\n" + "".join(f"{s},10,1\n" for s in stamps))

    def ns(stamp: str) -> int:
        whole, frac = stamp.split(".")
        d = dt.datetime.strptime(whole, "%Y-%m-%d %H:%M:%S") - dt.datetime(1, 1, 1)
        return (d.days * 86400 + d.seconds) * 10**9 + int(frac.ljust(9, "0"))

    expected = [(ns(s) - ns(stamps[0])) / 1e9 for s in stamps]
    assert kvwire.read_trace(p)["arrival_s"].to_list() == expected
    assert expected[-1] > 3.15e11  # about 9,999 years, not 61.6
    info = kvwire.trace_info(p)
    assert info["span_s"] == expected[-1]


def test_far_apart_times_beyond_a_float(tmp_path: Path) -> None:
    """Mooncake timestamps -1.7e308 and 1.7e308 ms: each finite, their difference is not; a TraceFileError
    naming line 2's timestamp (was an infinite arrival time)."""
    p = tmp_path / "m.jsonl"
    p.write_text('{"timestamp": -1.7e308, "input_length": 9, "output_length": 1}\n'
                 '{"timestamp": 1.7e308, "input_length": 9, "output_length": 1}\n')  # fmt: skip
    with pytest.raises(kvwire.TraceFileError) as info:
        kvwire.read_trace(p)
    assert (info.value.line, info.value.column) == (2, "timestamp")


@pytest.mark.parametrize(("option", "value"), [("time_scale", 1e308), ("rate_per_s", 1e-310)])
def test_rescaling_beyond_a_float(tmp_path: Path, option: str, value: float) -> None:
    """A time_scale (or rate_per_s) that takes arrival times to infinity: a ScenarioError naming the option,
    read whole or in batches."""
    p = tmp_path / "t.csv"
    p.write_text(f"{HEADER}\n0,1,1\n10,1,1\n")
    with pytest.raises(kvwire.ScenarioError) as info:
        kvwire.read_trace(p, **{option: value})  # type: ignore[arg-type]
    assert info.value.path == option
    with pytest.raises(kvwire.ScenarioError) as info:
        list(kvwire.scan_trace(p, **{option: value}).batches())  # type: ignore[arg-type]
    assert info.value.path == option


# --------------------------------------------------------------------------------------------------
# 8. Other compressions


def zstd_frame(data: bytes) -> bytes:
    """A zstd frame holding ``data`` as one raw block, written by hand (RFC 8878: magic, frame header with a
    single-segment 4-byte content size, one last raw block; no checksum)."""
    assert len(data) < 1 << 21
    header = b"\x28\xb5\x2f\xfd" + bytes([0b1010_0000]) + len(data).to_bytes(4, "little")
    block = ((len(data) << 3) | 1).to_bytes(3, "little")  # last block, raw
    return header + block + data


def zipped(data: bytes) -> bytes:
    import io

    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("t.csv", data)
    return buf.getvalue()


@pytest.mark.parametrize(
    ("name", "pack"),
    [("zstd", zstd_frame), ("xz", lzma.compress), ("bzip2", bz2.compress), ("zip", zipped)],
)
def test_other_compressions_are_named(tmp_path: Path, name: str, pack: object) -> None:
    """A zstd, xz, bzip2 or zip file (was "UTF-16 encoded" or "binary data"): a TraceFileError naming the
    compression and saying that gzip is what kvwire reads; also when it is inside a gzip file."""
    data = pack(kvwire_csv(5))  # type: ignore[operator]
    p = tmp_path / "t.csv.x"
    p.write_bytes(data)
    with pytest.raises(kvwire.TraceFileError) as info:
        kvwire.read_trace(p)
    message = str(info.value)
    assert name in message and "gzip" in message and "UTF-16" not in message, message
    p.write_bytes(gzip.compress(data))
    with pytest.raises(kvwire.TraceFileError) as info:
        kvwire.read_trace(p)
    assert name in str(info.value) and "the gzip file holds" in str(info.value)


# --------------------------------------------------------------------------------------------------
# 9. kvwire trace-info --json: strict JSON


def strict(text: str) -> object:
    """``json.loads`` that refuses NaN and ±Infinity (which it takes by default, but RFC 8259 does not)."""

    def refuse(name: str) -> object:
        raise ValueError(f"non-finite JSON constant {name}")

    return json.loads(text, parse_constant=refuse)


def test_cli_json_is_strict(tmp_path: Path) -> None:
    """``kvwire trace-info --json`` of a trace two requests 5e-324 s apart (a mean rate beyond a float): strict
    JSON with that figure null (was a ValueError traceback from json.dumps(allow_nan=False)); the real Azure
    trace's output is strict JSON too."""
    p = tmp_path / "t.csv"
    p.write_text(f"{HEADER}\n0,1,1\n5e-324,1,1\n")
    r = CliRunner().invoke(main, ["trace-info", str(p), "--json"])
    assert r.exit_code == 0, r.output
    info = strict(r.stdout)
    assert isinstance(info, dict) and info["mean_rate_per_s"] is None and info["requests"] == 2
    r = CliRunner().invoke(main, ["trace-info", str(DATA / "azure-llm-2023" / "code.csv"), "--json"])
    assert r.exit_code == 0, r.output
    assert strict(r.stdout) == json.loads(json.dumps(kvwire.trace_info(DATA / "azure-llm-2023" / "code.csv")))


def test_cli_hostile_inputs_are_one_line(tmp_path: Path) -> None:
    """The new refusals reach the command line as one error line, no traceback: a zstd file, a truncated gzip
    file, a bin width giving too many bins."""
    z = tmp_path / "t.csv.zst"
    z.write_bytes(zstd_frame(kvwire_csv(5)))
    plain = tmp_path / "t.csv"
    plain.write_bytes(kvwire_csv(50))  # a span of 0.049 s: 49 million bins of 1 ns
    for args, needle in (
        ([str(z)], "zstd"),
        ([str(truncated_gzip(tmp_path))], "truncated"),
        ([str(plain), "--bin-s", "1e-9"], "bin_s"),
    ):
        r = CliRunner().invoke(main, ["trace-info", *args])
        assert r.exit_code == 1 and needle in r.output and "Traceback" not in r.output, r.output
        assert r.exception is None or isinstance(r.exception, SystemExit)


# --------------------------------------------------------------------------------------------------
# A hostile pass: what else came out as a raw exception, a wrong diagnosis or a silent choice


def test_rows_beyond_64_bits(tmp_path: Path) -> None:
    """batches(rows=2**70): a ScenarioError naming rows (was OverflowError from Polars)."""
    p = tmp_path / "t.csv"
    p.write_bytes(kvwire_csv(3))
    with pytest.raises(kvwire.ScenarioError) as info:
        kvwire.scan_trace(p).batches(rows=2**70)
    assert info.value.path == "rows"


def test_zeroed_file_is_binary_not_utf16(tmp_path: Path) -> None:
    """A file of NUL bytes (a zeroed or never-written file): "binary data" (was "the file is UTF-16
    encoded"); real BOM-less UTF-16 is still named UTF-16."""
    p = tmp_path / "t.csv"
    p.write_bytes(bytes(4096))
    with pytest.raises(kvwire.TraceFileError, match="binary data") as info:
        kvwire.read_trace(p)
    assert "UTF-16" not in str(info.value)
    p.write_bytes(kvwire_csv(3).decode().encode("utf-16-le"))
    with pytest.raises(kvwire.TraceFileError, match="UTF-16"):
        kvwire.read_trace(p)


@pytest.mark.parametrize("at", [1, 40])
def test_unclosed_quote_is_named_by_line(tmp_path: Path, at: int) -> None:
    """A quoted field that never closes (Polars reads the rest of the file as one field): a TraceFileError
    naming the line the quote opens on (was "the trace has no requests" on the first data line, or
    Polars' "could not parse" without a line)."""
    lines = [f"{i},ChatGPT,472,18,490,Conversation log" for i in range(60)]
    lines[at] = lines[at].replace("ChatGPT", '"ChatGPT')
    p = tmp_path / "b.csv"
    p.write_text("Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n" + "\n".join(lines) + "\n")
    with pytest.raises(kvwire.TraceFileError, match="quoted field") as info:
        kvwire.read_trace(p)
    assert info.value.line == at + 2


def test_a_quoted_field_over_two_lines_is_not_unclosed(tmp_path: Path) -> None:
    """A quoted field holding a line break (valid CSV) reads, and its request is kept."""
    p = tmp_path / "b.csv"
    p.write_text("Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n"
                 '5,"Chat\nGPT",472,18,490,Conversation log\n6,GPT-4,10,2,12,API log\n')  # fmt: skip
    assert kvwire.read_trace(p)["model"].to_list() == ["Chat\nGPT", "GPT-4"]


def test_header_naming_a_column_twice(tmp_path: Path) -> None:
    """A header with prompt_tokens twice (Polars silently read the first): refused on line 1, naming it."""
    p = tmp_path / "t.csv"
    p.write_text("arrival_s,prompt_tokens,output_tokens,prompt_tokens\n0,5,1,7\n")
    with pytest.raises(kvwire.TraceFileError, match="'prompt_tokens' twice") as info:
        kvwire.read_trace(p)
    assert info.value.line == 1


def test_reader_argument_types(tmp_path: Path) -> None:
    """extra="no" (was taken as true), a path that is None, bytes or a number (was "None: cannot read the
    file"): TraceErrors naming the argument."""
    p = tmp_path / "t.csv"
    p.write_bytes(kvwire_csv(3))
    with pytest.raises(kvwire.TraceError) as info:
        kvwire.read_trace(p, extra="no")  # type: ignore[arg-type]
    assert info.value.path == "extra"
    for bad in (None, b"t.csv", 5):
        with pytest.raises(kvwire.TraceError) as info:
            kvwire.read_trace(bad)  # type: ignore[arg-type]
        assert info.value.path == "path"


def test_trace_info_arguments(tmp_path: Path) -> None:
    """trace_info of a dict (was "{...}: cannot read the file"), an unknown option and reader options with a
    table (were TypeErrors), options leaving no request (was "the trace has no requests" of a file that has
    them): kvwire errors naming the argument."""
    p = tmp_path / "t.csv"
    p.write_bytes(kvwire_csv(3))
    with pytest.raises(kvwire.TraceError) as info:
        kvwire.trace_info({"arrival_s": [0.0]})  # type: ignore[arg-type]
    assert info.value.path == "trace"
    with pytest.raises(kvwire.ScenarioError) as info:
        kvwire.trace_info(p, bogus=1)
    assert info.value.path == "bogus"
    with pytest.raises(kvwire.ScenarioError) as info:
        kvwire.trace_info(table([0.0, 1.0]), sample=0.5)
    assert info.value.path == "sample"
    with pytest.raises(kvwire.TraceError) as info:
        kvwire.trace_info(p, start_s=100.0)
    assert info.value.path == "start_s" and "no requests are left" in str(info.value)
