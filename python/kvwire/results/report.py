"""Plain-text report of a run (what ``kvwire run`` prints)."""

from __future__ import annotations

import json
from typing import Any

import kvwire._core as _core
from kvwire.presets import catalog
from kvwire.results.ceilings import compact
from kvwire.results.run import SimResult
from kvwire.results.sessions import session_line
from kvwire.results.summary import QUANTILES, prefill_token_budget


def _ms(x: float | None) -> str:
    return "-" if x is None else f"{x * 1e3:,.1f}"


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x * 100:.1f}%"


def _num(x: float | None, fmt: str = ",.2f") -> str:
    return "-" if x is None else compact(x, fmt)


def _dur(x: float | None) -> str:
    """A duration in ms, or in s from 100 s on (a hot spot of a long replay is not 1,448,804.6 ms).

    >>> _dur(0.0123), _dur(1448.8046), _dur(None)
    ('12.3 ms', '1,448.8 s', '-')
    """
    if x is None:
        return "-"
    return f"{x:,.1f} s" if x >= 100.0 else f"{x * 1e3:,.1f} ms"


def _named(obj: Any, section: str, by_name: bool = False) -> str:
    """A preset reference from the echo: its key (its display name with ``by_name``), with the fields that differ
    from the preset (``eth-25g (bandwidth_gb_per_s 10)``), or the name of an inline (custom) object."""
    if not isinstance(obj, dict):
        return str(obj)
    key = obj.get("preset")
    preset = catalog()[section].get(key) if key else None
    if preset is None:
        return f"{obj.get('name', 'custom')} (custom)"
    changed = [f"{k} {v:g}" if isinstance(v, float) else f"{k} {v}" for k, v in obj.items()
               if k in preset and k not in ("name", "source") and v != preset[k]]  # fmt: skip
    label = str(obj.get("name", key)) if by_name else str(key)
    return f"{label} ({', '.join(changed)})" if changed else label


def _pool(p: dict[str, Any]) -> str:
    per = f"{p['devices_per_instance']}x" if p["devices_per_instance"] > 1 else ""
    cap = f" capped {p['power_cap_w']:g} W" if p.get("power_cap_w") is not None else ""
    kv = f", KV in {p['kv_format']}" if p.get("kv_format", "none") != "none" else ""
    par = p.get("parallel")
    layout = ""
    if par:
        degrees = [f"{k.upper()}{par[k]}" for k in ("tp", "pp", "ep", "dp") if par.get(k, 1) > 1]
        layout = f" ({' x '.join(degrees) or 'TP1'})"
    return f"{p['instances']} x {per}{_named(p['device'], 'devices')}{layout}{cap}{kv}"


def _handoff(sc: dict[str, Any]) -> str:
    """How the KV crosses: link (with overrides), channels, link model, and where compression, decompression
    and layout conversion run."""
    link = sc["link"]
    parts = [_named(link, "links")]
    if link.get("channels", 1) > 1:
        parts.append(f"{link['channels']} channels")
    if link.get("model") == "shared":
        parts.append("shared bandwidth")
    elif link.get("model") == "host_staged":
        parts.append(f"host-staged over {_named(link.get('host_link'), 'links')}")
    plan = _placement(sc)
    comp = plan["compression"]
    if comp is not None:
        at = {"sender": "on the prefill GPU", "transit": "in transit"}[plan["compressed_at"]]
        parts.append(f"{comp} compressed {at}")
        parts.append({
            "receiver": "decompressed on the decode GPU",
            "kept_by_decode": f"kept as {comp} by decode",
            "not_modelled": "decompression not modelled",
        }[plan["decompressed_at"]])  # fmt: skip
    if plan["streaming"] == "layer":
        parts.append("streamed layer by layer")
    conv = plan["convert"]
    if conv:
        parts.append(f"layout {conv['from']} -> {conv['to']} on the {conv['at']}")
    return ", ".join(parts)


def _placement(sc: dict[str, Any]) -> dict[str, Any]:
    """Where each step of the hand-off runs, as the core resolved it from the echo (its hand-off plan, the one
    the engine charges), not re-derived here. The workload plays no part, so it is left out of the check."""
    # (The placement does not depend on the timing source, whose tables the echo leaves out.)
    cost = {k: v for k, v in sc["cost"].items() if k != "timing"}
    placement: dict[str, Any] = json.loads(_core.placement_json(json.dumps({**sc, "workload": {}, "cost": cost})))
    return placement


def _topology(sc: dict[str, Any]) -> str:
    if sc["mode"] == "colocated":
        return f"colocated {_pool(sc['colocated'])}"
    return f"prefill {_pool(sc['prefill'])} -> {_handoff(sc)} -> decode {_pool(sc['decode'])}"


