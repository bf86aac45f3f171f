#!/usr/bin/env python3
"""Measure prefill and decode step times of a dense Llama-style decoder with PyTorch, and write them as kvwire's
calibration CSV (issue 25, item 5).

What is timed
-------------
A Llama-style decoder built from a Hugging Face ``config.json``'s dimensions (``num_hidden_layers``,
``hidden_size``, ``num_attention_heads``, ``num_key_value_heads``, ``intermediate_size``, ``vocab_size``;
``head_dim``, ``rope_theta``, ``rms_norm_eps`` and ``tie_word_embeddings`` optional), written here in plain
PyTorch: token embedding, then per layer RMSNorm, one fused QKV projection, rotary position embedding, grouped-
query attention through ``torch.nn.functional.scaled_dot_product_attention`` with a KV cache, the output
projection, RMSNorm and a SwiGLU MLP (fused gate and up projections); a final RMSNorm and the LM head. The
weights are random (``normal_`` from a fixed seed, in bf16 by default): a step's time does not depend on the
weight values, only on the shapes, so no checkpoint is needed. Tensor parallelism is 1 (one device).

* **prefill**: ``batch`` sequences of ``prompt_tokens`` new tokens each and no cached prefix; causal attention;
  the K/V of the prompt are written into a KV cache; the LM head runs on the last position only.
* **decode**: one new token for each of ``batch`` sequences whose KV cache holds ``context_tokens`` tokens
  already (preallocated with room for the new one, filled with random values); the new token's K/V are written
  into the cache at position ``context_tokens`` and its query attends to all ``context_tokens + 1`` positions.

The default architecture is Llama-3.1-8B's (kvwire preset ``llama3.1-8b``): 32 layers, hidden size 4096, 32
attention heads, 8 KV heads, head dim 128, intermediate size 14336, vocabulary 128256, from the Hugging Face
repository meta-llama/Llama-3.1-8B, ``config.json`` (also in ``tests/data/hf/llama3.1-8b/config.json``). Its
``rope_scaling`` (the "llama3" frequency scaling) changes rotary values, not shapes or work, and is not applied.

Timing: ``--warmup`` untimed runs of each shape, then ``--repeats`` timed runs; the reported time is their
median. On CUDA each run is timed with ``torch.cuda.Event(enable_timing=True)`` pairs around it and waited for
(``Event.synchronize``); by default each shape is captured once into a CUDA graph after the warm-up and the graph
is replayed (``--no-cuda-graph`` times the eager PyTorch calls instead, which adds the Python launch overhead of
a few hundred kernels per step). On the CPU each run is timed with ``time.perf_counter_ns``. A shape whose KV
cache and activations are estimated not to fit (in the device's free memory after the weights, or in
``--max-step-gib``), or that raises PyTorch's out-of-memory error, is skipped and recorded as a comment line.

The calibration CSV (the contract with kvwire's reader)
------------------------------------------------------
Comment lines first, each ``# key: value`` (the reader skips every line that starts with ``#``): ``format``,
``script``, ``script_version``, ``date`` (UTC, ISO 8601), ``device``, ``device_memory_gib``, ``driver``, ``cuda``,
``torch``, ``python``, ``host``, ``model``, ``config``, ``dtype``, ``tp``, ``timer``, ``cuda_graph``, ``repeats``,
``warmup``, ``statistic``, ``seed``, ``attention``, then one ``# skipped: ...`` line per shape left out, and
``run_s`` (the whole run's wall time). Then the header and one row per measured step::

    phase,model,tp,batch,prompt_tokens,context_tokens,time_s

``phase``: ``prefill`` or ``decode``. ``model``: a kvwire model preset name (``llama3.1-8b``) or the config's
name. ``tp``: the tensor-parallel degree (1). ``batch``: sequences in the step. ``prompt_tokens``: for prefill the
new prompt tokens per sequence, for decode 0. ``context_tokens``: for prefill the cached prefix tokens per
sequence (0 here), for decode the tokens of KV context per sequence at that step (the new token attends to them
and to itself). ``time_s``: the step's wall time in seconds, the median of the timed repeats.

Run (one command on an H100 or H200; estimated at about a minute, at most three, and not yet timed there)::

    python benches/measured/measure_steps.py -o benches/measured/llama3.1-8b-tp1-h200.csv

and on a CPU, a smoke run of the tiny built-in config::

    python benches/measured/measure_steps.py --tiny --device cpu --threads 1 --prompt-tokens 16,1024 \\
        --decode-batch 1,4 --decode-context 16,256 --repeats 5 --warmup 2
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import platform
import re
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

SCRIPT_VERSION = "1"
#: The calibration CSV's columns, in order.
HEADER = ("phase", "model", "tp", "batch", "prompt_tokens", "context_tokens", "time_s")
PHASES = ("prefill", "decode")
GIB = 1024**3

#: Llama-3.1-8B's dimensions, from the Hugging Face repository meta-llama/Llama-3.1-8B, config.json
#: (the same file is in tests/data/hf/llama3.1-8b/config.json).
LLAMA_3_1_8B: dict[str, Any] = {
    "num_hidden_layers": 32,
    "hidden_size": 4096,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "head_dim": 128,
    "intermediate_size": 14336,
    "vocab_size": 128256,
    "rope_theta": 500000.0,
    "rms_norm_eps": 1e-5,
    "tie_word_embeddings": False,
}
DEFAULT_MODEL_NAME = "llama3.1-8b"

#: A tiny config for CPU tests: small enough to run in seconds on two cores, large enough that a 1024-token
#: prefill does clearly more work than a 16-token one.
TINY: dict[str, Any] = {
    "num_hidden_layers": 2,
    "hidden_size": 256,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 64,
    "intermediate_size": 768,
    "vocab_size": 2048,
    "rope_theta": 10000.0,
    "rms_norm_eps": 1e-5,
    "tie_word_embeddings": False,
}
TINY_MODEL_NAME = "tiny-llama"

DTYPES = ("bfloat16", "float16", "float32")
DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "float32": 4}

#: Config keys that mean an architecture this script does not build (it times dense GQA decoders only).
UNSUPPORTED_KEYS = {
    "num_local_experts": "a mixture-of-experts config",
    "n_routed_experts": "a mixture-of-experts config",
    "num_experts": "a mixture-of-experts config",
    "kv_lora_rank": "a multi-head latent attention config",
}


class ConfigError(ValueError):
    """A model config this script cannot build (a missing or bad key, or an unsupported architecture)."""


@dataclass(frozen=True)
class ModelConfig:
    """A dense Llama-style decoder's dimensions (Hugging Face ``config.json`` names in ``from_hf``)."""

    layers: int
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int
    vocab: int
    rope_theta: float = 10000.0
    rms_norm_eps: float = 1e-5
    tie_word_embeddings: bool = False

    @classmethod
    def from_hf(cls, cfg: Mapping[str, Any]) -> ModelConfig:
        """Read a Hugging Face ``config.json`` dict; raise ``ConfigError`` naming the key that is wrong."""
        for key, what in UNSUPPORTED_KEYS.items():
            if cfg.get(key):
                raise ConfigError(f"{what} ({key} = {cfg[key]!r}); this script times dense decoders only")

        def whole(key: str, default: int | None = None) -> int:
            if key not in cfg or cfg[key] is None:
                if default is None:
                    raise ConfigError(f"missing {key}")
                return default
            value = cfg[key]
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ConfigError(f"{key} must be a positive whole number, got {value!r}")
            return value

        def number(key: str, default: float) -> float:
            value = cfg.get(key, default)
            if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
                raise ConfigError(f"{key} must be a positive number, got {value!r}")
            return float(value)

        heads = whole("num_attention_heads")
        hidden = whole("hidden_size")
        kv_heads = whole("num_key_value_heads", heads)
        if heads % kv_heads:
            raise ConfigError(f"num_attention_heads ({heads}) is not a multiple of num_key_value_heads ({kv_heads})")
        if "head_dim" not in cfg and hidden % heads:
            raise ConfigError(f"hidden_size ({hidden}) is not a multiple of num_attention_heads ({heads})")
        head_dim = whole("head_dim", hidden // heads)
        if head_dim % 2:
            raise ConfigError(f"head_dim must be even for rotary embeddings, got {head_dim}")
        return cls(
            layers=whole("num_hidden_layers"),
            hidden=hidden,
            heads=heads,
            kv_heads=kv_heads,
            head_dim=head_dim,
            intermediate=whole("intermediate_size"),
            vocab=whole("vocab_size"),
            rope_theta=number("rope_theta", 10000.0),
            rms_norm_eps=number("rms_norm_eps", 1e-5),
            tie_word_embeddings=bool(cfg.get("tie_word_embeddings", False)),
        )

    @property
    def qkv_width(self) -> int:
        return (self.heads + 2 * self.kv_heads) * self.head_dim

    def parameters(self) -> int:
        """Weights in the model (embedding and LM head counted once each, once in all when tied)."""
        per_layer = (
            self.hidden * self.qkv_width  # fused QKV
            + self.heads * self.head_dim * self.hidden  # output projection
            + 3 * self.hidden * self.intermediate  # gate, up, down
            + 2 * self.hidden  # the two RMSNorm weights
        )
        heads = 1 if self.tie_word_embeddings else 2
        return self.layers * per_layer + heads * self.vocab * self.hidden + self.hidden

    def kv_bytes_per_token(self, dtype_bytes: int) -> int:
        """Bytes of K and V per token over all layers."""
        return self.layers * 2 * self.kv_heads * self.head_dim * dtype_bytes

    def describe(self) -> str:
        return (
            f"layers={self.layers} hidden={self.hidden} heads={self.heads} kv_heads={self.kv_heads} "
            f"head_dim={self.head_dim} intermediate={self.intermediate} vocab={self.vocab} "
            f"tied_embeddings={str(self.tie_word_embeddings).lower()} parameters={self.parameters()}"
        )


@dataclass(frozen=True)
class Row:
    """One measured step: a row of the calibration CSV."""

    phase: str
    model: str
    tp: int
    batch: int
    prompt_tokens: int
    context_tokens: int
    time_s: float


@dataclass(frozen=True)
class Shape:
    """A step to time: ``prompt_tokens`` per sequence for prefill, ``context_tokens`` per sequence for decode."""

    phase: str
    batch: int
    prompt_tokens: int
    context_tokens: int

    def label(self) -> str:
        if self.phase == "prefill":
            return f"prefill batch={self.batch} prompt_tokens={self.prompt_tokens}"
        return f"decode batch={self.batch} context_tokens={self.context_tokens}"


# --------------------------------------------------------------------------------------------------
# Pure helpers: arguments, the grid, the CSV


def parse_positive_int_list(text: str) -> list[int]:
    """``"128,512"`` -> ``[128, 512]``; an ``argparse`` type, so a bad list is an error naming its flag."""
    items = [item.strip() for item in text.split(",")]
    if not text.strip() or any(not item for item in items):
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a comma-separated list of positive whole numbers (such as 128,512): it has an empty item"
        )
    values: list[int] = []
    for item in items:
        if not re.fullmatch(r"[+]?[0-9]+", item):
            raise argparse.ArgumentTypeError(
                f"{text!r}: {item!r} is not a whole number (expected a comma-separated list such as 128,512)"
            )
        value = int(item)
        if value <= 0:
            raise argparse.ArgumentTypeError(f"{text!r}: {value} is not positive (every item must be at least 1)")
        if value in values:
            raise argparse.ArgumentTypeError(f"{text!r} lists {value} twice")
        values.append(value)
    return values


