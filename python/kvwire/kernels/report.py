"""``kvwire quant-report``: every format on one KV tensor — size, ratio, accuracy and measured throughput."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import polars as pl

from kvwire.errors import QuantError, ResourceError
from kvwire.kernels import _args, quant

#: Most timing repetitions :func:`report` runs per format.
MAX_REPEAT = 1000


def synthetic_kv(tokens: int = 4096, heads: int = 8, head_dim: int = 128, seed: int = 0) -> npt.NDArray[np.float32]:
    """A seeded stand-in for a K cache: standard normal values of shape ``(tokens, heads, head_dim)`` with
    four outlier channels scaled by 20 (the channel outliers that motivate per-channel key quantisation)."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((tokens, heads, head_dim), dtype=np.float32)
    x[:, :, [3, 17, 64, 101]] *= 20.0
    return x


def _npy_header(p: Path) -> tuple[tuple[int, ...], np.dtype[Any]]:
    """The shape and dtype a ``.npy`` file's header declares, checked against the file's size: a header that
    claims more (or fewer) values than the file holds is refused before numpy allocates for it."""
    try:
        with p.open("rb") as f:
            version = np.lib.format.read_magic(f)
            if version == (1, 0):
                shape, _, dtype = np.lib.format.read_array_header_1_0(f)
            else:
                shape, _, dtype = np.lib.format.read_array_header_2_0(f)
            offset = f.tell()
        total = p.stat().st_size
    except (OSError, ValueError, EOFError, SyntaxError, TypeError) as e:
        raise QuantError(f"{p}: cannot read .npy file: {e}", str(p)) from None
    if dtype.hasobject:
        raise QuantError(f"{p}: expected a float32, float16 or bfloat16 array, got {dtype} (objects)", str(p))
    if not all(isinstance(d, int) and d >= 0 for d in shape):
        raise QuantError(f"{p}: cannot read .npy file: its header declares shape {shape!r}", str(p))
    need = _args.size(tuple(shape)) * dtype.itemsize
    if need != total - offset:
        raise QuantError(
            f"{p}: cannot read .npy file: its header declares shape {tuple(shape)} of {dtype} ({need:,} bytes of "
            f"data) but the file holds {total - offset:,} bytes after the header",
            str(p),
        )
    return tuple(shape), dtype


def load_kv(path: str | Path) -> npt.NDArray[Any]:
    """Load a ``.npy`` KV dump: float32 or float16, bfloat16 (``ml_dtypes``; ``np.save`` writes it as 2-byte
    void, read back as bfloat16), float64 (converted to float32; values beyond float32's range are refused),
    either byte order, at least one value.

    Raises:
        QuantError: naming the file — unreadable, not a ``.npy`` file, a header whose shape does not match the
            data that follows (checked before anything is allocated), another dtype, or no values.
        ResourceError: the array would not fit in the memory available.
    """
    p = Path(path)
    shape, dtype = _npy_header(p)
    _args.check_memory(_args.size(shape) * dtype.itemsize, str(p), f"the {shape} array of {p}")
    try:
        x = np.load(p, allow_pickle=False)
    except (OSError, ValueError, EOFError) as e:
        raise QuantError(f"{p}: cannot read .npy file: {e}", str(p)) from None
    except MemoryError:
        raise ResourceError(f"{p}: the {shape} array of {dtype} does not fit in memory", str(p)) from None
    if x.dtype.kind == "V" and x.dtype.itemsize == 2 and x.dtype.fields is None:
        import ml_dtypes

        x = x.view(ml_dtypes.bfloat16)
    if x.dtype.kind == "f" and not x.dtype.isnative:
        x = x.astype(x.dtype.newbyteorder("="))
    if x.dtype == np.float64:
        with np.errstate(over="ignore"):
            x32 = x.astype(np.float32)
        lost = np.isinf(x32) & np.isfinite(x)
        if lost.any():
            i = int(np.flatnonzero(lost)[0])
            raise QuantError(
                f"{p}: float64 value {x.reshape(-1)[i]:.6g} at flat index {i} is beyond float32's range (±3.4e38)",
                str(p),
            )
        x = x32
    if x.dtype not in (np.float32, np.float16) and x.dtype.name != "bfloat16":
        raise QuantError(f"{p}: expected a float32, float16 or bfloat16 array, got {x.dtype}", str(p))
    if x.ndim == 0 or x.size == 0:
        raise QuantError(f"{p}: needs at least one value in at least one dimension, got shape {x.shape}", str(p))
    return np.ascontiguousarray(x)


