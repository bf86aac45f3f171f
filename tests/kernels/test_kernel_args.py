"""Hostile arguments to the kernels' public functions (issue 23 item 4, kernel part): each is refused at the
Python boundary with a kvwire error naming the argument — before the Rust call and before anything is
allocated — where it used to raise a bare ``TypeError``/``ValueError``/``MemoryError`` from Python or numpy, or
to give a silent wrong answer. ``kvwire quant-report`` on a ``.npy`` whose header lies is a kvwire error naming
the file, and the kernel commands' JSON is strict (no ``Infinity``/``NaN``).

Every expected value here is a literal or comes from numpy / ml_dtypes, never from the code under test.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import kvwire
import ml_dtypes
import numpy as np
import pytest
from click.testing import CliRunner
from kvwire import layout, quant
from kvwire.cli import main
from kvwire.kernels.layout import Layout
from kvwire.kernels.report import load_kv, report

X = np.linspace(-4, 4, 4 * 64, dtype=np.float32).reshape(4, 64)
NHD = Layout("vllm_nhd", layers=2, heads=8, head_dim=128, block_size=16, dtype="float16")
HND = NHD.with_(name="vllm_hnd")
#: A 4-block cache (64 token slots), 1 MiB.
CACHE = np.zeros(NHD.shape(4), np.float16)


def refused(call: Callable[[], object], cls: type[kvwire.KvwireError], path: str) -> kvwire.KvwireError:
    """``call()`` raises ``cls`` (a kvwire error) with ``path``, and the message starts with the path."""
    with pytest.raises(cls) as e:
        call()
    assert e.value.path == path, (e.value.path, str(e.value))
    assert str(e.value).startswith(path), str(e.value)
    return e.value


# --- quant: the cases --------------------------------------------------------------------------------


QUANT_CASES: list[tuple[str, Callable[[], object], str]] = [
    ("quantize format as a list", lambda: quant.quantize(X, ["mxfp4"]), "format"),  # type: ignore[arg-type]
    ("quantize scale rule as a number", lambda: quant.quantize(X, "mxfp4", scale_rule=1), "scale_rule"),  # type: ignore[arg-type]
    ("cast saturate as a string", lambda: quant.cast(X, "e4m3fn", saturate="no"), "saturate"),  # type: ignore[arg-type]
    ("cast saturate as a number", lambda: quant.cast(X, "e4m3fn", saturate=1), "saturate"),  # type: ignore[arg-type]
    ("cast element as a list", lambda: quant.cast(X, ["e4m3fn"]), "element"),  # type: ignore[arg-type]
    ("decode element as a list", lambda: quant.decode(np.zeros(4, np.uint8), ["e4m3fn"]), "element"),  # type: ignore[arg-type]
    ("error on strings", lambda: quant.error("ab", "cd"), "x"),  # type: ignore[arg-type]
    ("error on None", lambda: quant.error(None, None), "x"),  # type: ignore[arg-type]
    ("error on objects", lambda: quant.error(np.array([None]), np.array([None])), "x"),
    ("error on complex", lambda: quant.error(np.array([1j]), np.array([0j])), "x"),
    ("error on bools", lambda: quant.error(np.array([True]), np.array([False])), "x"),
    ("error x_hat strings", lambda: quant.error(X, np.full(X.shape, "a")), "x_hat"),
    ("error float64 beyond float32", lambda: quant.error(np.array([1e300]), np.array([0.0])), "x"),
    ("decode shape 2^40", lambda: quant.decode(np.zeros(8, np.uint8), "e4m3fn", shape=(2**40,)), "shape"),
    ("decode packed shape 2^40", lambda: quant.decode(np.zeros(8, np.uint8), "e2m1", shape=(2**40,)), "shape"),
    ("decode shape negative", lambda: quant.decode(np.zeros(8, np.uint8), "e4m3fn", shape=(-1,)), "shape"),
    ("decode shape of floats", lambda: quant.decode(np.zeros(8, np.uint8), "e4m3fn", shape=(8.0,)), "shape"),  # type: ignore[arg-type]
    ("decode shape of bools", lambda: quant.decode(np.zeros(1, np.uint8), "e4m3fn", shape=(True,)), "shape"),
    ("decode shape a string", lambda: quant.decode(np.zeros(8, np.uint8), "e4m3fn", shape="8"), "shape"),  # type: ignore[arg-type]
    ("decode 8-bit shape too small", lambda: quant.decode(np.zeros(8, np.uint8), "e4m3fn", shape=(4,)), "shape"),
    ("decode odd fp4 count", lambda: quant.decode(np.zeros(2, np.uint8), "e2m1", shape=(3,)), "shape"),
]


@pytest.mark.parametrize(("name", "call", "path"), QUANT_CASES, ids=[c[0] for c in QUANT_CASES])
def test_quant_arguments_refused_by_name(name: str, call: Callable[[], object], path: str) -> None:
    """Each call raised a bare TypeError/ValueError (a list where a name is expected, a non-bool flag,
    strings to ``error``), a numpy ``MemoryError`` (``decode`` allocating a 4 TiB output for a shape its 8
    bytes of codes cannot fill) or gave a silent answer (``error`` on None or 1e300 counted "non-finite");
    now each is a ``QuantError`` (a ValueError) naming the argument."""
    e = refused(call, kvwire.QuantError, path)
    assert isinstance(e, ValueError)


def test_decode_checks_the_shape_before_allocating() -> None:
    """A shape that does not match the codes is refused with the counts in words, not a MemoryError: the
    message gives the values the shape holds and the bytes it would need against the codes' size."""
    e = refused(lambda: quant.decode(np.zeros(8, np.uint8), "e4m3fn", shape=(2**40,)), kvwire.QuantError, "shape")
    assert "1,099,511,627,776 values" in str(e) and "codes has 8" in str(e)
    # The right shape still decodes: 0x38 is 1.0 in E4M3FN (ml_dtypes).
    want = np.array([0x38] * 8, np.uint8).view(ml_dtypes.float8_e4m3fn).astype(np.float32).reshape(2, 4)
    assert np.array_equal(quant.decode(np.full(8, 0x38, np.uint8), "e4m3fn", shape=(2, 4)), want)


