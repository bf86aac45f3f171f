"""Sweeps: many scenarios in one call, in parallel, resumable, on one machine or a Dask cluster.

A sweep is a base scenario and the fields to vary: ``grid`` (every combination) and ``zip`` (varied together),
times ``replicates`` seeds. Every point is resolved and validated before any work starts; points run on a
``concurrent.futures.Executor`` (threads by default — the core releases the GIL — or Dask's
``client.get_executor()``); with ``out=DIR`` finished points are written as Parquet parts (temporary name,
then an atomic rename) next to a ``manifest.json`` of the definition, so ``resume=True`` continues a sweep
that was interrupted, even by ``kill -9``.

>>> import kvwire
>>> df = kvwire.sweep({"workload": {"requests": 200}}, {"link": ["ib-ndr", "eth-25g"]}, workers=1)
>>> df.select("point", "link", "seed").rows()
[(0, 'ib-ndr', 1), (1, 'eth-25g', 1)]
>>> round(df["slo.attainment"][0], 3)
1.0
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import os
import re
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import FIRST_COMPLETED, Executor, Future, ThreadPoolExecutor, wait
from pathlib import Path
from typing import Any

import polars as pl

import kvwire._core as _core
from kvwire.errors import Cancelled, ScenarioError
from kvwire.planning.grid import (
    DEFINITION_KEYS,
    definition_of,
    load_sweep,
    point_values,
    replicate_seed,
    resolve,
    sweep_points,
)
from kvwire.planning.progress import ProgressFn, progress_bar
from kvwire.results.run import simulate

#: Columns every sweep table starts with, before the swept fields' columns.
POINT_COLUMN, REPLICATE_COLUMN, SEED_COLUMN = "point", "replicate", "seed"
#: The order of the summary's sections in the table (others follow alphabetically).
SECTION_ORDER = (
    "requests",
    "latency",
    "slo",
    "throughput",
    "utilisation",
    "energy",
    "stages",
    "hotspot",
    "load",
    "link",
    "instances",
    "hops",
    "little",
    "run",
)
#: Format tag of ``manifest.json``.
MANIFEST_FORMAT = "kvwire-sweep/1"
#: A finished point waits at most this long before it is written (points are batched into one part while
#: they finish faster than this; a slow point is written as soon as it finishes).
FLUSH_INTERVAL_S = 1.0
#: Tasks kept in flight on an executor the caller passed, when ``workers`` is not given.
DEFAULT_IN_FLIGHT = 256
#: Largest automatic chunk (points per task) on an executor the caller passed.
MAX_AUTO_CHUNK = 32
#: Most threads a sweep (or a best split) starts: beyond this a machine runs out of threads before it runs
#: points faster (each thread reserves its stack; ``workers=10**6`` aborted the process).
MAX_WORKERS = 1024

# --------------------------------------------------------------------------------------------------
# Running one point (on any worker: a plain module-level function, picklable)


def flatten_summary(summary: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """A summary as flat dotted columns: nested tables are joined with dots, lists become JSON text.

    >>> flatten_summary({"slo": {"attainment": 1.0}, "hotspot": {"busy_over_90": ["decode-0"]}})
    {'slo.attainment': 1.0, 'hotspot.busy_over_90': '["decode-0"]'}
    """
    out: dict[str, Any] = {}
    for key, value in summary.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out.update(flatten_summary(value, name + "."))
        elif isinstance(value, list | tuple):
            out[name] = json.dumps(value, allow_nan=False)
        else:
            out[name] = value
    return out


def run_point(
    point: int, replicate: int, seed: int | None, scenario_text: str, cancel: threading.Event | None = None
) -> dict[str, Any]:
    """Simulate one task and return its table row (point, replicate, seed and the flattened summary).

    This is what a worker runs; it is deterministic in its arguments. ``cancel`` (on the sweep's own threads)
    stops the simulation within milliseconds with :class:`kvwire.Cancelled`.
    """
    summary = simulate(json.loads(scenario_text), cancel=cancel).summary
    return {POINT_COLUMN: point, REPLICATE_COLUMN: replicate, SEED_COLUMN: seed, **flatten_summary(summary)}


def run_points(
    tasks: list[tuple[int, int, int | None, str]], cancel: threading.Event | None = None
) -> list[dict[str, Any]]:
    """:func:`run_point` for a chunk of tasks (one executor task: one scheduler round trip for several points).

    With ``cancel`` (the sweep's own threads, where an event can be shared), no point of the chunk starts once
    it is set and the running one stops: :class:`kvwire.Cancelled`."""
    rows = []
    for t in tasks:
        if cancel is not None and cancel.is_set():
            raise Cancelled(f"sweep stopped before point {t[0]} replicate {t[1]}", "cancel")
        rows.append(run_point(*t, cancel=cancel))
    return rows


# --------------------------------------------------------------------------------------------------
# Output directory


#: A part's file name: ``part-NNNNNN.parquet`` (other names in the directory are not the sweep's and are left alone).
_PART_NAME = re.compile(r"part-(\d{6,})\.parquet")


def _why(e: BaseException) -> str:
    """An OS or Polars error in a few words (``No space left on device``), without a traceback."""
    strerror = getattr(e, "strerror", None)
    return str(strerror) if strerror else (str(e).splitlines() or [type(e).__name__])[0]


class _Output:
    """``out=DIR``: the manifest, the parts already written, and atomic writes of new parts.

    Every failure is a ``ScenarioError`` naming ``out`` and the file; nothing of the user's is deleted (only
    this sweep's own hidden temporary files), and a temporary file that could not be written is removed."""

    def __init__(self, out: str | Path, definition: dict[str, Any], total: int, resume: bool) -> None:
        self.dir = Path(out)
        if self.dir.exists() and not self.dir.is_dir():
            raise ScenarioError(f"out: {self.dir} exists and is not a directory", "out")
        manifest = self.dir / "manifest.json"
        if manifest.exists():
            old = self._manifest(manifest)
            if not resume:
                raise ScenarioError(
                    f"out: {self.dir} already holds a sweep; pass resume=True (--resume) to continue it, or choose "
                    "another directory",
                    "out",
                )
            if not _same_definition(old.get("definition"), definition):
                raise ScenarioError(
                    f"out: {self.dir} was written by a different sweep definition; refusing to mix results "
                    "(choose another directory)",
                    "out",
                )
        else:
            try:
                foreign = self.dir.exists() and any(p for p in self.dir.iterdir() if not p.name.startswith("."))
            except OSError as e:
                raise ScenarioError(f"out: cannot read the directory {self.dir}: {_why(e)}", "out") from None
            if foreign:
                raise ScenarioError(f"out: {self.dir} is not empty and holds no kvwire sweep manifest.json", "out")
            created = not self.dir.exists()
            try:
                self.dir.mkdir(parents=True, exist_ok=True)
            except OSError as e:
                raise ScenarioError(f"out: cannot create the directory {self.dir}: {_why(e)}", "out") from None
            text = json.dumps(
                {
                    "format": MANIFEST_FORMAT,
                    "kvwire_version": _core.__version__,
                    "tasks": total,
                    "definition": definition,
                },
                indent=2,
                allow_nan=False,
            )
            try:
                _atomic_write(manifest, lambda tmp: tmp.write_text(text, encoding="utf-8"))
            except ScenarioError:
                if created:  # leave nothing behind: the directory this call made, now empty again
                    with contextlib.suppress(OSError):
                        self.dir.rmdir()
                raise
        try:
            for tmp in self.dir.glob(".part-*.tmp"):  # torn writes of a killed run: never renamed, never read
                tmp.unlink(missing_ok=True)
            named = [(m, p) for p in self.dir.glob("part-*.parquet") if (m := _PART_NAME.fullmatch(p.name))]
        except OSError as e:
            raise ScenarioError(f"out: cannot read the directory {self.dir}: {_why(e)}", "out") from None
        self.parts = [p for _, p in sorted(named, key=lambda mp: int(mp[0].group(1)))]
        self._seq = 1 + max((int(m.group(1)) for m, _ in named), default=-1)

    def _manifest(self, manifest: Path) -> dict[str, Any]:
        """The manifest of a sweep directory, or a ScenarioError saying what is wrong with it."""
        try:
            old = json.loads(manifest.read_text(encoding="utf-8"))
        except OSError as e:
            raise ScenarioError(f"out: cannot read {manifest}: {_why(e)}", "out") from None
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            raise ScenarioError(
                f"out: {manifest} is not JSON ({_why(e)}): not a kvwire sweep directory, or a damaged one; "
                "choose another directory (nothing in it was changed)",
                "out",
            ) from None
        if not isinstance(old, dict) or old.get("format") != MANIFEST_FORMAT:
            got = old.get("format") if isinstance(old, dict) else type(old).__name__
            raise ScenarioError(
                f"out: {manifest} is not a kvwire sweep manifest (format {MANIFEST_FORMAT!r} expected, got {got!r}); "
                "choose another directory (nothing in it was changed)",
                "out",
            )
        return old

    def _read_part(self, part: Path, columns: list[str] | None = None) -> pl.DataFrame:
        try:
            df = pl.read_parquet(part, columns=columns)
        except (OSError, pl.exceptions.PolarsError) as e:
            raise ScenarioError(
                f"out: {part} cannot be read as a part of this sweep ({_why(e)}); it was left as it is: move it "
                "out of the directory to run its points again",
                "out",
            ) from None
        missing = [c for c in (POINT_COLUMN, REPLICATE_COLUMN) if c not in df.columns]
        if missing:
            raise ScenarioError(
                f"out: {part} is not a part of this sweep (no {missing[0]!r} column); it was left as it is: move it "
                "out of the directory to run its points again",
                "out",
            )
        return df

    def done(self) -> set[tuple[int, int]]:
        """The (point, replicate) pairs already written."""
        keys: set[tuple[int, int]] = set()
        for part in self.parts:
            try:
                df = self._read_part(part, [POINT_COLUMN, REPLICATE_COLUMN])
            except ScenarioError:
                self._read_part(part)  # the clearer error of the two: unreadable, or a missing column
                raise
            keys.update(zip(df[POINT_COLUMN].to_list(), df[REPLICATE_COLUMN].to_list(), strict=True))
        return keys

    def write(self, rows: list[dict[str, Any]]) -> None:
        """Write rows as one new part: a hidden temporary file, then an atomic rename."""
        if not rows:
            return
        name = f"part-{self._seq:06d}.parquet"
        self._seq += 1
        data = _parquet_bytes(_frame(rows), statistics=False)
        _atomic_write(self.dir / name, lambda tmp: tmp.write_bytes(data))
        self.parts.append(self.dir / name)

    def read(self) -> pl.DataFrame:
        return _concat([self._read_part(p) for p in self.parts])

    def write_results(self, table: pl.DataFrame) -> None:
        data = _parquet_bytes(table)
        _atomic_write(self.dir / "results.parquet", lambda tmp: tmp.write_bytes(data))


def _parquet_bytes(table: pl.DataFrame, statistics: bool = True) -> bytes:
    """A table as Parquet bytes, written to the file by Python (so that a full disk or a lost mount is an
    ``OSError`` saying so, not Polars' "Invalid thrift: transport error")."""
    buffer = io.BytesIO()
    table.write_parquet(buffer, statistics=statistics)
    return buffer.getvalue()


def _atomic_write(path: Path, write: Callable[[Path], object]) -> None:
    """``write(tmp)`` to a hidden temporary name next to ``path``, then rename it to ``path``; on failure the
    temporary file is removed and a ScenarioError naming ``out`` and the file says why."""
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        write(tmp)
        os.replace(tmp, path)
    except (OSError, pl.exceptions.PolarsError) as e:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        raise ScenarioError(f"out: cannot write {path}: {_why(e)}", "out") from None


def _same_definition(old: Any, new: Mapping[str, Any]) -> bool:
    """Same base, replicates, and the same grid and zip lists in the same order (so the same point numbers)."""
    if not isinstance(old, Mapping):
        return False
    fresh = json.loads(json.dumps(new))
    return bool(
        old.get("base") == fresh["base"]
        and old.get("replicates") == fresh["replicates"]
        and list((old.get("grid") or {}).items()) == list(fresh["grid"].items())
        and list((old.get("zip") or {}).items()) == list(fresh["zip"].items())
    )


# --------------------------------------------------------------------------------------------------
# Tables


def _frame(rows: list[dict[str, Any]]) -> pl.DataFrame:
    return pl.DataFrame(rows, infer_schema_length=None, strict=False)


def _concat(frames: list[pl.DataFrame]) -> pl.DataFrame:
    frames = [f for f in frames if f.height]
    if not frames:
        return pl.DataFrame()
    return pl.concat(frames, how="diagonal_relaxed") if len(frames) > 1 else frames[0]


def _value_column(values: list[Any]) -> pl.Series:
    """A swept field's values as one column: kept as they are when of one scalar type (int and float mixed
    become float), else each value's JSON text."""
    present = [v for v in values if v is not None]
    kinds = {type(v) for v in present}
    if kinds <= {bool} or kinds <= {int} or kinds <= {str}:
        return pl.Series(values)
    if kinds <= {int, float}:
        return pl.Series([None if v is None else float(v) for v in values], dtype=pl.Float64)
    return pl.Series([json.dumps(v, sort_keys=True) for v in values], dtype=pl.String)


def _column_order(names: Iterable[str], swept: list[str]) -> list[str]:
    fixed = [POINT_COLUMN, *swept, REPLICATE_COLUMN, SEED_COLUMN]
    rank = {s: i for i, s in enumerate(SECTION_ORDER)}
    rest = [n for n in names if n not in fixed]
    rest.sort(key=lambda n: (rank.get(n.split(".", 1)[0], len(rank)), n))
    return [*fixed, *rest]


def t_quantile_975(dof: int) -> float:
    """The 0.975 quantile of Student's t with ``dof`` degrees of freedom (the 95% two-sided interval).

    Exact: bisection on the closed-form CDF for whole degrees of freedom (Abramowitz & Stegun 26.7.3-4).

    >>> round(t_quantile_975(1), 3), round(t_quantile_975(10), 3)
    (12.706, 2.228)
    """
    if dof < 1:
        raise ValueError(f"dof: must be >= 1, got {dof}")

    def central(t: float) -> float:  # P(|T| <= t)
        theta = math.atan(t / math.sqrt(dof))
        s, c2 = math.sin(theta), math.cos(theta) ** 2
        if dof % 2 == 1:
            term, total = math.cos(theta), 0.0
            if dof > 1:
                total = term
                for k in range(3, dof - 1, 2):
                    term *= c2 * (k - 1) / k
                    total += term
            return 2.0 / math.pi * (theta + s * total)
        term, total = 1.0, 1.0
        for k in range(2, dof - 1, 2):
            term *= c2 * (k - 1) / k
            total += term
        return s * total

    lo, hi = 0.0, 1.0
    while central(hi) < 0.95:
        hi *= 2.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if central(mid) < 0.95:
            lo = mid
        else:
            hi = mid
        if hi - lo <= 1e-15 * hi:
            break
    return 0.5 * (lo + hi)


def _with_replicate_stats(df: pl.DataFrame, replicates: int, swept: list[str]) -> pl.DataFrame:
    """Add ``<column>:mean`` and ``<column>:ci95`` (half-width of the 95% t interval) over each point's
    replicates for every numeric summary column."""
    fixed = {POINT_COLUMN, REPLICATE_COLUMN, SEED_COLUMN, *swept}
    numeric = [c for c, t in df.schema.items() if c not in fixed and t.is_numeric()]
    t_of_n = {n: t_quantile_975(n - 1) for n in range(2, replicates + 1)}
    exprs: list[pl.Expr] = []
    for c in numeric:
        n = pl.col(c).count().over(POINT_COLUMN)
        t = n.replace_strict(t_of_n, default=None, return_dtype=pl.Float64)
        exprs.append(pl.col(c).mean().over(POINT_COLUMN).alias(f"{c}:mean"))
        exprs.append((t * pl.col(c).std().over(POINT_COLUMN) / n.cast(pl.Float64).sqrt()).alias(f"{c}:ci95"))
    return df.with_columns(exprs)


def _finish(df: pl.DataFrame, definition: Mapping[str, Any], values: list[dict[str, Any]]) -> pl.DataFrame:
    """The sweep table: rows sorted by (point, replicate), swept values as columns, canonical column order."""
    swept = [*definition["grid"], *definition["zip"]]
    if df.height == 0:
        return df
    df = df.sort(POINT_COLUMN, REPLICATE_COLUMN)
    points = df[POINT_COLUMN].to_list()
    swept_cols = [_value_column([values[p][k] for p in points]).alias(k) for k in swept]
    df = df.with_columns(swept_cols) if swept_cols else df
    df = df.select(_column_order(df.columns, swept))
    if definition["replicates"] > 1:
        df = _with_replicate_stats(df, definition["replicates"], swept)
    return df


# --------------------------------------------------------------------------------------------------
# The sweep


def default_workers() -> int:
    """Threads a sweep or search uses when not told: the cores this process may run on (at least 1)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


def sweep(
    base: Mapping[str, Any] | str | Path | None = None,
    grid: Mapping[str, Any] | None = None,
    *,
    zip: Mapping[str, Any] | None = None,
    replicates: int | None = None,
    workers: int | None = None,
    executor: Executor | None = None,
    out: str | Path | None = None,
    resume: bool = False,
    progress: ProgressFn | bool | None = None,
    cancel: threading.Event | None = None,
    chunk: int | None = None,
) -> pl.DataFrame:
    """Run every point of a sweep and return one row per point and replicate.

    Args:
        base: the base scenario (dict, file, or None for the default), or a whole sweep definition (a dict
            or TOML/JSON file with ``base``, ``grid``, ``zip``, ``replicates``; see :func:`load_sweep`).
        grid: ``{field_path: [values]}``; every combination is a point (first path varies slowest).
        zip: ``{field_path: [values]}``, lists of equal length varied together; points = grid x zip.
        replicates: seeds per point (default 1: every point uses the base seed, common random numbers);
            replicate r > 0 uses :func:`replicate_seed` and the table gains ``<column>:mean`` and
            ``<column>:ci95`` (half-width of the 95% Student-t interval over the point's replicates).
        workers: threads running points (default: all cores; at most :data:`MAX_WORKERS`, 1,024). With
            ``executor``, the number of points kept in flight is twice this (default 256).
        executor: any ``concurrent.futures.Executor`` to run points on, e.g. Dask's
            ``distributed.Client(...).get_executor()``; it is not shut down.
        out: a directory for Parquet parts (``part-NNNNNN.parquet``) and ``manifest.json``; when the sweep
            completes, ``results.parquet`` holds the returned table.
        resume: continue the sweep in ``out``: points already written are not run again.
        progress: ``progress(done, total)``, called from this thread once at the start and after each
            finished point; ``True`` draws a progress bar (:func:`kvwire.progress.progress_bar`) on a
            terminal or in a notebook.
        cancel: a ``threading.Event``; once set, no new point starts, the points in flight finish and are
            written, and :class:`kvwire.Cancelled` is raised (also while the points are being validated).
            Ctrl-C (or a failed write) instead stops the points running on the sweep's own threads within
            milliseconds; no point starts after it.
        chunk: points per executor task (default 1 on the own threads; with ``executor``, total / 256 rounded
            up, at most 32, which amortises a cluster scheduler's per-task cost). A chunk is written when all
            of its points are done, so an interruption loses at most the chunks in flight.

    Returns:
        A Polars DataFrame: ``point``, one column per swept path (named by the path), ``replicate``, ``seed``,
        then the summary flattened to dotted columns (``latency.ttft_s.p99``, ``slo.attainment``,
        ``utilisation.kv-link``, ...; lists as JSON text). Identical, except ``run.wall_s``, whatever the
        worker count, executor or interruptions.

    Raises:
        SweepError: invalid points (all of them, each naming the point and field), before any work.
        ScenarioError: a malformed definition (overlapping keys, more than ``MAX_REPLICATES`` replicates or
            ``MAX_TASKS`` runs), a wrong-typed argument (naming it), or an ``out`` directory that cannot be
            written or that holds a different sweep, a damaged manifest or an unreadable part (nothing of it
            is deleted).
        Cancelled: ``cancel`` was set.

    >>> import kvwire
    >>> df = kvwire.sweep({"workload": {"requests": 100}}, {"workload.arrivals.rate_per_s": [2, 4]},
    ...                   replicates=2, workers=2)
    >>> df.select("point", "workload.arrivals.rate_per_s", "replicate").rows()
    [(0, 2, 0), (0, 2, 1), (1, 4, 0), (1, 4, 1)]
    >>> "slo.attainment:ci95" in df.columns
    True
    """
    check_arguments(workers=workers, executor=executor, progress=progress, cancel=cancel, out=out)
    if not isinstance(resume, bool):
        raise ScenarioError(f"resume: expected True or False, got {resume!r}", "resume")
    if chunk is not None and (isinstance(chunk, bool) or not isinstance(chunk, int) or chunk < 1):
        raise ScenarioError(f"chunk: expected a whole number >= 1, got {chunk!r}", "chunk")
    if progress is True:
        with progress_bar("sweep") as bar:
            return sweep(
                base, grid, zip=zip, replicates=replicates, workers=workers, executor=executor, out=out,
                resume=resume, progress=bar, cancel=cancel, chunk=chunk,
            )  # fmt: skip
    if progress is False:
        progress = None
    definition = definition_of(base, grid, zip, replicates)
    tasks = resolve(definition, cancel)
    values = point_values(definition)
    total = len(tasks)
    output = _Output(out, definition, total, resume) if out is not None else None
    written = output.done() if output is not None else set()
    todo = [t for t in tasks if (t["point"], t["replicate"]) not in written]
    done_count = total - len(todo)
    if progress is not None:
        progress(done_count, total)

    own = executor is None
    n_workers = workers or default_workers()
    # On its own threads the sweep shares ``stop`` with the running points: set when the sweep stops for Ctrl-C,
    # a failed write or any other exception of its own, it ends them (an executor's workers may be processes or
    # other machines, which cannot share an event: their points in flight finish, and are dropped).
    stop = threading.Event()
    pool: Executor = ThreadPoolExecutor(n_workers, thread_name_prefix="kvwire-sweep") if own else executor  # type: ignore[assignment]
    limit = 2 * n_workers if (own or workers) else DEFAULT_IN_FLIGHT
    size = chunk or (1 if own else max(1, min(MAX_AUTO_CHUNK, -(-len(todo) // DEFAULT_IN_FLIGHT))))
    chunks = [todo[i : i + size] for i in range(0, len(todo), size)]
    rows: list[dict[str, Any]] = []
    unwritten: list[dict[str, Any]] = []
    in_flight: dict[Future[list[dict[str, Any]]], list[dict[str, Any]]] = {}
    failure: BaseException | None = None
    last_flush = time.monotonic()
    queue = iter(chunks)
    exhausted = False
    write_failed = False

    def flush() -> None:
        nonlocal last_flush, write_failed
        if output is not None and unwritten:
            try:
                output.write(unwritten)
            except ScenarioError:
                write_failed = True
                raise
        unwritten.clear()
        last_flush = time.monotonic()

    try:
        while True:
            stopping = failure is not None or (cancel is not None and cancel.is_set())
            while not stopping and not exhausted and len(in_flight) < limit:
                part = next(queue, None)
                if part is None:
                    exhausted = True
                    break
                args = [(t["point"], t["replicate"], t["seed"], t["scenario_json"]) for t in part]
                fut = pool.submit(run_points, args, stop) if own else pool.submit(run_points, args)
                in_flight[fut] = part
            if stopping:
                for fut in [f for f in in_flight if f.cancel()]:
                    del in_flight[fut]
            if not in_flight:
                break
            finished, _ = wait(in_flight, timeout=0.1, return_when=FIRST_COMPLETED)
            for fut in sorted(finished, key=lambda f: (in_flight[f][0]["point"], in_flight[f][0]["replicate"])):
                part = in_flight.pop(fut)
                try:
                    got = fut.result()
                except BaseException as e:  # re-raised once the points in flight are written
                    if failure is None:
                        where = ", ".join(f"point {t['point']} replicate {t['replicate']}" for t in part)
                        e.add_note(f"kvwire.sweep: {where}: {part[0]['values']}")
                        failure = e
                    continue
                for row in got:
                    if output is None:
                        rows.append(row)  # with out=DIR the table is read back from the parts instead
                    unwritten.append(row)
                    done_count += 1
                    if progress is not None:
                        progress(done_count, total)
            if unwritten and (time.monotonic() - last_flush >= FLUSH_INTERVAL_S):
                flush()
    except BaseException:
        stop.set()  # the running points of the own threads end; no point of theirs starts
        for fut in in_flight:
            fut.cancel()
        raise
    finally:
        try:
            if not write_failed:
                flush()  # the points that finished (not again after a write that failed)
        finally:
            if own:
                pool.shutdown(wait=True, cancel_futures=True)
    if failure is not None:
        raise failure
    if cancel is not None and cancel.is_set() and done_count < total:
        raise Cancelled(f"sweep cancelled after {done_count} of {total} points", "cancel")
    table = _finish(output.read() if output is not None else _frame(rows), definition, values)
    if output is not None:
        output.write_results(table)
    return table


def check_arguments(
    *,
    workers: Any = None,
    executor: Any = None,
    progress: Any = None,
    cancel: Any = None,
    out: Any = None,
) -> None:
    """Refuse a wrong-typed or out-of-range ``workers``, ``executor``, ``progress``, ``cancel`` or ``out`` of a
    sweep or search with a ``ScenarioError`` naming it (before any work).

    >>> check_arguments(workers=10**6)
    Traceback (most recent call last):
    ...
    kvwire.errors.ScenarioError: workers: expected a whole number from 1 to 1,024 (threads), got 1000000
    """
    if workers is not None and (
        isinstance(workers, bool) or not isinstance(workers, int) or not 1 <= workers <= MAX_WORKERS
    ):
        raise ScenarioError(
            f"workers: expected a whole number from 1 to {MAX_WORKERS:,} (threads), got {workers!r}", "workers"
        )
    if executor is not None and not callable(getattr(executor, "submit", None)):
        raise ScenarioError(
            f"executor: expected a concurrent.futures.Executor (with submit()), got {type(executor).__name__}",
            "executor",
        )
    if progress is not None and not isinstance(progress, bool) and not callable(progress):
        raise ScenarioError(
            f"progress: expected a callable progress(done, total), True or False, got {type(progress).__name__}",
            "progress",
        )
    if cancel is not None and not callable(getattr(cancel, "is_set", None)):
        raise ScenarioError(
            f"cancel: expected a threading.Event (with is_set()), got {type(cancel).__name__}", "cancel"
        )
    if out is not None and not isinstance(out, str | os.PathLike):
        raise ScenarioError(f"out: expected a directory path (str or Path), got {type(out).__name__}", "out")
    if isinstance(out, str) and not out:
        raise ScenarioError("out: expected a directory path, got an empty string", "out")


__all__ = [
    "DEFINITION_KEYS",
    "MAX_WORKERS",
    "check_arguments",
    "default_workers",
    "flatten_summary",
    "load_sweep",
    "replicate_seed",
    "run_point",
    "run_points",
    "sweep",
    "sweep_points",
    "t_quantile_975",
]
