r"""Read public request traces into the request table :func:`kvwire.simulate` takes (``arrival_s``,
``prompt_tokens``, ``output_tokens``, plus each format's extra columns), lazily with Polars.

Formats, detected from the file's first bytes (``format="auto"``) or named: ``azure`` (Azure LLM inference
2023, 2024 and the 2025 multimodal trace), ``burstgpt`` (every BurstGPT release), ``mooncake`` (JSON Lines)
and ``kvwire`` (a saved request table, CSV or Parquet); any text format may be gzip-compressed. The details
are in :mod:`kvwire.trace_formats`; arrivals are seconds after the first request (kvwire's own tables keep
their times).

A file is scanned once by Polars' streaming engine: no Python loop touches the rows and the table is built
once. :func:`scan_trace` gives the plan, :meth:`TraceScan.collect` the table and :meth:`TraceScan.batches`
the same table in chunks (for consumers that must not hold a whole 27-million-request trace). Windowing,
thinning and rescaling (:mod:`kvwire.trace_ops`) are applied in that order when asked for.

>>> import tempfile, pathlib
>>> p = pathlib.Path(tempfile.mkdtemp()) / "t.csv"
>>> _ = p.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\r\n"
...     "2023-11-16 18:17:03.9799600,4808,10\r\n2023-11-16 18:17:04.0319600,3180,8")
>>> [round(t, 9) for t in read_trace(p)["arrival_s"]]
[0.0, 0.052]
>>> read_trace(p, time_scale=10.0)["arrival_s"].to_list()[1]
0.52
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from pathlib import Path

import polars as pl

from kvwire.errors import ScenarioError, TraceError
from kvwire.traces.arrays import REQUEST_COLUMNS
from kvwire.traces.formats import bad_value, detect, diagnose, line_of, plan, unclosed_quote
from kvwire.traces.ops import (
    _number,
    keep_mask,
    mean_rate_per_s,
    rate_factor,
    scale_time,
    scale_to_rate,
    seed_value,
    thin,
    window,
)
from kvwire.traces.source import FORMATS, INT64_MAX, MAX_TOKENS, SCAN_ERRORS, TOKEN_RANGE, Plan, Source, fail

_TOKENS = ("prompt_tokens", "output_tokens")


class TraceScan:
    """A trace file ready to be read: its format, the lazy Polars plan and the options to apply.

    Made by :func:`scan_trace`. :meth:`collect` returns the whole table, :meth:`batches` the same rows in
    chunks; both check every row they return (a value that is not a time or a whole number of tokens, a
    negative length, a request arriving before the previous one: :class:`~kvwire.TraceFileError` naming the
    file, line and column).

    Attributes:
        source: what the file is (:class:`kvwire.trace_formats.Source`: ``path``, ``format``, ``layout``,
            ``kind``, ``compressed``).
    """

    def __init__(
        self,
        plan_: Plan,
        t0: float | int,
        *,
        start_s: float,
        duration_s: float | None,
        time_scale: float,
        rate_per_s: float | None,
        sample: float,
        seed: int,
    ) -> None:
        self.source: Source = plan_.source
        self._plan = plan_
        self._t0 = t0
        self._start_s, self._duration_s = start_s, duration_s
        self._time_scale, self._rate_per_s = time_scale, rate_per_s
        self._sample, self._seed = sample, seed

    @property
    def format(self) -> str:
        """``azure``, ``burstgpt``, ``mooncake`` or ``kvwire``."""
        return self.source.format

    def __repr__(self) -> str:
        return f"TraceScan({self.source.path!r}, format={self.format!r}, layout={self.source.layout!r})"

    def lazy(self) -> pl.LazyFrame:
        """The requests of the time window as a Polars LazyFrame (``arrival_s`` shifted to the window start),
        before thinning and rescaling and without the row checks: build your own query on it, or use
        :meth:`collect` / :meth:`batches` for checked rows."""
        return self._rows().drop("_row")

    def _rows(self) -> pl.LazyFrame:
        p = self._plan
        # Azure's integer nanoseconds are 128-bit (any year, and their differences, exact): so is t0.
        t0 = pl.lit(self._t0, dtype=pl.Int128) if isinstance(self._t0, int) else self._t0
        since = (pl.col("_t") - t0).cast(pl.Float64)
        # Divided by a column (x·0 + d), not by the constant d: Polars turns division by a constant into a
        # multiplication by its reciprocal, which is not the correctly rounded quotient (60e9 ns would become
        # 60.00000000000001 s).
        arrival = (since / (since * 0.0 + p.divisor) if p.divisor != 1.0 else since) if p.rebase else pl.col("_t")
        lf = p.lazy.with_columns(arrival.alias("_t")).rename({"_t": "arrival_s"})
        start, duration = self._start_s, self._duration_s
        if start or duration is not None:
            a = pl.col("arrival_s")
            inside = a >= start
            if duration is not None:
                inside = inside & (a < start + duration)
            # Unreadable times (null) stay, to be reported by the row check rather than silently dropped.
            lf = lf.filter(inside | a.is_null())
            if start:
                lf = lf.with_columns(a - start)
        return lf.select(
            "_row", *REQUEST_COLUMNS, *(c for c in lf.collect_schema() if c not in ("_row", *REQUEST_COLUMNS))
        )

    def _check(self, df: pl.DataFrame, previous: tuple[float, int] | None) -> pl.DataFrame:
        """Refuse the first bad row of a chunk (``previous``: the last arrival and record before it);
        blank CSV lines (every field empty) are dropped."""
        if df.height == 0:
            return df
        src, p = self.source, self._plan
        if any(df[c].null_count() for c in REQUEST_COLUMNS):
            blank = pl.all_horizontal(pl.col(c).is_null() for c in REQUEST_COLUMNS)
            df = df.filter(~blank)
            for column in REQUEST_COLUMNS:
                nulls = df[column].is_null()
                if nulls.any():
                    row = int(df["_row"][int(nulls.arg_max() or 0)])
                    raise bad_value(src, p, row, "_t" if column == "arrival_s" else column)
        for column in _TOKENS:
            negative = df[column] < 0
            if negative.any():
                i = int(negative.arg_max() or 0)
                row = int(df["_row"][i])
                raise _row_error(src, row, p.names[column], f"{df[column][i]} is negative; token counts are ≥ 0")
            huge = df[column] > MAX_TOKENS
            if huge.any():
                i = int(huge.arg_max() or 0)
                raise _row_error(
                    src, int(df["_row"][i]), p.names[column], f"{df[column][i]} is out of range ({TOKEN_RANGE})"
                )
        a = df["arrival_s"]
        far = ~a.is_finite()
        if far.any():  # finite times whose difference is not: a span beyond the range of a float
            i = int(far.arg_max() or 0)
            why = "this time is further from the first request's than a float of seconds holds"
            raise _row_error(src, int(df["_row"][i]), p.names["_t"], why)
        if not p.rebase and float(a.min() or 0.0) < 0:  # type: ignore[arg-type]
            i = int((a < 0).arg_max() or 0)
            raise _row_error(src, int(df["_row"][i]), "arrival_s", f"{a[i]} is negative; arrival times are ≥ 0")
        if previous is not None and a[0] < previous[0]:
            raise _order_error(src, p, previous[1], int(df["_row"][0]), previous[0], float(a[0]))
        back = a.diff() < 0
        if back.any():
            i = int(back.arg_max() or 0)
            raise _order_error(src, p, int(df["_row"][i - 1]), int(df["_row"][i]), float(a[i - 1]), float(a[i]))
        return df

    def collect(self) -> pl.DataFrame:
        """The whole (windowed, thinned, rescaled) request table, checked.

        Raises:
            TraceFileError: a bad row (file, line, column named); :class:`~kvwire.ScenarioError` for
                ``rate_per_s`` on a table without a mean rate.
        """
        try:
            df = self._rows().collect(engine="streaming")
        except SCAN_ERRORS as e:
            raise diagnose(self.source, e) from None
        df = self._check(df, None).drop("_row")
        df = thin(df, self._sample, self._seed)
        rate = self._rate_per_s
        df = scale_time(df, self._time_scale) if rate is None else scale_to_rate(df, rate)
        self._check_scaled(df)
        # One contiguous buffer per column (the streaming engine leaves one chunk per morsel), so that handing
        # the columns to the core (numpy views) copies nothing: the requests are held once.
        return df.rechunk()

    def _checked_batches(self, rows: int) -> Iterator[pl.DataFrame]:
        previous: tuple[float, int] | None = None
        offset = 0
        stream = self._rows().collect_batches(chunk_size=rows)
        while True:
            try:
                chunk = next(stream)
            except StopIteration:
                return
            except SCAN_ERRORS as e:
                raise diagnose(self.source, e) from None
            chunk = self._check(chunk, previous)
            if chunk.height == 0:
                continue
            previous = (float(chunk["arrival_s"][-1]), int(chunk["_row"][-1]))
            mask = keep_mask(chunk.height, self._sample, self._seed, offset)
            offset += chunk.height
            chunk = chunk.drop("_row")
            if not bool(mask.all()):
                chunk = chunk.filter(pl.Series(mask))
            if chunk.height:
                yield chunk.rechunk()

    def batches(self, rows: int = 1 << 20) -> Iterator[pl.DataFrame]:
        """The same rows as :meth:`collect`, in order, in chunks of about ``rows`` requests (Polars'
        streaming engine reads the file as it goes; a chunk is checked before it is yielded, so an error
        can come after earlier chunks were consumed). With ``rate_per_s`` the file is read twice: once to
        measure the rate, once to yield.

        >>> import tempfile, pathlib
        >>> p = pathlib.Path(tempfile.mkdtemp()) / "t.jsonl"
        >>> _ = p.write_text("".join(f'{{"timestamp": {i}, "input_length": 9, "output_length": 1}}\\n'
        ...                          for i in range(10)))
        >>> [b.height for b in scan_trace(p).batches(rows=4)]
        [4, 4, 2]

        Raises:
            ScenarioError: ``rows`` is not a whole number ≥ 1 (``path`` ``"rows"``), on the call itself.
            TraceFileError: a bad row or an unreadable file (a truncated gzip file, ...), when the chunk
                that holds it is read.
        """
        if isinstance(rows, bool) or not isinstance(rows, int) or not 1 <= rows <= INT64_MAX:
            raise ScenarioError(f"rows: expected a whole number from 1 to 2^63 - 1, got {rows!r}", "rows")
        return self._scaled_batches(rows)  # checked here, on the call, not on the first chunk

    def _scaled_batches(self, rows: int) -> Iterator[pl.DataFrame]:
        factor = self._time_scale
        if self._rate_per_s is not None:
            n, first, last = 0, 0.0, 0.0
            for chunk in self._checked_batches(rows):
                if n == 0:
                    first = float(chunk["arrival_s"][0])
                n += chunk.height
                last = float(chunk["arrival_s"][-1])
            factor = rate_factor(n, first, last, self._rate_per_s)
        for chunk in self._checked_batches(rows):
            if factor != 1.0:
                chunk = chunk.with_columns(pl.col("arrival_s") * factor)
                self._check_scaled(chunk)
            yield chunk

    def _check_scaled(self, df: pl.DataFrame) -> None:
        """Refuse a rescaling that takes arrival times beyond the range of a float (``time_scale`` 1e300)."""
        if df.height and not math.isfinite(float(df["arrival_s"][-1])):
            key = "time_scale" if self._rate_per_s is None else "rate_per_s"
            value = self._time_scale if self._rate_per_s is None else self._rate_per_s
            raise ScenarioError(
                f"{key}: {value:g} takes the arrival times beyond the range of a float; choose a value nearer 1",
                key,
            )


def _row_error(src: Source, row: int, column: str, reason: str) -> Exception:
    line = line_of(src, row)
    return fail(src.path, reason if line is not None else f"row {row + 1}: {reason}", line, column)


def _order_error(src: Source, p: Plan, before: int, after: int, t_before: float, t_after: float) -> Exception:
    line_before = line_of(src, before)
    where = f"line {line_before}" if line_before is not None else f"row {before + 1}"
    return _row_error(
        src,
        after,
        p.names["_t"],
        f"arrives before the request on {where} ({t_after:.9g} s < {t_before:.9g} s after the first request); "
        "traces must be in time order: sort the file first",
    )


def scan_trace(
    path: str | Path,
    format: str = "auto",
    *,
    model: str | Sequence[str] | None = None,
    log_type: str | Sequence[str] | None = None,
    keep_failed: bool = False,
    extra: bool = True,
    start_s: float = 0.0,
    duration_s: float | None = None,
    time_scale: float = 1.0,
    rate_per_s: float | None = None,
    sample: float = 1.0,
    seed: int = 0,
) -> TraceScan:
    """Plan the reading of a trace file (reads only its first bytes and first request).

    Arguments are those of :func:`read_trace`.

    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "t.jsonl"
    >>> _ = p.write_text('{"timestamp": 5, "input_length": 9, "output_length": 1, "hash_ids": [0]}\\n')
    >>> s = scan_trace(p)
    >>> s.format, s.collect().columns
    ('mooncake', ['arrival_s', 'prompt_tokens', 'output_tokens', 'hash_ids'])
    """
    start = _number("start_s", start_s, positive=False)
    duration = None if duration_s is None else _number("duration_s", duration_s, positive=True)
    scale = _number("time_scale", time_scale, positive=True)
    rate = None if rate_per_s is None else _number("rate_per_s", rate_per_s, positive=True)
    if rate is not None and scale != 1.0:
        raise ScenarioError("rate_per_s: give either time_scale or rate_per_s, not both", "rate_per_s")
    p_sample = _number("sample", sample, positive=True, at_most=1.0)
    s_seed = seed_value("seed", seed)
    for name, flag in (("keep_failed", keep_failed), ("extra", extra)):
        if not isinstance(flag, bool):
            raise TraceError(f"{name}: expected true or false, got {flag!r}", name)
    src = detect(path, format)
    p = plan(src, model=model, log_type=log_type, keep_failed=keep_failed, extra=extra)
    t0 = _first_time(p)
    return TraceScan(
        p, t0, start_s=start, duration_s=duration, time_scale=scale, rate_per_s=rate, sample=p_sample, seed=s_seed
    )


def _first_time(p: Plan) -> float | int:
    """The first request's time (what arrivals are measured from), or the error that explains why there is
    none: no data rows, none left by the filters, or a first row whose time cannot be read."""
    src = p.source
    try:
        head = p.lazy.head(1).collect(engine="streaming")  # the usual case: the first row has a time
        first = head if head.height and head["_t"][0] is not None else None
        if first is None and head.height:  # a blank or bad first row: the first readable time, if any
            first = p.lazy.filter(pl.col("_t").is_not_null()).head(1).collect(engine="streaming")
        if first is not None and first.height:
            value: float | int = first["_t"][0] if p.rebase else 0.0  # kvwire's own tables keep their clock
            return value
    except SCAN_ERRORS as e:
        raise diagnose(src, e) from None
    if head.height and not all(head[c].is_null().all() for c in ("_t", *_TOKENS)):
        raise bad_value(src, p, int(head["_row"][0]), "_t")
    quote_error = unclosed_quote(src)  # a quote that swallowed every line after it
    if quote_error is not None:
        raise quote_error
    if p.filters and not head.height:
        raise fail(src.path, f"no requests are left after the filters ({p.filters})")
    raise fail(src.path, "the trace has no requests (only a header, or blank lines)")


def read_trace(
    path: str | Path,
    format: str = "auto",
    *,
    model: str | Sequence[str] | None = None,
    log_type: str | Sequence[str] | None = None,
    keep_failed: bool = False,
    extra: bool = True,
    start_s: float = 0.0,
    duration_s: float | None = None,
    time_scale: float = 1.0,
    rate_per_s: float | None = None,
    sample: float = 1.0,
    seed: int = 0,
) -> pl.DataFrame:
    """Read a trace file into a request table.

    Args:
        path: the file (gzip-compressed or not).
        format: ``"auto"`` (from the header or first line), ``"azure"``, ``"burstgpt"``, ``"mooncake"`` or
            ``"kvwire"``.
        model: BurstGPT only: keep the rows whose ``Model`` is this (or one of these), e.g. ``"GPT-4"``.
        log_type: BurstGPT only: keep the rows whose ``Log Type`` is this (or one of these), e.g.
            ``"Conversation log"``.
        keep_failed: BurstGPT only: keep failed requests (``Response tokens`` = 0); dropped by default.
        extra: keep the format's extra columns: ``num_images`` (Azure multimodal), ``model``, ``log_type``,
            ``session_id``, ``elapsed_s`` (BurstGPT), ``hash_ids`` (Mooncake, a list column).
        start_s, duration_s: keep the requests arriving in ``[start_s, start_s + duration_s)`` seconds after
            the first request (to the end without ``duration_s``); arrivals then count from ``start_s``.
        time_scale: multiply every arrival time by this (0.5 = twice the rate).
        rate_per_s: instead of ``time_scale``, scale time so that the mean rate, (n - 1) / (last - first
            arrival), is this.
        sample: keep each request with this probability (seeded thinning, 0 < sample ≤ 1).
        seed: the thinning seed (same seed, same requests).

    Returns:
        ``arrival_s`` (float seconds, non-decreasing), ``prompt_tokens``, ``output_tokens`` (Int64), then the
        extra columns.

    Raises:
        TraceFileError: the file is unreadable, empty, binary or not UTF-8, of an unknown format or missing a
            column, or a row is bad (the message names the file, line and column).
        ScenarioError: a bad option (``path`` names it).

    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "b.csv"
    >>> _ = p.write_text("Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\\n"
    ...                  "5,ChatGPT,472,18,490,Conversation log\\n45,GPT-4,1087,0,1087,API log\\n"
    ...                  "118,GPT-4,417,276,693,Conversation log\\n")
    >>> read_trace(p)["arrival_s"].to_list()                   # the failed request is dropped
    [0.0, 113.0]
    >>> read_trace(p, model="GPT-4", keep_failed=True)["arrival_s"].to_list()
    [0.0, 73.0]
    """
    return scan_trace(
        path,
        format,
        model=model,
        log_type=log_type,
        keep_failed=keep_failed,
        extra=extra,
        start_s=start_s,
        duration_s=duration_s,
        time_scale=time_scale,
        rate_per_s=rate_per_s,
        sample=sample,
        seed=seed,
    ).collect()


def read_azure_csv(path: str | Path) -> pl.DataFrame:
    """Read an Azure LLM inference trace (2023, 2024 or 2025 multimodal): ``read_trace(path, "azure",
    extra=False)``, the three request columns."""
    return read_trace(path, "azure", extra=False)


def read_mooncake_jsonl(path: str | Path) -> pl.DataFrame:
    """Read a Mooncake trace (``timestamp`` ms, ``input_length``, ``output_length``): ``read_trace(path,
    "mooncake", extra=False)``, the three request columns (``hash_ids`` left out; ``read_trace`` keeps it)."""
    return read_trace(path, "mooncake", extra=False)


__all__ = [
    "FORMATS",
    "REQUEST_COLUMNS",
    "TraceScan",
    "mean_rate_per_s",
    "read_azure_csv",
    "read_mooncake_jsonl",
    "read_trace",
    "scale_time",
    "scale_to_rate",
    "scan_trace",
    "thin",
    "window",
]
