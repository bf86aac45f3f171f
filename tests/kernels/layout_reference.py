"""An independent numpy + ml_dtypes reference of the engine KV-cache layouts of ``spec/quant.md`` §3.

Written from the spec's shapes (§3.1 fp8 and the ``fp8_ds_mla`` record, §3.2 vLLM paged layouts, §3.3 SGLang,
TensorRT-LLM, Dynamo, LMCache), never from kvwire's catalog or kernels. Every engine buffer is built from the
neutral request array ``(layers, 2, tokens, heads, head_dim)`` in two steps:

1. :func:`paged` scatters the tokens into ``(layers, 2, blocks, block_size, heads, vec)`` through a block table
   (token ``t`` goes to block ``table[t // block_size]``, slot ``t % block_size``; unwritten slots stay zero);
2. :func:`engine` permutes and merges those axes into the engine's shape with ``transpose``/``reshape``.

Engines that keep one tensor per layer (vLLM, SGLang) are stacked on a leading layer axis. ``vec`` is the head
vector in the buffer's units: ``head_dim`` values, or ``head_dim + 4`` bytes for ``fp8_per_token_head`` — the
layouts permute whole vectors, so the same functions build every dtype's buffer.

Quantisers (:func:`e4m3`, :func:`per_token_head`, :func:`ds_mla_record`) and their inverses take ``float32``
input (a widened ``bfloat16``, which is exact) and round once with ml_dtypes (never from ``float64``, which
ml_dtypes double-rounds). ml_dtypes' ``astype(float8_e4m3fn)`` is non-saturating (out of range gives NaN), so
the saturating encode of vLLM's CUDA path clips to ±448 first.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import ml_dtypes
import numpy as np
import numpy.typing as npt

Array = npt.NDArray[Any]
F32 = npt.NDArray[np.float32]
U8 = npt.NDArray[np.uint8]
U16 = npt.NDArray[np.uint16]
Buffers = Array | tuple[Array, Array]

BF16: Any = ml_dtypes.bfloat16
E4M3: Any = ml_dtypes.float8_e4m3fn
#: Smallest normal float32 (FLT_MIN = 1.1754944e-38).
FLT_MIN = np.float32(2.0**-126)
#: Largest finite E4M3FN value.
E4M3_MAX = np.float32(448.0)

#: The fp8 element of each fp8 layout dtype: (ml_dtypes type, largest finite value, the amax divisor of a
#: per token-head scale). E4M3FNUZ is AMD's (MI300, gfx942): max 240, but vLLM divides amax by 224 there
#: (``FP8_E4M3_MAX = 224.0f`` for the fnuz type; spec/quant.md §1.1).
FP8_ELEMENT: dict[str, tuple[Any, float, float]] = {
    "fp8_e4m3": (ml_dtypes.float8_e4m3fn, 448.0, 448.0),
    "fp8_per_token_head": (ml_dtypes.float8_e4m3fn, 448.0, 448.0),
    "fp8_e4m3fnuz": (ml_dtypes.float8_e4m3fnuz, 240.0, 224.0),
    "fp8_per_token_head_fnuz": (ml_dtypes.float8_e4m3fnuz, 240.0, 224.0),
    "fp8_e5m2": (ml_dtypes.float8_e5m2, 57344.0, 57344.0),
    "fp8_e5m2fnuz": (ml_dtypes.float8_e5m2fnuz, 57344.0, 57344.0),
}


def fp8(x: F32, dtype: str) -> U8:
    """Saturating codes of float32 ``x`` in the element of fp8 layout dtype ``dtype`` (RNE via ml_dtypes;
    finite values and ±Inf beyond ±max clip to ±max first; NaN stays NaN — 0x80 in the fnuz formats)."""
    t, mx, _ = FP8_ELEMENT[dtype]
    with np.errstate(invalid="ignore"):
        return np.asarray(
            np.clip(np.asarray(x, dtype=np.float32), -np.float32(mx), np.float32(mx)).astype(t).view(np.uint8)
        )


def fp8_value(codes: Array, dtype: str) -> F32:
    """Codes of fp8 layout dtype ``dtype`` → float32 (exact, ml_dtypes)."""
    out: F32 = np.asarray(codes, dtype=np.uint8).view(FP8_ELEMENT[dtype][0]).astype(np.float32)
    return out


#: Non-MLA layouts whose tokens live in blocks (addressed through a block table or slot mapping).
PAGED = (
    "vllm_nhd",
    "vllm_hnd",
    "vllm_flash_attn",
    "vllm_flash_attn_hnd",
    "vllm_flashinfer",
    "vllm_flashinfer_hnd",
    "vllm_legacy",
    "sglang",
    "trtllm",
    "dynamo_universal",
)
#: Non-MLA layouts that hold one request's tokens contiguously.
CONTIGUOUS = ("neutral", "lmcache_kv_2ltd", "lmcache_kv_t2d")
#: Layouts with separate K and V tensors.
SEPARATE = ("vllm_legacy", "sglang")


def blocks_for(tokens: int, block_size: int) -> int:
    """Blocks a request of ``tokens`` tokens occupies (the last one partly filled)."""
    return math.ceil(tokens / block_size)


def paged(neutral: Array, block_size: int, table: Sequence[int] | Array, blocks: int) -> Array:
    """``(L, 2, T, H, V)`` → ``(L, 2, blocks, block_size, H, V)``: token ``t`` at block ``table[t // block_size]``,
    slot ``t % block_size``; every other slot zero."""
    layers, kv, tokens, heads, vec = neutral.shape
    out = np.zeros((layers, kv, blocks, block_size, heads, vec), dtype=neutral.dtype)
    for t in range(tokens):
        out[:, :, int(table[t // block_size]), t % block_size] = neutral[:, :, t]
    return out


def unpaged(cache: Array, block_size: int, table: Sequence[int] | Array, tokens: int) -> Array:
    """The inverse of :func:`paged`: ``(L, 2, P, N, H, V)`` → ``(L, 2, tokens, H, V)`` by fancy indexing."""
    flat = cache.reshape(cache.shape[0], cache.shape[1], -1, *cache.shape[4:])
    slots = np.array([int(table[t // block_size]) * block_size + t % block_size for t in range(tokens)], dtype=np.int64)
    return flat[:, :, slots]


def engine_from_paged(name: str, p: Array) -> Buffers:
    """The engine buffer(s) of paged layout ``name`` from ``(L, 2, P, N, H, V)`` (§3.2, §3.3)."""
    layers, _, blocks, n, heads, vec = p.shape
    if name == "vllm_nhd":  # (B, N, H, 2D): K then V in the last dim
        return np.ascontiguousarray(p.transpose(0, 2, 3, 4, 1, 5)).reshape(layers, blocks, n, heads, 2 * vec)
    if name == "vllm_hnd":  # (B, H, N, 2D)
        return np.ascontiguousarray(p.transpose(0, 2, 4, 3, 1, 5)).reshape(layers, blocks, heads, n, 2 * vec)
    if name == "vllm_flash_attn":  # (2, B, N, H, D)
        return np.ascontiguousarray(p)
    if name == "vllm_flash_attn_hnd":  # (2, B, H, N, D) physical
        return np.ascontiguousarray(p.transpose(0, 1, 2, 4, 3, 5))
    if name == "vllm_flashinfer":  # (B, 2, N, H, D)
        return np.ascontiguousarray(p.transpose(0, 2, 1, 3, 4, 5))
    if name == "vllm_flashinfer_hnd":  # (B, 2, H, N, D)
        return np.ascontiguousarray(p.transpose(0, 2, 1, 4, 3, 5))
    if name == "vllm_legacy":  # K (B, H, D/x, N, x), x = 16 B / element size; V (B, H, D, N)
        x = 16 // p.dtype.itemsize
        k = p[:, 0].reshape(layers, blocks, n, heads, vec // x, x).transpose(0, 1, 3, 4, 2, 5)
        v = p[:, 1].transpose(0, 1, 3, 4, 2)
        return np.ascontiguousarray(k), np.ascontiguousarray(v)
    if name == "sglang":  # per layer k_buffer, v_buffer [slots, H, D], slot = page·page_size + offset
        k = p[:, 0].reshape(layers, blocks * n, heads, vec)
        v = p[:, 1].reshape(layers, blocks * n, heads, vec)
        return np.ascontiguousarray(k), np.ascontiguousarray(v)
    if name == "trtllm":  # (blocks, layers, 2, H·N·D), head-major [H, N, D] inside
        t = p.transpose(2, 0, 1, 4, 3, 5)
        return np.ascontiguousarray(t).reshape(blocks, layers, 2, heads * n * vec)
    if name == "dynamo_universal":  # (blocks, H, L, 2, N, D)
        return np.ascontiguousarray(p.transpose(2, 4, 0, 1, 3, 5))
    raise KeyError(name)


def engine_contiguous(name: str, neutral: Array) -> Array:
    """The buffer of contiguous layout ``name`` from the neutral ``(L, 2, T, H, V)``."""
    layers, _, tokens, heads, vec = neutral.shape
    if name == "neutral":
        return np.ascontiguousarray(neutral)
    if name == "lmcache_kv_2ltd":  # (2, L, T, H·D)
        return np.ascontiguousarray(neutral.transpose(1, 0, 2, 3, 4)).reshape(2, layers, tokens, heads * vec)
    if name == "lmcache_kv_t2d":  # per layer (T, 2, H·D)
        return np.ascontiguousarray(neutral.transpose(0, 2, 1, 3, 4)).reshape(layers, tokens, 2, heads * vec)
    raise KeyError(name)


def engine(
    name: str, neutral: Array, block_size: int, table: Sequence[int] | Array | None = None, blocks: int | None = None
) -> Buffers:
    """The engine buffer(s) of layout ``name`` holding the request ``neutral`` ``(L, 2, T, H, V)``: for a paged
    layout through ``table`` (default ``0, 1, 2, ...``) in a cache of ``blocks`` blocks (default: just enough)."""
    if name in CONTIGUOUS:
        return engine_contiguous(name, neutral)
    tokens = neutral.shape[2]
    nb = blocks_for(tokens, block_size)
    tbl = list(range(nb)) if table is None else [int(b) for b in table[:nb]]
    count = blocks if blocks is not None else (max(tbl) + 1 if tbl else 1)
    return engine_from_paged(name, paged(neutral, block_size, tbl, count))


def paged_from_engine(name: str, buf: Buffers, layers: int, heads: int, block_size: int) -> Array:
    """The inverse of :func:`engine_from_paged`: ``(L, 2, P, N, H, V)`` from an engine buffer."""
    n = block_size
    if name in SEPARATE:
        assert isinstance(buf, tuple)
        k, v = buf
        if name == "sglang":
            blocks = k.shape[1] // n
            vec = k.shape[3]
            ks = k.reshape(layers, blocks, n, heads, vec)
            vs = v.reshape(layers, blocks, n, heads, vec)
        else:
            blocks, vec = k.shape[1], v.shape[3]
            ks = k.transpose(0, 1, 4, 2, 3, 5).reshape(layers, blocks, n, heads, vec)
            vs = v.transpose(0, 1, 4, 2, 3)
        return np.stack([ks, vs], axis=1)
    assert isinstance(buf, np.ndarray)
    if name == "vllm_nhd":
        blocks, vec = buf.shape[1], buf.shape[4] // 2
        return buf.reshape(layers, blocks, n, heads, 2, vec).transpose(0, 4, 1, 2, 3, 5)
    if name == "vllm_hnd":
        blocks, vec = buf.shape[1], buf.shape[4] // 2
        return buf.reshape(layers, blocks, heads, n, 2, vec).transpose(0, 4, 1, 3, 2, 5)
    if name == "vllm_flash_attn":
        return buf
    if name == "vllm_flash_attn_hnd":
        return buf.transpose(0, 1, 2, 4, 3, 5)
    if name == "vllm_flashinfer":
        return buf.transpose(0, 2, 1, 3, 4, 5)
    if name == "vllm_flashinfer_hnd":
        return buf.transpose(0, 2, 1, 4, 3, 5)
    if name == "trtllm":
        blocks = buf.shape[0]
        vec = buf.shape[3] // (heads * n)
        return buf.reshape(blocks, layers, 2, heads, n, vec).transpose(1, 2, 0, 4, 3, 5)
    if name == "dynamo_universal":
        return buf.transpose(2, 3, 0, 4, 1, 5)
    raise KeyError(name)


# --- quantisers -------------------------------------------------------------------------------------------


def bf16_bits(x: F32) -> U16:
    """float32 → bfloat16 (RNE, ml_dtypes) bit patterns."""
    return np.asarray(x, dtype=np.float32).astype(BF16).view(np.uint16)


def bf16_value(bits: Array) -> F32:
    """bfloat16 bit patterns → float32 (exact)."""
    out: F32 = np.asarray(bits).view(BF16).astype(np.float32)
    return out


def e4m3(x: F32) -> U8:
    """Saturating E4M3FN codes of float32 ``x`` (RNE; beyond ±448 → ±448; NaN → NaN)."""
    x = np.asarray(x, dtype=np.float32)
    with np.errstate(invalid="ignore"):
        return np.clip(x, -E4M3_MAX, E4M3_MAX).astype(E4M3).view(np.uint8)


def e4m3_value(codes: Array) -> F32:
    """E4M3FN codes → float32 (exact)."""
    out: F32 = np.asarray(codes, dtype=np.uint8).view(E4M3).astype(np.float32)
    return out


def divide(x: F32, scale: F32 | np.float32) -> F32:
    """``x / scale`` in float32, one rounding (overflow to ±Inf is then saturated by :func:`e4m3`)."""
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        return np.asarray(np.asarray(x, dtype=np.float32) / np.asarray(scale, dtype=np.float32), dtype=np.float32)


def fp8_per_tensor(x: F32, scale: float) -> U8:
    """vLLM ``reshape_and_cache_flash``: E4M3(float(x) / scale), true division, RNE, saturating."""
    return e4m3(divide(x, np.float32(scale)))


def amax_scale(x: F32) -> F32:
    """``max(amax / 448, FLT_MIN)`` over the last axis (finite values), as float32."""
    x = np.asarray(x, dtype=np.float32)
    amax = np.where(np.isfinite(x), np.abs(x), np.float32(0)).max(axis=-1).astype(np.float32)
    out: F32 = np.maximum(amax / E4M3_MAX, FLT_MIN).astype(np.float32)
    return out


#: vLLM's per-token-head scale floor (``max(absmax / qmax, 1e-6)``, quant.md §1.4).
PER_TOKEN_HEAD_MIN_SCALE = np.float32(1e-6)


def per_token_head(x: F32, dtype: str = "fp8_per_token_head") -> U8:
    """``fp8_per_token_head`` records of ``x`` ``(..., D)`` as vLLM's test computes them (quant.md §1.4): the
    fp32 scale ``max(amax/448, 1e-6)``, D E4M3 codes of ``x · (1/scale)`` (reciprocal, then product, both in
    float32), then the scale as 4 little-endian bytes — ``(..., D + 4)`` uint8. With
    ``dtype="fp8_per_token_head_fnuz"``: E4M3FNUZ codes and ``max(amax/224, 1e-6)``."""
    x = np.asarray(x, dtype=np.float32)
    amax = np.where(np.isfinite(x), np.abs(x), np.float32(0)).max(axis=-1).astype(np.float32)
    scale = np.maximum(amax / np.float32(FP8_ELEMENT[dtype][2]), PER_TOKEN_HEAD_MIN_SCALE).astype(np.float32)
    inv = (np.float32(1) / scale).astype(np.float32)
    with np.errstate(over="ignore", invalid="ignore"):
        codes = fp8((x * inv[..., None]).astype(np.float32), dtype)
    scale_bytes = scale.astype("<f4").reshape(*scale.shape, 1).view(np.uint8)
    return np.concatenate([codes, scale_bytes], axis=-1)


def per_token_head_decode(records: U8, dtype: str = "fp8_per_token_head") -> F32:
    """The float32 products ``code · scale`` of ``fp8_per_token_head`` (or ``_fnuz``) records ``(..., D + 4)``."""
    records = np.ascontiguousarray(records, dtype=np.uint8)
    scale = records[..., -4:].copy().view("<f4")[..., 0].astype(np.float32)
    with np.errstate(over="ignore"):
        return (fp8_value(records[..., :-4], dtype) * scale[..., None]).astype(np.float32)


#: ``fp8_ds_mla`` record (spec §3.1): 512 latent codes (4 tiles of 128), 4 fp32 tile scales, 64 bf16 RoPE.
DS_LATENT, DS_TILE, DS_ROPE, DS_BYTES = 512, 128, 64, 656


def ds_mla_record(bits: U16) -> U8:
    """The 656-byte records of bf16 MLA vectors ``(..., 576)`` (given as uint16 bits): bytes [0, 512) E4M3 of
    latent / tile_scale, [512, 528) the 4 tile scales ``max(amax_tile/448, FLT_MIN)`` as little-endian fp32,
    [528, 656) the 64 RoPE bf16 values verbatim."""
    bits = np.ascontiguousarray(bits, dtype=np.uint16)
    lead = bits.shape[:-1]
    latent = bf16_value(bits[..., :DS_LATENT]).reshape(*lead, DS_LATENT // DS_TILE, DS_TILE)
    scale = amax_scale(latent)
    codes = e4m3(divide(latent, scale[..., None])).reshape(*lead, DS_LATENT)
    scale_bytes = scale.astype("<f4").view(np.uint8).reshape(*lead, 16)
    rope = np.ascontiguousarray(bits[..., DS_LATENT:]).astype("<u2").view(np.uint8).reshape(*lead, 2 * DS_ROPE)
    return np.concatenate([codes, scale_bytes, rope], axis=-1)


def ds_mla_decode(records: U8) -> U16:
    """bf16 bits ``(..., 576)`` of ``fp8_ds_mla`` records: latent = code · tile scale rounded to bf16, RoPE
    copied."""
    records = np.ascontiguousarray(records, dtype=np.uint8)
    lead = records.shape[:-1]
    codes = e4m3_value(records[..., :DS_LATENT]).reshape(*lead, 4, DS_TILE)
    scale = records[..., DS_LATENT : DS_LATENT + 16].copy().view("<f4").astype(np.float32)
    latent = bf16_bits((codes * scale[..., None]).astype(np.float32)).reshape(*lead, DS_LATENT)
    rope = records[..., DS_LATENT + 16 :].copy().view("<u2").astype(np.uint16)
    return np.concatenate([latent, rope], axis=-1)
