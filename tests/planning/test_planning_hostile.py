"""Issue 23's planning parts: every answer right and every failure named. Overlapping grid keys are refused
instead of silently dropping values; capacity searches integer fields as integers and clamps the rate to its
validated bound; huge ``workers``/``replicates`` are refused instead of aborting or eating memory; Ctrl-C and
``cancel`` stop best splits, validation and a sweep's running points; a sweep's ``out`` that cannot be
written or holds a damaged or foreign sweep is a kvwire error naming ``out`` that deletes nothing; wrong-typed
arguments are named; the CLI's JSON is strict. Each test is a reproduction from the issue and failed before
its fix."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any

import kvwire
import polars as pl
import pytest
from click.testing import CliRunner
from kvwire.cli import main

SMALL: dict[str, Any] = {"workload": {"requests": 200, "arrivals": {"rate_per_s": 8.0}}}
SWEEP_MODULE = __import__("sys").modules["kvwire.planning.sweep"]  # (kvwire.sweep is the function)
GRID_MODULE = __import__("sys").modules["kvwire.planning.grid"]


def tree(folder: Path) -> list[tuple[str, bytes]]:
    """Every file under ``folder`` with its bytes (to show that nothing was changed or deleted)."""
    return sorted((str(p.relative_to(folder)), p.read_bytes()) for p in folder.rglob("*") if p.is_file())


# --------------------------------------------------------------------------------------------------
# 1. Overlapping grid keys


@pytest.mark.parametrize(
    ("definition", "path", "keys"),
    [
        (
            {"grid": {"link": {"preset": ["nvlink4", "eth-25g"]}, "link.preset": ["ib-ndr"]}},
            "grid.link.preset",
            ['grid["link"]["preset"]', 'grid["link.preset"]'],
        ),
        (
            {"grid": {"workload.arrivals.rate_per_s": [2, 4], "workload": [{"requests": 100}]}},
            "grid.workload",
            ['grid["workload.arrivals.rate_per_s"]', 'grid["workload"]'],
        ),
        (
            {"grid": {"workload": [{"requests": 100}]}, "zip": {"workload.seed": [1, 2]}},
            "zip.workload.seed",
            ['grid["workload"]', 'zip["workload.seed"]'],
        ),
        (
            {"grid": {"link": ["ib-ndr"]}, "zip": {"link": {"preset": ["eth-25g"]}}},
            "zip.link.preset",
            ['grid["link"]', 'zip["link"]["preset"]'],
        ),
    ],
)
def test_overlapping_grid_keys_are_refused_naming_both(definition: dict[str, Any], path: str, keys: list[str]) -> None:
    """The same field named twice (nested and flat), or a field and one inside it, in grid or across grid and
    zip: before, the first silently lost its values (3 points became 1) or the parent overrode the child while
    the table showed the child's values; now a ScenarioError naming both keys, before any work."""
    with pytest.raises(kvwire.ScenarioError) as info:
        kvwire.load_sweep(definition)
    assert info.value.path == path
    for key in keys:
        assert key in str(info.value), str(info.value)
    with pytest.raises(kvwire.ScenarioError):
        kvwire.sweep({**definition, "base": SMALL}, workers=1)


def test_sibling_fields_and_an_empty_table() -> None:
    """Sibling fields of one table (link.preset and link.channels) are not an overlap; an empty nested table
    named no field and silently swept nothing: now refused naming it."""
    d = kvwire.load_sweep({"grid": {"link": {"preset": ["ib-ndr"], "channels": [1, 2]}}})
    assert d["grid"] == {"link.preset": ["ib-ndr"], "link.channels": [1, 2]}
    with pytest.raises(kvwire.ScenarioError) as info:
        kvwire.load_sweep({"grid": {"link": {}}})
    assert info.value.path == "grid.link"


# --------------------------------------------------------------------------------------------------
# 2. Capacity over whole-number fields, and the rate's bound


