"""A small, independent numpy + ml_dtypes reference of the KV quantisation formats of ``spec/quant.md``.

Written from the spec (§1.1-§1.4, §2.1, §7) and the format rules documented in ``kvwire.quant``'s
docstrings, never from kvwire's kernels: every rounding step is an ``ml_dtypes`` cast of a ``float32`` value
(one RNE step; never ``float64``, which ml_dtypes double-rounds), every power-of-two exponent comes from
``np.frexp`` (never a float log2), and integer rounding is ``np.rint`` (half to even).

Conventions shared with kvwire (documented in ``python/kvwire/quant.py`` and ``spec/quant.md``):

* element codes sit in the low bits of a byte, sign in the top bit of the code;
* packing: FP4/INT4 two per byte, element 2i in the low nibble; FP6 four per three bytes, the little-endian
  24-bit word ``c0 | c1 << 6 | c2 << 12 | c3 << 18``;
* blocks run along ``axis``; a C-contiguous tensor is viewed as ``(outer, len // block, block, inner)`` and
  the scales have the input's shape with ``shape[axis] // block`` on the axis (strided blocks when the axis is
  not the last one).

Every function takes ``float32`` input (widen ``bfloat16``/``float16`` with ``astype(np.float32)``, which is
exact) and returns unpacked codes in the input's shape; :func:`pack` packs them.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Literal

import ml_dtypes
import numpy as np
import numpy.typing as npt

F32 = npt.NDArray[np.float32]
U8 = npt.NDArray[np.uint8]
I64 = npt.NDArray[np.int64]

#: Smallest normal float32 (FLT_MIN).
FLT_MIN = np.float32(2.0**-126)


@dataclasses.dataclass(frozen=True)
class Elem:
    """A sign-exponent-mantissa element format (spec/quant.md §1.1, §1.2)."""

    name: str
    dtype: Any
    bits: int
    mbits: int
    #: Exponent of the smallest normal binade.
    emin: int
    #: Exponent of the largest normal binade (the OCP MX ``emax``).
    emax: int
    #: Largest finite value.
    max: float

    @property
    def sign_bit(self) -> int:
        return 1 << (self.bits - 1)

    @property
    def ones(self) -> int:
        """The all-ones magnitude code (FP8: NaN; FP6/FP4: max)."""
        return self.sign_bit - 1

    @property
    def fnuz(self) -> bool:
        """AMD's fnuz convention: one NaN at the negative-zero pattern 0x80, no -0, no Inf."""
        return self.name.endswith("fnuz")

    @property
    def nan_block(self) -> int:
        """The code every element of a NaN-scaled block stores: the format's NaN (0x80 for fnuz, the all-ones
        magnitude for E4M3FN/E5M2)."""
        return self.sign_bit if self.fnuz else self.ones

    @property
    def scale_max(self) -> float:
        """What an fp8 scale maps amax to: the max, except E4M3FNUZ's 224 (vLLM's divisor on gfx942, where
        ``FP8_E4M3_MAX = 224.0f`` for the fnuz type; spec/quant.md §1.1)."""
        return 224.0 if self.name == "e4m3fnuz" else self.max


ELEMENTS: dict[str, Elem] = {
    "e4m3fn": Elem("e4m3fn", ml_dtypes.float8_e4m3fn, 8, 3, -6, 8, 448.0),
    "e5m2": Elem("e5m2", ml_dtypes.float8_e5m2, 8, 2, -14, 15, 57344.0),
    "e2m3": Elem("e2m3", ml_dtypes.float6_e2m3fn, 6, 3, 0, 2, 7.5),
    "e3m2": Elem("e3m2", ml_dtypes.float6_e3m2fn, 6, 2, -2, 4, 28.0),
    "e2m1": Elem("e2m1", ml_dtypes.float4_e2m1fn, 4, 1, 0, 2, 6.0),
    "e4m3fnuz": Elem("e4m3fnuz", ml_dtypes.float8_e4m3fnuz, 8, 3, -7, 7, 240.0),
    "e5m2fnuz": Elem("e5m2fnuz", ml_dtypes.float8_e5m2fnuz, 8, 2, -15, 15, 57344.0),
}

