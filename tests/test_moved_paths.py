"""The public API did not change when the package moved into rooms: every name of ``kvwire.__all__`` as it was
before (typed in below from that version, not read from the code under test), and every module path the flat
package had (``kvwire.run``, ``kvwire.trace_spec`` ...) with the public names of its ``__all__`` then. An old
path imports the very module object of its new home, so monkeypatching through it still works; the modules
``import kvwire`` did not load before (the report, the plots, the CLI's) are still not loaded by it.

One name moved for good: ``kvwire.trace_spec.split_file_trace`` is ``kvwire.scenario.split_file_trace`` (a
scenario-level step; at its old place it made the ``scenario`` <-> ``trace_spec`` import circle).
"""

from __future__ import annotations

import importlib
import subprocess
import sys

import kvwire
import pytest
from kvwire import _moved

OLD_ALL: dict[str, list[str]] = {
    "kvwire.block_hashes": [
        "HASH_BLOCK_TOKENS",
        "HASH_COLUMN",
        "hash_arrays",
        "prefix_cache_enabled",
        "streamed_hashes_error",
    ],
    "kvwire.capacity": ["CapacityResult", "CompareResult", "SplitResult", "best_split", "capacity", "compare"],
    "kvwire.ceilings": ["ceilings", "load"],
    "kvwire.cli_trace": ["trace_info_cmd", "trace_options", "trace_spec", "with_trace_file"],
    "kvwire.errors": [
        "Cancelled",
        "DoesNotFitError",
        "InternalError",
        "KvwireError",
        "LayoutError",
        "PlotError",
        "QuantError",
        "RequestsNotKeptError",
        "ResourceError",
        "ScenarioError",
        "SweepError",
        "TraceError",
        "TraceFileError",
        "UnknownPresetError",
    ],
    "kvwire.handoff": ["handoff"],
    "kvwire.layout": ["Layout", "convert", "dtypes", "gather", "layouts", "scale_factor"],
    "kvwire.plot": [
        "PlotError",
        "capacity_vs_split",
        "frontier",
        "latency_cdf",
        "metric_vs",
        "read_table",
        "stage_breakdown",
    ],
    "kvwire.presets": ["catalog"],
    "kvwire.progress": ["ProgressFn", "progress_bar"],
    "kvwire.quant": [
        "ELEMENTS",
        "QuantizedTensor",
        "cast",
        "decode",
        "dequantize",
        "error",
        "formats",
        "isa",
        "quantize",
    ],
    "kvwire.quant_report": ["load_kv", "render", "report", "synthetic_kv"],
    "kvwire.report": ["render"],
    "kvwire.results": [
        "AccuracyDict",
        "CeilingsDict",
        "EnergyBreakdownDict",
        "EnergyDict",
        "HandoffResultDict",
        "HopCeilingDict",
        "HopDict",
        "HotspotDict",
        "InstanceDict",
        "LatencyDict",
        "LatencyStatsDict",
        "LinkResultDict",
        "LittleDict",
        "LoadDict",
        "PercentileRowDict",
        "PreemptionsDict",
        "PrefixCacheResultDict",
        "RequestCountsDict",
        "RunStatsDict",
        "SessionsResultDict",
        "SloResultDict",
        "StagesDict",
        "SummaryDict",
        "ThroughputDict",
    ],
    "kvwire.row_writer": ["RowWriter"],
    "kvwire.run": ["KEEP_REQUESTS_MAX", "SimResult", "request_arrays", "simulate"],
    "kvwire.scenario": [
        "ScenarioDict",
        "default_scenario",
        "load_scenario",
        "scenario_json",
        "to_toml",
        "validate",
        "with_override",
        "with_overrides",
        "with_value",
        "with_values",
        "without_generator",
    ],
    "kvwire.sessions": ["session_line", "sessions_summary"],
    "kvwire.summary": [
        "APPROXIMATE_IN_MEMORY",
        "LATENCY_METRICS",
        "QUANTILES",
        "SKETCH_RELATIVE_ERROR",
        "STAGES",
        "percentile_rows",
        "percentiles",
        "requests_frame",
        "row_figures",
        "streamed_percentile_rows",
        "streamed_row_figures",
        "summarise",
        "with_derived",
    ],
    "kvwire.sweep": [
        "DEFINITION_KEYS",
        "flatten_summary",
        "load_sweep",
        "replicate_seed",
        "run_point",
        "run_points",
        "sweep",
        "sweep_points",
        "t_quantile_975",
    ],
    "kvwire.timeline": ["US_PER_S", "trace_dict", "trace_events", "write_trace"],
    "kvwire.trace_formats": ["FORMATS", "Plan", "REQUIRED", "Source", "detect", "diagnose", "plan"],
    "kvwire.trace_ops": [
        "keep_mask",
        "mean_rate_per_s",
        "rate_factor",
        "scale_time",
        "scale_to_rate",
        "thin",
        "window",
    ],
    "kvwire.trace_spec": ["OPTIONS", "TraceFile", "WINDOW_OPTIONS"],
    "kvwire.trace_stats": ["default_bin_s", "plot_rate", "prefix_reuse", "render", "trace_info"],
    "kvwire.traces": [
        "FORMATS",
        "REQUEST_COLUMNS",
        "TraceScan",
        "mean_rate_per_s",
        "read_azure_csv",
        "read_mooncake_jsonl",
        "read_trace",
        "scale_time",
        "scale_to_rate",
        "scan_trace",
        "thin",
        "window",
    ],
}
OLD_TOP: list[str] = [
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


def test_top_level_names() -> None:
    """Every name of the old ``kvwire.__all__`` is still there, and ``__all__`` still lists each."""
    assert set(OLD_TOP) <= set(kvwire.__all__)
    for name in OLD_TOP:
        assert getattr(kvwire, name) is not None, name


@pytest.mark.parametrize("old", sorted(OLD_ALL))
def test_old_module_paths(old: str) -> None:
    """``import kvwire.<old>`` gives the module of the new home (the same object, under its own name), with every
    name its ``__all__`` had; ``kvwire.<old>`` as an attribute is the same module unless it names a function."""
    module = importlib.import_module(old)
    new = _moved.MOVED.get(old, old)
    assert module is importlib.import_module(new)
    assert module.__name__ == new and module.__spec__ is not None and module.__spec__.name == new
    missing = [n for n in OLD_ALL[old] if not hasattr(module, n)]
    assert not missing, f"{old} lost {missing}"
    attr = getattr(kvwire, old.split(".", 1)[1])
    if not callable(attr):
        assert attr is module


def test_functions_stay_functions_after_importing_their_old_module() -> None:
    """``kvwire.sweep`` (and capacity, ceilings, handoff) name functions; importing the old module path of the same
    name leaves them functions (in a fresh interpreter, so nothing was imported before)."""
    code = (
        "import kvwire.sweep, kvwire.capacity, kvwire.ceilings, kvwire.handoff, kvwire\n"
        "import kvwire.run as run, kvwire.trace_spec\n"
        "from kvwire.sweep import replicate_seed\n"
        "fs = (kvwire.sweep, kvwire.capacity, kvwire.ceilings, kvwire.handoff)\n"
        "print(all(callable(f) for f in fs), run.KEEP_REQUESTS_MAX, replicate_seed(1, 0))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["True", "2000000", "1"]


def test_lazy_modules_stay_lazy() -> None:
    """``import kvwire`` loads neither the CLI, the report, the plots nor click (as before the move); an old path to
    one of them loads it when asked."""
    code = (
        "import sys, kvwire\n"
        "lazy = ['kvwire.cli', 'kvwire.results.report', 'kvwire.planning.plot', 'kvwire.kernels.report', 'click']\n"
        "print([m for m in lazy if m in sys.modules])\n"
        "import kvwire.report, kvwire.quant_report\n"
        "print(kvwire.report.__name__, 'kvwire.kernels.report' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.splitlines() == ["[]", "kvwire.results.report True"]


def test_unknown_attribute_is_an_attribute_error() -> None:
    """A name that is neither public nor an old module path is an AttributeError, as for any module."""
    with pytest.raises(AttributeError, match="no attribute 'no_such_thing'"):
        _ = kvwire.no_such_thing  # type: ignore[attr-defined]
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("kvwire.no_such_module")


def test_lazy_public_names_are_listed() -> None:
    """``dir(kvwire)`` lists every public name, those imported on first use (``trace_info``) included."""
    assert set(kvwire.__all__) <= set(dir(kvwire))
