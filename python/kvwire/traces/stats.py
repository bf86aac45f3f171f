"""What a trace holds: request count, span, rate over time, length percentiles, burstiness and (Mooncake)
prefix-block reuse — :func:`trace_info` (``kvwire trace-info``), with a text rendering and a PNG plot.

>>> import polars as pl
>>> info = trace_info(pl.DataFrame({"arrival_s": [0.0, 1.0, 2.0, 3.0], "prompt_tokens": [10, 20, 30, 40],
...                                 "output_tokens": [1, 0, 2, 3]}))
>>> info["requests"], info["mean_rate_per_s"], info["interarrival"]["cv"], info["zero_output"]
(4, 1.0, 0.0, 1)
"""

from __future__ import annotations

import inspect
import math
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from kvwire.errors import KvwireError, ScenarioError, TraceError
from kvwire.traces.arrays import request_arrays
from kvwire.traces.ops import _number, mean_rate_per_s
from kvwire.traces.read import scan_trace
from kvwire.traces.source import MAX_TOKENS

#: Bin widths (s) tried for the rate over time, smallest first; the default is the first giving ≤ 200 bins.
NICE_BINS_S = (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400, 604800)
#: Most bins the rate over time may have (a ``bin_s`` giving more is refused: 80 MB of counts at this bound).
MAX_BINS = 10_000_000
#: Narrowest bin, seconds: a nanosecond, the finest time any trace format records.
MIN_BIN_S = 1e-9
#: Mooncake's prefix block (tokens per hash id).
MOONCAKE_BLOCK_TOKENS = 512
_MAX_SERIES = 10_000
#: The keyword options trace_info passes to the reader (those of :func:`kvwire.scan_trace`).
_READER_OPTIONS = tuple(inspect.signature(scan_trace).parameters)[1:]


def _quantiles(s: pl.Series, qs: Sequence[float]) -> list[float]:
    return [float(s.quantile(q, interpolation="linear")) for q in qs]  # type: ignore[arg-type]


def _lengths(s: pl.Series) -> dict[str, float | int]:
    p50, p90, p99 = _quantiles(s, (0.5, 0.9, 0.99))
    return {
        "mean": float(s.mean()),  # type: ignore[arg-type]
        "min": int(s.min()),  # type: ignore[arg-type]
        "p50": p50,
        "p90": p90,
        "p99": p99,
        "max": int(s.max()),  # type: ignore[arg-type]
        "total": int(s.sum()),
    }


def _at_least(x: float) -> float:
    """``x`` rounded up to 3 significant digits (a width to suggest that is not below the bound)."""
    if x <= 0:
        return x
    k = 2 - math.floor(math.log10(x))
    up = math.ceil(x * 10.0**k) / 10.0**k
    return up if up >= x else math.nextafter(up, math.inf)


def default_bin_s(span_s: float) -> float:
    """The smallest of :data:`NICE_BINS_S` that cuts ``span_s`` into at most 200 bins; beyond 200 weeks,
    ``span_s / 200`` rounded up to 3 significant digits.

    >>> default_bin_s(3600.0), default_bin_s(1e9)
    (30.0, 5000000.0)
    """
    nice = next((b for b in NICE_BINS_S if span_s / b <= 200), None)
    return float(nice) if nice is not None else _at_least(span_s / 200)


def _bin_width(bin_s: object, span: float) -> float:
    """``bin_s`` checked: finite, at least :data:`MIN_BIN_S`, and giving at most :data:`MAX_BINS` bins."""
    width = _number("bin_s", bin_s, positive=True)
    if width < MIN_BIN_S:
        raise ScenarioError(f"bin_s: must be ≥ {MIN_BIN_S:g} s (a nanosecond), got {bin_s!r}", "bin_s")
    if span / width >= MAX_BINS:
        raise ScenarioError(
            f"bin_s: {width:g} s cuts the trace's span of {span:,.6g} s into more than {MAX_BINS:,} bins (the "
            f"most the rate over time may have); choose bin_s ≥ {_at_least(span / (MAX_BINS - 1)):g} s (span / "
            f"{MAX_BINS - 1:,}), or leave it out for at most about 200 bins",
            "bin_s",
        )
    return width


