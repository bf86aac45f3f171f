"""Long work as jobs: sweeps (``kvwire.sweep``), capacity searches (``kvwire.capacity``), best splits
(``kvwire.best_split``) and plans (``kvwire.plan``).

A job is a row in the store before its id is returned (202), so an acknowledged job is never lost. A runner
thread takes queued jobs in order (``max_running_jobs`` at a time) and calls the library with ``progress=``
(an in-memory counter the status and Server-Sent-Events endpoints read) and ``cancel=`` (a
``threading.Event``). Sweeps write their points under the job's directory (``out=``, ``resume=True``), so a job
interrupted by a crash or a restart resumes from its finished points when the service starts again; a
capacity search or best split is deterministic and simply runs again; a plan resumes from its finished
evaluations (``kvwire.plan(out=...)``). A job interrupted more than ``max_job_restarts`` times, or running past
``job_timeout_s``, is marked failed with its finished points kept.

With a Dask cluster (:class:`kvwire_api.cluster.Cluster`, ``kvwire serve --dask``), a job kind whose work
function takes ``executor`` gets a Dask executor of its own and runs through the library's executor path: a
sweep's chunks as tasks (their parts written here, so resuming, cancelling and progress work as locally), a
capacity search's or best split's simulations as tasks, a plan's configurations' capacity searches as tasks. A
kind whose function takes no ``executor`` runs in this process's threads, as without a cluster.

Cancelling (:meth:`JobRunner.cancel`) stops a job and keeps it, ``cancelled``, with its finished points. Deleting
(:meth:`JobRunner.delete`) removes its row at once (so every read of it answers "not found" and it is never
resumed) and stops it; a running job's directory is removed by its thread once the in-flight points end, so the
work never writes into a directory that has gone, and nothing it does afterwards re-creates the row
(:meth:`Store.update_job` only updates an existing row).
"""

from __future__ import annotations

import collections
import dataclasses
import inspect
import json
import logging
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import Executor
from pathlib import Path
from typing import Any

import kvwire
import polars as pl

from kvwire_api.cluster import Cluster, thread_executor
from kvwire_api.config import Settings
from kvwire_api.errors import error_body
from kvwire_api.store import JobRecord, Store, write_parquet_atomic
from kvwire_api.types import ExecutorDict, JobExecutorDict

log = logging.getLogger("kvwire_api.jobs")

Progress = Callable[[int, int], None]
#: A job kind: (definition, output directory, progress, cancel, workers) -> (result table, result dict or None).
#: A kind that can run on a Dask cluster also takes ``executor`` (a keyword with default None: the executor of
#: the cluster, or None to run in this process), and is passed it only when the service has a cluster.
Work = Callable[
    [dict[str, Any], Path, Progress, threading.Event, int | None], tuple[pl.DataFrame, dict[str, Any] | None]
]


def takes_executor(work: Work) -> bool:
    """Whether a job kind's work function takes ``executor`` (so runs on a cluster when there is one)."""
    try:
        return "executor" in inspect.signature(work).parameters
    except (TypeError, ValueError):  # pragma: no cover - a builtin without a signature
        return False


def run_sweep(
    definition: dict[str, Any],
    out: Path,
    progress: Progress,
    cancel: threading.Event,
    workers: int | None,
    executor: Executor | None = None,
) -> tuple[pl.DataFrame, dict[str, Any] | None]:
    """A sweep job: ``kvwire.sweep`` writing its points under ``out`` and resuming from those already there;
    with ``executor``, its chunks run on it (in flight: as many as the library keeps for an executor)."""
    table = kvwire.sweep(
        definition,
        out=out,
        resume=True,
        workers=workers if executor is None else None,
        executor=executor,
        progress=progress,
        cancel=cancel,
    )
    return table, None


def run_capacity(
    definition: dict[str, Any],
    out: Path,
    progress: Progress,
    cancel: threading.Event,
    workers: int | None,
    executor: Executor | None = None,
) -> tuple[pl.DataFrame, dict[str, Any] | None]:
    """A capacity job: ``kvwire.capacity`` (deterministic, so an interrupted search simply runs again); with
    ``executor``, each of its simulations runs on it in turn (the search is sequential)."""
    args = {k: v for k, v in definition.items() if k != "scenario"}
    res = kvwire.capacity(definition["scenario"], **args, progress=progress, cancel=cancel, executor=executor)
    result = {k: v for k, v in res.to_dict().items() if k != "points"}  # the points are the result table
    return res.points, result


