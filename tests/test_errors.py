"""Bad input gets a clear exception that names the offending field, and the process keeps working.

The contract (spec/interface.md, README "Python"): unknown fields are errors that name the field; errors are
``kvwire.ScenarioError`` (a ``ValueError``) or a subclass — ``UnknownPresetError`` (message lists the known
names), ``DoesNotFitError`` (path = the pool), ``TraceError`` (path = column and row) — with ``e.path`` the
dotted field path; exceptions pickle; nothing panics across the FFI boundary. Every test that provokes an
error runs a valid simulation afterwards (:func:`still_works`).
"""

from __future__ import annotations

import copy
import math
import pickle
import subprocess
import sys
import textwrap
from typing import Any

import kvwire
import numpy as np
import polars as pl
import pytest

#: A small valid run used after every error, and its expected request count.
SMALL = {"workload": {"requests": 20, "arrivals": {"rate_per_s": 8.0}}}


def still_works() -> None:
    """A valid simulation still runs and gives a sane result after an error."""
    res = kvwire.simulate(SMALL)
    assert res.requests.height == 20
    assert res.summary["requests"]["completed"] == 20


def expect(
    scenario: Any,
    cls: type[BaseException],
    path: str,
    substring: str,
    requests: Any = None,
) -> kvwire.ScenarioError:
    """Run ``scenario`` (with ``requests``) and check the exception class, ``e.path`` and a substring."""
    with pytest.raises(cls) as info:
        kvwire.simulate(scenario, requests=requests)
    e = info.value
    assert isinstance(e, kvwire.ScenarioError)
    assert isinstance(e, ValueError)
    assert e.path == path, f"path {e.path!r} != {path!r} ({e})"
    assert substring in str(e), f"{substring!r} not in {str(e)!r}"
    # The message itself names the field too (not only the attribute).
    if path:
        assert path in str(e)
    still_works()
    return e


# --------------------------------------------------------------------------------------------------
# Out-of-range numbers


@pytest.mark.parametrize("rate", [-1.0, 0.0, -1e-300])
def test_nonpositive_arrival_rate(rate: float) -> None:
    """A zero or negative arrival rate is a ScenarioError naming workload.arrivals.rate_per_s."""
    expect(
        {"workload": {"arrivals": {"rate_per_s": rate}}},
        kvwire.ScenarioError,
        "workload.arrivals.rate_per_s",
        "> 0",
    )


@pytest.mark.parametrize(
    ("scenario", "path"),
    [
        ({"prefill": {"instances": 0}}, "prefill.instances"),
        ({"decode": {"instances": 0}}, "decode.instances"),
        ({"prefill": {"devices_per_instance": 0}}, "prefill.devices_per_instance"),
        ({"decode": {"devices_per_instance": 0}}, "decode.devices_per_instance"),
        ({"mode": "colocated", "colocated": {"instances": 0}}, "colocated.instances"),
        ({"mode": "colocated", "colocated": {"devices_per_instance": 0}}, "colocated.devices_per_instance"),
    ],
)
def test_zero_instances_or_devices(scenario: dict[str, Any], path: str) -> None:
    """Zero instances or devices per instance in any pool is refused with the pool field's path."""
    expect(scenario, kvwire.ScenarioError, path, "must be in [1,")


@pytest.mark.parametrize("fraction", [1.0, 1.5, -0.1, -1e-9])
def test_warmup_fraction_outside_unit_interval(fraction: float) -> None:
    """metrics.warmup_fraction must lie in [0, 1): 1 and above, and negatives, are refused."""
    expect({"metrics": {"warmup_fraction": fraction}}, kvwire.ScenarioError, "metrics.warmup_fraction", "[0, 1)")


@pytest.mark.parametrize("fraction", [0.0, 0.999])
def test_warmup_fraction_edges_accepted(fraction: float) -> None:
    """The closed lower end 0 and values just below 1 are valid warm-up fractions."""
    kvwire.validate({"metrics": {"warmup_fraction": fraction}})


# --------------------------------------------------------------------------------------------------
# Presets