def _checked_table(df: pl.DataFrame) -> None:
    """Refuse a request table the figures cannot describe, naming the column and row: a missing, null or
    non-numeric column, a non-finite or decreasing arrival time, a token count below 0 or beyond 2^32 - 1."""
    a, *tokens = request_arrays(df)
    bad = ~np.isfinite(a)
    if bad.any():
        i = int(np.argmax(bad))
        path = f"requests.arrival_s[{i}]"
        raise TraceError(f"{path}: arrival times must be finite numbers of seconds, got {a[i]}", path)
    if a.size and not math.isfinite(float(a[-1]) - float(a[0])):
        path = "requests.arrival_s"
        raise TraceError(
            f"{path}: the span from {a[0]:g} s to {a[-1]:g} s is beyond the range of a float (not a time)", path
        )
    back = a[1:] < a[:-1]
    if back.any():
        i = int(np.argmax(back)) + 1
        path = f"requests.arrival_s[{i}]"
        raise TraceError(
            f"{path}: the table must be sorted by arrival_s: row {i} ({a[i]:g}) comes before row {i - 1} "
            f"({a[i - 1]:g})",
            path,
        )
    for name, t in zip(("prompt_tokens", "output_tokens"), tokens, strict=True):
        out = (t < 0) | (t > MAX_TOKENS)
        if out.any():
            i = int(np.argmax(out))
            path = f"requests.{name}[{i}]"
            raise TraceError(f"{path}: token counts must be ≥ 0 and below 2^32, got {t[i]}", path)


def _interarrival(a: np.ndarray[Any, np.dtype[np.float64]]) -> dict[str, float | None] | None:
    if a.size < 2:
        return None
    gaps = np.diff(a)
    big = float(gaps.max())
    if big > 1e150:  # gaps this long would overflow the squares of the standard deviation: scaled first
        mean = float((gaps / big).mean()) * big
        std = float((gaps / big).std()) * big
    else:
        mean, std = float(gaps.mean()), float(gaps.std())
    p50, p90, p99 = (float(np.quantile(gaps, q)) for q in (0.5, 0.9, 0.99))
    return {
        "mean_s": mean,
        "cv": std / mean if mean > 0 else None,
        "p50_s": p50,
        "p90_s": p90,
        "p99_s": p99,
        "max_s": float(gaps.max()),
    }


def _rate(a: np.ndarray[Any, np.dtype[np.float64]], bin_s: float) -> dict[str, Any]:
    first = float(a[0])
    counts = np.bincount(np.floor((a - first) / bin_s).astype(np.int64))
    rates = counts / bin_s
    return {
        "bin_s": bin_s,
        "bins": int(counts.size),
        "peak_req_per_s": float(rates.max()),
        "min_req_per_s": float(rates.min()),
        "series_req_per_s": rates.tolist() if counts.size <= _MAX_SERIES else None,
    }


def prefix_reuse(hash_ids: pl.Series) -> dict[str, float | int | None]:
    """Prefix-block reuse of a Mooncake trace: of all hash blocks the requests carry (one per 512 prompt
    tokens), the fraction whose id already appeared in an earlier request — the share of prompt KV an
    unbounded prefix cache could reuse.

    >>> import polars as pl
    >>> prefix_reuse(pl.Series([[0, 1], [0, 2], [0, 1, 3]]))["reuse_ratio"]
    0.42857142857142855
    """
    blocks = pl.DataFrame({"hash_ids": hash_ids}).with_row_index("request").explode("hash_ids").drop_nulls("hash_ids")
    total = blocks.height
    if total == 0:
        return {"block_tokens": MOONCAKE_BLOCK_TOKENS, "blocks": 0, "unique_blocks": 0, "reused_blocks": 0,
                "reuse_ratio": None}  # fmt: skip
    reused = int(blocks.select((pl.col("request") > pl.col("request").min().over("hash_ids")).sum()).item())
    return {
        "block_tokens": MOONCAKE_BLOCK_TOKENS,
        "blocks": total,
        "unique_blocks": int(blocks["hash_ids"].n_unique()),
        "reused_blocks": reused,
        "reuse_ratio": reused / total,
    }


