"""Parallel layouts from Python (issue 24 item 1): the summary's ``comm_fraction``, the report's collectives line,
errors that name the field, ``--set`` on the command line, and the echo. The closed forms of each collective
are checked in the core (``rust/kvwire-core/tests/parallel.rs``); here the numbers are held against a
hand-written ring all-reduce once, through the public API."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import kvwire
import pytest
from kvwire.errors import ScenarioError
from kvwire.results.report import render

ONE_PREFILL: dict[str, Any] = {
    "model": "llama3-70b",
    "prefill": {"device": "h100", "parallel": {"tp": 8}},
    "decode": {"device": "h100", "devices_per_instance": 8},
    "cost": {"enforce_tdp": False},
    "workload": {"trace": {"arrival_s": [0.0], "prompt_tokens": [2048], "output_tokens": [1]}},
}


def test_one_prefill_step_pays_the_ring_all_reduce() -> None:
    """Llama-3-70B, TP 8 on NVLink 4 (450 GB/s, 5 µs): 160 all-reduces of 2,048 x 8,192 x 2 bytes, each
    2·7/8·S/B + 14·alpha; ``comm_fraction`` is that over the step's busy time, and the step is the 8-device step
    plus it."""
    s = 2048 * 8192 * 2
    comm = 160 * (2 * 7 / 8 * s / 450e9 + 14 * 5e-6)
    res = kvwire.simulate(ONE_PREFILL)
    plain = kvwire.simulate({**ONE_PREFILL, "prefill": {"device": "h100", "devices_per_instance": 8}})
    busy = res.summary["utilisation"]["prefill-0"] * res.summary["throughput"]["window_s"]
    plain_busy = plain.summary["utilisation"]["prefill-0"] * plain.summary["throughput"]["window_s"]
    frac = res.summary["instances"]["prefill-0"]["comm_fraction"]
    assert frac == pytest.approx(comm / busy, rel=1e-9)
    assert busy == pytest.approx(plain_busy + comm, rel=1e-9)
    assert plain.summary["instances"]["prefill-0"]["comm_fraction"] == 0.0


def test_report_names_the_layout_and_its_collectives() -> None:
    """The report's pool line shows the layout (TP8, TP4 x PP2) and a collectives line gives each instance's
    share; without ``parallel`` there is no such line."""
    sc = {
        "model": "llama3-70b",
        "prefill": {"device": "h100", "parallel": {"tp": 8}},
        "decode": {"device": "h100", "parallel": {"tp": 4, "pp": 2}},
        "workload": {"requests": 60},
    }
    text = render(kvwire.simulate(sc))
    assert "8xh100 (TP8)" in text and "8xh100 (TP4 x PP2)" in text
    line = next(ln for ln in text.splitlines() if ln.startswith("collectives"))
    assert "prefill-0" in line and "decode-0" in line
    assert "collectives" not in render(kvwire.simulate({"workload": {"requests": 60}}))


@pytest.mark.parametrize(
    ("parallel", "field"),
    [
        ({"tp": 3}, "prefill.parallel.tp"),
        ({"ep": 2}, "prefill.parallel.ep"),
        ({"tp": "8"}, "prefill.parallel.tp"),
        ({"tp": 2, "warp": 9}, "prefill.parallel"),
        ({"tp": 2, "scale_out": "carrier-pigeon"}, "prefill.parallel.scale_out"),
        ({"tp": 2, "micro_batches": 2}, "prefill.parallel.micro_batches"),
        ({"pp": 2, "micro_batches": 0}, "prefill.parallel.micro_batches"),
    ],
)
def test_bad_layouts_name_the_field(parallel: dict[str, Any], field: str) -> None:
    """Each refusal is a ScenarioError whose path is the field at fault."""
    with pytest.raises(ScenarioError) as e:
        kvwire.simulate({"prefill": {"parallel": parallel}, "workload": {"requests": 5}})
    assert e.value.path.startswith(field), (e.value.path, str(e.value))


def test_micro_batches_shorten_a_pipelined_prefill() -> None:
    """A burst of 64 prompts on a prefill pool of TP 4 x PP 2: with four micro-batches in flight the pipeline's
    bubble is filled, so the prompts' first tokens come sooner (compute-bound prefill: about half the stage
    time), and one micro-batch is the pipeline without the field, identical."""
    n = 64
    burst = {"trace": {"arrival_s": [0.0] * n, "prompt_tokens": [1024] * n, "output_tokens": [2] * n}}
    sc: dict[str, Any] = {
        "model": "llama3-70b",
        "prefill": {"device": "h100", "parallel": {"tp": 4, "pp": 2}},
        "decode": {"device": "h100", "devices_per_instance": 8},
        "workload": burst,
    }
    ttft = lambda s: kvwire.simulate(s).summary["latency"]["ttft_s"]["p50"]  # noqa: E731
    base = ttft(sc)
    four = ttft({**sc, "prefill": {"device": "h100", "parallel": {"tp": 4, "pp": 2, "micro_batches": 4}}})
    one = ttft({**sc, "prefill": {"device": "h100", "parallel": {"tp": 4, "pp": 2, "micro_batches": 1}}})
    assert one == base
    assert 0.45 * base < four < 0.75 * base, (four, base)


def test_memory_fit_names_the_smallest_tp() -> None:
    """Llama-3-70B's 141 GB of weights on one H100: refused at prefill.parallel.tp, naming TP 2 and the --set
    that gives it."""
    with pytest.raises(ScenarioError) as e:
        kvwire.simulate({"model": "llama3-70b", "prefill": {"parallel": {"tp": 1}}, "decode": {"parallel": {"tp": 4}}})
    assert e.value.path == "prefill.parallel.tp"
    assert "the smallest tp that fits is 2 (--set prefill.parallel.tp=2)" in str(e.value)


def test_cli_set_reaches_the_layout(tmp_path: Any) -> None:
    """``kvwire run --set prefill.parallel.tp=8`` runs the layout: the JSON summary has a positive
    comm_fraction for prefill-0 and devices 8."""
    out = subprocess.run(
        [sys.executable, "-m", "kvwire.cli", "run", "--json", "--set", "model=llama3-70b",
         "--set", "prefill.parallel.tp=8", "--set", "decode.devices_per_instance=4",
         "--set", "workload.requests=40"],
        capture_output=True, text=True, check=True, cwd=tmp_path,
    )  # fmt: skip
    summary = json.loads(out.stdout)["summary"]
    inst = summary["instances"]["prefill-0"]
    assert inst["devices"] == 8 and inst["comm_fraction"] > 0


def test_echo_holds_the_layout() -> None:
    """The echoed scenario carries ``parallel`` and the derived ``devices_per_instance``; re-running it gives
    the same table."""
    sc = {
        "model": "mixtral-8x7b",
        "prefill": {"parallel": {"tp": 4, "ep": 4}},
        "decode": {"parallel": {"tp": 2, "dp": 2, "ep": 4, "expert_imbalance": 1.25}},
        "cost": {"comm_overlap": 0.3},
        "workload": {"requests": 40},
    }
    res = kvwire.simulate(sc)
    echo = res.scenario
    assert echo["decode"]["parallel"]["dp"] == 2 and echo["decode"]["devices_per_instance"] == 4
    assert echo["cost"]["comm_overlap"] == 0.3
    again = kvwire.simulate(echo)
    assert again.requests.equals(res.requests)
