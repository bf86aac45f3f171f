"""What does a per-hand-off KV layout conversion cost, and where should it run?

The seed article (000) ends on an open question: a cross-engine hand-off either agrees on one cache layout or
pays a conversion on the critical path, "and that conversion is not free at these sizes: Splitwise measured a
single 512-token OPT-66B request producing 1.13 GB of cache, needing 90 Gbps at 10 requests per second".

This example answers it with numbers. OPT-66B on H100s (prefill: 1 instance of 4 GPUs, decode: 2 of 4), 512-token
prompts and 128-token answers at 10 requests/s, a vLLM prefill whose cache is HND paged (blocks of 16) handing
off to an SGLang decode that wants its token-major per-layer K and V buffers. The conversion runs

* nowhere (a bilateral format: the baseline),
* on the sender GPU (read HND, write SGLang, at derated HBM bandwidth, after the prefill step),
* on the receiver GPU (the same pass before the request's first decode step), or
* on the sender's host CPU (only possible when the cache is staged through host memory anyway — no GPUDirect:
  the link is host-staged), at the throughput kvwire's own conversion kernel measures per core
  (`benches/README.md`), with 1, 2 or 4 threads per prefill host,

over NVLink 4, InfiniBand NDR and 100 GbE. First, the kernel itself is timed on this machine on a slice of a
real-size cache, so the host figure is not taken on trust.

Run: ``python examples/layout_conversion_cost.py`` (about half a minute). Every figure printed is computed here.
"""

from __future__ import annotations

import time
from typing import Any

import kvwire
import numpy as np
from kvwire import layout

MODEL = "opt-66b"
PROMPT, OUTPUT, RATE, REQUESTS = 512, 128, 10.0, 2000
LINKS = ["nvlink4", "ib-ndr", "eth-100g"]
CONVERT = {"from": "vllm_hnd", "to": "sglang", "from_block_size": 16, "to_block_size": 1}


def measure_kernel_gb_per_s() -> float:
    """Time kvwire's HND → SGLang conversion of 8 of OPT-66B's 64 layers for one 512-token request."""
    spec = kvwire.catalog()["models"][MODEL]
    geometry = {"layers": 8, "heads": spec["kv_heads"], "head_dim": spec["head_dim"]}
    src_l = layout.Layout("vllm_hnd", block_size=16, dtype="float16", **geometry)
    dst_l = layout.Layout("sglang", block_size=1, dtype="float16", **geometry)
    blocks = PROMPT // 16
    src = np.random.default_rng(0).standard_normal(src_l.shape(blocks), dtype=np.float32).astype(np.float16)
    table = np.random.default_rng(1).permutation(blocks).astype(np.int32)
    out = dst_l.empty(PROMPT)
    best = float("inf")
    for _ in range(5):
        t0 = time.perf_counter()
        layout.convert(src, src_l, dst_l, tokens=PROMPT, src_block_table=table, out=out, threads=1)
        best = min(best, time.perf_counter() - t0)
    return src.nbytes / best / 1e9


def scenario(link: str, at: str | None, threads: int = 1, host_gb_per_s: float | None = None) -> dict[str, Any]:
    sc: dict[str, Any] = {
        "model": MODEL,
        "prefill": {"device": "h100", "instances": 1, "devices_per_instance": 4},
        "decode": {"device": "h100", "instances": 2, "devices_per_instance": 4},
        "link": link,
        "workload": {
            "requests": REQUESTS,
            "seed": 3,
            "arrivals": {"rate_per_s": RATE},
            "prompt_tokens": {"dist": "fixed", "value": PROMPT},
            "output_tokens": {"dist": "fixed", "value": OUTPUT},
        },
    }
    if at == "host" or at == "staged":
        sc["link"] = {"preset": link, "model": "host_staged"}
    if at in ("sender", "receiver", "host"):
        sc["handoff"] = {"convert": {**CONVERT, "at": at}}
        if at == "host":
            sc["handoff"]["convert"]["host_threads"] = threads
            if host_gb_per_s is not None:
                sc["handoff"]["convert"]["host_gb_per_s"] = host_gb_per_s
    return sc


