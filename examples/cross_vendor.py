"""Prefill on one vendor, decode on another: what the hand-off's conversion and transfer layer cost.

The first seed article ends on announced systems that prefill on AMD (or AWS) silicon and decode on a wafer-scale
engine with 44 GB of on-chip SRAM and no HBM, and says nobody has published what that hand-off costs: "a neutral
interchange form [means] every handoff pays a conversion. And that conversion is not free at these sizes:
Splitwise measured a single 512-token OPT-66B request producing 1.13 GB of cache, needing 90 Gbps at 10 requests
per second."

This example prices it with kvwire. OPT-66B, 512-token prompts and 128-token answers (Poisson arrivals):

* cross-vendor: 4 MI300X prefill instances (vLLM ROCm: paged HND cache, blocks of 16) hand off over RoCE
  4x200 Gb/s (Mooncake's measured 87% of line rate) to one instance of the illustrative wafer-scale engine, as
  many wafers as the weights need (kvwire's DoesNotFitError says how many), which takes the neutral
  interchange form;
* one vendor: the same prefill pool and link, decode on 4 MI300X instances, no conversion (same kernel ABI).

The conversion HND → neutral runs nowhere (a bilateral format), on the sender MI300X, on the receiver (the wafer
cannot: kvwire refuses it and says why), or on the sender's host CPU when the cache bounces through host memory
(no GPUDirect). With an fp8 cache the MI300X writes E4M3FNUZ and the consumer reads E4M3FN: the same pass changes
the flavour. Every number printed comes from ``kvwire.handoff`` (closed form, one idle hand-off),
``kvwire.simulate`` (the event simulation at a request rate) or ``kvwire.ceilings``; nothing is typed in.

Run: ``python examples/cross_vendor.py`` (a few seconds).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import kvwire

MODEL = "opt-66b"
PROMPT, OUTPUT, RATE, REQUESTS = 512, 128, 10.0, 2000
LINK = "roce-4x200g"
PREFILL: dict[str, Any] = {"device": "mi300x", "instances": 4}
ONE_VENDOR_DECODE: dict[str, Any] = {"device": "mi300x", "instances": 4}
#: The producer's layout (vLLM's paged HND) and the consumer's (the neutral interchange form).
CONVERT: dict[str, Any] = {"from": "vllm_hnd", "from_block_size": 16, "to": "neutral"}
#: The fp8 flavours: AMD's kernels write E4M3FNUZ, the consumer reads OCP E4M3FN.
FP8_DTYPES = {"from_dtype": "fp8_e4m3fnuz", "to_dtype": "fp8_e4m3"}
#: Placement -> (where the conversion runs or None, whether the cache bounces through host memory).
PLACEMENTS: dict[str, tuple[str | None, bool]] = {
    "bilateral format": (None, False),
    "sender (MI300X)": ("sender", False),
    "receiver (wafer)": ("receiver", False),
    "host bounce, no conversion": (None, True),
    "host CPU": ("host", True),
}


def model(fp8: bool) -> str | dict[str, Any]:
    """OPT-66B with a BF16 cache, or with an fp8 cache (one byte per value)."""
    return {"preset": MODEL, "kv_bytes_per_value": 1} if fp8 else MODEL


def wafers_needed(fp8: bool = False) -> int:
    """The fewest wafers per decode instance that hold the model: asked of kvwire (DoesNotFitError)."""
    try:
        kvwire.validate({"model": model(fp8), "prefill": PREFILL, "decode": {"device": "wafer-scale"}})
    except kvwire.DoesNotFitError as e:
        if e.devices_needed is None:
            raise
        return e.devices_needed
    return 1


def link(staged: bool, registration: str = "pool", preset: str = LINK) -> dict[str, Any]:
    """The hand-off link: GPUDirect, or host-staged (the cache bounces through host memory)."""
    out: dict[str, Any] = {"preset": preset, "registration": registration}
    if staged:
        out["model"] = "host_staged"
    return out


def convert(at: str | None, fp8: bool) -> dict[str, Any] | None:
    """The hand-off conversion placed ``at`` (None: no conversion)."""
    if at is None:
        return None
    return {**CONVERT, **(FP8_DTYPES if fp8 else {}), "at": at}


def scenario(
    placement: str,
    *,
    rate_per_s: float = RATE,
    requests: int | None = None,
    fp8: bool = False,
    registration: str = "pool",
    preset: str = LINK,
    one_vendor: bool = False,
) -> dict[str, Any]:
    """The scenario of one placement (or, with ``one_vendor``, the single-vendor system, which never converts).
    TTFT ends when the user sees the first token, after the hand-off (``metrics.first_token = "decode"``), so
    the hand-off's cost is on the latency it measures."""
    at, staged = PLACEMENTS[placement]
    decode = ONE_VENDOR_DECODE if one_vendor else {"device": "wafer-scale", "devices_per_instance": wafers_needed(fp8)}
    sc: dict[str, Any] = {
        "model": model(fp8),
        "prefill": PREFILL,
        "decode": decode,
        "link": link(staged, registration, preset),
        "metrics": {"first_token": "decode"},
        "workload": {
            "requests": REQUESTS if requests is None else requests,
            "seed": 7,
            "arrivals": {"rate_per_s": rate_per_s},
            "prompt_tokens": {"dist": "fixed", "value": PROMPT},
            "output_tokens": {"dist": "fixed", "value": OUTPUT},
        },
    }
    c = None if one_vendor else convert(at, fp8)
    if c is not None:
        sc["handoff"] = {"convert": c}
    return sc