#: Element format of each block-float format of kvwire's format table.
MX_ELEMENT = {
    "mxfp8_e4m3": "e4m3fn",
    "mxfp8_e5m2": "e5m2",
    "mxfp6_e2m3": "e2m3",
    "mxfp6_e3m2": "e3m2",
    "mxfp4": "e2m1",
}

#: Integer formats: (bits, symmetric, default group).
INT_FORMATS = {
    "int8_sym_g32": (8, True, 32),
    "int8_asym_g32": (8, False, 32),
    "int4_sym_g32": (4, True, 32),
    "int4_asym_g32": (4, False, 32),
    "int4_sym_g128": (4, True, 128),
}

#: FP8 formats with fp32 scales: (element, default group, None = per tensor).
FP8_FORMATS = {
    "fp8_e4m3": ("e4m3fn", None),
    "fp8_e5m2": ("e5m2", None),
    "fp8_e4m3_g128": ("e4m3fn", 128),
    "fp8_e4m3fnuz": ("e4m3fnuz", None),
    "fp8_e5m2fnuz": ("e5m2fnuz", None),
    "fp8_e4m3fnuz_g128": ("e4m3fnuz", 128),
}


# --- element casts ------------------------------------------------------------------------------------------


def cast_codes(x: F32, e: Elem, saturate: bool = False) -> U8:
    """One RNE cast of float32 ``x`` to ``e`` codes (one per byte), via ml_dtypes.

    Non-saturating FP8 is ml_dtypes' ``astype`` (E4M3FN overflow → NaN, E5M2 overflow → Inf). Saturating
    mode clips finite values and ±Inf to ±max *before* the cast (NaN stays NaN), which is exact: every value
    between max and the overflow threshold rounds to max anyway. FP6/FP4 always saturate; NaN into them
    follows kvwire's documented rule (±max, the NaN's sign kept) instead of ml_dtypes' NaN → ∓0 quirk.
    """
    assert x.dtype == np.float32, "feed ml_dtypes float32, never float64 (double rounding)"
    small = e.bits < 8
    with np.errstate(all="ignore"):
        y = np.clip(x, np.float32(-e.max), np.float32(e.max)) if saturate or small else x
        codes = np.asarray(y).astype(e.dtype).view(np.uint8)
    if small:
        nan = np.isnan(x)
        nan_code = np.where(np.signbit(x), e.sign_bit | e.ones, e.ones).astype(np.uint8)
        codes = np.where(nan, nan_code, codes).astype(np.uint8)
    return np.asarray(codes, dtype=np.uint8)


def decode_codes(codes: U8, e: Elem) -> F32:
    """Values of unpacked ``e`` codes (exact), via ml_dtypes."""
    return np.asarray(np.ascontiguousarray(codes, dtype=np.uint8).view(e.dtype).astype(np.float32), np.float32)


def ulp(y: npt.NDArray[Any], e: Elem) -> npt.NDArray[np.float64]:
    """The spacing of ``e``'s values at magnitude ``|y|`` (subnormals: the spacing of the lowest binade)."""
    a = np.abs(np.asarray(y, dtype=np.float64))
    _, ex = np.frexp(np.where(a > 0, a, 1.0))
    binade = np.maximum(ex.astype(np.int64) - 1, e.emin)
    return np.asarray(np.ldexp(1.0, binade - e.mbits), dtype=np.float64)


# --- packing ------------------------------------------------------------------------------------------------


