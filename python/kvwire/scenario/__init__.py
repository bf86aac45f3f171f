"""Scenarios: the typed shape of the dict, reading files, checking without running, ``--set``-style changes.

A scenario is a plain dict (or a JSON/TOML file) following the public contract; every field is optional and
``{}`` is the built-in default. The Rust core validates it; this room reads, writes and edits it.

>>> from kvwire.scenario import default_scenario, with_override
>>> sc = with_override(default_scenario(), "workload.arrivals.rate_per_s=14")
>>> sc["workload"]["arrivals"]["rate_per_s"]
14
"""

from kvwire.scenario.check import split_file_trace, validate
from kvwire.scenario.load import (
    MAX_DEPTH,
    default_scenario,
    load_scenario,
    scenario_json,
    to_toml,
)
from kvwire.scenario.overrides import (
    GENERATOR_FIELDS,
    KIND_FIELDS,
    PRESET_PATHS,
    with_override,
    with_overrides,
    with_value,
    with_values,
    without_generator,
)
from kvwire.scenario.types import (
    ArrivalsDict,
    CostDict,
    DisaggregateDict,
    EngineDict,
    FaultEventDict,
    FaultsDict,
    HandoffDict,
    InstanceFaultsDict,
    KvDict,
    KvTierDict,
    LengthDict,
    LinkDict,
    LinkFaultsDict,
    MetricsDict,
    ParallelDict,
    PoolDict,
    PrefixCacheDict,
    RouterDict,
    ScenarioDict,
    SchedulerDict,
    SessionsDict,
    SloDict,
    SpeculativeDict,
    TraceDict,
    TraceFileDict,
    WorkloadDict,
)

__all__ = [
    "GENERATOR_FIELDS",
    "KIND_FIELDS",
    "MAX_DEPTH",
    "PRESET_PATHS",
    "ArrivalsDict",
    "CostDict",
    "DisaggregateDict",
    "EngineDict",
    "FaultEventDict",
    "FaultsDict",
    "HandoffDict",
    "InstanceFaultsDict",
    "KvDict",
    "KvTierDict",
    "LengthDict",
    "LinkDict",
    "LinkFaultsDict",
    "MetricsDict",
    "ParallelDict",
    "PoolDict",
    "PrefixCacheDict",
    "RouterDict",
    "ScenarioDict",
    "SchedulerDict",
    "SessionsDict",
    "SloDict",
    "SpeculativeDict",
    "TraceDict",
    "TraceFileDict",
    "WorkloadDict",
    "default_scenario",
    "load_scenario",
    "scenario_json",
    "split_file_trace",
    "to_toml",
    "validate",
    "with_override",
    "with_overrides",
    "with_value",
    "with_values",
    "without_generator",
]