def run_split(
    definition: dict[str, Any],
    out: Path,
    progress: Progress,
    cancel: threading.Event,
    workers: int | None,
    executor: Executor | None = None,
) -> tuple[pl.DataFrame, dict[str, Any] | None]:
    """A best-split job: ``kvwire.best_split`` (deterministic, so an interrupted search simply runs again);
    progress counts splits. With ``executor``, the splits' simulations run on it side by side."""
    args = {k: v for k, v in definition.items() if k != "scenario"}
    res = kvwire.best_split(
        definition["scenario"],
        **args,
        workers=workers if executor is None else None,
        progress=progress,
        cancel=cancel,
        executor=executor,
    )
    result = {k: v for k, v in res.to_dict().items() if k != "points"}  # the points are the result table
    return res.points, result


#: The key of a plan definition that holds the uploaded trace its workload names: {"id", "file"} (the service's
#: own file, set by the route's ``prepare_plan``; :func:`run_plan` takes it out and puts the id back into the
#: scenarios it returns, so that no result names the file).
PLAN_TRACE_KEY = "_uploaded_trace"


def _trace_id_into(scenario: Any, upload: Mapping[str, str]) -> None:
    """A returned scenario's ``workload.trace`` naming the uploaded trace's id again (in place of its file)."""
    trace = scenario.get("workload", {}).get("trace") if isinstance(scenario, dict) else None
    if isinstance(trace, dict) and trace.get("file") == upload["file"]:
        trace["file"] = upload["id"]
        trace.pop("format", None)


def run_plan(
    definition: dict[str, Any],
    out: Path,
    progress: Progress,
    cancel: threading.Event,
    workers: int | None,
    executor: Executor | None = None,
) -> tuple[pl.DataFrame, dict[str, Any] | None]:
    """A plan job: ``kvwire.plan`` writing its finished evaluations under ``out``, so an interrupted plan resumes
    from them; progress counts configurations decided. The result is ``PlanResult.to_dict()`` without its table
    (the result table) and with its text ``report``. With ``executor``, each configuration's capacity search is
    one task on it (eight a round, as on threads)."""
    upload = definition.get(PLAN_TRACE_KEY)
    args = {k: v for k, v in definition.items() if k not in ("model", "gpus", PLAN_TRACE_KEY)}
    res = kvwire.plan(
        definition["model"],
        definition["gpus"],
        **args,
        workers=workers if executor is None else None,
        progress=progress,
        cancel=cancel,
        executor=executor,
        out=out,
    )
    result = {k: v for k, v in res.to_dict().items() if k != "table"}
    result["report"] = res.report()
    if upload is not None:
        for sc in [*([result["best"]["scenario"]] if result.get("best") else []), *result["frontier_scenarios"]]:
            _trace_id_into(sc, upload)
    return res.table, result


KINDS: dict[str, Work] = {"sweep": run_sweep, "capacity": run_capacity, "split": run_split, "plan": run_plan}
#: What a job's ``done`` and ``total`` count, by kind: a sweep's runs (one simulation of one point's replicate:
#: ``total`` = points x replicates), a capacity search's evaluations (one simulation each; the total is unknown
#: until the search ends), a best split's splits (each a whole capacity search), a plan's configurations (each
#: evaluated by a capacity search, or pruned by its ceiling).
UNITS: dict[str, str] = {"sweep": "runs", "capacity": "evaluations", "split": "splits", "plan": "configurations"}


def partial_table(out: Path, definition: dict[str, Any]) -> pl.DataFrame | None:
    """The points a sweep has written under ``out`` so far (its Parquet parts, sorted by point and replicate,
    with one column per swept field as in the finished table), or None if there are none yet."""
    parts = sorted(out.glob("part-*.parquet"))
    if not parts:
        return None
    df = pl.concat([pl.read_parquet(p) for p in parts], how="diagonal_relaxed").sort("point", "replicate")
    swept = [*definition.get("grid", {}), *definition.get("zip", {})]
    if swept:
        values = {t["point"]: t["values"] for t in kvwire.sweep_points(definition)}
        cols = []
        for key in swept:
            column = [values[p][key] for p in df["point"].to_list()]
            try:
                cols.append(pl.Series(key, column, strict=True))
            except (TypeError, pl.exceptions.PolarsError):  # mixed kinds: as JSON text, as the library does
                cols.append(pl.Series(key, [json.dumps(v, sort_keys=True) for v in column], dtype=pl.String))
        df = df.with_columns(cols).select("point", *swept, pl.exclude("point", *swept))
    return df


