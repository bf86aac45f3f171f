"""The examples in ``examples/`` run and print what they promise."""

from __future__ import annotations

import importlib.util
import runpy
import sys
from pathlib import Path

import pytest
from shared_paths import EXAMPLES


def test_when_to_stay_colocated_runs(capsys: pytest.CaptureFixture[str]) -> None:
    """The colocation example runs every configuration and prints a verdict per case, and the capacity of
    both modes per workload and link (4 lines)."""
    runpy.run_path(str(EXAMPLES / "when_to_stay_colocated.py"), run_name="__main__")
    out = capsys.readouterr().out
    assert "Best configuration" in out
    assert out.count(" req/s over ") == 8
    assert "rho < 1:" in out and "rho >= 1:" in out
    assert sum(1 for line in out.splitlines() if "disaggregated 2+2" in line and "colocated 4" in line) == 4


def test_layout_conversion_cost_runs(capsys: pytest.CaptureFixture[str]) -> None:
    """The layout-conversion example measures the kernel, runs every placement on every link (7 rows per
    link) and states how many host threads keep the conversion queue stable."""
    runpy.run_path(str(EXAMPLES / "layout_conversion_cost.py"), run_name="__main__")
    out = capsys.readouterr().out
    assert "cores just for conversions" in out
    for link in ("nvlink4", "ib-ndr", "eth-100g"):
        assert sum(1 for line in out.splitlines() if line.startswith(link)) == 7
    assert "host queue is stable only with" in out


def test_parallel_deployments_runs(capsys: pytest.CaptureFixture[str]) -> None:
    """The parallel-deployments example prints the four OPT-66B placements, each with collectives and a
    capacity — decode TP 2 x PP 2 with two micro-batches in flight lowering TPOT against one batch at a time —
    and DeepSeek-V3 with MTP off and on, MTP lowering TPOT with 1.85 tokens per verify step (gamma = 1,
    alpha = 0.85: 1 + 0.85 in expectation)."""
    runpy.run_path(str(EXAMPLES / "parallel_deployments.py"), run_name="__main__")
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert sum(1 for line in lines if "req/s at 90% SLO" in line and "collectives" in line) == 4
    off = next(line for line in lines if "MTP off" in line)
    on = next(line for line in lines if "MTP on" in line)

    def tpot(line: str) -> float:
        return float(line.split("TPOT p50 ")[1].split(" ms")[0])

    one_batch = next(line for line in lines if "TP2xPP2 " in line)
    two = next(line for line in lines if "TP2xPP2 x2mb" in line)
    assert tpot(two) < tpot(one_batch)
    assert tpot(on) < tpot(off)
    tokens = float(on.split(", ")[-1].split(" tokens")[0])
    assert abs(tokens - 1.85) < 0.05


def test_plan_qwen3_32b_runs(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """The planning example plans three cases (colocated, disaggregated over ib-ndr and over eth-100g) for each of
    its two workloads, each naming a best configuration with its tok/s per GPU and per user and its binding
    resource, compares them per workload, and draws the frontiers into the file given."""
    out_file = tmp_path / "frontier.png"
    argv = sys.argv
    sys.argv = ["plan_qwen3_32b.py", str(out_file)]
    try:
        runpy.run_path(str(EXAMPLES / "plan_qwen3_32b.py"), run_name="__main__")
    finally:
        sys.argv = argv
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert sum(1 for line in lines if line.startswith("qwen3-32b on 32 x H200")) == 2
    cases = [line for line in lines if " best " in line and "tok/s/GPU" in line and "tok/s/user" in line]
    assert len(cases) == 6 and all("binding " in line for line in cases)
    for case in ("colocated", "disaggregated, ib-ndr", "disaggregated, eth-100g"):
        assert sum(1 for line in cases if line.strip().startswith(case + " ")) == 2
    assert sum(1 for line in cases if "best colocated " in line) == 2
    assert sum(1 for line in cases if "best P " in line and " / D " in line) == 4
    assert sum(1 for line in lines if "eth-100g instead of ib-ndr" in line) == 2
    if importlib.util.find_spec("matplotlib") is None:  # the plot extra is missing: the example says so
        assert "(no plot:" in out
    else:
        assert out_file.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and f"wrote {out_file}" in out


def test_what_failures_cost_runs(capsys: pytest.CaptureFixture[str]) -> None:
    """The faults example prices one decode failure against the same hour without it (fewer requests within
    the SLO, some started over, none failed), scales it by the expected failures a day (4 instances, MTBF
    24 h, MTTR 10 min: 3.97), and simulates a day of random failures whose cost per failure is of the same
    size as the priced hour's (within a factor 2: repairs are random there, fixed in the priced hour)."""
    runpy.run_path(str(EXAMPLES / "what_failures_cost.py"), run_name="__main__")
    lines = capsys.readouterr().out.splitlines()
    one = next(line for line in lines if line.startswith("one decode failure"))
    cost = int(one.split(": ")[1].split(" fewer")[0].replace(",", ""))
    assert cost > 0 and ", 0 failed" in one
    assert int(one.split("h of work thrown away")[0].split("; ")[-1].split(" started")[0].replace(",", "")) > 0
    expected = next(line for line in lines if line.startswith("expected: "))
    assert expected.startswith("expected: 3.97 failures a day")
    day = next(line for line in lines if line.startswith("a simulated day"))
    failures = int(day.split(": ")[1].split(" decode failures")[0])
    per_failure = int(day.split("per failure ")[1].split(" ")[0].replace(",", ""))
    assert failures > 0 and cost / 2 < per_failure < 2 * cost