@pytest.mark.parametrize(
    ("scenario", "path", "kind"),
    [
        ({"model": "gpt-5"}, "model", "model"),
        ({"model": {"preset": "gpt-5"}}, "model.preset", "model"),
        ({"prefill": {"device": "tpu-v9"}}, "prefill.device", "device"),
        ({"decode": {"device": {"preset": "tpu-v9"}}}, "decode.device.preset", "device"),
        ({"link": "carrier-pigeon"}, "link", "link"),
        ({"link": {"preset": "carrier-pigeon", "channels": 2}}, "link.preset", "link"),
    ],
)
def test_unknown_preset_lists_known_names(scenario: dict[str, Any], path: str, kind: str) -> None:
    """An unknown model/device/link preset is an UnknownPresetError whose message lists every known name."""
    e = expect(scenario, kvwire.UnknownPresetError, path, "unknown")
    known = kvwire.catalog()[{"model": "models", "device": "devices", "link": "links"}[kind]]
    for name in known:
        assert name in str(e), f"known preset {name!r} missing from {e}"


@pytest.mark.parametrize(
    ("scenario", "path"),
    [
        ({"model": "llama3-70b"}, "prefill"),
        ({"model": "llama3-70b", "prefill": {"devices_per_instance": 2}}, "decode"),
        ({"model": "llama3-70b", "mode": "colocated"}, "colocated"),
    ],
)
def test_model_too_big_for_device(scenario: dict[str, Any], path: str) -> None:
    """Llama-3-70B (141 GB of BF16 weights) on one 80 GB H100 is a DoesNotFitError naming the pool.

    With 2 prefill devices (160 GB x 0.9 = 144 GB usable > 141.1 GB) the prefill pool fits, so the decode pool
    is the one named.
    """
    e = expect(scenario, kvwire.DoesNotFitError, path, "does not fit")
    assert "70B" in str(e)


# --------------------------------------------------------------------------------------------------
# Non-finite numbers anywhere in the scenario dict


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf, np.float64("nan"), np.float32("inf")])
@pytest.mark.parametrize(
    ("where", "path"),
    [
        (("workload", "arrivals", "rate_per_s"), "workload.arrivals.rate_per_s"),
        (("slo", "ttft_s"), "slo.ttft_s"),
        (("metrics", "warmup_fraction"), "metrics.warmup_fraction"),
        (("cost", "step_overhead_s"), "cost.step_overhead_s"),
        (("prefill", "power_cap_w"), "prefill.power_cap_w"),
        (("workload", "prompt_tokens", "mean"), "workload.prompt_tokens.mean"),
    ],
)
def test_non_finite_values_are_refused_with_path(bad: float, where: tuple[str, ...], path: str) -> None:
    """NaN/±inf (Python or numpy floats) at any depth of the scenario is a ScenarioError naming the field."""
    sc = kvwire.default_scenario()
    node = sc
    for k in where[:-1]:
        node = node[k]
    node[where[-1]] = bad
    expect(sc, kvwire.ScenarioError, path, "finite")


def test_non_finite_inside_inline_preset_and_trace_list() -> None:
    """NaN inside an inline preset object and inside a workload.trace list is named down to the index."""
    expect(
        {"model": {"preset": "llama3-8b", "weight_bytes_per_param": math.nan}},
        kvwire.ScenarioError,
        "model.weight_bytes_per_param",
        "finite",
    )
    expect(
        {"link": {"preset": "ib-ndr", "latency_us": math.inf}},
        kvwire.ScenarioError,
        "link.latency_us",
        "finite",
    )
    trace = {"arrival_s": [0.0, math.nan], "prompt_tokens": [1, 1], "output_tokens": [1, 1]}
    expect({"workload": {"trace": trace}}, kvwire.ScenarioError, "workload.trace.arrival_s[1]", "finite")


# --------------------------------------------------------------------------------------------------
# requests= tables

GOOD_TABLE = {
    "arrival_s": [0.0, 0.5, 1.0, 1.5],
    "prompt_tokens": [100, 200, 300, 400],
    "output_tokens": [5, 6, 7, 8],
}


def _table(**changes: list[Any]) -> pl.DataFrame:
    cols = dict(GOOD_TABLE)
    cols.update(changes)
    return pl.DataFrame(cols)