def _cell(x: float | None, scale: float, fmt: str) -> str:
    return "-" if x is None else format(x * scale, fmt)


def _latency_table(latency: dict[str, dict[str, float | None]], names: list[str]) -> list[str]:
    """The latency rows: milliseconds, or seconds when a value reaches 100,000 ms (a 1,449,318 ms TTFT of an
    overloaded replay), in columns wide enough for the longest value so numbers never run together."""
    values = [v for row in latency.values() for v in row.values() if v is not None]
    seconds = max(values, default=0.0) >= 100.0
    unit, scale, fmt = ("s", 1.0, ",.3f") if seconds else ("ms", 1e3, ",.1f")
    cells = {m: [_cell(row[n], scale, fmt) for n in names] for m, row in latency.items()}
    width = max(10, 2 + max((len(c) for row in cells.values() for c in row), default=0))
    out = [f"  {f'latency ({unit})':<14}" + "".join(f"{n.replace('_', '.'):>{width}}" for n in names)]
    out.extend(f"  {m.removesuffix('_s'):<14}" + "".join(f"{c:>{width}}" for c in row) for m, row in cells.items())
    return out


def _list(items: Any, limit: int = 8, sep: str = ", ") -> str:
    """The first ``limit`` items joined by ``sep``, and a count of the rest."""
    items = list(items)
    more = f" (+{len(items) - limit} more)" if len(items) > limit else ""
    return sep.join(items[:limit]) + more


def _occupancy(name: str, inst: dict[str, Any], sc: dict[str, Any]) -> str:
    """How full an instance ran: decode batch and prefill tokens against their limits, KV against capacity."""
    parts = []
    if inst.get("decode_batch_occupancy") is not None:
        mean = inst["decode_batch_occupancy"] * sc["scheduler"]["max_decode_batch"]
        parts.append(f"batch {mean:,.1f} of {sc['scheduler']['max_decode_batch']:,}")
    occ = inst.get("prefill_token_occupancy")
    if occ is not None:
        over = " (over 100%: prompts longer than the budget ran alone, one per step)" if occ > 1.0 else ""
        parts.append(f"prefill tokens {_pct(occ)} of {prefill_token_budget(sc['scheduler']):,}{over}")
    if inst.get("kv_occupancy_mean") is not None:
        parts.append(f"KV mean {_pct(inst['kv_occupancy_mean'])}, peak {_pct(inst['kv_occupancy_peak'])} of capacity")
    return f"{name} {', '.join(parts)}" if parts else ""


def _ceiling(load: dict[str, Any], resource: str) -> float | None:
    value = load.get(f"{resource.replace('-', '_')}_req_per_s")
    return None if value is None else float(value)


def _pool_of(resource: str) -> str:
    """The resource a hot-spot instance or hop belongs to in the ceilings: prefill, decode, kv-link, colocated."""
    for pool in ("prefill", "decode", "colocated"):
        if resource.startswith(pool + "-"):
            return pool
    return "kv-link"


def _context_note(count: int, total: int, sc: dict[str, Any]) -> str:
    """One line on the requests longer than the model's context and what was done with them; when they are
    many (1% of the requests or more), the catalogue's models with a longer context."""
    mode = sc["workload"].get("over_context", "warn")
    done = {"warn": "run as given", "reject": "rejected", "clip": "clipped to fit"}[mode]
    context = int(sc["model"]["max_context_tokens"])
    line = (
        f"context: {count:,} requests exceed {sc['model']['name']}'s {context:,}-token "
        f'context (prompt + output); {done} (workload.over_context "{mode}")'
    )
    if total and count >= 0.01 * total:
        longer = sorted(
            ((int(m["max_context_tokens"]), k) for k, m in catalog()["models"].items()
             if int(m["max_context_tokens"]) > context),
            reverse=True,
        )  # fmt: skip
        if longer:
            line += "; a longer-context model fits more of them: " + ", ".join(
                f"{k} ({c:,} tokens)" for c, k in longer[:3]
            )
    return line


def _timing(t: dict[str, Any]) -> str:
    """The timing source of a run and its data, as the report says it (``cost.timing``'s echo)."""
    prov = t.get("provenance") or {}
    if t.get("source") == "aiconfigurator":
        pools = []
        for name, p in (prov.get("pools") or {}).items():
            bound = (p.get("bound") or {}).get("decode" if name == "decode" else "prefill")
            layout = f"TP{p.get('tp_size', 1)}" + (f" EP{p['moe_ep_size']}" if p.get("moe_ep_size", 1) > 1 else "")
            b = f", interpolation within {_pct(bound)}" if bound is not None else ""
            pools.append(
                f"{name} {p.get('system')} {p.get('backend')} {p.get('version')}, {p.get('model')} {layout}{b}"
            )
        return f"measured ({prov.get('provider', 'aiconfigurator-core')}): " + "; ".join(pools)
    if t.get("source") == "calibrated":
        return f"calibrated roofline ({t.get('file') or 'uploaded calibration'})"
    return str(t.get("source"))


