"""``kvwire quant-report``: every format on one KV tensor — size, ratio, accuracy and measured throughput."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import polars as pl

from kvwire.errors import QuantError
from kvwire.kernels import _args, quant


def synthetic_kv(tokens: int = 4096, heads: int = 8, head_dim: int = 128, seed: int = 0) -> npt.NDArray[np.float32]:
    """A seeded stand-in for a K cache: standard normal values of shape ``(tokens, heads, head_dim)`` with
    four outlier channels scaled by 20 (the channel outliers that motivate per-channel key quantisation)."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((tokens, heads, head_dim), dtype=np.float32)
    x[:, :, [3, 17, 64, 101]] *= 20.0
    return x


def load_kv(path: str | Path) -> npt.NDArray[Any]:
    """Load a ``.npy`` KV dump (float32/float16, bfloat16 via ml_dtypes; float64 is converted to float32)."""
    p = Path(path)
    try:
        x = np.load(p, allow_pickle=False)
    except (OSError, ValueError) as e:
        raise QuantError(f"{p}: cannot read .npy file: {e}", str(p)) from None
    if x.dtype == np.float64:
        x = x.astype(np.float32)
    if x.dtype.kind not in "fV" or x.dtype.itemsize not in (2, 4):
        raise QuantError(f"{p}: expected a float32, float16 or bfloat16 array, got {x.dtype}", str(p))
    return np.ascontiguousarray(x)


def _best_seconds(fn: Any, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def report(x: npt.NDArray[Any], axis: int = -1, repeat: int = 3, threads: int | None = None) -> pl.DataFrame:
    """One row per format: bits/value, bytes, ratio vs bf16 of this tensor, SQNR, cosine, max abs error,
    and quantise/dequantise throughput (GB/s of input float data, best of ``repeat``). Formats whose block
    does not divide the axis get a note instead of figures.

    Raises:
        QuantError: ``threads`` is not a whole number from 1 to 1024 (checked once, before any format).
    """
    threads = _args.threads(threads, QuantError)
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
                "quantize_gb_per_s": x.nbytes / t_q / 1e9,
                "dequantize_gb_per_s": out.nbytes / t_d / 1e9,
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
            f"{r['quantize_gb_per_s']:>12.2f}{r['dequantize_gb_per_s']:>14.2f}"
        )
    lines.append("")
    lines.append("ratio: bf16 bytes of this tensor / quantised bytes (scales included); GB/s of float input/output.")
    return "\n".join(lines)


__all__ = ["load_kv", "render", "report", "synthetic_kv"]