def attainment(scenario: dict[str, Any], field: str, value: Any) -> float:
    from kvwire.scenario.overrides import with_value

    a: float = kvwire.simulate(with_value(scenario, field, value)).summary["slo"]["attainment"]
    return a


@pytest.mark.parametrize(
    ("field", "scenario", "bounds"),
    [
        ("workload.prompt_tokens.value",
         {"workload": {"requests": 200, "prompt_tokens": {"dist": "fixed", "value": 1000}}}, (100.0, 50_000.0)),
        ("workload.output_tokens.value",
         {"workload": {"requests": 200, "output_tokens": {"dist": "fixed", "value": 100}}}, (1, 30_000)),
        ("workload.requests", {"slo": {"ttft_s": 0.5}, "workload": {"arrivals": {"rate_per_s": 30.0}}}, (10, 60)),
    ],
)  # fmt: skip
def test_capacity_searches_whole_number_fields_as_whole_numbers(
    field: str, scenario: dict[str, Any], bounds: tuple[float, float]
) -> None:
    """capacity over a whole-number field (by the scenario schema) failed on its first probe, a float the
    core refuses; now the search is over whole numbers: every probe and the answer are ints, the answer meets
    the target and the value it failed at does not (checked by separate simulations), and the two are within
    rel_tol or adjacent — for workload.requests between 10 and 60, adjacent: the largest whole number that
    meets it."""
    r = kvwire.capacity(scenario, field=field, bounds=bounds, rel_tol=0.02)
    assert r.note is None
    assert isinstance(r.capacity, int) and isinstance(r.failed_at, int)
    assert r.points[field].dtype == pl.Int64
    assert r.failed_at == r.capacity + 1 or r.failed_at <= r.capacity * 1.02
    assert attainment(scenario, field, r.capacity) >= 0.9 > attainment(scenario, field, r.failed_at)
    if field == "workload.requests":
        assert r.failed_at == r.capacity + 1
    assert json.loads(json.dumps(r.to_dict()))["capacity"] == r.capacity


def test_field_type_comes_from_the_schema_then_the_value() -> None:
    """Whole-number-ness is the schema's (prompt_tokens.mean is a float field although the default writes it
    2048), else the current value's type (a custom model's layers)."""
    from kvwire.planning.capacity import field_type

    assert field_type({}, "workload.prompt_tokens.mean") is float
    assert field_type({}, "workload.requests") is int
    assert field_type({}, "workload.arrivals.rate_per_s") is float
    assert field_type({"model": {"layers": 32}}, "model.layers") is int
    assert field_type({"model": {"hidden": 4096.5}}, "model.hidden") is float


@pytest.mark.parametrize("field", ["workload", "link", "cost.enforce_tdp", 3, ""])
def test_a_field_that_is_not_a_number_is_named(field: Any) -> None:
    """A table, a preset name, a true/false field or a non-path as ``field`` failed on the first probe naming
    something else (or with a TypeError); now a ScenarioError naming field, before any simulation."""
    with pytest.raises(kvwire.ScenarioError) as info:
        kvwire.capacity(SMALL, field=field, bounds=(1, 10))
    assert info.value.path == "field"


def test_bounds_the_scenario_does_not_take_are_named() -> None:
    """A bound the core refuses (1e12 req/s, 10^12 requests) failed on a probe naming the field; now refused
    before any simulation naming bounds; an integer field's bounds with fewer than two whole numbers too."""
    for field, bounds in (
        ("workload.arrivals.rate_per_s", (1.0, 1e12)),
        ("workload.requests", (10, 10**12)),
        ("workload.requests", (10.2, 10.8)),
    ):
        with pytest.raises(kvwire.ScenarioError) as info:
            kvwire.capacity(SMALL, field=field, bounds=bounds)
        assert info.value.path == "bounds", field