def _levers(s: dict[str, Any], sc: dict[str, Any]) -> list[str]:
    """The serving levers' lines, each only when its lever is on: the prefix cache's hits, what it kept off the
    link and its tiers' loads, paged KV's preemptions, (paged KV, disaggregated) hand-offs that waited for decode
    room, and what faults cost."""
    lines = []
    px = s.get("prefix_cache")
    if px and sc.get("prefix_cache", {}).get("enabled"):
        line = (
            f"prefix cache: {_pct(px['hit_token_ratio'])} of prompt tokens cached ({px['cached_tokens']:,} of "
            f"{px['prompt_tokens']:,}; {px['hit_requests']:,} requests hit)"
        )
        if sc.get("handoff", {}).get("skip_cached_prefix"):
            line += f"; {px['link_tokens_skipped']:,} tokens, {px['link_bytes_saved'] / 1e9:,.1f} GB left off the link"
        lines.append(line)
        for t in s.get("kv_tiers") or []:
            lines.append(
                f"  {t['kind']} tier: {t['hit_tokens']:,} tokens loaded ({t['hit_requests']:,} requests, "
                f"{t['read_bytes'] / 1e9:,.1f} GB read, {t['written_bytes'] / 1e9:,.1f} GB spilled in), "
                f"{t['load_s']:,.2f} s of loads on the critical path"
            )
    if sc.get("kv", {}).get("policy") == "paged":
        pe = s["preemptions"]
        lines.append(
            f"paged KV: {pe['count']:,} preemptions ({pe['recompute_tokens']:,} tokens prefilled again, "
            f"{pe['swap_bytes'] / 1e9:,.1f} GB swapped)"
        )
        kh = s.get("kv_hold")
        if kh and kh["handoffs"]:
            lines.append(
                f"kv holding: {kh['waited']:,} of {kh['handoffs']:,} hand-offs waited for decode room (mean "
                f"{_ms(kh['wait_s_mean'])} ms over all, max {_ms(kh['wait_s_max'])} ms)"
            )
    f = s.get("faults")
    if f:
        lines.append(
            f"faults: {f['instance_failures']:,} instance, {f['link_failures']:,} link and {f['transfer_failures']:,} "
            f"transfer failures; availability {f['availability']:.4%}; {f['retried_requests']:,} requests tried "
            f"again, {f['failed_requests']:,} failed; {f['lost_work_s']:,.1f} s of work lost"
        )
    return lines


