"""Persistence: runs, jobs and traces in SQLite (WAL mode) under the data directory, tables as Parquet beside it.

Layout of the data directory::

    kvwire.sqlite3            runs, jobs, traces (one row each; JSON text columns)
    runs/<id>.parquet         the per-request table of a synchronous simulation
    jobs/<id>/parts/          the sweep's own output directory (``kvwire.sweep(out=...)``: Parquet parts + manifest)
    jobs/<id>/result.parquet  a finished job's result table
    traces/<id>.parquet       an uploaded trace, parsed once (``arrival_s, prompt_tokens, output_tokens``)

Write order makes a crash harmless: files are written to a temporary name and renamed, then the row is
committed; deletion removes the row first, then the files. So a row always has its files, and files without
a row (left by a crash in between) are removed at the next start (:meth:`Store.sweep_orphans`).

>>> import tempfile, polars as pl
>>> store = Store(Path(tempfile.mkdtemp()))
>>> created_s = store.put_run("r1", {"model": "llama3-8b"}, {"requests": {"total": 1}}, [], pl.DataFrame({"id": [0]}))
>>> store.get_run("r1").summary
{'requests': {'total': 1}}
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import sqlite3
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import polars as pl

from kvwire_api.jsonsafe import dumps

SCHEMA_VERSION = 1

_SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    id TEXT PRIMARY KEY,
    created_s REAL NOT NULL,
    requests INTEGER NOT NULL,
    scenario TEXT NOT NULL,
    summary TEXT NOT NULL,
    percentiles TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS runs_created ON runs(created_s);
CREATE TABLE IF NOT EXISTS jobs (
    id TEXT PRIMARY KEY,
    kind TEXT NOT NULL,
    status TEXT NOT NULL,
    created_s REAL NOT NULL,
    started_s REAL,
    finished_s REAL,
    definition TEXT NOT NULL,
    done INTEGER NOT NULL DEFAULT 0,
    total INTEGER,
    restarts INTEGER NOT NULL DEFAULT 0,
    resumed_from INTEGER,
    error TEXT,
    result TEXT,
    replicates INTEGER
);
CREATE INDEX IF NOT EXISTS jobs_created ON jobs(created_s);
CREATE TABLE IF NOT EXISTS traces (
    id TEXT PRIMARY KEY,
    created_s REAL NOT NULL,
    filename TEXT NOT NULL,
    format TEXT NOT NULL,
    requests INTEGER NOT NULL,
    bytes INTEGER NOT NULL,
    duration_s REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS traces_created ON traces(created_s);
"""

#: Job statuses; the last three are terminal.
JOB_STATUSES = ("queued", "running", "done", "failed", "cancelled")
TERMINAL = ("done", "failed", "cancelled")


def new_id() -> str:
    """A fresh identifier (32 hex digits)."""
    return uuid.uuid4().hex


def valid_id(value: str) -> bool:
    """Whether ``value`` has the shape of an identifier this store hands out (so it is safe in a file name).

    >>> valid_id(new_id()), valid_id("../etc/passwd")
    (True, False)
    """
    return len(value) == 32 and all(c in "0123456789abcdef" for c in value)


def _dumps(value: Any) -> str:
    """Strict JSON for a text column: a non-finite float is stored as ``null`` (:mod:`kvwire_api.jsonsafe`)."""
    return dumps(value)


@dataclasses.dataclass(frozen=True)
class RunRecord:
    id: str
    created_s: float
    requests: int
    scenario: dict[str, Any]
    summary: dict[str, Any]
    percentiles: list[dict[str, Any]]


@dataclasses.dataclass(frozen=True)
class JobRecord:
    id: str
    kind: str
    status: str
    created_s: float
    started_s: float | None
    finished_s: float | None
    definition: dict[str, Any]
    done: int
    total: int | None
    restarts: int
    resumed_from: int | None
    error: dict[str, Any] | None
    result: dict[str, Any] | None
    #: A sweep's replicates (its ``total`` is points x replicates); None for other kinds and for sweeps
    #: recorded before the column existed.
    replicates: int | None = None


@dataclasses.dataclass(frozen=True)
class TraceRecord:
    id: str
    created_s: float
    filename: str
    format: str
    requests: int
    bytes: int
    duration_s: float


