"""The measured timing source (``cost.timing = {"source": "aiconfigurator", ...}``) against the provider itself:
the step times the core charges equal ``aiconfigurator-core``'s at every grid point (to the float) and stay
within the stated interpolation bound between points; the grid cache is hit on a second run and missed when
anything it depends on changes; runs are deterministic; and every field the provider cannot take is refused
naming it. These tests need the real package (``pip install 'kvwire[measured]'``; CI installs it) and skip
with that reason where it is absent.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kvwire
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kvwire.scenario.load import scenario_json
from kvwire.timing import aiconfigurator as aic
from kvwire.timing import grid
from kvwire.timing import resolve as res

sdk = pytest.importorskip("aiconfigurator_core.sdk", reason="needs aiconfigurator-core: pip install 'kvwire[measured]'")

MEASURED = {"cost": {"timing": {"source": "aiconfigurator", "system": "h100_sxm", "backend": "vllm"}}}


@pytest.fixture(scope="module", autouse=True)
def cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """One cache folder for the module (tables built once are reused by the later tests)."""
    d = tmp_path_factory.mktemp("kvwire-cache")
    mp = pytest.MonkeyPatch()
    mp.setenv("KVWIRE_CACHE_DIR", str(d))
    res._MEMORY.clear()
    yield d
    mp.undo()
    res._MEMORY.clear()


@pytest.fixture(scope="module")
def provider() -> Any:
    """The provider's own engine for the default pools (Llama 3.1 8B, H100 SXM, vLLM, TP 1)."""
    return sdk.EngineHandle.compile("meta-llama/Meta-Llama-3.1-8B", "h100_sxm", "vllm", tp_size=1)


def provider_s(h: Any, phase: str, batch: int, tokens: int, context: int) -> float:
    if phase == "prefill":
        return float(h.predict_prefill_latency(batch, tokens + context, context)) / 1e3
    return float(h.decode_step_latency(batch, max(context - 1, 0), 0)) / 1e3


def core_s(rows: list[tuple[str, int, int, int]], scenario: dict[str, Any] = MEASURED) -> list[float]:
    df = pl.DataFrame(rows, schema=["phase", "batch", "prompt_tokens", "context_tokens"], orient="row")
    return kvwire.step_times(scenario, df)["time_s"].to_list()


def test_grid_points_are_the_providers_values_to_the_float(provider: Any) -> None:
    """At grid points (every corner, every point of each axis, and a spread of interior ones) the core's step
    time is the provider's value exactly: the table stores it and the interpolation returns it untouched."""
    pa, da = grid.prefill_axes(), grid.decode_axes()
    rows: list[tuple[str, int, int, int]] = []
    for i, q in enumerate(pa[1]):
        rows.append(("prefill", pa[0][i % len(pa[0])], q, pa[2][i % len(pa[2])]))
    for b in pa[0]:
        rows.append(("prefill", b, pa[1][-1], pa[2][-1]))
    for i, c in enumerate(da[1]):
        rows.append(("decode", da[0][(7 * i) % len(da[0])], 0, c))
    for b in da[0]:
        rows.append(("decode", b, 0, da[1][-1]))
    got = core_s(rows)
    want = [provider_s(provider, *r) for r in rows]
    assert got == want


@settings(max_examples=300)
@given(
    st.lists(
        st.one_of(
            st.tuples(
                st.just("prefill"),
                st.integers(1, 64),
                st.integers(1, 32_768),
                st.one_of(st.just(0), st.integers(1, 32_768)),
            ),
            st.tuples(st.just("decode"), st.integers(1, 512), st.just(0), st.integers(1, 65_536)),
        ),
        min_size=1,
        max_size=40,
    )
)
def test_off_the_grid_within_the_stated_bound(provider: Any, rows: list[tuple[str, int, int, int]]) -> None:
    """Between grid points the core stays within the bound the table states (twice the largest error measured
    at the cell centres when it was built, written to ``cost.timing.provenance``) of the provider, for random
    step shapes across the sizes steps take."""
    bound = json.loads(scenario_json(MEASURED))["cost"]["timing"]["provenance"]["pools"]["prefill"]["bound"]
    for r, got in zip(rows, core_s(rows), strict=True):
        want = provider_s(provider, *r)
        assert abs(got - want) / want <= bound[r[0]], (r, got, want, bound)


