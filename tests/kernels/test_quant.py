"""Bit-exactness and accuracy tests of ``kvwire.quant`` (spec/quant.md §1, §2, §5, §6, §7).

Expected values come from three independent sources, never from kvwire itself:

* ``ml_dtypes`` 0.6 casts of float32/float16/bfloat16 values (never float64, which ml_dtypes double-rounds);
* ``tests/quant_reference.py``, a small numpy + ml_dtypes implementation written from the spec;
* hand-computed vectors (spec/quant.md §6 and the worked examples of §1.2-§1.4).

Covered: element casts (exhaustive over every bfloat16 and float16 bit pattern, plus a stratified float32
sample of about 3.2 million values), the §6 edge vectors, MX (FLOOR and RCEIL) and NVFP4 blocks, FP8 with
tensor or group scales, integer groups (KIVI axes), packing, error bounds, SQNR floors, idempotence, property
tests over random shapes/axes/dtypes/thread counts, and the errors raised for bad input.
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
import os
import struct
import subprocess
import sys
import zlib
from collections.abc import Callable
from typing import Any

import kvwire
import ml_dtypes
import numpy as np
import numpy.typing as npt
import pytest
import quant_reference as ref
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kvwire import quant

F32 = npt.NDArray[np.float32]
BF16: Any = ml_dtypes.bfloat16
HALF_DTYPES: dict[str, Any] = {"bfloat16": BF16, "float16": np.float16}
FP8 = ["e4m3fn", "e5m2", "e4m3fnuz", "e5m2fnuz"]
SMALL = ["e2m3", "e3m2", "e2m1"]
MX_FORMATS = list(ref.MX_ELEMENT)
INT_FORMATS = list(ref.INT_FORMATS)
ALL_FORMATS = [*ref.FP8_FORMATS, *MX_FORMATS, "nvfp4", *INT_FORMATS]


# --- helpers ------------------------------------------------------------------------------------------------


def f32(bits: int) -> np.float32:
    """The float32 with bit pattern ``bits``."""
    return np.float32(np.array([bits], dtype=np.uint32).view(np.float32)[0])


def next_up(x: float) -> np.float32:
    """The next float32 above ``x`` (toward +∞)."""
    return np.float32(np.nextafter(np.float32(x), np.float32(np.inf)))


def next_down(x: float) -> np.float32:
    """The next float32 below ``x`` (toward -∞)."""
    return np.float32(np.nextafter(np.float32(x), np.float32(-np.inf)))


NAN = f32(0x7FC00000)
NEG_NAN = f32(0xFFC00000)


def bits(a: npt.NDArray[Any]) -> npt.NDArray[Any]:
    """The raw bits of an array (unsigned integers of the same width)."""
    a = np.ascontiguousarray(a)
    return a.view({1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[a.dtype.itemsize])


def mismatches(got: npt.NDArray[Any], want: npt.NDArray[Any]) -> tuple[int, str]:
    """Count of positions where ``got`` and ``want`` differ bit for bit (NaN equals NaN of any payload), and a
    description of the first few."""
    g = np.asarray(got).reshape(-1)
    w = np.asarray(want).reshape(-1)
    assert g.shape == w.shape, (g.shape, w.shape)
    assert g.dtype == w.dtype, (g.dtype, w.dtype)
    same = bits(g) == bits(w)
    if g.dtype.kind == "f" or g.dtype == BF16:
        with np.errstate(all="ignore"):
            gf, wf = g.astype(np.float32), w.astype(np.float32)
        same |= np.isnan(gf) & np.isnan(wf)
    bad = np.flatnonzero(~same)
    detail = ", ".join(f"[{i}] got {g[i]!r} want {w[i]!r}" for i in bad[:6])
    return int(bad.size), detail


def assert_same(got: npt.NDArray[Any], want: npt.NDArray[Any], what: str = "") -> None:
    """Bit-exact equality (NaN == NaN), with the mismatch count in the message."""
    n, detail = mismatches(got, want)
    assert n == 0, f"{what}: {n} mismatches of {np.asarray(want).size}: {detail}"


def all_16bit(dtype: Any) -> npt.NDArray[Any]:
    """Every bit pattern of a 16-bit float type."""
    return np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(dtype)


def md_codes(x: F32, el: str) -> npt.NDArray[np.uint8]:
    """ml_dtypes' non-saturating codes (one per byte) of float32 ``x``."""
    with np.errstate(all="ignore"):
        return np.asarray(x.astype(ref.ELEMENTS[el].dtype).view(np.uint8))


def md_values(x: F32, el: str) -> F32:
    """ml_dtypes' rounded values of float32 ``x`` as float32."""
    with np.errstate(all="ignore"):
        return np.asarray(x.astype(ref.ELEMENTS[el].dtype).astype(np.float32))


def cast_unpacked(x: npt.NDArray[Any], el: str, saturate: bool = False) -> npt.NDArray[np.uint8]:
    """kvwire's codes of ``x``, one per byte (unpacked with the reference's unpacker)."""
    return ref.unpack(quant.cast(x, el, saturate=saturate), ref.ELEMENTS[el].bits, x.size).reshape(x.shape)


def block_data(rng: np.random.Generator, shape: tuple[int, ...], axis: int, block: int) -> F32:
    """Gaussian values whose magnitude changes by a random power of two (2^-24..2^24) from block to block."""
    axis %= len(shape)
    sshape = list(shape)
    sshape[axis] //= block
    mag = np.exp2(rng.integers(-24, 25, size=sshape)).astype(np.float32)
    mag = np.repeat(mag, block, axis=axis)
    return np.ascontiguousarray((rng.standard_normal(shape) * mag).astype(np.float32))


