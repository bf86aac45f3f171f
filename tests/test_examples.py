"""The examples in ``examples/`` run and print what they promise."""

from __future__ import annotations

import runpy

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
