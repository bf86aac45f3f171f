"""The typed shape of a scenario dict, for type checkers and readers. The Rust core is the validator and the
source of truth; ``tests/scenario/test_schema.py`` checks these keys against its default scenario.

>>> from kvwire.scenario import ScenarioDict
>>> sc: ScenarioDict = {"link": "eth-25g", "workload": {"requests": 100}}
>>> sorted(ScenarioDict.__annotations__)[:3]
['colocated', 'cost', 'decode']
"""

from __future__ import annotations

from typing import Any, Literal, TypedDict


class ParallelDict(TypedDict, total=False):
    """``parallel`` of a pool: an instance runs on ``tp * pp * dp`` devices (docs: concepts/parallelism)."""

    tp: int
    pp: int
    micro_batches: int
    ep: int
    dp: int
    expert_imbalance: float
    scale_out: str


class PoolDict(TypedDict, total=False):
    device: str | dict[str, Any]
    instances: int
    devices_per_instance: int
    power_cap_w: float
    kv_format: str
    parallel: ParallelDict


class LinkDict(TypedDict, total=False):
    preset: str
    channels: int
    model: Literal["fcfs", "shared", "host_staged"]
    host_link: str | dict[str, Any]
    name: str
    bandwidth_gb_per_s: float
    latency_us: float
    pj_per_bit: float
    nics: int
    nic_efficiency: float
    gpus_per_nic: int
    launch_overhead_us: float
    descriptor_us: float
    registration: Literal["pool", "per_transfer"]
    registration_ms_per_gb: float
    source: str


#: ``handoff.convert``: a layout conversion on the hand-off path (``from`` is a Python keyword, hence this form).
ConvertDict = TypedDict(
    "ConvertDict",
    {
        "from": str,
        "to": str,
        "at": Literal["sender", "receiver", "host"],
        "from_block_size": int,
        "to_block_size": int,
        "from_dtype": str,
        "to_dtype": str,
        "host_gb_per_s": float,
        "host_threads": int,
        "host_w_per_thread": float,
    },
    total=False,
)


class HandoffDict(TypedDict, total=False):
    compression: str
    compress_at: Literal["transit", "sender"]
    decompress_at: Literal["none", "receiver"]
    streaming: Literal["whole", "layer"]
    convert: ConvertDict
    skip_cached_prefix: bool


class ArrivalsDict(TypedDict, total=False):
    process: Literal["poisson", "gamma"]
    rate_per_s: float
    cv: float


class LengthDict(TypedDict, total=False):
    dist: Literal["fixed", "uniform", "lognormal"]
    value: int
    mean: float
    cv: float
    min: int
    max: int


class TraceDict(TypedDict):
    arrival_s: list[float]
    prompt_tokens: list[int]
    output_tokens: list[int]


class _TraceFileRequired(TypedDict):
    file: str


class TraceFileDict(_TraceFileRequired, total=False):
    """``workload.trace`` as a file to read (handled in Python, :mod:`kvwire.trace_spec`)."""

    format: Literal["auto", "azure", "burstgpt", "mooncake", "kvwire"]
    model: str | list[str]
    log_type: str | list[str]
    keep_failed: bool
    start_s: float
    duration_s: float
    time_scale: float
    rate_per_s: float
    sample: float
    seed: int


class _SessionsRequired(TypedDict):
    count: int
    turns: int


class SessionsDict(_SessionsRequired, total=False):
    """``workload.sessions``: closed-loop multi-turn sessions (``docs/concepts/sessions.md``)."""

    think_s: float
    system_prompts: int
    system_tokens: int


class WorkloadDict(TypedDict, total=False):
    requests: int
    seed: int
    arrivals: ArrivalsDict
    prompt_tokens: LengthDict
    output_tokens: LengthDict
    trace: TraceDict | TraceFileDict
    external: bool
    over_context: Literal["warn", "reject", "clip"]
    sessions: SessionsDict


class SloDict(TypedDict, total=False):
    ttft_s: float
    tpot_s: float


class MetricsDict(TypedDict, total=False):
    warmup_fraction: float
    first_token: Literal["prefill", "decode"]


class TimingDict(TypedDict, total=False):
    """``cost.timing``: where step times come from (``docs/concepts/timing.md``). kvwire adds ``provenance``
    (and, for the core, ``tables``) when it resolves a measured or calibrated source."""

    source: Literal["roofline", "aiconfigurator", "calibrated"]
    system: str
    backend: Literal["vllm", "sglang", "trtllm"]
    version: str | None
    model: str
    file: str
    provenance: dict[str, Any]
    tables: dict[str, Any]


class CostDict(TypedDict, total=False):
    step_overhead_s: float
    mem_util: float
    prefill_lm_head: Literal["last", "all"]
    enforce_tdp: bool
    dvfs: bool
    s_min: float
    comm_overlap: float
    timing: TimingDict


