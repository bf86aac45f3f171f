"""kvwire: what does moving the KV cache cost?

A Rust discrete-event simulator of disaggregated (and colocated) LLM serving — prefill pool, KV link,
decode pool — with results as Polars DataFrames.

>>> import kvwire
>>> res = kvwire.simulate({"workload": {"requests": 100}})
>>> res.requests.height
100
>>> sorted(res.summary)[:4]
['accuracy', 'energy', 'hops', 'hotspot']
"""

import importlib
from typing import TYPE_CHECKING

from kvwire import _moved
from kvwire._core import __version__
from kvwire.errors import (
    Cancelled,
    DoesNotFitError,
    InternalError,
    KvwireError,
    LayoutError,
    MeasurementError,
    QuantError,
    RequestsNotKeptError,
    ResourceError,
    ScenarioError,
    SweepError,
    TraceError,
    TraceFileError,
    UnknownPresetError,
)
from kvwire.kernels import layout, quant
from kvwire.planning.calibrate import CalibrationResult, calibrate
from kvwire.planning.capacity import CapacityResult, CompareResult, SplitResult, best_split, capacity, compare
from kvwire.planning.fidelity import FidelityResult, fidelity
from kvwire.planning.plan import PlanResult, plan
from kvwire.planning.sweep import load_sweep, sweep, sweep_points
from kvwire.presets import catalog
from kvwire.results.ceilings import ceilings
from kvwire.results.handoff import handoff
from kvwire.results.run import SimResult, simulate
from kvwire.results.steps import step_times
from kvwire.results.types import HandoffResultDict, SummaryDict
from kvwire.scenario.check import validate
from kvwire.scenario.load import default_scenario, load_scenario
from kvwire.scenario.types import ScenarioDict
from kvwire.traces.read import TraceScan, read_azure_csv, read_mooncake_jsonl, read_trace, scan_trace

# The module paths of the flat package (``kvwire.run``, ``kvwire.trace_spec`` ...) name the same modules.
_moved.alias_loaded()

#: Public names imported on first use (what they need is not loaded by ``import kvwire``).
_LAZY = {"trace_info": "kvwire.traces.stats"}

if TYPE_CHECKING:
    from kvwire.traces.stats import trace_info
else:  # (type checkers see the import above and the names below, not a catch-all ``__getattr__``)

    def __getattr__(name: str) -> object:
        if name in _LAZY:
            return getattr(importlib.import_module(_LAZY[name]), name)
        return _moved.module(name)

    def __dir__() -> list[str]:
        return sorted({*globals(), *__all__})


__all__ = [
    "CalibrationResult",
    "Cancelled",
    "CapacityResult",
    "CompareResult",
    "DoesNotFitError",
    "FidelityResult",
    "HandoffResultDict",
    "InternalError",
    "KvwireError",
    "LayoutError",
    "MeasurementError",
    "PlanResult",
    "QuantError",
    "RequestsNotKeptError",
    "ResourceError",
    "ScenarioDict",
    "ScenarioError",
    "SimResult",
    "SplitResult",
    "SummaryDict",
    "SweepError",
    "TraceError",
    "TraceFileError",
    "TraceScan",
    "UnknownPresetError",
    "__version__",
    "best_split",
    "calibrate",
    "capacity",
    "catalog",
    "ceilings",
    "compare",
    "default_scenario",
    "fidelity",
    "handoff",
    "layout",
    "load_scenario",
    "load_sweep",
    "plan",
    "quant",
    "read_azure_csv",
    "read_mooncake_jsonl",
    "read_trace",
    "scan_trace",
    "simulate",
    "step_times",
    "sweep",
    "sweep_points",
    "trace_info",
    "validate",
]
