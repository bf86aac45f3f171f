"""What :func:`kvwire.plan` returns: :class:`PlanResult` (the table, the frontier, the best and its report),
the Pareto frontier of throughput per GPU against tokens/s per user, and the engine launch settings of the best.

>>> _pareto([{"output_tokens_per_s_per_gpu": 2.0, "output_tokens_per_s_per_user": 1.0},
...          {"output_tokens_per_s_per_gpu": 1.0, "output_tokens_per_s_per_user": 2.0},
...          {"output_tokens_per_s_per_gpu": 1.0, "output_tokens_per_s_per_user": 1.0}])
[0, 1]
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from dataclasses import field as dataclass_field
from typing import Any

import polars as pl

from kvwire.planning.capacity import _clean_dict, _current
from kvwire.planning.plan_space import _budget_text
from kvwire.presets import catalog


def _hf_id(model: Any) -> str:
    models = catalog()["models"]
    name = model if isinstance(model, str) else model.get("preset") if isinstance(model, Mapping) else None
    if isinstance(name, str) and name in models:
        first = str(models[name].get("source", "")).split(" ")[0].rstrip(";,")
        if "/" in first:
            return first
    return str(name or "MODEL")


def _pareto(rows: list[dict[str, Any]]) -> list[int]:
    """Indices of the rows no other row beats on both throughput per GPU and tokens/s per user."""
    keep = []
    for i, a in enumerate(rows):
        ax, ay = a["output_tokens_per_s_per_gpu"], a["output_tokens_per_s_per_user"]
        dominated = any(
            b["output_tokens_per_s_per_gpu"] >= ax
            and b["output_tokens_per_s_per_user"] >= ay
            and (b["output_tokens_per_s_per_gpu"] > ax or b["output_tokens_per_s_per_user"] > ay)
            for j, b in enumerate(rows)
            if j != i
        )
        if not dominated:
            keep.append(i)
    return keep


def _launch(best_cfg: Mapping[str, Any], model: Any, sc: Mapping[str, Any]) -> dict[str, Any]:
    """vLLM and SGLang command lines for the best configuration's pools (a starting point).

    An instance of TP t x PP p x DP d (kvwire's ``parallel``) runs t x p x d GPUs. vLLM counts the same way
    (``--tensor-parallel-size t --data-parallel-size d``; ``--enable-expert-parallel`` spreads the experts over
    all t x d ranks, kvwire's EP = t x d). SGLang's ``--tp-size`` is the whole instance's TP group, with DP
    attention inside it (``--tp-size t*d --dp-size d --enable-dp-attention``; SGLang's DP attention guide,
    docs.sglang.io/docs/advanced_features/dp_dpa_smg_guide). Disaggregated pools: vLLM's NixlConnector with
    ``kv_role`` ``kv_both`` on both sides (vLLM's NixlConnector usage guide), SGLang's ``--disaggregation-mode``
    with the NIXL transfer backend.

    >>> cfg = {"mode": "disaggregated", "prefill": (2, 2, 1, 8, 4), "decode": (1, 8, 1, 1, 1),
    ...        "max_decode_batch": 256, "max_num_batched_tokens": 8192, "kv_format": "fp8-e4m3"}
    >>> out = _launch(cfg, "deepseek-v3", {})
    >>> print(out["prefill"]["sglang"])  # doctest: +NORMALIZE_WHITESPACE
    python -m sglang.launch_server --model-path deepseek-ai/DeepSeek-V3 --tp-size 8 --pp-size 1 --dp-size 4
    --enable-dp-attention --ep-size 8 --max-running-requests 256 --chunked-prefill-size -1
    --disaggregation-mode prefill --disaggregation-transfer-backend nixl
    >>> print(out["decode"]["vllm"])  # doctest: +NORMALIZE_WHITESPACE
    vllm serve deepseek-ai/DeepSeek-V3 --tensor-parallel-size 8 --pipeline-parallel-size 1 --data-parallel-size 1
    --max-num-seqs 256 --max-num-batched-tokens 8192 --kv-cache-dtype fp8
    --kv-transfer-config '{"kv_connector":"NixlConnector","kv_role":"kv_both"}'
    """
    hf = _hf_id(model)
    chunked = sc.get("scheduler", {}).get("policy", "whole") == "chunked"
    budget = best_cfg["max_num_batched_tokens"] if chunked else _current(sc, "scheduler.max_prefill_tokens")
    kvf = best_cfg["kv_format"]
    out: dict[str, Any] = {"note": "a starting point: check the flags against your engine version"}
    pools = ["colocated"] if best_cfg["mode"] == "colocated" else ["prefill", "decode"]
    for pool in pools:
        n, tp, pp, ep, dp = best_cfg[pool]
        vllm = [
            f"vllm serve {hf}",
            f"--tensor-parallel-size {tp}",
            f"--pipeline-parallel-size {pp}",
            f"--data-parallel-size {dp}",
        ]
        if ep > 1:
            vllm.append("--enable-expert-parallel")
        vllm += [f"--max-num-seqs {best_cfg['max_decode_batch']}", f"--max-num-batched-tokens {budget}"]
        if chunked:
            vllm.append("--enable-chunked-prefill")
        sglang = [
            f"python -m sglang.launch_server --model-path {hf}",
            f"--tp-size {tp * dp}",
            f"--pp-size {pp}",
            f"--dp-size {dp}",
            *(["--enable-dp-attention"] if dp > 1 else []),
            f"--ep-size {ep}",
            f"--max-running-requests {best_cfg['max_decode_batch']}",
            f"--chunked-prefill-size {budget if chunked else -1}",
        ]
        if isinstance(kvf, str) and kvf.startswith("fp8") and pool != "prefill":
            vllm.append("--kv-cache-dtype fp8")
            sglang.append("--kv-cache-dtype fp8_e4m3")
        if pool != "colocated":
            vllm.append('--kv-transfer-config \'{"kv_connector":"NixlConnector","kv_role":"kv_both"}\'')
            sglang.append(f"--disaggregation-mode {pool} --disaggregation-transfer-backend nixl")
        out[pool] = {"instances": n, "vllm": " ".join(vllm), "sglang": " ".join(sglang)}
    return out


@dataclass
class PlanResult:
    """What :func:`plan` found.

    Attributes:
        table: every configuration considered, one row each: its fields (``mode``, ``gpus``, per pool
            ``<pool>_device``/``_instances``/``_tp``/``_pp``/``_ep``/``_dp``, ``max_decode_batch``,
            ``max_num_batched_tokens``, ``kv_format``, ``compression``, ``link``), ``status`` (``verified``: full-length
            runs; ``screened``: short runs only; ``pruned``: its ceiling could not beat the best verified; ``refused``:
            kvwire refused the scenario, ``note`` says why), ``ceiling_req_per_s``, ``bound_tokens_per_s_per_gpu`` (the
            ceiling's output tokens/s per GPU), ``capacity_req_per_s`` (the highest SLO-meeting arrival rate, capped at
            the ceiling), ``output_tokens_per_s_per_gpu`` (capacity x mean output tokens / GPUs),
            ``output_tokens_per_s_per_user`` (1 / mean TPOT at capacity), ``ttft_p50_s``..``tpot_p99_s``, ``binding``,
            ``link_utilisation``, ``j_per_output_token``, ``simulations``.
        frontier: the verified rows no other verified row beats on both throughput per GPU and tokens/s per
            user, throughput per GPU descending.
        frontier_scenarios: each frontier row's complete scenario at its capacity (in the frontier's order), as
            ``best["scenario"]`` is the best's.
        best: the winner: ``scenario`` (complete; :func:`kvwire.simulate` runs it as is, at ``rate_per_s``),
            ``rate_per_s``, ``gpus`` and the figures; ``None`` when no configuration meets the SLO.
        launch: vLLM and SGLang flags for the best's pools (a starting point).
        varied: the configuration fields the space gave more than one value (named in the report's rows).
        model: the model's preset name (``"custom model"`` for a model table).
        objective, timing: the objective and the timing source used (``cost.timing.source``).
        considered, refused, pruned, simulations: configurations enumerated, refused by kvwire, pruned by the
            ceilings, and simulations run.
    """

    model: str
    objective: str
    varied: tuple[str, ...]
    timing: str
    gpus: dict[str, int]
    considered: int
    refused: int
    pruned: int
    simulations: int
    best: dict[str, Any] | None
    launch: dict[str, Any] | None
    table: pl.DataFrame = dataclass_field(repr=False)
    frontier: pl.DataFrame = dataclass_field(repr=False)
    frontier_scenarios: list[dict[str, Any]] = dataclass_field(default_factory=list, repr=False)

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable (no NaN), with the table and frontier as lists of rows.

        >>> import json, kvwire
        >>> p = kvwire.plan("llama3-8b", {"h100": 1}, workload={"requests": 100}, space={"tp": [1]})
        >>> json.loads(json.dumps(p.to_dict()))["considered"]
        1
        """
        return _clean_dict(
            {
                "model": self.model,
                "objective": self.objective,
                "timing": self.timing,
                "gpus": self.gpus,
                "considered": self.considered,
                "refused": self.refused,
                "pruned": self.pruned,
                "simulations": self.simulations,
                "best": self.best,
                "launch": self.launch,
                "table": self.table.to_dicts(),
                "frontier": self.frontier.to_dicts(),
                "frontier_scenarios": self.frontier_scenarios,
            }
        )

    def report(self) -> str:
        """Readable text: the search, the frontier, the best and its launch settings.

        >>> import kvwire
        >>> p = kvwire.plan("llama3-8b", {"h100": 1}, workload={"requests": 100}, space={"tp": [1]})
        >>> p.report().splitlines()[0]
        'plan: llama3-8b on 1 x h100, objective throughput_per_gpu, timing roofline'
        """
        lines = [
            f"plan: {self.model} on {_budget_text(self.gpus)}, objective {self.objective}, timing {self.timing}",
            f"configurations: {self.considered} considered, {self.refused} refused by kvwire, {self.pruned} pruned "
            f"by the ceilings, {self.considered - self.refused - self.pruned} evaluated; {self.simulations} "
            "simulations",
        ]
        if self.frontier.height:
            width = max(34, *(len(_describe(r, self.varied)) for r in self.frontier.iter_rows(named=True)))
            lines.append("frontier (verified; throughput per GPU vs tokens/s per user):")
            lines.append(
                f"  {'configuration':<{width}} {'GPUs':>4} {'req/s':>8} {'tok/s/GPU':>10} {'tok/s/user':>10} "
                f"{'TTFT p99 s':>10} {'TPOT p99 ms':>11}  binding"
            )
            for r in self.frontier.iter_rows(named=True):
                lines.append(
                    f"  {_describe(r, self.varied):<{width}} {r['gpus']:>4} {r['capacity_req_per_s']:>8.2f} "
                    f"{r['output_tokens_per_s_per_gpu']:>10.1f} {r['output_tokens_per_s_per_user']:>10.1f} "
                    f"{r['ttft_p99_s']:>10.3f} {r['tpot_p99_s'] * 1e3:>11.1f}  {r['binding']}"
                )
        if self.best is None:
            lines.append("best: no configuration meets the SLO")
            return "\n".join(lines)
        b = self.best
        lines.append(
            f"best: {b['configuration']} on {b['gpus']} GPUs at {b['rate_per_s']:.3f} req/s: "
            f"{b['output_tokens_per_s_per_gpu']:.1f} output tokens/s per GPU, "
            f"{b['output_tokens_per_s_per_user']:.1f} per user, {b['j_per_output_token']:.3f} J/token"
        )
        if self.launch:
            lines.append(f"launch settings ({self.launch['note']}):")
            for pool in ("colocated", "prefill", "decode"):
                if pool in self.launch:
                    entry = self.launch[pool]
                    lines.append(f"  {pool} x {entry['instances']}:")
                    lines.append(f"    {entry['vllm']}")
                    lines.append(f"    {entry['sglang']}")
        return "\n".join(lines)


#: The fields a plan may vary besides each pool's layout, and their short names in a configuration's words
#: (``device``: each pool's device kind, named after its layout, when the budget has several).
VARIED_SHORT = {"device": "device", "max_decode_batch": "batch", "max_num_batched_tokens": "tokens", "kv_format": "kv",
                "compression": "hand-off", "link": "link"}  # fmt: skip


def _describe(row: Mapping[str, Any], varied: tuple[str, ...] = ()) -> str:
    """A configuration in a few words: each pool's instances and layout, then the fields the space varied."""

    def lay(pool: str) -> str:
        s = f"{row[f'{pool}_instances']}x tp{row[f'{pool}_tp']}"
        for k in ("pp", "ep", "dp"):
            if row[f"{pool}_{k}"] and row[f"{pool}_{k}"] > 1:
                s += f" {k}{row[f'{pool}_{k}']}"
        if "device" in varied and row.get(f"{pool}_device"):
            s += f" {row[f'{pool}_device']}"
        return s

    colocated = row["mode"] == "colocated"
    text = f"colocated {lay('colocated')}" if colocated else f"P {lay('prefill')} / D {lay('decode')}"
    for key in varied:
        if key != "device" and row.get(key) is not None:
            text += f", {VARIED_SHORT[key]} {row[key]}"
    return text


__all__ = ["VARIED_SHORT", "PlanResult"]