class SchedulerDict(TypedDict, total=False):
    policy: Literal["whole", "chunked"]
    max_prefill_tokens: int
    max_decode_batch: int
    max_num_batched_tokens: int


class KvDict(TypedDict, total=False):
    policy: Literal["reserve", "paged"]
    block_size: int
    watermark: float
    preemption: Literal["recompute", "swap"]


class DisaggregateDict(TypedDict, total=False):
    policy: Literal["always", "conditional"]
    min_prompt_tokens: int
    min_output_tokens: int
    max_link_wait_s: float


class RouterDict(TypedDict, total=False):
    prefill: Literal["least_queued_tokens", "round_robin", "prefix_affinity"]
    decode: Literal["least_loaded", "round_robin"]
    colocated: Literal["least_loaded", "round_robin"]
    disaggregate: DisaggregateDict


class EngineDict(TypedDict, total=False):
    macro_steps: bool
    per_slice_streaming: bool
    max_steps: int
    timeline: bool
    timeline_max_spans: int


class PrefixCacheDict(TypedDict, total=False):
    enabled: bool
    capacity_tokens: int | None


class _SpeculativeRequired(TypedDict):
    method: Literal["draft", "mtp", "eagle"]
    tokens: int
    acceptance: float | list[float]


class SpeculativeDict(_SpeculativeRequired, total=False):
    """``speculative``: each decode step drafts ``tokens`` tokens per sequence and verifies them in one pass
    (docs: concepts/speculative)."""

    draft_model: str | dict[str, Any]


class _InstanceFaultsRequired(TypedDict):
    mtbf_s: float
    mttr_s: float


class InstanceFaultsDict(_InstanceFaultsRequired, total=False):
    """``faults.instance``: every instance of ``pools`` (default: all) is up for a drawn time of mean ``mtbf_s``,
    then down for one of mean ``mttr_s`` (docs: concepts/faults)."""

    dist: Literal["exponential", "fixed"]
    pools: list[Literal["prefill", "decode", "colocated"]]


class _LinkFaultsRequired(TypedDict):
    mtbf_s: float
    mttr_s: float


class LinkFaultsDict(_LinkFaultsRequired, total=False):
    """``faults.link``: the network link (``scope`` ``"link"``, default) or each of its channels (``"channel"``) is
    up for a drawn time of mean ``mtbf_s``, then down for one of mean ``mttr_s`` (docs: concepts/faults)."""

    dist: Literal["exponential", "fixed"]
    scope: Literal["link", "channel"]


class _FaultEventRequired(TypedDict):
    at_s: float
    for_s: float


class FaultEventDict(_FaultEventRequired, total=False):
    """One scheduled outage: ``instance`` (``"decode-0"``), or ``link`` (``"kv-link"``; one ``channel`` of it, or
    the whole link), fails at ``at_s`` and is back ``for_s`` later."""

    instance: str
    link: str
    channel: int


class FaultsDict(TypedDict, total=False):
    """``faults``: instances that fail and are repaired, at random and/or at given times, and transfers that fail
    with probability ``transfer_failure_p`` (sent again ``retry_s`` later); a request that loses its work tries
    again at most ``max_retries`` times (docs: concepts/faults)."""

    instance: InstanceFaultsDict
    link: LinkFaultsDict
    events: list[FaultEventDict]
    max_retries: int
    seed: int
    transfer_failure_p: float
    retry_s: float


class _KvTierRequired(TypedDict):
    kind: Literal["host", "ssd"]
    capacity_gb: float


class KvTierDict(_KvTierRequired, total=False):
    """One tier of ``kv_tiers`` below each prefilling instance's GPU memory (docs: concepts/prefix-caching):
    ``host`` memory behind ``link`` (a link preset name or object, default ``"pcie5"``), or a local ``ssd``
    read at ``gb_per_s`` after ``latency_us`` per load (both required)."""

    link: str | LinkDict
    gb_per_s: float
    latency_us: float


class ScenarioDict(TypedDict, total=False):
    """A kvwire scenario. Every key is optional; omitted keys take the documented defaults."""

    model: str | dict[str, Any]
    mode: Literal["disaggregated", "colocated"]
    prefill: PoolDict
    decode: PoolDict
    colocated: PoolDict
    link: str | LinkDict
    handoff: HandoffDict
    workload: WorkloadDict
    slo: SloDict
    metrics: MetricsDict
    cost: CostDict
    scheduler: SchedulerDict
    kv: KvDict
    router: RouterDict
    engine: EngineDict
    prefix_cache: PrefixCacheDict
    speculative: SpeculativeDict
    faults: FaultsDict
    kv_tiers: list[KvTierDict]
