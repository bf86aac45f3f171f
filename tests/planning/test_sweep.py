"""kvwire.sweep: grid x zip x replicates, validation before work, determinism whatever the workers, resumable
Parquet output (a real sweep subprocess killed with SIGKILL, then resumed), cancel and progress.

Oracles: the points and seeds are checked against the definition (product order, SplitMix64 by hand), the
rows against single ``kvwire.simulate`` runs, the confidence intervals against numpy and published Student-t
quantiles, and the resume against an uninterrupted run of the same definition.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import kvwire
import numpy as np
import polars as pl
import pytest
from kvwire.planning.sweep import replicate_seed, t_quantile_975
from polars.testing import assert_frame_equal
from shared_paths import EXAMPLES

SMALL: dict[str, Any] = {"workload": {"requests": 300, "arrivals": {"rate_per_s": 8.0}}}
GRID: dict[str, list[Any]] = {"link": ["ib-ndr", "eth-25g"], "workload.arrivals.rate_per_s": [4.0, 12.0]}

#: The only column that differs between two runs of the same point: the core's measured wall time.
NONDETERMINISTIC = ["run.wall_s", "run.wall_s:mean", "run.wall_s:ci95"]


def deterministic(df: pl.DataFrame) -> pl.DataFrame:
    return df.drop([c for c in NONDETERMINISTIC if c in df.columns])


class CountingExecutor(Executor):
    """A thread pool that records every (point, replicate) it is asked to run (tasks are chunks of points)."""

    def __init__(self, workers: int = 2) -> None:
        self.pool = ThreadPoolExecutor(workers)
        self.submitted: list[tuple[int, int]] = []

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        self.submitted.extend((t[0], t[1]) for t in args[0])
        self.tasks = getattr(self, "tasks", 0) + 1
        return self.pool.submit(fn, *args, **kwargs)

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        self.pool.shutdown(wait=wait, cancel_futures=cancel_futures)


# --------------------------------------------------------------------------------------------------
# Points, seeds, columns


def test_points_are_the_grid_product_times_zip_in_order() -> None:
    """Points enumerate grid (first path slowest) x zip (paths varied together); each row holds its values."""
    df = kvwire.sweep(
        SMALL,
        {"link": ["ib-ndr", "eth-25g"]},
        zip={"workload.arrivals.rate_per_s": [2.0, 6.0, 9.0], "workload.prompt_tokens.mean": [512, 1024, 2048]},
        workers=2,
    )
    assert df["point"].to_list() == list(range(6))
    assert df["link"].to_list() == ["ib-ndr"] * 3 + ["eth-25g"] * 3
    assert df["workload.arrivals.rate_per_s"].to_list() == [2.0, 6.0, 9.0] * 2
    assert df["workload.prompt_tokens.mean"].to_list() == [512, 1024, 2048] * 2
    swept = ["link", "workload.arrivals.rate_per_s", "workload.prompt_tokens.mean"]
    assert df.columns[:5] == ["point", *swept, "replicate"]
    assert len(kvwire.sweep_points({"base": SMALL, "grid": {"link": ["ib-ndr", "eth-25g"]}, "replicates": 3})) == 6


def test_rows_equal_single_simulations() -> None:
    """Each row is the flattened summary of simulating that point's scenario on its own."""
    df = kvwire.sweep(SMALL, GRID, workers=2)
    for row in df.iter_rows(named=True):
        sc = json.loads(json.dumps(SMALL))
        sc["link"] = row["link"]
        sc["workload"]["arrivals"]["rate_per_s"] = row["workload.arrivals.rate_per_s"]
        s = kvwire.simulate(sc).summary
        assert row["slo.attainment"] == s["slo"]["attainment"]
        assert row["latency.ttft_s.p99"] == s["latency"]["ttft_s"]["p99"]
        assert row["utilisation.kv-link"] == s["utilisation"]["kv-link"]
        assert row["energy.j_per_output_token"] == s["energy"]["j_per_output_token"]
        assert row["requests.completed"] == s["requests"]["completed"]