def positive_int(text: str) -> int:
    """A positive whole number (an ``argparse`` type)."""
    if not re.fullmatch(r"\s*[+]?[0-9]+\s*", text) or int(text) <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive whole number")
    return int(text)


def positive_float(text: str) -> float:
    """A positive, finite number (an ``argparse`` type)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive, finite number")
    return value


def grid(
    prompt_tokens: Sequence[int],
    prefill_batch: Sequence[int],
    decode_batch: Sequence[int],
    decode_context: Sequence[int],
) -> list[Shape]:
    """Every prefill shape (batch x prompt tokens), then every decode shape (batch x context), in flag order."""
    shapes = [Shape("prefill", b, p, 0) for b in prefill_batch for p in prompt_tokens]
    shapes += [Shape("decode", b, 0, c) for b in decode_batch for c in decode_context]
    return shapes


def _comment_text(text: str) -> str:
    return " ".join(str(text).split())  # one line, whatever the value held


def write_calibration_csv(out: IO[str], rows: Sequence[Row], comments: Sequence[tuple[str, str]]) -> None:
    """Write kvwire's calibration CSV: ``# key: value`` comment lines, the header, one line per row.

    Raises ``ValueError`` for a row that breaks the contract (an unknown phase, a non-positive count or time, a
    decode row with prompt tokens) or a comment key that is not a plain word, so no bad file is written.
    """
    for key, _ in comments:
        if not re.fullmatch(r"[a-z][a-z0-9_]*", key):
            raise ValueError(f"comment key {key!r} must be a lower-case word (letters, digits, _)")
    for row in rows:
        if row.phase not in PHASES:
            raise ValueError(f"{row}: phase must be one of {', '.join(PHASES)}")
        if not row.model or row.tp < 1 or row.batch < 1 or row.prompt_tokens < 0 or row.context_tokens < 0:
            raise ValueError(f"{row}: model must be named, tp and batch at least 1, token counts not negative")
        if row.phase == "prefill" and row.prompt_tokens < 1:
            raise ValueError(f"{row}: a prefill row needs prompt_tokens >= 1")
        if row.phase == "decode" and row.prompt_tokens != 0:
            raise ValueError(f"{row}: a decode row has prompt_tokens = 0")
        if not (math.isfinite(row.time_s) and row.time_s > 0):
            raise ValueError(f"{row}: time_s must be positive and finite")
    for key, value in comments:
        out.write(f"# {key}: {_comment_text(value)}\n")
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(HEADER)
    for row in rows:
        writer.writerow(
            [row.phase, row.model, row.tp, row.batch, row.prompt_tokens, row.context_tokens, f"{row.time_s:.6g}"]
        )


def load_config(path: Path) -> tuple[ModelConfig, str]:
    """A ``config.json`` file's config and its name (``_name_or_path``'s last part, else the file's folder)."""
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except OSError as err:
        raise ConfigError(f"cannot read it ({err.strerror or err})") from None
    except json.JSONDecodeError as err:
        raise ConfigError(f"not valid JSON ({err})") from None
    if not isinstance(raw, dict):
        raise ConfigError("not a JSON object")
    name = str(raw.get("_name_or_path") or raw.get("name") or "").rstrip("/").rpartition("/")[2]
    if not name:
        name = path.stem if path.stem != "config" else path.resolve().parent.name
    return ModelConfig.from_hf(raw), name


