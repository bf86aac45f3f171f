"""Running a scenario and what comes back: :func:`simulate` and its :class:`SimResult` (``run``), the summary
and percentile views (``summary``, ``sessions``), the per-request table written as it grows (``writer``), the
text report (``report``), the timeline (``timeline``), the analytic answers that need no run (``ceilings``,
``handoff``) and the typed shape of every result (``types``).

>>> import kvwire
>>> from kvwire.results import SummaryDict
>>> s: SummaryDict = kvwire.simulate({"workload": {"requests": 50}}).summary
>>> s["requests"]["total"], sorted(s["latency"])
(50, ['e2e_s', 'handoff_s', 'itl_s', 'tpot_s', 'ttft_s'])
"""

from kvwire.results.run import SimResult, simulate
from kvwire.results.types import (
    AccuracyDict,
    CeilingsDict,
    EnergyBreakdownDict,
    EnergyDict,
    FaultsResultDict,
    HandoffResultDict,
    HopCeilingDict,
    HopDict,
    HotspotDict,
    InstanceDict,
    KvTierResultDict,
    LatencyDict,
    LatencyStatsDict,
    LinkResultDict,
    LittleDict,
    LoadDict,
    PercentileRowDict,
    PreemptionsDict,
    PrefixCacheResultDict,
    RequestCountsDict,
    RunStatsDict,
    SessionsResultDict,
    SloResultDict,
    SpeculativeResultDict,
    StagesDict,
    SummaryDict,
    ThroughputDict,
)

__all__ = [
    "AccuracyDict",
    "CeilingsDict",
    "EnergyBreakdownDict",
    "EnergyDict",
    "FaultsResultDict",
    "HandoffResultDict",
    "HopCeilingDict",
    "HopDict",
    "HotspotDict",
    "InstanceDict",
    "KvTierResultDict",
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
    "SimResult",
    "SloResultDict",
    "SpeculativeResultDict",
    "StagesDict",
    "SummaryDict",
    "ThroughputDict",
    "simulate",
]
