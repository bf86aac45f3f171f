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

from kvwire import layout, quant
from kvwire._core import __version__
from kvwire.capacity import CapacityResult, CompareResult, SplitResult, best_split, capacity, compare
from kvwire.ceilings import ceilings
from kvwire.errors import (
    Cancelled,
    DoesNotFitError,
    InternalError,
    KvwireError,
    LayoutError,
    QuantError,
    RequestsNotKeptError,
    ResourceError,
    ScenarioError,
    SweepError,
    TraceError,
    TraceFileError,
    UnknownPresetError,
)
from kvwire.handoff import handoff
from kvwire.presets import catalog
from kvwire.results import HandoffResultDict, SummaryDict
from kvwire.run import SimResult, simulate
from kvwire.scenario import ScenarioDict, default_scenario, load_scenario, validate
from kvwire.sweep import load_sweep, sweep, sweep_points
from kvwire.trace_stats import trace_info
from kvwire.traces import TraceScan, read_azure_csv, read_mooncake_jsonl, read_trace, scan_trace

__all__ = [
    "Cancelled",
    "CapacityResult",
    "CompareResult",
    "DoesNotFitError",
    "HandoffResultDict",
    "InternalError",
    "KvwireError",
    "LayoutError",
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
    "capacity",
    "catalog",
    "ceilings",
    "compare",
    "default_scenario",
    "handoff",
    "layout",
    "load_scenario",
    "load_sweep",
    "quant",
    "read_azure_csv",
    "read_mooncake_jsonl",
    "read_trace",
    "scan_trace",
    "simulate",
    "sweep",
    "sweep_points",
    "trace_info",
    "validate",
]