def estimate_step_bytes(cfg: ModelConfig, shape: Shape, dtype_bytes: int) -> int:
    """Bytes a step needs beyond the weights, roughly: its KV cache plus the largest activations of one layer."""
    b = shape.batch
    if shape.phase == "prefill":
        tokens, kv_tokens = b * shape.prompt_tokens, shape.prompt_tokens
    else:
        tokens, kv_tokens = b, shape.context_tokens + 1
    kv = b * kv_tokens * cfg.kv_bytes_per_token(dtype_bytes)
    per_token = 3 * cfg.intermediate + cfg.qkv_width + 4 * cfg.hidden  # gate/up, SiLU product, QKV, residuals
    logits = b * cfg.vocab * (dtype_bytes + 4)
    return kv + 2 * tokens * per_token * dtype_bytes + logits


# --------------------------------------------------------------------------------------------------
# The model (PyTorch; imported only when a run starts, so the helpers above need no torch)


def _torch() -> Any:
    import torch

    return torch


@dataclass
class Layer:
    input_norm: torch.Tensor
    qkv: torch.Tensor  # ((heads + 2 kv_heads) * head_dim, hidden)
    out: torch.Tensor  # (hidden, heads * head_dim)
    post_norm: torch.Tensor
    gate_up: torch.Tensor  # (2 intermediate, hidden)
    down: torch.Tensor  # (hidden, intermediate)


