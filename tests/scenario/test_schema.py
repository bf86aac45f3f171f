"""The TypedDicts of ``kvwire.scenario`` (ScenarioDict and the nested ones) against the Rust core.

The TypedDicts document the scenario for type checkers; the core (serde with ``deny_unknown_fields``) is the
validator. These tests check that the two describe the same keys and values: every key of the full default
scenario is annotated (and its value fits the annotation), every annotated key is accepted by the core, the
set of keys the core accepts at each level equals the TypedDict's, every ``Literal`` lists exactly the core's
variants, and interface.md's example scenario is both valid and typed.
"""

from __future__ import annotations

import json
import re
import types
import typing
from typing import Any, Literal, Union, get_args, get_origin, get_type_hints, is_typeddict

import kvwire
import kvwire.scenario as ks
import pytest
from shared_paths import SPEC

INTERFACE_MD = SPEC / "interface.md"

# --------------------------------------------------------------------------------------------------
# Introspection helpers


def hints(td: Any) -> dict[str, Any]:
    """Resolved annotations of a TypedDict."""
    return get_type_hints(td)


def members(ann: Any) -> tuple[Any, ...]:
    """The alternatives of a union annotation (or the annotation itself)."""
    if get_origin(ann) in (Union, types.UnionType):
        return get_args(ann)
    return (ann,)


#: TypedDicts of forms the Python layer handles before the core sees the scenario (``workload.trace.file``,
#: tests/test_trace_spec.py checks it against its parser); the core-facing checks here skip them.
PYTHON_ONLY = (ks.TraceFileDict,)


def typed_dict_of(ann: Any) -> Any | None:
    """The TypedDict inside an annotation (``X``, ``str | X``), if any (the core's, not a Python-only one)."""
    found = [a for a in members(ann) if is_typeddict(a) and a not in PYTHON_ONLY]
    assert len(found) <= 1, ann
    return found[0] if found else None


def literal_of(ann: Any) -> tuple[Any, ...] | None:
    """The values of the Literal inside an annotation, if any."""
    for a in members(ann):
        if get_origin(a) is Literal:
            return get_args(a)
    return None


def conforms(value: Any, ann: Any) -> bool:
    """Whether a JSON-like value fits an annotation (TypedDict, union, Literal, list, dict, scalars)."""
    if ann is Any:
        return True
    if is_typeddict(ann):
        h = hints(ann)
        return (
            isinstance(value, dict)
            and set(value) <= set(h)
            and set(ann.__required_keys__) <= set(value)
            and all(conforms(v, h[k]) for k, v in value.items())
        )
    origin = get_origin(ann)
    if origin in (Union, types.UnionType):
        return any(conforms(value, a) for a in get_args(ann))
    if origin is Literal:
        return value in get_args(ann)
    if origin is list:
        return isinstance(value, list) and all(conforms(v, get_args(ann)[0]) for v in value)
    if origin is dict:
        return isinstance(value, dict)
    if ann is bool:
        return isinstance(value, bool)
    if ann is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if ann is float:
        return isinstance(value, int | float) and not isinstance(value, bool)
    if ann is str:
        return isinstance(value, str)
    raise AssertionError(f"unhandled annotation {ann!r}")


def annotated_paths(td: Any = ks.ScenarioDict, prefix: str = "") -> dict[str, Any]:
    """Every dotted key path the TypedDicts describe, with its annotation (recursing into nested ones)."""
    out: dict[str, Any] = {}
    for key, ann in hints(td).items():
        path = f"{prefix}{key}"
        out[path] = ann
        sub = typed_dict_of(ann)
        if sub is not None:
            out.update(annotated_paths(sub, path + "."))
    return out


def nest(path: str, value: Any) -> dict[str, Any]:
    """``"a.b.c", v`` -> ``{"a": {"b": {"c": v}}}``."""
    out: Any = value
    for part in reversed(path.split(".")):
        out = {part: out}
    result: dict[str, Any] = out
    return result