def test_rate_bound_is_the_validated_one() -> None:
    """The search's rate bounds are the validator's: MAX_RATE and MIN_RATE validate, just beyond them do not."""
    import math

    from kvwire.planning.capacity import MAX_RATE, MIN_RATE

    for ok in (MIN_RATE, MAX_RATE):
        kvwire.validate({"workload": {"arrivals": {"rate_per_s": ok}}})
    for bad in (math.nextafter(MAX_RATE, math.inf), math.nextafter(MIN_RATE, 0.0)):
        with pytest.raises(kvwire.ScenarioError):
            kvwire.validate({"workload": {"arrivals": {"rate_per_s": bad}}})


def test_capacity_above_the_rate_bound_is_clamped_and_said() -> None:
    """4,096 + 4,096 instances serving 1-token prompts: a ceiling of 1.5e8 req/s, met there, so the search
    stepped up to 1.1e9 req/s, beyond the validated 1e9, and failed with a ScenarioError; now the probes stop
    at 1e9, the answer is that bound, and the note says so."""
    sc = {
        "link": "nvlink4",
        "workload": {"requests": 200, "prompt_tokens": {"dist": "fixed", "value": 1},
                     "output_tokens": {"dist": "fixed", "value": 0}},
        "prefill": {"instances": 4096},
        "decode": {"instances": 4096},
    }  # fmt: skip
    r = kvwire.capacity(sc)
    assert r.points["workload.arrivals.rate_per_s"].max() == 1e9
    assert r.capacity == 1e9 and r.failed_at is None
    assert r.note is not None and "largest rate a scenario takes" in r.note


def test_a_too_large_rate_is_not_told_that_a_smaller_one_overflows() -> None:
    """A rate above the bound was told "a smaller rate makes the simulated times overflow"; the message now
    says what is wrong with it (needs the rebuilt core: rust/kvwire-core/src/scenario/validate.rs)."""
    with pytest.raises(kvwire.ScenarioError) as info:
        kvwire.validate({"workload": {"arrivals": {"rate_per_s": 1e12}}})
    assert "smaller rate" not in str(info.value) and "1e9" in str(info.value)
    with pytest.raises(kvwire.ScenarioError) as info:
        kvwire.validate({"workload": {"arrivals": {"rate_per_s": 1e-9}}})
    assert "smaller rate makes the simulated times overflow" in str(info.value)


# --------------------------------------------------------------------------------------------------
# 3. Bounds, aborts and hangs


@pytest.mark.parametrize("workers", [10**6, 1025, 0, True, 2.0])
def test_workers_beyond_the_bound_are_refused(workers: Any) -> None:
    """``sweep(workers=10**6)`` aborted the process (SIGABRT spawning threads); now a ScenarioError naming
    workers and the bound (1,024), as for best_split."""
    with pytest.raises(kvwire.ScenarioError, match="workers") as info:
        kvwire.sweep(SMALL, {"link": ["ib-ndr"]}, workers=workers)
    assert info.value.path == "workers"
    if workers == 10**6:
        assert "1,024" in str(info.value)
    with pytest.raises(kvwire.ScenarioError) as info:
        kvwire.best_split(SMALL, 3, workers=workers)
    assert info.value.path == "workers"


@pytest.mark.parametrize("replicates", [10**9, 2**64, 10_001])
def test_replicates_beyond_the_bound_are_refused(replicates: int) -> None:
    """``sweep_points(..., replicates=10**9)`` grew memory for minutes and ``2**64`` raised SystemError; now
    refused at once naming replicates and the bound, by sweep_points and sweep alike."""
    with pytest.raises(kvwire.ScenarioError, match="10,000") as info:
        kvwire.sweep_points({"grid": {"link": ["ib-ndr"]}, "replicates": replicates})
    assert info.value.path == "replicates"
    with pytest.raises(kvwire.ScenarioError):
        kvwire.sweep(SMALL, {"link": ["ib-ndr"]}, replicates=replicates)
    assert len(kvwire.sweep_points({"replicates": 10_000})) == 10_000  # the bound itself is allowed