def trace_info(trace: str | Path | pl.DataFrame, *, bin_s: float | None = None, **options: Any) -> dict[str, Any]:
    """Describe a trace (a file, read with :func:`kvwire.read_trace` and ``options``, or a request table).

    Returns a JSON-serialisable dict: ``file``, ``format``, ``layout`` (``None`` for a table); ``requests``;
    ``first_s``, ``last_s``, ``span_s``; ``mean_rate_per_s`` ((n - 1) / span); ``interarrival``
    {mean_s, cv (standard deviation / mean: 1 for Poisson arrivals, above 1 bursty), p50_s, p90_s, p99_s,
    max_s}; ``prompt_tokens`` and ``output_tokens`` {mean, min, p50, p90, p99, max, total}; ``zero_output``
    (requests with no output token); ``rate`` {bin_s, bins, peak_req_per_s, min_req_per_s,
    series_req_per_s (requests per second in each bin from the first arrival; the last bin may be
    partial)}; ``prefix`` (Mooncake ``hash_ids`` only, see :func:`prefix_reuse`, else ``None``).
    Percentiles interpolate linearly. ``None`` where a figure does not exist; every number is finite.

    Args:
        trace: a trace file (any format :func:`kvwire.read_trace` reads) or a request table.
        bin_s: width of the rate-over-time bins in seconds: at least :data:`MIN_BIN_S` (a nanosecond) and
            giving at most :data:`MAX_BINS` (10,000,000) bins, so at least span / 9,999,999; default the
            smallest round width giving at most 200 bins (:func:`default_bin_s`).
        options: the reader's options (:func:`kvwire.read_trace`), for a file only.

    Raises:
        TraceFileError: the file cannot be read (named with line and column).
        TraceError: a request table with a missing, null or non-numeric column, a non-finite or decreasing
            ``arrival_s`` or a negative token count (``path`` ``requests.<column>[<row>]``), or no request.
        ScenarioError: a bad ``bin_s`` (not a finite number ≥ 1e-9, or too many bins), a bad or unknown
            reader option, or reader options with a table (``path`` names it).

    >>> import polars as pl
    >>> trace_info(pl.DataFrame({"arrival_s": [0.0, 0.5], "prompt_tokens": [1, 2], "output_tokens": [1, 1]}),
    ...            bin_s=1)["rate"]["series_req_per_s"]
    [2.0]
    """
    file = fmt = layout = None
    unknown = sorted(k for k in options if k not in _READER_OPTIONS)
    if unknown:
        raise ScenarioError(
            f"{unknown[0]}: not an option of trace_info or read_trace (expected bin_s, {', '.join(_READER_OPTIONS)})",
            unknown[0],
        )
    if isinstance(trace, pl.DataFrame):
        if options:
            first = sorted(options)[0]
            raise ScenarioError(f"{first}: reader options {sorted(options)} need a trace file, not a table", first)
        df = trace
    elif not isinstance(trace, str | os.PathLike) or isinstance(trace, bytes):
        raise TraceError(
            f"trace: expected a trace file (a str or pathlib.Path) or a Polars DataFrame, got {type(trace).__name__}",
            "trace",
        )
    else:
        scan = scan_trace(trace, **options)
        df = scan.collect()
        file, fmt, layout = str(trace), scan.format, scan.source.layout
    if isinstance(trace, pl.DataFrame):
        _checked_table(df)
    if df.height == 0 and file is None:
        raise TraceError("requests: the table has no requests", "requests")
    if df.height == 0:  # the file has requests (the reader refuses one without): the options left none
        chosen = [k for k in ("start_s", "duration_s", "sample") if k in options]
        raise TraceError(
            f"{file}: no requests are left with the options given ({', '.join(chosen) or 'the window'})",
            chosen[0] if chosen else "start_s",
        )
    a = df["arrival_s"].to_numpy()
    span = float(a[-1] - a[0])
    width = default_bin_s(span) if bin_s is None else _bin_width(bin_s, span)
    return {
        "file": file,
        "format": fmt,
        "layout": layout,
        "requests": df.height,
        "first_s": float(a[0]),
        "last_s": float(a[-1]),
        "span_s": span,
        "mean_rate_per_s": mean_rate_per_s(df),
        "interarrival": _interarrival(a),
        "prompt_tokens": _lengths(df["prompt_tokens"]),
        "output_tokens": _lengths(df["output_tokens"]),
        "zero_output": int((df["output_tokens"] == 0).sum()),
        "rate": _rate(a, width),
        "prefix": prefix_reuse(df["hash_ids"]) if "hash_ids" in df.columns else None,
    }


def _fmt(x: float | int | None, digits: int = 1) -> str:
    if x is None:
        return "-"
    return f"{x:,.{digits}f}" if isinstance(x, float) else f"{x:,}"


