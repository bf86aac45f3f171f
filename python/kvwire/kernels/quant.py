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

    Raises:
        QuantError: wrong dtype, non-contiguous input, an axis that the block does not divide, ...
    """
    raw, tag = _input(x)
    ax = _axis(axis, x.ndim)
    name = _format_name(fmt)
    if group_size is not None:
        group_size = _args.whole(group_size, "group_size", 1, x.shape[ax], QuantError)
    threads = _args.threads(threads, QuantError)
    out = _core.quantize(raw, tag, list(x.shape), ax, name, group_size, scale_rule, threads)
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


def _scales_shape(shape: tuple[int, ...], axis: int, group: int) -> tuple[int, ...]:
    s = list(shape)
    s[axis] //= group
    return tuple(s)


def dequantize(
    q: QuantizedTensor, *, out: npt.NDArray[np.float32] | None = None, threads: int | None = None
) -> npt.NDArray[np.float32]:
    """Decode ``q`` to float32 (into ``out`` if given: C-contiguous float32 of ``q.shape``)."""
    if out is None:
        out = np.empty(q.shape, dtype=np.float32)
    else:
        _args.array(out, "out", np.float32, QuantError)
        if out.shape != q.shape:
            raise QuantError(f"out: expected shape {q.shape}, got {out.shape}", "out")
    threads = _args.threads(threads, QuantError)
    if not isinstance(q.codes, np.ndarray) or q.codes.dtype != np.uint8:
        what = str(q.codes.dtype) if isinstance(q.codes, np.ndarray) else type(q.codes).__name__
        raise QuantError(f"codes: expected uint8 codes, got {what}", "codes")
    parts: tuple[tuple[str, Any, tuple[str, ...]], ...] = (
        ("scales", q.scales, ("uint8", "float32", "float16")),
        ("zeros", q.zeros, ("float16",)),
    )
    for name, part, ok in parts:
        if part is not None and (not isinstance(part, np.ndarray) or part.dtype.name not in ok):
            kind = str(part.dtype) if isinstance(part, np.ndarray) else type(part).__name__
            raise QuantError(f"{name}: expected a {' or '.join(ok)} array, got {kind}", name)
    scales = q.scales
    if scales is not None and scales.dtype == np.float16:
        scales = scales.view(np.uint16)
    zeros = None if q.zeros is None else q.zeros.view(np.uint16)
    _core.dequantize(
        np.ascontiguousarray(q.codes),
        None if scales is None else np.ascontiguousarray(scales),
        None if zeros is None else np.ascontiguousarray(zeros),
        q.tensor_scale,
        q.group_size,
        list(q.shape),
        q.axis,
        q.format,
        out,
        q.scale_rule,
        threads,
    )
    return out


def _element(element: str) -> int:
    if element not in ELEMENTS:
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
    (it defaults to ``codes.shape`` for 8-bit codes)."""
    bits = _element(element)
    if not isinstance(codes, np.ndarray) or codes.dtype != np.uint8:
        got = codes.dtype if isinstance(codes, np.ndarray) else type(codes).__name__
        raise QuantError(f"codes: expected a uint8 numpy array, got {got}", "codes")
    if shape is None:
        if bits != 8:
            raise QuantError(f"shape: required to decode packed {bits}-bit codes", "shape")
        shape = codes.shape
    if out is None:
        out = np.empty(shape, dtype=np.float32)
    else:
        _args.array(out, "out", np.float32, QuantError)
        if out.shape != tuple(shape):
            raise QuantError(f"out: expected shape {tuple(shape)}, got {out.shape}", "out")
    _core.decode(np.ascontiguousarray(codes), element, out, _args.threads(threads, QuantError))
    return out


def error(x: npt.NDArray[Any], x_hat: npt.NDArray[Any]) -> dict[str, float | None]:
    """Accuracy of ``x_hat`` against ``x``: ``sqnr_db`` (10·log10(Σx²/Σ(x-x̂)²); ``inf`` when exact),
    ``cosine``, ``mse``, ``max_abs``, and the counts of compared (``count``) and non-finite (left out,
    ``nonfinite``) pairs. With no finite pair to compare (``count`` 0: empty, or every pair holds a NaN or an
    Inf) the four metrics are ``None``, not a perfect score.

    >>> import numpy as np
    >>> error(np.array([np.nan, 1.0], np.float32), np.array([1.0, np.inf], np.float32))["sqnr_db"] is None
    True
    """
    a = np.ascontiguousarray(x, dtype=np.float32)
    b = np.ascontiguousarray(x_hat, dtype=np.float32)
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
