"""Plain-text report of a run (what ``kvwire run`` prints)."""

from __future__ import annotations

from typing import Any

from kvwire.run import SimResult
from kvwire.summary import QUANTILES


def _ms(x: float | None) -> str:
    return "-" if x is None else f"{x * 1e3:,.1f}"


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x * 100:.1f}%"


def _num(x: float | None, fmt: str = ",.2f") -> str:
    return "-" if x is None else format(x, fmt)


def _topology(sc: dict[str, Any]) -> str:
    pools = sc["pools"]

    def pool(p: dict[str, Any]) -> str:
        per = f"{p['devices_per_instance']}x" if p["devices_per_instance"] > 1 else ""
        return f"{p['instances']} x {per}{p['device']}"

    if sc["mode"] == "colocated":
        return f"colocated {pool(pools['colocated'])}"
    comp = "" if sc["compression"] == "none" else f" ({sc['compression']} in transit)"
    ch = f", {sc['channels']} channels" if sc["channels"] > 1 else ""
    return f"prefill {pool(pools['prefill'])} -> {sc['link']}{ch}{comp} -> decode {pool(pools['decode'])}"


def render(res: SimResult) -> str:
    """A readable report: topology, latency table, SLO, throughput, utilisation, energy, hot-spot."""
    s = res.summary
    sc = res.scenario
    r = s["requests"]
    lines = [
        f"kvwire: {sc['model_spec']['name']}, {_topology(sc)}",
        f"requests: {r['total']:,} ({r['completed']:,} completed, {r['rejected']:,} rejected, "
        f"{r['measured']:,} measured after warm-up {sc['metrics']['warmup_fraction']:g}); "
        f"horizon {s['run']['horizon_s']:,.1f} s; {s['run']['events']:,} events, {s['run']['steps']:,} steps "
        f"in {s['run']['wall_s']:.3f} s",
    ]
    if s.get("load") and s["load"]["overloaded"]:
        lines.append(s["load"]["overload_note"])
    lines.append("")
    names = ["mean", *[n for n, _ in QUANTILES], "max"]
    header = f"  {'latency (ms)':<14}" + "".join(f"{n.replace('_', '.'):>10}" for n in names)
    lines.append(header)
    for metric, row in s["latency"].items():
        lines.append(f"  {metric.removesuffix('_s'):<14}" + "".join(f"{_ms(row[n]):>10}" for n in names))
    lines.append("")
    slo = s["slo"]
    good = slo["goodput_req_per_s"]
    lines.append(
        f"SLO (TTFT <= {slo['ttft_s'] * 1e3:g} ms, TPOT <= {slo['tpot_s'] * 1e3:g} ms): "
        f"{_pct(slo['attainment'])} met, goodput {_num(good)} req/s"
    )
    t = s["throughput"]
    lines.append(f"throughput: {_num(t['req_per_s'])} req/s, {_num(t['output_tokens_per_s'], ',.0f')} output tokens/s")
    lines.append("utilisation: " + ", ".join(f"{k} {_pct(v)}" for k, v in s["utilisation"].items()))
    e = s["energy"]
    b = e["breakdown"]
    total = e["total_j"] or 0.0
    parts = ", ".join(
        f"{k.removesuffix('_j')} {_pct(v / total if total else None)}"
        for k, v in b.items()
        if v or k not in ("transit_j", "convert_j")
    )
    lines.append(
        f"energy: {_num(e['j_per_output_token'], '.3f')} J/output token; total {total / 1e3:,.1f} kJ "
        f"({parts}); average {_num(e['avg_power_w'], ',.0f')} W"
    )
    capped = ", ".join(f"{k} {_pct(v['power_capped_fraction'])}" for k, v in s["instances"].items())
    lines.append(f"power-capped share of busy time: {capped}")
    if s["link"] is not None:
        lk = s["link"]
        lines.append(
            f"kv link: {lk['transfers']:,} transfers, {lk['wire_gb']:,.1f} GB on the wire, mean wait "
            f"{_ms(lk['mean_wait_s'])} ms, {_num(lk['link_j_per_transfer'], '.3f')} J/transfer"
        )
    h = s["hotspot"]
    if h["stage"] is not None:
        lines.append(
            f"hot-spot: {h['stage'].removesuffix('_s')} (mean {_ms(s['stages'][h['stage']])} ms) on "
            f"{h['resource']} ({_pct(h['utilisation'])} busy)"
        )
    if h["busy_over_90"]:
        lines.append("over 90% busy: " + ", ".join(h["busy_over_90"]))
    return "\n".join(lines)


__all__ = ["render"]