def render(res: SimResult, trace_file: str | None = None) -> str:
    """A readable report: what ran (model, pools, link with its overrides, where compression runs, the trace
    file), the latency table, SLO, throughput, utilisation, energy, hot-spot and any overload."""
    s = res.summary
    sc = res.scenario
    r = s["requests"]
    source = f" from {trace_file}" if trace_file else ""
    lines = [
        f"kvwire: {_named(sc['model'], 'models', by_name=True)}, {_topology(sc)}",
        f"requests: {r['total']:,}{source} ({r['completed']:,} completed, {r['rejected']:,} rejected, "
        f"{r['measured']:,} measured after warm-up {sc['metrics']['warmup_fraction']:g}); "
        f"horizon {s['run']['horizon_s']:,.1f} s; {s['run']['events']:,} events, {s['run']['steps']:,} steps "
        f"in {s['run']['wall_s']:.3f} s",
    ]
    if s.get("sessions"):
        lines.append(session_line(s["sessions"]))
    if s.get("load") and (s["load"]["overloaded"] or s["load"].get("all_rejected")):
        lines.append(s["load"]["overload_note"])
    if r.get("over_context"):
        lines.append(_context_note(r["over_context"], r["total"], sc))
    lines.append("")
    names = ["mean", *[n for n, _ in QUANTILES], "max"]
    lines.extend(_latency_table(s["latency"], names))
    lines.append("")
    first = sc["metrics"].get("first_token", "decode")
    if sc["mode"] == "colocated":
        lines.append("ttft ends at the first token out of prefill (colocated: no hand-off)")
    elif first == "prefill":
        lines.append(
            'ttft ends at the first token out of prefill, before the hand-off (metrics.first_token "prefill", '
            "the reference's rule)"
        )
    else:
        lines.append(
            'ttft ends when the decode side has the KV and runs its first step (metrics.first_token "decode", '
            'the default; "prefill" gives the reference\'s rule)'
        )
    acc = s.get("accuracy")
    if acc and not acc["requests_kept"]:
        lines.append(
            f"per-request table not kept (keep_requests=False): percentiles from the core's quantile sketch, each "
            f"within {acc['relative_error']:.4%} of the exact value; counts, means and max exact"
        )
    slo = s["slo"]
    good, window = slo["goodput_req_per_s"], slo.get("goodput_window_s")
    lines.append(
        f"SLO (TTFT <= {slo['ttft_s'] * 1e3:g} ms, TPOT <= {slo['tpot_s'] * 1e3:g} ms): "
        f"{_pct(slo['attainment'])} met, goodput {_num(good)} req/s"
        + (f" (over the measured requests' arrival window, {window:,.1f} s)" if window else "")
    )
    t = s["throughput"]
    lines.append(
        f"throughput: {_num(t['req_per_s'])} req/s, {_num(t['output_tokens_per_s'], ',.0f')} output tokens/s "
        f"(over the run, {t['window_s']:,.1f} s to the last completion)"
    )
    # Load first: how close each resource is to its ceiling. Busy time reads ~100% for any decoding instance
    # (a step runs whenever one sequence does), so each busy share is shown with its pool's load beside it.
    load: dict[str, Any] = s.get("load") or {}
    # A load factor too large for a float (an offered rate over a vanishing window) is None: left out here.
    factors: dict[str, float] = {k: v for k, v in (load.get("load_factor") or {}).items() if v is not None}
    if factors:
        lines.append("load (offered / ceiling): " + ", ".join(
            f"{k} {_pct(v)} of {_num(_ceiling(load, k))} req/s" for k, v in factors.items()
        ))  # fmt: skip

    def busy(k: str, v: float | None) -> str:
        pool = _pool_of(k)
        return f"{k} {_pct(v)}" + (f" (load {_pct(factors[pool])})" if pool in factors else "")

    lines.append("utilisation (busy: share of the run with a step or transfer running, not headroom): " + _list(
        busy(k, v) for k, v in s["utilisation"].items()
    ))  # fmt: skip
    occupancy = [_occupancy(k, v, sc) for k, v in s["instances"].items()]
    if any(occupancy):
        lines.append("occupancy: " + _list((o for o in occupancy if o), sep="; "))
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
    insts = s["instances"]
    capped = ", ".join(f"{k} {_pct(v['power_capped_fraction'])}" for k, v in insts.items())
    lines.append(f"power-capped share of busy time: {capped}")
    formats = {k: v.get("compute_format", "bf16") for k, v in insts.items()}
    fallback = {k: v.get("compute_fallback_from") for k, v in insts.items()}
    if any(f != "bf16" for f in formats.values()) or any(fallback.values()):
        said = []
        for k, f in formats.items():
            said.append(f"{k} {f}" + (f" (no {fallback[k]} tensor cores: ran {f})" if fallback[k] else ""))
        lines.append("matmuls: " + ", ".join(said))
    timing = sc["cost"].get("timing")
    if timing:
        lines.append("step times: " + _timing(timing))
    comm = {k: v.get("comm_fraction") for k, v in insts.items()}
    if any(comm.values()):
        lines.append(
            "collectives (parallel; share of busy time not hidden under compute): "
            + ", ".join(f"{k} {_pct(v)}" for k, v in comm.items())
        )
    if s["link"] is not None:
        lk = s["link"]
        lines.append(
            f"kv link: {lk['transfers']:,} transfers, {lk['wire_gb']:,.1f} GB on the wire, mean wait "
            f"{_ms(lk['mean_wait_s'])} ms, {_num(lk['link_j_per_transfer'], '.3f')} J/transfer"
        )
    lines.extend(_levers(s, sc))
    h = s["hotspot"]
    if h["stage"] is not None:
        pool = _pool_of(h["resource"]) if h["resource"] else None
        where = f" on {h['resource']}" if h["resource"] else ""
        at = f"; {pool} at {_pct(factors[pool])} of its ceiling" if pool in factors else ""
        lines.append(f"hot-spot: {h['stage'].removesuffix('_s')} (mean {_dur(s['stages'][h['stage']])}){where}{at}")
    near = {k: v for k, v in factors.items() if v >= 0.9}
    if near:
        lines.append("near capacity (offered load >= 90% of the ceiling): " + ", ".join(
            f"{k} {_pct(v)}" for k, v in near.items()
        ))  # fmt: skip
    return "\n".join(lines)


__all__ = ["render"]