@pytest.mark.parametrize(
    ("table", "path", "substring"),
    [
        (_table(arrival_s=[0.0, math.nan, 1.0, 1.5]), "requests.arrival_s[1]", "finite"),
        (_table(arrival_s=[0.0, 0.5, math.inf, 1.5]), "requests.arrival_s[2]", "finite"),
        (_table(arrival_s=[-1.0, 0.5, 1.0, 1.5]), "requests.arrival_s[0]", "≥ 0"),
        (_table(prompt_tokens=[100.0, 200.0, math.nan, 400.0]), "requests.prompt_tokens[2]", "whole"),
        (_table(prompt_tokens=[100, -200, 300, 400]), "requests.prompt_tokens[1]", "-200"),
        (_table(prompt_tokens=[100, 200, 300, 0]), "requests.prompt_tokens[3]", "[1,"),
        (_table(output_tokens=[5, 6, 7, -8]), "requests.output_tokens[3]", "-8"),
        (_table(prompt_tokens=[100.0, 200.5, 300.0, 400.0]), "requests.prompt_tokens[1]", "whole"),
        (_table(output_tokens=[5.0, 6.0, 7.25, 8.0]), "requests.output_tokens[2]", "whole"),
        (_table(arrival_s=[0.0, None, 1.0, 1.5]), "requests.arrival_s[1]", "null"),
        (_table(prompt_tokens=[100, 200, None, 400]), "requests.prompt_tokens[2]", "null"),
        (_table(output_tokens=[None, 6, 7, 8]), "requests.output_tokens[0]", "null"),
        (_table(arrival_s=[0.0, 1.0, 0.5, 1.5]), "requests.arrival_s[2]", "sorted"),
        (_table(prompt_tokens=["a", "b", "c", "d"]), "requests.prompt_tokens", "numeric"),
    ],
)
def test_bad_request_table_values(table: pl.DataFrame, path: str, substring: str) -> None:
    """NaN, inf, negative, zero-prompt, non-integer, null and unsorted values in a requests= frame are a
    TraceError naming the column and the first offending row."""
    expect({}, kvwire.TraceError, path, substring, requests=table)


def test_unsorted_table_names_first_out_of_order_row() -> None:
    """An unsorted table names the first row that arrives before its predecessor (Clarifications)."""
    t = _table(arrival_s=[0.0, 2.0, 1.0, 0.5])
    e = expect({}, kvwire.TraceError, "requests.arrival_s[2]", "sorted", requests=t)
    assert "row 2" in str(e)


def test_empty_request_table() -> None:
    """A table with the three columns but no rows is a TraceError: at least one request is needed."""
    empty = pl.DataFrame(schema={"arrival_s": pl.Float64, "prompt_tokens": pl.Int64, "output_tokens": pl.Int64})
    expect({}, kvwire.TraceError, "requests", "empty", requests=empty)
    expect(
        {"workload": {"trace": {"arrival_s": [], "prompt_tokens": [], "output_tokens": []}}},
        kvwire.TraceError,
        "workload.trace",
        "empty",
    )


@pytest.mark.parametrize("missing", ["arrival_s", "prompt_tokens", "output_tokens"])
def test_missing_request_column(missing: str) -> None:
    """A frame (or dict of arrays) without one of the three columns names the missing column."""
    cols = {k: v for k, v in GOOD_TABLE.items() if k != missing}
    expect({}, kvwire.TraceError, f"requests.{missing}", "missing", requests=pl.DataFrame(cols))
    expect(
        {},
        kvwire.TraceError,
        f"requests.{missing}",
        "missing",
        requests={k: np.asarray(v) for k, v in cols.items()},
    )


def test_columns_of_unequal_length() -> None:
    """Columns of different lengths are refused, naming the short column."""
    req = {
        "arrival_s": np.array([0.0, 1.0]),
        "prompt_tokens": np.array([5]),
        "output_tokens": np.array([1, 1]),
    }
    expect({}, kvwire.TraceError, "requests.prompt_tokens", "equal length", requests=req)


def test_workload_trace_with_wrong_element_types() -> None:
    """workload.trace token lists must hold non-negative integers: -1 and 2.5 are refused by index."""
    bad_neg = {"arrival_s": [0.0], "prompt_tokens": [-1], "output_tokens": [1]}
    expect({"workload": {"trace": bad_neg}}, kvwire.ScenarioError, "workload.trace.prompt_tokens[0]", "-1")
    bad_frac = {"arrival_s": [0.0], "prompt_tokens": [3], "output_tokens": [2.5]}
    expect({"workload": {"trace": bad_frac}}, kvwire.ScenarioError, "workload.trace.output_tokens[0]", "2.5")


# --------------------------------------------------------------------------------------------------
# Unknown keys at every nesting level

