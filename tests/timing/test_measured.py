"""The readers of measured step times (``kvwire.timing.measured``): kvwire's calibration CSV and Splitwise's
``perf_model.csv`` come out as one normalised table; every bad file is a ``MeasurementError`` whose message and
attributes name the file, the line and the column; Vidur's per-operator profiles are refused saying why."""

from __future__ import annotations

import pickle
from pathlib import Path

import kvwire
import polars as pl
import pytest
from kvwire.timing.measured import SCHEMA, check_table, comments, detect, file_format, read_measured
from shared_paths import DATA

SPLITWISE = DATA / "measured" / "splitwise_a100.csv"
KV_HEADER = "phase,model,tp,batch,prompt_tokens,context_tokens,time_s"
SW_HEADER = (
    "model,hardware,prompt_size,batch_size,token_size,peak_power,average_power,prompt_time,token_time,e2e_time,"
    "tensor_parallel"
)


def write(tmp_path: Path, text: str, name: str = "m.csv") -> Path:
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    return p


def test_kvwire_csv_with_comments(tmp_path: Path) -> None:
    """A kvwire CSV (``#`` comment lines, the header, rows) reads into the normalised schema, rows in file order,
    ``source_row`` the 1-based line; the ``# key: value`` comments are readable too."""
    p = write(
        tmp_path,
        f"# format: kvwire calibration CSV\n# device: NVIDIA H200\n{KV_HEADER}\n"
        "prefill,llama3.1-8b,1,2,512,0,0.031\ndecode,llama3.1-8b,1,8,0,2048,0.0072\n",
    )
    t = read_measured(p)
    assert t.schema == pl.Schema(SCHEMA)
    assert t.rows() == [
        ("prefill", "llama3.1-8b", None, 1, 2, 512, 0, 0.031, 4),
        ("decode", "llama3.1-8b", None, 1, 8, 0, 2048, 0.0072, 5),
    ]
    assert comments(p) == {"format": "kvwire calibration CSV", "device": "NVIDIA H200"}
    assert file_format(p) == "kvwire"


def test_kvwire_csv_device_column(tmp_path: Path) -> None:
    """A ``device`` column, when a kvwire CSV has one, names each row's device preset."""
    t = read_measured(write(tmp_path, f"{KV_HEADER},device\ndecode,llama3-8b,1,1,0,16,0.005,h200\n"))
    assert t["device"].to_list() == ["h200"]


def test_splitwise_rows_become_a_prefill_and_a_decode() -> None:
    """Each Splitwise line gives a prefill (batch x prompt new tokens, ms -> s) and a decode at the mean context
    prompt + token_size // 2; the names map to kvwire presets (a100-80gb -> a100)."""
    t = read_measured(SPLITWISE)
    raw = pl.read_csv(SPLITWISE)
    assert t.height == 2 * raw.height
    assert set(t["model"].unique()) == {"llama2-70b", "bloom-176b"}
    assert set(t["device"].unique()) == {"a100"}
    first = raw.row(0, named=True)
    pre, dec = t.filter(pl.col("source_row") == 2).rows(named=True)
    assert (pre["phase"], pre["batch"], pre["prompt_tokens"], pre["context_tokens"]) == (
        "prefill", first["batch_size"], first["prompt_size"], 0,
    )  # fmt: skip
    assert pre["time_s"] == pytest.approx(first["prompt_time"] / 1e3)
    assert (dec["phase"], dec["prompt_tokens"], dec["context_tokens"]) == (
        "decode", 0, first["prompt_size"] + first["token_size"] // 2,
    )  # fmt: skip
    assert dec["time_s"] == pytest.approx(first["token_time"] / 1e3)
    assert t["tp"].unique().sort().to_list() == [2, 4, 8]


def test_splitwise_unknown_hardware_is_kept_and_one_token_has_no_decode(tmp_path: Path) -> None:
    """A hardware name without a preset (the power-capped H100) is kept as written, so it matches no device; a
    line with token_size 1 has no decode iteration and gives only its prefill."""
    p = write(tmp_path, f"{SW_HEADER}\nllama2-70b,h100-80gb-pcap,512,1,1,1,1,100.0,0,100.0,2\n")
    t = read_measured(p)
    assert t["device"].to_list() == ["h100-80gb-pcap"]
    assert t["phase"].to_list() == ["prefill"]


def test_detection_and_format_given(tmp_path: Path) -> None:
    """The format comes from the header; given, it is used as given (a kvwire file read as Splitwise lacks its
    columns)."""
    assert detect(KV_HEADER.split(",")) == "kvwire"
    assert detect(SW_HEADER.split(",")) == "splitwise"
    assert detect(["a", "b"]) is None
    p = write(tmp_path, f"{KV_HEADER}\nprefill,llama3-8b,1,1,16,0,0.01\n")
    with pytest.raises(kvwire.MeasurementError, match="missing column 'hardware'"):
        read_measured(p, "splitwise")