def special_blocks(block: int) -> F32:
    """One row per special case of spec/quant.md §6, ``block`` values each: zeros, -0, an outlier among
    1e-3, NaN, ±Inf, subnormal amax, f32-subnormal-only, element maxima at every binade edge (and one ulp
    either side), powers of two and one ulp below them (§7.5), the float32 extremes, and exact element ties."""
    rng = np.random.default_rng(11)
    rows: list[npt.NDArray[np.float64]] = []

    def row(fill: float = 0.0, **at: float) -> npt.NDArray[np.float64]:
        r = np.full(block, fill)
        for k, v in at.items():
            r[int(k[1:])] = v
        return r

    rows += [row(), row(-0.0), row(1e-3, i7=1e4), row(1.0, i0=500.0), row(0.0, i0=7.9)]
    for bad in (math.nan, math.inf, -math.inf):
        r = rng.standard_normal(block)
        r[block // 3] = bad
        rows.append(r)
    rows += [row(0.0, i5=1e-40), row(1e-45), row(-1e-41, i1=2e-40)]
    for m in (448.0, 57344.0, 7.5, 28.0, 6.0, 1.0):
        for k in (-149, -140, -130, -127, -126, -1, 0, 3, 100):
            top = np.float32(m * 2.0**k)
            if not np.isfinite(top) or top == 0:
                continue
            for t in (top, next_up(float(top)), next_down(float(top))):
                r = rng.uniform(-1, 1, block) * float(t)
                r[2] = float(t)
                rows.append(r)
    rows += [row(1.0, i0=float(next_down(8.0))), row(0.5, i3=float(next_down(2.0**-100)))]
    rows += [rng.standard_normal(block) * 3e38, row(3.4e38), row(-float(np.finfo(np.float32).max))]
    ties = np.resize(np.array([6.0, 0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, -0.25, -2.5, 0.125, 5.5]), block)
    rows += [ties, ties * 4.0, ties * 2.0**-20]
    while len(rows) % 4:
        rows.append(rng.standard_normal(block))
    with np.errstate(all="ignore"):
        return np.stack(rows).astype(np.float32)


def along(x2d: F32, shape_kind: str) -> tuple[F32, int]:
    """Lay rows of blocks (``(rows, block_len)``) out so that the blocks run along a chosen axis:
    ``last`` (rows, len), ``first`` (len, rows) — strided blocks —, or ``middle`` (2, len, rows/2)."""
    if shape_kind == "last":
        return np.ascontiguousarray(x2d), 1
    if shape_kind == "first":
        return np.ascontiguousarray(x2d.T), 0
    r, n = x2d.shape
    return np.ascontiguousarray(x2d.reshape(2, r // 2, n).transpose(0, 2, 1)), 1


def check_against_reference(q: quant.QuantizedTensor, want: ref.RefQuant, what: str) -> None:
    """Every field of ``q`` and its dequantisation equal the reference's, bit for bit."""
    assert q.group_size == want.group, what
    assert_same(q.codes.reshape(-1), want.codes, f"{what} codes")
    if want.scales is None:
        assert q.scales is None, what
    else:
        assert q.scales is not None, what
        assert q.scales.shape == want.scales.shape, (what, q.scales.shape, want.scales.shape)
        assert_same(q.scales, want.scales, f"{what} scales")
    if want.zeros is None:
        assert q.zeros is None, what
    else:
        assert q.zeros is not None, what
        assert_same(q.zeros, want.zeros, f"{what} zeros")
    if want.tensor_scale is None:
        assert q.tensor_scale is None, what
    else:
        assert q.tensor_scale is not None
        assert np.float32(q.tensor_scale) == np.float32(want.tensor_scale), (what, q.tensor_scale)
    assert_same(quant.dequantize(q), want.x_hat, f"{what} dequantised")


def same_quantized(a: quant.QuantizedTensor, b: quant.QuantizedTensor) -> bool:
    """Two quantised tensors hold identical bytes."""

    def eq(u: npt.NDArray[Any] | None, v: npt.NDArray[Any] | None) -> bool:
        return (u is None and v is None) or (
            u is not None and v is not None and u.shape == v.shape and bool(np.array_equal(bits(u), bits(v)))
        )

    ts = (a.tensor_scale is None and b.tensor_scale is None) or (
        a.tensor_scale is not None
        and b.tensor_scale is not None
        and struct.pack("<f", a.tensor_scale) == struct.pack("<f", b.tensor_scale)
    )
    return bool(
        eq(a.codes, b.codes) and eq(a.scales, b.scales) and eq(a.zeros, b.zeros) and ts and a.group_size == b.group_size
    )


# === 1. element-wise casts ==================================================================================


@pytest.mark.parametrize("el", list(ref.ELEMENTS))
def test_decode_every_code_matches_ml_dtypes(el: str) -> None:
    """``decode`` maps every code of every element format to ml_dtypes' value, bit for bit (signed zeros,
    subnormals, max, Inf and NaN included)."""
    e = ref.ELEMENTS[el]
    codes = np.arange(1 << e.bits, dtype=np.uint8)
    got = quant.decode(ref.pack(codes, e.bits), el, codes.shape)
    assert_same(got, ref.decode_codes(codes, e), el)


@pytest.mark.parametrize("saturate", [False, True], ids=["nonsat", "sat"])
@pytest.mark.parametrize("el", FP8)
@pytest.mark.parametrize("dtype", list(HALF_DTYPES))
def test_fp8_cast_exhaustive_16bit(dtype: str, el: str, saturate: bool) -> None:
    """All 65,536 bfloat16/float16 patterns cast to E4M3FN/E5M2 and AMD's E4M3FNUZ/E5M2FNUZ give ml_dtypes'
    codes: non-saturating is ``astype(...).view(uint8)`` itself; saturating is that cast after clipping to ±max
    (NaN kept). Decoding the codes gives ml_dtypes' values."""
    x = all_16bit(HALF_DTYPES[dtype])
    got = quant.cast(x, el, saturate=saturate)
    x32 = x.astype(np.float32)
    if saturate:
        want = ref.cast_codes(x32, ref.ELEMENTS[el], saturate=True)
    else:
        with np.errstate(all="ignore"):
            want = np.asarray(x.astype(ref.ELEMENTS[el].dtype).view(np.uint8))
    assert got.shape == x.shape
    assert_same(got, want, f"{dtype}→{el} codes")
    assert_same(quant.decode(got, el), ref.decode_codes(want, ref.ELEMENTS[el]), f"{dtype}→{el} values")


@pytest.mark.parametrize("el", SMALL)
@pytest.mark.parametrize("dtype", list(HALF_DTYPES))
def test_fp6_fp4_cast_exhaustive_16bit(dtype: str, el: str) -> None:
    """All non-NaN bfloat16/float16 patterns cast to E2M3/E3M2/E2M1 and decoded give ml_dtypes' values bit for
    bit (±0 kept, saturation at ±max), and the packed codes equal the reference packing of ml_dtypes' codes."""
    x = all_16bit(HALF_DTYPES[dtype])
    x32 = x.astype(np.float32)
    x = x[~np.isnan(x32)]
    x = np.concatenate([x, np.zeros(-x.size % 4, dtype=x.dtype)])
    x32 = x.astype(np.float32)
    codes = quant.cast(x, el)
    assert codes.ndim == 1
    assert_same(quant.decode(codes, el, x.shape), md_values(x32, el), f"{dtype}→{el} values")
    assert_same(codes, ref.pack(md_codes(x32, el), ref.ELEMENTS[el].bits), f"{dtype}→{el} packed codes")


@pytest.mark.parametrize("el", SMALL)
def test_nan_into_fp6_fp4_is_signed_max(el: str) -> None:
    """kvwire's documented NaN rule for formats without NaN: every NaN (any payload, float32/bfloat16/float16)
    becomes ±max with the NaN's sign — not ml_dtypes' NaN → ∓0 quirk (spec/quant.md §2.1 item 3)."""
    e = ref.ELEMENTS[el]
    for dtype in (BF16, np.float16):
        x = all_16bit(dtype)
        x = x[np.isnan(x.astype(np.float32))]
        x = x[: x.size // 4 * 4]
        neg = np.signbit(x.astype(np.float32))
        got = cast_unpacked(x, el)
        assert_same(got, np.where(neg, e.sign_bit | e.ones, e.ones).astype(np.uint8), f"{dtype} NaN→{el}")
        back = quant.decode(quant.cast(x, el), el, x.shape)
        assert np.array_equal(back, np.where(neg, -e.max, e.max).astype(np.float32))
    payloads = np.array([0x7FC00000, 0x7F800001, 0x7FFFFFFF, 0xFFC00000, 0xFF800001, 0xFFFFFFFF, 0, 0], np.uint32)
    got = cast_unpacked(payloads.view(np.float32), el)
    assert got.tolist() == [e.ones] * 3 + [e.sign_bit | e.ones] * 3 + [0, 0]


@pytest.fixture(scope="module")
def stratified_f32() -> F32:
    """A stratified float32 sample (~3.2 M values): every biased exponent 0..255 with 10,000 random mantissas
    and signs each; every representable value, tie midpoint and overflow threshold of every element format
    with its ±3-ulp float32 neighbours (both signs); the RNE ties of 1-3 mantissa bits in every binade with
    ±1-ulp neighbours; 100,000 random float32 subnormals; 500,000 uniformly random bit patterns."""
    rng = np.random.default_rng(20261129)
    parts: list[npt.NDArray[Any]] = []
    ex = np.repeat(np.arange(256, dtype=np.uint32), 10_000)
    mant = rng.integers(0, 1 << 23, ex.size, dtype=np.uint32)
    sign = rng.integers(0, 2, ex.size, dtype=np.uint32)
    parts.append((sign << 31) | (ex << 23) | mant)
    points = []
    for e in ref.ELEMENTS.values():
        v = np.unique(np.abs(ref.decode_codes(np.arange(1 << (e.bits - 1), dtype=np.uint8), e)))
        v = v[np.isfinite(v)].astype(np.float64)
        overflow = e.max + float(ref.ulp(np.array([e.max]), e)[0]) / 2
        points += [v, (v[:-1] + v[1:]) / 2, np.array([overflow, v[1] / 2])]
    p = np.concatenate(points).astype(np.float32).view(np.uint32).astype(np.int64)
    near = (p[:, None] + np.arange(-3, 4)[None, :]).reshape(-1)
    near = near[(near >= 0) & (near < 0x7F800000)].astype(np.uint32)
    parts += [near, near | np.uint32(0x80000000)]
    exps = np.arange(1, 255, dtype=np.int64)
    for m in (1, 2, 3):
        k = np.arange(1 << m, dtype=np.int64)
        t = (exps[:, None, None] << 23) | (k[None, :, None] << (23 - m)) | (1 << (22 - m))
        t = (t + np.array([-1, 0, 1])[None, None, :]).reshape(-1).astype(np.uint32)
        parts += [t, t | np.uint32(0x80000000)]
    parts.append(rng.integers(0, 1 << 23, 100_000, dtype=np.uint32))
    parts.append(rng.integers(0, 1 << 32, 500_000, dtype=np.uint64).astype(np.uint32))
    b = np.concatenate(parts)
    return np.ascontiguousarray(b[: b.size // 4 * 4].view(np.float32))


@pytest.mark.parametrize("el", list(ref.ELEMENTS))
def test_cast_stratified_f32_sample(el: str, stratified_f32: F32) -> None:
    """On the stratified float32 sample (≥ 3 M values, fed to ml_dtypes as float32), codes and decoded values
    equal ml_dtypes' in every mode: E4M3FN/E5M2 non-saturating (ml_dtypes ``astype`` itself, NaN and Inf
    included) and saturating (clip to ±max first); E2M3/E3M2/E2M1 with NaN inputs left out."""
    x = stratified_f32
    assert x.size >= 3_000_000
    e = ref.ELEMENTS[el]
    if e.bits == 8:
        for sat in (False, True):
            got = quant.cast(x, el, saturate=sat)
            want = ref.cast_codes(x, e, saturate=sat) if sat else md_codes(x, el)
            assert_same(got, want, f"f32→{el} sat={sat}")
            assert_same(quant.decode(got, el), ref.decode_codes(want, e), f"f32→{el} sat={sat} values")
    else:
        keep = x[~np.isnan(x)]
        keep = np.ascontiguousarray(keep[: keep.size // 4 * 4])
        codes = quant.cast(keep, el)
        assert_same(ref.unpack(codes, e.bits, keep.size), md_codes(keep, el), f"f32→{el} codes")
        assert_same(quant.decode(codes, el, keep.shape), md_values(keep, el), f"f32→{el} values")


#: Per FP8 element: (saturated +max, -max), (non-saturating overflow +, -), (NaN, -NaN) codes.
FP8_SPECIALS = {
    "e4m3fn": ((0x7E, 0xFE), (0x7F, 0xFF), (0x7F, 0xFF)),
    "e5m2": ((0x7B, 0xFB), (0x7C, 0xFC), (0x7E, 0xFE)),
    "e4m3fnuz": ((0x7F, 0xFF), (0x80, 0x80), (0x80, 0x80)),
    "e5m2fnuz": ((0x7F, 0xFF), (0x80, 0x80), (0x80, 0x80)),
}


@pytest.mark.parametrize("el", FP8)
def test_saturating_fp8_overflow_inf_nan(el: str) -> None:
    """Saturating FP8: every finite overflow and ±Inf becomes ±max (E4M3FN 0x7E/0xFE, E5M2 0x7B/0xFB, the
    fnuz formats 0x7F/0xFF); NaN stays NaN with its sign (E4M3FN 0x7F/0xFF, E5M2 0x7E/0xFE) or as the fnuz
    formats' one NaN 0x80; non-saturating overflow is NaN (E4M3FN, and 0x80 in fnuz) or ±Inf (E5M2)."""
    e = ref.ELEMENTS[el]
    rng = np.random.default_rng(3)
    big = (e.max * np.exp2(rng.uniform(0.2, 40, 4096))).astype(np.float32)
    big = np.concatenate([big, [np.inf], -big, [-np.inf]]).astype(np.float32)
    n = big.size // 2
    (sat_p, sat_n), (over_p, over_n), expect = FP8_SPECIALS[el]
    sat = quant.cast(big, el, saturate=True)
    assert sat.tolist() == [sat_p] * n + [sat_n] * n
    assert quant.decode(sat, el).tolist() == [e.max] * n + [-e.max] * n
    nonsat = quant.cast(big, el)
    assert nonsat.tolist() == [over_p] * n + [over_n] * n
    nan = np.array([NAN, NEG_NAN], dtype=np.float32)
    assert quant.cast(nan, el, saturate=True).tolist() == list(expect)
    assert quant.cast(nan, el).tolist() == list(expect)
    assert np.isnan(quant.decode(quant.cast(nan, el, saturate=True), el)).all()


@pytest.mark.parametrize("el", SMALL)
def test_fp6_fp4_always_saturate(el: str) -> None:
    """FP6/FP4 have no Inf/NaN, so ``saturate`` changes nothing: huge values and ±Inf give ±max either way."""
    x = np.array([1e30, -1e30, np.inf, -np.inf, 100.0, -7.9, 0.3, 1.0], dtype=np.float32)
    a, b = quant.cast(x, el), quant.cast(x, el, saturate=True)
    assert np.array_equal(a, b)
    m = ref.ELEMENTS[el].max
    assert quant.decode(a, el, x.shape)[:4].tolist() == [m, -m, m, -m]


@pytest.mark.parametrize("el", list(ref.ELEMENTS))
def test_cast_decode_cast_is_idempotent(el: str, stratified_f32: F32) -> None:
    """cast ∘ decode ∘ cast = cast for every element format (decoded values are representable, so they cast
    back to the same code); NaN codes are left out (E5M2 has several)."""
    x = stratified_f32[:1_000_000]
    e = ref.ELEMENTS[el]
    for sat in (False, True):
        c1 = quant.cast(x, el, saturate=sat)
        v = quant.decode(c1, el, x.shape)
        keep = ~np.isnan(v)
        keep4 = keep.reshape(-1, 4).all(axis=1).repeat(4) if e.bits < 8 else keep
        c2 = quant.cast(v, el, saturate=sat)
        u1 = ref.unpack(c1, e.bits, x.size)
        u2 = ref.unpack(c2, e.bits, x.size)
        assert_same(u2[keep4], u1[keep4], f"{el} sat={sat}")


@pytest.mark.parametrize("el", list(ref.ELEMENTS))
@pytest.mark.parametrize("dtype", list(HALF_DTYPES))
def test_half_inputs_cast_like_their_f32_widening(dtype: str, el: str) -> None:
    """A bfloat16/float16 input is cast exactly like its (exact) float32 widening: one rounding step."""
    x = all_16bit(HALF_DTYPES[dtype])
    for sat in (False, True):
        assert_same(quant.cast(x, el, saturate=sat), quant.cast(x.astype(np.float32), el, saturate=sat), el)


def test_cast_and_decode_write_into_out() -> None:
    """``out=`` receives the result (and is returned) for ``cast`` and ``decode``; wrong ``out`` buffers raise
    QuantError naming ``out``."""
    x = np.linspace(-8, 8, 64, dtype=np.float32)
    buf = np.empty(32, dtype=np.uint8)
    r = quant.cast(x, "e2m1", out=buf)
    assert r is buf
    assert np.array_equal(buf, ref.pack(md_codes(x, "e2m1"), 4))
    vals = np.empty(64, dtype=np.float32)
    assert quant.decode(buf, "e2m1", (64,), out=vals) is vals
    assert_same(vals, md_values(x, "e2m1"))
    bads: list[Any] = [np.empty(31, np.uint8), np.empty(32, np.int8)]
    for bad in bads:
        with pytest.raises(kvwire.QuantError) as ei:
            quant.cast(x, "e2m1", out=bad)
        assert ei.value.path == "out"
    with pytest.raises(kvwire.QuantError) as ei:
        quant.decode(buf, "e2m1", (64,), out=np.empty(64, np.float64))
    assert ei.value.path == "out"


# === 2. spec/quant.md §6 edge vectors =======================================================================

T9 = 2.0**-9
EDGE: list[tuple[str, float | np.float32, int, int]] = [
    # (element, float32 input, non-saturating code, saturating code)
    ("e4m3fn", 448.0, 0x7E, 0x7E),
    ("e4m3fn", 449.0, 0x7E, 0x7E),
    ("e4m3fn", 464.0, 0x7E, 0x7E),
    ("e4m3fn", next_up(464.0), 0x7F, 0x7E),
    ("e4m3fn", 480.0, 0x7F, 0x7E),
    ("e4m3fn", 1e6, 0x7F, 0x7E),
    ("e4m3fn", math.inf, 0x7F, 0x7E),
    ("e4m3fn", -math.inf, 0xFF, 0xFE),
    ("e4m3fn", -464.0, 0xFE, 0xFE),
    ("e4m3fn", -480.0, 0xFF, 0xFE),
    ("e4m3fn", NAN, 0x7F, 0x7F),
    ("e4m3fn", NEG_NAN, 0xFF, 0xFF),
    ("e4m3fn", -0.0, 0x80, 0x80),
    ("e4m3fn", T9, 0x01, 0x01),
    ("e4m3fn", 2.0**-10, 0x00, 0x00),
    ("e4m3fn", next_up(2.0**-10), 0x01, 0x01),
    ("e4m3fn", 1.5 * T9, 0x02, 0x02),
    ("e4m3fn", 2.5 * T9, 0x02, 0x02),
    ("e4m3fn", 3.5 * T9, 0x04, 0x04),
    ("e4m3fn", 7.5 * T9, 0x08, 0x08),
    ("e4m3fn", 1.0625, 0x38, 0x38),
    ("e4m3fn", 1.1875, 0x3A, 0x3A),
    ("e4m3fn", f32(0x00000001), 0x00, 0x00),
    ("e4m3fn", f32(0x007FFFFF), 0x00, 0x00),
    ("e4m3fn", f32(0x80000001), 0x80, 0x80),
    ("e4m3fn", f32(0x807FFFFF), 0x80, 0x80),
    ("e4m3fn", 240.0, 0x77, 0x77),
    ("e4m3fn", 256.0, 0x78, 0x78),
    ("e4m3fn", 1.0625 + 2.0**-20, 0x39, 0x39),
    ("e5m2", 57344.0, 0x7B, 0x7B),
    ("e5m2", 61439.0, 0x7B, 0x7B),
    ("e5m2", 61440.0, 0x7C, 0x7B),
    ("e5m2", 65504.0, 0x7C, 0x7B),
    ("e5m2", math.inf, 0x7C, 0x7B),
    ("e5m2", -math.inf, 0xFC, 0xFB),
    ("e5m2", -61440.0, 0xFC, 0xFB),
    ("e5m2", NAN, 0x7E, 0x7E),
    ("e5m2", NEG_NAN, 0xFE, 0xFE),
    ("e5m2", -0.0, 0x80, 0x80),
    ("e5m2", 2.0**-16, 0x01, 0x01),
    ("e5m2", 2.0**-17, 0x00, 0x00),
    # AMD fnuz (bias + 1, max code 0x7F, one NaN 0x80, no -0, no Inf): the same landmarks, worked out from
    # the format's definition (spec/quant.md §1.1).
    ("e4m3fnuz", 240.0, 0x7F, 0x7F),
    ("e4m3fnuz", 224.0, 0x7E, 0x7E),
    ("e4m3fnuz", 247.0, 0x7F, 0x7F),
    ("e4m3fnuz", 248.0, 0x80, 0x7F),  # tie between 240 (odd mantissa) and 256: rounds up, out of range
    ("e4m3fnuz", -248.0, 0x80, 0xFF),
    ("e4m3fnuz", math.inf, 0x80, 0x7F),
    ("e4m3fnuz", -math.inf, 0x80, 0xFF),
    ("e4m3fnuz", NAN, 0x80, 0x80),
    ("e4m3fnuz", NEG_NAN, 0x80, 0x80),
    ("e4m3fnuz", -0.0, 0x00, 0x00),
    ("e4m3fnuz", 1.0, 0x40, 0x40),
    ("e4m3fnuz", 2.0**-10, 0x01, 0x01),
    ("e4m3fnuz", 2.0**-11, 0x00, 0x00),  # tie to even
    ("e4m3fnuz", -(2.0**-11), 0x00, 0x00),  # no -0
    ("e4m3fnuz", next_up(2.0**-11), 0x01, 0x01),
    ("e4m3fnuz", -next_up(2.0**-11), 0x81, 0x81),
    ("e4m3fnuz", 7.5 * 2.0**-10, 0x08, 0x08),  # rounds up into the min normal 2^-7
    ("e4m3fnuz", f32(0x80000001), 0x00, 0x00),
    ("e5m2fnuz", 57344.0, 0x7F, 0x7F),
    ("e5m2fnuz", 61439.0, 0x7F, 0x7F),
    ("e5m2fnuz", 61440.0, 0x80, 0x7F),
    ("e5m2fnuz", -math.inf, 0x80, 0xFF),
    ("e5m2fnuz", NEG_NAN, 0x80, 0x80),
    ("e5m2fnuz", -0.0, 0x00, 0x00),
    ("e5m2fnuz", 1.0, 0x40, 0x40),
    ("e5m2fnuz", 2.0**-17, 0x01, 0x01),
    ("e5m2fnuz", 2.0**-18, 0x00, 0x00),
    ("e5m2fnuz", -(2.0**-18), 0x00, 0x00),
    ("e2m1", 0.25, 0x0, 0x0),
    ("e2m1", next_up(0.25), 0x1, 0x1),
    ("e2m1", 0.75, 0x2, 0x2),
    ("e2m1", 1.25, 0x2, 0x2),
    ("e2m1", 1.75, 0x4, 0x4),
    ("e2m1", 2.5, 0x4, 0x4),
    ("e2m1", 3.5, 0x6, 0x6),
    ("e2m1", 5.0, 0x6, 0x6),
    ("e2m1", next_up(5.0), 0x7, 0x7),
    ("e2m1", 6.5, 0x7, 0x7),
    ("e2m1", 100.0, 0x7, 0x7),
    ("e2m1", math.inf, 0x7, 0x7),
    ("e2m1", -math.inf, 0xF, 0xF),
    ("e2m1", -0.0, 0x8, 0x8),
    ("e2m1", -5.0, 0xE, 0xE),
    ("e2m1", NAN, 0x7, 0x7),
    ("e2m1", NEG_NAN, 0xF, 0xF),
]


@pytest.mark.parametrize(("el", "x", "nonsat", "sat"), EDGE, ids=[f"{e}-{float(x)!r}-{n:02X}" for e, x, n, _ in EDGE])
def test_spec_edge_vectors(el: str, x: float, nonsat: int, sat: int) -> None:
    """One §6 edge vector: the float32 input's code in non-saturating and saturating mode is the hex code
    written in spec/quant.md (E2M1 NaN: kvwire's rule, ±max; fnuz: worked out from the format), and for the
    FP8 formats ml_dtypes' own cast gives the non-saturating code too."""
    arr = np.array([x, 0.0, 0.0, 0.0], dtype=np.float32)
    assert int(cast_unpacked(arr, el)[0]) == nonsat
    assert int(cast_unpacked(arr, el, saturate=True)[0]) == sat
    if el in FP8:
        assert int(md_codes(arr, el)[0]) == nonsat


def test_double_rounding_trap() -> None:
    """1.0625 + 2^-20 rounds once from float32 to E4M3FN code 0x39 (1.125), but a bfloat16 input of the same
    value is already 1.0625 (bfloat16 rounding), giving 0x38: kvwire rounds exactly once from its input."""
    v = np.float32(1.0625 + 2.0**-20)
    assert quant.cast(np.array([v], np.float32), "e4m3fn").tolist() == [0x39]
    assert quant.cast(np.array([v]).astype(np.float32).astype(BF16), "e4m3fn").tolist() == [0x38]


# === 3. MX and NVFP4 blocks =================================================================================


@pytest.mark.parametrize("layout", ["last", "first", "middle"])
@pytest.mark.parametrize("rule", ["floor", "rceil"])
@pytest.mark.parametrize("fmt", MX_FORMATS)
def test_mx_matches_reference(fmt: str, rule: str, layout: str) -> None:
    """MX scale bytes, packed element codes and decoded values equal the reference bit for bit, for the
    special blocks of §6 plus Gaussian blocks spanning 2^±24, with the blocks along the last, first
    (strided) or middle axis; scales come back in the input's shape with the axis divided by 32."""
    rng = np.random.default_rng(zlib.crc32(f"{fmt} {rule} {layout}".encode()))
    rows = np.concatenate([special_blocks(32), block_data(rng, (64, 32), 1, 32)])
    x, axis = along(rows, layout)
    q = quant.quantize(x, fmt, axis, scale_rule=rule)  # type: ignore[arg-type]
    want = ref.quantize(x, fmt, axis, rule=rule)  # type: ignore[arg-type]
    assert q.scales is not None and q.scales.shape == ref.scales_shape(x.shape, axis, 32)
    assert q.scales.dtype == np.uint8 and q.axis == axis and q.shape == x.shape
    check_against_reference(q, want, f"{fmt} {rule} {layout}")


def mx_block(fmt: str, values: list[float], rule: str = "floor") -> tuple[int, list[int], F32]:
    """Quantise one 32-value block (the values, then zeros): (scale byte, element codes, decoded values)."""
    x = np.zeros(32, dtype=np.float32)
    with np.errstate(all="ignore"):
        x[: len(values)] = values
    q = quant.quantize(x, fmt, scale_rule=rule)  # type: ignore[arg-type]
    assert q.scales is not None
    bits_ = ref.ELEMENTS[ref.MX_ELEMENT[fmt]].bits
    return int(q.scales[0]), ref.unpack(q.codes, bits_, 32).tolist(), quant.dequantize(q)


def test_mx_hand_computed_vectors() -> None:
    """Hand-computed MX vectors (§1.2, §6, §7.5): all-zero → 0x00 and zeros; amax 6·2^k → scale 2^k and
    element 6; amax 7.9 FLOOR → scale 1, element saturates to 6, RCEIL → scale 2 (0x80), element 4 (x̂ 8);
    MXFP8 amax 500 → 448; outlier 1e4 flushes 1e-3 to 0; amax one ulp below 8 keeps exponent 2; subnormal
    amax → 0x00; exact ties round half to even (0.25 → 0, 0.75 → 1, 2.5 → 2, 5 → 4), not half away."""
    for fmt in MX_FORMATS:
        s, c, v = mx_block(fmt, [])
        assert (s, set(c), set(v.tolist())) == (0x00, {0}, {0.0}), fmt
    for k in (-3, 0, 5, 100):
        s, c, v = mx_block("mxfp4", [6 * 2.0**k, 0.5 * 2.0**k, -6 * 2.0**k])
        assert (s, c[:3]) == (127 + k, [0x7, 0x1, 0xF])
        assert v[:3].tolist() == [6 * 2.0**k, 0.5 * 2.0**k, -6 * 2.0**k]
    assert mx_block("mxfp4", [7.9])[:2] == (127, [0x7] + [0] * 31)
    assert mx_block("mxfp4", [7.9])[2][0] == 6.0
    s, c, v = mx_block("mxfp4", [7.9], "rceil")
    assert (s, c[0], float(v[0])) == (128, 0x6, 8.0)
    s, c, v = mx_block("mxfp8_e4m3", [500.0] + [1.0] * 31)
    assert (s, c[0], c[1], float(v[0])) == (127, 0x7E, 0x38, 448.0)
    s, c, v = mx_block("mxfp4", [1e4] + [1e-3] * 31)
    assert (s, c[0], float(v[0])) == (127 + 11, 0x6, 8192.0)  # 1e4 / 2^11 = 4.88 → 4
    assert set(c[1:]) == {0} and not v[1:].any()
    s, c, v = mx_block("mxfp4", [float(next_down(8.0))])
    assert (s, c[0], float(v[0])) == (127, 0x7, 6.0)  # a float log2 would say 3 and give scale 2
    s, c, v = mx_block("mxfp4", [float(next_down(8.0))], "rceil")
    assert (s, c[0], float(v[0])) == (128, 0x6, 8.0)
    assert mx_block("mxfp4", [1e-40])[0] == 0x00
    assert mx_block("mxfp4", [2.0**-125])[0] == 0x00  # -125 - 2 = -127
    assert mx_block("mxfp4", [2.0**-124])[0] == 0x01
    ties = [6.0, 0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, -0.25, -5.0]
    s, c, _ = mx_block("mxfp4", ties)
    assert (s, c[:10]) == (127, [0x7, 0x0, 0x2, 0x2, 0x4, 0x4, 0x6, 0x6, 0x8, 0xE])


def test_mx_rceil_subnormal_descale() -> None:
    """RCEIL with an f32-subnormal descale amax/max_elem: exactly 2^-127 or below (or amax 0) → byte 0x00;
    above 2^-127 → byte 0x01 (spec/quant.md §1.2); the largest finite amax stays finite (0xFD for MXFP4)."""
    assert mx_block("mxfp4", [6 * 2.0**-127], "rceil")[0] == 0x00
    assert mx_block("mxfp4", [2.0**-124], "rceil")[0] == 0x01  # 8·2^-127 / 6 > 2^-127
    assert mx_block("mxfp4", [0.0], "rceil")[0] == 0x00
    assert mx_block("mxfp4", [1e-45], "rceil")[0] == 0x00
    assert mx_block("mxfp8_e4m3", [448 * 2.0**-127], "rceil")[0] == 0x00
    assert mx_block("mxfp8_e4m3", [1.75 * (1 + 2.0**-20) * 2.0**-119], "rceil")[0] == 0x01
    assert mx_block("mxfp4", [float(np.finfo(np.float32).max)], "rceil")[0] == 127 + 126


@pytest.mark.parametrize("fmt", MX_FORMATS)
def test_mx_nonfinite_block_is_nan_and_isolated(fmt: str) -> None:
    """A NaN or ±Inf anywhere in a block gives scale 0xFF and all-ones magnitude codes (E2M1 0x7, FP6 0x1F,
    FP8 0x7F), decoding to NaN for the whole block; the neighbouring blocks are untouched (§1.2, §7.1)."""
    e = ref.ELEMENTS[ref.MX_ELEMENT[fmt]]
    for bad in (math.nan, math.inf, -math.inf):
        x = np.tile(np.linspace(-3, 3, 32, dtype=np.float32), 4)
        x[32 + 17] = bad
        q = quant.quantize(x, fmt)
        assert q.scales is not None
        clean = quant.quantize(np.ascontiguousarray(x[:32]), fmt)
        assert q.scales.tolist()[1] == 0xFF and q.scales.tolist()[0] == q.scales.tolist()[2] != 0xFF
        codes = ref.unpack(q.codes, e.bits, 128)
        assert set(codes[32:64].tolist()) == {e.ones}
        back = quant.dequantize(q)
        assert np.isnan(back[32:64]).all() and np.isfinite(np.delete(back, range(32, 64))).all()
        assert np.array_equal(back[:32], quant.dequantize(clean))


@pytest.mark.parametrize("layout", ["last", "first", "middle"])
def test_nvfp4_matches_reference(layout: str) -> None:
    """NVFP4 (division form, §1.3/§7.2/§7.3): tensor scale, E4M3 block-scale bytes, packed E2M1 codes and
    x̂ = q·(s·g) equal the reference on the special blocks plus Gaussian blocks, along any axis."""
    rng = np.random.default_rng(7)
    rows = np.concatenate([special_blocks(16), block_data(rng, (64, 16), 1, 16)])
    x, axis = along(rows, layout)
    q = quant.quantize(x, "nvfp4", axis)
    check_against_reference(q, ref.quantize(x, "nvfp4", axis), f"nvfp4 {layout}")
    finite = rows[np.isfinite(rows).all(axis=1)]
    for part in (finite, finite[:8] * np.float32(1e-30), np.zeros((4, 16), np.float32)):
        y, ax = along(np.ascontiguousarray(part, dtype=np.float32), layout)
        check_against_reference(quant.quantize(y, "nvfp4", ax), ref.quantize(y, "nvfp4", ax), "nvfp4 part")


def test_nvfp4_hand_computed_vectors() -> None:
    """NVFP4 vectors of §6: all-zero tensor → g = 1, scale 2^-6 (0x08), zeros back; a block holding the tensor
    amax → scale 448 (0x7E) and element ±6; a tiny block clamps its scale to 2^-6; a tensor whose
    amax/(448·6) is below FLT_MIN uses g = 1; a NaN/Inf block → scale 0x7F, codes 0x7, NaN, others unaffected
    and g from the finite values only."""
    z = quant.quantize(np.zeros(32, np.float32), "nvfp4")
    assert z.tensor_scale == 1.0 and z.scales is not None
    assert z.scales.tolist() == [0x08, 0x08] and not z.codes.any() and not quant.dequantize(z).any()
    x = np.full(32, 0.1, dtype=np.float32)
    x[2] = -3.0
    x[16:] = 1e-9
    q = quant.quantize(x, "nvfp4")
    assert q.tensor_scale is not None and q.scales is not None
    assert np.float32(q.tensor_scale) == np.float32(3.0) / np.float32(2688.0)
    assert q.scales.tolist() == [0x7E, 0x08]
    assert ref.unpack(q.codes, 4, 32)[2] == 0xF
    assert abs(float(quant.dequantize(q)[2]) + 3.0) < 1e-6
    tiny = np.full(16, 1e-36, dtype=np.float32)
    assert quant.quantize(tiny, "nvfp4").tensor_scale == 1.0
    y = np.linspace(-2, 2, 48, dtype=np.float32)
    for bad in (math.nan, math.inf):
        yb = y.copy()
        yb[20] = bad
        q = quant.quantize(yb, "nvfp4")
        assert q.scales is not None and q.tensor_scale is not None
        assert q.scales.tolist()[1] == 0x7F and q.scales.tolist()[0] != 0x7F
        assert np.float32(q.tensor_scale) == np.float32(2.0) / np.float32(2688.0)
        assert set(ref.unpack(q.codes, 4, 48)[16:32].tolist()) == {0x7}
        back = quant.dequantize(q)
        assert np.isnan(back[16:32]).all() and np.isfinite(back[:16]).all() and np.isfinite(back[32:]).all()


@pytest.mark.parametrize("fmt", ["nvfp4", "fp8_e4m3", "fp8_e5m2", "fp8_e4m3fnuz"])
@pytest.mark.parametrize("layout", ["last", "first", "middle"])
def test_given_tensor_scale_matches_reference(fmt: str, layout: str) -> None:
    """A given ``tensor_scale`` (a calibrated scale: one pass over the input) is used as is: codes, scales
    and dequantisation equal the reference quantised with that scale, bit for bit, along any axis (the
    fused NVFP4 kernel for the last axis, the strided blocks otherwise), for the scale the data would give
    (then also equal to the default call), one 64 times smaller (block scales and elements saturate) and the
    Gaussian rows' own scale (the float32 extremes among the special rows saturate, the rest clamp or
    flush)."""
    rng = np.random.default_rng(11)
    gauss = block_data(rng, (64, 16), 1, 16)
    x, axis = along(np.concatenate([special_blocks(16), gauss]), layout)
    default = quant.quantize(x, fmt, axis)
    own = quant.quantize(gauss, fmt).tensor_scale
    assert default.tensor_scale is not None and own is not None
    for scale in (default.tensor_scale, float(np.float32(default.tensor_scale) / np.float32(64)), own):
        q = quant.quantize(x, fmt, axis, tensor_scale=scale)
        assert q.tensor_scale == scale
        with np.errstate(over="ignore"):  # the fnuz formats' ±240 times the float32 extremes' scale is ±Inf
            want = ref.quantize(x, fmt, axis, tensor_scale=scale)
        check_against_reference(q, want, f"{fmt} {layout} g={scale}")
        if scale == default.tensor_scale:
            assert_same(q.codes, default.codes, "given = derived")


def test_tensor_scale_is_refused_where_it_has_no_meaning() -> None:
    """Formats without one tensor scale refuse ``tensor_scale``, as do scales that are not positive finite
    float32 numbers (and, for NVFP4, subnormal ones), each naming the argument; nothing is returned."""
    x = np.ones((2, 128), dtype=np.float32)
    for fmt in ("mxfp4", "mxfp8_e4m3", "int4_asym_g32", "fp8_e4m3_g128"):
        with pytest.raises(kvwire.QuantError, match="tensor_scale") as e:
            quant.quantize(x, fmt, tensor_scale=0.5)
        assert e.value.path == "tensor_scale"
    for bad in (0.0, -1.0, math.nan, math.inf, 1e-60, 1e39, "0.5", True, [0.5]):
        with pytest.raises(kvwire.QuantError, match="tensor_scale"):
            quant.quantize(x, "nvfp4", tensor_scale=bad)  # type: ignore[arg-type]
    with pytest.raises(kvwire.QuantError, match=r"tensor_scale: must be a finite number ≥"):
        quant.quantize(x, "nvfp4", tensor_scale=1e-40)
    assert quant.quantize(x, "fp8_e4m3", tensor_scale=1e-40).tensor_scale == float(np.float32(1e-40))


def test_nvfp4_uses_the_division_form() -> None:
    """Elements are e2m1(x / (s·g)) with a true division (§1.3): for a value exactly at an E2M1 tie in units
    of s·g, multiplying by a rounded reciprocal 1/(s·g) lands off the tie and rounds the other way; kvwire's
    code is the division one. (The case is found by a seeded search over tensor amaxima.)"""
    rng = np.random.default_rng(5)
    e2m1 = ref.ELEMENTS["e2m1"]
    for _ in range(20_000):
        amax = np.float32(rng.uniform(1, 2) * 2.0 ** rng.integers(-20, 20))
        x = np.zeros(16, dtype=np.float32)
        x[0] = amax
        want = ref.quantize(x, "nvfp4")
        s = ref.decode_codes(np.asarray(want.scales, np.uint8), ref.ELEMENTS["e4m3fn"])[0]
        sg = np.float32(s * np.float32(want.tensor_scale))
        for tie in (0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0):
            v = np.float32(np.float32(tie) * sg)
            if v / sg != np.float32(tie) or v >= amax:
                continue
            recip = np.float32(v * np.float32(np.float32(1) / sg))
            div_code = ref.cast_codes(np.array([v / sg], np.float32), e2m1, True)[0]
            rcp_code = ref.cast_codes(np.array([recip], np.float32), e2m1, True)[0]
            if div_code == rcp_code:
                continue
            x[1] = v
            q = quant.quantize(x, "nvfp4")
            assert ref.unpack(q.codes, 4, 16)[1] == div_code != rcp_code
            return
    pytest.fail("no reciprocal/division disagreement found")  # pragma: no cover


def test_packing_layouts_by_hand() -> None:
    """Packed bytes by hand: FP4 element 2i in the low nibble ([1, 6, -0.5, 0] → 0x72, 0x09); FP6 four codes
    in three bytes, little-endian c0 | c1<<6 | c2<<12 | c3<<18 ([1, 7.5, -0.125, 0] in E2M3 → C8 17 02);
    INT4 two's complement low nibble first ([-7, 7, 3, 0] → 0x79, 0x03)."""
    x = np.zeros(32, dtype=np.float32)
    x[:4] = [1.0, 6.0, -0.5, 0.0]
    q = quant.quantize(x, "mxfp4")
    assert q.scales is not None and q.scales.tolist() == [127]
    assert q.codes[:2].tolist() == [0x72, 0x09]
    x[:4] = [1.0, 7.5, -0.125, 0.0]
    q = quant.quantize(x, "mxfp6_e2m3")
    assert q.scales is not None and q.scales.tolist() == [127]
    assert q.codes[:3].tolist() == [0xC8, 0x17, 0x02]
    assert quant.cast(np.array([1.0, 7.5, -0.125, 0.0], np.float32), "e2m3").tolist() == [0xC8, 0x17, 0x02]
    x[:4] = [-7.0, 7.0, 3.0, 0.0]
    q = quant.quantize(x, "int4_sym_g32")
    assert q.scales is not None and q.scales.tolist() == [1.0]
    assert q.codes[:2].tolist() == [0x79, 0x03]


def test_block_not_dividing_the_axis_is_a_clear_error() -> None:
    """A block that does not divide the quantisation axis raises QuantError with path ``axis``, naming the
    block size and the axis length (spec/quant.md §7.6)."""
    cases: list[tuple[str, tuple[int, int], int, int | None]] = [
        ("mxfp4", (8, 48), -1, None),
        ("nvfp4", (24, 8), 0, None),
        ("int4_asym_g32", (4, 40), 1, None),
    ]
    cases += [("fp8_e4m3_g128", (2, 64), -1, None), ("int8_sym_g32", (4, 96), -1, 64)]
    for fmt, shape, axis, group in cases:
        with pytest.raises(kvwire.QuantError) as ei:
            quant.quantize(np.ones(shape, np.float32), fmt, axis, group_size=group)
        block = group or {"mxfp4": 32, "nvfp4": 16, "fp8_e4m3_g128": 128}.get(fmt, 32)
        assert ei.value.path == "axis", fmt
        assert str(block) in str(ei.value) and str(shape[axis]) in str(ei.value), str(ei.value)
        assert isinstance(ei.value, ValueError)


# === 4. FP8 with tensor/group scales, integer groups ========================================================


@pytest.mark.parametrize("fmt", ["fp8_e4m3", "fp8_e5m2", "fp8_e4m3fnuz", "fp8_e5m2fnuz"])
def test_fp8_per_tensor_matches_reference(fmt: str) -> None:
    """Per-tensor FP8: scale = amax_finite/max (fp32), codes = sat_RNE(x / scale) (true division), x̂ = code ·
    scale — equal to the reference on Gaussian data with outliers, on data with NaN/±Inf elements (amax over
    finite values), and on an all-zero tensor (scale 1)."""
    rng = np.random.default_rng(1)
    x = (rng.standard_normal((64, 96)) * np.exp2(rng.integers(-8, 8, (64, 1)))).astype(np.float32)
    x[3, 5] = 1234.5
    y = x.copy()
    y[0, :4] = np.array([np.nan, np.inf, -np.inf, NEG_NAN], dtype=np.float32)
    for data in (x, y, np.zeros((4, 8), np.float32), (x * np.float32(1e-38)).astype(np.float32)):
        check_against_reference(quant.quantize(data, fmt), ref.quantize(data, fmt), fmt)


def test_fp8_per_tensor_hand_vectors() -> None:
    """Per-tensor FP8 by hand: amax 3.5 → scale 3.5/448 = 2^-7 and code 0x7E for 3.5; NaN stays NaN (0x7F);
    ±Inf saturates to ±max as satfinite does (README: "rounded with saturation"), -448 = 0xFE in E4M3FN and
    ±57344 = 0x7B/0xFB in E5M2 — it was NaN (0xFF) and ±Inf (0x7C/0xFC), contradicting the README (issue 9
    item 10); non-finite values do not enter the amax; all zeros → scale 1."""
    x = np.array([3.5, -1.0, 0.0, np.nan, -np.inf, 2.0**-20, 1.75, -3.5], dtype=np.float32)
    q = quant.quantize(x, "fp8_e4m3")
    assert q.tensor_scale == 2.0**-7 and q.scales is None and q.group_size == 0
    assert q.codes.tolist() == [0x7E, 0xF0, 0x00, 0x7F, 0xFE, 0x00, 0x76, 0xFE]  # y = x·2^7
    q = quant.quantize(np.array([57344.0, np.inf, -np.inf, 1.0], dtype=np.float32), "fp8_e5m2")
    assert q.tensor_scale == 1.0 and q.codes.tolist()[:3] == [0x7B, 0x7B, 0xFB]
    assert quant.dequantize(q).tolist()[:3] == [57344.0, 57344.0, -57344.0]
    assert quant.quantize(np.zeros(8, np.float32), "fp8_e4m3").tensor_scale == 1.0


@pytest.mark.parametrize("fmt", ["fp8_e4m3", "fp8_e5m2", "fp8_e4m3_g128"])
def test_fp8_subnormal_scale_keeps_tiny_tensors(fmt: str) -> None:
    """A tensor (or group) whose amax/max is a positive f32 subnormal got scale 1 and quantised to all zeros
    (issue 9 item 10). The scale is now amax/max exactly (an f32 subnormal): most codes are non-zero, and the
    values come back to within the format's rounding plus a few f32 subnormal spacings (2^-149: the scale
    itself, amax/max, is rounded to that grid)."""
    rng = np.random.default_rng(3)
    x = (rng.standard_normal((4, 128)) * 1e-40).astype(np.float32)
    assert 0 < np.abs(x).max() / 448 < 2.0**-126
    q = quant.quantize(x, fmt)
    scale = np.float32(q.tensor_scale) if q.tensor_scale is not None else q.scales
    assert scale is not None and bool((np.asarray(scale) < 2.0**-126).all() and (np.asarray(scale) > 0).all())
    assert int(np.count_nonzero(q.codes)) > 0.9 * x.size
    back = quant.dequantize(q)
    scale_ulps = np.abs(x) / (np.float64(np.asarray(scale).max()) / 2.0**-149)  # the scale's own rounding
    rel = 2.0**-4 if "e4m3" in fmt else 2.0**-3
    assert np.all(np.abs(back - x) <= rel * np.abs(x) + scale_ulps + 2.0**-149)
    assert np.corrcoef(back.ravel(), x.ravel())[0, 1] > 0.99
    # A quotient that underflows to 0 (amax below max·2^-150) takes the smallest positive scale, 2^-149.
    tiny = np.array([2.0**-149, 0.0, -(2.0**-149), 0.0], dtype=np.float32)
    qt = quant.quantize(tiny, "fp8_e4m3")
    assert qt.tensor_scale == 2.0**-149
    assert quant.dequantize(qt).tolist() == tiny.tolist()


@pytest.mark.parametrize(
    ("fmt", "group", "axis"),
    [
        ("fp8_e4m3_g128", None, -1),
        ("fp8_e4m3_g128", 32, -1),
        ("fp8_e4m3_g128", 64, 0),
        ("fp8_e4m3", 16, -1),
        ("fp8_e5m2", 128, -1),
        ("fp8_e4m3_g128", 8, -1),
        ("fp8_e4m3_g128", 48, 0),
        ("fp8_e4m3fnuz_g128", None, -1),
        ("fp8_e4m3fnuz", 32, 0),
        ("fp8_e5m2fnuz", 64, -1),
    ],
)
def test_fp8_group_scales_match_reference(fmt: str, group: int | None, axis: int) -> None:
    """FP8 with an fp32 scale per group along the axis (default 128, or ``group_size``; a per-tensor format
    becomes per-group with ``group_size``): scales amax/max (1 below FLT_MIN), a non-finite group → NaN scale
    and codes 0x7F, equal to the reference; scales have the documented shape."""
    rng = np.random.default_rng(2)
    x = block_data(rng, (192, 256), axis, group or 128)
    x[0, :3] = [np.nan, 1.0, 2.0]
    x[5] = 0.0
    q = quant.quantize(x, fmt, axis, group_size=group)
    g = group or 128
    assert q.group_size == g and q.scales is not None and q.scales.dtype == np.float32
    assert q.scales.shape == ref.scales_shape(x.shape, axis, g)
    check_against_reference(q, ref.quantize(x, fmt, axis, group), f"{fmt} g{g} axis{axis}")


@pytest.mark.parametrize(("fn", "fnuz"), [("fp8_e4m3", "fp8_e4m3fnuz"), ("fp8_e4m3_g128", "fp8_e4m3fnuz_g128")])
def test_fnuz_with_224_is_fn_with_the_scale_doubled(fn: str, fnuz: str) -> None:
    """vLLM's gfx942 rule (scale = amax/224 in E4M3FNUZ) and its normalisation of E4M3FN tensors (same bits,
    scale x 2) agree: quantising to the fnuz format gives exactly the fn format's codes (-0 as +0, NaN as
    0x80) with every scale doubled, so the dequantised values are identical. This is why the flavour change
    E4M3FNUZ → E4M3FN can halve the scale without rounding (spec/quant.md §1.1)."""
    rng = np.random.default_rng(9)
    x = (rng.standard_normal((64, 256)) * np.exp2(rng.integers(-6, 6, (64, 1)))).astype(np.float32)
    x[1, :3] = [np.nan, -0.0, -1e-30]
    a, b = quant.quantize(x, fn), quant.quantize(x, fnuz)
    want = np.where(a.codes == 0x80, 0, np.where((a.codes & 0x7F) == 0x7F, 0x80, a.codes)).astype(np.uint8)
    assert_same(b.codes, want, fnuz)
    if a.tensor_scale is not None:
        assert b.tensor_scale == 2 * a.tensor_scale
    else:
        assert a.scales is not None and b.scales is not None
        assert_same(b.scales, (a.scales * np.float32(2)).astype(np.float32), "scales")
    np.testing.assert_array_equal(quant.dequantize(b), quant.dequantize(a))  # equal values (-0 == +0)


def int_test_data(rng: np.random.Generator, shape: tuple[int, int], axis: int, group: int) -> F32:
    """Integer-group test data: Gaussian groups at random magnitudes, plus constant groups, groups small
    enough for fp16-subnormal (and zero) scales, groups large enough to saturate the fp16 scale, half-step
    values, a NaN group and an Inf group."""
    x = block_data(rng, shape, axis, group)
    xt = np.moveaxis(x, axis, -1)  # a view: groups are now along the last axis
    xt[0, :group] = 0.3
    xt[1, :group] = -0.0
    xt[2, :group] = rng.standard_normal(group) * 1e-6
    xt[3, :group] = rng.standard_normal(group) * 1e-9
    xt[4, :group] = rng.standard_normal(group) * 1e6
    xt[5, :group] = np.resize([0.0, 15.0, 2.5, 3.5, 0.5, 1.5, 14.5, 7.5], group)
    xt[6, :group] = np.resize([-7.0, 7.0, 0.5, -0.5, 2.5, -2.5, 6.5, 1.0], group)
    xt[7, 1] = np.nan
    xt[8, 3] = -np.inf
    xt[9, :group] = 3e5
    xt[9, 0] = -3e5
    return np.ascontiguousarray(x)


@pytest.mark.parametrize("axis", [-1, 0])
@pytest.mark.parametrize("fmt", INT_FORMATS)
def test_int_groups_match_reference(fmt: str, axis: int) -> None:
    """Integer groups (§1.4, §7.4): fp16 scale (and zero point) rounded before quantising, float32 arithmetic,
    round half to even, constant group → scale 0 and codes 0, symmetric range ±(2^(b-1)-1), 4-bit codes low
    nibble first; codes, scales, zeros and x̂ equal the reference, for per-token (axis -1) and per-channel
    (axis 0) groups."""
    group = ref.INT_FORMATS[fmt][2]
    rng = np.random.default_rng(4)
    x = int_test_data(rng, (256, 256), axis, group)
    q = quant.quantize(x, fmt, axis)
    assert q.scales is not None and q.scales.dtype == np.float16
    check_against_reference(q, ref.quantize(x, fmt, axis), f"{fmt} axis {axis}")
    bits_, sym, _ = ref.INT_FORMATS[fmt]
    codes = ref.int_unpack(q.codes, bits_, sym, x.size)
    lo, hi = ref.int_qrange(bits_, sym)
    assert codes.min() >= lo and codes.max() <= hi
    if sym:
        assert codes.min() == lo  # reached, and -2^(b-1) never produced


@pytest.mark.parametrize("group", [16, 64, 128, 256])
@pytest.mark.parametrize("fmt", ["int8_sym_g32", "int8_asym_g32", "int4_sym_g32", "int4_asym_g32"])
def test_int_group_size_override(fmt: str, group: int) -> None:
    """``group_size`` overrides the integer group (here 16/64/128 and the whole axis, one scale per vector as
    for per-token-head quantisation), along the last and first axes."""
    rng = np.random.default_rng(group)
    for axis in (-1, 0):
        x = int_test_data(rng, (256, 256), axis, group)
        q = quant.quantize(x, fmt, axis, group_size=group)
        assert q.group_size == group
        check_against_reference(q, ref.quantize(x, fmt, axis, group), f"{fmt} g{group} axis {axis}")


def test_int_hand_computed_vectors() -> None:
    """By hand: symmetric int8 [-1, 1, 0…] → scale fp16(1/127), codes -127/127 (never -128); asymmetric int4
    with min 0, max 15 → scale 1, zero 0 and half steps to even (2.5 → 2, 3.5 → 4, 14.5 → 14); a constant
    group → scale 0, codes 0, x̂ = fp16(value)."""
    x = np.zeros(32, dtype=np.float32)
    x[:2] = [-1.0, 1.0]
    q = quant.quantize(x, "int8_sym_g32")
    assert q.scales is not None and q.scales[0] == np.float16(np.float32(1) / np.float32(127))
    assert q.codes.view(np.int8)[:3].tolist() == [-127, 127, 0]
    y = np.zeros(32, dtype=np.float32)
    y[:5] = [0.0, 15.0, 2.5, 3.5, 14.5]
    q = quant.quantize(y, "int4_asym_g32")
    assert q.scales is not None and q.zeros is not None
    assert (float(q.scales[0]), float(q.zeros[0])) == (1.0, 0.0)
    assert ref.unpack(q.codes, 4, 32)[:5].tolist() == [0, 15, 2, 4, 14]
    for fmt in INT_FORMATS:
        sym = ref.INT_FORMATS[fmt][1]
        value = 0.0 if sym else 0.3  # symmetric: only an all-zero group has max |x| = 0
        c = np.full(ref.INT_FORMATS[fmt][2], value, dtype=np.float32)
        q = quant.quantize(c, fmt)
        assert q.scales is not None and float(q.scales[0]) == 0.0 and not q.codes.any(), fmt
        assert (quant.dequantize(q) == np.float32(np.float16(np.float32(value)))).all(), fmt
    q = quant.quantize(np.full(32, -0.3, dtype=np.float32), "int8_sym_g32")
    assert q.codes.view(np.int8).tolist() == [-127] * 32  # a constant symmetric group is ±qmax


def test_kivi_keys_per_channel_values_per_token() -> None:
    """KIVI layout (§1.4): keys (tokens, channels) with ``axis=0`` get one fp16 scale/zero per channel per 32
    tokens — scale[g, c] from K[32g:32g+32, c] — and values with ``axis=-1`` one per token per 32 channels;
    checked slice by slice with plain numpy (min/max → fp16, q = rint(clip((x - zero)/scale, 0, 15)))."""
    rng = np.random.default_rng(9)
    keys = (rng.standard_normal((64, 8)) * np.arange(1, 9)).astype(np.float32)
    vals = rng.standard_normal((4, 64)).astype(np.float32)

    def slice_expect(v: F32) -> tuple[np.float16, np.float16, list[int]]:
        lo, hi = np.float32(v.min()), np.float32(v.max())
        s16, z16 = np.float16((hi - lo) / np.float32(15)), np.float16(lo)
        codes = np.rint(np.clip((v - np.float32(z16)) / np.float32(s16), 0, 15)).astype(int)
        return s16, z16, codes.tolist()

    qk = quant.quantize(keys, "int4_asym_g32", axis=0)
    assert qk.scales is not None and qk.zeros is not None and qk.scales.shape == (2, 8)
    kcodes = ref.unpack(qk.codes, 4, keys.size).reshape(keys.shape)
    for g in range(2):
        for c in range(8):
            s16, z16, codes = slice_expect(keys[32 * g : 32 * g + 32, c])
            assert (qk.scales[g, c], qk.zeros[g, c]) == (s16, z16)
            assert kcodes[32 * g : 32 * g + 32, c].tolist() == codes
    qv = quant.quantize(vals, "int4_asym_g32", axis=-1)
    assert qv.scales is not None and qv.zeros is not None and qv.scales.shape == (4, 2)
    vcodes = ref.unpack(qv.codes, 4, vals.size).reshape(vals.shape)
    for t in range(4):
        for g in range(2):
            s16, z16, codes = slice_expect(vals[t, 32 * g : 32 * g + 32])
            assert (qv.scales[t, g], qv.zeros[t, g]) == (s16, z16)
            assert vcodes[t, 32 * g : 32 * g + 32].tolist() == codes


@pytest.mark.parametrize("group", [48, 96, 8])
def test_int4_group_size_override_along_last_axis(group: int) -> None:
    """``group_size`` is documented for integer formats, including ``x.shape[axis]`` (one scale per vector,
    e.g. per token-head of head_dim 96): int4 with groups of 8, 48 or 96 along the last axis quantise like
    the reference (regression test: these once panicked while packing rows of one value)."""
    x = np.random.default_rng(0).standard_normal((4, 96)).astype(np.float32)
    q = quant.quantize(x, "int4_sym_g32", group_size=group)
    check_against_reference(q, ref.quantize(x, "int4_sym_g32", -1, group), f"int4 g{group}")


# === 5. error bounds, SQNR, error(), idempotence ============================================================


def effective_scale(q: quant.QuantizedTensor, x: F32) -> npt.NDArray[np.float64]:
    """The per-element scale s of ``q`` (x ≈ element · s), decoded independently of kvwire: E8M0 bytes via
    ml_dtypes, NVFP4 s·g in float32, fp32 group or tensor scales."""
    if q.scales is None:
        assert q.tensor_scale is not None
        return np.full(x.shape, np.float32(q.tensor_scale), dtype=np.float64)
    if q.format in ref.MX_ELEMENT:
        s = ref.e8m0_value(q.scales)
    elif q.format == "nvfp4":
        assert q.tensor_scale is not None
        s = (ref.decode_codes(q.scales, ref.ELEMENTS["e4m3fn"]) * np.float32(q.tensor_scale)).astype(np.float32)
    else:
        s = q.scales.astype(np.float32)
    return np.repeat(s.astype(np.float64), q.group_size, axis=q.axis)


def element_of(fmt: str) -> str:
    """The element format of a floating-point block or fp8 format."""
    if fmt in ref.MX_ELEMENT:
        return ref.MX_ELEMENT[fmt]
    return "e2m1" if fmt == "nvfp4" else ref.FP8_FORMATS[fmt][0]


FLOAT_FORMATS = [
    ("mxfp8_e4m3", "floor"),
    ("mxfp8_e5m2", "floor"),
    ("mxfp6_e2m3", "floor"),
    ("mxfp6_e3m2", "floor"),
    ("mxfp4", "floor"),
    ("mxfp4", "rceil"),
    ("mxfp6_e2m3", "rceil"),
    ("mxfp8_e4m3", "rceil"),
    ("nvfp4", "floor"),
    ("fp8_e4m3", "floor"),
    ("fp8_e5m2", "floor"),
    ("fp8_e4m3_g128", "floor"),
    ("fp8_e4m3fnuz", "floor"),
    ("fp8_e5m2fnuz", "floor"),
    ("fp8_e4m3fnuz_g128", "floor"),
]


@pytest.mark.parametrize(("fmt", "rule"), FLOAT_FORMATS)
def test_elementwise_error_bound(fmt: str, rule: str) -> None:
    """For every element with |x/s| ≤ max_elem, |x - x̂| ≤ ½·ulp_elem(x/s)·s, with ulp taken from the element
    format at that magnitude (subnormal binade included); every saturated element (|x/s| > max) decodes to
    exactly ±max·s. Power-of-two MX scales make this exact; for NVFP4 and fp32 scales a float32 rounding slack
    of 2^-22·|x| is allowed. Data: Gaussian blocks spanning 2^±24 plus 7.9-style clipping blocks."""
    rng = np.random.default_rng(17)
    x = block_data(rng, (256, 128), 1, 128)
    x[:8, :32] = rng.uniform(6.0, 8.0, (8, 32)).astype(np.float32)  # amax in [6, 8): FLOOR saturates
    x[8:16, :32] = rng.uniform(448, 512, (8, 32)).astype(np.float32)
    q = quant.quantize(x, fmt, scale_rule=rule)  # type: ignore[arg-type]
    xh = quant.dequantize(q).astype(np.float64)
    el = ref.ELEMENTS[element_of(fmt)]
    s = effective_scale(q, x)
    y = (x / s.astype(np.float32)).astype(np.float32).astype(np.float64)
    exact = fmt in ref.MX_ELEMENT
    slack = 0.0 if exact else 2.0**-22 * np.abs(x.astype(np.float64))
    sat = np.abs(y) > el.max
    err = np.abs(x.astype(np.float64) - xh)
    bound = 0.5 * ref.ulp(y, el) * s + slack
    assert (err[~sat] <= bound[~sat]).all(), f"{fmt}: {int((err[~sat] > bound[~sat]).sum())} over the bound"
    want_sat = (np.sign(x[sat]) * (np.float32(el.max) * s[sat].astype(np.float32))).astype(np.float32)
    assert np.array_equal(xh[sat], want_sat.astype(np.float64)), fmt
    if fmt == "mxfp4" and rule == "floor":
        assert sat.sum() > 0  # the clipping of §1.2 is exercised


@pytest.mark.parametrize("fmt", INT_FORMATS)
def test_int_error_bound(fmt: str) -> None:
    """Integer groups: every element whose (x - zero)/scale lies inside the code range is reconstructed within
    half a step, |x - x̂| ≤ ½·scale (+ float32 rounding); elements outside it (fp16 rounding of scale/zero)
    decode to exactly the end code's value."""
    bits_, sym, group = ref.INT_FORMATS[fmt]
    rng = np.random.default_rng(23)
    x = block_data(rng, (128, 256), 1, group)
    q = quant.quantize(x, fmt)
    assert q.scales is not None
    xh = quant.dequantize(q).astype(np.float64)
    s = np.repeat(q.scales.astype(np.float32), group, axis=1)
    z = np.zeros_like(s) if q.zeros is None else np.repeat(q.zeros.astype(np.float32), group, axis=1)
    lo, hi = ref.int_qrange(bits_, sym)
    dead = s == 0  # fp16 scale underflowed (or a constant group): every code 0, x̂ = zero point
    with np.errstate(all="ignore"):
        v = ((x - z) / s).astype(np.float32)
    inside = (v >= lo) & (v <= hi) & ~dead
    outside = ~inside & ~dead
    err = np.abs(x.astype(np.float64) - xh)
    bound = 0.5 * s.astype(np.float64) + 2.0**-22 * (np.abs(x) + np.abs(z)).astype(np.float64)
    assert (err[inside] <= bound[inside]).all(), fmt
    ends = np.where(v < lo, np.float32(lo), np.float32(hi)).astype(np.float32)
    want = ((ends * s).astype(np.float32) + z).astype(np.float32)
    assert np.array_equal(xh[outside], want[outside].astype(np.float64)), fmt
    assert np.array_equal(xh[dead], z[dead].astype(np.float64)), fmt
    assert inside.sum() > 0.5 * x.size and outside.any()


SQNR_FLOORS = [
    ("fp8_e4m3", 30.0),
    ("fp8_e4m3fnuz", 30.0),
    ("mxfp8_e4m3", 28.0),
    ("mxfp6_e2m3", 28.0),
    ("nvfp4", 19.0),
    ("mxfp4", 17.0),
    ("int4_asym_g32", 20.0),
    ("int4_sym_g32", 20.0),
]


@pytest.fixture(scope="module")
def gaussian_bf16() -> npt.NDArray[Any]:
    """Seeded N(0, 1) data of 4096x128 in bfloat16 (the setting of spec/quant.md §5)."""
    return np.random.default_rng(2026).standard_normal((4096, 128)).astype(np.float32).astype(BF16)


@pytest.mark.parametrize("axis", [-1, 0])
@pytest.mark.parametrize(("fmt", "floor"), SQNR_FLOORS)
def test_sqnr_floors(fmt: str, floor: float, axis: int, gaussian_bf16: npt.NDArray[Any]) -> None:
    """The SQNR floors of spec/quant.md §5 on seeded Gaussian data, per token (axis -1) and per channel (0),
    measured with ``kvwire.quant.error`` and recomputed with numpy."""
    x = gaussian_bf16
    xh = quant.dequantize(quant.quantize(x, fmt, axis))
    e = quant.error(x.astype(np.float32), xh)
    assert e["sqnr_db"] >= floor, (fmt, e["sqnr_db"])
    assert math.isclose(e["sqnr_db"], ref.error_metrics(x, xh)["sqnr_db"], rel_tol=1e-9)


def test_error_matches_numpy_formulas() -> None:
    """``error()`` equals the numpy formulas (SQNR 10·log10(Σx²/Σ(x-x̂)²), cosine, MSE, max |x-x̂|) over the
    finite pairs, and counts the compared and the left-out (NaN/±Inf) pairs; exact → SQNR +∞ and cosine 1;
    shapes must agree (QuantError ``x_hat``)."""
    rng = np.random.default_rng(8)
    x = rng.standard_normal((50, 40)).astype(np.float32)
    xh = (x + rng.standard_normal(x.shape).astype(np.float32) * np.float32(0.01)).astype(np.float32)
    x[0, 0], xh[1, 1], xh[2, 2] = np.nan, np.inf, -np.inf
    got = quant.error(x, xh)
    want = ref.error_metrics(x, xh)
    assert set(got) == {"sqnr_db", "cosine", "mse", "max_abs", "count", "nonfinite"}
    for k in ("sqnr_db", "cosine", "mse", "max_abs"):
        assert math.isclose(got[k], want[k], rel_tol=1e-12), k
    assert (got["count"], got["nonfinite"]) == (x.size - 3, 3)
    exact = quant.error(x[3:], x[3:])
    assert exact["sqnr_db"] == math.inf and exact["cosine"] == 1.0 and exact["mse"] == 0.0
    three = quant.error(np.array([3.0, 4.0], np.float32), np.array([3.0, 3.0], np.float32))
    assert math.isclose(three["sqnr_db"], 10 * math.log10(25.0), rel_tol=1e-12)
    assert math.isclose(three["cosine"], 21 / (5 * math.sqrt(18)), rel_tol=1e-12)
    with pytest.raises(kvwire.QuantError) as ei:
        quant.error(x, xh[:10])
    assert ei.value.path == "x_hat"


@pytest.mark.parametrize("fmt", ["fp8_e4m3", "fp8_e5m2", "fp8_e4m3fnuz", "fp8_e5m2fnuz"])
def test_per_tensor_fp8_idempotent_where_exact(fmt: str) -> None:
    """quantise(dequantise(quantise(x))) = quantise(x) for per-tensor fp8 when the tensor scale survives the
    round trip: exactly so when amax maps to max with a power-of-two scale (amax 3.5 → 2^-7), and for seeded
    data whenever the recomputed scale is equal."""
    rng = np.random.default_rng(12)
    m = ref.ELEMENTS[ref.FP8_FORMATS[fmt][0]].scale_max
    x = rng.uniform(-1, 1, (64, 64)).astype(np.float32)
    x[0, 0] = 1.0
    x *= np.float32(m * 2.0**-7)
    q1 = quant.quantize(x, fmt)
    assert q1.tensor_scale == 2.0**-7
    q2 = quant.quantize(quant.dequantize(q1), fmt)
    assert same_quantized(q1, q2)
    hits = 0
    for seed in range(20):
        y = np.random.default_rng(seed).standard_normal((32, 32)).astype(np.float32)
        a = quant.quantize(y, fmt)
        b = quant.quantize(quant.dequantize(a), fmt)
        if a.tensor_scale == b.tensor_scale:
            hits += 1
            assert np.array_equal(a.codes, b.codes)
            assert_same(quant.dequantize(b), quant.dequantize(a))
    assert hits > 0


@pytest.mark.parametrize("fmt", MX_FORMATS)
def test_mx_floor_idempotent(fmt: str) -> None:
    """MX FLOOR is a projection: quantising x̂ again reproduces the same scale bytes and codes (the decoded
    block maximum lies in the same binade [2^emax, max]·X as the original's)."""
    rng = np.random.default_rng(13)
    x = np.concatenate([special_blocks(32), block_data(rng, (64, 32), 1, 32)])
    x = np.ascontiguousarray(x[np.isfinite(x).all(axis=1)])
    q1 = quant.quantize(x, fmt)
    q2 = quant.quantize(quant.dequantize(q1), fmt)
    assert same_quantized(q1, q2)


# === 6. property tests ======================================================================================


@dataclasses.dataclass(frozen=True)
class Case:
    fmt: str
    shape: tuple[int, ...]
    axis: int
    dtype: str
    group: int | None
    rule: str
    seed: int
    specials: bool


def _block_of(fmt: str, group: int | None) -> int:
    if fmt in ref.MX_ELEMENT:
        return 32
    if fmt == "nvfp4":
        return 16
    if fmt in ref.FP8_FORMATS:
        g = group if group is not None else ref.FP8_FORMATS[fmt][1]
        return g or 1
    return group if group is not None else ref.INT_FORMATS[fmt][2]


def _bits_of(fmt: str) -> int:
    if fmt in ref.MX_ELEMENT:
        return ref.ELEMENTS[ref.MX_ELEMENT[fmt]].bits
    if fmt == "nvfp4":
        return 4
    if fmt in ref.INT_FORMATS:
        return ref.INT_FORMATS[fmt][0]
    return 8


@st.composite
def cases(draw: st.DrawFn) -> Case:
    """A random quantisation case: format, 1-3 dimensions, axis, dtype, group override (fp8/int), MX rule,
    seed, and whether to sprinkle special values (0, ±Inf, NaN, subnormals, huge). Packed formats get inner
    dimensions that keep codes byte-aligned (a documented requirement)."""
    fmt = draw(st.sampled_from(ALL_FORMATS))
    ndim = draw(st.integers(1, 3))
    axis = draw(st.integers(0, ndim - 1))
    dims = [draw(st.integers(1, 4)) for _ in range(ndim)]
    bits_ = _bits_of(fmt)
    unit = {4: 2, 6: 4}.get(bits_, 1)
    inner = math.prod(dims[axis + 1 :])
    if inner > 1 and inner % unit:
        dims[-1] *= unit
        inner = math.prod(dims[axis + 1 :])
    group: int | None = None
    if fmt in ref.FP8_FORMATS or fmt in ref.INT_FORMATS:
        options: list[int | None] = [None, 16, 32, 64, 2, 8, 24]
        group = draw(st.sampled_from(options))
    block = _block_of(fmt, group)
    if block == 1:
        dims[axis] = draw(st.integers(1, 64))
    else:
        dims[axis] = block * draw(st.integers(1, 3))
    return Case(
        fmt,
        tuple(dims),
        axis - ndim if draw(st.booleans()) else axis,
        draw(st.sampled_from(["float32", "float16", "bfloat16"])),
        group,
        draw(st.sampled_from(["floor", "rceil"])),
        draw(st.integers(0, 2**32 - 1)),
        draw(st.booleans()),
    )


def case_data(c: Case) -> tuple[npt.NDArray[Any], F32]:
    """The case's input in its dtype, and its exact float32 widening."""
    rng = np.random.default_rng(c.seed)
    x = rng.standard_normal(c.shape) * np.exp2(rng.integers(-12, 12, c.shape))
    if c.specials:
        pick = rng.random(c.shape)
        x = np.where(pick < 0.03, 0.0, x)
        special = rng.choice(np.array([np.inf, -np.inf, np.nan, 1e-40, -1e-39, 3e37]), size=c.shape)
        x = np.where((pick > 0.03) & (pick < 0.05), special, x)
    dt = {"float32": np.float32, "float16": np.float16, "bfloat16": BF16}[c.dtype]
    with np.errstate(all="ignore"):
        xin = np.ascontiguousarray(x.astype(np.float32).astype(dt))
    return xin, np.ascontiguousarray(xin.astype(np.float32))


PROPERTY = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@PROPERTY
@given(cases())
def test_property_matches_reference_with_documented_shapes(c: Case) -> None:
    """On random shapes/axes/dtypes/formats: codes, scales, zeros, tensor scale and x̂ equal the reference
    (computed on the exact float32 widening); codes keep the input's shape for 8-bit formats and are 1-D packed
    otherwise; scales/zeros have the input's shape with the axis divided by the group; ``nbytes`` is
    codes + scales + zeros + 4 for a tensor scale."""
    xin, x32 = case_data(c)
    q = quant.quantize(xin, c.fmt, c.axis, group_size=c.group, scale_rule=c.rule)  # type: ignore[arg-type]
    axis = c.axis % len(c.shape)
    want = ref.quantize(x32, c.fmt, axis, c.group, c.rule)  # type: ignore[arg-type]
    check_against_reference(q, want, str(c))
    bits_ = _bits_of(c.fmt)
    assert q.codes.dtype == np.uint8 and q.shape == c.shape and q.axis == axis
    if bits_ == 8:
        assert q.codes.shape == c.shape
    else:
        assert q.codes.shape == (xin.size * bits_ // 8,)
    if q.scales is not None:
        assert q.scales.shape == ref.scales_shape(c.shape, axis, q.group_size)
    if q.zeros is not None:
        assert q.zeros.shape == ref.scales_shape(c.shape, axis, q.group_size)
    extra = 0 if q.tensor_scale is None else 4
    parts = [a.nbytes for a in (q.codes, q.scales, q.zeros) if a is not None]
    assert q.nbytes == sum(parts) + extra


@PROPERTY
@given(cases())
def test_property_half_inputs_equal_f32_widening(c: Case) -> None:
    """A float16/bfloat16 input quantises exactly like its float32 widening (codes, scales, zeros, tensor
    scale)."""
    xin, x32 = case_data(c)
    kw: dict[str, Any] = {"group_size": c.group, "scale_rule": c.rule}
    assert same_quantized(quant.quantize(xin, c.fmt, c.axis, **kw), quant.quantize(x32, c.fmt, c.axis, **kw))


@PROPERTY
@given(cases())
def test_property_thread_count_does_not_change_output(c: Case) -> None:
    """threads = 1, 2, 3 give identical quantised bytes and identical dequantised values."""
    xin, _ = case_data(c)
    kw: dict[str, Any] = {"group_size": c.group, "scale_rule": c.rule}
    qs = [quant.quantize(xin, c.fmt, c.axis, threads=t, **kw) for t in (1, 2, 3)]
    assert all(same_quantized(qs[0], q) for q in qs[1:])
    ds = [quant.dequantize(qs[0], threads=t) for t in (1, 2, 3)]
    assert all(np.array_equal(bits(ds[0]), bits(d)) for d in ds[1:])


def test_large_inputs_thread_count_and_default() -> None:
    """On inputs larger than one 65,536-value work unit (so threads really split the work), ``cast``,
    ``decode``, per-tensor fp8 (parallel amax), MX, NVFP4 and int groups give the same bytes for threads 1, 2,
    3 and the default."""
    rng = np.random.default_rng(31)
    x = (rng.standard_normal((1280, 256)) * np.exp2(rng.integers(-6, 6, (1280, 1)))).astype(np.float32)
    x[1100, 7] = 1e4
    for el in ref.ELEMENTS:
        outs = [quant.cast(x, el, saturate=True, threads=t) for t in (1, 2, 3, None)]
        assert all(np.array_equal(outs[0], o) for o in outs[1:]), el
        dec = [quant.decode(outs[0], el, x.shape, threads=t) for t in (1, 2, 3, None)]
        assert all(np.array_equal(bits(dec[0]), bits(d)) for d in dec[1:]), el
    for fmt in ("fp8_e4m3", "mxfp4", "mxfp6_e3m2", "nvfp4", "int4_asym_g32", "fp8_e4m3_g128"):
        for axis in (-1, 0):
            qs = [quant.quantize(x, fmt, axis, threads=t) for t in (1, 2, 3, None)]
            assert all(same_quantized(qs[0], q) for q in qs[1:]), (fmt, axis)
    q = quant.quantize(x, "fp8_e4m3")
    assert q.tensor_scale is not None and np.float32(q.tensor_scale) == np.float32(1e4) / np.float32(448)


_ISA_SCRIPT = """
import hashlib, sys
import numpy as np
from kvwire import quant
x = (np.random.default_rng(3).standard_normal((512, 256)) * 3).astype(np.float32)
h = hashlib.sha256()
for fmt in ("fp8_e4m3", "fp8_e5m2", "fp8_e4m3_g128", "fp8_e4m3fnuz", "fp8_e5m2fnuz", "mxfp8_e4m3", "mxfp8_e5m2",
            "mxfp6_e2m3", "mxfp6_e3m2", "mxfp4", "nvfp4", "int8_sym_g32", "int8_asym_g32", "int4_sym_g32",
            "int4_asym_g32"):
    for axis in (-1, 0):
        q = quant.quantize(x, fmt, axis)
        for a in (q.codes, q.scales, q.zeros, quant.dequantize(q)):
            if a is not None:
                h.update(np.ascontiguousarray(a).tobytes())
for el in quant.ELEMENTS:
    c = quant.cast(x, el)
    h.update(c.tobytes() + quant.decode(c, el, x.shape).tobytes())
print(quant.isa(), h.hexdigest())
"""


def test_instruction_set_levels_give_identical_output() -> None:
    """The kernels compiled for the baseline, AVX2 and the best level (``KVWIRE_ISA`` caps the level; the
    machine may not have every one) produce the same bytes (run in subprocesses, the level is fixed per
    process)."""
    digests = {}
    for level in ("baseline", "avx2", "best"):
        env = {k: v for k, v in os.environ.items() if k != "KVWIRE_ISA"}
        if level != "best":
            env["KVWIRE_ISA"] = level
        out = subprocess.run(
            [sys.executable, "-c", _ISA_SCRIPT], env=env, capture_output=True, text=True, check=True
        ).stdout.split()
        digests[out[0]] = out[1]
    assert "baseline" in digests
    assert len(set(digests.values())) == 1, digests


def test_nbytes_matches_the_format_table() -> None:
    """For a large tensor in every format, ``nbytes`` (codes + block scales + zeros + tensor scale) equals the
    format table's ``bits_per_value`` · values / 8 plus ``tensor_scale_bits`` / 8, and block/scale types
    agree with the quantised tensor."""
    table = {r["name"]: r for r in quant.formats().iter_rows(named=True)}
    assert set(ALL_FORMATS) | {"int4_sym_g128"} <= set(table)
    x = np.random.default_rng(5).standard_normal((512, 1024)).astype(np.float32)
    for name in table:
        if name in ("none", "fp8_ds_mla"):  # fp8_ds_mla is a cache record (kvwire.layout), not quantize()'s
            continue
        row = table[name]
        q = quant.quantize(x, name)
        assert q.nbytes * 8 == x.size * row["bits_per_value"] + row["tensor_scale_bits"], name
        assert (row["block"] or 0) == q.group_size, name
        assert math.isclose(row["ratio_vs_bf16"], 16 / row["bits_per_value"]), name


def test_nbytes_hand_computed() -> None:
    """Bits per value of spec/quant.md §1.2/§1.3/§6 from the byte counts: MXFP8 8.25, MXFP6 6.25, MXFP4 4.25,
    NVFP4 4.5 (+32 bits), fp8 per tensor 8 (+32), fp8 g128 8.25, INT8 sym/asym G32 8.5/9, INT4 sym/asym G32
    4.5/5, INT4 sym G128 4.125."""
    want = {
        "mxfp8_e4m3": 8.25,
        "mxfp8_e5m2": 8.25,
        "mxfp6_e2m3": 6.25,
        "mxfp6_e3m2": 6.25,
        "mxfp4": 4.25,
        "nvfp4": 4.5,
        "fp8_e4m3": 8.0,
        "fp8_e5m2": 8.0,
        "fp8_e4m3_g128": 8.25,
        "fp8_e4m3fnuz": 8.0,
        "fp8_e5m2fnuz": 8.0,
        "fp8_e4m3fnuz_g128": 8.25,
        "int8_sym_g32": 8.5,
        "int8_asym_g32": 9.0,
        "int4_sym_g32": 4.5,
        "int4_asym_g32": 5.0,
        "int4_sym_g128": 4.125,
    }
    x = np.ones((256, 512), dtype=np.float32)
    for fmt, bpv in want.items():
        q = quant.quantize(x, fmt)
        tensor = 32 if fmt in ("nvfp4", "fp8_e4m3", "fp8_e5m2", "fp8_e4m3fnuz", "fp8_e5m2fnuz") else 0
        assert q.nbytes * 8 == x.size * bpv + tensor, fmt


# === 7. clear errors ========================================================================================


def _q(fmt: str = "mxfp4") -> quant.QuantizedTensor:
    return quant.quantize(np.linspace(-4, 4, 8 * 64, dtype=np.float32).reshape(8, 64), fmt)


X = np.linspace(-4, 4, 8 * 64, dtype=np.float32).reshape(8, 64)
ERRORS: list[tuple[str, Callable[[], object], str]] = [
    ("float64", lambda: quant.quantize(X.astype(np.float64), "mxfp4"), "x"),
    ("int32", lambda: quant.quantize(X.astype(np.int32), "mxfp4"), "x"),
    ("cast float64", lambda: quant.cast(X.astype(np.float64), "e4m3fn"), "x"),
    ("list", lambda: quant.quantize([1.0] * 32, "mxfp4"), "x"),  # type: ignore[arg-type]
    ("transposed view", lambda: quant.quantize(X.T, "mxfp4", 0), "x"),
    ("cast transposed", lambda: quant.cast(X.T, "e4m3fn"), "x"),
    ("empty", lambda: quant.quantize(np.zeros((0, 32), np.float32), "mxfp4"), "x"),
    ("axis 2 of 2-D", lambda: quant.quantize(X, "mxfp4", 2), "axis"),
    ("axis -3 of 2-D", lambda: quant.quantize(X, "mxfp4", -3), "axis"),
    ("axis bool", lambda: quant.quantize(X, "mxfp4", True), "axis"),
    ("block does not divide", lambda: quant.quantize(X, "mxfp4", 0), "axis"),
    ("unknown format", lambda: quant.quantize(X, "fp3"), "format"),
    ("format none", lambda: quant.quantize(X, "none"), "format"),
    ("unknown element", lambda: quant.cast(X, "e4m3"), "element"),
    ("decode unknown element", lambda: quant.decode(np.zeros(4, np.uint8), "fp4"), "element"),
    ("group_size on mxfp4", lambda: quant.quantize(X, "mxfp4", group_size=16), "group_size"),
    ("group_size on nvfp4", lambda: quant.quantize(X, "nvfp4", group_size=32), "group_size"),
    ("group_size 0", lambda: quant.quantize(X, "int8_sym_g32", group_size=0), "group_size"),
    ("scale rule", lambda: quant.quantize(X, "mxfp4", scale_rule="even"), "scale_rule"),  # type: ignore[arg-type]
    ("threads 0", lambda: quant.quantize(X, "mxfp4", threads=0), "threads"),
    ("odd count fp4", lambda: quant.cast(np.ones(3, np.float32), "e2m1"), "x"),
    ("fp6 count not multiple of 4", lambda: quant.cast(np.ones(6, np.float32), "e3m2"), "x"),
    ("fp4 inner dims odd", lambda: quant.quantize(np.ones((32, 3), np.float32), "mxfp4", 0), "x"),
    ("decode packed without shape", lambda: quant.decode(np.zeros(4, np.uint8), "e2m1"), "shape"),
    # A shape given with the codes that do not match them is the shape's error (checked before allocating).
    ("decode wrong code count", lambda: quant.decode(np.zeros(3, np.uint8), "e2m1", (4,)), "shape"),
    ("decode int8 codes", lambda: quant.decode(np.zeros(4, np.int8), "e4m3fn"), "codes"),
    (
        "scales too short",
        lambda: quant.dequantize(dataclasses.replace(_q(), scales=np.zeros(15, np.uint8))),
        "scales",
    ),
    (
        "scales too long",
        lambda: quant.dequantize(dataclasses.replace(_q("nvfp4"), scales=np.zeros(33, np.uint8))),
        "scales",
    ),
    (
        "int scales halved",
        lambda: quant.dequantize(dataclasses.replace(_q("int4_asym_g32"), scales=np.zeros((8, 1), np.float16))),
        "scales",
    ),
    (
        "fp8 group scales wrong length",
        lambda: quant.dequantize(
            dataclasses.replace(quant.quantize(X, "fp8_e4m3_g128", 0, group_size=4), scales=np.ones(3, np.float32))
        ),
        "scales",
    ),
    (
        "scales of another kind",
        lambda: quant.dequantize(dataclasses.replace(_q(), scales=np.zeros(16, np.float32))),
        "scales",
    ),
    (
        "scales float64",
        lambda: quant.dequantize(dataclasses.replace(_q(), scales=np.zeros(16, np.float64))),
        "scales",
    ),
    ("scales missing", lambda: quant.dequantize(dataclasses.replace(_q(), scales=None)), "scales"),
    (
        "codes too short",
        lambda: quant.dequantize(dataclasses.replace(_q(), codes=np.zeros(255, np.uint8))),
        "codes",
    ),
    ("zeros missing", lambda: quant.dequantize(dataclasses.replace(_q("int4_asym_g32"), zeros=None)), "zeros"),
    (
        "tensor scale missing",
        lambda: quant.dequantize(dataclasses.replace(_q("nvfp4"), tensor_scale=None)),
        "tensor_scale",
    ),
    (
        "fp8 tensor scale missing",
        lambda: quant.dequantize(dataclasses.replace(_q("fp8_e4m3"), tensor_scale=None)),
        "tensor_scale",
    ),
    ("dequantize out float64", lambda: quant.dequantize(_q(), out=np.zeros((8, 64))), "out"),  # type: ignore[arg-type]
    ("error shapes", lambda: quant.error(X, X[:2]), "x_hat"),
]


@pytest.mark.parametrize(("name", "call", "path"), ERRORS, ids=[e[0] for e in ERRORS])
def test_clear_errors(name: str, call: Callable[[], object], path: str) -> None:
    """Bad input raises ``kvwire.QuantError`` (a ValueError) whose ``path`` names the offending argument and
    whose message says what was expected — never a crash, a panic or a silent result."""
    with pytest.raises(kvwire.QuantError) as ei:
        call()
    assert isinstance(ei.value, ValueError)
    assert ei.value.path == path, (name, ei.value.path, str(ei.value))
    assert str(ei.value).startswith(path) or path in str(ei.value), str(ei.value)


def test_dequantize_out_parameter() -> None:
    """``dequantize(q, out=buf)`` writes x̂ into a C-contiguous float32 buffer of the original shape and
    returns it; the method form ``q.dequantize()`` gives the same values."""
    q = _q("mxfp6_e2m3")
    buf = np.empty((8, 64), dtype=np.float32)
    assert quant.dequantize(q, out=buf) is buf
    assert_same(buf, q.dequantize())
    assert hashlib.sha256(buf.tobytes()).digest() == hashlib.sha256(quant.dequantize(q).tobytes()).digest()