UNKNOWN_KEY_CASES: list[tuple[dict[str, Any], str]] = [
    ({"bogus": 1}, "bogus"),
    ({"prefill": {"bogus": 1}}, "prefill.bogus"),
    ({"decode": {"bogus": 1}}, "decode.bogus"),
    ({"mode": "colocated", "colocated": {"bogus": 1}}, "colocated.bogus"),
    ({"handoff": {"bogus": 1}}, "handoff.bogus"),
    ({"workload": {"bogus": 1}}, "workload.bogus"),
    ({"workload": {"arrivals": {"rate_per_s": 1.0, "bogus": 1}}}, "workload.arrivals.bogus"),
    (
        {"workload": {"prompt_tokens": {"dist": "fixed", "value": 5, "bogus": 1}}},
        "workload.prompt_tokens.bogus",
    ),
    (
        {"workload": {"output_tokens": {"dist": "fixed", "value": 5, "bogus": 1}}},
        "workload.output_tokens.bogus",
    ),
    (
        {"workload": {"trace": {"arrival_s": [0.0], "prompt_tokens": [1], "output_tokens": [1], "bogus": 1}}},
        "workload.trace.bogus",
    ),
    ({"slo": {"bogus": 1}}, "slo.bogus"),
    ({"metrics": {"bogus": 1}}, "metrics.bogus"),
    ({"cost": {"bogus": 1}}, "cost.bogus"),
    ({"scheduler": {"bogus": 1}}, "scheduler.bogus"),
    ({"router": {"bogus": 1}}, "router.bogus"),
    ({"engine": {"bogus": 1}}, "engine.bogus"),
    ({"model": {"preset": "llama3-8b", "bogus": 1}}, "model.bogus"),
    ({"prefill": {"device": {"preset": "h100", "bogus": 1}}}, "prefill.device.bogus"),
    ({"link": {"preset": "ib-ndr", "bogus": 1}}, "link.bogus"),
]


@pytest.mark.parametrize(("scenario", "path"), UNKNOWN_KEY_CASES, ids=[p for _, p in UNKNOWN_KEY_CASES])
def test_unknown_key_is_named(scenario: dict[str, Any], path: str) -> None:
    """An unknown key at any nesting level is a ScenarioError whose path runs down to the key itself."""
    with pytest.raises(kvwire.ScenarioError) as info:
        kvwire.validate(scenario)
    e = info.value
    assert e.path.startswith(path), (e.path, path)
    assert path in str(e)
    assert "unknown field" in str(e)
    still_works()


@pytest.mark.parametrize(("scenario", "path"), UNKNOWN_KEY_CASES, ids=[p for _, p in UNKNOWN_KEY_CASES])
def test_unknown_key_path_is_exact(scenario: dict[str, Any], path: str) -> None:
    """e.path of an unknown key is exactly the dotted path of that key (``prefill.bogus``), nothing more."""
    with pytest.raises(kvwire.ScenarioError) as info:
        kvwire.validate(scenario)
    assert info.value.path == path


# --------------------------------------------------------------------------------------------------
# Wrong types and inconsistent combinations


@pytest.mark.parametrize(
    ("scenario", "path"),
    [
        ({"workload": {"requests": "100"}}, "workload.requests"),
        ({"workload": {"requests": 10.5}}, "workload.requests"),
        ({"workload": {"requests": -5}}, "workload.requests"),
        ({"workload": {"seed": "one"}}, "workload.seed"),
        ({"workload": {"arrivals": {"rate_per_s": "fast"}}}, "workload.arrivals.rate_per_s"),
        ({"prefill": {"instances": "2"}}, "prefill.instances"),
        ({"decode": {"devices_per_instance": [1]}}, "decode.devices_per_instance"),
        ({"slo": {"ttft_s": "1s"}}, "slo.ttft_s"),
        ({"cost": {"enforce_tdp": "yes"}}, "cost.enforce_tdp"),
        ({"engine": {"macro_steps": 1}}, "engine.macro_steps"),
        ({"link": {"preset": "ib-ndr", "channels": "2"}}, "link.channels"),
        ({"link": {"preset": 5}}, "link.preset"),
        ({"model": 5}, "model"),
        ({"prefill": "h100"}, "prefill"),
        ({"slo": "tight"}, "slo"),
        ({"mode": "hybrid"}, "mode"),
        ({"cost": {"prefill_lm_head": "first"}}, "cost.prefill_lm_head"),
        ({"router": {"prefill": "random"}}, "router.prefill"),
    ],
)
def test_wrong_type_is_named(scenario: dict[str, Any], path: str) -> None:
    """A value of the wrong type (string for a number, list for an integer, unknown enum variant...) is a
    ScenarioError naming the field."""
    expect(scenario, kvwire.ScenarioError, path, "")


