"""``kvwire.results``' TypedDicts describe what the library really returns: summaries of runs in every mode,
hand-off results and percentile rows conform (checked by msgspec, an independent validator), and carry no
key the types do not declare (so a new key cannot reach the service's OpenAPI document undocumented)."""

from __future__ import annotations

import doctest
import types
from typing import Any, Union, get_args, get_origin, get_type_hints, is_typeddict

import kvwire
import kvwire.results
import msgspec
import pytest
from kvwire.results import CeilingsDict, HandoffResultDict, PercentileRowDict, SummaryDict

SCENARIOS: dict[str, dict[str, Any]] = {
    "default": {},
    "colocated": {"mode": "colocated", "workload": {"requests": 200}},
    "one-request": {"workload": {"requests": 1}},
    "no-output": {"workload": {"trace": {"arrival_s": [0.0, 0.1], "prompt_tokens": [10, 20], "output_tokens": [0, 1]}}},
    "host-staged": {"link": {"preset": "eth-100g", "model": "host_staged"}, "workload": {"requests": 100}},
    "conditional": {"router": {"disaggregate": {"policy": "conditional", "min_prompt_tokens": 2048}}},
    "overloaded": {"link": "eth-25g", "workload": {"requests": 300, "arrivals": {"rate_per_s": 40.0}}},
    "power-capped": {"decode": {"power_cap_w": 300.0}, "handoff": {"compression": "fp8", "streaming": "layer"}},
}


def undeclared(value: Any, ann: Any, where: str = "") -> list[str]:
    """Paths of dict keys in ``value`` that the annotation ``ann`` does not declare."""
    if is_typeddict(ann):
        hints = get_type_hints(ann)
        out = [f"{where}.{k}" for k in value if k not in hints]
        for k, v in value.items():
            if k in hints:
                out += undeclared(v, hints[k], f"{where}.{k}")
        return out
    origin = get_origin(ann)
    if origin in (Union, types.UnionType):
        members = [a for a in get_args(ann) if is_typeddict(a) or get_origin(a) in (dict, list)]
        return undeclared(value, members[0], where) if members and value is not None else []
    if origin is dict and isinstance(value, dict):
        return [p for k, v in value.items() for p in undeclared(v, get_args(ann)[1], f"{where}.{k}")]
    if origin is list and isinstance(value, list):
        return [p for i, v in enumerate(value) for p in undeclared(v, get_args(ann)[0], f"{where}[{i}]")]
    return []


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_summaries_conform_to_summary_dict(name: str) -> None:
    """The summary of each scenario converts to SummaryDict without error and has no undeclared key; its
    percentile rows convert to PercentileRowDict."""
    res = kvwire.simulate(SCENARIOS[name])
    msgspec.convert(res.summary, SummaryDict, strict=True)
    assert undeclared(res.summary, SummaryDict) == []
    for row in res.percentiles().to_dicts():
        msgspec.convert(row, PercentileRowDict, strict=True)
        assert set(row) == set(get_type_hints(PercentileRowDict))


def test_a_wrong_summary_is_refused() -> None:
    """The check is not vacuous: a summary with a missing section, a wrong type or an extra key is caught."""
    summary = kvwire.simulate({"workload": {"requests": 50}}).summary
    broken = {k: v for k, v in summary.items() if k != "latency"}
    with pytest.raises(msgspec.ValidationError, match="latency"):
        msgspec.convert(broken, SummaryDict, strict=True)
    with pytest.raises(msgspec.ValidationError, match="requests"):
        msgspec.convert({**summary, "requests": {**summary["requests"], "total": "many"}}, SummaryDict, strict=True)
    assert undeclared({**summary, "novel": 1}, SummaryDict) == [".novel"]


@pytest.mark.parametrize(
    "args",
    [{}, {"link": "eth-25g", "compression": "mxfp4", "streaming": "layer"}, {"model": "deepseek-v3", "device": "h200",
     "devices_per_instance": 8}, {"link": "nvlink4", "prompt_tokens": 1}],
)  # fmt: skip
def test_handoff_results_conform(args: dict[str, Any]) -> None:
    """kvwire.handoff returns exactly the keys of HandoffResultDict, with their types."""
    out = kvwire.handoff(**args)
    msgspec.convert(out, HandoffResultDict, strict=True)
    assert set(out) == set(get_type_hints(HandoffResultDict))


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_ceilings_conform_to_ceilings_dict(name: str) -> None:
    """kvwire.ceilings returns exactly the keys of CeilingsDict, with their types, in every mode."""
    out = kvwire.ceilings(SCENARIOS[name])
    msgspec.convert(out, CeilingsDict, strict=True)
    assert undeclared(out, CeilingsDict) == []


def test_results_docstring_examples() -> None:
    """The module's ``>>>`` examples run."""
    result = doctest.testmod(kvwire.results)
    assert result.failed == 0 and result.attempted > 0