def test_the_cache_is_hit_and_missed_when_a_key_changes(cache_dir: Path) -> None:
    """A second resolution reads the table (from memory in the process, from disk in a new one) instead of
    asking the provider; changing the engine, the data version, the layout or the formats builds anew; a file
    cut short is a miss, rebuilt."""
    scenario_json(MEASURED)
    assert {v["cache"] for v in res.LAST_BUILD.values()} <= {"memory", "disk", "built", "shared"}
    scenario_json(MEASURED)
    assert {v["cache"] for v in res.LAST_BUILD.values()} == {"memory"}
    res._MEMORY.clear()
    scenario_json(MEASURED)
    assert {v["cache"] for v in res.LAST_BUILD.values()} == {"disk"}
    timing = MEASURED["cost"]["timing"]
    for change in (
        {"cost": {"timing": {**timing, "backend": "sglang"}}},
        {"cost": {"timing": {**timing, "version": "0.24.0"}}},
        {**MEASURED, "decode": {"devices_per_instance": 2}},
        {**MEASURED, "decode": {"kv_format": "fp8"}},
    ):
        scenario_json(change)
        assert "built" in {v["cache"] for v in res.LAST_BUILD.values()}, change
    # A file cut short: rebuilt, and the run still right.
    key = res.LAST_BUILD["decode"]["key"]
    path = cache_dir / "timing" / f"{key}.json"
    path.write_text(path.read_text()[:1000])
    res._MEMORY.clear()
    scenario_json({**MEASURED, "decode": {"kv_format": "fp8"}})
    assert res.LAST_BUILD["decode"]["cache"] == "built"


def test_measured_runs_are_deterministic_and_differ_from_the_roofline() -> None:
    """The same scenario and seed on the measured source gives the same per-request table every time; the
    roofline named explicitly gives exactly the default run; the measured run is not the roofline's."""
    sc = {**MEASURED, "workload": {"requests": 300}}
    a, b = kvwire.simulate(sc).requests, kvwire.simulate(sc).requests
    assert a.equals(b)
    plain = kvwire.simulate({"workload": {"requests": 300}}).requests
    named = kvwire.simulate({"workload": {"requests": 300}, "cost": {"timing": {"source": "roofline"}}}).requests
    assert named.equals(plain)
    assert not a["finish_s"].equals(plain["finish_s"])


def test_the_echo_names_the_source_and_its_data() -> None:
    """A run's scenario names the provider and its version, the data version per pool and the layout it was
    measured in, without the tables."""
    r = kvwire.simulate({**MEASURED, "workload": {"requests": 20}})
    t = r.scenario["cost"]["timing"]
    assert "tables" not in t
    assert t["provenance"]["provider"] == f"aiconfigurator-core {aic.version()}"
    p = t["provenance"]["pools"]["decode"]
    assert (p["system"], p["backend"], p["model"], p["tp_size"]) == (
        "h100_sxm",
        "vllm",
        "meta-llama/Meta-Llama-3.1-8B",
        1,
    )
    assert p["version"] == "0.24.0" or p["version"]


@pytest.mark.parametrize(
    ("scenario", "path"),
    [
        ({"cost": {"timing": {"source": "aiconfigurator", "system": "tpu_v9"}}}, "cost.timing.system"),
        ({"cost": {"timing": {"source": "aiconfigurator"}}, "prefill": {"device": "mi300x"}}, "prefill.device"),
        ({"cost": {"timing": {"source": "aiconfigurator", "backend": "tgi"}}}, "cost.timing.backend"),
        ({"cost": {"timing": {"source": "aiconfigurator", "version": "0.0.1"}}}, "cost.timing.version"),
        ({"cost": {"timing": {"source": "aiconfigurator", "model": "acme/none"}}}, "cost.timing.model"),
        ({"cost": {"timing": {"source": "aiconfigurator"}}, "model": "opt-13b"}, "cost.timing.model"),
        (
            {"cost": {"timing": {"source": "aiconfigurator"}}, "model": {"preset": "llama3-8b", "layers": 8}},
            "model.layers",
        ),
        ({"cost": {"timing": {"source": "aiconfigurator"}}, "decode": {"kv_format": "mxfp4"}}, "decode.kv_format"),
        (
            {"cost": {"timing": {"source": "aiconfigurator"}}, "model": {"preset": "llama3-8b", "weights": "int4"}},
            "model.weights",
        ),
        ({"cost": {"timing": {"source": "aiconfigurator", "file": "x.json"}}}, "cost.timing.file"),
        (
            {
                "cost": {"timing": {"source": "aiconfigurator"}},
                "speculative": {"method": "mtp", "tokens": 2, "acceptance": 0.7},
            },
            "speculative",
        ),
    ],
)
def test_what_the_provider_cannot_take_is_refused_naming_the_field(scenario: dict[str, Any], path: str) -> None:
    """Each field the measured source cannot map is refused with a ScenarioError naming it, before any grid
    is built."""
    with pytest.raises(kvwire.ScenarioError) as e:
        kvwire.validate(scenario)
    assert e.value.path == path, str(e.value)