def test_trace_and_requests_together() -> None:
    """workload.trace together with a requests= table is refused: the requests are given once."""
    trace = {"arrival_s": [0.0], "prompt_tokens": [10], "output_tokens": [2]}
    expect(
        {"workload": {"trace": trace}},
        kvwire.ScenarioError,
        "workload.trace",
        "once",
        requests=pl.DataFrame(trace),
    )


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("requests", 10),
        ("seed", 3),
        ("arrivals", {"rate_per_s": 2.0}),
        ("prompt_tokens", {"dist": "fixed", "value": 10}),
        ("output_tokens", {"dist": "fixed", "value": 10}),
    ],
)
def test_generator_fields_with_a_table(field: str, value: Any) -> None:
    """A generator field (requests, seed, arrivals, prompt/output lengths) next to an explicit table is
    refused, whether the table comes as requests= or as workload.trace."""
    expect(
        {"workload": {field: value}},
        kvwire.ScenarioError,
        f"workload.{field}",
        "explicit requests",
        requests=pl.DataFrame(GOOD_TABLE),
    )
    expect(
        {"workload": {field: value, "trace": GOOD_TABLE}},
        kvwire.ScenarioError,
        f"workload.{field}",
        "explicit requests",
    )


@pytest.mark.parametrize(
    ("scenario", "path"),
    [
        ({"mode": "colocated", "prefill": {"device": "h100"}}, "prefill"),
        ({"mode": "colocated", "decode": {"instances": 2}}, "decode"),
        ({"mode": "colocated", "link": "ib-ndr"}, "link"),
        ({"colocated": {"instances": 2}}, "colocated"),
    ],
)
def test_mode_and_pools_must_agree(scenario: dict[str, Any], path: str) -> None:
    """Colocated mode refuses prefill/decode/link; disaggregated mode refuses a colocated pool."""
    expect(scenario, kvwire.ScenarioError, path, "colocated")


def test_arrival_process_fields() -> None:
    """gamma arrivals need a cv; poisson arrivals refuse one (their cv is 1)."""
    expect(
        {"workload": {"arrivals": {"process": "gamma", "rate_per_s": 2.0}}},
        kvwire.ScenarioError,
        "workload.arrivals.cv",
        "required",
    )
    expect(
        {"workload": {"arrivals": {"process": "poisson", "rate_per_s": 2.0, "cv": 2.0}}},
        kvwire.ScenarioError,
        "workload.arrivals.cv",
        "not used",
    )
    expect(
        {"workload": {"arrivals": {"rate_per_s": 2.0, "cv": 2.0}}},
        kvwire.ScenarioError,
        "workload.arrivals.cv",
        "not used",
    )
    expect(
        {"workload": {"arrivals": {"process": "gamma", "rate_per_s": 2.0, "cv": 0.0}}},
        kvwire.ScenarioError,
        "workload.arrivals.cv",
        "must be in [0.001, 100]",
    )


@pytest.mark.parametrize(
    ("length", "field", "substring"),
    [
        ({"dist": "fixed", "value": 5, "mean": 5}, "mean", "not used"),
        ({"dist": "fixed", "value": 5, "cv": 0.5}, "cv", "not used"),
        ({"dist": "fixed"}, "value", "required"),
        ({"dist": "uniform", "min": 10, "max": 5}, "max", "below min"),
        ({"dist": "uniform", "min": 10}, "max", "required"),
        ({"dist": "uniform", "min": 1, "max": 5, "mean": 3}, "mean", "not used"),
        ({"dist": "lognormal", "mean": 100}, "cv", "required"),
        ({"dist": "lognormal", "cv": 0.5}, "mean", "required"),
        ({"dist": "lognormal", "mean": 100, "cv": 0.5, "value": 3}, "value", "not used"),
        ({"dist": "lognormal", "mean": 100, "cv": 0.5, "min": 50, "max": 40}, "max", "below min"),
        ({"dist": "lognormal", "mean": -1, "cv": 0.5}, "mean", "> 0"),
        ({"dist": "fixed", "value": 0}, "value", "≥ 1"),
    ],
)
def test_length_distribution_fields(length: dict[str, Any], field: str, substring: str) -> None:
    """Each length distribution takes only its own fields, requires the ones it needs, and checks min ≤ max;
    a prompt length of 0 is refused."""
    expect(
        {"workload": {"prompt_tokens": length}},
        kvwire.ScenarioError,
        f"workload.prompt_tokens.{field}",
        substring,
    )


def test_output_length_may_be_zero() -> None:
    """Output lengths may be 0 (Clarifications): a fixed output of 0 validates (a prompt of 0 does not)."""
    kvwire.validate({"workload": {"output_tokens": {"dist": "fixed", "value": 0}}})