def test_a_grid_beyond_the_task_bound_is_refused_before_making_points() -> None:
    """A grid of 10^12 points (six lists of 100 values) was a product made point by point; now refused from the
    count alone naming grid."""
    grid = {f"workload.{k}": list(range(1, 101)) for k in ("seed", "requests")}
    grid.update({f"scheduler.{k}": list(range(1, 101)) for k in ("max_decode_batch", "max_prefill_tokens")})
    grid.update({"link.channels": list(range(1, 101)), "prefill.instances": list(range(1, 101))})
    with pytest.raises(kvwire.ScenarioError, match="points x replicates") as info:
        kvwire.sweep_points({"grid": grid})
    assert info.value.path == "grid"


def test_cancel_stops_a_sweep_while_it_validates_its_points(monkeypatch: pytest.MonkeyPatch) -> None:
    """A sweep of 5,000 points whose cancel event is already set validated every point (a 10^6-point sweep:
    40 s) before stopping; now it looks at the event every CANCEL_CHECK_EVERY points while validating, so
    it validates no more than that many (counted) and raises Cancelled naming cancel."""
    calls = [0]
    validate = GRID_MODULE._core.validate

    def counting(text: str) -> None:
        calls[0] += 1
        validate(text)

    monkeypatch.setattr(GRID_MODULE._core, "validate", counting)
    stop = threading.Event()
    stop.set()
    with pytest.raises(kvwire.Cancelled) as info:
        kvwire.sweep(SMALL, {"workload.seed": list(range(5000))}, cancel=stop)
    assert info.value.path == "cancel"
    assert calls[0] <= getattr(GRID_MODULE, "CANCEL_CHECK_EVERY", 64)  # (64: before the fix, all 5,000)


def test_ctrl_c_stops_the_running_points_and_starts_no_new_one(monkeypatch: pytest.MonkeyPatch) -> None:
    """Ctrl-C (a KeyboardInterrupt from the progress callback, on the calling thread) while a chunk is running
    on another thread: before, that chunk kept running its points in a background thread after the sweep had
    raised. Now the sweep sets the event its running points look at (the one that is running here waits for
    it, as a long simulation would be stopped by it), starts no other point, and returns only once its
    threads are gone."""
    run_point = SWEEP_MODULE.run_point
    started: list[int] = []

    def watched(point: int, *args: Any, cancel: threading.Event | None = None) -> dict[str, Any]:
        started.append(point)
        if point == 3:  # the running point of the second chunk: runs until the sweep stops it
            assert cancel is not None and cancel.wait(timeout=60), "the sweep never stopped its running point"
            raise kvwire.Cancelled("stopped", "cancel")
        return run_point(point, *args, cancel=cancel)  # type: ignore[no-any-return]

    def progress(done: int, total: int) -> None:
        if done == 3:  # the first chunk (points 0-2) is done and point 3 is running
            raise KeyboardInterrupt

    monkeypatch.setattr(SWEEP_MODULE, "run_point", watched)
    with pytest.raises(KeyboardInterrupt):
        kvwire.sweep(SMALL, {"workload.seed": list(range(6))}, workers=2, chunk=3, progress=progress)
    assert not [t for t in threading.enumerate() if t.name.startswith("kvwire-sweep")]
    assert sorted(started) == [0, 1, 2, 3], started  # points 4 and 5 of the running chunk never started


def test_best_split_stops_on_ctrl_c(monkeypatch: pytest.MonkeyPatch) -> None:
    """best_split ignored Ctrl-C until every split's search had ended (50 s); now a KeyboardInterrupt (here
    from the progress callback once the first split is done) stops the other searches: no simulation starts
    after it beyond the one each running search was in (which its cancel event stops), and no search thread
    is left."""
    capacity_module = __import__("sys").modules["kvwire.planning.capacity"]
    simulate = capacity_module.simulate
    starts: list[bool] = []
    interrupted = threading.Event()

    def counting(*args: Any, **kwargs: Any) -> Any:
        starts.append(interrupted.is_set())
        return simulate(*args, **kwargs)

    def progress(done: int, total: int) -> None:
        if done >= 1:
            interrupted.set()
            raise KeyboardInterrupt

    monkeypatch.setattr(capacity_module, "simulate", counting)
    with pytest.raises(KeyboardInterrupt):
        kvwire.best_split({"workload": {"requests": 300}}, 9, workers=2, progress=progress)
    after = sum(starts)
    assert after <= 2, f"{after} simulations started after Ctrl-C"
    assert not [t for t in threading.enumerate() if t.name.startswith("kvwire-split")]