def test_common_random_numbers_and_replicate_seeds() -> None:
    """replicates=1: every point runs the base seed (the same requests everywhere). Replicate r > 0 uses
    SplitMix64(SplitMix64(seed) ^ r) >> 11, computed here by hand; seeds differ across replicates."""
    base = {"workload": {"requests": 50, "seed": 7}}
    tasks = kvwire.sweep_points({"base": base, "grid": {"link": ["ib-ndr", "eth-25g", "nvlink4"]}})
    assert [t["seed"] for t in tasks] == [7, 7, 7]
    assert all(t["scenario"]["workload"]["seed"] == 7 for t in tasks)

    def splitmix(x: int) -> int:
        m = (1 << 64) - 1
        x = (x + 0x9E3779B97F4A7C15) & m
        x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & m
        x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & m
        return x ^ (x >> 31)

    tasks = kvwire.sweep_points({"base": base, "grid": {"link": ["ib-ndr", "eth-25g"]}, "replicates": 4})
    for t in tasks:
        want = 7 if t["replicate"] == 0 else splitmix(splitmix(7) ^ t["replicate"]) >> 11
        assert t["seed"] == want == t["scenario"]["workload"]["seed"]
        assert t["seed"] < 2**53
    assert len({t["seed"] for t in tasks}) == 4
    # The same seed for the same replicate at every point: only the configuration differs between points.
    assert [t["seed"] for t in tasks[:4]] == [t["seed"] for t in tasks[4:]]
    assert replicate_seed(7, 2) == replicate_seed(7, 2) != replicate_seed(8, 2)


@pytest.mark.parametrize(
    ("dof", "published"),
    [(1, 12.7062), (2, 4.3027), (3, 3.1824), (4, 2.7764), (5, 2.5706), (10, 2.2281), (20, 2.0860), (30, 2.0423),
     (100, 1.9840)],
)  # fmt: skip
def test_t_quantile_matches_published_tables(dof: int, published: float) -> None:
    """The 97.5% Student-t quantile equals the printed tables (4 decimals; e.g. NIST/SEMATECH handbook 1.3.6.7.2)."""
    assert abs(t_quantile_975(dof) - published) < 6e-5


def test_replicate_mean_and_ci95_columns() -> None:
    """With replicates, each numeric column gains :mean and :ci95 (t(n-1)·s/√n over the point's replicates),
    checked against numpy on the per-replicate rows."""
    df = kvwire.sweep(
        {"workload": {"requests": 400, "arrivals": {"rate_per_s": 12.0}}},
        {"link": ["eth-25g", "ib-ndr"]},
        replicates=3,
        workers=2,
    )
    assert df.height == 6 and df["replicate"].to_list() == [0, 1, 2, 0, 1, 2]
    for point in (0, 1):
        g = df.filter(pl.col("point") == point)
        for col in ("latency.ttft_s.p99", "slo.attainment", "energy.j_per_output_token"):
            x = g[col].to_numpy()
            half = 4.302652729911275 * np.std(x, ddof=1) / np.sqrt(3)  # t(0.975, 2), published 4.3027
            assert np.allclose(g[f"{col}:mean"].to_numpy(), x.mean(), rtol=1e-12)
            assert np.allclose(g[f"{col}:ci95"].to_numpy(), half, rtol=1e-9)
    assert df.filter(pl.col("point") == 0)["latency.ttft_s.p99"].n_unique() == 3  # three different draws


def test_nonscalar_swept_values_become_json_text() -> None:
    """A swept field whose values are objects is one column of their JSON text (sorted keys)."""
    links = [{"preset": "ib-ndr", "channels": 2}, "eth-25g"]
    df = kvwire.sweep(SMALL, {"link": links}, workers=1)
    assert df["link"].to_list() == ['{"channels": 2, "preset": "ib-ndr"}', '"eth-25g"']
    assert df["utilisation.kv-link"][0] is not None


# --------------------------------------------------------------------------------------------------
# Determinism across workers