def test_unknown_compression_format_lists_known() -> None:
    """An unknown handoff.compression format is refused and the message lists every catalog format."""
    e = expect({"handoff": {"compression": "zip"}}, kvwire.ScenarioError, "handoff.compression", "unknown")
    for name in kvwire.catalog()["formats"]:
        assert name in str(e)


def test_compression_in_colocated_mode() -> None:
    """Compression has nothing to compress in colocated mode and is refused there."""
    expect(
        {"mode": "colocated", "handoff": {"compression": "fp8"}},
        kvwire.ScenarioError,
        "handoff.compression",
        "colocated",
    )


def test_scenario_that_is_not_a_mapping() -> None:
    """A list, a number or an unreadable file path as the scenario is a ScenarioError, not a TypeError."""
    with pytest.raises(kvwire.ScenarioError):
        kvwire.simulate([1, 2])  # type: ignore[arg-type]
    with pytest.raises(kvwire.ScenarioError):
        kvwire.simulate(5)  # type: ignore[arg-type]
    with pytest.raises(kvwire.ScenarioError) as info:
        kvwire.simulate("/nonexistent/scenario.json")
    assert "/nonexistent/scenario.json" in str(info.value)
    still_works()


# --------------------------------------------------------------------------------------------------
# Exceptions themselves


def _raised(scenario: Any, requests: Any = None) -> kvwire.ScenarioError:
    try:
        kvwire.simulate(scenario, requests=requests)
    except kvwire.ScenarioError as e:
        return e
    raise AssertionError("no error raised")


def test_exception_hierarchy() -> None:
    """Every scenario-error class is a KvwireError and a ValueError; InternalError is a RuntimeError."""
    for cls in (kvwire.ScenarioError, kvwire.UnknownPresetError, kvwire.DoesNotFitError, kvwire.TraceError):
        assert issubclass(cls, kvwire.KvwireError)
        assert issubclass(cls, ValueError)
        assert issubclass(cls, kvwire.ScenarioError)
    assert issubclass(kvwire.InternalError, kvwire.KvwireError)
    assert issubclass(kvwire.InternalError, RuntimeError)


@pytest.mark.parametrize(
    ("scenario", "requests", "cls"),
    [
        ({"workload": {"arrivals": {"rate_per_s": -1}}}, None, kvwire.ScenarioError),
        ({"model": "gpt-5"}, None, kvwire.UnknownPresetError),
        ({"model": "llama3-70b"}, None, kvwire.DoesNotFitError),
        ({}, {"arrival_s": [0.0], "prompt_tokens": [0], "output_tokens": [1]}, kvwire.TraceError),
    ],
)
def test_raised_exceptions_pickle(scenario: dict[str, Any], requests: Any, cls: type[Exception]) -> None:
    """Exceptions raised from the core pickle and unpickle with their class, message and path intact."""
    e = _raised(scenario, requests)
    assert type(e) is cls
    back = pickle.loads(pickle.dumps(e))
    assert type(back) is cls
    assert str(back) == str(e)
    assert back.path == e.path and e.path


def test_internal_error_pickles_with_path() -> None:
    """InternalError, which also carries ``path``, keeps its class, message and path through pickle."""
    e = kvwire.InternalError("broken invariant", "engine")
    back = pickle.loads(pickle.dumps(e))
    assert type(back) is kvwire.InternalError
    assert str(back) == "broken invariant"
    assert back.path == "engine"


# --------------------------------------------------------------------------------------------------
# No panic, no foreign exception, ever

