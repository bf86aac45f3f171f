"""Every error is a kvwire error naming the argument, in words (issue 9 item 9). Each case is one of the
issue's: inputs that raised a Python traceback (UnicodeDecodeError, ValueError, RecursionError, Polars'
ComputeError, OverflowError) or a misleading message; each now raises a kvwire error whose ``path`` names the
argument and whose message says why, quoting at most ~200 characters of the input."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import kvwire
import numpy as np
import pytest
from click.testing import CliRunner
from kvwire import layout, quant
from kvwire.cli import main
from kvwire.errors import MESSAGE_LIMIT, QUOTE_LIMIT, shorten
from kvwire.kernels.report import load_kv

LAYOUT = layout.Layout("vllm_nhd", layers=1, heads=2, head_dim=8, block_size=4, dtype="float16")


def refused(call: Any, cls: type[kvwire.KvwireError], path: str, words: str) -> kvwire.KvwireError:
    with pytest.raises(cls) as e:
        call()
    assert e.value.path == path, (e.value.path, str(e.value))
    assert words in str(e.value), str(e.value)
    return e.value


# --------------------------------------------------------------------------------------------------
# Files that are not text


@pytest.mark.parametrize(
    ("name", "content"),
    [("u16.json", '{"slo": {}}'.encode("utf-16")), ("bin.toml", b"\xff\xfe\x00\x01\x02\x03 not toml")],
)
def test_binary_or_utf16_scenario_files(tmp_path: Path, name: str, content: bytes) -> None:
    """A UTF-16 or binary scenario file raised UnicodeDecodeError; it is a ScenarioError naming the file."""
    f = tmp_path / name
    f.write_bytes(content)
    refused(lambda: kvwire.simulate(f), kvwire.ScenarioError, str(f), "not UTF-8 text")


@pytest.mark.parametrize(
    ("name", "content"),
    [
        ("u16.csv", "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.68,4808,10\n".encode("utf-16")),
        ("bin.jsonl", b"\xff\xfe\x00garbage\n"),
        ("bad.jsonl", b'{"timestamp": 0, "input_length": 5, "output_length": 1}\n\xff\xfe\n'),
    ],
)
def test_binary_or_utf16_trace_files(tmp_path: Path, name: str, content: bytes) -> None:
    """UTF-16 or binary trace files (UnicodeDecodeError, or a misleading "missing columns") are a TraceError
    naming the file (and the line, where one line is bad) and saying it is not UTF-8 text."""
    f = tmp_path / name
    f.write_bytes(content)
    path = f"{f}:2" if name == "bad.jsonl" else str(f)
    refused(lambda: kvwire.read_trace(f), kvwire.TraceError, path, "not UTF-8 text")


# --------------------------------------------------------------------------------------------------
# Numbers and nesting beyond any field


def test_integers_over_4300_digits(tmp_path: Path) -> None:
    """An integer of more than 4,300 digits (Python's int-to-text limit) raised ValueError from the file
    reader, from JSON encoding and from ``--set``; each is a ScenarioError in words, not a 5,000-digit echo."""
    big = "1" + "0" * 5000
    f = tmp_path / "big.json"
    f.write_text('{"workload": {"requests": %s}}' % big, encoding="utf-8")  # noqa: UP031
    refused(lambda: kvwire.simulate(f), kvwire.ScenarioError, str(f), "more than 4,300 digits")
    e = refused(
        lambda: kvwire.simulate({"workload": {"requests": 10**5000}}),
        kvwire.ScenarioError,
        "workload.requests",
        "an integer of 5,001 digits is out of range",
    )
    assert len(str(e)) < 200
    r = CliRunner().invoke(main, ["run", "--set", f"workload.requests={big}"])
    assert r.exit_code != 0 and "4,300 digits" in r.output and "Traceback" not in r.output


def test_requests_10_pow_30_in_words() -> None:
    """``requests=10**30`` was refused with the number shown as a float of Rust's "expected u64"; now the
    message counts its digits."""
    refused(
        lambda: kvwire.simulate({"workload": {"requests": 10**30}}),
        kvwire.ScenarioError,
        "workload.requests",
        "an integer of 31 digits is out of range",
    )


def test_deep_nesting(tmp_path: Path) -> None:
    """Deeply nested dicts and files raised RecursionError; they are ScenarioErrors naming where."""
    deep: dict[str, Any] = {}
    cur = deep
    for _ in range(sys.getrecursionlimit() + 10):
        cur["a"] = {}
        cur = cur["a"]
    e = refused(lambda: kvwire.simulate({"model": deep}), kvwire.ScenarioError, "model" + ".a" * 32, "nested")
    assert "32 levels" in str(e)
    f = tmp_path / "deep.json"
    f.write_text('{"a":' * 100_000 + "1" + "}" * 100_000, encoding="utf-8")
    refused(lambda: kvwire.simulate(f), kvwire.ScenarioError, str(f), "nested too deeply")


def test_mooncake_lengths_above_int64(tmp_path: Path) -> None:
    """A Mooncake length above int64 raised Polars' ComputeError; it is a TraceError naming the line."""
    f = tmp_path / "mc.jsonl"
    f.write_text('{"timestamp": 0, "input_length": 99999999999999999999, "output_length": 5}\n', encoding="utf-8")
    refused(lambda: kvwire.read_mooncake_jsonl(f), kvwire.TraceError, f"{f}:1:input_length", "out of range")


def test_cli_overflowing_numbers() -> None:
    """``kvwire handoff --prompt-tokens 100000000000000000000`` and ``kvwire quant-report --threads -3`` raised
    OverflowError; both are clean CLI errors naming the option's argument."""
    r = CliRunner().invoke(main, ["handoff", "--prompt-tokens", "100000000000000000000"])
    assert r.exit_code != 0 and "prompt_tokens: must be a whole number of tokens" in r.output
    assert "Traceback" not in r.output and not isinstance(r.exception, OverflowError)
    r = CliRunner().invoke(main, ["quant-report", "--threads", "-3"])
    assert r.exit_code != 0 and "threads: must be a whole number from 1 to 1024" in r.output
    refused(lambda: kvwire.handoff("llama3-8b", 10**20), kvwire.ScenarioError, "prompt_tokens", "more than 20 digits")


# --------------------------------------------------------------------------------------------------
# Kernel arguments


@pytest.mark.parametrize("threads", [-1, -3, 0, 10**6, 2**64])
def test_threads_are_bounded(threads: int) -> None:
    """``threads=-1`` raised OverflowError ("can't convert negative int to unsigned") and 10**6 was accepted;
    threads is a whole number from 1 to 1024, in quant and layout alike."""
    x = np.ones((4, 32), np.float32)
    refused(lambda: quant.quantize(x, "fp8_e4m3", threads=threads), kvwire.QuantError, "threads", "from 1 to 1024")
    cache = LAYOUT.empty(2)
    refused(
        lambda: layout.convert(cache, LAYOUT, LAYOUT.with_(name="neutral"), threads=threads),
        kvwire.LayoutError,
        "threads",
        "from 1 to 1024",
    )


def test_group_size_2_pow_64() -> None:
    """``group_size=2**64`` raised OverflowError; it is a QuantError naming group_size and its range."""
    x = np.ones((4, 32), np.float32)
    refused(
        lambda: quant.quantize(x, "int4_sym_g32", group_size=2**64),
        kvwire.QuantError,
        "group_size",
        "must be a whole number from 1 to 32",
    )


def test_huge_src_heads() -> None:
    """A huge ``src_heads`` raised OverflowError with no argument named; it names src_heads."""
    cache = LAYOUT.empty(2)
    refused(
        lambda: layout.convert(cache, LAYOUT, LAYOUT.with_(name="neutral"), src_heads=(0, 2**70)),
        kvwire.LayoutError,
        "src_heads",
        "heads end at most at 2^20",
    )


def test_int16_codes() -> None:
    """Int16 codes gave "'ndarray' object is not an instance of 'ndarray'"; they are refused naming codes and
    the dtype, in ``decode`` and in ``dequantize`` of a hand-built tensor."""
    refused(lambda: quant.decode(np.zeros(8, np.int16), "e4m3fn"), kvwire.QuantError, "codes", "got int16")
    q = quant.quantize(np.ones((2, 32), np.float32), "fp8_e4m3_g128".replace("_g128", ""))
    bad = quant.QuantizedTensor(**{**q.__dict__, "codes": q.codes.astype(np.int16)})
    refused(lambda: quant.dequantize(bad), kvwire.QuantError, "codes", "expected uint8 codes, got int16")


def test_unaligned_arrays_are_called_unaligned() -> None:
    """An unaligned float32 view (a byte offset of 1) is contiguous; it was refused as "non-contiguous" and
    is now refused as unaligned, with how to fix it."""
    x = np.zeros(65, np.uint8)[1:].view(np.float32).reshape(2, 8)
    assert x.flags.c_contiguous and not x.flags.aligned
    refused(lambda: quant.quantize(x, "fp8_e4m3"), kvwire.QuantError, "x", "not aligned")
    out = np.zeros(65, np.uint8)[1:].view(np.float32).reshape(2, 8)
    codes = quant.cast(np.ones((2, 8), np.float32), "e4m3fn")
    refused(lambda: quant.decode(codes, "e4m3fn", out=out), kvwire.QuantError, "out", "not aligned")


def test_empty_block_table_is_not_called_float64() -> None:
    """``src_block_table=[]`` was refused as "got float64" (numpy's dtype of an empty list); an empty table
    is a table, and a real type problem is said in words."""
    cache = LAYOUT.empty(2)
    out = layout.convert(cache, LAYOUT, LAYOUT.with_(name="neutral"), tokens=0, src_block_table=[])
    assert isinstance(out, np.ndarray)
    refused(
        lambda: layout.convert(cache, LAYOUT, LAYOUT.with_(name="neutral"), tokens=4, src_block_table=[0.5]),
        kvwire.LayoutError,
        "src_block_table",
        "whole numbers",
    )


def test_v_scale_is_named_v_scale() -> None:
    """A v_scale that is positive but 0 in float32 (1e-46) reached the kernel and was reported as
    ``scales[1]``; it is refused as v_scale."""
    cache = LAYOUT.empty(2)
    fp8 = LAYOUT.with_(dtype="fp8_e4m3")
    refused(lambda: layout.convert(cache, LAYOUT, fp8, v_scale=1e-46), kvwire.LayoutError, "v_scale", "float32")


# --------------------------------------------------------------------------------------------------
# Words, not Rust types; short quotes


@pytest.mark.parametrize(
    ("scenario", "path", "words"),
    [
        ({"scheduler": {"max_decode_batch": -1}}, "scheduler.max_decode_batch", "a whole number from 0 to"),
        ({"prefill": {"instances": 1.5}}, "prefill.instances", "the number `1.5`, expected a whole number"),
        ({"slo": {"ttft_s": "x"}}, "slo.ttft_s", 'the text "x", expected a number'),
        ({"workload": {"seed": -2}}, "workload.seed", "expected a whole number ≥ 0"),
    ],
)
def test_messages_say_types_in_words(scenario: dict[str, Any], path: str, words: str) -> None:
    """serde's ``expected u32`` / ``expected f64`` / ``floating point`` are said in words."""
    e = refused(lambda: kvwire.validate(scenario), kvwire.ScenarioError, path, words)
    for rust in ("u32", "u64", "f64", "floating point"):
        assert rust not in str(e), str(e)


def test_error_messages_quote_at_most_200_characters(tmp_path: Path) -> None:
    """A 1 MB CSV field ended up whole on stderr; messages now quote at most 200 characters of any input
    value and stay around 1,000 characters at most."""
    f = tmp_path / "huge.csv"
    f.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.68," + "9" * 1_000_000 + "x,1\n")
    e = refused(lambda: kvwire.read_azure_csv(f), kvwire.TraceError, f"{f}:2:ContextTokens", "not a whole number")
    assert len(str(e)) < 400 and "9" * 50 in str(e)  # a short quote of the field
    e = refused(lambda: kvwire.validate({"model": "m" * 10**6}), kvwire.UnknownPresetError, "model", "unknown")
    assert len(str(e)) <= MESSAGE_LIMIT + 100
    assert max(len(w) for w in str(e).split()) <= QUOTE_LIMIT + 2
    assert shorten("short") == "short"
    r = CliRunner().invoke(main, ["run", "--set", "model=" + "q" * 200_000])
    assert r.exit_code != 0 and len(r.output) < 2000


# --------------------------------------------------------------------------------------------------
# .npy files


def test_structured_and_fake_header_npy(tmp_path: Path) -> None:
    """A structured .npy and one with a fake header are QuantErrors naming the file, in words."""
    s = tmp_path / "s.npy"
    np.save(s, np.zeros(4, dtype=[("a", "f4"), ("b", "i4")]))
    refused(lambda: load_kv(s), kvwire.QuantError, str(s), "expected a float32, float16 or bfloat16 array")
    fake = tmp_path / "fake.npy"
    fake.write_bytes(b"\x93NUMPY\x01\x00\x10\x00{'descr': '<f4'}xxxx")
    refused(lambda: load_kv(fake), kvwire.QuantError, str(fake), "cannot read .npy file")
