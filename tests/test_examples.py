"""The examples in ``examples/`` run and print what they promise."""

from __future__ import annotations

import runpy
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def test_when_to_stay_colocated_runs(capsys: pytest.CaptureFixture[str]) -> None:
    """The colocation example runs every configuration and prints a verdict per case."""
    runpy.run_path(str(EXAMPLES / "when_to_stay_colocated.py"), run_name="__main__")
    out = capsys.readouterr().out
    assert "Best configuration" in out
    assert out.count(" req/s over ") == 8
    assert "rho < 1:" in out and "rho >= 1:" in out