def test_one_and_two_workers_give_identical_tables() -> None:
    """1 worker vs 2 workers (and a pool of 3 with replicates): the same table, row for row, except the
    measured wall time."""
    defn = {"base": {"workload": {"requests": 600}}, "grid": GRID, "replicates": 2}
    one = kvwire.sweep(defn, workers=1)
    two = kvwire.sweep(defn, workers=2)
    three = kvwire.sweep(defn, executor=CountingExecutor(3))
    chunked = CountingExecutor(2)
    by_three = kvwire.sweep(defn, executor=chunked, chunk=3)
    assert one.height == 8 and chunked.tasks == 3  # 8 tasks in chunks of 3, 3, 2
    assert_frame_equal(deterministic(one), deterministic(two))
    assert_frame_equal(deterministic(one), deterministic(three))
    assert_frame_equal(deterministic(one), deterministic(by_three))


def test_process_pool_gives_the_same_table() -> None:
    """Points also run in worker processes (a spawn ProcessPoolExecutor: each with its own GIL): same table."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    defn = {"base": {"workload": {"requests": 400}}, "grid": GRID}
    with ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("spawn")) as pool:
        procs = kvwire.sweep(defn, executor=pool, workers=2)
    assert_frame_equal(deterministic(procs), deterministic(kvwire.sweep(defn, workers=1)))


# --------------------------------------------------------------------------------------------------
# Validation before any work


def test_every_bad_point_is_reported_before_any_work() -> None:
    """Bad values and unknown fields fail with SweepError listing every bad point (index, values, field
    path, reason), and nothing is submitted."""
    ex = CountingExecutor()
    grid = {"link": ["ib-ndr", "no-such-link"], "workload.arrivals.rate_per_s": [4.0, -1.0, 8.0]}
    with pytest.raises(kvwire.SweepError) as info:
        kvwire.sweep(SMALL, grid, executor=ex)
    assert ex.submitted == []
    errors = info.value.errors
    assert [e["point"] for e in errors] == [1, 3, 4, 5]
    by_point = {e["point"]: e for e in errors}
    assert by_point[1]["path"] == "workload.arrivals.rate_per_s"
    assert by_point[1]["values"] == {"link": "ib-ndr", "workload.arrivals.rate_per_s": -1.0}
    assert by_point[3]["path"] == "link" and "no-such-link" in by_point[3]["message"]
    assert isinstance(info.value, kvwire.ScenarioError)
    assert "4 of 6 points are invalid" in str(info.value)
    for p in (1, 3, 4, 5):
        assert f"point {p} " in str(info.value)


def test_unknown_field_path_is_named() -> None:
    """A misspelt field path is an error of every point, naming the field."""
    with pytest.raises(kvwire.SweepError) as info:
        kvwire.sweep(SMALL, {"workload.arrivals.rate_per_sec": [1.0, 2.0]})
    assert [e["point"] for e in info.value.errors] == [0, 1]
    assert all("rate_per_sec" in e["path"] for e in info.value.errors)


@pytest.mark.parametrize(
    ("definition", "path"),
    [
        ({"grid": {"link": "ib-ndr"}}, "grid.link"),
        ({"grid": {"link": []}}, "grid.link"),
        ({"zip": {"link": ["ib-ndr"], "workload.seed": [1, 2]}}, "zip.workload.seed"),
        ({"grid": {"link": ["ib-ndr"]}, "zip": {"link": ["eth-25g"]}}, "zip.link"),
        ({"replicates": 0}, "replicates"),
        ({"replicates": True}, "replicates"),
        ({"grids": {}}, "grids"),
        ({"grid": {"workload.arrivals.rate_per_s": [float("nan")]}}, "grid.workload.arrivals.rate_per_s[0]"),
        ({"base": 3}, "base"),
    ],
)
def test_malformed_definitions_name_the_key(definition: dict[str, Any], path: str) -> None:
    """A malformed definition is a ScenarioError naming the key, raised by load_sweep and sweep alike."""
    with pytest.raises(kvwire.ScenarioError) as info:
        kvwire.load_sweep(definition)
    assert info.value.path == path
    with pytest.raises(kvwire.ScenarioError):
        kvwire.sweep(definition)


def test_replicates_need_a_generated_workload() -> None:
    """More than one replicate of a trace replay (no random draws) is refused before any work."""
    trace = {"arrival_s": [0.0, 0.5], "prompt_tokens": [100, 200], "output_tokens": [10, 20]}
    with pytest.raises(kvwire.SweepError) as info:
        kvwire.sweep({"workload": {"trace": trace}}, {"link": ["ib-ndr"]}, replicates=2)
    assert info.value.errors[0]["path"] == "replicates"
    df = kvwire.sweep({"workload": {"trace": trace}}, {"link": ["ib-ndr"]})
    assert df["seed"].to_list() == [None] and df["requests.completed"].to_list() == [2]


def test_sweep_file_toml_with_nested_tables_and_base_file(tmp_path: Path) -> None:
    """A TOML sweep file: nested [grid.x] tables are dotted paths, base may be a scenario file next to it."""
    (tmp_path / "base.toml").write_text('[workload]\nrequests = 200\n[decode]\ndevice = "a100"\n')
    (tmp_path / "s.toml").write_text(
        'base = "base.toml"\nreplicates = 1\n[grid.workload.arrivals]\nrate_per_s = [2.0, 4.0]\n'
        '[zip]\n"link.preset" = ["ib-ndr"]\n'
    )
    d = kvwire.load_sweep(tmp_path / "s.toml")
    assert d == {
        "base": {"workload": {"requests": 200}, "decode": {"device": "a100"}},
        "grid": {"workload.arrivals.rate_per_s": [2.0, 4.0]},
        "zip": {"link.preset": ["ib-ndr"]},
        "replicates": 1,
    }
    df = kvwire.sweep(tmp_path / "s.toml", workers=1)
    assert df["workload.arrivals.rate_per_s"].to_list() == [2.0, 4.0]
    assert df["instances.decode-0.device"].to_list() == ["a100", "a100"]


# --------------------------------------------------------------------------------------------------
# Progress, cancel, failures


def test_progress_from_the_calling_thread() -> None:
    """progress(done, total) starts at (0, total), rises by one per point to (total, total), always on the
    thread that called sweep."""
    calls: list[tuple[int, int, int]] = []
    kvwire.sweep(SMALL, GRID, workers=2, progress=lambda d, t: calls.append((d, t, threading.get_ident())))
    assert [(d, t) for d, t, _ in calls] == [(i, 4) for i in range(5)]
    assert {ident for _, _, ident in calls} == {threading.get_ident()}


def test_cancel_keeps_finished_points_and_resume_completes(tmp_path: Path) -> None:
    """Setting cancel after 2 points: no new point starts, Cancelled is raised, the finished points are in
    out; resuming runs exactly the others."""
    stop = threading.Event()
    grid = {"workload.arrivals.rate_per_s": [2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0]}

    def progress(done: int, total: int) -> None:
        if done >= 2:
            stop.set()

    ex = CountingExecutor(1)
    with pytest.raises(kvwire.Cancelled):
        kvwire.sweep(SMALL, grid, workers=1, executor=ex, out=tmp_path / "o", progress=progress, cancel=stop)
    written = set(pl.read_parquet(tmp_path / "o" / "part-*.parquet")["point"].to_list())
    assert 2 <= len(written) < 8
    assert written <= {p for p, _ in ex.submitted}
    again = CountingExecutor(2)
    df = kvwire.sweep(SMALL, grid, executor=again, out=tmp_path / "o", resume=True)
    assert {p for p, _ in again.submitted} == set(range(8)) - written
    assert_frame_equal(deterministic(df), deterministic(kvwire.sweep(SMALL, grid, workers=2)))


class FailingExecutor(CountingExecutor):
    """Runs points, except that point 2 fails as if its worker died."""

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        if any(t[0] == 2 for t in args[0]):
            self.submitted.extend((t[0], t[1]) for t in args[0])
            f: Future[Any] = Future()
            f.set_exception(RuntimeError("worker lost"))
            return f
        return super().submit(fn, *args, **kwargs)


def test_a_failed_point_raises_after_writing_the_others(tmp_path: Path) -> None:
    """A point that fails at run time stops the sweep with its error (noting the point); every point that
    finished is written, so a resume runs only what is missing."""
    grid = {"workload.arrivals.rate_per_s": [2.0, 3.0, 4.0, 5.0]}
    with pytest.raises(RuntimeError, match="worker lost") as info:
        kvwire.sweep(SMALL, grid, executor=FailingExecutor(1), workers=1, out=tmp_path / "o")
    assert any("point 2" in n for n in getattr(info.value, "__notes__", []))
    written = set(pl.read_parquet(tmp_path / "o" / "part-*.parquet")["point"].to_list())
    assert written and 2 not in written  # point 2 is submitted only once an earlier point has finished
    again = CountingExecutor(1)
    kvwire.sweep(SMALL, grid, executor=again, out=tmp_path / "o", resume=True)
    assert {p for p, _ in again.submitted} == {0, 1, 2, 3} - written


# --------------------------------------------------------------------------------------------------
# Output directory and resume


def test_out_directory_layout_and_refusals(tmp_path: Path) -> None:
    """out holds manifest.json (the normalised definition), part-*.parquet and results.parquet (= the returned
    table). Re-running without resume, resuming a different definition, or writing into a foreign non-empty
    directory are refused with ScenarioError(path="out"), and nothing there is changed."""
    out = tmp_path / "o"
    df = kvwire.sweep(SMALL, GRID, workers=2, out=out)
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["definition"] == kvwire.load_sweep({"base": SMALL, "grid": GRID})
    assert manifest["tasks"] == 4
    assert sorted(p.name for p in out.iterdir() if p.name.startswith("part-"))
    assert_frame_equal(pl.read_parquet(out / "results.parquet"), df)
    before = sorted((p.name, p.stat().st_mtime_ns) for p in out.iterdir())
    with pytest.raises(kvwire.ScenarioError) as info:
        kvwire.sweep(SMALL, GRID, out=out)
    assert info.value.path == "out" and "resume" in str(info.value)
    with pytest.raises(kvwire.ScenarioError) as info:
        kvwire.sweep(SMALL, {**GRID, "link": ["ib-ndr"]}, out=out, resume=True)
    assert info.value.path == "out" and "different sweep definition" in str(info.value)
    assert sorted((p.name, p.stat().st_mtime_ns) for p in out.iterdir()) == before
    foreign = tmp_path / "f"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("mine")
    with pytest.raises(kvwire.ScenarioError, match="no kvwire sweep manifest"):
        kvwire.sweep(SMALL, GRID, out=foreign)
    # Resuming a finished sweep runs nothing and returns the same table.
    ex = CountingExecutor()
    again = kvwire.sweep(SMALL, GRID, executor=ex, out=out, resume=True)
    assert ex.submitted == []
    assert_frame_equal(again, df)


KILLED_SWEEP = """
import sys, time, kvwire
module = sys.modules["kvwire.planning.sweep"]  # (kvwire.sweep is the function)
module.FLUSH_INTERVAL_S = 0.0         # write every finished point at once, so the kill finds many parts
run_point = module.run_point

