"""The typed shape of kvwire's results: the summary of a run and the closed-form hand-off.

These TypedDicts are the one definition of the result shapes: :attr:`kvwire.SimResult.summary` follows
``SummaryDict`` and :func:`kvwire.handoff` returns a ``HandoffResultDict``; the HTTP service (``kvwire-api``)
generates its OpenAPI document from them. ``None`` stands for a figure that does not exist (never NaN).
``tests/results/test_result_types.py`` checks real results against them.

>>> import kvwire
>>> from kvwire.results import HandoffResultDict
>>> h: HandoffResultDict = kvwire.handoff("llama3-8b", 2048)
>>> set(h) == set(HandoffResultDict.__annotations__)
True
"""

# No ``from __future__ import annotations`` here: ``NotRequired`` must be seen when each class is created
# (``__required_keys__``), which string annotations prevent on Python 3.11.
from typing import Literal, NotRequired, TypedDict


class RequestCountsDict(TypedDict):
    total: int
    completed: int
    rejected: int
    measured: int
    over_context: int


class LatencyStatsDict(TypedDict):
    """One latency metric, seconds (linear interpolation); ``None`` when no request has the metric."""

    mean: float | None
    p50: float | None
    p90: float | None
    p95: float | None
    p99: float | None
    p99_9: float | None
    max: float | None


class LatencyDict(TypedDict):
    ttft_s: LatencyStatsDict
    tpot_s: LatencyStatsDict
    itl_s: LatencyStatsDict
    e2e_s: LatencyStatsDict
    handoff_s: LatencyStatsDict


class SloResultDict(TypedDict):
    ttft_s: float
    tpot_s: float
    attainment: float | None
    goodput_req_per_s: float | None
    goodput_window_s: float | None
    goodput_note: NotRequired[str]
    attainment_note: NotRequired[str]


class ThroughputDict(TypedDict):
    req_per_s: float | None
    output_tokens_per_s: float | None
    window_s: float


class EnergyBreakdownDict(TypedDict):
    static_j: float
    compute_j: float
    memory_j: float
    link_j: float
    transit_j: float
    convert_j: float


class EnergyDict(TypedDict):
    total_j: float
    j_per_output_token: float | None
    avg_power_w: float | None
    breakdown: EnergyBreakdownDict


class StagesDict(TypedDict):
    """Mean time per stage over the measured requests, seconds (``None`` where no request had the stage)."""

    prefill_queue_s: float | None
    prefill_s: float | None
    kv_wait_s: float | None
    kv_transfer_s: float | None
    decode_queue_s: float | None
    decode_s: float | None


class HotspotDict(TypedDict):
    stage: str | None
    resource: str | None
    utilisation: float | None
    busy_over_90: list[str]


class InstanceDict(TypedDict):
    device: str
    devices: int
    compute_format: str
    compute_fallback_from: str | None
    steps: int
    mean_batch: float | None
    power_capped_fraction: float | None
    compute_bound_fraction: float | None
    comm_fraction: float | None
    avg_power_w: float | None
    peak_step_power_w: float | None
    mfu: float | None
    mbu: float | None
    kv_capacity_tokens: int | None
    kv_peak_tokens: int
    decode_batch_occupancy: float | None
    prefill_token_occupancy: float | None
    kv_occupancy_mean: float | None
    kv_occupancy_peak: float | None


class LinkResultDict(TypedDict):
    preset: str
    channels: int
    transfers: int
    handoff_gb: float
    wire_gb: float
    mean_wait_s: float | None
    achieved_gb_per_s: float | None
    link_j_per_transfer: float | None
    local_decodes: int
    transit_bound_fraction: float | None


class HopDict(TypedDict):
    resource: str
    preset: str
    channels: int
    transfers: int
    wire_gb: float
    utilisation: float | None
    link_j: float
    convert_j: float


class LittleDict(TypedDict):
    """Little's law: time-average requests in the system (``l``) and arrival rate x mean time (``lambda_w``)."""

    l: float | None  # noqa: E741 (the law's own letter)
    lambda_w: float | None


