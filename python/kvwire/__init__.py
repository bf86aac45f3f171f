"""kvwire: what does moving the KV cache cost?

A Rust discrete-event simulator of disaggregated (and colocated) LLM serving — prefill pool, KV link,
decode pool — with results as Polars DataFrames.

>>> import kvwire
>>> res = kvwire.simulate({"workload": {"requests": 100}})
>>> res.requests.height
100
>>> sorted(res.summary)[:4]
['energy', 'hops', 'hotspot', 'instances']
"""

from kvwire import layout, quant
from kvwire._core import __version__
from kvwire.errors import (
    DoesNotFitError,
    InternalError,
    KvwireError,
    LayoutError,
    QuantError,
    ScenarioError,
    TraceError,
    TraceFileError,
    UnknownPresetError,
)
from kvwire.handoff import handoff
from kvwire.presets import catalog
from kvwire.run import SimResult, simulate
from kvwire.scenario import ScenarioDict, default_scenario, load_scenario, validate
from kvwire.trace_stats import trace_info
from kvwire.traces import TraceScan, read_azure_csv, read_mooncake_jsonl, read_trace, scan_trace

__all__ = [
    "DoesNotFitError",
    "InternalError",
    "KvwireError",
    "LayoutError",
    "QuantError",
    "ScenarioDict",
    "ScenarioError",
    "SimResult",
    "TraceError",
    "TraceFileError",
    "TraceScan",
    "UnknownPresetError",
    "__version__",
    "catalog",
    "default_scenario",
    "handoff",
    "layout",
    "load_scenario",
    "quant",
    "read_azure_csv",
    "read_mooncake_jsonl",
    "read_trace",
    "scan_trace",
    "simulate",
    "trace_info",
    "validate",
]