MALFORMED: list[Any] = [
    {"workload": {"arrivals": {}}},
    {"workload": {"prompt_tokens": {"mean": 5}}},
    {"workload": {"prompt_tokens": {"dist": "uniform", "min": 0, "max": 0}}},
    {"workload": {"requests": 0}},
    {"workload": {"requests": 2**70}},
    {"workload": {"requests": True}},
    {"workload": {"seed": 2**64}},
    {"workload": {"seed": -1}},
    {"workload": []},
    {"workload": {"trace": {"arrival_s": [0.0, 1.0], "prompt_tokens": [1], "output_tokens": [1]}}},
    {"workload": {"trace": {"arrival_s": [1.0, 0.0], "prompt_tokens": [1, 1], "output_tokens": [1, 1]}}},
    {"workload": {"trace": {"arrival_s": [0.0], "prompt_tokens": [2**32], "output_tokens": [1]}}},
    {"workload": {"trace": {"arrival_s": "0", "prompt_tokens": [1], "output_tokens": [1]}}},
    {"workload": {"trace": {"arrival_s": None, "prompt_tokens": [1], "output_tokens": [1]}}},
    {"model": {}},
    {"model": None, "decode": {"device": {}}},
    {"model": {"preset": None}},
    {"model": {"preset": "llama3-8b", "layers": 0}},
    {"model": {"preset": "llama3-8b", "kv_heads": 64}},
    {"model": {"preset": "llama3-8b", "layers": -3}},
    {"model": {"preset": "llama3-8b", "layers": 2**40}},
    {"model": {"preset": "llama3-8b", "d_model": 4294967295, "layers": 4294967295}},
    {"model": [1, 2]},
    {"prefill": {"device": {"peak_tflops": 100}}},
    {"prefill": {"device": {"preset": "h100", "hbm_gb": 0}}},
    {"prefill": {"device": {"preset": "h100", "idle_w": 800}}},
    {"prefill": {"device": {"preset": "h100", "flops_eff": 1.5}}},
    {"prefill": {"device": [1]}},
    {"prefill": {"device": None}},
    {"prefill": {"power_cap_w": 50}},
    {"prefill": {"power_cap_w": -1}},
    {"prefill": {"instances": 2**40}},
    {"prefill": {"instances": -1}},
    {"decode": {"devices_per_instance": 1.5}},
    {"link": [1]},
    {"link": {"preset": "ib-ndr", "channels": 0}},
    {"link": {"preset": "ib-ndr", "channels": 2**32}},
    {"link": {"preset": "ib-ndr", "channels": 2.0}},
    {"link": {"preset": "ib-ndr", "bandwidth_gb_per_s": 0}},
    {"link": {"preset": "ib-ndr", "latency_us": -1}},
    {"link": {"bandwidth_gb_per_s": 1}},
    {"handoff": {"compression": 5}},
    {"handoff": {"compress_at": "endpoint"}},
    {"handoff": {"streaming": "layers"}},
    {"handoff": {"streaming": "layer"}, "link": {"preset": "ib-ndr", "model": "shared"}},
    {"handoff": {"compress_at": "sender"}},
    {"cost": {"mem_util": 0}},
    {"cost": {"mem_util": 1.01}},
    {"cost": {"mem_util": 0.01}},
    {"cost": {"s_min": 0}},
    {"cost": {"step_overhead_s": -1e-9}},
    {"scheduler": {"max_prefill_tokens": 0}},
    {"scheduler": {"max_decode_batch": 0}},
    {"scheduler": {"max_decode_batch": -1}},
    {"slo": {"tpot_s": 0}},
    {"metrics": {"warmup_fraction": "0.1"}},
    {"mode": None, "colocated": {}},
    {"mode": "colocated", "handoff": {"compression": "mxfp4"}},
    {1: 2},
    {"workload": {"requests": {1, 2}}},
    {"workload": {"requests": object()}},
    [],
    42,
    "not-a-file.yaml",
]


def test_malformed_scenarios_never_panic() -> None:
    """Across a varied list of malformed scenarios, every failure is a kvwire ScenarioError (never a pyo3
    PanicException, TypeError or other foreign exception), and a valid run works after each one."""
    for i, sc in enumerate(MALFORMED):
        for call in (kvwire.validate, kvwire.simulate):
            try:
                call(copy.deepcopy(sc) if isinstance(sc, dict) else sc)
            except kvwire.ScenarioError as e:
                assert isinstance(e.path, str)
                assert str(e)
            except BaseException as e:  # pyo3's PanicException derives from BaseException
                pytest.fail(f"case {i} {sc!r}: {type(e).__module__}.{type(e).__name__}: {e}")
            else:
                pytest.fail(f"case {i} {sc!r}: accepted by {call.__name__}")
        still_works()


#: Leaf replacements tried on every field of the default scenario.
MUTATIONS: list[Any] = ["x", -1, 0, -0.5, 2**64, 1e308, None, True, [], {}, [1], {"bogus": 1}]