@dataclasses.dataclass
class LiveJob:
    """What the runner knows about a queued or running job beyond its row."""

    id: str
    kind: str
    cancel: threading.Event = dataclasses.field(default_factory=threading.Event)
    #: Why ``cancel`` was set: "cancel" (a client), "shutdown" (the service stops) or "timeout".
    reason: str | None = None
    #: Deleted by a client: its row is gone; its thread removes its directory when it stops.
    deleted: bool = False
    running: bool = False
    #: When this job first started (set as it is handed a thread, so a running job always has one).
    started_s: float | None = None
    done: int = 0
    total: int | None = None
    #: Progress at the first report of this session, and when it came (for the ETA).
    first_done: int | None = None
    first_at: float | None = None
    last_saved: float = 0.0
    version: int = 0

    def eta_s(self, now: float) -> float | None:
        if self.first_done is None or self.first_at is None or self.total is None:
            return None
        advanced = self.done - self.first_done
        if advanced <= 0:
            return None
        return (self.total - self.done) * (now - self.first_at) / advanced


class JobRunner:
    """Runs queued jobs in threads, one at a time by default; see the module docstring."""

    def __init__(
        self,
        store: Store,
        settings: Settings,
        kinds: dict[str, Work] | None = None,
        cluster: Cluster | None = None,
    ) -> None:
        self.store = store
        self.settings = settings
        self.kinds = dict(KINDS if kinds is None else kinds)
        #: The Dask cluster the jobs run on (None: this process's threads).
        self.cluster = cluster
        #: The kinds that run on the cluster when there is one (their work takes ``executor``): read once here,
        #: not on every status document.
        self.on_cluster = frozenset(k for k, w in self.kinds.items() if takes_executor(w))
        self._lock = threading.Lock()
        self._queue: collections.deque[str] = collections.deque()
        self._live: dict[str, LiveJob] = {}
        self._threads: dict[str, threading.Thread] = {}
        self._stopping = False

    # ----------------------------------------------------------------------------------------------
    # lifecycle

    def recover(self) -> list[str]:
        """At start: queue again every job that was queued or running when the service stopped (a running one
        counts a restart; past ``max_job_restarts`` it is marked failed, its finished points kept)."""
        resumed = []
        for rec in self.store.list_jobs(statuses=("queued", "running")):
            if rec.status == "running":
                restarts = rec.restarts + 1
                if restarts > self.settings.max_job_restarts:
                    self.store.update_job(
                        rec.id,
                        status="failed",
                        finished_s=time.time(),
                        restarts=restarts,
                        error={
                            "status_code": 500,
                            "detail": f"interrupted {restarts} times (the service stopped or crashed while it "
                            "ran); not resumed again. The finished points are kept.",
                        },
                    )
                    continue
                self.store.update_job(rec.id, status="queued", restarts=restarts)
            resumed.append(rec.id)
            self._enqueue(rec)
        self._start_next()
        return resumed

    def shutdown(self, timeout_s: float = 10.0) -> None:
        """Stop: running jobs are asked to stop after their in-flight points and stay queued for the next start."""
        with self._lock:
            self._stopping = True
            live = [j for j in self._live.values() if j.running]
            threads = list(self._threads.values())
        for j in live:
            j.reason = "shutdown"
            j.cancel.set()
        deadline = time.monotonic() + timeout_s
        for t in threads:
            t.join(max(0.0, deadline - time.monotonic()))
        for j in live:
            thread = self._threads.get(j.id)
            if thread is not None and thread.is_alive():  # still finishing a point: it resumes at the next start
                self.store.update_job(j.id, status="queued", done=j.done)

    # ----------------------------------------------------------------------------------------------
    # requests

    def submit(self, kind: str, definition: dict[str, Any], total: int | None, job_id: str) -> JobRecord:
        """Record a job as queued (durably) and start it when a runner is free."""
        if kind not in self.kinds:
            raise KeyError(kind)
        replicates = definition.get("replicates") if kind == "sweep" else None
        self.store.put_job(job_id, kind, definition, total, replicates if isinstance(replicates, int) else None)
        rec = self.store.get_job(job_id)
        assert rec is not None
        self._enqueue(rec)
        self._start_next()
        self.store.trim_jobs(self.settings.max_jobs)
        return rec

    def cancel(self, job_id: str) -> bool:
        """Cancel a queued or running job; False if it is not active (finished, or unknown)."""
        with self._lock:
            job = self._live.get(job_id)
            if job is None:
                return False
            if not job.running:
                self._queue.remove(job_id)
                del self._live[job_id]
                queued = True
            else:
                job.reason = "cancel"
                job.cancel.set()
                queued = False
        if queued:
            self.store.update_job(job_id, status="cancelled", finished_s=time.time())
        return True

    def delete(self, job_id: str) -> bool:
        """Delete a job in any state; False if there is no such row. Its row goes at once; a queued job leaves
        the queue and its files go too; a running job is stopped and its thread removes its files when the
        in-flight points end (a crash before that leaves files without a row, removed at the next start)."""
        with self._lock:
            job = self._live.get(job_id)
            later = False
            if job is not None:
                if job.running:
                    job.deleted = True
                    job.cancel.set()
                    later = True
                else:
                    self._queue.remove(job_id)
                    del self._live[job_id]
        return self.store.delete_job(job_id, files=not later)

    def counts(self) -> dict[str, int]:
        """Jobs this process is running and holding in its queue (from memory)."""
        with self._lock:
            running = sum(1 for j in self._live.values() if j.running)
            return {"running": running, "queued": len(self._live) - running}

    def live(self, job_id: str) -> LiveJob | None:
        return self._live.get(job_id)

    def describe(self) -> ExecutorDict:
        """What runs the jobs: the cluster (its scheduler, workers and threads) or this process's threads."""
        if self.cluster is not None:
            return self.cluster.describe()
        return thread_executor(self.settings.job_workers)

    def where(self, kind: str) -> JobExecutorDict:
        """Where a job of ``kind`` runs: on the cluster when there is one and the kind takes an executor."""
        if self.cluster is not None and kind in self.on_cluster:
            return {"kind": "dask", "scheduler": self.cluster.address}
        return {"kind": "threads", "scheduler": None}

    def snapshot(self, rec: JobRecord) -> dict[str, Any]:
        """The status document of a job: its row with the live progress of a running one."""
        job = self._live.get(rec.id)
        done, total = rec.done, rec.total
        eta = None
        status = rec.status
        started_s = rec.started_s
        resumed_from = None if rec.resumed_from is None else self._resumed_from(rec.kind, rec.resumed_from)
        if job is not None:
            done, total = max(done, job.done), job.total if job.total is not None else total
            eta = job.eta_s(time.monotonic())
            if job.running:
                status = "running"
                started_s = started_s if started_s is not None else job.started_s
            if job.first_done is not None:
                resumed_from = self._resumed_from(rec.kind, job.first_done)
        replicates = rec.replicates if rec.kind == "sweep" else None
        return {
            "id": rec.id,
            "kind": rec.kind,
            "status": status,
            "done": done,
            "total": total,
            "eta_s": eta if status == "running" else (0.0 if status == "done" else None),
            "cancel_requested": bool(job is not None and job.reason == "cancel"),
            "created_s": rec.created_s,
            "started_s": started_s,
            "finished_s": rec.finished_s,
            "restarts": rec.restarts,
            "resumed_from": resumed_from,
            "error": rec.error,
            "result": rec.result,
            "unit": UNITS.get(rec.kind, "runs"),
            "points": total // replicates if replicates and total is not None else None,
            "replicates": replicates,
            "executor": self.where(rec.kind),
        }

    @staticmethod
    def _resumed_from(kind: str, first_done: int) -> int | None:
        """The points a run of a job found already finished: only a sweep resumes (a capacity search or best
        split runs again from the start), and a run that found none did not resume anything."""
        return first_done if kind == "sweep" and first_done > 0 else None

    # ----------------------------------------------------------------------------------------------
    # internals

    def _enqueue(self, rec: JobRecord) -> None:
        with self._lock:
            if rec.id not in self._live:
                self._live[rec.id] = LiveJob(id=rec.id, kind=rec.kind, done=rec.done, total=rec.total)
                self._queue.append(rec.id)

    def _start_next(self) -> None:
        with self._lock:
            while (
                not self._stopping
                and self._queue
                and sum(1 for j in self._live.values() if j.running) < self.settings.max_running_jobs
            ):
                job = self._live[self._queue.popleft()]
                job.running = True
                job.started_s = job.started_s or time.time()
                t = threading.Thread(target=self._run, args=(job,), name=f"kvwire-job-{job.id[:8]}", daemon=True)
                self._threads[job.id] = t
                t.start()

    def _progress(self, job: LiveJob) -> Progress:
        def progress(done: int, total: int) -> None:
            now = time.monotonic()
            if job.first_done is None:
                job.first_done, job.first_at = done, now
                self.store.update_job(job.id, resumed_from=self._resumed_from(job.kind, done))
            job.done, job.total = done, total
            job.version += 1
            if now - job.last_saved >= 1.0 or done >= total:
                job.last_saved = now
                self.store.update_job(job.id, done=done, total=total)

        return progress

    def _timeout(self, job: LiveJob) -> None:
        if job.reason is None:
            job.reason = "timeout"
            job.cancel.set()

    def _run(self, job: LiveJob) -> None:
        timer = threading.Timer(self.settings.job_timeout_s, self._timeout, args=(job,))
        timer.daemon = True
        try:
            rec = self.store.get_job(job.id)
            if rec is None:  # deleted meanwhile
                return
            if rec.started_s is not None:  # a job started before a restart keeps its first start
                job.started_s = rec.started_s
            self.store.update_job(job.id, status="running", started_s=job.started_s or time.time())
            job.version += 1
            timer.start()
            out = self.store.job_dir(job.id)
            self._finish(job, out, rec)
        except Exception:  # never let a job thread die silently
            if not job.deleted:  # a deleted job's work may fail on its files going; nothing to report
                log.exception("job %s: runner failed", job.id)
                self._fail(job, {"status_code": 500, "detail": "internal error in the job runner (see the server log)"})
        finally:
            timer.cancel()
            with self._lock:
                self._live.pop(job.id, None)
                self._threads.pop(job.id, None)
                deleted = job.deleted  # read under the lock: a later delete finds no live job and removes the files
            if deleted:
                self.store.delete_job(job.id)  # the row is already gone; this removes the files
            job.version += 1
            self._start_next()

    def _finish(self, job: LiveJob, out: Path, rec: JobRecord) -> None:
        work = self.kinds[rec.kind]
        extra: dict[str, Any] = {}
        if self.cluster is not None and rec.kind in self.on_cluster:
            extra["executor"] = self.cluster.executor()
        try:
            table, result = work(
                rec.definition, out / "parts", self._progress(job), job.cancel, self.settings.job_workers, **extra
            )
        except kvwire.Cancelled:
            if job.deleted:
                return
            if job.reason == "shutdown":
                self.store.update_job(job.id, status="queued", done=job.done)
            elif job.reason == "timeout":
                self._fail(
                    job,
                    {
                        "status_code": 504,
                        "detail": f"the job ran longer than its limit of {self.settings.job_timeout_s:g} s and was "
                        "stopped; the points it finished are kept (GET .../results)",
                    },
                )
            else:
                self.store.update_job(job.id, status="cancelled", finished_s=time.time(), done=job.done)
            return
        except kvwire.KvwireError as e:
            if not job.deleted:
                self._fail(job, error_body(e, 422))
            return
        except Exception as e:
            if not extra or self.cluster is None:
                raise
            # on the cluster: a task whose worker died too often (KilledWorker), a scheduler gone, ...
            if not job.deleted:
                log.warning("job %s: failed on the Dask cluster at %s: %r", job.id, self.cluster.address, e)
                why = (str(e).strip().splitlines() or [type(e).__name__])[0]
                self._fail(
                    job,
                    {
                        "status_code": 502,
                        "detail": f"the job failed on the Dask cluster at {self.cluster.address} "
                        f"({type(e).__name__}: {why}); the points it finished are kept",
                    },
                )
            return
        if job.deleted:  # deleted as its last point ended: write nothing
            return
        write_parquet_atomic(table, out / "result.parquet")
        # done = total, in the job's unit: a sweep's runs and a capacity search's evaluations are the table's
        # rows (the search's total was open until now); a best split's are its splits (its table has a row per
        # evaluation of every split).
        n = table.height if rec.kind != "split" else (job.total if job.total is not None else rec.total or 0)
        self.store.update_job(job.id, status="done", finished_s=time.time(), done=n, total=n, result=result)
        job.done = job.total = n

    def _fail(self, job: LiveJob, error: dict[str, Any]) -> None:
        self.store.update_job(job.id, status="failed", finished_s=time.time(), done=job.done, error=error)


__all__ = [
    "KINDS",
    "UNITS",
    "JobRunner",
    "LiveJob",
    "partial_table",
    "run_capacity",
    "run_split",
    "run_sweep",
    "takes_executor",
]
