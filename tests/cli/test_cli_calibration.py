"""``kvwire calibrate`` and ``kvwire fidelity`` on files in a temporary directory: the fit, the in-sample and
held-out errors are printed, ``-o`` writes a calibration file that ``kvwire fidelity --timing calibrated:FILE``
and ``kvwire run --set cost.timing...`` use, ``--json`` is strict JSON, ``--plot`` writes the parity plot, and bad
input is an error message naming the problem with exit status 1."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from calibration_support import synthetic, write_csv
from click.testing import CliRunner, Result
from kvwire.cli import main
from shared_paths import DATA

SPLITWISE = DATA / "measured" / "splitwise_a100.csv"


def run(*args: str) -> Result:
    return CliRunner().invoke(main, list(args))


def strict_json(text: str) -> Any:
    def bad(name: str) -> Any:
        raise ValueError(f"non-finite number {name} in JSON output")

    return json.loads(text, parse_constant=bad)


@pytest.fixture
def steps_csv(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    return write_csv(synthetic(noise=0.01), tmp_path / "steps.csv")


def test_calibrate_prints_the_fit_and_writes_the_file(steps_csv: Path) -> None:
    """The fit table, the error table with default, in-sample and 3-fold held-out columns, and the file written
    (announced on stderr), which the calibrated source then reads."""
    res = run("calibrate", str(steps_csv), "--device", "h100", "--folds", "3", "-o", "cal.json")
    assert res.exit_code == 0, res.output
    out = res.stdout
    assert out.startswith("calibrate h100 to steps.csv (kvwire): 90 rows in ")
    for word in ("flops_eff", "bw_eff", "step_overhead_s", "scale_up_eff_tp4", "held out (3 folds)", "decode   all"):
        assert word in out
    assert "wrote cal.json" in res.stderr
    doc = json.loads(Path("cal.json").read_text())
    assert doc["kind"] == "kvwire-calibration" and doc["method"]["folds"] == 3
    again = run("run", "--set", "cost.timing.source=calibrated", "--set", "cost.timing.file=cal.json",
                "--set", "workload.requests=30", "--json")  # fmt: skip
    assert again.exit_code == 0, again.output
    assert strict_json(again.stdout)["scenario"]["cost"]["timing"]["provenance"]["base_device"] == "h100"


def test_calibrate_json_and_no_folds(steps_csv: Path) -> None:
    """--json prints the calibration file's content (strict JSON); --folds 0 leaves the held-out errors empty."""
    res = run("calibrate", str(steps_csv), "--folds", "0", "--json")
    assert res.exit_code == 0, res.output
    doc = strict_json(res.stdout)
    assert doc["base_device"] == "h100" and doc["held_out"] == {}
    assert all(r["held_out_median_pct"] is None for r in doc["errors"])


def test_calibrate_on_the_wrong_device_says_which() -> None:
    """Calibrating Splitwise's A100 file as H100 is refused, naming the device the file has."""
    res = run("calibrate", str(SPLITWISE), "--device", "h100", "--folds", "0")
    assert res.exit_code == 1
    assert "no rows measured on h100; the file has a100 (840 rows)" in res.stderr


def test_calibrate_a_bad_file(tmp_path: Path) -> None:
    """A bad measurement file is an error naming the file, line and column."""
    bad = tmp_path / "bad.csv"
    bad.write_text("phase,model,tp,batch,prompt_tokens,context_tokens,time_s\nprefill,llama3-8b,1,1,16,0,-1\n")
    res = run("calibrate", str(bad))
    assert res.exit_code == 1 and "line 2, column time_s" in res.stderr


def test_fidelity_prints_percentiles_and_rows(steps_csv: Path, tmp_path: Path) -> None:
    """The roofline against the file: percentiles per phase, per model and tp, the rows furthest off (--top), and
    a parity plot with --plot; --top 0 lists every row; --by-shape merges each shape's 3 repeats."""
    res = run("fidelity", str(steps_csv), "--top", "3", "--plot", "parity.png")
    assert res.exit_code == 0, res.output
    out = res.stdout
    assert out.startswith("fidelity of the roofline on steps.csv: 90 steps (llama3-8b tp 1, 4) on h100")
    assert "prefill" in out and "mean signed" in out and "the 3 rows furthest off (of 90)" in out
    assert (tmp_path / "parity.png").stat().st_size > 1000 and "wrote the parity plot" in res.stderr
    every = run("fidelity", str(steps_csv), "--top", "0")
    assert "every row" in every.stdout and len(every.stdout.splitlines()) > 90
    shapes = run("fidelity", str(steps_csv), "--by-shape", "--top", "4")
    assert "the 4 shapes furthest off (of 30) (n measurements each, their median)" in shapes.stdout


def test_fidelity_of_a_calibration_with_set_and_json(steps_csv: Path) -> None:
    """--timing calibrated:FILE uses the file written by calibrate (small errors on the data it was fitted to);
    --json holds the summary, the groups and every row; --set changes the scenario the rows run in."""
    assert run("calibrate", str(steps_csv), "--folds", "0", "-o", "cal.json").exit_code == 0
    res = run("fidelity", str(steps_csv), "--timing", "calibrated:cal.json", "--json")
    assert res.exit_code == 0, res.output
    doc = strict_json(res.stdout)
    assert doc["timing"] == {"source": "calibrated", "file": "cal.json"}
    assert len(doc["rows"]) == 90 and {s["phase"] for s in doc["summary"]} == {"prefill", "decode"}
    assert max(s["median_abs_pct"] for s in doc["summary"]) < 3
    slow = strict_json(run("fidelity", str(steps_csv), "--set", "cost.step_overhead_s=0.5", "--json").stdout)
    assert all(s["mean_signed_pct"] > 0 for s in slow["summary"])


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--timing", "bogus"], "timing: expected one of"),
        (["--timing", "calibrated:missing.json"], "cost.timing.file: cannot read"),
        (["--set", "cost.nothing=1"], "cost.nothing"),
    ],
)
def test_fidelity_errors(steps_csv: Path, args: list[str], words: str) -> None:
    """A bad --timing, a missing calibration file and a bad --set are errors naming the field."""
    res = run("fidelity", str(steps_csv), *args)
    assert res.exit_code == 1 and words in res.stderr, res.output