def merge(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """Deep merge of two nested dicts (b wins)."""
    out = dict(a)
    for k, v in b.items():
        out[k] = merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def expected_list(message: str) -> set[str]:
    """The names serde lists in ``expected one of `a`, `b``` / ``expected `a` or `b``` / ``expected `a```."""
    tail = message.split("expected", 1)[1]
    return set(re.findall(r"`([^`]+)`", tail))


# --------------------------------------------------------------------------------------------------
# Example scenarios

TRACE = {"arrival_s": [0.0, 1.0], "prompt_tokens": [10, 20], "output_tokens": [0, 3]}
POOL = {"device": "a100", "instances": 2, "devices_per_instance": 2, "power_cap_w": 350.0}
LINK = {"preset": "ib-ndr", "channels": 2, "name": "fat link", "bandwidth_gb_per_s": 80.0, "latency_us": 3.0,
        "pj_per_bit": 9.0, "source": "a test", "nics": 2, "gpus_per_nic": 1, "nic_efficiency": 0.9,
        "launch_overhead_us": 5.0, "registration": "per_transfer", "registration_ms_per_gb": 50.0,
        "descriptor_us": 1.5}  # fmt: skip
LENGTHS: dict[str, dict[str, Any]] = {
    "fixed": {"dist": "fixed", "value": 12},
    "uniform": {"dist": "uniform", "min": 3, "max": 9},
    "lognormal": {"dist": "lognormal", "mean": 100.0, "cv": 0.4, "min": 2, "max": 500},
}
ARRIVALS: dict[str, dict[str, Any]] = {
    "poisson": {"process": "poisson", "rate_per_s": 3.0},
    "gamma": {"process": "gamma", "rate_per_s": 3.0, "cv": 2.0},
}


CONDITIONAL = {"disaggregate": {"policy": "conditional", "min_prompt_tokens": 256, "min_output_tokens": 4,
                                 "max_link_wait_s": 0.5}}  # fmt: skip


#: A layout conversion on the sender's host, with every option set (needs a host-staged link).
HOST_CONVERT = {"from": "vllm_hnd", "to": "sglang", "at": "host", "from_block_size": 16, "to_block_size": 1,
                "host_gb_per_s": 8.0, "host_threads": 2, "host_w_per_thread": 3.75, "from_dtype": "bfloat16",
                "to_dtype": "bfloat16"}  # fmt: skip


#: Speculative decoding with every field set (rust/kvwire-core/tests/speculative.rs).
SPECULATIVE = {"method": "draft", "tokens": 2, "acceptance": [0.8, 0.6], "draft_model": "llama3.2-1b"}

#: Faults with every field set (rust/kvwire-core/tests/faults.rs).
FAULTS = {"instance": {"mtbf_s": 50.0, "mttr_s": 5.0, "dist": "fixed", "pools": ["decode"]},
          "events": [{"instance": "decode-0", "at_s": 1.0, "for_s": 2.0}], "max_retries": 2, "seed": 4,
          "transfer_failure_p": 0.1, "retry_s": 0.5,
          "link": {"mtbf_s": 60.0, "mttr_s": 2.0, "dist": "fixed", "scope": "channel"}}  # fmt: skip
FAULTS["events"].append({"link": "kv-link", "channel": 0, "at_s": 3.0, "for_s": 1.0})

#: KV tiers with every field set (tests/simulator/test_prefix_cache.py): a host tier with its link, an SSD.
KV_TIERS = [{"kind": "host", "capacity_gb": 4.0, "link": "pcie4"},
            {"kind": "ssd", "capacity_gb": 40.0, "gb_per_s": 7.0, "latency_us": 80.0}]  # fmt: skip

#: A parallel layout with every field set (tests/simulator/test_parallel.py, rust/kvwire-core/tests/parallel.rs).
PARALLEL = {"tp": 2, "pp": 1, "micro_batches": 1, "ep": 2, "dp": 1, "expert_imbalance": 1.2, "scale_out": "ib-ndr"}


def example_for(path: str) -> dict[str, Any]:
    """A valid scenario that sets the field at ``path`` (with whatever companions it needs)."""
    top = path.split(".")[0]
    if ".parallel" in path:  # every field of a layout; expert parallelism needs an MoE model
        layout = {"parallel": PARALLEL}
        if top == "colocated":
            return {"mode": "colocated", "model": "mixtral-8x7b", "colocated": layout}
        other = "decode" if top == "prefill" else "prefill"
        return {"model": "mixtral-8x7b", top: layout, other: {"devices_per_instance": 2}}
    if path.startswith("speculative"):
        return {"speculative": SPECULATIVE}
    if path.startswith("faults"):
        return {"faults": FAULTS}
    if path.startswith("kv_tiers"):
        return {"prefix_cache": {"enabled": True}, "kv_tiers": KV_TIERS}
    if path == "prefill.kv_format":  # a prefill pool keeps KV only for requests it decodes itself
        return {"prefill": {**POOL, "kv_format": "fp8_e4m3"}, "router": CONDITIONAL}
    if path.endswith(".kv_format"):
        pool = {**POOL, "kv_format": "fp8_e4m3"}
        return {"mode": "colocated", "colocated": pool} if top == "colocated" else {top: pool}
    if path.startswith("router.disaggregate"):
        return {"router": CONDITIONAL}
    if path in ("link.model", "link.host_link"):
        return {"link": {"preset": "eth-100g", "model": "host_staged", "host_link": "pcie4"}}
    if path == "handoff.decompress_at":
        return {"handoff": {"compression": "fp8", "decompress_at": "receiver"}}
    if path.startswith("handoff.convert"):
        return {"handoff": {"convert": HOST_CONVERT}, "link": {"preset": "eth-100g", "model": "host_staged"}}
    if top == "colocated":
        return {"mode": "colocated", "colocated": POOL}
    if path.startswith(("prefill", "decode")):
        return {top: POOL}
    if top == "link":
        return {"link": LINK}
    if path.startswith("workload.trace"):
        return {"workload": {"trace": TRACE}}
    if path == "workload.external":  # true needs a table passed beside the scenario (tests/test_echo.py)
        return {"workload": {"external": False}}
    if path.startswith(("workload.prompt_tokens", "workload.output_tokens")):
        field = path.split(".")[2] if path.count(".") >= 2 else "dist"
        dist = next(d for d, spec in LENGTHS.items() if field in spec)
        return nest(".".join(path.split(".")[:2]), LENGTHS[dist])
    if path.startswith("workload.sessions"):  # every field of a sessions workload (tests/test_sessions.py)
        return {
            "workload": {"sessions": {"count": 2, "turns": 2, "think_s": 1.0, "system_prompts": 2, "system_tokens": 9}}
        }
    if path.startswith("workload.arrivals"):
        return {"workload": {"arrivals": ARRIVALS["gamma" if path.endswith(".cv") else "poisson"]}}
    if path.startswith("prefix_cache"):
        return {"prefix_cache": {"enabled": True, "capacity_tokens": 100_000}}
    if path in ("cost.timing", "cost.timing.source"):
        return {"cost": {"timing": {"source": "roofline"}}}
    if path == "cost.timing.file":  # a calibration file as kvwire calibrate -o writes one (its used fields)
        return {"cost": {"timing": {"source": "calibrated", "file": calibration_file()}}}
    if path in ("cost.timing.tables", "cost.timing.provenance"):  # as kvwire writes them: any tables, given
        return {"cost": {"timing": {"source": "aiconfigurator", "provenance": {"by": "hand"}, "tables": TABLES}}}
    if path.startswith("cost.timing."):  # the measured source's fields (aiconfigurator-core, a test extra)
        return {"cost": {"timing": MEASURED}}
    value: Any = kvwire.default_scenario()
    for part in path.split("."):
        value = value[part]
    return nest(path, value)


def literal_example(path: str, value: Any) -> dict[str, Any]:
    """A valid scenario with the Literal-typed field at ``path`` set to ``value``."""
    if path == "mode":
        return {"mode": value}
    if path == "faults.instance.dist":
        return {"faults": {"instance": {"mtbf_s": 10.0, "mttr_s": 1.0, "dist": value}}}
    if path in ("faults.link.dist", "faults.link.scope"):
        return {"faults": {"link": {"mtbf_s": 10.0, "mttr_s": 1.0, path.rsplit(".", 1)[1]: value}}}
    if path.endswith(".dist"):
        return nest(path.rsplit(".", 1)[0], LENGTHS.get(value, {"dist": value}))
    if path == "workload.arrivals.process":
        return {"workload": {"arrivals": ARRIVALS.get(value, {"process": value, "rate_per_s": 1.0})}}
    if path.startswith("router.colocated"):
        return {"mode": "colocated", "router": {"colocated": value}}
    if path == "handoff.compress_at" and value == "sender":
        return {"handoff": {"compression": "fp8", "compress_at": "sender"}}
    if path == "handoff.decompress_at" and value == "receiver":
        return {"handoff": {"compression": "fp8", "decompress_at": "receiver"}}
    if path == "router.disaggregate.policy" and value == "conditional":
        return {"router": CONDITIONAL}
    if path == "router.prefill" and value == "prefix_affinity":
        return {"router": {"prefill": value}, "prefix_cache": {"enabled": True}}
    if path == "link.registration":
        return {"link": {"preset": "ib-ndr", "registration": value}}
    if path == "cost.timing.source":
        timing = {
            "roofline": {"source": "roofline"},
            "aiconfigurator": MEASURED,
            "calibrated": {"source": "calibrated", "file": calibration_file()},
        }.get(value, {"source": value})
        return {"cost": {"timing": timing}}
    if path == "cost.timing.backend":
        return {"cost": {"timing": {**MEASURED, "backend": value, "version": None}}}
    if path == "speculative.method":
        spec = {"method": value, "tokens": 2, "acceptance": 0.5}
        return {"speculative": {**spec, "draft_model": "llama3.2-1b"} if value == "draft" else spec}
    if path == "handoff.convert.at":
        if value == "host":
            return example_for(path)
        return {"handoff": {"convert": {"from": "vllm_hnd", "to": "sglang", "at": value}}}
    return nest(path, value)


def literal_paths() -> dict[str, tuple[Any, ...]]:
    """Every annotated path whose annotation holds a Literal, with its values."""
    out = {}
    for path, ann in annotated_paths().items():
        lit = literal_of(ann)
        if lit is not None:
            out[path] = lit
    return out


# --------------------------------------------------------------------------------------------------
# Default scenario <-> TypedDicts


def test_every_default_key_is_annotated() -> None:
    """Every key of kvwire.default_scenario(), at every depth, is a key of the matching TypedDict."""
    paths = annotated_paths()

    def walk(d: dict[str, Any], prefix: str) -> None:
        for k, v in d.items():
            path = f"{prefix}{k}"
            assert path in paths, f"default scenario key {path!r} is not in the TypedDicts"
            if isinstance(v, dict) and typed_dict_of(paths[path]) is not None:
                walk(v, path + ".")

    walk(kvwire.default_scenario(), "")


def test_default_scenario_conforms_to_scenario_dict() -> None:
    """The full default scenario is a well-typed ScenarioDict (values fit their annotations)."""
    assert conforms(kvwire.default_scenario(), ks.ScenarioDict)


def test_every_top_level_section_is_in_the_default() -> None:
    """Every ScenarioDict section except the mode-specific ``colocated``, ``speculative`` (off by default, and
    its method, tokens and acceptance have no defaults), ``faults`` (off by default: nothing fails) and ``kv_tiers``
    (off by default: the GPU cache only; a tier's kind and capacity have no defaults) is written out by
    default_scenario() (so ``kvwire scenario`` shows every section a user can edit)."""
    optional = {"colocated", "speculative", "faults", "kv_tiers"}
    missing = set(hints(ks.ScenarioDict)) - set(kvwire.default_scenario()) - optional
    assert not missing


# --------------------------------------------------------------------------------------------------
# TypedDicts -> core


def test_example_table_covers_every_annotated_key() -> None:
    """The example builder knows every annotated path (so the next test checks all of them)."""
    for path in annotated_paths():
        example_for(path)


@pytest.mark.parametrize("path", sorted(annotated_paths()))
def test_every_annotated_key_is_accepted_by_the_core(path: str) -> None:
    """A scenario that sets this TypedDict key validates in the core, and is itself a well-typed dict."""
    sc = example_for(path)
    node: Any = sc
    for part in path.split("."):
        assert isinstance(node, dict) and part in node, f"example for {path} does not set it: {sc}"
        node = node[part]
    assert conforms(sc, ks.ScenarioDict), sc
    kvwire.validate(sc)


#: Keys whose examples the core refuses in combination (by design: a decode pool that keeps the compressed
#: cache decompresses nothing; a host-staged link carries whole transfers only); each is covered alone.
ALONE = {"decode.kv_format", "prefill.kv_format", "handoff.decompress_at", "link.model", "link.host_link"}
#: The measured source's fields, alone too: it refuses speculative decoding, which the other keys set.
ALONE |= {f"cost.timing.{k}" for k in ("system", "backend", "version", "model", "file", "provenance", "tables")}
#: The calibration file of the module (written by the ``calibration`` fixture).
CALIBRATION: list[str] = []


@pytest.fixture(scope="module", autouse=True)
def calibration(tmp_path_factory: pytest.TempPathFactory) -> None:
    """A calibration file with the fields the calibrated source reads, for the examples of ``cost.timing``."""
    from kvwire.timing.calibration import KIND, VERSION

    doc = {"kind": KIND, "version": VERSION, "base_device": "h100", "step_overhead_s": 0.002,
           "device": {"preset": "h100", "flops_eff": 0.5, "bw_eff": 0.7}, "scale_up_by_tp": {}}  # fmt: skip
    path = tmp_path_factory.mktemp("calibration") / "h100.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    CALIBRATION[:] = [str(path)]


def calibration_file() -> str:
    return CALIBRATION[0]


_GRIDS = {
    "prefill": {"axes": [[1, 2], [1, 2], [0, 1]], "values_s": [0.01] * 8},
    "decode": {"axes": [[1, 2], [1, 2]], "values_s": [0.001] * 4},
}
TABLES = {"prefill": _GRIDS, "decode": _GRIDS}
MEASURED = {"source": "aiconfigurator", "system": "h100_sxm", "backend": "vllm", "version": "0.24.0",
            "model": "meta-llama/Meta-Llama-3.1-8B"}  # fmt: skip


def test_all_annotated_keys_together_run() -> None:
    """One disaggregated scenario using every non-colocated, non-trace key at once validates and runs."""
    sc: dict[str, Any] = {}
    for path in annotated_paths():
        if path.split(".")[0] == "colocated" or path.startswith("workload.trace") or path == "mode":
            continue
        if path.startswith("workload.output_tokens") or path.startswith("workload.prompt_tokens"):
            continue  # one dist at a time; covered above
        if path.startswith("workload.sessions"):
            continue  # sessions replace workload.requests; covered above and in tests/test_sessions.py
        if path in ALONE or path.startswith("faults"):
            continue  # faults refuse speculative decoding, paged KV and prefix caching, which the others set
        sc = merge(sc, example_for(path))
    sc["workload"]["requests"] = 30
    assert conforms(sc, ks.ScenarioDict)
    assert kvwire.simulate(sc).summary["requests"]["total"] == 30


#: TypedDict -> (where to put an unknown key, a valid base scenario). The core's error lists what it accepts.
LOCATIONS: dict[str, tuple[str, dict[str, Any]]] = {
    "ScenarioDict": ("", {}),
    "PoolDict": ("prefill", {}),
    "ParallelDict": ("prefill.parallel", {"prefill": {"parallel": {"tp": 1}}}),
    "TimingDict": ("cost.timing", {"cost": {"timing": {"source": "roofline"}}}),
    "LinkDict": ("link", {"link": {"preset": "ib-ndr"}}),
    "HandoffDict": ("handoff", {}),
    "ConvertDict": ("handoff.convert", {"handoff": {"convert": {"from": "vllm_hnd", "to": "sglang", "at": "sender"}}}),
    "ArrivalsDict": ("workload.arrivals", {"workload": {"arrivals": {"rate_per_s": 1.0}}}),
    "LengthDict": ("workload.prompt_tokens", {"workload": {"prompt_tokens": {"dist": "fixed", "value": 3}}}),
    "TraceDict": ("workload.trace", {"workload": {"trace": TRACE}}),
    "SessionsDict": ("workload.sessions", {"workload": {"sessions": {"count": 1, "turns": 1}}}),
    "WorkloadDict": ("workload", {}),
    "SloDict": ("slo", {}),
    "MetricsDict": ("metrics", {}),
    "CostDict": ("cost", {}),
    "SchedulerDict": ("scheduler", {}),
    "KvDict": ("kv", {}),
    "RouterDict": ("router", {}),
    "EngineDict": ("engine", {}),
    "DisaggregateDict": ("router.disaggregate", {}),
    "PrefixCacheDict": ("prefix_cache", {}),
    "SpeculativeDict": ("speculative", {"speculative": SPECULATIVE}),
    "FaultsDict": ("faults", {"faults": {}}),
    "InstanceFaultsDict": ("faults.instance", {"faults": {"instance": {"mtbf_s": 1.0, "mttr_s": 1.0}}}),
    "LinkFaultsDict": ("faults.link", {"faults": {"link": {"mtbf_s": 1.0, "mttr_s": 1.0}}}),
    "FaultEventDict": ("faults.events[0]", {"faults": {"events": [{"instance": "decode-0", "at_s": 1, "for_s": 1}]}}),
    "KvTierDict": ("kv_tiers[0]", {"prefix_cache": {"enabled": True}, "kv_tiers": KV_TIERS[:1]}),
}
#: Keys the core takes outside serde's field list (the link object's preset and channels are read first).
EXTRA_CORE_KEYS = {"LinkDict": {"preset", "channels", "model", "host_link"}}
#: Keys the core knows only to refuse them by name (none at present).
REFUSED_CORE_KEYS: dict[str, set[str]] = {}


def all_typed_dicts() -> dict[str, Any]:
    """Every TypedDict reachable from ScenarioDict, by class name."""
    found = {"ScenarioDict": ks.ScenarioDict}
    for ann in annotated_paths().values():
        # A list of objects (faults.events) is its element's TypedDict.
        inner = [get_args(a)[0] for a in members(ann) if get_origin(a) is list and is_typeddict(get_args(a)[0])]
        for td in [typed_dict_of(ann), *inner]:
            if td is not None:
                found[td.__name__] = td
    return found


def test_every_typed_dict_has_a_location() -> None:
    """Each TypedDict reachable from ScenarioDict is checked below against the core."""
    assert set(all_typed_dicts()) == set(LOCATIONS)


@pytest.mark.parametrize("name", list(LOCATIONS))
def test_typed_dict_keys_equal_core_keys(name: str) -> None:
    """The keys a TypedDict declares are exactly the keys the core accepts at that level (the core's
    unknown-field error lists them)."""
    where, base = LOCATIONS[name]
    bogus = "zz_not_a_field"
    if where == "faults.events[0]":  # inside a list: the bogus key goes in its one element
        sc = {"faults": {"events": [{**base["faults"]["events"][0], bogus: 1}]}}
    elif where == "kv_tiers[0]":
        sc = {**base, "kv_tiers": [{**base["kv_tiers"][0], bogus: 1}]}
    else:
        sc = merge(base, nest(f"{where}.{bogus}" if where else bogus, 1))
    with pytest.raises(kvwire.ScenarioError) as info:
        kvwire.validate(sc)
    assert "unknown field" in str(info.value)
    accepted = (expected_list(str(info.value)) | EXTRA_CORE_KEYS.get(name, set())) - REFUSED_CORE_KEYS.get(name, set())
    assert set(hints(all_typed_dicts()[name])) == accepted


@pytest.mark.parametrize(("path", "values"), sorted(literal_paths().items()))
def test_literal_values_equal_core_variants(path: str, values: tuple[Any, ...]) -> None:
    """A Literal annotation lists exactly the core's variants: each value validates, and the core's
    unknown-variant error names the same set."""
    for v in values:
        kvwire.validate(literal_example(path, v))
    with pytest.raises(kvwire.ScenarioError) as info:
        kvwire.validate(literal_example(path, "zz_bogus"))
    assert info.value.path == path
    assert expected_list(str(info.value)) == set(values)


def test_literal_paths_found() -> None:
    """The Literal-typed fields the interface describes are all typed as Literals."""
    assert set(literal_paths()) >= {
        "mode",
        "workload.arrivals.process",
        "workload.prompt_tokens.dist",
        "cost.prefill_lm_head",
        "router.prefill",
        "router.decode",
        "router.colocated",
    }


def test_compression_accepts_every_catalog_format() -> None:
    """handoff.compression (typed str) accepts every catalog format name and nothing else."""
    formats = set(kvwire.catalog()["formats"])
    mla = {"model": "deepseek-v3", "prefill": {"device": "h200", "devices_per_instance": 8},
           "decode": {"device": "h200", "devices_per_instance": 8}}  # fmt: skip
    for f in formats:
        kvwire.validate({**(mla if f == "fp8_ds_mla" else {}), "handoff": {"compression": f}})
    with pytest.raises(kvwire.ScenarioError) as info:
        kvwire.validate({"handoff": {"compression": "zz_bogus"}})
    listed = set(re.findall(r"[\w.-]+", str(info.value).split("known:", 1)[1]))
    assert listed == formats | set(kvwire.catalog()["format_aliases"])


# --------------------------------------------------------------------------------------------------
# The interface.md example


def interface_example() -> dict[str, Any]:
    """The JSON scenario shown in spec/interface.md."""
    text = INTERFACE_MD.read_text()
    block = text.split("```json", 1)[1].split("```", 1)[0]
    example: dict[str, Any] = json.loads(block)
    return example


def test_interface_example_is_the_default_and_typed() -> None:
    """interface.md's example scenario validates, is a well-typed ScenarioDict, agrees with every value of
    default_scenario() it mentions, and runs to the same result as ``{}``."""
    ex = interface_example()
    assert conforms(ex, ks.ScenarioDict)
    kvwire.validate(ex)
    default = kvwire.default_scenario()

    def check(e: dict[str, Any], d: dict[str, Any], prefix: str) -> None:
        for k, v in e.items():
            assert k in d, prefix + k
            if isinstance(v, dict):
                check(v, d[k], f"{prefix}{k}.")
            else:
                assert v == d[k], (prefix + k, v, d[k])

    check(ex, default, "")
    a = kvwire.simulate(ex).requests
    b = kvwire.simulate({}).requests
    assert a.equals(b)


def test_typeddicts_are_total_false_except_trace() -> None:
    """Every field is optional (interface.md: every omitted field has a default) except the three trace
    columns, which must come together, a sessions workload's count and turns (no sessions by default), and
    speculative decoding's method, tokens and acceptance (none by default), and random faults' mtbf_s and mttr_s
    and a scheduled outage's at_s and for_s (no faults by default), and a KV tier's kind and capacity_gb (no
    tiers by default)."""
    for name, td in all_typed_dicts().items():
        if name == "TraceDict":
            assert set(td.__required_keys__) == {"arrival_s", "prompt_tokens", "output_tokens"}
        elif name == "SessionsDict":
            assert set(td.__required_keys__) == {"count", "turns"}
        elif name == "SpeculativeDict":
            assert set(td.__required_keys__) == {"method", "tokens", "acceptance"}
        elif name == "InstanceFaultsDict" or name == "LinkFaultsDict":
            assert set(td.__required_keys__) == {"mtbf_s", "mttr_s"}
        elif name == "FaultEventDict":
            assert set(td.__required_keys__) == {"at_s", "for_s"}
        elif name == "KvTierDict":
            assert set(td.__required_keys__) == {"kind", "capacity_gb"}
        else:
            assert not td.__required_keys__, name


def test_scenario_dict_is_exported() -> None:
    """kvwire.ScenarioDict is the TypedDict of kvwire.scenario."""
    assert kvwire.ScenarioDict is ks.ScenarioDict
    assert typing.is_typeddict(kvwire.ScenarioDict)