def pack(codes: npt.NDArray[Any], bits: int) -> U8:
    """Pack codes (any shape, element order) into bytes: 8-bit as is, FP4/INT4 two per byte (element 2i in
    the low nibble), FP6 four per three bytes (little-endian ``c0 | c1 << 6 | c2 << 12 | c3 << 18``)."""
    c = np.ascontiguousarray(codes).reshape(-1).astype(np.uint32)
    if bits == 8:
        return c.astype(np.uint8)
    if bits == 4:
        assert c.size % 2 == 0
        return ((c[0::2] & 0xF) | ((c[1::2] & 0xF) << 4)).astype(np.uint8)
    assert bits == 6 and c.size % 4 == 0
    w = (c[0::4] & 0x3F) | ((c[1::4] & 0x3F) << 6) | ((c[2::4] & 0x3F) << 12) | ((c[3::4] & 0x3F) << 18)
    return np.stack([w & 0xFF, (w >> 8) & 0xFF, (w >> 16) & 0xFF], axis=1).reshape(-1).astype(np.uint8)


def unpack(packed: U8, bits: int, n: int) -> U8:
    """Inverse of :func:`pack`: ``n`` codes, one per byte."""
    p = np.asarray(packed, dtype=np.uint8).reshape(-1).astype(np.uint32)
    if bits == 8:
        out = p
    elif bits == 4:
        out = np.stack([p & 0xF, p >> 4], axis=1).reshape(-1)
    else:
        assert bits == 6
        w = p[0::3] | (p[1::3] << 8) | (p[2::3] << 16)
        out = np.stack([(w >> s) & 0x3F for s in (0, 6, 12, 18)], axis=1).reshape(-1)
    assert out.size == n, (out.size, n)
    return out.astype(np.uint8)


# --- blocks -------------------------------------------------------------------------------------------------