class RunStatsDict(TypedDict):
    """The run's own figures: ``events`` (kernel heap events), ``calendar_steps`` (batch-step ends taken from the
    kernel's step calendar with ``engine.macro_steps``; 0 step by step), the horizon, the core's wall time and
    the batch steps of every instance."""

    events: int
    calendar_steps: int
    horizon_s: float
    wall_s: float
    steps: int


class PreemptionsDict(TypedDict):
    """Paged KV (``kv.policy = "paged"``): preemptions of decoding sequences, the prompt + generated tokens
    prefilled again by recompute, and the KV bytes swapped to and from host memory (both directions); all 0
    with reserved KV."""

    count: int
    recompute_tokens: int
    swap_bytes: float


class PrefixCacheResultDict(TypedDict):
    """Prefix caching (``prefix_cache``), over the requests whose prefill started: ``hit_token_ratio`` =
    Σ ``cached_tokens`` / Σ prompt tokens (0.0 when nothing was prefilled), the totals it comes from, the
    requests with a hit, and with ``handoff.skip_cached_prefix`` the tokens left out of hand-offs and the
    bytes they would have put on the network hop. All 0 when prefix caching is off."""

    hit_token_ratio: float
    cached_tokens: int
    prompt_tokens: int
    hit_requests: int
    link_tokens_skipped: int
    link_bytes_saved: float


class SessionsResultDict(TypedDict):
    """A sessions workload (``workload.sessions``; ``docs/concepts/sessions.md``): turns planned (count x turns), sent
    (rows of the table, refused ones included), not sent (a session ended first) and refused; sessions that
    completed every turn, and those that ended early, by a refused turn or by the model's context."""

    count: int
    turns: int
    think_s: float
    turns_planned: int
    turns_sent: int
    turns_not_sent: int
    turns_refused: int
    turns_per_session_mean: float
    completed: int
    ended_early: int
    ended_by_refusal: int
    ended_by_context: int


class KvHoldDict(TypedDict):
    """Paged KV in a disaggregated run: hand-offs pulled by decode instances, how many waited for room there
    (their prompt's KV still held on the prefill instance), the mean wait over all hand-offs and the longest,
    s, the most blocks a prefill instance held for hand-offs in flight and the most blocks in use on a decode
    instance (pulled reservations included); all 0 otherwise."""

    handoffs: int
    waited: int
    wait_s_mean: float
    wait_s_max: float
    prefill_held_peak_blocks: int
    decode_peak_blocks: int


class AccuracyDict(TypedDict):
    """How exact the latency percentiles are: ``approximate`` lists the metrics whose percentiles come from the
    core's quantile sketch (``itl_s`` always; every metric when the per-request table was not kept), each within
    ``relative_error`` of the exact value; counts, means (to rounding) and max are exact everywhere."""

    requests_kept: bool
    approximate: list[str]
    relative_error: float


class HopCeilingDict(TypedDict):
    """One hop of the hand-off path (``kv-link``, ``pcie-prefill``, ``host-convert``, ...) and its ceiling."""

    resource: str
    req_per_s: float | None


class CeilingsDict(TypedDict):
    """What :func:`kvwire.ceilings` returns: each resource's analytic ceiling, arriving requests/s (``None``
    where the resource does not exist in this mode or carries no work), the binding one, and what they were
    computed at."""

    prefill_req_per_s: float | None
    decode_req_per_s: float | None
    kv_link_req_per_s: float | None
    colocated_req_per_s: float | None
    binding: Literal["prefill", "decode", "kv-link", "colocated"]
    ceiling_req_per_s: float
    offered_req_per_s: float | None
    prompt_tokens_mean: float
    output_tokens_mean: float
    admitted_fraction: float
    handoff_fraction: float
    prefill_batch_prompts: int
    decode_batch: int
    hops: list[HopCeilingDict]


