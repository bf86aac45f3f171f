"""Crashes and aborts (issue 9 item 7): Ctrl-C stops a running simulation with ``KeyboardInterrupt`` and the
process stays usable; a run that cannot fit in memory is refused before it starts, with the estimate, as a
``MemoryError`` (never a SIGABRT); a total-work limit, ``engine.max_steps``, stops a run that would take too
long with an error naming that field."""

from __future__ import annotations

import contextlib
import signal
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import kvwire
import pytest
from kvwire.results.run import BYTES_PER_REQUEST, check_memory

CHILD = textwrap.dedent(
    """
    import sys, kvwire
    n, macro = int(sys.argv[1]), sys.argv[2] == "1"
    # Hours of work: n requests of 400,000 output tokens decoded one at a time (n x 400,000 steps).
    sc = {"scheduler": {"max_decode_batch": 1}, "engine": {"macro_steps": macro, "max_steps": 10**15},
          "workload": {"trace": {"arrival_s": [0.0] * n, "prompt_tokens": [1] * n, "output_tokens": [400_000] * n}}}
    print("started", flush=True)
    try:
        kvwire.simulate(sc)
        print("finished", flush=True)
    except KeyboardInterrupt:
        print("interrupted", flush=True)
    print("usable", kvwire.simulate({"workload": {"requests": 10}}).summary["requests"]["completed"], flush=True)
    """
)


@pytest.mark.parametrize(("requests", "macro_steps"), [(50_000, True), (5_000, False)])
def test_ctrl_c_interrupts_a_run_and_leaves_the_process_usable(
    tmp_path: Path, requests: int, macro_steps: bool
) -> None:
    """A child process starts a run of hours (10^10 and 2·10^9 decode steps, with and without the macro-step
    fast path, whose inline steps are checked too) and gets SIGINT: ``simulate`` raises ``KeyboardInterrupt``
    — the run did not finish, it was stopped (before the fix the signal waited for the end of the run) —
    and the next ``simulate`` in the same process works. The 120 s bound only guards against a hang."""
    script = tmp_path / "child.py"
    script.write_text(CHILD, encoding="utf-8")
    p = subprocess.Popen(
        [sys.executable, str(script), str(requests), "1" if macro_steps else "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert p.stdout is not None and p.stdout.readline().strip() == "started"
        # Let it get well into the run, then interrupt.
        with contextlib.suppress(subprocess.TimeoutExpired):
            p.wait(timeout=0.5)
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=120)
    finally:
        p.kill()
    assert out.split("\n")[:2] == ["interrupted", "usable 10"], (out, err)
    assert p.returncode == 0, err
    assert "PanicException" not in err and "Traceback" not in err


def hours_of_work(n: int) -> dict[str, object]:
    """A scenario of hours: ``n`` requests of 400,000 output tokens decoded one at a time."""
    return {
        "scheduler": {"max_decode_batch": 1},
        "engine": {"max_steps": 10**15},
        "workload": {"trace": {"arrival_s": [0.0] * n, "prompt_tokens": [1] * n, "output_tokens": [400_000] * n}},
    }


def test_a_cancel_event_stops_a_run_of_hours() -> None:
    """``simulate(..., cancel=event)``: setting the event from another thread stops a run of hours with
    ``kvwire.Cancelled`` naming ``cancel`` (it cannot have finished: the exception is only raised for a run
    that was stopped), and the next run works; an event set before the call refuses to start."""
    event = threading.Event()
    timer = threading.Timer(0.2, event.set)
    timer.start()
    try:
        with pytest.raises(kvwire.Cancelled) as e:
            kvwire.simulate(hours_of_work(5_000), cancel=event)
    finally:
        timer.cancel()
    assert e.value.path == "cancel" and "cancel" in str(e.value)
    assert (
        kvwire.simulate({"workload": {"requests": 10}}, cancel=threading.Event()).summary["requests"]["completed"] == 10
    )
    with pytest.raises(kvwire.Cancelled):
        kvwire.simulate({"workload": {"requests": 10}}, cancel=event)


def test_a_run_that_cannot_fit_is_refused_with_the_estimate() -> None:
    """The issue's case, ``requests=100_000_000``, aborted the process (SIGABRT in ``RequestTable::new``): it
    is now refused before anything is allocated when the estimate (400 B per request: 40 GB) exceeds the
    memory available, as a ``kvwire.ResourceError`` (a ``MemoryError``) naming the field and both figures.
    ``check_memory`` is given the available memory here so the test does not depend on the machine."""
    with pytest.raises(MemoryError) as e:
        check_memory(100_000_000, "workload.requests", available=8 * 10**9)
    assert isinstance(e.value, kvwire.ResourceError)
    assert e.value.path == "workload.requests"
    assert "needs about 40.0 GB" in str(e.value) and "8.0 GB of memory is available" in str(e.value)
    check_memory(1_000_000, "workload.requests", available=8 * 10**9)  # 0.4 GB: fine
    assert BYTES_PER_REQUEST * 100_000_000 == 40 * 10**9


def test_simulate_checks_memory_before_running(monkeypatch: pytest.MonkeyPatch) -> None:
    """``simulate`` applies the check with the request count of the scenario (generated) or of the table
    (``requests=``), and the process keeps working afterwards."""
    import kvwire.results.run as run_module

    monkeypatch.setattr(run_module, "available_memory_bytes", lambda: 10**6)  # 1 MB: 2,500 requests
    with pytest.raises(kvwire.ResourceError) as e:
        kvwire.simulate({"workload": {"requests": 3000}})
    assert e.value.path == "workload.requests"
    table = {"arrival_s": [0.0] * 3000, "prompt_tokens": [10] * 3000, "output_tokens": [2] * 3000}
    with pytest.raises(kvwire.ResourceError) as e:
        kvwire.simulate({}, requests=table)
    assert e.value.path == "requests"
    assert kvwire.simulate({"workload": {"requests": 100}}).summary["requests"]["completed"] == 100


def test_available_memory_is_read_on_linux() -> None:
    """On Linux the available memory is read (MemAvailable, cgroup limits) and is a positive byte count."""
    from kvwire.results.run import available_memory_bytes

    free = available_memory_bytes()
    if sys.platform.startswith("linux"):
        assert free is not None and free > 0


def test_max_steps_stops_a_long_run_with_the_field_named() -> None:
    """``engine.max_steps`` bounds the batch steps of a run (default 10^10): a run that needs more stops with a
    ``ScenarioError`` naming ``engine.max_steps``; a limit above the run's steps changes nothing."""
    sc = {"workload": {"requests": 400}}
    steps = kvwire.simulate(sc).summary["run"]["steps"]
    assert steps > 1000
    with pytest.raises(kvwire.ScenarioError) as e:
        kvwire.simulate({**sc, "engine": {"max_steps": 1000}})
    assert e.value.path == "engine.max_steps"
    assert "more than 1000 batch steps" in str(e.value)
    for limit in (steps, steps + 100_000):
        assert kvwire.simulate({**sc, "engine": {"max_steps": limit}}).summary["run"]["steps"] == steps
    with pytest.raises(kvwire.ScenarioError):
        kvwire.simulate({**sc, "engine": {"max_steps": steps - 1}})
    with pytest.raises(kvwire.ScenarioError) as e:
        kvwire.validate({"engine": {"max_steps": 0}})
    assert e.value.path == "engine.max_steps"