def test_best_split_cancel_event_stops_the_searches() -> None:
    """A cancel event set during a best split (here by the first progress call after a finished split)
    raises Cancelled with most splits never searched (a guard of the new wait loop, which looks at the event
    itself: this passed before the fix too, through each search's own look at it)."""
    stop = threading.Event()
    calls: list[int] = []

    def progress(done: int, total: int) -> None:
        calls.append(done)
        if done >= 1:
            stop.set()

    with pytest.raises(kvwire.Cancelled) as info:
        kvwire.best_split({"workload": {"requests": 300}}, 9, workers=1, progress=progress, cancel=stop)
    assert info.value.path == "cancel"
    assert calls[-1] < 8


# --------------------------------------------------------------------------------------------------
# 4. out= that cannot be written, damaged or foreign folders, wrong-typed arguments


def test_out_under_a_file_or_a_missing_root(tmp_path: Path) -> None:
    """``out`` below a regular file (NotADirectoryError) or where the directory cannot be made: a
    ScenarioError naming out, nothing made."""
    (tmp_path / "file").write_text("mine")
    with pytest.raises(kvwire.ScenarioError, match="out: cannot") as info:
        kvwire.sweep(SMALL, {"link": ["ib-ndr"]}, out=tmp_path / "file" / "o", workers=1)
    assert info.value.path == "out"
    assert tree(tmp_path) == [("file", b"mine")]


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs Linux's /dev/full")
def test_out_on_a_full_disk_manifest(tmp_path: Path) -> None:
    """A full disk when the manifest is written (its temporary file is a link to ``/dev/full``): an OSError
    before; now a ScenarioError naming out and the reason, and nothing left in the directory."""
    out = tmp_path / "o"
    out.mkdir()
    (out / ".manifest.json.tmp").symlink_to("/dev/full")
    with pytest.raises(kvwire.ScenarioError, match="No space left on device") as info:
        kvwire.sweep(SMALL, {"link": ["ib-ndr"]}, out=out, workers=1)
    assert info.value.path == "out"
    assert list(out.iterdir()) == []


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs Linux's /dev/full")
def test_out_on_a_full_disk_part(tmp_path: Path) -> None:
    """A full disk when the first part is written (the progress callback, called once the manifest is there,
    links the part's temporary name to ``/dev/full``): Polars' ComputeError before; now a ScenarioError naming
    out, no temporary file left, the manifest kept — and the sweep resumes once the disk has room."""
    out = tmp_path / "o"

    def progress(done: int, total: int) -> None:
        if done == 0:
            (out / ".part-000000.parquet.tmp").symlink_to("/dev/full")

    with pytest.raises(kvwire.ScenarioError, match="No space left on device") as info:
        kvwire.sweep(SMALL, {"link": ["ib-ndr", "eth-25g"]}, out=out, workers=1, progress=progress)
    assert info.value.path == "out"
    assert sorted(p.name for p in out.iterdir()) == ["manifest.json"]
    df = kvwire.sweep(SMALL, {"link": ["ib-ndr", "eth-25g"]}, out=out, workers=1, resume=True)
    assert df["link"].to_list() == ["ib-ndr", "eth-25g"]


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs Linux's /dev/full")
def test_out_on_a_full_disk_results(tmp_path: Path) -> None:
    """A full disk when results.parquet is written at the end: a ScenarioError naming out; the parts (every
    point) are kept, so a resume writes the results without running anything."""
    out = tmp_path / "o"
    out.mkdir()
    (out / ".results.parquet.tmp").symlink_to("/dev/full")
    with pytest.raises(kvwire.ScenarioError, match="No space left on device"):
        kvwire.sweep(SMALL, {"link": ["ib-ndr"]}, out=out, workers=1)
    assert not (out / ".results.parquet.tmp").exists() and not (out / "results.parquet").exists()
    assert pl.read_parquet(out / "part-*.parquet")["point"].to_list() == [0]