def test_saturate_accepts_numpy_bools() -> None:
    """``saturate=np.True_`` (a numpy bool, e.g. from a mask) is a bool: accepted, and saturates like ``True``
    (448 is E4M3FN's largest finite value, code 0x7E; without saturation 1e6 becomes NaN, 0x7F)."""
    x = np.array([1e6], np.float32)
    assert quant.cast(x, "e4m3fn", saturate=np.True_).tolist() == [0x7E]
    assert quant.cast(x, "e4m3fn", saturate=np.False_).tolist() == [0x7F]


def test_error_still_takes_lists_and_integer_arrays() -> None:
    """Real numbers in any numeric form are still compared (as float32): nested lists and integer arrays.
    Expected figures by hand: x = [1, 2], x̂ = [1, 2.5] → MSE 0.125, max error 0.5."""
    e = quant.error([1.0, 2.0], np.array([1.0, 2.5]))
    assert e["mse"] == 0.125 and e["max_abs"] == 0.5 and e["count"] == 2
    assert quant.error(np.array([3, 4], np.int64), np.array([3, 4], np.int32))["mse"] == 0.0


# --- quant: an edited QuantizedTensor ---------------------------------------------------------------------


def _mx() -> quant.QuantizedTensor:
    x = np.random.default_rng(3).standard_normal((64, 64), dtype=np.float32)
    return quant.quantize(x, "mxfp4", axis=1)