def blocked(x: npt.NDArray[Any], axis: int, block: int) -> npt.NDArray[Any]:
    """View a C-contiguous tensor as ``(outer, len // block, block, inner)`` around ``axis``."""
    axis %= x.ndim
    outer = math.prod(x.shape[:axis])
    inner = math.prod(x.shape[axis + 1 :])
    n = x.shape[axis]
    assert n % block == 0
    return np.ascontiguousarray(x).reshape(outer, n // block, block, inner)


def scales_shape(shape: tuple[int, ...], axis: int, block: int) -> tuple[int, ...]:
    """``shape`` with ``shape[axis] // block`` on the axis (kvwire's documented scale layout)."""
    s = list(shape)
    s[axis % len(s)] //= block
    return tuple(s)


def _block_amax(xb: F32) -> F32:
    """Largest magnitude per block (NaN if the block holds a NaN), shape ``(outer, nb, inner)``."""
    with np.errstate(all="ignore"):
        return np.asarray(np.max(np.abs(xb), axis=2), dtype=np.float32)


def floor_log2(a: npt.NDArray[Any]) -> I64:
    """floor(log2 a) of positive finite values from their exponent (``np.frexp``; subnormals included)."""
    _, ex = np.frexp(np.asarray(a, dtype=np.float32))
    return ex.astype(np.int64) - 1


def e8m0_value(byte: U8) -> F32:
    """2^(byte - 127) (0xFF: NaN), decoded by ml_dtypes."""
    e8m0 = np.ascontiguousarray(byte, dtype=np.uint8).view(ml_dtypes.float8_e8m0fnu)
    return np.asarray(e8m0.astype(np.float32), dtype=np.float32)


# --- OCP MX (§1.2, §7.1, §7.5) ------------------------------------------------------------------------------


def mx_scale_bytes(amax: F32, e: Elem, rule: Literal["floor", "rceil"] = "floor") -> U8:
    """E8M0 scale bytes for block maxima ``amax``.

    FLOOR (OCP "minimally supported" / microxcaling): shared = floor(log2 amax) - emax from the exponent
    bits, amax = 0 taken as 2^-126, clamped below at -127, above 127 → 0xFF. RCEIL (NVIDIA): the f32 descale
    d = amax / max_elem rounded up to a power of two, 2^ceil(log2 d), clamped to [2^-127, 2^127], larger →
    0xFF. A non-finite amax (NaN/Inf in the block) → 0xFF.
    """
    finite = np.isfinite(amax)
    a = np.where(finite, amax, np.float32(0)).astype(np.float32)
    if rule == "floor":
        le = np.where(a == 0, -126, floor_log2(np.where(a == 0, np.float32(1), a)))
        shared = np.maximum(le - e.emax, -127)
    else:
        d = (a / np.float32(e.max)).astype(np.float32)
        m, ex = np.frexp(np.where(d == 0, np.float32(1), d))
        c = np.where(m == 0.5, ex.astype(np.int64) - 1, ex.astype(np.int64))
        shared = np.maximum(np.where(d == 0, -127, c), -127)
    byte = np.where(shared > 127, 255, shared + 127)
    return np.where(finite, byte, 255).astype(np.uint8)


def mx_quantize(x: F32, elem: str, axis: int = -1, rule: Literal["floor", "rceil"] = "floor") -> tuple[U8, U8]:
    """OCP MX quantisation, blocks of 32 along ``axis``: (codes in ``x.shape``, E8M0 bytes in the scale
    shape). Elements are ``sat_RNE(x / 2^shared)`` in float32; a block with NaN/Inf gets 0xFF and every code
    the all-ones magnitude (decoding to NaN through the scale)."""
    e = ELEMENTS[elem]
    xb = blocked(x, axis, 32)
    byte = mx_scale_bytes(_block_amax(xb), e, rule)
    nan = byte == 255
    scale = e8m0_value(np.where(nan, 127, byte).astype(np.uint8))[:, :, None, :]
    with np.errstate(all="ignore"):
        y = (xb / scale).astype(np.float32)
    codes = cast_codes(y, e, saturate=True)
    codes = np.where(nan[:, :, None, :], np.uint8(e.ones), codes).astype(np.uint8)
    return codes.reshape(x.shape), byte.reshape(scales_shape(x.shape, axis, 32))


def mx_dequantize(codes: U8, byte: U8, elem: str, axis: int = -1) -> F32:
    """x̂ = element value · 2^(byte - 127) (NaN for byte 0xFF)."""
    e = ELEMENTS[elem]
    v = blocked(decode_codes(codes, e), axis, 32)
    n = byte.shape[axis % byte.ndim]
    s = e8m0_value(byte).reshape(v.shape[0], n, 1, v.shape[3])
    with np.errstate(over="ignore"):  # RCEIL near FLT_MAX: 4·2^126 = 2^128 is +Inf in float32
        return (v * s).astype(np.float32).reshape(codes.shape)


# --- NVFP4 (§1.3, §7.1-§7.3) --------------------------------------------------------------------------------


def finite_amax(x: F32) -> np.float32:
    """Largest finite magnitude (0 when there is none)."""
    a = np.abs(x[np.isfinite(x)])
    return np.float32(a.max()) if a.size else np.float32(0)


def nvfp4_global(x: F32) -> np.float32:
    """g = amax_finite / (448·6) in float32; 1 when that is below FLT_MIN."""
    g = np.float32(finite_amax(x) / np.float32(448.0 * 6.0))
    return np.float32(1.0) if g < FLT_MIN else g


def nvfp4_quantize(x: F32, axis: int = -1, g: np.float32 | None = None) -> tuple[U8, U8, np.float32]:
    """NVFP4, division form: s = e4m3(clip(amax_b / 6 / g, 2^-6, 448)), q = e2m1(x / (s·g)), with g given or
    from the tensor's finite amax. A block with NaN/Inf gets scale byte 0x7F (NaN) and codes 0x7. Returns
    (codes, E4M3 scale bytes, g)."""
    e2m1, e4m3 = ELEMENTS["e2m1"], ELEMENTS["e4m3fn"]
    g = nvfp4_global(x) if g is None else np.float32(g)
    xb = blocked(x, axis, 16)
    amax = _block_amax(xb)
    fin = np.isfinite(amax)
    with np.errstate(all="ignore"):
        s_f = ((np.where(fin, amax, np.float32(0)) / np.float32(6.0)).astype(np.float32) / g).astype(np.float32)
    s_f = np.clip(s_f, np.float32(2.0**-6), np.float32(448.0))
    sbyte = np.where(fin, cast_codes(s_f, e4m3, saturate=True), 0x7F).astype(np.uint8)
    sg = (decode_codes(np.where(fin, sbyte, 0x38).astype(np.uint8), e4m3) * g).astype(np.float32)
    with np.errstate(all="ignore"):
        y = (xb / sg[:, :, None, :]).astype(np.float32)
    codes = np.where(fin[:, :, None, :], cast_codes(y, e2m1, saturate=True), 0x7).astype(np.uint8)
    return codes.reshape(x.shape), sbyte.reshape(scales_shape(x.shape, axis, 16)), g


def nvfp4_dequantize(codes: U8, sbyte: U8, g: float, axis: int = -1) -> F32:
    """x̂ = q · (s · g): the two scales multiplied first (§7.3)."""
    v = blocked(decode_codes(codes, ELEMENTS["e2m1"]), axis, 16)
    sg = (decode_codes(sbyte, ELEMENTS["e4m3fn"]) * np.float32(g)).astype(np.float32)
    sg = sg.reshape(v.shape[0], v.shape[1], 1, v.shape[3])
    return (v * sg).astype(np.float32).reshape(codes.shape)


# --- FP8 with fp32 scales (§3.1 write path, §7.1) -----------------------------------------------------------


def fp8_scale(amax: npt.NDArray[Any] | np.float32, e: Elem) -> F32:
    """amax / max (``e.scale_max``: 224 for E4M3FNUZ) in float32, an f32 subnormal included (README "Rules
    where the sources are silent"); 1 for amax 0; 2^-149 where the quotient underflows to 0."""
    a = np.asarray(amax, dtype=np.float32)
    s = (a / np.float32(e.scale_max)).astype(np.float32)
    s = np.where(s == 0, np.float32(2.0**-149), s)
    return np.where(a == 0, np.float32(1), s).astype(np.float32)


def fp8_tensor_quantize(x: F32, elem: str, scale: np.float32 | None = None) -> tuple[U8, np.float32]:
    """Per-tensor FP8: scale given or from the finite amax, codes = sat_RNE(x / scale) (true division), ±Inf
    saturating to ±max as satfinite does; NaN stays NaN."""
    e = ELEMENTS[elem]
    scale = np.float32(fp8_scale(finite_amax(x), e)) if scale is None else np.float32(scale)
    with np.errstate(all="ignore"):
        y = (x / scale).astype(np.float32)
    codes = np.where(np.isnan(x), cast_codes(y, e, saturate=False), cast_codes(y, e, saturate=True))
    return codes.astype(np.uint8), scale


def fp8_group_quantize(x: F32, elem: str, axis: int, group: int) -> tuple[U8, F32]:
    """FP8 with an fp32 scale per ``group`` values along ``axis``; a non-finite group gets a NaN scale and
    NaN codes (0x7F; 0x80 in the fnuz formats)."""
    e = ELEMENTS[elem]
    xb = blocked(x, axis, group)
    amax = _block_amax(xb)
    fin = np.isfinite(amax)
    scale = np.where(fin, fp8_scale(np.where(fin, amax, np.float32(0)), e), np.float32(np.nan)).astype(np.float32)
    with np.errstate(all="ignore"):
        y = (xb / np.where(fin, scale, np.float32(1))[:, :, None, :]).astype(np.float32)
    codes = np.where(fin[:, :, None, :], cast_codes(y, e, saturate=True), np.uint8(e.nan_block)).astype(np.uint8)
    return codes.reshape(x.shape), scale.reshape(scales_shape(x.shape, axis, group))


def fp8_dequantize(codes: U8, elem: str, scale: F32 | np.float32, axis: int = -1, group: int = 0) -> F32:
    """x̂ = value · scale (float32); ``group`` 0 for one tensor scale."""
    v = decode_codes(codes, ELEMENTS[elem])
    if group == 0:
        return (v * np.float32(scale)).astype(np.float32)
    vb = blocked(v, axis, group)
    s = np.asarray(scale, dtype=np.float32).reshape(vb.shape[0], vb.shape[1], 1, vb.shape[3])
    return (vb * s).astype(np.float32).reshape(codes.shape)


# --- integer groups (§1.4, §7.4) ----------------------------------------------------------------------------


def to_f16(v: npt.NDArray[Any]) -> npt.NDArray[np.float16]:
    """float32 → float16, RNE, saturating at ±65504 (NaN stays NaN)."""
    with np.errstate(all="ignore"):
        return np.clip(np.asarray(v, dtype=np.float32), np.float32(-65504), np.float32(65504)).astype(np.float16)


def int_qrange(bits: int, symmetric: bool) -> tuple[int, int]:
    """(lowest, highest) code: symmetric ±(2^(b-1) - 1) (-2^(b-1) never produced), asymmetric [0, 2^b - 1]."""
    q = (1 << (bits - 1)) - 1 if symmetric else (1 << bits) - 1
    return (-q if symmetric else 0), q


def int_quantize(
    x: F32, bits: int, symmetric: bool, axis: int, group: int
) -> tuple[I64, npt.NDArray[np.float16], npt.NDArray[np.float16] | None]:
    """Integer groups: scale (and zero = min) rounded to fp16 first, then q = rint(clip((x - zero) / scale))
    in float32 (half to even). Constant groups (scale 0) → codes 0. Non-finite groups → NaN scale (and zero)
    and codes 0. Returns (integer codes in ``x.shape``, fp16 scales, fp16 zeros or None)."""
    lo, hi = int_qrange(bits, symmetric)
    xb = blocked(x, axis, group)
    with np.errstate(all="ignore"):
        amax = _block_amax(xb)
        fin = np.isfinite(amax)
        if symmetric:
            scale16 = to_f16((amax / np.float32(hi)).astype(np.float32))
            zero16 = np.zeros_like(scale16)
        else:
            mn = np.min(xb, axis=2).astype(np.float32)
            mx = np.max(xb, axis=2).astype(np.float32)
            scale16 = to_f16(((mx - mn) / np.float32(hi)).astype(np.float32))
            zero16 = to_f16(mn)
        scale16 = np.where(fin, scale16, np.float16(np.nan))
        zero16 = np.where(fin, zero16, np.float16(np.nan if not symmetric else 0))
        s = scale16.astype(np.float32)[:, :, None, :]
        z = zero16.astype(np.float32)[:, :, None, :]
        v = ((xb / s) if symmetric else ((xb - z).astype(np.float32) / s)).astype(np.float32)
        v = np.clip(v, np.float32(lo), np.float32(hi))
        dead = (s == 0) | np.isnan(s) | np.isnan(v)
        q = np.rint(np.where(dead, np.float32(0), v)).astype(np.int64)
    zeros = None if symmetric else zero16.reshape(scales_shape(x.shape, axis, group))
    return q.reshape(x.shape), scale16.reshape(scales_shape(x.shape, axis, group)), zeros


def int_code_bytes(q: I64, bits: int) -> U8:
    """Integer codes as stored: two's complement (symmetric) or unsigned, in ``bits`` bits, then packed."""
    return pack((q & ((1 << bits) - 1)).astype(np.uint8), bits)


def int_dequantize(
    q: I64,
    scale16: npt.NDArray[np.float16],
    zero16: npt.NDArray[np.float16] | None,
    axis: int,
    group: int,
) -> F32:
    """x̂ = q · scale + zero in float32 (two roundings, no fused multiply-add)."""
    qb = blocked(q.astype(np.float32), axis, group)
    shape = (qb.shape[0], qb.shape[1], 1, qb.shape[3])
    s = scale16.astype(np.float32).reshape(shape)
    out = (qb * s).astype(np.float32)
    if zero16 is not None:
        out = (out + zero16.astype(np.float32).reshape(shape)).astype(np.float32)
    return out.reshape(q.shape)


def int_unpack(codes: U8, bits: int, symmetric: bool, n: int) -> I64:
    """Stored integer codes back to integers (sign-extended when symmetric)."""
    u = unpack(codes, bits, n).astype(np.int64)
    if symmetric:
        u = np.where(u >= (1 << (bits - 1)), u - (1 << bits), u)
    return u


# --- accuracy (§5) ------------------------------------------------------------------------------------------


def error_metrics(x: npt.NDArray[Any], x_hat: npt.NDArray[Any]) -> dict[str, float]:
    """SQNR (10·log10(Σx²/Σ(x - x̂)²)), cosine, MSE and max |x - x̂| over the pairs where both are finite, in
    float64, plus the counts of compared and left-out pairs."""
    a = np.asarray(x, dtype=np.float32).astype(np.float64).reshape(-1)
    b = np.asarray(x_hat, dtype=np.float32).astype(np.float64).reshape(-1)
    keep = np.isfinite(a) & np.isfinite(b)
    a, b = a[keep], b[keep]
    d = a - b
    sx, se, sxy, syy = float(a @ a), float(d @ d), float(a @ b), float(b @ b)
    sqnr = math.inf if se == 0 else (-math.inf if sx == 0 else 10 * math.log10(sx / se))
    cos = sxy / math.sqrt(sx * syy) if sx > 0 and syy > 0 else (1.0 if sx == syy == 0 else 0.0)
    return {
        "sqnr_db": sqnr,
        "cosine": cos,
        "mse": se / a.size if a.size else 0.0,
        "max_abs": float(np.max(np.abs(d))) if a.size else 0.0,
        "count": float(a.size),
        "nonfinite": float(keep.size - a.size),
    }


# --- one entry point per format name ------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class RefQuant:
    """What the reference expects ``kvwire.quant.quantize`` to return, plus the decoded values."""

    codes: U8  # packed bytes, 1-D
    scales: npt.NDArray[Any] | None
    zeros: npt.NDArray[np.float16] | None
    tensor_scale: float | None
    group: int
    bits: int
    x_hat: F32


def quantize(
    x: F32,
    fmt: str,
    axis: int = -1,
    group: int | None = None,
    rule: Literal["floor", "rceil"] = "floor",
    tensor_scale: float | None = None,
) -> RefQuant:
    """Quantise float32 ``x`` in format ``fmt`` (a name of kvwire's format table) along ``axis``; ``group``
    overrides the group of fp8 and integer formats; ``tensor_scale`` gives NVFP4's g or a per-tensor fp8
    scale instead of one from the data."""
    given = None if tensor_scale is None else np.float32(tensor_scale)
    assert x.dtype == np.float32
    axis %= x.ndim
    if fmt in MX_ELEMENT:
        el = MX_ELEMENT[fmt]
        c, s = mx_quantize(x, el, axis, rule)
        bits = ELEMENTS[el].bits
        return RefQuant(pack(c, bits), s, None, None, 32, bits, mx_dequantize(c, s, el, axis))
    if fmt == "nvfp4":
        c, sb, g = nvfp4_quantize(x, axis, given)
        return RefQuant(pack(c, 4), sb, None, float(g), 16, 4, nvfp4_dequantize(c, sb, float(g), axis))
    if fmt in FP8_FORMATS:
        el, default = FP8_FORMATS[fmt]
        grp = default if group is None else group
        if grp is None:
            c, t = fp8_tensor_quantize(x, el, given)
            return RefQuant(pack(c, 8), None, None, float(t), 0, 8, fp8_dequantize(c, el, t))
        c, sf = fp8_group_quantize(x, el, axis, grp)
        return RefQuant(pack(c, 8), sf, None, None, grp, 8, fp8_dequantize(c, el, sf, axis, grp))
    bits, sym, default = INT_FORMATS[fmt]
    grp = default if group is None else group
    q, s16, z16 = int_quantize(x, bits, sym, axis, grp)
    return RefQuant(int_code_bytes(q, bits), s16, z16, None, grp, bits, int_dequantize(q, s16, z16, axis, grp))