@dataclass
class Model:
    cfg: ModelConfig
    embed: torch.Tensor  # (vocab, hidden)
    layers: list[Layer]
    norm: torch.Tensor
    lm_head: torch.Tensor  # (vocab, hidden)
    cos: torch.Tensor  # (positions, head_dim)
    sin: torch.Tensor
    enable_gqa: bool


def build_model(cfg: ModelConfig, *, device: str, dtype: str, seed: int, positions: int) -> Model:
    """Random weights for ``cfg`` on ``device`` (each matrix ~ N(0, 1/fan_in), so activations stay near 1)."""
    torch = _torch()
    tdtype = getattr(torch, dtype)
    gen = torch.Generator(device=device)
    gen.manual_seed(seed)

    def matrix(rows: int, cols: int) -> torch.Tensor:
        return torch.empty(rows, cols, dtype=tdtype, device=device).normal_(0.0, cols**-0.5, generator=gen)

    def ones(n: int) -> torch.Tensor:
        return torch.ones(n, dtype=tdtype, device=device)

    layers = [
        Layer(
            input_norm=ones(cfg.hidden),
            qkv=matrix(cfg.qkv_width, cfg.hidden),
            out=matrix(cfg.hidden, cfg.heads * cfg.head_dim),
            post_norm=ones(cfg.hidden),
            gate_up=matrix(2 * cfg.intermediate, cfg.hidden),
            down=matrix(cfg.hidden, cfg.intermediate),
        )
        for _ in range(cfg.layers)
    ]
    embed = torch.empty(cfg.vocab, cfg.hidden, dtype=tdtype, device=device).normal_(0.0, 1.0, generator=gen)
    lm_head = embed if cfg.tie_word_embeddings else matrix(cfg.vocab, cfg.hidden)
    inv_freq = 1.0 / (
        cfg.rope_theta ** (torch.arange(0, cfg.head_dim, 2, dtype=torch.float32, device=device) / cfg.head_dim)
    )
    angles = torch.outer(torch.arange(positions, dtype=torch.float32, device=device), inv_freq)
    angles = torch.cat([angles, angles], dim=-1)
    return Model(
        cfg=cfg,
        embed=embed,
        layers=layers,
        norm=ones(cfg.hidden),
        lm_head=lm_head,
        cos=angles.cos().to(tdtype),
        sin=angles.sin().to(tdtype),
        enable_gqa=_sdpa_has_enable_gqa(cfg, device, tdtype),
    )