def test_without_the_package_the_scenario_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    """Where aiconfigurator-core is not installed, a measured scenario is refused naming cost.timing.source
    and the extra to install."""
    import importlib.metadata

    def absent(name: str) -> str:
        raise importlib.metadata.PackageNotFoundError(name)

    real = aic.importlib.import_module

    def no_import(name: str, *a: Any) -> Any:
        if name.startswith("aiconfigurator_core"):
            raise ImportError(name)
        return real(name, *a)

    monkeypatch.setattr(aic.importlib.metadata, "version", absent)
    monkeypatch.setattr(aic.importlib, "import_module", no_import)
    with pytest.raises(kvwire.ScenarioError) as e:
        kvwire.validate(MEASURED)
    assert e.value.path == "cost.timing.source"
    assert "pip install 'kvwire[measured]'" in str(e.value)


def test_moe_and_tensor_parallel_pools_map_to_the_providers_layout(provider: Any) -> None:
    """A TP 8 x EP 8 pool of Qwen3-235B is measured with tp_size 8, moe_ep_size 8, moe_tp_size 1, and a TP 4
    Llama 3.1 70B pool with tp_size 4: the grid's first decode point is the provider's for that layout."""
    cases = [
        ("qwen3-235b-a22b", {"tp": 8, "ep": 8}, dict(tp_size=8, moe_tp_size=1, moe_ep_size=8), "Qwen/Qwen3-235B-A22B"),
        ("llama3.1-70b", {"tp": 4}, dict(tp_size=4), "meta-llama/Meta-Llama-3.1-70B"),
    ]
    for model, par, kw, hf in cases:
        pool = {"device": "h200", "devices_per_instance": par["tp"], "parallel": par}
        sc = {"model": model, "prefill": pool, "decode": pool, "cost": {"timing": {"source": "aiconfigurator"}}}
        h = sdk.EngineHandle.compile(hf, "h200_sxm", "vllm", **kw)
        got = core_s([("decode", 16, 0, 2048), ("prefill", 2, 1024, 0)], sc)
        assert got == [provider_s(h, "decode", 16, 0, 2048), provider_s(h, "prefill", 2, 1024, 0)]


def test_sweeps_ceilings_and_capacity_use_the_measured_source() -> None:
    """Everything downstream takes the scenario's timing source: a sweep's points equal single runs on the
    measured source (and differ from the roofline's), the ceilings come from the measured step times, and the
    capacity search runs on them."""
    base = {**MEASURED, "workload": {"requests": 200}}
    df = kvwire.sweep(base, {"workload.arrivals.rate_per_s": [4.0, 8.0]}, workers=1)
    single = kvwire.simulate({**base, "workload": {"requests": 200, "arrivals": {"rate_per_s": 8.0}}}).summary
    row = df.filter(pl.col("workload.arrivals.rate_per_s") == 8.0)
    assert row["latency.ttft_s.p99"].item() == single["latency"]["ttft_s"]["p99"]
    roof = kvwire.sweep({"workload": {"requests": 200}}, {"workload.arrivals.rate_per_s": [8.0]}, workers=1)
    assert roof["latency.ttft_s.p99"].item() != row["latency.ttft_s.p99"].item()
    measured_c, roof_c = kvwire.ceilings(base), kvwire.ceilings({"workload": {"requests": 200}})
    assert measured_c["prefill_req_per_s"] != roof_c["prefill_req_per_s"]
    cap = kvwire.capacity(base, rel_tol=0.1)
    assert cap.capacity > 0