EDITS: list[tuple[str, Callable[[], quant.QuantizedTensor], str]] = [
    # Silent before: blocks decoded down the other axis (the scales' shape says axis 1).
    ("axis changed", lambda: dataclasses.replace(_mx(), axis=0), "scales"),
    # Silent before: the core ignores MX's group_size.
    ("MX group_size changed", lambda: dataclasses.replace(_mx(), group_size=0), "group_size"),
    # MemoryError before: a 4 TiB output allocated for 2 KiB of codes.
    ("shape of 2^40 values", lambda: dataclasses.replace(_mx(), shape=(2**20, 2**20)), "codes"),
    ("shape negative", lambda: dataclasses.replace(_mx(), shape=(-64, -64)), "shape"),
    ("shape of floats", lambda: dataclasses.replace(_mx(), shape=(64.0, 64.0)), "shape"),
    # TypeError before.
    (
        "tensor scale a string",
        lambda: dataclasses.replace(quant.quantize(X, "nvfp4"), tensor_scale="1"),
        "tensor_scale",
    ),
    (
        "tensor scale NaN",
        lambda: dataclasses.replace(quant.quantize(X, "nvfp4"), tensor_scale=float("nan")),
        "tensor_scale",
    ),
    ("tensor scale on MX", lambda: dataclasses.replace(_mx(), tensor_scale=2.0), "tensor_scale"),
    (
        "zero points on a symmetric format",
        lambda: dataclasses.replace(quant.quantize(X, "int4_sym_g32"), zeros=np.zeros((4, 2), np.float16)),
        "zeros",
    ),
    ("scales transposed", lambda: dataclasses.replace(_mx(), scales=np.ascontiguousarray(_mx().scales.T)), "scales"),  # type: ignore[union-attr]
    (
        "8-bit codes reshaped",
        lambda: dataclasses.replace(
            quant.quantize(X, "fp8_e4m3"), codes=quant.quantize(X, "fp8_e4m3").codes.reshape(64, 4)
        ),
        "codes",
    ),
    (
        "int group_size not dividing",
        lambda: dataclasses.replace(quant.quantize(X, "int8_sym_g32"), group_size=48),
        "group_size",
    ),
    ("format a list", lambda: dataclasses.replace(_mx(), format=["mxfp4"]), "format"),
    ("scale rule a number", lambda: dataclasses.replace(_mx(), scale_rule=1), "scale_rule"),
]


@pytest.mark.parametrize(("name", "edit", "path"), EDITS, ids=[e[0] for e in EDITS])
def test_edited_quantized_tensor_is_refused(name: str, edit: Callable[[], quant.QuantizedTensor], path: str) -> None:
    """A QuantizedTensor whose fields were changed after :func:`quant.quantize` so that payload, scales,
    shape and format disagree is refused by ``dequantize`` with the field named, before any output is
    allocated. Before, some decoded silently in the wrong arrangement (axis changed, MX group_size ignored),
    others raised a numpy MemoryError or a bare TypeError."""
    refused(lambda: quant.dequantize(edit()), kvwire.QuantError, path)


def test_dequantize_refuses_what_is_not_a_quantized_tensor() -> None:
    """``dequantize("x")`` raised AttributeError; now a QuantError naming ``q``."""
    refused(lambda: quant.dequantize("x"), kvwire.QuantError, "q")  # type: ignore[arg-type]


def test_unedited_tensors_still_decode_to_their_reference() -> None:
    """The checks refuse no tensor ``quantize`` made: every format decodes a constant 1.0 back to 1.0 (within
    1e-2: the integer formats' fp16 scale 1/127 or 1/7 is not exact), including an fp8 format given a group
    and an integer format with a group override."""
    x = np.ones((4, 256), np.float32)
    names = [n for n in quant.formats()["name"].to_list() if n not in ("none", "fp8_ds_mla")]
    for name in names:
        assert np.allclose(quant.dequantize(quant.quantize(x, name)), x, rtol=0, atol=1e-2), name
    for name, group in (("fp8_e4m3", 64), ("int4_asym_g32", 128)):
        assert np.allclose(quant.dequantize(quant.quantize(x, name, group_size=group)), x, rtol=0, atol=1e-2), name


# --- layout -------------------------------------------------------------------------------------------------