def attention_kernels(device: str) -> AbstractContextManager[Any]:
    """On CUDA, let ``scaled_dot_product_attention`` use only its fused kernels (flash, cuDNN, memory-efficient):
    a shape none of them takes fails instead of timing the unfused math fallback. A no-op on the CPU."""
    if device != "cuda":
        return nullcontext()
    from torch.nn.attention import SDPBackend, sdpa_kernel

    names = ("FLASH_ATTENTION", "CUDNN_ATTENTION", "EFFICIENT_ATTENTION")
    return sdpa_kernel([getattr(SDPBackend, n) for n in names if hasattr(SDPBackend, n)])


def _sdpa_has_enable_gqa(cfg: ModelConfig, device: str, dtype: Any) -> bool:
    """Whether causal attention with ``enable_gqa`` (torch >= 2.5) runs for this model's heads (on CUDA, in a
    fused kernel); if not, prefill repeats each K/V head for its query heads instead."""
    torch = _torch()
    q = torch.zeros(1, cfg.heads, 16, cfg.head_dim, dtype=dtype, device=device)
    kv = torch.zeros(1, cfg.kv_heads, 16, cfg.head_dim, dtype=dtype, device=device)
    try:
        with attention_kernels(device):
            torch.nn.functional.scaled_dot_product_attention(q, kv, kv, is_causal=True, enable_gqa=True)
    except (TypeError, RuntimeError):
        return False
    return True


def _rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    xf = x.float()
    return (xf * (xf.pow(2).mean(-1, keepdim=True) + eps).rsqrt()).to(x.dtype) * weight


def _rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    rotated = _torch().cat([-x[..., half:], x[..., :half]], dim=-1)
    return x * cos + rotated * sin


def _mlp(model: Model, layer: Layer, x: torch.Tensor) -> torch.Tensor:
    F = _torch().nn.functional
    h = _rms_norm(x, layer.post_norm, model.cfg.rms_norm_eps)
    gate, up = F.linear(h, layer.gate_up).chunk(2, dim=-1)
    return x + F.linear(F.silu(gate) * up, layer.down)