def _best_seconds(fn: Any, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def _rate(nbytes: int, seconds: float) -> float | None:
    """GB/s, or ``None`` for a time below the clock's resolution (no figure rather than an infinite one)."""
    return nbytes / seconds / 1e9 if seconds > 0 else None


def report(x: npt.NDArray[Any], axis: int = -1, repeat: int = 3, threads: int | None = None) -> pl.DataFrame:
    """One row per format: bits/value, bytes, ratio vs bf16 of this tensor, SQNR, cosine, max abs error,
    and quantise/dequantise throughput (GB/s of input float data, best of ``repeat``). Formats whose block
    does not divide the axis get a note instead of figures.

    Raises:
        QuantError: ``x`` is not a float32, float16 or bfloat16 array with at least one value, ``axis`` is
            not one of its axes, ``repeat`` is not a whole number from 1 to :data:`MAX_REPEAT`, or ``threads``
            is not a whole number from 1 to 1024 (checked once, before any format).
    """
    threads = _args.threads(threads, QuantError)
    repeat = _args.whole(repeat, "repeat", 1, MAX_REPEAT, QuantError)
    quant._input(x)
    quant._axis(axis, x.ndim)
    x32 = np.ascontiguousarray(x.astype(np.float32)) if x.dtype != np.float32 else x
    bf16_bytes = x.size * 2
    rows = []
    for name, bits in quant.formats().select("name", "bits_per_value").iter_rows():
        if name == "none":
            continue
        try:
            q = quant.quantize(x, name, axis, threads=threads)
        except QuantError as e:
            rows.append({"format": name, "bits_per_value": bits, "note": str(e)})
            continue
        t_q = _best_seconds(lambda name=name: quant.quantize(x, name, axis, threads=threads), repeat)
        out = np.empty(q.shape, dtype=np.float32)
        t_d = _best_seconds(lambda q=q, out=out: quant.dequantize(q, out=out, threads=threads), repeat)
        err = quant.error(x32, out)
        rows.append(
            {
                "format": name,
                "bits_per_value": bits,
                "bytes": q.nbytes,
                "ratio_vs_bf16": bf16_bytes / q.nbytes,
                "sqnr_db": err["sqnr_db"],
                "cosine": err["cosine"],
                "max_abs_error": err["max_abs"],
                "quantize_gb_per_s": _rate(x.nbytes, t_q),
                "dequantize_gb_per_s": _rate(out.nbytes, t_d),
                "note": None,
            }
        )
    return pl.DataFrame(rows, infer_schema_length=None)


def _fmt(x: float | None, spec: str) -> str:
    """A figure, or ``-`` where there is none (no finite value was compared)."""
    return "-" if x is None else format(x, spec)


def render(df: pl.DataFrame, x: npt.NDArray[Any], source: str, axis: int) -> str:
    """The table as text."""
    lines = [
        f"kvwire quant-report: {source}: shape {tuple(x.shape)}, dtype {x.dtype}, axis {axis}, "
        f"{x.nbytes / 1e6:,.1f} MB; kernels: {quant.isa()}",
        "",
        f"  {'format':<15}{'bits/v':>7}{'bytes':>14}{'ratio':>8}{'SQNR dB':>9}{'cosine':>10}{'max err':>10}"
        f"{'quant GB/s':>12}{'dequant GB/s':>14}",
    ]
    for r in df.iter_rows(named=True):
        if r.get("note"):
            lines.append(f"  {r['format']:<15}{r['bits_per_value']:>7.3f}  skipped: {r['note']}")
            continue
        lines.append(
            f"  {r['format']:<15}{r['bits_per_value']:>7.3f}{r['bytes']:>14,}{r['ratio_vs_bf16']:>8.3f}"
            f"{_fmt(r['sqnr_db'], '.1f'):>9}{_fmt(r['cosine'], '.5f'):>10}{_fmt(r['max_abs_error'], '.4f'):>10}"
            f"{_fmt(r['quantize_gb_per_s'], '.2f'):>12}{_fmt(r['dequantize_gb_per_s'], '.2f'):>14}"
        )
    lines.append("")
    lines.append("ratio: bf16 bytes of this tensor / quantised bytes (scales included); GB/s of float input/output.")
    return "\n".join(lines)


__all__ = ["load_kv", "render", "report", "synthetic_kv"]