def closed_form(placement: str, *, fp8: bool = False, registration: str = "pool", preset: str = LINK) -> Any:
    """``kvwire.handoff`` of one idle hand-off at this placement (a dict), or the ScenarioError refusing it."""
    at, staged = PLACEMENTS[placement]
    try:
        return kvwire.handoff(
            model(fp8),
            PROMPT,
            link=link(staged, registration, preset),
            device=PREFILL["device"],
            decode_device="wafer-scale",
            decode_devices_per_instance=wafers_needed(fp8),
            convert=convert(at, fp8),
        )
    except kvwire.ScenarioError as e:
        return e


def row(placement: str, *, rate_per_s: float = RATE, requests: int | None = None, **kw: Any) -> dict[str, Any]:
    """One placement: the closed form (``handoff``) and the simulation at ``rate_per_s`` (``summary``), or the
    reason it is refused (``refused``)."""
    h = closed_form(placement, **kw)
    if isinstance(h, kvwire.ScenarioError):
        return {"placement": placement, "handoff": None, "summary": None, "refused": str(h)}
    summary = kvwire.simulate(scenario(placement, rate_per_s=rate_per_s, requests=requests, **kw)).summary
    return {"placement": placement, "handoff": h, "summary": summary, "refused": None}


def utilisation(summary: dict[str, Any], prefix: str) -> float:
    """Mean utilisation of the resources named ``prefix``-N (e.g. the per-instance host converters)."""
    vals = [u for k, u in summary["utilisation"].items() if k == prefix or k.startswith(prefix + "-")]
    return sum(vals) / len(vals) if vals else 0.0


def mean_e2e_s(s: dict[str, Any]) -> float:
    """Mean end-to-end latency of a summary."""
    return float(s["latency"]["e2e_s"]["mean"])


def mean_ttft_s(s: dict[str, Any]) -> float:
    """Mean TTFT (first token seen after the hand-off) of a summary."""
    return float(s["latency"]["ttft_s"]["mean"])


METRICS: dict[str, Callable[[dict[str, Any]], float]] = {"mean E2E": mean_e2e_s, "mean TTFT": mean_ttft_s}