@pytest.mark.parametrize(
    ("content", "words"),
    [
        (b"[1, 2]", "not a kvwire sweep manifest"),
        (b"\x00\xff\xfe garbage \x89PNG", "not JSON"),
        (b'{"format": "something-else/3"}', "not a kvwire sweep manifest"),
        (b"{", "not JSON"),
    ],
)
def test_resume_over_a_damaged_or_foreign_manifest(tmp_path: Path, content: bytes, words: str) -> None:
    """``manifest.json`` that is a list or binary garbage raised AttributeError or UnicodeDecodeError; now a
    ScenarioError naming out and the file and what is wrong, and the folder is left exactly as it was."""
    out = tmp_path / "o"
    out.mkdir()
    (out / "manifest.json").write_bytes(content)
    (out / "notes.txt").write_text("mine")
    before = tree(out)
    for resume in (True, False):
        with pytest.raises(kvwire.ScenarioError, match=words) as info:
            kvwire.sweep(SMALL, {"link": ["ib-ndr"]}, out=out, resume=resume, workers=1)
        assert info.value.path == "out" and "manifest.json" in str(info.value)
    assert tree(out) == before


@pytest.mark.parametrize("damage", ["truncated", "foreign", "garbage"])
def test_resume_over_a_damaged_or_foreign_part(tmp_path: Path, damage: str) -> None:
    """A part that is cut short or garbage (Polars ComputeError) or another table (ColumnNotFoundError): now a
    ScenarioError naming out and the part, and nothing is deleted."""
    out = tmp_path / "o"
    grid = {"link": ["ib-ndr", "eth-25g"]}
    kvwire.sweep(SMALL, grid, out=out, workers=1)
    part = sorted(out.glob("part-*.parquet"))[0]
    if damage == "truncated":
        part.write_bytes(part.read_bytes()[:100])
    elif damage == "foreign":
        pl.DataFrame({"x": [1, 2]}).write_parquet(part)
    else:
        part.write_bytes(b"\x00garbage" * 50)
    before = tree(out)
    with pytest.raises(kvwire.ScenarioError) as info:
        kvwire.sweep(SMALL, grid, out=out, resume=True, workers=1)
    assert info.value.path == "out" and part.name in str(info.value)
    assert "part of this sweep" in str(info.value)
    assert tree(out) == before


def test_a_file_named_like_a_part_is_left_alone(tmp_path: Path) -> None:
    """A file ``part-notes.parquet`` in a sweep folder raised ValueError (its name is not a number); it is not
    one of the sweep's parts: left alone, and the resume completes."""
    out = tmp_path / "o"
    kvwire.sweep(SMALL, {"link": ["ib-ndr"]}, out=out, workers=1)
    (out / "part-notes.parquet").write_text("mine")
    df = kvwire.sweep(SMALL, {"link": ["ib-ndr"]}, out=out, resume=True, workers=1)
    assert df.height == 1 and (out / "part-notes.parquet").read_text() == "mine"


@pytest.mark.parametrize(
    ("kwargs", "path"),
    [
        ({"executor": 3}, "executor"),
        ({"progress": "yes"}, "progress"),
        ({"cancel": True}, "cancel"),
        ({"out": 3}, "out"),
        ({"resume": "no"}, "resume"),
        ({"chunk": 0}, "chunk"),
    ],
)
def test_wrong_typed_sweep_arguments_are_named(kwargs: dict[str, Any], path: str) -> None:
    """Wrong-typed executor, progress, cancel and out raised AttributeError/TypeError deep inside (or, for
    progress, after the first point); now a ScenarioError naming the argument, before any work."""
    with pytest.raises(kvwire.ScenarioError) as info:
        kvwire.sweep(SMALL, {"link": ["ib-ndr"]}, **kwargs)
    assert info.value.path == path