def slow_run_point(*args, **kwargs):  # 50 ms per point, so that the kill lands mid-sweep on any machine
    time.sleep(0.05)
    return run_point(*args, **kwargs)

module.run_point = slow_run_point
definition = {definition!r}
kvwire.sweep(definition, workers=1, out=sys.argv[1])
"""


def test_sigkill_mid_sweep_then_resume_recomputes_nothing_written(tmp_path: Path) -> None:
    """A real sweep subprocess is killed with SIGKILL while it runs; the parts it had renamed are complete
    Parquet files, and resume=True evaluates exactly the points not written (counted by the executor), giving
    the table of an uninterrupted run."""
    definition = {
        "base": {"workload": {"requests": 1000}},
        "grid": {"link": ["ib-ndr", "eth-25g"], "workload.arrivals.rate_per_s": [4.0, 6.0, 8.0, 10.0, 12.0]},
        "replicates": 3,
    }
    out = tmp_path / "killed"
    script = tmp_path / "run.py"
    script.write_text(textwrap.dedent(KILLED_SWEEP.format(definition=definition)))
    proc = subprocess.Popen([sys.executable, str(script), str(out)], env=os.environ.copy())
    try:
        deadline = time.monotonic() + 120
        while len(list(out.glob("part-*.parquet"))) < 3:
            assert proc.poll() is None, "the sweep finished before it could be interrupted"
            assert time.monotonic() < deadline
            time.sleep(0.005)
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.wait(timeout=60)
    assert proc.returncode == -signal.SIGKILL
    assert not (out / "results.parquet").exists()
    written_rows = pl.concat([pl.read_parquet(p) for p in out.glob("part-*.parquet")], how="diagonal_relaxed")
    written = set(zip(written_rows["point"].to_list(), written_rows["replicate"].to_list(), strict=True))
    everything = {(p, r) for p in range(10) for r in range(3)}
    assert 3 <= len(written) < len(everything)

    ex = CountingExecutor(2)
    resumed = kvwire.sweep(definition, executor=ex, out=out, resume=True)
    assert not set(ex.submitted) & written, "a written point was computed again"
    assert set(ex.submitted) | written == everything and len(ex.submitted) == len(set(ex.submitted))
    uninterrupted = kvwire.sweep(definition, workers=2)
    assert_frame_equal(deterministic(resumed), deterministic(uninterrupted))
    assert not list(out.glob(".*.tmp"))


def test_kvwire_run_output_file(tmp_path: Path) -> None:
    """`kvwire run -o requests.parquet|.csv` writes the per-request table (same rows as simulate's)."""
    from click.testing import CliRunner
    from kvwire.cli import main

    sc = tmp_path / "s.json"
    sc.write_text(json.dumps(SMALL))
    runner = CliRunner()
    for name in ("r.parquet", "r.csv"):
        res = runner.invoke(main, ["run", str(sc), "-o", str(tmp_path / name)])
        assert res.exit_code == 0, res.output
    want = kvwire.simulate(SMALL).requests
    assert_frame_equal(pl.read_parquet(tmp_path / "r.parquet"), want)
    csv = pl.read_csv(tmp_path / "r.csv")
    assert csv.height == want.height and csv.columns == want.columns
    assert np.allclose(csv["ttft_s"].to_numpy(), want["ttft_s"].to_numpy())
    bad = runner.invoke(main, ["run", str(sc), "-o", str(tmp_path / "r.xlsx")])
    assert bad.exit_code != 0 and ".parquet or .csv" in bad.output
    assert not (tmp_path / "r.xlsx").exists()


def test_kvwire_sweep_cli(tmp_path: Path) -> None:
    """`kvwire sweep FILE -o DIR` writes the results and prints one line per point; a second run needs
    --resume, which then runs nothing new; a bad point is reported with its index and field."""
    from click.testing import CliRunner
    from kvwire.cli import main

    f = tmp_path / "s.toml"
    f.write_text('[base.workload]\nrequests = 200\n[grid]\nlink = ["ib-ndr", "eth-25g"]\n')
    runner = CliRunner()
    res = runner.invoke(main, ["sweep", str(f), "-o", str(tmp_path / "o"), "--workers", "2", "--no-progress"])
    assert res.exit_code == 0, res.output
    assert "eth-25g" in res.output and "SLO met" in res.output
    assert pl.read_parquet(tmp_path / "o" / "results.parquet").height == 2
    again = runner.invoke(main, ["sweep", str(f), "-o", str(tmp_path / "o")])
    assert again.exit_code != 0 and "--resume" in again.output
    resumed = runner.invoke(main, ["sweep", str(f), "-o", str(tmp_path / "o"), "--resume", "--no-progress"])
    assert resumed.exit_code == 0, resumed.output
    f.write_text('[grid]\nlink = ["ib-ndr", "eth-1g"]\n')
    bad = runner.invoke(main, ["sweep", str(f), "-o", str(tmp_path / "o2")])
    assert bad.exit_code != 0 and "point 1" in bad.output and "eth-1g" in bad.output


@pytest.mark.parametrize("name", ["sweep_links.toml", "sweep_split.toml"])
def test_example_sweep_files_validate(name: str) -> None:
    """The example sweep files load and every point validates (the sizes their comments state)."""
    tasks = kvwire.sweep_points(EXAMPLES / name)
    assert len(tasks) == {"sweep_links.toml": 4 * 4 * 3, "sweep_split.toml": 3 * 3}[name]