def advantage_s(
    placement: str, rate_per_s: float, metric: str, requests: int | None = None, fp8: bool = False
) -> float:
    """How much lower (seconds) the cross-vendor split's ``metric`` is than the single vendor's at
    ``rate_per_s``: positive while the split pays for itself."""
    kw: dict[str, Any] = {"rate_per_s": rate_per_s, "requests": requests, "fp8": fp8}
    one = kvwire.simulate(scenario(placement, one_vendor=True, **kw)).summary
    cross = kvwire.simulate(scenario(placement, **kw)).summary
    f = METRICS[metric]
    return f(one) - f(cross)


def crossings(
    placement: str,
    metric: str,
    *,
    rates: list[float],
    requests: int | None = None,
    fp8: bool = False,
    rel_tol: float = 0.01,
) -> list[tuple[float, bool]]:
    """The rates (within ``rel_tol``, by bisection between grid ``rates``) where the split's advantage on
    ``metric`` changes sign, each with whether it pays for itself above it; [] if the sign never changes."""

    def pays(r: float) -> bool:
        return advantage_s(placement, r, metric, requests, fp8) > 0

    signs = [pays(r) for r in rates]
    out = []
    for i in range(1, len(rates)):
        if signs[i] == signs[i - 1]:
            continue
        lo, hi = rates[i - 1], rates[i]
        while hi - lo > rel_tol * lo:
            mid = math.sqrt(lo * hi)
            if pays(mid) == signs[i - 1]:
                lo = mid
            else:
                hi = mid
        out.append((0.5 * (lo + hi), signs[i]))
    return out


def rate_grid(placement: str, fp8: bool = False, points: int = 16) -> list[float]:
    """Geometric rates from 1 req/s to 1.25x the higher of the two systems' analytic ceilings."""
    top = max(
        kvwire.ceilings(scenario(placement, fp8=fp8, one_vendor=one))["ceiling_req_per_s"] for one in (False, True)
    )
    hi = 1.25 * top
    return [hi ** (i / (points - 1)) for i in range(points)]


def verdict(placement: str, metric: str, *, fp8: bool = False, requests: int | None = None, points: int = 16) -> str:
    """In words: over which rates the split pays for itself on ``metric``."""
    rates = rate_grid(placement, fp8, points)
    xs = crossings(placement, metric, rates=rates, requests=requests, fp8=fp8)
    if not xs:
        pays = advantage_s(placement, rates[0], metric, requests, fp8) > 0
        word = "pays for itself" if pays else "never pays for itself"
        return f"{word} from {rates[0]:.0f} to {rates[-1]:.0f} req/s"
    parts = [f"{'starts' if up else 'stops'} paying at {r:.1f} req/s" for r, up in xs]
    return ", ".join(parts)


def print_placements(fp8: bool) -> None:
    """The table of every placement at RATE: closed form and simulation."""
    flavour = "fp8 cache, E4M3FNUZ -> E4M3FN" if fp8 else "BF16 cache"
    print(f"-- {flavour}, {RATE:g} req/s, {REQUESTS} requests simulated per run --")
    print(
        f"{'placement':<28}{'convert':>9}{'transfer':>10}{'staging':>9}{'exposed':>9}"
        f"{'| handoff mean':>15}{'p99':>8}{'E2E mean':>10}{'host conv':>10}{'ceiling':>9}"
    )
    one = kvwire.handoff(model(fp8), PROMPT, link=link(False), device=PREFILL["device"])
    s1 = kvwire.simulate(scenario("bilateral format", fp8=fp8, one_vendor=True)).summary
    c1 = kvwire.ceilings(scenario("bilateral format", fp8=fp8, one_vendor=True))["ceiling_req_per_s"]
    print(
        f"{'one vendor: MI300X decode':<28}{0:>7.2f}ms{one['transfer_s'] * 1e3:>8.1f}ms{0:>7.1f}ms"
        f"{one['exposed_s'] * 1e3:>7.1f}ms|{s1['latency']['handoff_s']['mean'] * 1e3:>12.1f}ms"
        f"{s1['latency']['handoff_s']['p99'] * 1e3:>6.1f}ms{mean_e2e_s(s1):>9.3f}s{0:>10.0%}{c1:>6.1f}/s"
    )
    for p in PLACEMENTS:
        r = row(p, fp8=fp8)
        if r["refused"] is not None:
            print(f"{p:<28}refused: {r['refused']}")
            continue
        h, s = r["handoff"], r["summary"]
        lat = s["latency"]
        ceiling = kvwire.ceilings(scenario(p, fp8=fp8))
        print(
            f"{p:<28}{h['convert_s'] * 1e3:>7.2f}ms{h['transfer_s'] * 1e3:>8.1f}ms{h['staging_s'] * 1e3:>7.1f}ms"
            f"{h['exposed_s'] * 1e3:>7.1f}ms|{lat['handoff_s']['mean'] * 1e3:>12.1f}ms"
            f"{lat['handoff_s']['p99'] * 1e3:>6.1f}ms{lat['e2e_s']['mean']:>9.3f}s"
            f"{utilisation(s, 'host-convert'):>10.0%}{ceiling['ceiling_req_per_s']:>6.1f}/s"
        )
    print()