LAYOUT_CASES: list[tuple[str, Callable[[], object], type[kvwire.KvwireError], str]] = [
    ("empty(-1)", lambda: NHD.empty(-1), kvwire.LayoutError, "blocks"),
    ("empty(True)", lambda: NHD.empty(True), kvwire.LayoutError, "blocks"),
    ("empty(2.0)", lambda: NHD.empty(2.0), kvwire.LayoutError, "blocks"),  # type: ignore[arg-type]
    ("shape(-1)", lambda: NHD.shape(-1), kvwire.LayoutError, "blocks"),
    ("shape('2')", lambda: NHD.shape("2"), kvwire.LayoutError, "blocks"),  # type: ignore[arg-type]
    ("empty(2^40)", lambda: NHD.empty(2**40), kvwire.ResourceError, "blocks"),
    ("convert tokens=10^12", lambda: layout.convert(CACHE, NHD, HND, tokens=10**12), kvwire.LayoutError, "tokens"),
    ("gather tokens=10^12", lambda: layout.gather(CACHE, NHD, tokens=10**12), kvwire.LayoutError, "tokens"),
    (
        "tokens=10^12 through a 4-block table",
        lambda: layout.convert(CACHE, NHD, HND, tokens=10**12, src_block_table=[0, 1, 2, 3]),
        kvwire.LayoutError,
        "src_block_table",
    ),
    (
        "dst_block_table entry 2^31-1",
        lambda: layout.convert(CACHE, NHD, HND, dst_block_table=[2**31 - 1, 1, 2, 3]),
        kvwire.ResourceError,
        "dst_block_table[0]",
    ),
    (
        "dst_slot_mapping entry 2^62",
        lambda: layout.convert(CACHE, NHD, HND, dst_slot_mapping=[2**62, *range(1, 64)]),
        kvwire.ResourceError,
        "dst_slot_mapping[0]",
    ),
    (
        "dst_slot_mapping too long and huge",
        lambda: layout.convert(CACHE, NHD, HND, dst_slot_mapping=[*range(64), 2**40]),
        kvwire.LayoutError,
        "dst_slot_mapping",
    ),
    ("layout name a list", lambda: Layout(["vllm_nhd"], 1, 1, 1), kvwire.LayoutError, "layout.name"),  # type: ignore[arg-type]
    ("layout dtype a number", lambda: Layout("vllm_nhd", 1, 1, 1, dtype=16), kvwire.LayoutError, "layout.dtype"),  # type: ignore[arg-type]
    ("layout layers 10^30", lambda: Layout("vllm_nhd", 10**30, 1, 1), kvwire.LayoutError, "layout.layers"),
    ("with_ an unknown field", lambda: NHD.with_(head=4), kvwire.LayoutError, "head"),
    ("src_layout a string", lambda: layout.convert(CACHE, "vllm_nhd", HND), kvwire.LayoutError, "src_layout"),  # type: ignore[arg-type]
    (
        "src_heads of bools",
        lambda: layout.convert(CACHE, NHD, HND.with_(heads=1), src_heads=(True, 2)),
        kvwire.LayoutError,
        "src_heads",
    ),  # type: ignore[arg-type]
    (
        "src_heads of floats",
        lambda: layout.convert(CACHE, NHD, HND.with_(heads=1), src_heads=(0.5, 1)),
        kvwire.LayoutError,
        "src_heads",
    ),  # type: ignore[arg-type]
    (
        "src_heads a string",
        lambda: layout.convert(CACHE, NHD, HND.with_(heads=1), src_heads="01"),
        kvwire.LayoutError,
        "src_heads",
    ),  # type: ignore[arg-type]
    (
        "k_scale a string",
        lambda: layout.convert(CACHE, NHD, HND.with_(dtype="fp8_e4m3"), k_scale="2"),
        kvwire.LayoutError,
        "k_scale",
    ),  # type: ignore[arg-type]
    (
        "v_scale a bool",
        lambda: layout.convert(CACHE, NHD, HND.with_(dtype="fp8_e4m3"), v_scale=True),
        kvwire.LayoutError,
        "v_scale",
    ),
    (
        "scale_factor dtype a list",
        lambda: layout.scale_factor(["fp8_e4m3"], "fp8_e4m3fnuz"),
        kvwire.LayoutError,
        "src_dtype",
    ),  # type: ignore[arg-type]
]


@pytest.mark.parametrize(("name", "call", "cls", "path"), LAYOUT_CASES, ids=[c[0] for c in LAYOUT_CASES])
def test_layout_arguments_refused_by_name(
    name: str, call: Callable[[], object], cls: type[kvwire.KvwireError], path: str
) -> None:
    """Each raised a numpy ValueError/MemoryError (``empty(-1)``; ``tokens=10**12`` on a 4-block cache
    allocating 7 PiB; a destination entry of 2^31-1 allocating 256 TiB), a bare TypeError/OverflowError, or
    was silently accepted (``src_heads=(0.5, 1)`` read as (0, 1), ``k_scale="2"`` as 2.0, ``shape(-1)`` a
    negative dimension). Now each is a kvwire error naming the argument: a LayoutError, or a ResourceError
    (a MemoryError) when the destination it asks for would not fit in memory."""
    refused(call, cls, path)