def write_parquet_atomic(df: pl.DataFrame, path: Path) -> None:
    """Write ``df`` to ``path`` through a temporary file and a rename, so ``path`` is whole or absent."""
    tmp = path.with_name(f"{path.name}.tmp-{uuid.uuid4().hex[:8]}")
    try:
        df.write_parquet(tmp, compression="uncompressed", statistics=False)  # simulated floats barely compress
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


class Store:
    """SQLite + Parquet store under ``root`` (created if missing). Safe to use from several threads: each
    thread gets its own connection."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        for sub in ("runs", "jobs", "traces"):
            (self.root / sub).mkdir(parents=True, exist_ok=True)
        self.db_path = self.root / "kvwire.sqlite3"
        self._local = threading.local()
        c = self._conn()
        version = c.execute("PRAGMA user_version").fetchone()[0]
        if version > SCHEMA_VERSION:
            raise RuntimeError(f"{self.db_path}: written by a newer kvwire-api (schema {version} > {SCHEMA_VERSION})")
        c.executescript(f"BEGIN IMMEDIATE; {_SCHEMA} PRAGMA user_version = {SCHEMA_VERSION}; COMMIT;")
        self._add_columns(c)

    @staticmethod
    def _add_columns(c: sqlite3.Connection) -> None:
        """Columns added to a table after databases with it were written (nullable, so an older kvwire-api
        still reads the table: the schema version stays)."""
        have = {r["name"] for r in c.execute("PRAGMA table_info(jobs)")}
        if "replicates" not in have:
            c.execute("ALTER TABLE jobs ADD COLUMN replicates INTEGER")

    # ----------------------------------------------------------------------------------------------
    # connections

    def _conn(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(self.db_path, timeout=30.0, isolation_level=None)
            conn.execute("PRAGMA journal_mode=WAL")
            # NORMAL in WAL mode: a committed transaction survives a crash of the process; only a power loss
            # can undo the last commits (the database stays consistent either way).
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.execute("PRAGMA foreign_keys=ON")
            conn.row_factory = sqlite3.Row
            self._local.conn = conn
        return conn

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        c = self._conn()
        c.execute("BEGIN IMMEDIATE")
        try:
            yield c
        except BaseException:
            c.execute("ROLLBACK")
            raise
        c.execute("COMMIT")

    def close(self) -> None:
        """Close this thread's connection (others close when their threads end)."""
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None

    # ----------------------------------------------------------------------------------------------
    # runs

    def run_path(self, run_id: str) -> Path:
        return self.root / "runs" / f"{run_id}.parquet"

    def put_run(
        self,
        run_id: str,
        scenario: dict[str, Any],
        summary: dict[str, Any],
        percentiles: list[dict[str, Any]],
        requests: pl.DataFrame,
    ) -> float:
        """Store a finished simulation: its per-request table first, then its row; returns its creation time."""
        write_parquet_atomic(requests, self.run_path(run_id))
        return self.insert_run(run_id, scenario, summary, percentiles, requests.height)

    def insert_run(
        self,
        run_id: str,
        scenario: dict[str, Any],
        summary: dict[str, Any],
        percentiles: list[dict[str, Any]],
        n_requests: int,
    ) -> float:
        """Commit the row of a run whose table :meth:`run_path` is already written; returns its creation time."""
        created = time.time()
        with self._tx() as c:
            c.execute(
                "INSERT INTO runs (id, created_s, requests, scenario, summary, percentiles) VALUES (?,?,?,?,?,?)",
                (run_id, created, n_requests, _dumps(scenario), _dumps(summary), _dumps(percentiles)),
            )
        return created

    def get_run(self, run_id: str) -> RunRecord | None:
        row = self._conn().execute("SELECT * FROM runs WHERE id = ?", (run_id,)).fetchone()
        if row is None:
            return None
        return RunRecord(
            id=row["id"],
            created_s=row["created_s"],
            requests=row["requests"],
            scenario=json.loads(row["scenario"]),
            summary=json.loads(row["summary"]),
            percentiles=json.loads(row["percentiles"]),
        )

    def list_runs(self, limit: int, offset: int = 0) -> list[dict[str, Any]]:
        """The newest runs first: id, creation time, request count, and what the run was (model, mode, link and
        arrival rate of its resolved scenario) and how it went (TTFT and TPOT p99, SLO attainment); ``None``
        where the run has no such figure (a colocated run has no link, a replayed trace no rate)."""
        rows = self._conn().execute(
            "SELECT id, created_s, requests,"
            " json_extract(scenario, '$.model.name') AS model,"
            " json_extract(scenario, '$.mode') AS mode,"
            " json_extract(scenario, '$.link.name') AS link,"
            " json_extract(scenario, '$.workload.arrivals.rate_per_s') AS rate_per_s,"
            " json_extract(summary, '$.latency.ttft_s.p99') AS ttft_p99_s,"
            " json_extract(summary, '$.latency.tpot_s.p99') AS tpot_p99_s,"
            " json_extract(summary, '$.slo.attainment') AS slo_attainment"
            " FROM runs ORDER BY created_s DESC, id LIMIT ? OFFSET ?",
            (limit, offset),
        )
        return [dict(r) for r in rows]

    def delete_run(self, run_id: str) -> bool:
        with self._tx() as c:
            deleted = c.execute("DELETE FROM runs WHERE id = ?", (run_id,)).rowcount > 0
        self.run_path(run_id).unlink(missing_ok=True)
        return deleted

    def trim_runs(self, keep: int) -> int:
        """Delete all but the newest ``keep`` runs; returns how many were deleted."""
        rows = (
            self._conn()
            .execute("SELECT id FROM runs ORDER BY created_s DESC, id LIMIT -1 OFFSET ?", (keep,))
            .fetchall()
        )
        for r in rows:
            self.delete_run(r["id"])
        return len(rows)

    # ----------------------------------------------------------------------------------------------
    # jobs

    def job_dir(self, job_id: str) -> Path:
        return self.root / "jobs" / job_id

    def put_job(
        self, job_id: str, kind: str, definition: dict[str, Any], total: int | None, replicates: int | None = None
    ) -> None:
        """Record a new queued job (its directory first, then the row)."""
        self.job_dir(job_id).mkdir(parents=True, exist_ok=True)
        with self._tx() as c:
            c.execute(
                "INSERT INTO jobs (id, kind, status, created_s, definition, total, replicates) VALUES (?,?,?,?,?,?,?)",
                (job_id, kind, "queued", time.time(), _dumps(definition), total, replicates),
            )

    def update_job(self, job_id: str, **fields: Any) -> None:
        """Set columns of a job (``error`` and ``result`` are stored as JSON)."""
        if not fields:
            return
        cols = []
        values: list[Any] = []
        for k, v in fields.items():
            if k not in (
                "status",
                "started_s",
                "finished_s",
                "done",
                "total",
                "restarts",
                "resumed_from",
                "error",
                "result",
            ):
                raise KeyError(k)
            cols.append(f"{k} = ?")
            values.append(_dumps(v) if k in ("error", "result") and v is not None else v)
        with self._tx() as c:
            c.execute(f"UPDATE jobs SET {', '.join(cols)} WHERE id = ?", (*values, job_id))

    def get_job(self, job_id: str, definition: bool = True) -> JobRecord | None:
        """A job's row (``definition=False`` skips reading its definition, which may be large)."""
        cols = (
            "*"
            if definition
            else "id, kind, status, created_s, started_s, finished_s, '{}' AS definition, "
            "done, total, restarts, resumed_from, error, result, replicates"
        )
        row = self._conn().execute(f"SELECT {cols} FROM jobs WHERE id = ?", (job_id,)).fetchone()
        return None if row is None else _job(row)

    def list_jobs(self, kind: str | None = None, statuses: tuple[str, ...] | None = None) -> list[JobRecord]:
        """Jobs, oldest first, optionally of one kind and some statuses."""
        sql = "SELECT * FROM jobs"
        where, args = [], []
        if kind is not None:
            where.append("kind = ?")
            args.append(kind)
        if statuses is not None:
            where.append(f"status IN ({','.join('?' * len(statuses))})")
            args.extend(statuses)
        if where:
            sql += " WHERE " + " AND ".join(where)
        rows = self._conn().execute(sql + " ORDER BY created_s, id", args)
        return [_job(r) for r in rows]

    def delete_job(self, job_id: str, files: bool = True) -> bool:
        """Delete a job's row, then (``files=True``) its directory; whether there was a row."""
        with self._tx() as c:
            deleted = c.execute("DELETE FROM jobs WHERE id = ?", (job_id,)).rowcount > 0
        if files:
            shutil.rmtree(self.job_dir(job_id), ignore_errors=True)
        return deleted

    def trim_jobs(self, keep: int) -> int:
        """Delete the oldest finished jobs beyond the newest ``keep`` finished ones."""
        rows = (
            self._conn()
            .execute(
                f"SELECT id FROM jobs WHERE status IN ({','.join('?' * len(TERMINAL))}) "
                "ORDER BY created_s DESC, id LIMIT -1 OFFSET ?",
                (*TERMINAL, keep),
            )
            .fetchall()
        )
        for r in rows:
            self.delete_job(r["id"])
        return len(rows)

    # ----------------------------------------------------------------------------------------------
    # traces

    def trace_path(self, trace_id: str) -> Path:
        return self.root / "traces" / f"{trace_id}.parquet"

    def put_trace(self, trace_id: str, filename: str, fmt: str, table: pl.DataFrame, nbytes: int) -> TraceRecord:
        write_parquet_atomic(table, self.trace_path(trace_id))
        duration = float(table.select(pl.col("arrival_s").max()).item() or 0.0) if table.height else 0.0
        rec = TraceRecord(trace_id, time.time(), filename, fmt, table.height, nbytes, duration)
        with self._tx() as c:
            c.execute(
                "INSERT INTO traces (id, created_s, filename, format, requests, bytes, duration_s) "
                "VALUES (?,?,?,?,?,?,?)",
                dataclasses.astuple(rec),
            )
        return rec

    def get_trace(self, trace_id: str) -> TraceRecord | None:
        row = self._conn().execute("SELECT * FROM traces WHERE id = ?", (trace_id,)).fetchone()
        return None if row is None else TraceRecord(**dict(row))

    def list_traces(self) -> list[TraceRecord]:
        rows = self._conn().execute("SELECT * FROM traces ORDER BY created_s DESC, id")
        return [TraceRecord(**dict(r)) for r in rows]

    def delete_trace(self, trace_id: str) -> bool:
        with self._tx() as c:
            deleted = c.execute("DELETE FROM traces WHERE id = ?", (trace_id,)).rowcount > 0
        self.trace_path(trace_id).unlink(missing_ok=True)
        return deleted

    def trim_traces(self, keep: int) -> int:
        rows = (
            self._conn()
            .execute("SELECT id FROM traces ORDER BY created_s DESC, id LIMIT -1 OFFSET ?", (keep,))
            .fetchall()
        )
        for r in rows:
            self.delete_trace(r["id"])
        return len(rows)

    # ----------------------------------------------------------------------------------------------
    # housekeeping

    def sweep_orphans(self) -> list[Path]:
        """Remove temporary files and files whose row does not exist (left by a crash); returns them."""
        c = self._conn()
        runs = {r[0] for r in c.execute("SELECT id FROM runs")}
        jobs = {r[0] for r in c.execute("SELECT id FROM jobs")}
        traces = {r[0] for r in c.execute("SELECT id FROM traces")}
        removed: list[Path] = []
        for sub, known in (("runs", runs), ("traces", traces)):
            for p in (self.root / sub).iterdir():
                if ".tmp-" in p.name or p.name.split(".", 1)[0] not in known:
                    p.unlink(missing_ok=True)
                    removed.append(p)
        for p in (self.root / "jobs").iterdir():
            if p.name not in jobs:
                shutil.rmtree(p, ignore_errors=True)
                removed.append(p)
            else:
                for tmp in p.glob("*.tmp-*"):
                    tmp.unlink(missing_ok=True)
                    removed.append(tmp)
        return removed


def _job(row: sqlite3.Row) -> JobRecord:
    return JobRecord(
        id=row["id"],
        kind=row["kind"],
        status=row["status"],
        created_s=row["created_s"],
        started_s=row["started_s"],
        finished_s=row["finished_s"],
        definition=json.loads(row["definition"]),
        done=row["done"],
        total=row["total"],
        restarts=row["restarts"],
        resumed_from=row["resumed_from"],
        error=None if row["error"] is None else json.loads(row["error"]),
        result=None if row["result"] is None else json.loads(row["result"]),
        replicates=row["replicates"],
    )


__all__ = [
    "JOB_STATUSES",
    "TERMINAL",
    "JobRecord",
    "RunRecord",
    "Store",
    "TraceRecord",
    "new_id",
    "valid_id",
    "write_parquet_atomic",
]