def _split_qkv(model: Model, layer: Layer, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Normed, projected and split: q ``(B, heads, T, D)``, k and v ``(B, kv_heads, T, D)``."""
    cfg = model.cfg
    b, t, _ = x.shape
    h = _rms_norm(x, layer.input_norm, cfg.rms_norm_eps)
    kv_width = cfg.kv_heads * cfg.head_dim
    q, k, v = _torch().nn.functional.linear(h, layer.qkv).split([cfg.heads * cfg.head_dim, kv_width, kv_width], -1)
    q = q.view(b, t, cfg.heads, cfg.head_dim).transpose(1, 2)
    k = k.view(b, t, cfg.kv_heads, cfg.head_dim).transpose(1, 2)
    v = v.view(b, t, cfg.kv_heads, cfg.head_dim).transpose(1, 2)
    return q, k, v


def prefill_forward(model: Model, tokens: torch.Tensor, caches: Sequence[tuple[torch.Tensor, torch.Tensor]]) -> Any:
    """Logits of the last position of each sequence; ``tokens`` is ``(B, T)``; K/V written into ``caches``."""
    torch = _torch()
    F = torch.nn.functional
    cfg = model.cfg
    b, t = tokens.shape
    cos, sin = model.cos[:t], model.sin[:t]
    x = F.embedding(tokens, model.embed)
    for layer, (k_cache, v_cache) in zip(model.layers, caches, strict=True):
        q, k, v = _split_qkv(model, layer, x)
        q, k = _rope(q, cos, sin), _rope(k, cos, sin)
        k_cache[:, :, :t].copy_(k)
        v_cache[:, :, :t].copy_(v)
        if model.enable_gqa:
            attn = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        else:
            group = cfg.heads // cfg.kv_heads
            attn = F.scaled_dot_product_attention(
                q, k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1), is_causal=True
            )
        x = x + F.linear(attn.transpose(1, 2).reshape(b, t, cfg.heads * cfg.head_dim), layer.out)
        x = _mlp(model, layer, x)
    last = _rms_norm(x[:, -1], model.norm, cfg.rms_norm_eps)
    return F.linear(last, model.lm_head)


def decode_forward(
    model: Model, tokens: torch.Tensor, caches: Sequence[tuple[torch.Tensor, torch.Tensor]], position: int
) -> Any:
    """Logits of one new token per sequence; ``tokens`` is ``(B, 1)``; each cache holds ``position`` tokens.

    The new K/V go to slot ``position``; the query heads of a KV head are laid along the query-length axis
    (``(B, kv_heads, group, D)``), so attention reads each KV head once, with no copy of the cache.
    """
    F = _torch().nn.functional
    cfg = model.cfg
    b = tokens.shape[0]
    group = cfg.heads // cfg.kv_heads
    cos, sin = model.cos[position : position + 1], model.sin[position : position + 1]
    x = F.embedding(tokens, model.embed)
    for layer, (k_cache, v_cache) in zip(model.layers, caches, strict=True):
        q, k, v = _split_qkv(model, layer, x)
        q, k = _rope(q, cos, sin), _rope(k, cos, sin)
        k_cache[:, :, position].copy_(k[:, :, 0])
        v_cache[:, :, position].copy_(v[:, :, 0])
        keys, values = k_cache[:, :, : position + 1], v_cache[:, :, : position + 1]
        attn = F.scaled_dot_product_attention(q.reshape(b, cfg.kv_heads, group, cfg.head_dim), keys, values)
        x = x + F.linear(attn.reshape(b, 1, cfg.heads * cfg.head_dim), layer.out)
        x = _mlp(model, layer, x)
    return F.linear(_rms_norm(x[:, -1], model.norm, cfg.rms_norm_eps), model.lm_head)


def make_step(model: Model, shape: Shape, seed: int) -> Callable[[], Any]:
    """The step of ``shape`` as a no-argument function, its inputs and KV cache allocated (random) up front."""
    torch = _torch()
    cfg = model.cfg
    device, dtype = model.embed.device, model.embed.dtype
    gen = torch.Generator(device=device)
    gen.manual_seed(seed)
    slots = shape.prompt_tokens if shape.phase == "prefill" else shape.context_tokens + 1
    caches = []
    for _ in range(cfg.layers):
        pair = tuple(
            torch.empty(shape.batch, cfg.kv_heads, slots, cfg.head_dim, dtype=dtype, device=device).normal_(
                generator=gen
            )
            for _ in range(2)
        )
        caches.append(pair)
    length = shape.prompt_tokens if shape.phase == "prefill" else 1
    tokens = torch.randint(0, cfg.vocab, (shape.batch, length), device=device, generator=gen)

    if shape.phase == "prefill":

        def step() -> Any:
            with torch.inference_mode(), attention_kernels(device.type):
                return prefill_forward(model, tokens, caches)

    else:

        def step() -> Any:
            with torch.inference_mode(), attention_kernels(device.type):
                return decode_forward(model, tokens, caches, shape.context_tokens)

    return step


@contextmanager
def _side_stream(torch: Any, device: str) -> Iterator[None]:
    """Run on a side CUDA stream (as warm-up before graph capture should); a no-op on the CPU."""
    if device != "cuda":
        yield
        return
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        yield
    torch.cuda.current_stream().wait_stream(stream)


def time_step(
    step: Callable[[], Any], *, device: str, warmup: int, repeats: int, cuda_graph: bool
) -> tuple[list[float], str]:
    """Seconds of each of ``repeats`` timed runs after ``warmup`` untimed ones, and how they ran.

    CUDA: CUDA events around each run (a graph replay unless ``cuda_graph`` is off or capture fails);
    CPU: ``time.perf_counter_ns`` around each run. The mode is ``cuda-graph``, ``eager`` or ``eager (...)``.
    """
    torch = _torch()
    with _side_stream(torch, device):
        for _ in range(warmup):
            step()
    if device != "cuda":
        times = []
        for _ in range(repeats):
            start = time.perf_counter_ns()
            step()
            times.append((time.perf_counter_ns() - start) / 1e9)
        return times, "eager"

    torch.cuda.synchronize()
    run, mode, keep = step, "eager", None
    if cuda_graph:
        graph = torch.cuda.CUDAGraph()
        try:
            with torch.cuda.graph(graph):
                keep = step()  # the graph's output buffer, alive while the graph is replayed
            run, mode = graph.replay, "cuda-graph"
        except _out_of_memory_errors(torch):
            raise
        except Exception as err:  # a capture PyTorch refuses: time the eager calls and say why
            torch.cuda.synchronize()
            mode = f"eager (CUDA graph capture failed: {type(err).__name__}: {err})"
        run()
        torch.cuda.synchronize()
    times = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        run()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1e3)
    del keep
    return times, mode


def _out_of_memory_errors(torch: Any) -> tuple[type[BaseException], ...]:
    errors: list[type[BaseException]] = []
    for owner in (torch, torch.cuda):
        err = getattr(owner, "OutOfMemoryError", None)
        if isinstance(err, type) and err not in errors:
            errors.append(err)
    return tuple(errors)


def _is_out_of_memory(torch: Any, err: BaseException) -> bool:
    if isinstance(err, _out_of_memory_errors(torch)):
        return True
    text = str(err)
    return isinstance(err, RuntimeError) and ("out of memory" in text or "can't allocate memory" in text)


def measure_shape(
    model: Model, shape: Shape, args: argparse.Namespace, *, device: str, seed: int
) -> tuple[list[float], str] | None:
    """``time_step`` of one shape, or ``None`` when PyTorch runs out of memory for it (its tensors are freed when
    this returns, the exception and its frames included)."""
    torch = _torch()
    try:
        step = make_step(model, shape, seed)
        return time_step(step, device=device, warmup=args.warmup, repeats=args.repeats, cuda_graph=args.cuda_graph)
    except Exception as err:
        if not _is_out_of_memory(torch, err):
            raise
    return None


# --------------------------------------------------------------------------------------------------
# The environment


def _cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines():
            if line.startswith("model name"):
                return line.partition(":")[2].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _nvidia_driver() -> str:
    """The NVIDIA driver's version (one per machine): ``nvidia-smi``'s, else ``/proc/driver/nvidia/version``'s."""
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=20,
            check=True,
        ).stdout.split()
        if out:
            return out[0]
    except (OSError, subprocess.SubprocessError):
        pass
    try:
        match = re.search(r"Kernel Module\s+(\S+)", Path("/proc/driver/nvidia/version").read_text(encoding="utf-8"))
        if match:
            return match.group(1)
    except OSError:
        pass
    return "unknown"