def main() -> None:
    print(__doc__.split("\n\n")[0])
    print()
    h = kvwire.handoff(MODEL, PROMPT, link="ib-ndr", device="h100", devices_per_instance=4)
    gb = h["handoff_bytes"] / 1e9
    src = layout.Layout("vllm_hnd", layers=64, heads=72, head_dim=128, block_size=16)
    dst = src.with_(name="sglang", block_size=1)
    print(
        f"One {PROMPT}-token {MODEL} hand-off: {gb:.3f} GB ({h['handoff_bytes'] / 2**30:.3f} GiB — Splitwise's "
        f"'1.13 GB'), {gb * 8 * RATE:.0f} Gbit/s at {RATE:g} req/s; the conversion reads "
        f"{src.nbytes(PROMPT) / 1e9:.3f} GB and writes {dst.nbytes(PROMPT) / 1e9:.3f} GB."
    )
    kernel = measure_kernel_gb_per_s()
    print(
        f"kvwire's HND → SGLang kernel on this machine, one core: {kernel:.1f} GB/s, i.e. "
        f"{gb / kernel * 1e3:.0f} ms of one core per hand-off; at {RATE:g} req/s a host needs "
        f"{gb * RATE / kernel:.1f} cores just for conversions."
    )
    print()
    print(f"{'link':<9}{'conversion':<22}{'TTFT p50':>10}{'TTFT p99':>10}{'E2E p99':>10}{'added p99':>11}"
          f"{'J/request':>11}{'busiest hop':>26}")  # fmt: skip
    for link in LINKS:
        rows: list[tuple[str, dict[str, Any]]] = []
        base = kvwire.simulate(scenario(link, None)).summary
        rows += [("none (GPUDirect)", base)]
        rows += [(f"{at} GPU", kvwire.simulate(scenario(link, at)).summary) for at in ("sender", "receiver")]
        staged = kvwire.simulate(scenario(link, "staged")).summary
        rows += [("none (host-staged)", staged)]
        rows += [
            (f"host, {t} thread{'s' if t > 1 else ''}", kvwire.simulate(scenario(link, "host", t, kernel)).summary)
            for t in (1, 2, 4)
        ]
        for label, s in rows:
            ref = staged if label.startswith("host") else base
            lat = s["latency"]
            added = lat["e2e_s"]["p99"] - ref["latency"]["e2e_s"]["p99"]
            hops = {hp["resource"]: hp["utilisation"] for hp in s["hops"]}
            busiest = max(hops, key=lambda k: hops[k])
            print(
                f"{link:<9}{label:<22}{lat['ttft_s']['p50'] * 1e3:>8.0f}ms{lat['ttft_s']['p99'] * 1e3:>8.0f}ms"
                f"{lat['e2e_s']['p99']:>9.2f}s{added * 1e3:>9.1f}ms"
                f"{s['energy']['total_j'] / s['requests']['completed']:>11.0f}"
                f"{busiest:>18} {hops[busiest]:>6.0%}"
            )
        print()
    print("'added p99' is the E2E p99 difference against the same link without a conversion (GPUDirect for the")
    print("GPU placements, host-staged for the host ones); 'busiest hop' is the most utilised link or host resource.")
    need = gb * RATE / kernel
    dev = kvwire.catalog()["devices"]["h100"]
    gpu_s = (src.nbytes(PROMPT) + dst.nbytes(PROMPT)) / (4 * dev["hbm_tb_per_s"] * 1e12 * dev["bw_eff"])
    print(
        f"A host thread converts one hand-off in {gb / kernel * 1e3:.0f} ms, so at {RATE:g} req/s the host queue is"
        f" stable only with ≥ {int(need) + 1} threads per prefill host (utilisation {need:.2f} / threads); on the"
        f" 4-GPU instance the same bytes are a {gpu_s * 1e3:.2f} ms HBM pass."
    )


if __name__ == "__main__":
    main()