class LoadDict(CeilingsDict):
    """The summary's ``load``: the ceilings with the overload verdict (``overload_note`` is the report's line;
    ``all_rejected``: every request was rejected at arrival, so nothing carried load). A load factor too large
    for a float is ``None``."""

    load_factor: dict[str, float | None] | None
    overloaded: bool
    all_rejected: bool
    overload_note: str | None


class SpeculativeResultDict(TypedDict):
    """Speculative decoding (``speculative``; ``docs/concepts/speculative.md``): per sequence and verify step, the
    drafts accepted and the tokens got (accepted + 1), how many sequence-steps were verified, and the time of the
    draft passes (s, and its share of the instances' busy time)."""

    accepted_tokens_per_step: float | None
    tokens_per_step: float | None
    verified_sequence_steps: int
    draft_s: float
    draft_share_of_busy: float | None


class FaultsResultDict(TypedDict):
    """Faults (``faults``; ``docs/concepts/faults.md``): instance failures up to the run's end, hop transfers
    that failed, outages of the network link, requests that tried again at least once and those that failed
    for good, the work thrown away (s), the instances' down time (s) and the availability (1 - down time /
    (instances x the run's length))."""

    instance_failures: int
    transfer_failures: int
    link_failures: int
    retried_requests: int
    failed_requests: int
    lost_work_s: float
    downtime_s: float
    availability: float


class KvTierResultDict(TypedDict):
    """One tier of ``kv_tiers`` (``docs/concepts/prefix-caching.md``, "KV tiers"), summed over the prefilling
    instances, each of which has its own tier of ``capacity_bytes``: the prompt tokens loaded from it instead of
    prefilled and the requests that loaded any, the bytes loaded from it and spilled into it, the load time
    added to prefill steps (s, on the critical path) and the most bytes one instance's tier held."""

    kind: str
    capacity_bytes: float
    hit_tokens: int
    hit_requests: int
    read_bytes: float
    written_bytes: float
    load_s: float
    peak_bytes: float


class SummaryDict(TypedDict):
    """The summary of one run (``docs/reference/summary.md``); JSON-serialisable, ``None`` where a figure does not
    exist. ``utilisation`` and ``instances`` are keyed by resource (``prefill-0``, ``decode-0``, ``kv-link``,
    ``colocated-0``, ...); ``link`` is ``None`` in colocated mode."""

    requests: RequestCountsDict
    latency: LatencyDict
    slo: SloResultDict
    throughput: ThroughputDict
    utilisation: dict[str, float | None]
    energy: EnergyDict
    stages: StagesDict
    stages_present: StagesDict
    hotspot: HotspotDict
    instances: dict[str, InstanceDict]
    link: LinkResultDict | None
    hops: list[HopDict]
    little: LittleDict
    run: RunStatsDict
    accuracy: AccuracyDict
    preemptions: PreemptionsDict
    kv_hold: KvHoldDict
    prefix_cache: PrefixCacheResultDict
    load: NotRequired[LoadDict]
    sessions: NotRequired[SessionsResultDict]
    speculative: NotRequired[SpeculativeResultDict]
    faults: NotRequired[FaultsResultDict]
    kv_tiers: NotRequired[list[KvTierResultDict]]


class PercentileRowDict(LatencyStatsDict):
    """One row of :meth:`kvwire.SimResult.percentiles` (seconds): the metric, how many values it has, and
    the statistics of :class:`LatencyStatsDict`."""

    metric: str
    count: int


class HandoffResultDict(TypedDict):
    """What :func:`kvwire.handoff` returns (bytes, seconds, requests per second)."""

    prompt_tokens: int
    layers: int
    bytes_per_token: float
    handoff_bytes: float
    wire_bytes: float
    transfer_s: float
    launch_s: float
    descriptors_s: float
    rank_pairs: int
    registration_s: float
    staging_s: float
    convert_s: float
    convert_at: Literal["sender", "receiver", "host"] | None
    prefill_s: float
    exposed_s: float
    link_full_rate_per_s: float | None
    streaming: Literal["whole", "layer"]


__all__ = [
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
    "SpeculativeResultDict",
    "StagesDict",
    "SummaryDict",
    "ThroughputDict",
]