@pytest.mark.parametrize(
    ("text", "line", "column", "words"),
    [
        ("", None, None, "empty"),
        ("# only a comment\n", None, None, "empty"),
        ("x,y\n1,2\n", 1, None, "unknown format"),
        (f"{KV_HEADER}\n", 1, None, "no rows"),
        ("phase,model,tp,batch,prompt_tokens,time_s\nprefill,m,1,1,1,0.1\n", 1, "context_tokens", "missing column"),
        (f"{KV_HEADER}\nprefill,m,1,1,16,0,abc\n", 2, "time_s", "not a number"),
        (f"{KV_HEADER}\nprefill,m,1,1,16,0,0\n", 2, "time_s", "positive"),
        (f"{KV_HEADER}\nprefill,m,1,1,16,0,-1e-3\n", 2, "time_s", "positive"),
        (f"{KV_HEADER}\nprefill,m,1,1,16,0,nan\n", 2, "time_s", "positive"),
        (f"{KV_HEADER}\nprefill,m,1,1,16,0,\n", 2, "time_s", "empty cell"),
        (f"{KV_HEADER}\nverify,m,1,1,16,0,0.1\n", 2, "phase", "unknown phase"),
        (f"{KV_HEADER}\nprefill,m,1,1.5,16,0,0.1\n", 2, "batch", "whole number"),
        (f"{KV_HEADER}\nprefill,m,0,1,16,0,0.1\n", 2, "tp", "at least 1"),
        (f"{KV_HEADER}\nprefill,m,1,1,0,0,0.1\n", 2, "prompt_tokens", "at least 1"),
        (f"{KV_HEADER}\ndecode,m,1,1,5,10,0.1\n", 2, "prompt_tokens", "decode row has prompt_tokens 0"),
        (f"{KV_HEADER}\nprefill,,1,1,16,0,0.1\n", 2, "model", "model name"),
        (f"{KV_HEADER}\nprefill,m,1,1,16,0,0.1\nprefill,m,1\n", 3, "batch", "cells"),
        (f"{SW_HEADER}\nllama2-70b,a100-80gb,512,1,128,1,1,x,50,1,2\n", 2, "prompt_time", "not a number"),
        (f"{SW_HEADER}\nllama2-70b,a100-80gb,512,1,128,1,1,100,-5,1,2\n", 2, "token_time", "positive"),
        (f"{SW_HEADER}\nllama2-70b,a100-80gb,512,1,128,1,1,100,50,1,two\n", 2, "tensor_parallel", "not a number"),
        (f"{SW_HEADER}\nllama2-70b,,512,1,128,1,1,100,50,1,2\n", 2, "hardware", "hardware name"),
    ],
)
def test_bad_files_name_file_line_and_column(
    tmp_path: Path, text: str, line: int | None, column: str | None, words: str
) -> None:
    """Each bad file is a MeasurementError (a ValueError) whose message names the file, the line and the
    column, with the same facts as attributes; it pickles."""
    p = write(tmp_path, text)
    with pytest.raises(kvwire.MeasurementError) as info:
        read_measured(p)
    e = info.value
    assert isinstance(e, ValueError) and isinstance(e, kvwire.KvwireError)
    assert words in str(e)
    assert str(p) in str(e) and e.file == str(p)
    assert e.line == line and e.column == column
    if line is not None:
        assert f"line {line}" in str(e)
    if column is not None:
        assert f"column {column}" in str(e) and e.path.endswith(f":{column}")
    again = pickle.loads(pickle.dumps(e))
    assert (str(again), again.path, again.line, again.column) == (str(e), e.path, e.line, e.column)


def test_unreadable_binary_and_non_utf8(tmp_path: Path) -> None:
    """A missing file, a binary file and a file not in UTF-8 are refused naming the file."""
    for path, words in [
        (tmp_path / "none.csv", "cannot read"),
        (write(tmp_path, "", "bin.csv"), "empty"),
    ]:
        with pytest.raises(kvwire.MeasurementError, match=words):
            read_measured(path)
    b = tmp_path / "b.csv"
    b.write_bytes(b"phase\x00\x01\x02")
    with pytest.raises(kvwire.MeasurementError, match="binary"):
        read_measured(b)
    u = tmp_path / "u.csv"
    u.write_bytes(("phase,model\n" + "é").encode("latin-1"))
    with pytest.raises(kvwire.MeasurementError, match="not UTF-8"):
        read_measured(u)


def test_vidur_profiles_are_refused_saying_why(tmp_path: Path) -> None:
    """Vidur's mlp.csv (per-operator times of one layer) is recognised and refused: it does not hold whole steps."""
    p = write(tmp_path, "time_stats.emb.min,time_stats.emb.median,n_head,num_tokens\n0.4,0.43,64,4096\n", "mlp.csv")
    with pytest.raises(kvwire.MeasurementError, match="per-operator times of one layer") as info:
        read_measured(p)
    assert "not whole steps" in str(info.value) and info.value.line == 1


def test_unknown_format_argument(tmp_path: Path) -> None:
    """A format name that is not one of the readers' is refused naming the argument."""
    with pytest.raises(kvwire.MeasurementError) as info:
        read_measured(write(tmp_path, f"{KV_HEADER}\n"), "vllm")
    assert info.value.path == "format"


def test_check_table_in_memory() -> None:
    """A table given in memory is checked as a file would be (row and column named), gaining a null device and
    row numbers when it has neither."""
    good = pl.DataFrame(
        {"phase": ["decode"], "model": ["llama3-8b"], "tp": [1], "batch": [4], "prompt_tokens": [0],
         "context_tokens": [100], "time_s": [0.01]}
    )  # fmt: skip
    t = check_table(good)
    assert t["device"].to_list() == [None] and t["source_row"].to_list() == [1]
    with pytest.raises(kvwire.MeasurementError) as info:
        check_table(good.with_columns(time_s=pl.lit(0.0)))
    assert info.value.path == "measured[0].time_s"
    with pytest.raises(kvwire.MeasurementError, match="missing column 'phase'"):
        check_table(good.drop("phase"))
    with pytest.raises(kvwire.MeasurementError) as info:
        check_table(good.with_columns(phase=pl.lit("other")))
    assert info.value.path == "measured[0].phase"