@pytest.mark.parametrize("call", ["capacity", "best_split", "compare"])
@pytest.mark.parametrize(("kwargs", "path"), [({"progress": "yes"}, "progress"), ({"cancel": 1}, "cancel")])
def test_wrong_typed_search_arguments_are_named(call: str, kwargs: dict[str, Any], path: str) -> None:
    """capacity, best_split and compare name a wrong-typed progress or cancel (before: a TypeError or
    AttributeError after the first simulation)."""
    args: tuple[Any, ...] = (SMALL, 3) if call == "best_split" else (SMALL,)
    with pytest.raises(kvwire.ScenarioError) as info:
        getattr(kvwire, call)(*args, **kwargs)
    assert info.value.path == path


@pytest.mark.parametrize("split", [(1,), (1, 2, 3), ("1", "1"), (True, 1), 3, (0, 2)])
def test_compare_split_is_checked(split: Any) -> None:
    """``compare(split=(1,))`` raised ValueError (unpacking); now every malformed split is a ScenarioError
    naming split."""
    with pytest.raises(kvwire.ScenarioError) as info:
        kvwire.compare({"mode": "colocated", "colocated": {"instances": 2}}, split=split, with_capacity=False)
    assert info.value.path == "split"


def test_compare_split_of_a_disaggregated_scenario_is_refused() -> None:
    """A split for a disaggregated scenario was silently ignored (it has its own pools); now refused."""
    with pytest.raises(kvwire.ScenarioError) as info:
        kvwire.compare(SMALL, split=(1, 1), with_capacity=False)
    assert info.value.path == "split"


# --------------------------------------------------------------------------------------------------
# 5, 6. Words and strict JSON


def test_cli_resume_says_what_is_there_and_what_is_left(tmp_path: Path) -> None:
    """``kvwire sweep --resume`` said nothing about the points already there; now it says how many of the runs
    were written and how many are left (on a sweep interrupted after one of three points)."""
    f = tmp_path / "s.toml"
    f.write_text('[base.workload]\nrequests = 200\n[grid]\nlink = ["ib-ndr", "eth-25g", "nvlink4"]\n')
    out = tmp_path / "o"
    kvwire.sweep(SMALL, {"link": ["ib-ndr"]}, workers=1)  # warm
    stop = threading.Event()

    def progress(done: int, total: int) -> None:
        if done >= 1:
            stop.set()

    with pytest.raises(kvwire.Cancelled):
        kvwire.sweep(f, out=out, workers=1, progress=progress, cancel=stop)
    written = pl.read_parquet(out / "part-*.parquet").height
    res = CliRunner().invoke(main, ["sweep", str(f), "-o", str(out), "--resume", "--no-progress"])
    assert res.exit_code == 0, res.output
    assert f"{written} of 3 runs already in {out}, {3 - written} left" in res.output, res.output


def strict(text: str) -> Any:
    def refuse(name: str) -> Any:
        raise ValueError(f"not strict JSON: {name}")

    return json.loads(text, parse_constant=refuse)


@pytest.mark.parametrize(
    "args",
    [
        ["capacity", "--set", "workload.requests=200", "--rel-tol", "0.2", "--json"],
        ["best-split", "--instances", "2", "--set", "workload.requests=200", "--rel-tol", "0.2", "--json"],
        ["compare", "--set", "workload.requests=200", "--no-capacity", "--json"],
    ],
)
def test_cli_planning_json_is_strict(args: list[str]) -> None:
    """Every JSON the planning commands print is strict (finite numbers or null; no NaN or Infinity)."""
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 0, res.output
    assert isinstance(strict(res.output), dict)
