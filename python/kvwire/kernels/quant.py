"""KV-cache quantisation: bit-exact FP8 (OCP and AMD fnuz)/FP6/FP4 element codecs, OCP MX and NVFP4 block
formats, FP8 with tensor or group scales, and INT8/INT4 group quantisation — Rust kernels on numpy arrays (no
copies of the input, the GIL released, every core used for large inputs with output identical to one thread).

>>> import numpy as np
>>> from kvwire import quant
>>> x = np.random.default_rng(0).standard_normal((64, 128), dtype=np.float32)
>>> q = quant.quantize(x, "mxfp4")            # blocks of 32 along the last axis
>>> q.codes.nbytes, q.scales.shape              # two FP4 codes per byte, one E8M0 byte per block
(4096, (64, 4))
>>> x_hat = quant.dequantize(q)
>>> round(quant.error(x, x_hat)["sqnr_db"])
19
>>> quant.cast(np.array([448.0, 464.0, 500.0], dtype=np.float32), "e4m3fn").tolist()
[126, 126, 127]

Inputs: ``float32``, ``float16`` or ``bfloat16`` (``ml_dtypes.bfloat16``) arrays, C-contiguous, any shape.
Blocks run along ``axis``: with keys of shape ``(tokens, channels)``, ``axis=0`` gives KIVI's per-channel
groups of tokens and ``axis=-1`` per-token groups of channels. Scales are laid out as the input's shape with
the axis divided by the block size. Codes keep the input's shape for 8-bit formats; sub-byte codes are packed
in element order (FP4/INT4: element 2i in the low nibble; FP6: four codes per three bytes, little-endian).

Exact rules (NaN/Inf, saturation, scale rules, rounding) are documented per format in
``rust/kvwire-core/src/quant/minifloat.rs`` and ``schemes.rs`` and summarised in
``docs/reference/kv-formats.md``.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Literal

import numpy as np
import numpy.typing as npt
import polars as pl

import kvwire._core as _core
from kvwire.errors import QuantError
from kvwire.kernels import _args
from kvwire.presets import catalog

#: Element formats of :func:`cast` / :func:`decode`, with their code width in bits.
ELEMENTS = {"e4m3fn": 8, "e5m2": 8, "e4m3fnuz": 8, "e5m2fnuz": 8, "e3m2": 6, "e2m3": 6, "e2m1": 4}

ScaleRule = Literal["floor", "rceil"]


@dataclasses.dataclass(frozen=True)
class QuantizedTensor:
    """A quantised tensor: packed codes and scales, plus what is needed to decode them.

    Attributes:
        format: format name (a row of :func:`formats`).
        shape: shape of the original tensor.
        axis: quantisation axis (non-negative).
        codes: ``uint8`` codes (the input's shape for 8-bit formats, 1-D packed bytes otherwise).
        scales: per-block scales, shape ``shape`` with ``shape[axis] // group_size`` on the axis: ``uint8``
            E8M0 bytes (MX) or E4M3 bytes (NVFP4), ``float32`` (fp8 groups), ``float16`` (integer groups);
            ``None`` for per-tensor fp8.
        zeros: ``float16`` zero points (asymmetric integer groups), else ``None``.
        tensor_scale: the fp32 per-tensor scale (per-tensor fp8, NVFP4), else ``None``.
        group_size: values per block scale along the axis (0 for per-tensor).
        scale_rule: MX scale rule used (``"floor"`` or ``"rceil"``).
    """

    format: str
    shape: tuple[int, ...]
    axis: int
    codes: npt.NDArray[np.uint8]
    scales: npt.NDArray[Any] | None
    zeros: npt.NDArray[np.float16] | None
    tensor_scale: float | None
    group_size: int
    scale_rule: str = "floor"

    @property
    def nbytes(self) -> int:
        """Bytes of codes, scales, zero points and tensor scale."""
        n = self.codes.nbytes
        n += 0 if self.scales is None else self.scales.nbytes
        n += 0 if self.zeros is None else self.zeros.nbytes
        return n + (4 if self.tensor_scale is not None else 0)

    def dequantize(self, *, threads: int | None = None) -> npt.NDArray[np.float32]:
        """Decode to float32 (see :func:`dequantize`)."""
        return dequantize(self, threads=threads)


def _dtype_tag(x: np.ndarray) -> str:
    if x.dtype == np.float32:
        return "f32"
    if x.dtype == np.float16:
        return "f16"
    if x.dtype.name == "bfloat16" and x.dtype.itemsize == 2:
        return "bf16"
    raise QuantError(f"x: expected a float32, float16 or bfloat16 (ml_dtypes) array, got dtype {x.dtype}", "x")


def _input(x: Any) -> tuple[np.ndarray, str]:
    if not isinstance(x, np.ndarray):
        raise QuantError(f"x: expected a numpy array, got {type(x).__name__}", "x")
    tag = _dtype_tag(x)
    if not x.flags.c_contiguous:
        raise QuantError("x: must be C-contiguous (use np.ascontiguousarray(x) to copy it)", "x")
    if not x.flags.aligned:
        raise QuantError(f"x: its data is not aligned to its {x.itemsize}-byte elements (np.array(x) copies it)", "x")
    if x.ndim == 0 or x.size == 0:
        raise QuantError(f"x: needs at least one value in at least one dimension, got shape {x.shape}", "x")
    raw = x if tag == "f32" else x.view(np.uint16)
    return raw, tag


def _axis(axis: int, ndim: int) -> int:
    if not isinstance(axis, int | np.integer) or isinstance(axis, bool):
        raise QuantError(f"axis: expected an integer, got {axis!r}", "axis")
    if not -ndim <= axis < ndim:
        raise QuantError(f"axis: {axis} is out of range for {ndim} dimensions", "axis")
    return int(axis) % ndim


def _format_name(fmt: str) -> str:
    _args.text(fmt, "format", QuantError)
    cat = catalog()
    name = cat["format_aliases"].get(fmt, fmt)
    if name not in cat["formats"] or name == "none":
        known = ", ".join(k for k in cat["formats"] if k != "none")
        raise QuantError(f"format: unknown quantisation format {fmt!r} (known: {known})", "format")
    return str(name)


def quantize(
    x: npt.NDArray[Any],
    fmt: str,
    axis: int = -1,
    *,
    group_size: int | None = None,
    scale_rule: ScaleRule = "floor",
    threads: int | None = None,
    tensor_scale: float | None = None,
) -> QuantizedTensor:
    """Quantise ``x`` to ``fmt`` with blocks along ``axis``.

    Args:
        x: float32, float16 or bfloat16 array (C-contiguous, not copied).
        fmt: a format of :func:`formats` (``fp8_e4m3``, ``mxfp4``, ``nvfp4``, ``int4_asym_g32``, ...).
        axis: the axis blocks run along; its length must be a multiple of the block size.
        group_size: override the group of fp8 and integer formats (e.g. 64, or ``x.shape[axis]`` for one
            scale per vector such as per token-head).
        scale_rule: MX shared-exponent rule, ``"floor"`` (OCP spec, default) or ``"rceil"`` (NVIDIA).
        threads: worker threads (default: all cores for ≥ 1 Mi values).
        tensor_scale: a given fp32 tensor scale for the formats that have one — ``nvfp4``'s g (by default
            amax / (448 · 6)) and the per-tensor fp8 formats' scale (by default amax / max) — such as a
            calibrated (static) scale, as engines quantise with. The input is then read once instead of
            twice (no pass for its largest magnitude); values beyond the range the scale covers saturate.
            The result's ``tensor_scale`` is this value as float32. NVFP4 needs a normal float32 (≥ 2⁻¹²⁶).

    Raises:
        QuantError: wrong dtype, non-contiguous input, an axis that the block does not divide, a
            ``tensor_scale`` for a format without one, ...

    Example:
        >>> import numpy as np
        >>> from kvwire import quant
        >>> x = np.linspace(-3, 3, 64, dtype=np.float32).reshape(4, 16)
        >>> quant.quantize(x, "nvfp4").tensor_scale == float(np.float32(3.0 / 2688))
        True
        >>> q = quant.quantize(x, "nvfp4", tensor_scale=0.01)  # a calibrated scale: one pass
        >>> q.tensor_scale == float(np.float32(0.01)), float(np.abs(quant.dequantize(q) - x).max()) < 0.5
        (True, True)
    """
    raw, tag = _input(x)
    ax = _axis(axis, x.ndim)
    name = _format_name(fmt)
    _scale_rule(scale_rule)
    if group_size is not None:
        group_size = _args.whole(group_size, "group_size", 1, x.shape[ax], QuantError)
    threads = _args.threads(threads, QuantError)
    if tensor_scale is not None:
        tensor_scale = _args.scale(tensor_scale, "tensor_scale", QuantError)
    out = _core.quantize(raw, tag, list(x.shape), ax, name, group_size, scale_rule, threads, tensor_scale)
    group = int(out["group"])
    codes = out["codes"]
    if codes.size == x.size:
        codes = codes.reshape(x.shape)
    scales = out["scales"]
    if scales is not None:
        if scales.dtype == np.uint16:
            scales = scales.view(np.float16)
        scales = scales.reshape(_scales_shape(x.shape, ax, group))
    zeros = out["zeros"]
    if zeros is not None:
        zeros = zeros.view(np.float16).reshape(_scales_shape(x.shape, ax, group))
    return QuantizedTensor(name, tuple(x.shape), ax, codes, scales, zeros, out["tensor_scale"], group, scale_rule)


def _scale_rule(rule: Any) -> str:
    if _args.text(rule, "scale_rule", QuantError) not in ("floor", "rceil"):
        raise QuantError(f'scale_rule: expected "floor" or "rceil", got {rule!r}', "scale_rule")
    return str(rule)


#: Codes per packing unit and bytes per unit, by code width (FP4: two codes a byte; FP6: four in three bytes).
_PACK_UNIT = {8: (1, 1), 6: (4, 3), 4: (2, 1)}


def _packed_bytes(n: int, bits: int) -> int | None:
    """Bytes that ``n`` codes of ``bits`` bits take, packed; ``None`` if ``n`` is not a whole number of
    packing units (an odd count of FP4 codes)."""
    per, nbytes = _PACK_UNIT[bits]
    return None if n % per else n // per * nbytes


def _check_tensor(q: Any) -> None:
    """Refuse a :class:`QuantizedTensor` whose fields disagree (edited after :func:`quantize`, or built by
    hand): every field is checked against the format and the shape before anything is allocated, so an
    edited ``shape`` can neither allocate its size nor decode the codes in another arrangement."""
    if not isinstance(q, QuantizedTensor):
        raise QuantError(f"q: expected a QuantizedTensor (from quant.quantize), got {type(q).__name__}", "q")
    name = _format_name(q.format)
    shape = _args.shape(q.shape, "shape", QuantError)
    if not shape or 0 in shape:
        raise QuantError(f"shape: needs at least one value in at least one dimension, got {shape}", "shape")
    if not isinstance(q.axis, int | np.integer) or isinstance(q.axis, bool) or not 0 <= q.axis < len(shape):
        raise QuantError(f"axis: expected an axis from 0 to {len(shape) - 1} of shape {shape}, got {q.axis!r}", "axis")
    _scale_rule(q.scale_rule)
    info = catalog()["formats"][name]
    bits, block = int(info["element_bits"]), info["block"]
    if not isinstance(q.codes, np.ndarray) or q.codes.dtype != np.uint8:
        what = str(q.codes.dtype) if isinstance(q.codes, np.ndarray) else type(q.codes).__name__
        raise QuantError(f"codes: expected uint8 codes, got {what}", "codes")
    n = _args.size(shape)
    want = _packed_bytes(n, bits)
    if want is None or q.codes.size != want:
        takes = f"take {want:,} bytes" if want is not None else f"are not a whole number of {bits}-bit packing units"
        raise QuantError(f"codes: {name} codes of shape {shape} ({n:,} values) {takes}, got {q.codes.size:,}", "codes")
    layout = shape if bits == 8 else (want,)
    if q.codes.shape != layout:
        raise QuantError(f"codes: {name} codes of shape {shape} have shape {layout}, got {q.codes.shape}", "codes")
    mx, nv, integer = name.startswith("mx"), name == "nvfp4", name.startswith("int")
    group = q.group_size
    if not isinstance(group, int | np.integer) or isinstance(group, bool):
        raise QuantError(f"group_size: expected a whole number, got {group!r}", "group_size")
    # fp8 formats: group_size 0 is one tensor scale, a group (the format's or an override) fp32 scales.
    per_tensor = not (mx or nv or integer) and group == 0
    fixed = int(block) if (mx or nv) else None
    if fixed is not None and group != fixed:
        raise QuantError(f"group_size: {name} has group_size {fixed}, got {group}", "group_size")
    if fixed is None and not per_tensor and not (1 <= group <= shape[q.axis] and shape[q.axis] % group == 0):
        raise QuantError(
            f"group_size: {group} does not divide the axis ({shape[q.axis]} values along axis {q.axis})", "group_size"
        )
    want_ts = per_tensor or nv
    ts = q.tensor_scale
    if want_ts:
        if ts is None:
            raise QuantError(f"tensor_scale: {name} needs its tensor scale", "tensor_scale")
        if not isinstance(ts, float | int | np.floating | np.integer) or isinstance(ts, bool | np.bool_):
            raise QuantError(f"tensor_scale: expected a number, got {type(ts).__name__}", "tensor_scale")
        if not (math.isfinite(float(ts)) and float(ts) > 0):
            raise QuantError(f"tensor_scale: must be a finite number > 0, got {ts!r}", "tensor_scale")
    elif ts is not None:
        raise QuantError(f"tensor_scale: {name} has no tensor scale, got {ts!r}", "tensor_scale")
    scales_kind = None if per_tensor else "uint8" if (mx or nv) else "float16" if integer else "float32"
    parts = (("scales", q.scales, scales_kind), ("zeros", q.zeros, "float16" if "asym" in name else None))
    for part_name, part, kind in parts:
        if kind is None:
            if part is not None:
                raise QuantError(f"{part_name}: {name} has no {part_name}, got {type(part).__name__}", part_name)
            continue
        if part is None:
            raise QuantError(f"{part_name}: {name} needs its {part_name} ({kind})", part_name)
        if not isinstance(part, np.ndarray) or part.dtype.name != kind:
            got = str(part.dtype) if isinstance(part, np.ndarray) else type(part).__name__
            raise QuantError(f"{part_name}: expected a {kind} array, got {got}", part_name)
        expect = _scales_shape(shape, q.axis, group)
        if part.shape != expect:
            raise QuantError(
                f"{part_name}: {name} of shape {shape} along axis {q.axis} has {part_name} of shape {expect} "
                f"(one per {group} values), got {part.shape}",
                part_name,
            )


def _scales_shape(shape: tuple[int, ...], axis: int, group: int) -> tuple[int, ...]:
    s = list(shape)
    s[axis] //= group
    return tuple(s)


def dequantize(
    q: QuantizedTensor, *, out: npt.NDArray[np.float32] | None = None, threads: int | None = None
) -> npt.NDArray[np.float32]:
    """Decode ``q`` to float32 (into ``out`` if given: C-contiguous float32 of ``q.shape``).

    Raises:
        QuantError: ``q`` is not a :class:`QuantizedTensor`, or its fields disagree (codes, scales, zero
            points, tensor scale, group size or axis that do not fit its format and shape: a tensor edited
            after :func:`quantize`), checked before anything is allocated; ``path`` names the field.
    """
    _check_tensor(q)
    if out is None:
        out = _args.allocate(tuple(q.shape), np.float32, "shape", "the decoded tensor")
    else:
        _args.array(out, "out", np.float32, QuantError)
        if out.shape != tuple(q.shape):
            raise QuantError(f"out: expected shape {tuple(q.shape)}, got {out.shape}", "out")
    threads = _args.threads(threads, QuantError)
    scales = q.scales
    if scales is not None and scales.dtype == np.float16:
        scales = scales.view(np.uint16)
    zeros = None if q.zeros is None else q.zeros.view(np.uint16)
    _core.dequantize(
        np.ascontiguousarray(q.codes),
        None if scales is None else np.ascontiguousarray(scales),
        None if zeros is None else np.ascontiguousarray(zeros),
        None if q.tensor_scale is None else float(q.tensor_scale),
        int(q.group_size),
        list(q.shape),
        int(q.axis),
        _format_name(q.format),
        out,
        q.scale_rule,
        threads,
    )
    return out


def _element(element: str) -> int:
    if _args.text(element, "element", QuantError) not in ELEMENTS:
        raise QuantError(f"element: unknown element format {element!r} (known: {', '.join(ELEMENTS)})", "element")
    return ELEMENTS[element]


def cast(
    x: npt.NDArray[Any],
    element: str,
    *,
    saturate: bool = False,
    out: npt.NDArray[np.uint8] | None = None,
    threads: int | None = None,
) -> npt.NDArray[np.uint8]:
    """Cast ``x`` element-wise to ``element`` codes (``e4m3fn``, ``e5m2``, AMD's ``e4m3fnuz`` and
    ``e5m2fnuz``, ``e3m2``, ``e2m3``, ``e2m1``), one round-to-nearest-even step, no scale. ``saturate=True``
    sends overflow and ±Inf to ±max (FP6/FP4 always saturate). Bit-exact with ``ml_dtypes`` ``astype``
    (non-saturating) except NaN into FP6/FP4, which kvwire maps to ±max. The fnuz formats have one NaN
    (0x80, what NaN, ±Inf and non-saturating overflow give) and no -0. 8-bit codes keep ``x``'s shape;
    FP6/FP4 codes are packed (1-D).

    >>> import numpy as np
    >>> cast(np.array([240.0, 248.0, -0.0, np.inf], np.float32), "e4m3fnuz").tolist()
    [127, 128, 0, 128]
    """
    raw, tag = _input(x)
    bits = _element(element)
    saturate = _args.flag(saturate, "saturate", QuantError)
    unit = {8: 1, 6: 4, 4: 2}[bits]
    if x.size % unit:
        raise QuantError(f"x: {bits}-bit codes pack {unit} per unit; {x.size} values do not", "x")
    size = x.size // unit * {8: 1, 6: 3, 4: 1}[bits]
    if out is None:
        out = np.empty(x.shape if bits == 8 else (size,), dtype=np.uint8)
    else:
        _args.array(out, "out", np.uint8, QuantError)
        if out.size != size:
            raise QuantError(f"out: expected {size} bytes, got {out.size}", "out")
    _core.cast(raw, tag, element, saturate, out, _args.threads(threads, QuantError))
    return out


def decode(
    codes: npt.NDArray[np.uint8],
    element: str,
    shape: tuple[int, ...] | None = None,
    *,
    out: npt.NDArray[np.float32] | None = None,
    threads: int | None = None,
) -> npt.NDArray[np.float32]:
    """Decode packed ``element`` codes to float32 (exact). ``shape`` is required for packed sub-byte codes
    (it defaults to ``codes.shape`` for 8-bit codes).

    Raises:
        QuantError: an unknown element, codes that are not a uint8 array, or a ``shape`` (whole numbers ≥ 0)
            whose values do not take exactly ``codes.size`` bytes — checked before the output is allocated.

    >>> import numpy as np
    >>> decode(np.array([0x38, 0xC0], np.uint8), "e4m3fn").tolist()
    [1.0, -2.0]
    >>> decode(np.array([0x38], np.uint8), "e4m3fn", shape=(2, 3))
    Traceback (most recent call last):
    ...
    kvwire.errors.QuantError: shape: (2, 3) holds 6 values, whose 8-bit codes take 6 bytes; codes has 1
    """
    bits = _element(element)
    if not isinstance(codes, np.ndarray) or codes.dtype != np.uint8:
        got = codes.dtype if isinstance(codes, np.ndarray) else type(codes).__name__
        raise QuantError(f"codes: expected a uint8 numpy array, got {got}", "codes")
    if shape is None:
        if bits != 8:
            raise QuantError(f"shape: required to decode packed {bits}-bit codes", "shape")
        shape = codes.shape
    shape = _args.shape(shape, "shape", QuantError)
    n = _args.size(shape)
    want = _packed_bytes(n, bits)
    if want is None:
        per = _PACK_UNIT[bits][0]
        raise QuantError(f"shape: {shape} holds {n:,} values; {bits}-bit codes pack {per} per unit", "shape")
    if want != codes.size:
        raise QuantError(
            f"shape: {shape} holds {n:,} values, whose {bits}-bit codes take {want:,} bytes; codes has {codes.size:,}",
            "shape",
        )
    if out is None:
        out = np.empty(shape, dtype=np.float32)
    else:
        _args.array(out, "out", np.float32, QuantError)
        if out.shape != tuple(shape):
            raise QuantError(f"out: expected shape {tuple(shape)}, got {out.shape}", "out")
    _core.decode(np.ascontiguousarray(codes), element, out, _args.threads(threads, QuantError))
    return out


def _real_values(v: Any, name: str) -> npt.NDArray[np.float32]:
    """``v`` (an array or a nested list of real numbers) as C-contiguous float32; strings, objects, bools and
    complex numbers are refused, and so are finite values beyond float32's range (which the cast would turn
    into ±Inf and :func:`error` would then leave out as non-finite)."""
    try:
        a = v if isinstance(v, np.ndarray) else np.asarray(v)
    except (TypeError, ValueError) as e:  # ragged lists
        raise QuantError(f"{name}: expected an array of real numbers, got {type(v).__name__} ({e})", name) from None
    if a.dtype.name != "bfloat16" and a.dtype.kind not in "fiu":
        what = f"{type(v).__name__}" if a.dtype.kind == "O" else f"{a.dtype} values"
        raise QuantError(f"{name}: expected an array of real numbers (float or integer), got {what}", name)
    with np.errstate(over="ignore", invalid="ignore"):
        f = np.ascontiguousarray(a, dtype=np.float32)
    if a.dtype.kind == "f" and a.dtype.itemsize > 4:
        lost = np.isinf(f) & np.isfinite(a)
        if lost.any():
            i = int(np.flatnonzero(lost)[0])
            raise QuantError(
                f"{name}: value {a.reshape(-1)[i]:.6g} at flat index {i} is beyond float32's range (±3.4e38)", name
            )
    return f


def error(x: npt.NDArray[Any], x_hat: npt.NDArray[Any]) -> dict[str, float | None]:
    """Accuracy of ``x_hat`` against ``x``: ``sqnr_db`` (10·log10(Σx²/Σ(x-x̂)²); ``inf`` when exact),
    ``cosine``, ``mse``, ``max_abs``, and the counts of compared (``count``) and non-finite (left out,
    ``nonfinite``) pairs. With no finite pair to compare (``count`` 0: empty, or every pair holds a NaN or an
    Inf) the four metrics are ``None``, not a perfect score. ``x`` and ``x_hat`` are arrays (or nested lists)
    of real numbers of the same shape, compared as float32.

    Raises:
        QuantError: an argument that is not real numbers (strings, objects, bools, complex), holds a finite
            value beyond float32's range, or shapes that differ; ``path`` is ``"x"`` or ``"x_hat"``.

    >>> import numpy as np
    >>> error(np.array([np.nan, 1.0], np.float32), np.array([1.0, np.inf], np.float32))["sqnr_db"] is None
    True
    """
    a = _real_values(x, "x")
    b = _real_values(x_hat, "x_hat")
    if a.shape != b.shape:
        raise QuantError(f"x_hat: shape {b.shape} differs from x's {a.shape}", "x_hat")
    out: dict[str, float | None] = dict(_core.error(a, b))
    if out["count"] == 0:
        out.update(sqnr_db=None, cosine=None, mse=None, max_abs=None)
    return out


def formats() -> pl.DataFrame:
    """The format table: name, element bits, block, scale type, bits per value (block scales included),
    ratio versus bf16, and description. The simulator's hand-off compression uses the same table."""
    rows = [{"name": k, **v} for k, v in catalog()["formats"].items()]
    return pl.DataFrame(rows).select(
        "name",
        "element_bits",
        "block",
        "scale_type",
        "bits_per_value",
        "ratio_vs_bf16",
        "tensor_scale_bits",
        "description",
    )


def isa() -> str:
    """The instruction-set level the kernels use here (``baseline``, ``avx2`` or ``avx512``)."""
    return str(_core.isa())


__all__ = [
    "ELEMENTS",
    "QuantizedTensor",
    "cast",
    "decode",
    "dequantize",
    "error",
    "formats",
    "isa",
    "quantize",
]