def print_transfer_layer() -> None:
    """The transfer layer's own costs on the sender placement, at RATE."""
    print(f"-- transfer layer (sender conversion, BF16), {RATE:g} req/s --")
    print(f"{'link':<34}{'launch':>9}{'register':>10}{'transfer':>10}{'| handoff mean':>15}{'link busy':>10}")
    variants = [
        (LINK, "pool"),
        (LINK, "per_transfer"),
        ("roce-8x400g", "pool"),
        ("ib-ndr-nixl", "pool"),
        ("ib-ndr-nixl", "per_transfer"),
    ]
    for preset, reg in variants:
        r = row("sender (MI300X)", registration=reg, preset=preset)
        h, s = r["handoff"], r["summary"]
        print(
            f"{preset + ', ' + reg:<34}{h['launch_s'] * 1e3:>7.1f}ms{h['registration_s'] * 1e3:>8.1f}ms"
            f"{h['transfer_s'] * 1e3:>8.1f}ms|{s['latency']['handoff_s']['mean'] * 1e3:>12.1f}ms"
            f"{utilisation(s, 'kv-link'):>10.0%}"
        )
    print()


def main() -> None:
    print(__doc__.split("\n\n")[0])
    print()
    one = kvwire.handoff(MODEL, PROMPT, link=LINK, device="mi300x")
    gb = one["handoff_bytes"] / 1e9
    print(
        f"One {PROMPT}-token {MODEL} hand-off: {gb:.3f} GB ({one['handoff_bytes'] / 2**30:.3f} GiB, Splitwise's "
        f"'1.13 GB'), {gb * 8 * RATE:.0f} Gbit/s at {RATE:g} req/s. The wafer-scale decode engine (illustrative) "
        f"needs {wafers_needed()} wafers for the BF16 weights."
    )
    print()
    print_placements(fp8=False)
    print_placements(fp8=True)
    print_transfer_layer()
    print("-- when does the split stop paying for itself against staying on MI300X? --")
    for fp8 in (False, True):
        for p in ("sender (MI300X)", "host CPU"):
            for metric in METRICS:
                cache = "fp8 " if fp8 else "BF16"
                print(f"{cache} {p:<18}{metric:<10}{verdict(p, metric, fp8=fp8)}")
    one_c = kvwire.ceilings(scenario("bilateral format", one_vendor=True))
    cross_c = kvwire.ceilings(scenario("host CPU"))
    print()
    print(
        f"Ceilings: one vendor {one_c['ceiling_req_per_s']:.1f} req/s ({one_c['binding']} binds); cross-vendor "
        f"with a host conversion {cross_c['ceiling_req_per_s']:.1f} req/s ({cross_c['binding']} binds; host "
        f"converters {min(h['req_per_s'] for h in cross_c['hops'] if h['resource'] == 'host-convert'):.1f} req/s)."
    )


if __name__ == "__main__":
    main()