STILL_REFUSED: list[tuple[str, Callable[[], object], type[kvwire.KvwireError], str]] = [
    (
        "dst_block_table entry negative",
        lambda: layout.convert(CACHE, NHD, HND, dst_block_table=[-3, 1, 2, 3]),
        kvwire.LayoutError,
        "dst_block_table[0]",
    ),
    (
        "dst_slot_mapping entry -2",
        lambda: layout.convert(CACHE, NHD, HND, dst_slot_mapping=[-2, *range(1, 64)]),
        kvwire.LayoutError,
        "dst_slot_mapping[0]",
    ),
]


@pytest.mark.parametrize(("name", "call", "cls", "path"), STILL_REFUSED, ids=[c[0] for c in STILL_REFUSED])
def test_negative_destination_entries_still_refused(
    name: str, call: Callable[[], object], cls: type[kvwire.KvwireError], path: str
) -> None:
    """Negative destination entries (other than -1 padding in a slot mapping) were refused by the core after
    the destination was allocated; the new pre-allocation checks refuse them first, naming the same entry."""
    refused(call, cls, path)


def test_tokens_beyond_the_cache_say_so() -> None:
    """``tokens=10**12`` on a 4-block cache says the tokens exceed the cache and gives its size (4·16)."""
    e = refused(lambda: layout.convert(CACHE, NHD, HND, tokens=10**12), kvwire.LayoutError, "tokens")
    assert "exceed the cache" in str(e) and "4·16" in str(e)


def test_destination_sized_by_its_table_still_converts() -> None:
    """The checks keep the documented sizing: without ``out``, the destination holds blocks 0 through the
    largest table entry, token t of the source in block table[t // 16] (a block count from the table, not
    from kvwire: [5, 0] → 6 blocks)."""
    src = (np.arange(CACHE.size) % 2048).astype(np.float16).reshape(CACHE.shape)
    out = layout.convert(src, NHD, NHD, tokens=32, dst_block_table=[5, 0])
    assert isinstance(out, np.ndarray) and out.shape == NHD.shape(6)
    assert np.array_equal(out[:, 5], src[:, 0]) and np.array_equal(out[:, 0], src[:, 1])


# --- quant-report and the kernel commands' JSON ------------------------------------------------------------


def _npy_with_header(path: Path, header: str, data: bytes = b"\x00" * 64) -> Path:
    """A version-1.0 ``.npy`` file with ``header`` verbatim (padded as numpy pads it) and ``data`` after it."""
    h = header.encode("latin1")
    h += b" " * (64 - (10 + len(h) + 1) % 64) + b"\n"
    path.write_bytes(b"\x93NUMPY\x01\x00" + len(h).to_bytes(2, "little") + h + data)
    return path


FAKE_HEADERS = {
    "huge": "{'descr': '<f4', 'fortran_order': False, 'shape': (1099511627776, 1024), }",
    "short": "{'descr': '<f4', 'fortran_order': False, 'shape': (1000,), }",
    "negative": "{'descr': '<f4', 'fortran_order': False, 'shape': (-5,), }",
    "garbage": "not a dict at all",
}


@pytest.mark.parametrize("kind", list(FAKE_HEADERS))
def test_quant_report_fake_header_names_the_file(tmp_path: Path, kind: str) -> None:
    """``kvwire quant-report`` on a ``.npy`` whose header claims a shape its data does not hold or is garbage
    is a kvwire error naming the file: exit status 1, ``Error: FILE: cannot read .npy file: ...``, no
    traceback. The "huge" header (4 PiB of float32 in a 64-byte file) was numpy's MemoryError before; the
    others were already refused and are kept as the same check's other outcomes."""
    f = _npy_with_header(tmp_path / f"{kind}.npy", FAKE_HEADERS[kind])
    r = CliRunner().invoke(main, ["quant-report", str(f), "--repeat", "1"])
    assert r.exit_code == 1 and r.exception is not None and isinstance(r.exception, SystemExit), r.output
    assert f"Error: {f}: cannot read .npy file" in r.output, r.output
    refused(lambda: load_kv(f), kvwire.QuantError, str(f))