def _duration(seconds: float) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{int(seconds // size)} {unit}"
    if seconds >= 2 * 86400:
        return f"{seconds / 86400:.2f} days"
    if seconds >= 2 * 3600:
        return f"{seconds / 3600:.2f} h"
    if seconds >= 120:
        return f"{seconds / 60:.1f} min"
    return f"{seconds:g} s"


def render(info: dict[str, Any]) -> str:
    """The text ``kvwire trace-info`` prints."""
    head = f"{info['file']} ({info['layout']})" if info["file"] else "request table"
    gaps, rate = info["interarrival"], info["rate"]
    lines = [
        head,
        f"requests: {info['requests']:,}; span {_duration(info['span_s'])} "
        f"({info['first_s']:.3f} s to {info['last_s']:.3f} s); mean rate {_fmt(info['mean_rate_per_s'], 3)} req/s",
        f"rate per {_duration(rate['bin_s'])} bin: peak {rate['peak_req_per_s']:,.3f} req/s, "
        f"lowest {rate['min_req_per_s']:,.3f} req/s over {rate['bins']:,} bins",
    ]
    if gaps is not None:
        lines.append(
            f"inter-arrival: mean {gaps['mean_s'] * 1e3:,.3f} ms, p50 {gaps['p50_s'] * 1e3:,.3f} ms, "
            f"p99 {gaps['p99_s'] * 1e3:,.3f} ms, max {gaps['max_s']:,.3f} s; burstiness (CV) {_fmt(gaps['cv'], 3)}"
            " (1 = Poisson)"
        )
    lines.append("")
    lines.append(f"  {'tokens':<8}{'mean':>10}{'min':>9}{'p50':>10}{'p90':>10}{'p99':>10}{'max':>10}")
    for key, label in (("prompt_tokens", "prompt"), ("output_tokens", "output")):
        s = info[key]
        lines.append(
            f"  {label:<8}{s['mean']:>10,.1f}{s['min']:>9,}{s['p50']:>10,.0f}{s['p90']:>10,.0f}"
            f"{s['p99']:>10,.0f}{s['max']:>10,}"
        )
    lines.append(f"  requests with no output token: {info['zero_output']:,}")
    if info["prefix"] is not None:
        p = info["prefix"]
        lines.append(
            f"prefix blocks ({p['block_tokens']} tokens): {p['blocks']:,}, {p['unique_blocks']:,} distinct; "
            f"reuse ratio {_fmt(p['reuse_ratio'], 3)} (share of blocks already seen in an earlier request)"
        )
    return "\n".join(lines)


def plot_rate(info: dict[str, Any], out: str | Path) -> Path:
    """Write the request rate over time (one point per bin) as a PNG; needs matplotlib (``pip install
    'kvwire[plot]'``)."""
    try:
        from matplotlib.figure import Figure  # no pyplot: no global backend or figure state is touched
    except ImportError:
        raise KvwireError(
            "the plot needs matplotlib: pip install 'kvwire[plot]' (or pip install matplotlib)", "output"
        ) from None
    rate = info["rate"]
    series = rate["series_req_per_s"]
    if series is None:
        raise KvwireError(f"output: {rate['bins']:,} bins are too many to plot; pass a wider bin", "output")
    span = info["span_s"]
    unit, scale = next(((u, size) for u, size in (("days", 86400.0), ("h", 3600.0), ("min", 60.0)) if span >= 2 * size),
                       ("s", 1.0))  # fmt: skip
    t = (np.arange(len(series) + 1) * rate["bin_s"]) / scale  # bin edges; the last bin drawn to its end
    fig = Figure(figsize=(9, 3.5), dpi=120)
    ax = fig.subplots()
    ax.step(t, [*series, series[-1]], where="post", linewidth=1.0, label=f"per {_duration(rate['bin_s'])}")
    if info["mean_rate_per_s"] is not None:
        ax.axhline(info["mean_rate_per_s"], color="0.4", linestyle="--", linewidth=0.8, label="mean")
    ax.set_xlabel(f"time since the first request ({unit})")
    ax.set_ylabel("requests / s")
    cv = info["interarrival"]["cv"] if info["interarrival"] else None
    title = Path(info["file"]).name if info["file"] else "request table"
    ax.set_title(f"{title}: {info['requests']:,} requests, inter-arrival CV {_fmt(cv, 2)}")
    ax.legend(loc="lower right")
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    path = Path(out)
    try:
        fig.savefig(path, format="png")
    except OSError as e:
        raise KvwireError(f"output: cannot write {path}: {e.strerror or e}", "output") from None
    return path


__all__ = ["default_bin_s", "plot_rate", "prefix_reuse", "render", "trace_info"]