def _leaves(d: dict[str, Any], prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    out: list[tuple[str, ...]] = []
    for k, v in d.items():
        if isinstance(v, dict):
            out.append((*prefix, k))
            out.extend(_leaves(v, (*prefix, k)))
        else:
            out.append((*prefix, k))
    return out


def test_mutated_default_scenario_errors_are_clean() -> None:
    """Replacing any field of the default scenario (any depth) by a wrong-typed or out-of-range value either
    still validates or raises a ScenarioError whose path is on the mutated field's branch — never another
    exception."""
    base = kvwire.default_scenario()
    checked = 0
    for where in _leaves(base):
        for bad in MUTATIONS:
            sc = copy.deepcopy(base)
            node = sc
            for k in where[:-1]:
                node = node[k]
            node[where[-1]] = bad
            dotted = ".".join(where)
            try:
                kvwire.validate(sc)
            except kvwire.ScenarioError as e:
                # The error concerns the mutated branch: one path is a prefix of the other. A few fields
                # legitimately move the blame elsewhere (a mode change makes the pools wrong).
                related = e.path.startswith(dotted) or dotted.startswith(e.path.split("[")[0]) if e.path else False
                if where != ("mode",):
                    assert related, f"{dotted}={bad!r}: error names {e.path!r}: {e}"
                checked += 1
            except BaseException as e:
                pytest.fail(f"{dotted}={bad!r}: {type(e).__module__}.{type(e).__name__}: {e}")
    assert checked > 100
    still_works()


def test_request_tables_never_panic() -> None:
    """Malformed requests= tables of many shapes and dtypes raise TraceError, never a foreign exception."""
    tables: list[Any] = [
        {"arrival_s": np.zeros((2, 2)), "prompt_tokens": np.array([1, 2]), "output_tokens": np.array([1, 1])},
        {"arrival_s": np.array(["a"]), "prompt_tokens": np.array([1]), "output_tokens": np.array([1])},
        {"arrival_s": np.array([0.0]), "prompt_tokens": np.array([True]), "output_tokens": np.array([1])},
        {
            "arrival_s": np.array([0.0]),
            "prompt_tokens": np.array([2**63], dtype=np.uint64),
            "output_tokens": np.array([1]),
        },
        {"arrival_s": np.array([0.0]), "prompt_tokens": np.array([2**40]), "output_tokens": np.array([1])},
        {"arrival_s": np.array([0.0]), "prompt_tokens": np.array([1e300]), "output_tokens": np.array([1])},
        {"arrival_s": np.array([0.0]), "prompt_tokens": np.array([1]), "output_tokens": np.array([-(2**62)])},
        {"arrival_s": np.array([0.0])},
        {},
        5,
        pl.DataFrame({"x": [1]}),
        pl.DataFrame({"arrival_s": [0.0], "prompt_tokens": [[1]], "output_tokens": [1]}),
    ]
    for t in tables:
        try:
            kvwire.simulate({}, requests=t)
        except kvwire.TraceError as e:
            assert e.path.startswith("requests")
        except BaseException as e:
            pytest.fail(f"{t!r}: {type(e).__module__}.{type(e).__name__}: {e}")
        else:
            pytest.fail(f"{t!r} accepted")
    still_works()


# --------------------------------------------------------------------------------------------------
# Known crashes on inputs the validator accepts (documented; see the report)


def test_gamma_arrivals_with_tiny_cv() -> None:
    """A gamma cv the validator accepts either gives finite arrivals and a summary, or a ScenarioError —
    never NaN arrivals or a panic."""
    sc = {"workload": {"requests": 10, "arrivals": {"process": "gamma", "rate_per_s": 5.0, "cv": 1e-300}}}
    try:
        res = kvwire.simulate(sc)
    except kvwire.ScenarioError as e:
        assert e.path == "workload.arrivals.cv"
        return
    assert np.isfinite(res.requests["arrival_s"].to_numpy()).all()
    assert res.summary["requests"]["completed"] == 10


def test_huge_custom_device_values() -> None:
    """Finite device figures the validator accepts give a summary (or are refused with a ScenarioError)."""
    sc = {
        "prefill": {"device": {"preset": "h100", "peak_tflops": 1e300, "hbm_tb_per_s": 1e300}},
        "workload": {"requests": 3},
    }
    try:
        res = kvwire.simulate(sc)
    except kvwire.ScenarioError as e:
        assert e.path.startswith("prefill.device")
        return
    assert res.summary["requests"]["completed"] == 3


def test_huge_channel_count_does_not_abort_the_process() -> None:
    """A channel count the validator accepts must not abort the interpreter: it runs or raises an exception.

    Run in a child process with a 4 GiB address-space limit, so the huge allocation fails at once.
    """
    code = textwrap.dedent(
        """
        import resource
        resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))
        import kvwire
        sc = {"link": {"preset": "ib-ndr", "channels": 4294967295}, "workload": {"requests": 3}}
        try:
            kvwire.simulate(sc)
            print("RESULT ran")
        except (kvwire.KvwireError, MemoryError) as e:
            print("RESULT", type(e).__name__)
        """
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr[-500:]
    assert "RESULT" in proc.stdout