def environment(device: str) -> list[tuple[str, str]]:
    """The device, driver, CUDA, torch, Python and host, as comment lines."""
    torch = _torch()
    if device == "cuda":
        index = torch.cuda.current_device()
        props = torch.cuda.get_device_properties(index)
        name = torch.cuda.get_device_name(index)
        memory = f"{props.total_memory / GIB:.1f}"
        driver = _nvidia_driver()
        cuda = f"{torch.version.cuda} (runtime torch was built with)"
        device_line = f"{name} (compute capability {props.major}.{props.minor}, {props.multi_processor_count} SMs)"
    else:
        threads = torch.get_num_threads()
        device_line = f"cpu: {_cpu_name()} ({threads} torch thread{'s' if threads != 1 else ''})"
        memory, driver, cuda = "n/a", "n/a (cpu run)", "n/a (cpu run)"
    return [
        ("device", device_line),
        ("device_memory_gib", memory),
        ("driver", driver),
        ("cuda", cuda),
        ("torch", str(torch.__version__)),
        ("python", platform.python_version()),
        ("host", platform.platform()),
    ]


# --------------------------------------------------------------------------------------------------
# The command line


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="measure_steps.py",
        description="Time prefill and decode steps of a dense Llama-style decoder (random weights) with PyTorch "
        "and write kvwire's calibration CSV (format in this script's docstring).",
    )
    which = p.add_mutually_exclusive_group()
    which.add_argument("--config", type=Path, help="a Hugging Face config.json (default: Llama-3.1-8B's dimensions)")
    which.add_argument("--tiny", action="store_true", help="a tiny built-in config, for tests on the CPU")
    p.add_argument("--model-name", help="the CSV's model column (default: llama3.1-8b, tiny-llama or the config's)")
    lists = parse_positive_int_list
    p.add_argument(
        "--prompt-tokens",
        type=lists,
        default=[128, 512, 2048, 8192],
        metavar="LIST",
        help="prefill: new prompt tokens per sequence (default 128,512,2048,8192)",
    )
    p.add_argument(
        "--prefill-batch", type=lists, default=[1], metavar="LIST", help="prefill: sequences per step (default 1)"
    )
    p.add_argument(
        "--decode-batch",
        type=lists,
        default=[1, 8, 32, 128],
        metavar="LIST",
        help="decode: sequences per step (default 1,8,32,128)",
    )
    p.add_argument(
        "--decode-context",
        type=lists,
        default=[512, 2048, 8192],
        metavar="LIST",
        help="decode: tokens already in each sequence's KV cache (default 512,2048,8192)",
    )
    p.add_argument("--repeats", type=positive_int, default=10, help="timed runs per shape (default 10)")
    p.add_argument("--warmup", type=positive_int, default=3, help="untimed runs per shape first (default 3)")
    p.add_argument("--device", choices=["cuda", "cpu"], help="default: cuda when torch sees one, else cpu")
    p.add_argument("--dtype", choices=DTYPES, default="bfloat16", help="weights, activations and KV (bfloat16)")
    p.add_argument(
        "--threads",
        type=positive_int,
        help="CPU threads for PyTorch (torch.set_num_threads; default: PyTorch's own choice)",
    )
    p.add_argument("--seed", type=int, default=0, help="seed of the random weights and inputs (default 0)")
    p.add_argument(
        "--cuda-graph",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="on CUDA, replay each shape as a captured CUDA graph (default) or time the eager calls",
    )
    p.add_argument(
        "--max-step-gib",
        type=positive_float,
        metavar="GIB",
        help="skip shapes whose KV cache and activations are estimated above this (default: CUDA's free memory)",
    )
    p.add_argument("-o", "--output", default="-", help="the CSV file to write (default: standard output)")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.config is not None:
        try:
            cfg, config_name = load_config(args.config)
        except ConfigError as err:
            parser.error(f"--config {args.config}: {err}")
    elif args.tiny:
        cfg, config_name = ModelConfig.from_hf(TINY), TINY_MODEL_NAME
    else:
        cfg, config_name = ModelConfig.from_hf(LLAMA_3_1_8B), DEFAULT_MODEL_NAME
    model_name = args.model_name if args.model_name is not None else config_name
    if not model_name.strip():
        parser.error("--model-name: must not be empty")
    try:
        torch = _torch()
    except ImportError:
        print(
            "measure_steps.py needs PyTorch: pip install 'torch>=2.3' (or kvwire's extra: pip install '.[measure]')",
            file=sys.stderr,
        )
        return 2
    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    if device == "cuda" and not torch.cuda.is_available():
        parser.error(f"--device cuda: torch {torch.__version__} sees no CUDA device")

    began = time.perf_counter()
    date = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    shapes = grid(args.prompt_tokens, args.prefill_batch, args.decode_batch, args.decode_context)
    positions = max(max(args.prompt_tokens), max(args.decode_context) + 1)
    dtype_bytes = DTYPE_BYTES[args.dtype]
    log = sys.stderr
    print(f"building {model_name} ({cfg.describe()}) on {device} in {args.dtype}", file=log)
    model = build_model(cfg, device=device, dtype=args.dtype, seed=args.seed, positions=positions)

    rows: list[Row] = []
    notes: list[tuple[str, str]] = []
    modes: set[str] = set()
    for n, shape in enumerate(shapes):
        need = estimate_step_bytes(cfg, shape, dtype_bytes)
        budget = None if args.max_step_gib is None else args.max_step_gib * GIB
        if budget is None and device == "cuda":
            torch.cuda.empty_cache()
            budget = torch.cuda.mem_get_info()[0]
        if budget is not None and need > budget:
            why = f"needs about {need / GIB:.2f} GiB for its KV cache and activations, {budget / GIB:.2f} GiB allowed"
            notes.append(("skipped", f"{shape.label()}: {why}"))
            print(f"skip {shape.label()}: {why}", file=log)
            continue
        measured = measure_shape(model, shape, args, device=device, seed=args.seed + 1 + n)
        if device == "cuda":
            torch.cuda.empty_cache()  # the shape's KV cache and graph are gone with measure_shape's frame
        if measured is None:
            notes.append(("skipped", f"{shape.label()}: out of memory"))
            print(f"skip {shape.label()}: out of memory", file=log)
            continue
        times, mode = measured
        modes.add(mode)
        if mode.startswith("eager ("):
            notes.append(("fallback", f"{shape.label()}: {mode}"))
        median = statistics.median(times)
        rows.append(Row(shape.phase, model_name, 1, shape.batch, shape.prompt_tokens, shape.context_tokens, median))
        print(f"{shape.label()}: {median:.6g} s (median of {len(times)}, {mode})", file=log)

    if device == "cuda":
        timer = "torch.cuda.Event(enable_timing=True) around each run, Event.synchronize after it"
        graph = "on" if args.cuda_graph else "off"
        if args.cuda_graph and any(m != "cuda-graph" for m in modes):
            graph = "on, with eager fallbacks (see the fallback lines)"
    else:
        timer, graph = "time.perf_counter_ns around each run", "n/a (cpu run)"
    attention = "torch.nn.functional.scaled_dot_product_attention"
    attention += "; fused kernels only (flash, cuDNN, memory-efficient)" if device == "cuda" else ""
    attention += "; prefill causal, " + ("enable_gqa" if model.enable_gqa else "K/V repeated per query head")
    attention += "; decode: the query heads of each KV head as its query rows"
    comments: list[tuple[str, str]] = [
        ("format", "kvwire calibration CSV: measured step times; lines starting with # are comments"),
        ("script", "benches/measured/measure_steps.py"),
        ("script_version", SCRIPT_VERSION),
        ("date", date),
        *environment(device),
        ("model", model_name),
        ("config", cfg.describe()),
        ("dtype", args.dtype),
        ("tp", "1"),
        ("timer", timer),
        ("cuda_graph", graph),
        ("repeats", str(args.repeats)),
        ("warmup", str(args.warmup)),
        ("statistic", f"median of the {args.repeats} timed runs of each shape"),
        ("seed", str(args.seed)),
        ("attention", attention),
        *notes,
        ("run_s", f"{time.perf_counter() - began:.1f}"),
    ]
    if args.output == "-":
        write_calibration_csv(sys.stdout, rows, comments)
    else:
        with open(args.output, "w", encoding="utf-8", newline="") as out:
            write_calibration_csv(out, rows, comments)
        print(f"wrote {len(rows)} rows to {args.output}", file=log)
    return 0


if __name__ == "__main__":
    sys.exit(main())