@pytest.mark.parametrize(
    ("name", "content", "words"),
    [
        ("empty.npy", b"", "cannot read .npy file"),  # EOFError before: click printed "Aborted!"
        ("big.npy", None, "beyond float32's range"),  # 1e300 became inf silently before
        ("scalar.npy", np.float32(3.0), "at least one value"),
        ("void4.npy", np.zeros(4, "V4"), "expected a float32, float16 or bfloat16 array"),  # ValueError before
    ],
)
def test_load_kv_refuses_by_file(tmp_path: Path, name: str, content: Any, words: str) -> None:
    """``load_kv`` refuses an empty file, float64 values float32 cannot hold, a 0-d array and a 4-byte void
    dtype with a QuantError naming the file, in words."""
    f = tmp_path / name
    if isinstance(content, bytes):
        f.write_bytes(content)
    else:
        np.save(f, np.full((4, 64), 1e300) if content is None else content)
    e = refused(lambda: load_kv(f), kvwire.QuantError, str(f))
    assert words in str(e), str(e)


def test_load_kv_reads_bfloat16_and_big_endian(tmp_path: Path) -> None:
    """``np.save`` writes a bfloat16 array as 2-byte void: ``load_kv`` reads it back as bfloat16 with the same
    bits (it used to crash in the report); a big-endian float32 file is read in native order, same values."""
    bf = np.linspace(-2, 2, 64, dtype=np.float32).astype(ml_dtypes.bfloat16).reshape(2, 32)
    np.save(tmp_path / "bf.npy", bf)
    got = load_kv(tmp_path / "bf.npy")
    assert got.dtype == bf.dtype and np.array_equal(got.view(np.uint16), bf.view(np.uint16))
    big = np.linspace(-2, 2, 64, dtype=">f4")
    np.save(tmp_path / "big.npy", big)
    got = load_kv(tmp_path / "big.npy")
    assert got.dtype == np.float32 and got.dtype.isnative and np.array_equal(got, big.astype(np.float32))


def _strict(text: str) -> Any:
    def refuse(constant: str) -> None:
        raise AssertionError(f"non-strict JSON constant {constant}")

    return json.loads(text, parse_constant=refuse)


def test_quant_report_json_is_strict(tmp_path: Path) -> None:
    """``kvwire quant-report --json`` on a tensor every fp8 format holds exactly (all ones: SQNR is +inf) wrote
    ``Infinity``, which RFC 8259 parsers refuse; it is written as ``null`` now (``kvwire.cli.output.dumps``)."""
    f = tmp_path / "ones.npy"
    np.save(f, np.ones((4, 64), np.float32))
    r = CliRunner().invoke(main, ["quant-report", str(f), "--repeat", "1", "--json"])
    assert r.exit_code == 0, r.output
    rows = _strict(r.output)
    fp8 = next(row for row in rows if row["format"] == "fp8_e4m3")
    assert fp8["sqnr_db"] is None and fp8["max_abs_error"] == 0.0


def test_layouts_json_is_strict() -> None:
    """``kvwire layouts --json`` goes through the same strict writer: it parses without non-finite
    constants and lists vLLM's HND layout."""
    r = CliRunner().invoke(main, ["layouts", "--json"])
    assert r.exit_code == 0, r.output
    assert "vllm_hnd" in [row["name"] for row in _strict(r.output)]


@pytest.mark.parametrize(
    ("args", "path"),
    [({"axis": 2}, "axis"), ({"repeat": 0}, "repeat"), ({"repeat": True}, "repeat")],
)
def test_report_arguments_refused_once(args: dict[str, Any], path: str) -> None:
    """``report(x, axis=2)`` on a 2-D tensor noted the same axis error on every format's row (a table of
    skips); a repeat of 0 or True gave no timing at all. Now each is one QuantError naming the argument."""
    refused(lambda: report(X, **args), kvwire.QuantError, path)


def test_quant_report_repeat_zero_is_refused() -> None:
    """``--repeat 0`` was silently read as 1; now click refuses it (a usage error, exit status 2)."""
    r = CliRunner().invoke(main, ["quant-report", "--repeat", "0"])
    assert r.exit_code == 2 and "--repeat" in r.output, r.output
