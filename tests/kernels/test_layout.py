"""Tests of ``kvwire.layout`` (issue 5; spec/quant.md §3 "Engine KV-cache formats" and §6 layout edge cases).

The oracle is ``tests/layout_reference.py``, an independent numpy + ml_dtypes re-implementation of the engine
layouts from the spec's shapes (transpose/reshape/fancy indexing of a neutral ``(layers, 2, tokens, heads,
head_dim)`` array) and of the fp8 encodings (ml_dtypes casts of float32 values, saturated by clipping to ±448
first). Nothing expected here is an output of kvwire; kvwire's outputs are only compared with it, bit for bit.

Covered: every non-MLA layout in every dtype it stores, through random destination block tables with a partly
filled last block (unwritten slots stay zero, or keep what ``out`` held); A → B → A identities across random
layout pairs and block sizes (re-blocking 16 ↔ 64); gathers through slot mappings with -1 padding and through
block tables; scatter through a destination slot mapping; tensor-parallel head slicing (TP8 → 4 x TP2) and
merging; the K/V-packed last dimension split at head_size; byte counts against formulas; fp8 per-tensor and
per-token-head quantisation and back; the 656-byte ``fp8_ds_mla`` record byte for byte and back; the
``LayoutError`` raised for each kind of bad input (with its ``path``); and thread-count independence.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Callable
from typing import Any

import kvwire
import layout_reference as ref
import numpy as np
import numpy.typing as npt
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kvwire import layout
from kvwire.kernels.layout import Layout

Array = npt.NDArray[Any]
Buffers = Array | tuple[Array, Array]

#: Layout dtype → (the numpy dtype of the arrays the tests build, extra units per head vector).
DTYPES: dict[str, tuple[Any, int]] = {
    "float32": (np.float32, 0),
    "bfloat16": (np.uint16, 0),  # bfloat16 bit patterns, as the layout accepts them
    "float16": (np.float16, 0),
    "fp8_e4m3": (np.uint8, 0),
    "fp8_per_token_head": (np.uint8, 4),  # head_dim codes + a 4-byte fp32 scale
    "fp8_e4m3fnuz": (np.uint8, 0),
    "fp8_per_token_head_fnuz": (np.uint8, 4),
}
#: Bytes per stored value of the per-vector dtypes (fp8_per_token_head: 1 byte per code, + 4 per vector).
ELEM = {
    "float32": 4,
    "bfloat16": 2,
    "float16": 2,
    "fp8_e4m3": 1,
    "fp8_per_token_head": 1,
    "fp8_e4m3fnuz": 1,
    "fp8_per_token_head_fnuz": 1,
}
#: The per token-head dtypes (an fp32 scale inline after every head vector).
PER_TOKEN_HEAD = ("fp8_per_token_head", "fp8_per_token_head_fnuz")

NON_MLA: list[str] = [str(n) for n in layout.layouts().filter(~layout.layouts()["mla"])["name"].to_list()]
PAGED_NAMES = list(ref.PAGED)


def layout_dtype_cases() -> list[tuple[str, str]]:
    """Every (non-MLA layout, dtype) pair a cache can hold (vllm_legacy stores plain or fp8_e4m3 values)."""
    return [(name, dt) for name in NON_MLA for dt in DTYPES if not (name == "vllm_legacy" and dt in PER_TOKEN_HEAD)]


def unique(shape: tuple[int, ...], dtype: str) -> Array:
    """An array of the test dtype for layout dtype ``dtype`` whose elements are non-zero and distinct (float32,
    and 16-bit patterns up to 65,534 elements) or random non-zero bytes (8-bit), so any misplaced element
    shows (a systematic offset cannot line up with a period of the pattern)."""
    np_dtype, _ = DTYPES[dtype]
    n = math.prod(shape)
    if np_dtype is np.float32:
        return (np.arange(n, dtype=np.float32) + 1).reshape(shape)
    if np_dtype is np.uint8:
        return np.random.default_rng(n).integers(1, 256, n, dtype=np.uint8).reshape(shape)
    bits = (np.arange(n) % 65534 + 1).astype(np.uint16).reshape(shape)
    return bits.view(np.float16) if np_dtype is np.float16 else bits


def bits(a: Array) -> Array:
    """``a`` reinterpreted as unsigned integers of its element width (bit-exact comparisons, NaN-safe)."""
    return a.view({1: np.uint8, 2: np.uint16, 4: np.uint32}[a.dtype.itemsize])


def as_tuple(b: Buffers) -> tuple[Array, ...]:
    """One array or a (k, v) tuple, as a tuple."""
    return b if isinstance(b, tuple) else (b,)


def assert_same(actual: Buffers, expected: Buffers) -> None:
    """Same number of buffers, same shapes, same bits."""
    a, e = as_tuple(actual), as_tuple(expected)
    assert len(a) == len(e)
    for x, y in zip(a, e, strict=True):
        assert isinstance(x, np.ndarray)
        assert x.shape == y.shape, (x.shape, y.shape)
        assert x.dtype.itemsize == y.dtype.itemsize
        if not np.array_equal(bits(x), bits(y)):
            bad = np.argwhere(bits(x) != bits(y))
            raise AssertionError(f"{len(bad)} of {x.size} elements differ, first at {tuple(bad[0])}")


def lay(name: str, *, layers: int, heads: int, head_dim: int, block_size: int = 16, dtype: str) -> Layout:
    """A :class:`Layout`."""
    return Layout(name, layers=layers, heads=heads, head_dim=head_dim, block_size=block_size, dtype=dtype)


def table_for(rng: np.random.Generator, tokens: int, block_size: int, spare: int = 3) -> Array:
    """A random block table: distinct physical blocks (out of ``needed + spare``) in a random order."""
    nb = ref.blocks_for(tokens, block_size)
    return rng.choice(nb + spare, size=nb, replace=False).astype(np.int32)


def paged_kwargs(side: str, name: str, table: Array | None) -> dict[str, Any]:
    """``{side}_block_table=table`` for a paged layout, nothing for a contiguous one."""
    return {f"{side}_block_table": table} if name in ref.PAGED and table is not None else {}


def legacy_ok(dtype: str, head_dim: int) -> bool:
    """Whether vllm_legacy can hold this dtype and head_dim (x = 16 B / element size divides head_dim)."""
    return dtype not in PER_TOKEN_HEAD and head_dim % (16 // ELEM[dtype]) == 0


# --- 0. the catalog ---------------------------------------------------------------------------------------


def test_catalog_lists_the_spec_layouts() -> None:
    """``layouts()`` lists exactly the spec's non-MLA layouts that the reference knows (so a new layout
    cannot go untested), plus ``mla`` and ``mla_neutral``; dtypes() lists the ten layout dtypes."""
    df = layout.layouts()
    assert sorted(NON_MLA) == sorted([*ref.PAGED, *ref.CONTIGUOUS])
    assert sorted(df.filter(df["mla"])["name"].to_list()) == ["mla", "mla_neutral"]
    paged = {str(n): bool(p) for n, p in zip(df["name"].to_list(), df["paged"].to_list(), strict=True)}
    assert {n for n in NON_MLA if paged[n]} == set(ref.PAGED)
    buffers = dict(zip(df["name"].to_list(), df["buffers"].to_list(), strict=True))
    assert {n for n, b in buffers.items() if b == 2} == set(ref.SEPARATE)
    assert all(df["version"].to_list()), "every layout carries a version tag"
    assert set(layout.dtypes()) == {
        "bfloat16",
        "float16",
        "float32",
        "fp8_e4m3",
        "fp8_e4m3fnuz",
        "fp8_e5m2",
        "fp8_e5m2fnuz",
        "fp8_per_token_head",
        "fp8_per_token_head_fnuz",
        "fp8_ds_mla",
    }


# --- 1. neutral → every layout, bit for bit ----------------------------------------------------------------


@pytest.mark.parametrize(("name", "dtype"), layout_dtype_cases())
def test_neutral_to_every_layout_matches_the_spec_shapes(name: str, dtype: str) -> None:
    """neutral → X through a random destination block table, with a partly filled last block, equals the
    numpy reference buffer bit for bit (unwritten slots zero); converting it back gives the neutral array;
    and writing into a given ``out`` touches exactly the request's slots."""
    rng = np.random.default_rng(zlib.crc32(f"{name}/{dtype}".encode()))
    layers, heads, head_dim, bs, tokens = 2, 3, 32, 4, 13  # 3 full blocks + 1 token
    vec = head_dim + DTYPES[dtype][1]
    src = unique((layers, 2, tokens, heads, vec), dtype)
    neutral = lay("neutral", layers=layers, heads=heads, head_dim=head_dim, dtype=dtype)
    dst = lay(name, layers=layers, heads=heads, head_dim=head_dim, block_size=bs, dtype=dtype)
    table = table_for(rng, tokens, bs) if name in ref.PAGED else None

    out = layout.convert(src, neutral, dst, **paged_kwargs("dst", name, table))
    assert_same(out, ref.engine(name, src, bs, table))

    back = layout.convert(out, dst, neutral, tokens=tokens, **paged_kwargs("src", name, table))
    assert_same(back, src)

    # Into a bigger, pre-filled `out`: only the request's slots change.
    count = 9 if name in ref.PAGED else tokens
    given_out = dst.empty(count)
    for b in as_tuple(given_out):
        b.view(np.uint8).fill(0xA5)
    before = tuple(bits(b).copy() for b in as_tuple(given_out))
    returned = layout.convert(src, neutral, dst, out=given_out, **paged_kwargs("dst", name, table))
    assert returned is given_out
    written = as_tuple(ref.engine(name, np.ones(src.shape, dtype=src.dtype), bs, table, blocks=count))
    expected = as_tuple(ref.engine(name, src, bs, table, blocks=count))
    for b, w, e, old in zip(as_tuple(given_out), written, expected, before, strict=True):
        assert np.array_equal(bits(b), np.where(w.astype(bool), bits(e), old))


def test_bfloat16_arrays_and_their_bits_convert_alike() -> None:
    """An ml_dtypes ``bfloat16`` source and its ``uint16`` bit view give the same bytes; the default output
    of a bfloat16 layout is an ml_dtypes ``bfloat16`` array."""
    x = ref.bf16_bits(np.random.default_rng(1).standard_normal((2, 2, 21, 2, 16)).astype(np.float32))
    n = lay("neutral", layers=2, heads=2, head_dim=16, dtype="bfloat16")
    h = n.with_(name="vllm_hnd", block_size=8)
    a = layout.convert(x, n, h)
    b = layout.convert(x.view(ref.BF16), n, h)
    assert isinstance(a, np.ndarray) and a.dtype == np.dtype(ref.BF16)
    assert_same(a, b)
    assert_same(a, ref.engine("vllm_hnd", x, 8))


def layout_pair_case(data: st.DataObject) -> dict[str, Any]:
    """A random (A, B) pair of non-MLA layouts with a shared dtype and geometry and their own block sizes."""
    dtype = data.draw(st.sampled_from(["float32", "bfloat16", "fp8_e4m3", "fp8_per_token_head"]), label="dtype")
    head_dim = data.draw(st.sampled_from([16, 32, 48]), label="head_dim")
    names = [n for n in NON_MLA if n != "vllm_legacy" or legacy_ok(dtype, head_dim)]
    return {
        "dtype": dtype,
        "head_dim": head_dim,
        "a": data.draw(st.sampled_from(names), label="a"),
        "b": data.draw(st.sampled_from(names), label="b"),
        "bs_a": data.draw(st.sampled_from([1, 2, 4, 16, 64]), label="bs_a"),
        "bs_b": data.draw(st.sampled_from([1, 3, 8, 16, 64]), label="bs_b"),
        "layers": data.draw(st.integers(1, 3), label="layers"),
        "heads": data.draw(st.integers(1, 4), label="heads"),
        "tokens": data.draw(st.integers(1, 150), label="tokens"),
        "spare": data.draw(st.integers(0, 3), label="spare"),
        "seed": data.draw(st.integers(0, 2**32 - 1), label="seed"),
    }


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_a_to_b_to_a_is_the_identity(data: st.DataObject) -> None:
    """For random layout pairs, geometries, block sizes (re-blocking) and random block tables on both sides:
    neutral → A → B equals the reference B buffer, B → A gives A's buffer back bit for bit, and B → neutral
    gives the request back."""
    c = layout_pair_case(data)
    rng = np.random.default_rng(c["seed"])
    dtype, a_name, b_name, tokens = c["dtype"], c["a"], c["b"], c["tokens"]
    geo: dict[str, Any] = {"layers": c["layers"], "heads": c["heads"], "head_dim": c["head_dim"], "dtype": dtype}
    vec = c["head_dim"] + DTYPES[dtype][1]
    src = unique((c["layers"], 2, tokens, c["heads"], vec), dtype)
    n = lay("neutral", **geo)
    a = lay(a_name, block_size=c["bs_a"], **geo)
    b = lay(b_name, block_size=c["bs_b"], **geo)
    ta = table_for(rng, tokens, c["bs_a"], c["spare"]) if a_name in ref.PAGED else None
    tb = table_for(rng, tokens, c["bs_b"], c["spare"]) if b_name in ref.PAGED else None

    buf_a = layout.convert(src, n, a, **paged_kwargs("dst", a_name, ta))
    assert_same(buf_a, ref.engine(a_name, src, c["bs_a"], ta))
    buf_b = layout.convert(
        buf_a, a, b, tokens=tokens, **paged_kwargs("src", a_name, ta), **paged_kwargs("dst", b_name, tb)
    )
    assert_same(buf_b, ref.engine(b_name, src, c["bs_b"], tb))
    again = layout.convert(
        buf_b, b, a, tokens=tokens, **paged_kwargs("src", b_name, tb), **paged_kwargs("dst", a_name, ta)
    )
    assert_same(again, buf_a)
    assert_same(layout.convert(buf_b, b, n, tokens=tokens, **paged_kwargs("src", b_name, tb)), src)


@pytest.mark.parametrize(("bs_a", "bs_b"), [(16, 64), (64, 16), (16, 128), (128, 16)])
def test_reblocking_16_64_128_with_block_table_remap(bs_a: int, bs_b: int) -> None:
    """vLLM HND with one block size → vLLM NHD with another (§6 "re-blocking 16↔64↔128 with a block-table
    remap"): equals the reference, and converting back restores the source cache bit for bit."""
    rng = np.random.default_rng(bs_a * 1000 + bs_b)
    tokens = 200  # partial last block on both sides
    src = unique((2, 2, tokens, 2, 16), "bfloat16")
    g: dict[str, Any] = {"layers": 2, "heads": 2, "head_dim": 16, "dtype": "bfloat16"}
    a, b = lay("vllm_hnd", block_size=bs_a, **g), lay("vllm_nhd", block_size=bs_b, **g)
    ta, tb = table_for(rng, tokens, bs_a), table_for(rng, tokens, bs_b)
    cache_a = ref.engine("vllm_hnd", src, bs_a, ta)
    assert isinstance(cache_a, np.ndarray)
    cache_b = layout.convert(cache_a, a, b, tokens=tokens, src_block_table=ta, dst_block_table=tb)
    assert_same(cache_b, ref.engine("vllm_nhd", src, bs_b, tb))
    assert_same(layout.convert(cache_b, b, a, tokens=tokens, src_block_table=tb, dst_block_table=ta), cache_a)


def test_nhd_hnd_round_trip_and_packed_split_at_head_size() -> None:
    """§6: the NHD ↔ HND round trip is the identity, and the K/V-packed last dimension of the 2026 vLLM
    layout splits at head_size into K (first half) and V (second half) of every (block, head, slot)."""
    layers, heads, d, bs, tokens = 2, 4, 16, 8, 29
    src = unique((layers, 2, tokens, heads, d), "float32")
    g: dict[str, Any] = {"layers": layers, "heads": heads, "head_dim": d, "block_size": bs, "dtype": "float32"}
    n, nhd, hnd = lay("neutral", **g), lay("vllm_nhd", **g), lay("vllm_hnd", **g)
    cache = layout.convert(src, n, nhd)
    assert isinstance(cache, np.ndarray)
    hnd_cache = layout.convert(cache, nhd, hnd)
    assert_same(layout.convert(hnd_cache, hnd, nhd), cache)
    assert isinstance(hnd_cache, np.ndarray)
    k, v = np.split(hnd_cache, [d], axis=-1)  # (L, B, H, N, D) each
    blocks = hnd_cache.shape[1]
    for part, kv in ((k, 0), (v, 1)):
        per_token = part.transpose(0, 1, 3, 2, 4).reshape(layers, blocks * bs, heads, d)
        assert np.array_equal(per_token[:, :tokens], src[:, kv])
        assert not per_token[:, tokens:].any()
    # NHD: (L, B, N, H, 2D); vLLM's backends take kv_cache.split(head_size, -1) the same way.
    k2, v2 = np.split(cache, [d], axis=-1)
    assert np.array_equal(k2.reshape(layers, -1, heads, d)[:, :tokens], src[:, 0])
    assert np.array_equal(v2.reshape(layers, -1, heads, d)[:, :tokens], src[:, 1])


# --- 2. gathers and scatters --------------------------------------------------------------------------------


def full_cache(rng: np.random.Generator, name: str, dtype: str, blocks: int, bs: int) -> tuple[Array, Buffers]:
    """A paged cache whose every slot holds distinct data: the reference ``(L, 2, P, N, H, V)`` array and the
    engine buffer(s) built from it (L = 2, H = 3, head_dim = 16)."""
    vec = 16 + DTYPES[dtype][1]
    p = unique((2, 2, blocks, bs, 3, vec), dtype)
    p = p.reshape(-1)[rng.permutation(p.size)].reshape(p.shape)
    return p, ref.engine_from_paged(name, p)


@pytest.mark.parametrize("name", PAGED_NAMES)
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_gather_through_slot_mapping_skips_padding(name: str, dtype: str) -> None:
    """``gather`` through a slot mapping with -1 padding entries (and a slot read twice) equals numpy fancy
    indexing of the cache's slots with the padding dropped."""
    rng = np.random.default_rng(7)
    bs, blocks = 4, 6
    p, cache = full_cache(rng, name, dtype, blocks, bs)
    lt = lay(name, layers=2, heads=3, head_dim=16, block_size=bs, dtype=dtype)
    slots = rng.choice(blocks * bs, size=11, replace=False).astype(np.int64)
    mapping = np.insert(slots, [0, 3, 3, 7, 11], -1)
    mapping = np.append(mapping, slots[2])  # a slot read twice is fine for a source
    valid = mapping[mapping != -1]
    out = layout.gather(cache, lt, slot_mapping=mapping)
    expected = p.reshape(2, 2, blocks * bs, 3, -1)[:, :, valid]
    assert_same(out, expected)
    # the same through convert, into a contiguous engine layout
    t2d = lt.with_(name="lmcache_kv_t2d")
    assert_same(layout.convert(cache, lt, t2d, src_slot_mapping=mapping), ref.engine("lmcache_kv_t2d", expected, 1))


@pytest.mark.parametrize("name", PAGED_NAMES)
def test_gather_through_block_table(name: str) -> None:
    """``gather`` through a block table (blocks in any order, one used twice, a partial last block) equals
    numpy fancy indexing of the blocks then truncation to ``tokens``; a head range selects those heads."""
    rng = np.random.default_rng(8)
    bs, blocks, tokens = 4, 6, 18
    p, cache = full_cache(rng, name, "bfloat16", blocks, bs)
    lt = lay(name, layers=2, heads=3, head_dim=16, block_size=bs, dtype="bfloat16")
    table = np.array([5, 0, 3, 0, 2, 4], dtype=np.int32)  # needs 5 blocks; entry 5 is unused
    expected = ref.unpaged(p, bs, table, tokens)
    assert_same(layout.gather(cache, lt, block_table=table, tokens=tokens), expected)
    assert_same(layout.gather(cache, lt, block_table=list(table), tokens=tokens, heads=(1, 3)), expected[:, :, :, 1:3])
    # no table: blocks in order, every slot
    assert_same(layout.gather(cache, lt), ref.unpaged(p, bs, list(range(blocks)), blocks * bs))


@pytest.mark.parametrize("name", PAGED_NAMES)
def test_scatter_through_destination_slot_mapping(name: str) -> None:
    """neutral → a paged layout through a destination slot mapping with -1 padding puts token i at the i-th
    non-padding slot and leaves every other slot zero."""
    rng = np.random.default_rng(9)
    bs, blocks, tokens = 4, 5, 9
    src = unique((2, 2, tokens, 3, 16), "float32")
    lt = lay(name, layers=2, heads=3, head_dim=16, block_size=bs, dtype="float32")
    slots = rng.choice(blocks * bs, size=tokens, replace=False).astype(np.int64)
    mapping = np.insert(slots, [1, 4, 9], -1)
    out = lt.empty(blocks)
    layout.convert(src, lt.with_(name="neutral"), lt, dst_slot_mapping=mapping, out=out)
    p = np.zeros((2, 2, blocks * bs, 3, 16), dtype=np.float32)
    p[:, :, slots] = src
    assert_same(out, ref.engine_from_paged(name, p.reshape(2, 2, blocks, bs, 3, 16)))


def test_mla_gather_and_reblock() -> None:
    """MLA ``(blocks, block_size, 576)`` bf16: gather through a slot mapping with padding equals fancy
    indexing; mla → mla with another block size through block tables equals the reference scatter."""
    rng = np.random.default_rng(10)
    layers, bs, blocks = 2, 16, 4
    cache = unique((layers, blocks, bs, 576), "bfloat16")
    lt = lay("mla", layers=layers, heads=1, head_dim=576, block_size=bs, dtype="bfloat16")
    mapping = np.array([17, -1, 3, 63, -1, 40, 0], dtype=np.int64)
    flat = cache.reshape(layers, blocks * bs, 576)
    assert_same(layout.gather(cache, lt, slot_mapping=mapping), flat[:, mapping[mapping != -1]])
    tokens, src_table = 50, np.array([2, 0, 3, 1], dtype=np.int32)
    dst_table = rng.permutation(2).astype(np.int32)
    l64 = lt.with_(block_size=64)
    out = layout.convert(cache, lt, l64, tokens=tokens, src_block_table=src_table, dst_block_table=dst_table)
    want = np.zeros((layers, 2, 64, 576), dtype=np.uint16)
    want[:, int(dst_table[0]), :tokens] = cache[:, src_table].reshape(layers, -1, 576)[:, :tokens]
    assert_same(out, want)


# --- 3. tensor-parallel resharding ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("big", "small"), [("vllm_hnd", "vllm_nhd"), ("dynamo_universal", "sglang"), ("trtllm", "vllm_flash_attn_hnd")]
)
def test_tp8_to_four_tp2_and_back(big: str, small: str) -> None:
    """A TP8 cache (8 KV heads) sliced with ``src_heads`` into 4 TP2 caches equals the reference of each
    2-head slice; the 4 TP2 caches merged with ``dst_heads`` into one TP8 ``out`` rebuild the original."""
    rng = np.random.default_rng(11)
    layers, d, tokens = 2, 16, 37
    src = unique((layers, 2, tokens, 8, d), "bfloat16")
    g: dict[str, Any] = {"layers": layers, "head_dim": d, "dtype": "bfloat16"}
    tp8 = lay(big, heads=8, block_size=16, **g)
    tp2 = lay(small, heads=2, block_size=8, **g)
    t8, t2 = table_for(rng, tokens, 16), table_for(rng, tokens, 8)
    cache8 = ref.engine(big, src, 16, t8)
    shards = []
    for r in range(4):
        heads = (2 * r, 2 * r + 2) if r % 2 else slice(2 * r, 2 * r + 2)
        shard = layout.convert(cache8, tp8, tp2, tokens=tokens, src_block_table=t8, dst_block_table=t2, src_heads=heads)
        assert_same(shard, ref.engine(small, src[:, :, :, 2 * r : 2 * r + 2], 8, t2))
        shards.append(shard)
    merged = tp8.empty(as_tuple(cache8)[0].shape[0 if big in ("trtllm", "dynamo_universal") else 1])
    for r, shard in enumerate(shards):
        layout.convert(
            shard,
            tp2,
            tp8,
            tokens=tokens,
            src_block_table=t2,
            dst_block_table=t8,
            dst_heads=(2 * r, 2 * r + 2),
            out=merged,
        )
    assert_same(merged, cache8)


def test_tp_head_slice_through_gather_and_between_mismatched_ranks() -> None:
    """TP2 → TP4 (heads 1..3 of a 4-head cache into heads 0..2 of a 2-head one, and the reverse) moves
    exactly those heads; every other head of a given ``out`` keeps its value."""
    src = unique((1, 2, 10, 4, 8), "float32")
    g: dict[str, Any] = {"layers": 1, "head_dim": 8, "block_size": 4, "dtype": "float32"}
    four, two = lay("vllm_flashinfer", heads=4, **g), lay("vllm_flashinfer_hnd", heads=2, **g)
    cache4 = layout.convert(src, lay("neutral", heads=4, **g), four)
    half = layout.convert(cache4, four, two, src_heads=(1, 3))
    assert_same(half, ref.engine("vllm_flashinfer_hnd", src[:, :, :, 1:3], 4))
    into = four.empty(3)
    assert isinstance(into, np.ndarray)
    into.fill(-1.0)
    layout.convert(half, two, four, dst_heads=(2, 4), out=into)
    back = layout.gather(into, four, tokens=10)
    assert np.array_equal(back[:, :, :, 2:4], src[:, :, :, 1:3])
    assert (back[:, :, :, :2] == -1.0).all()


# --- 4. byte counts ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(("name", "dtype"), layout_dtype_cases())
@pytest.mark.parametrize("tokens", [1, 15, 16, 17, 100])
def test_nbytes_equal_the_formulas(name: str, dtype: str, tokens: int) -> None:
    """``Layout.nbytes(T)`` = ceil(T/N)·N·L·2·H·vec (paged; T·L·2·H·vec contiguous) with vec = D·elem, or
    D + 4 for fp8_per_token_head, + 4·L·2 bytes of separate scales for fp8_e4m3; the buffers a conversion
    returns have exactly the cache part of it, and ``empty(n)`` has n blocks' (or tokens') worth."""
    layers, heads, d, n = 3, 2, 32, 16
    vec_bytes = d + 4 if dtype in PER_TOKEN_HEAD else d * ELEM[dtype]
    scales = 4 * layers * 2 if dtype in ("fp8_e4m3", "fp8_e4m3fnuz") else 0
    slots = math.ceil(tokens / n) * n if name in ref.PAGED else tokens
    cache_bytes = slots * layers * 2 * heads * vec_bytes
    lt = lay(name, layers=layers, heads=heads, head_dim=d, block_size=n, dtype=dtype)
    assert lt.nbytes(tokens) == cache_bytes + scales
    src = unique((layers, 2, tokens, heads, d + DTYPES[dtype][1]), dtype)
    out = layout.convert(src, lt.with_(name="neutral"), lt)
    assert sum(b.nbytes for b in as_tuple(out)) == cache_bytes
    per = (n if name in ref.PAGED else 1) * layers * 2 * heads * vec_bytes
    assert sum(b.nbytes for b in as_tuple(lt.empty(5))) == 5 * per


@pytest.mark.parametrize("tokens", [1, 63, 64, 65, 1000])
def test_mla_nbytes_equal_the_formulas(tokens: int) -> None:
    """MLA: 1152 B per token per layer in bf16 (576 values) and 656 B in ``fp8_ds_mla``, in whole blocks for
    ``mla`` and per token for ``mla_neutral``; 64 tokens of DeepSeek-V3 (61 layers) are 64·61·656 B."""
    n, layers = 64, 61
    slots = math.ceil(tokens / n) * n
    mla = lay("mla", layers=layers, heads=1, head_dim=576, block_size=n, dtype="bfloat16")
    assert mla.nbytes(tokens) == slots * layers * 1152
    assert mla.with_(dtype="fp8_ds_mla").nbytes(tokens) == slots * layers * 656
    assert mla.with_(name="mla_neutral").nbytes(tokens) == tokens * layers * 1152
    assert mla.with_(name="mla_neutral", dtype="fp8_ds_mla").nbytes(tokens) == tokens * layers * 656
    assert mla.with_(dtype="fp8_ds_mla").empty(3).nbytes == 3 * n * layers * 656  # type: ignore[union-attr]
    assert mla.with_(dtype="fp8_ds_mla").nbytes(64) == 64 * 61 * 656


def test_nbytes_of_the_module_docstring_example_and_zero_tokens() -> None:
    """The docstring's example (3 blocks · 16 · 2 layers · 8 heads · 256 values · 2 B) and 0 tokens (no blocks;
    fp8_e4m3 still has its 4·L·2 scale bytes); negative token counts are refused."""
    hnd = lay("vllm_hnd", layers=2, heads=8, head_dim=128, block_size=16, dtype="float16")
    assert hnd.nbytes(tokens=40) == 3 * 16 * 2 * 8 * 256 * 2
    assert hnd.nbytes(0) == 0
    assert hnd.with_(dtype="fp8_e4m3").nbytes(0) == 4 * 2 * 2
    with pytest.raises(kvwire.LayoutError) as e:
        hnd.nbytes(-1)
    assert e.value.path == "tokens"


def test_nbytes_never_wraps() -> None:
    """A huge token count gives the exact formula (Python ints) or a ``LayoutError``, never a wrapped number."""
    hnd = lay("vllm_hnd", layers=2, heads=4, head_dim=16, block_size=4, dtype="bfloat16")
    assert hnd.nbytes(2**40) == 2**40 * 2 * 2 * 4 * 16 * 2
    try:
        got = hnd.nbytes(2**62)
    except kvwire.LayoutError:
        return
    assert got == 2**62 * 2 * 2 * 4 * 16 * 2


# --- 5. fp8 quantising conversions ------------------------------------------------------------------------


def awkward_values(rng: np.random.Generator, shape: tuple[int, ...]) -> Array:
    """float32 data with a wide dynamic range, values beyond the fp8 range, -0, subnormal-ish tiny values."""
    x = rng.standard_normal(shape).astype(np.float32) * np.float32(3.0)
    flat = x.reshape(-1)
    flat[::7] *= np.float32(300.0)  # many beyond ±448 (and beyond ±448·scale)
    flat[3::11] = np.float32(1e-3) * rng.standard_normal(flat[3::11].size).astype(np.float32)
    flat[5] = np.float32(-0.0)
    flat[6] = np.float32(2.0**-10)
    flat[8] = np.float32(464.0 * 0.5)  # exactly the E4M3 tie 464 after dividing by the scale 0.5 below
    return x


@pytest.mark.parametrize("name", ["vllm_hnd", "vllm_nhd", "vllm_flash_attn", "sglang", "trtllm", "lmcache_kv_2ltd"])
@pytest.mark.parametrize("src_dtype", ["bfloat16", "float16", "float32"])
def test_fp8_e4m3_per_tensor_quantise_and_back(name: str, src_dtype: str) -> None:
    """float → fp8_e4m3 with per-layer k_scale/v_scale equals ml_dtypes E4M3(clip(x / scale, ±448)) (true
    division in float32, RNE, saturating) at every engine position; fp8 → bfloat16 equals code·scale rounded
    to bf16 (RNE)."""
    rng = np.random.default_rng(12)
    layers, heads, d, bs, tokens = 3, 2, 16, 8, 21
    x32 = awkward_values(rng, (layers, 2, tokens, heads, d))
    src = {"bfloat16": ref.bf16_bits(x32), "float16": np.clip(x32, -6e4, 6e4).astype(np.float16), "float32": x32}[
        src_dtype
    ]
    xs = src.view(ref.BF16).astype(np.float32) if src_dtype == "bfloat16" else src.astype(np.float32)
    k_scale, v_scale = [0.5, 2.0, 0.0375], [1.0, 0.25, 3.5]
    scale = np.array([k_scale, v_scale], dtype=np.float32).T  # (layers, 2)
    codes = np.empty(xs.shape, dtype=np.uint8)
    for layer in range(layers):
        for kv in range(2):
            codes[layer, kv] = ref.fp8_per_tensor(xs[layer, kv], float(scale[layer, kv]))
    g: dict[str, Any] = {"layers": layers, "heads": heads, "head_dim": d, "block_size": bs}
    n = lay("neutral", dtype=src_dtype, **g)
    q = lay(name, dtype="fp8_e4m3", **g)
    table = table_for(rng, tokens, bs) if name in ref.PAGED else None
    out = layout.convert(src, n, q, k_scale=k_scale, v_scale=v_scale, **paged_kwargs("dst", name, table))
    assert_same(out, ref.engine(name, codes, bs, table))

    back = layout.convert(
        out,
        q,
        n.with_(dtype="bfloat16"),
        tokens=tokens,
        k_scale=k_scale,
        v_scale=v_scale,
        **paged_kwargs("src", name, table),
    )
    deq = ref.e4m3_value(codes) * scale[:, :, None, None, None]
    assert_same(back, ref.bf16_bits(deq))


def test_fp8_e4m3_scalar_scale_and_saturation_vectors() -> None:
    """A scalar scale applies to every layer and K/V; spec §6 E4M3 vectors through the layout path (scale 1):
    448, 449, 464 → 0x7E, 480, 1e6, +Inf → 0x7E (saturating), -480 → 0xFE, -0 → 0x80, 2^-9 → 0x01,
    2^-10 → 0x00, 7.5·2^-9 → 0x08, 240 → 0x77, 1.1875 → 0x3A."""
    vals = np.array(
        [448, 449, 464, 480, 1e6, np.inf, -480, -0.0, 2.0**-9, 2.0**-10, 7.5 * 2.0**-9, 240, 1.1875, 1.0625, 256, 0],
        dtype=np.float32,
    )
    want = [0x7E, 0x7E, 0x7E, 0x7E, 0x7E, 0x7E, 0xFE, 0x80, 0x01, 0x00, 0x08, 0x77, 0x3A, 0x38, 0x78, 0x00]
    assert ref.e4m3(vals).tolist() == want  # the reference agrees with the spec's table
    src = np.broadcast_to(vals, (2, 2, 1, 1, 16)).copy()
    g: dict[str, Any] = {"layers": 2, "heads": 1, "head_dim": 16}
    out = layout.convert(src, lay("neutral", dtype="float32", **g), lay("lmcache_kv_t2d", dtype="fp8_e4m3", **g))
    assert isinstance(out, np.ndarray)
    assert (out.reshape(-1, 16) == np.array(want, dtype=np.uint8)).all()
    scaled = layout.convert(
        src * 4, lay("neutral", dtype="float32", **g), lay("neutral", dtype="fp8_e4m3", **g), k_scale=4.0, v_scale=4.0
    )
    assert_same(scaled, ref.fp8_per_tensor(src * 4, 4.0))


@pytest.mark.parametrize("name", [n for n in NON_MLA if n != "vllm_legacy"])
def test_fp8_per_token_head_quantise_and_back(name: str) -> None:
    """bf16 → fp8_per_token_head: per (token, head, K/V) scale = max(amax/448, 1e-6) in float32, D codes
    E4M3(x · (1/scale)) saturating, then the scale's 4 little-endian bytes — at every engine position (an
    all-zero vector gets 1e-6, an outlier vector keeps its small values only as far as E4M3 can); back to bf16 is
    code·scale rounded to bf16."""
    rng = np.random.default_rng(13)
    layers, heads, d, bs, tokens = 2, 3, 32, 4, 11
    x = awkward_values(rng, (layers, 2, tokens, heads, d))
    x[0, 0, 0, 0] = 0.0
    x[1, 1, 2, 1] = np.float32(1e-3)
    x[1, 1, 2, 1, 5] = np.float32(1e4)
    src = ref.bf16_bits(x)
    records = ref.per_token_head(ref.bf16_value(src))
    assert records[0, 0, 0, 0, d:].view("<f4")[0] == ref.PER_TOKEN_HEAD_MIN_SCALE
    g: dict[str, Any] = {"layers": layers, "heads": heads, "head_dim": d, "block_size": bs}
    n = lay("neutral", dtype="bfloat16", **g)
    q = lay(name, dtype="fp8_per_token_head", **g)
    table = table_for(rng, tokens, bs) if name in ref.PAGED else None
    out = layout.convert(src, n, q, **paged_kwargs("dst", name, table))
    assert_same(out, ref.engine(name, records, bs, table))
    back = layout.convert(out, q, n, tokens=tokens, **paged_kwargs("src", name, table))
    assert_same(back, ref.bf16_bits(ref.per_token_head_decode(records)))
    f32_back = layout.convert(out, q, n.with_(dtype="float32"), tokens=tokens, **paged_kwargs("src", name, table))
    assert_same(f32_back, ref.per_token_head_decode(records))


@settings(max_examples=25, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    d=st.sampled_from([8, 64, 128]),
    magnitude=st.sampled_from([1e-30, 1e-3, 1.0, 1e4, 1e30]),
)
def test_fp8_per_token_head_random_magnitudes(seed: int, d: int, magnitude: float) -> None:
    """Per-token-head records for random data at magnitudes from 1e-30 to 1e30 (scales near FLT_MIN and huge)
    equal the reference, and the float32 decode equals code·scale exactly."""
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal((1, 2, 5, 2, d)) * magnitude).astype(np.float32)
    g: dict[str, Any] = {"layers": 1, "heads": 2, "head_dim": d}
    q = lay("neutral", dtype="fp8_per_token_head", **g)
    out = layout.convert(x, lay("neutral", dtype="float32", **g), q)
    records = ref.per_token_head(x)
    assert_same(out, records)
    assert_same(layout.convert(out, q, lay("neutral", dtype="float32", **g)), ref.per_token_head_decode(records))


def test_fp8_per_token_head_non_finite_values() -> None:
    """A NaN or ±Inf element does not poison its vector's per-token-head scale (amax over the finite values,
    as kvwire documents): NaN encodes as 0x7F, ±Inf saturates to ±448 (0x7E/0xFE), the rest as usual."""
    x = np.random.default_rng(17).standard_normal((1, 2, 3, 1, 16)).astype(np.float32)
    x[0, 0, 0, 0, 3] = np.nan
    x[0, 1, 1, 0, 0] = np.inf
    x[0, 1, 2, 0, 7] = -np.inf
    g: dict[str, Any] = {"layers": 1, "heads": 1, "head_dim": 16}
    out = layout.convert(x, lay("neutral", dtype="float32", **g), lay("neutral", dtype="fp8_per_token_head", **g))
    records = ref.per_token_head(x)
    assert records[0, 0, 0, 0, 3] == 0x7F and records[0, 1, 1, 0, 0] == 0x7E and records[0, 1, 2, 0, 7] == 0xFE
    assert np.isfinite(records[..., 16:].copy().view("<f4")).all()
    assert_same(out, records)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_quantising_conversions_with_head_slices_random(data: st.DataObject) -> None:
    """Random (A float → B fp8) conversions: any pair of vector-contiguous layouts, block sizes, block tables,
    a head slice, per-layer scales, a token count below the source's, 1-3 threads: B equals the reference
    quantisation of the sliced request at the reference positions, and B → float (bfloat16, float16 or
    float32) equals code·scale rounded once."""
    names = [n for n in NON_MLA if n != "vllm_legacy"]
    a_name, b_name = data.draw(st.sampled_from(names)), data.draw(st.sampled_from(names))
    fp8 = data.draw(st.sampled_from(["fp8_e4m3", "fp8_per_token_head"]))
    back_dtype = data.draw(st.sampled_from(["bfloat16", "float16", "float32"]))
    layers, heads = data.draw(st.integers(1, 3)), data.draw(st.integers(1, 5))
    h0 = data.draw(st.integers(0, heads - 1))
    h1 = data.draw(st.integers(h0 + 1, heads))
    d = data.draw(st.sampled_from([8, 16, 40]))
    bs_a, bs_b = data.draw(st.sampled_from([1, 4, 16])), data.draw(st.sampled_from([2, 8, 32]))
    stored = data.draw(st.integers(1, 60))
    tokens = data.draw(st.integers(1, stored))
    threads = data.draw(st.sampled_from([1, 2, 3]))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    x = ref.bf16_bits(awkward_values(rng, (layers, 2, stored, heads, d)))
    k_scale = rng.uniform(0.05, 4.0, layers).astype(np.float32)
    v_scale = rng.uniform(0.05, 4.0, layers).astype(np.float32)

    a = lay(a_name, layers=layers, heads=heads, head_dim=d, block_size=bs_a, dtype="bfloat16")
    b = lay(b_name, layers=layers, heads=h1 - h0, head_dim=d, block_size=bs_b, dtype=fp8)
    ta = table_for(rng, stored, bs_a) if a_name in ref.PAGED else None
    tb = table_for(rng, tokens, bs_b) if b_name in ref.PAGED else None
    cache_a = ref.engine(a_name, x, bs_a, ta)
    scales: dict[str, Any] = {"k_scale": [float(s) for s in k_scale], "v_scale": [float(s) for s in v_scale]}
    out = layout.convert(
        cache_a,
        a,
        b,
        tokens=tokens,
        src_heads=(h0, h1),
        threads=threads,
        **scales,
        **paged_kwargs("src", a_name, ta),
        **paged_kwargs("dst", b_name, tb),
    )
    xs = ref.bf16_value(x[:, :, :tokens, h0:h1])
    if fp8 == "fp8_e4m3":
        scale = np.stack([k_scale, v_scale], axis=1)[:, :, None, None, None]
        codes = ref.e4m3(ref.divide(xs, scale))
        values = ref.e4m3_value(codes) * scale
    else:
        codes = ref.per_token_head(xs)
        values = ref.per_token_head_decode(codes)
    assert_same(out, ref.engine(b_name, codes, bs_b, tb))

    back_layout = lay("neutral", layers=layers, heads=h1 - h0, head_dim=d, dtype=back_dtype)
    back = layout.convert(
        out, b, back_layout, tokens=tokens, threads=threads, **scales, **paged_kwargs("src", b_name, tb)
    )
    rounded = {"bfloat16": ref.bf16_bits(values), "float16": values.astype(np.float16), "float32": values}
    assert_same(back, rounded[back_dtype])


# --- 5b. fp8 flavours: OCP fn ↔ AMD fnuz -------------------------------------------------------------------

#: (fn dtype, fnuz dtype, the scale factor fn → fnuz), spec/quant.md §1.1 and README "fp8 flavours".
FLAVOUR_PAIRS = [("fp8_e4m3", "fp8_e4m3fnuz", 2.0), ("fp8_e5m2", "fp8_e5m2fnuz", 1.0)]


def every_code(layers: int = 1) -> Array:
    """A neutral uint8 cache holding all 256 codes in every head vector: (layers, 2, 1 token, 1 head, 256)."""
    return np.broadcast_to(np.arange(256, dtype=np.uint8), (layers, 2, 1, 1, 256)).copy()


@pytest.mark.parametrize(("fn", "fnuz", "factor"), FLAVOUR_PAIRS)
def test_flavour_change_of_every_code_matches_ml_dtypes(fn: str, fnuz: str, factor: float) -> None:
    """Every one of the 256 codes, both ways: the destination code is ml_dtypes' saturating cast of the source
    value / factor (NaN stays NaN), with factor = ``scale_factor`` (2 for E4M3, vLLM's
    ``normalize_e4m3fn_to_e4m3fnuz``; 1 for E5M2) and 1/factor back — so the dequantised value
    code · scale · factor equals the source's wherever the destination can hold it."""
    assert layout.scale_factor(fn, fnuz) == factor
    assert layout.scale_factor(fnuz, fn) == 1 / factor
    g: dict[str, Any] = {"layers": 1, "heads": 1, "head_dim": 256}
    src = every_code()
    for a, b, f in ((fn, fnuz, factor), (fnuz, fn, 1 / factor)):
        out = layout.convert(src, lay("neutral", dtype=a, **g), lay("neutral", dtype=b, **g))
        with np.errstate(invalid="ignore"):
            want = ref.fp8((ref.fp8_value(src, a) / np.float32(f)).astype(np.float32), b)
        assert_same(out, want)


def test_e4m3_fn_to_fnuz_keeps_the_bits() -> None:
    """vLLM's normalisation, stated by hand: E4M3FN → E4M3FNUZ keeps every byte except -0 (0x80 → 0x00, since
    0x80 is fnuz's NaN) and NaN (0x7F/0xFF → 0x80); the value of each code under the doubled scale is the
    original value."""
    g: dict[str, Any] = {"layers": 1, "heads": 1, "head_dim": 256}
    out = layout.convert(every_code(), lay("neutral", dtype="fp8_e4m3", **g), lay("neutral", dtype="fp8_e4m3fnuz", **g))
    c = np.arange(256)
    want = np.where(c == 0x80, 0x00, np.where((c & 0x7F) == 0x7F, 0x80, c)).astype(np.uint8)
    assert isinstance(out, np.ndarray)
    assert_same(out.reshape(-1, 256)[0], want)
    fin = np.isfinite(ref.fp8_value(c.astype(np.uint8), "fp8_e4m3"))
    v_fn = ref.fp8_value(c.astype(np.uint8), "fp8_e4m3")[fin] * np.float32(0.75)
    v_nuz = ref.fp8_value(want, "fp8_e4m3fnuz")[fin] * np.float32(0.75 * 2)
    np.testing.assert_array_equal(v_nuz, v_fn)


@pytest.mark.parametrize(("fn", "fnuz", "factor"), FLAVOUR_PAIRS)
def test_fn_to_fnuz_to_fn_round_trips_every_finite_value(fn: str, fnuz: str, factor: float) -> None:
    """fn → fnuz → fn returns every finite fn code (-0 comes back as +0, the same value): the round trip is
    exact on every value both formats can represent; and each stage dequantises (code · scale, with the scale
    x factor) to the same values."""
    g: dict[str, Any] = {"layers": 1, "heads": 1, "head_dim": 256}
    src = every_code()
    mid = layout.convert(src, lay("neutral", dtype=fn, **g), lay("neutral", dtype=fnuz, **g))
    back = layout.convert(mid, lay("neutral", dtype=fnuz, **g), lay("neutral", dtype=fn, **g))
    assert isinstance(back, np.ndarray) and isinstance(mid, np.ndarray)
    v = ref.fp8_value(src, fn)
    fin = np.isfinite(v)
    assert_same(back[fin], np.where(src == 0x80, 0, src)[fin].astype(np.uint8))
    s = np.float32(0.375)
    np.testing.assert_array_equal(ref.fp8_value(mid, fnuz)[fin] * (s * np.float32(factor)), v[fin] * s)
    assert np.isnan(ref.fp8_value(back, fn)[np.isnan(v)]).all()


def test_fnuz_to_fn_rounding_where_exactness_is_impossible() -> None:
    """The documented rounding of the inverse direction: E4M3FNUZ ±240 (0x7F/0xFF) has no E4M3FN code at half
    the scale (it would be 480) and saturates to ±224·scale (0x7E/0xFE), every other fnuz code round-trips
    fnuz → fn → fnuz; E5M2FNUZ values below 2^-14 are rounded to nearest even on E5M2's subnormal grid
    (2^-17 → 0, a tie; 3·2^-17 → 2^-15), everything else is kept."""
    g: dict[str, Any] = {"layers": 1, "heads": 1, "head_dim": 256}
    src = every_code()
    fwd = layout.convert(src, lay("neutral", dtype="fp8_e4m3fnuz", **g), lay("neutral", dtype="fp8_e4m3", **g))
    assert isinstance(fwd, np.ndarray)
    f = fwd.reshape(-1, 256)[0]
    assert (f[0x7F], f[0xFF]) == (0x7E, 0xFE)
    assert ref.fp8_value(f[[0x7F]], "fp8_e4m3")[0] * 0.5 == 224.0  # 240 → 224 in fnuz units
    again = layout.convert(fwd, lay("neutral", dtype="fp8_e4m3", **g), lay("neutral", dtype="fp8_e4m3fnuz", **g))
    assert isinstance(again, np.ndarray)
    keep = np.array([c not in (0x7F, 0xFF) for c in range(256)])
    assert_same(again.reshape(-1, 256)[0][keep], np.arange(256, dtype=np.uint8)[keep])
    e5 = layout.convert(src, lay("neutral", dtype="fp8_e5m2fnuz", **g), lay("neutral", dtype="fp8_e5m2", **g))
    assert isinstance(e5, np.ndarray)
    e = e5.reshape(-1, 256)[0]
    assert ref.fp8_value(e[[0x01, 0x03]], "fp8_e5m2").tolist() == [0.0, 2.0**-15]
    v = ref.fp8_value(np.arange(256, dtype=np.uint8), "fp8_e5m2fnuz")
    big = np.isfinite(v) & (np.abs(v) >= 2.0**-14)
    np.testing.assert_array_equal(ref.fp8_value(e, "fp8_e5m2")[big], v[big])


@pytest.mark.parametrize("name", ["vllm_hnd", "sglang", "trtllm", "lmcache_kv_2ltd"])
def test_fp8_e4m3fnuz_per_tensor_quantise_and_back(name: str) -> None:
    """float → fp8_e4m3fnuz with per-layer scales equals ml_dtypes E4M3FNUZ(clip(x / scale, ±240)) at every
    engine position (NaN → 0x80, -0 → 0x00); back to float32 is code·scale exactly."""
    rng = np.random.default_rng(31)
    layers, heads, d, bs, tokens = 2, 2, 16, 4, 9
    x = awkward_values(rng, (layers, 2, tokens, heads, d))
    x[0, 0, 0, 0, 0] = np.nan
    k_scale, v_scale = [0.5, 2.0], [1.0, 0.25]
    scale = np.array([k_scale, v_scale], dtype=np.float32).T
    codes = np.empty(x.shape, dtype=np.uint8)
    for layer in range(layers):
        for kv in range(2):
            codes[layer, kv] = ref.fp8(ref.divide(x[layer, kv], scale[layer, kv]), "fp8_e4m3fnuz")
    assert codes[0, 0, 0, 0, 0] == 0x80
    g: dict[str, Any] = {"layers": layers, "heads": heads, "head_dim": d, "block_size": bs}
    n, q = lay("neutral", dtype="float32", **g), lay(name, dtype="fp8_e4m3fnuz", **g)
    table = table_for(rng, tokens, bs) if name in ref.PAGED else None
    out = layout.convert(x, n, q, k_scale=k_scale, v_scale=v_scale, **paged_kwargs("dst", name, table))
    assert_same(out, ref.engine(name, codes, bs, table))
    back = layout.convert(
        out, q, n, tokens=tokens, k_scale=k_scale, v_scale=v_scale, **paged_kwargs("src", name, table)
    )
    assert_same(back, (ref.fp8_value(codes, "fp8_e4m3fnuz") * scale[:, :, None, None, None]).astype(np.float32))


def test_per_token_head_fnuz_records_and_flavour_change() -> None:
    """bf16 → fp8_per_token_head_fnuz equals the reference record (scale max(amax/224, 1e-6), E4M3FNUZ codes);
    fp8_per_token_head → _fnuz keeps the codes (-0 → +0, NaN → 0x80) and doubles each inline scale, which is
    exactly the record quantised directly; and _fnuz → fn → _fnuz is the identity (codes ≤ 224 by
    construction)."""
    rng = np.random.default_rng(41)
    layers, heads, d, bs, tokens = 2, 2, 32, 4, 7
    x = awkward_values(rng, (layers, 2, tokens, heads, d))
    src = ref.bf16_bits(x)
    xs = ref.bf16_value(src)
    g: dict[str, Any] = {"layers": layers, "heads": heads, "head_dim": d, "block_size": bs}
    n = lay("neutral", dtype="bfloat16", **g)
    fnuz = lay("vllm_hnd", dtype="fp8_per_token_head_fnuz", **g)
    fn = fnuz.with_(dtype="fp8_per_token_head")
    direct = layout.convert(src, n, fnuz)
    records = ref.per_token_head(xs, "fp8_per_token_head_fnuz")
    assert_same(direct, ref.engine("vllm_hnd", records, bs, None))
    fn_out = layout.convert(src, n, fn)
    changed = layout.convert(fn_out, fn, fnuz, tokens=tokens)
    assert_same(changed, direct)
    fn_records = ref.per_token_head(xs)
    assert (records[..., d:].copy().view("<f4") == 2 * fn_records[..., d:].copy().view("<f4")).all()
    assert_same(layout.convert(layout.convert(direct, fnuz, fn, tokens=tokens), fn, fnuz, tokens=tokens), direct)
    back = layout.convert(direct, fnuz, n.with_(dtype="float32"), tokens=tokens)
    assert_same(back, ref.per_token_head_decode(records, "fp8_per_token_head_fnuz"))


def test_flavour_change_with_a_layout_change_in_one_pass() -> None:
    """A cross-vendor hand-off in one call: an MI300X-style paged vLLM HND E4M3FNUZ cache (through its block
    table) → a contiguous neutral E4M3FN request: the reference permutation of the flavour-changed codes."""
    rng = np.random.default_rng(5)
    layers, heads, d, bs, tokens = 3, 2, 16, 8, 21
    g: dict[str, Any] = {"layers": layers, "heads": heads, "head_dim": d}
    codes = rng.integers(0, 256, (layers, 2, tokens, heads, d), dtype=np.uint8)
    table = table_for(rng, tokens, bs)
    src_layout = lay("vllm_hnd", block_size=bs, dtype="fp8_e4m3fnuz", **g)
    cache = layout.convert(codes, lay("neutral", dtype="fp8_e4m3fnuz", **g), src_layout, dst_block_table=table)
    out = layout.convert(cache, src_layout, lay("neutral", dtype="fp8_e4m3", **g), tokens=tokens, src_block_table=table)
    with np.errstate(invalid="ignore"):
        want = ref.fp8((ref.fp8_value(codes, "fp8_e4m3fnuz") * np.float32(2)).astype(np.float32), "fp8_e4m3")
    assert_same(out, want)


def test_scale_factor_errors() -> None:
    """``scale_factor`` names the argument: an unknown dtype, or a pair that is not a flavour change."""
    for args, path in ((("fp8_e4m3", "fp8_e3m4"), "dst_dtype"), (("int8", "fp8_e4m3"), "src_dtype")):
        with pytest.raises(kvwire.LayoutError) as ei:
            layout.scale_factor(*args)
        assert ei.value.path == path
    with pytest.raises(kvwire.LayoutError) as ei:
        layout.scale_factor("fp8_e4m3", "fp8_e5m2fnuz")
    assert ei.value.path == "dst_dtype" and "flavour" in str(ei.value)


# --- 6. the fp8_ds_mla record -----------------------------------------------------------------------------


def mla_vectors(rng: np.random.Generator, shape: tuple[int, ...]) -> Array:
    """bf16 bits of MLA vectors ``(..., 576)``: random data at mixed magnitudes, with (in the first vectors)
    an all-zero tile, a tile with one huge outlier among tiny values, a tile of negative values only, a tile
    whose amax is subnormal in bf16."""
    x = rng.standard_normal((*shape, 576)).astype(np.float32)
    flat = x.reshape(-1, 576)
    flat[:, :512] *= rng.choice(np.array([1e-2, 1.0, 30.0, 1e3], dtype=np.float32), size=(flat.shape[0], 1))
    flat[0, 0:128] = 0.0  # all-zero tile → scale FLT_MIN, codes 0
    flat[1, 256:384] = np.float32(1e-3) * rng.standard_normal(128).astype(np.float32)
    flat[1, 300] = np.float32(1e4)  # one huge outlier: the tiny values flush to 0
    flat[2, 128:256] = -np.abs(flat[2, 128:256])
    flat[3, 384:512] = np.float32(1e-39) * rng.standard_normal(128).astype(np.float32)
    return ref.bf16_bits(x)


def test_fp8_ds_mla_record_byte_for_byte_through_block_tables() -> None:
    """mla bf16 (blocks, block_size, 576) → mla fp8_ds_mla through source and destination block tables:
    every 656-byte record equals the ml_dtypes reference (§3.1: [0,512) E4M3 of latent/tile_scale, [512,528)
    4 fp32 tile scales max(amax_tile/448, FLT_MIN), [528,656) RoPE bf16 verbatim), unwritten slots are zero;
    an all-zero tile's scale is FLT_MIN = 1.1754944e-38."""
    rng = np.random.default_rng(14)
    layers, bs, blocks, tokens = 2, 16, 5, 37
    cache = mla_vectors(rng, (layers, blocks, bs))
    src_table = np.array([3, 0, 4], dtype=np.int32)
    dst_table = np.array([1, 4, 2], dtype=np.int32)
    # put the special vectors at the request's first tokens
    for layer in range(layers):
        cache[layer, 3, :4] = mla_vectors(rng, (4,))
    lt = lay("mla", layers=layers, heads=1, head_dim=576, block_size=bs, dtype="bfloat16")
    ds = lt.with_(dtype="fp8_ds_mla")
    out = layout.convert(cache, lt, ds, tokens=tokens, src_block_table=src_table, dst_block_table=dst_table)
    assert isinstance(out, np.ndarray)
    assert out.shape == (layers, 5, bs, 656) and out.dtype == np.uint8

    gathered = cache[:, src_table].reshape(layers, -1, 576)[:, :tokens]
    records = ref.ds_mla_record(gathered)
    want = np.zeros((layers, 5 * bs, 656), dtype=np.uint8)
    slots = [int(dst_table[t // bs]) * bs + t % bs for t in range(tokens)]
    want[:, slots] = records
    assert_same(out, want.reshape(layers, 5, bs, 656))

    first = out[:, 1, 0]  # token 0: tile 0 is all zero
    assert (first[:, :128] == 0).all()
    assert (first[:, 512:516].copy().view("<f4") == np.float32(1.1754944e-38)).all()
    assert bytes(first[0, 512:516]) == b"\x00\x00\x80\x00"
    assert np.array_equal(out[:, 1, :, 528:], gathered[:, :bs, 512:].copy().view(np.uint8))  # RoPE verbatim
    # the outlier tile: only the outlier keeps a non-zero magnitude (the tiny values flush to ±0)
    assert (np.count_nonzero(out[:, 1, 1, 256:384] & 0x7F, axis=-1) == 1).all()
    assert (out[:, 1, 1, 300] == 0x7E).all()


def test_fp8_ds_mla_inverse_and_mla_neutral() -> None:
    """fp8_ds_mla → bf16: the RoPE part is bit-identical to the original, the latent is code·tile_scale
    rounded to bf16; the same record through mla_neutral (no blocks) agrees with the paged one."""
    rng = np.random.default_rng(15)
    layers, bs, tokens = 3, 64, 100
    x = mla_vectors(rng, (layers, tokens))
    g: dict[str, Any] = {"layers": layers, "heads": 1, "head_dim": 576}
    neutral = lay("mla_neutral", dtype="bfloat16", **g)
    ds = lay("mla", dtype="fp8_ds_mla", block_size=bs, **g)
    table = np.array([1, 0], dtype=np.int32)
    rec = layout.convert(x, neutral, ds, dst_block_table=table)
    assert isinstance(rec, np.ndarray)
    records = ref.ds_mla_record(x)
    assert_same(rec.reshape(layers, 2, bs, 656)[:, [1, 0]].reshape(layers, -1, 656)[:, :tokens], records)
    back = layout.convert(rec, ds, neutral, tokens=tokens, src_block_table=table)
    assert isinstance(back, np.ndarray)
    assert_same(back, ref.ds_mla_decode(records))
    assert np.array_equal(back.view(np.uint16)[..., 512:], x[..., 512:])
    # and into the paged bf16 MLA layout
    back_paged = layout.convert(
        rec, ds, ds.with_(dtype="bfloat16", block_size=16), tokens=tokens, src_block_table=table
    )
    assert isinstance(back_paged, np.ndarray)
    assert_same(back_paged.reshape(layers, -1, 576)[:, :tokens], ref.ds_mla_decode(records))
    # neutral record form equals the paged one
    assert_same(layout.convert(x, neutral, neutral.with_(dtype="fp8_ds_mla")), records)


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), tokens=st.integers(1, 40), bs=st.sampled_from([1, 16, 64]))
def test_fp8_ds_mla_random(seed: int, tokens: int, bs: int) -> None:
    """Random MLA vectors at random magnitudes, token counts and block sizes: records equal the reference."""
    rng = np.random.default_rng(seed)
    x = ref.bf16_bits(
        (rng.standard_normal((1, tokens, 576)) * 10.0 ** rng.integers(-20, 20, size=(1, tokens, 1))).astype(np.float32)
    )
    g: dict[str, Any] = {"layers": 1, "heads": 1, "head_dim": 576}
    rec = layout.convert(
        x, lay("mla_neutral", dtype="bfloat16", **g), lay("mla", dtype="fp8_ds_mla", block_size=bs, **g)
    )
    assert isinstance(rec, np.ndarray)
    assert_same(rec.reshape(1, -1, 656)[:, :tokens], ref.ds_mla_record(x))
    assert not rec.reshape(1, -1, 656)[:, tokens:].any()


# --- 7. errors ---------------------------------------------------------------------------------------------

G: dict[str, Any] = {"layers": 2, "heads": 4, "head_dim": 16, "block_size": 4}
NEU = Layout("neutral", dtype="bfloat16", **G)
HND = Layout("vllm_hnd", dtype="bfloat16", **G)
SGL = Layout("sglang", dtype="bfloat16", **G)
MLA = Layout("mla", layers=2, heads=1, head_dim=576, block_size=4, dtype="bfloat16")
X = np.zeros((2, 2, 10, 4, 16), dtype=np.uint16)  # 10 tokens, neutral
FLOATS: Any = [0.0]  # not a block table
HX = np.zeros((2, 3, 4, 4, 32), dtype=np.uint16)  # 3 blocks of vllm_hnd


def err_cases() -> list[tuple[str, Callable[[], object], str]]:
    """(what, call, expected path) for every kind of bad input."""
    return [
        ("unknown layout", lambda: Layout("vllm_hdn", dtype="bfloat16", **G), "layout.name"),
        ("unknown dtype", lambda: Layout("vllm_hnd", dtype="int3", **G), "layout.dtype"),
        ("zero heads", lambda: Layout("vllm_hnd", layers=1, heads=0, head_dim=8), "layout.heads"),
        (
            "legacy head_dim not a multiple of x",
            lambda: Layout("vllm_legacy", layers=1, heads=1, head_dim=12),
            "layout.head_dim",
        ),
        ("wrong array dtype", lambda: layout.convert(X.astype(np.float32), NEU, HND), "src"),
        ("wrong shape", lambda: layout.convert(X[:, :, :, :3].copy(), NEU, HND), "src"),
        ("wrong rank", lambda: layout.convert(X.reshape(2, 2, 10, 64), NEU, HND), "src"),
        (
            "non-contiguous input",
            lambda: layout.convert(np.zeros((2, 2, 20, 4, 16), np.uint16)[:, :, ::2], NEU, HND),
            "src",
        ),
        ("not an array", lambda: layout.convert(X.tolist(), NEU, HND), "src"),
        (
            "src block table entry out of range",
            lambda: layout.convert(HX, HND, NEU, tokens=9, src_block_table=[0, 3, 1]),
            "src_block_table[1]",
        ),
        (
            "negative block",
            lambda: layout.convert(HX, HND, NEU, tokens=9, src_block_table=[0, -1, 1]),
            "src_block_table[1]",
        ),
        (
            "block table too short",
            lambda: layout.convert(HX, HND, NEU, tokens=9, src_block_table=[0, 1]),
            "src_block_table",
        ),
        (
            "dst block table entry out of range",
            lambda: layout.convert(X, NEU, HND, dst_block_table=[0, 1, 5], out=HND.empty(3)),
            "dst_block_table[2]",
        ),
        (
            "duplicate destination block",
            lambda: layout.convert(X, NEU, HND, dst_block_table=[2, 0, 2]),
            "dst_block_table[2]",
        ),
        (
            "duplicate destination slot",
            lambda: layout.convert(X[:, :, :2].copy(), NEU, HND, dst_slot_mapping=[5, -1, 5]),
            "dst_slot_mapping[2]",
        ),
        (
            "slot mapping out of range",
            lambda: layout.convert(HX, HND, NEU, src_slot_mapping=[0, -1, 48]),
            "src_slot_mapping[2]",
        ),
        (
            "slot mapping below -1",
            lambda: layout.convert(HX, HND, NEU, src_slot_mapping=[0, -2]),
            "src_slot_mapping[1]",
        ),
        (
            "block table on a contiguous layout",
            lambda: layout.convert(X, NEU, HND, tokens=4, src_block_table=[0]),
            "src_block_table",
        ),
        ("too many tokens", lambda: layout.convert(X, NEU, HND, tokens=11), "tokens"),
        (
            "head ranges that do not match",
            lambda: layout.convert(HX, HND, NEU.with_(heads=2), src_heads=(0, 3)),
            "dst_heads",
        ),
        (
            "head range beyond the heads",
            lambda: layout.convert(HX, HND, NEU.with_(heads=2), src_heads=(3, 5)),
            "src_heads",
        ),
        ("empty head range", lambda: layout.convert(HX, HND, NEU, src_heads=(2, 2)), "src_heads"),
        (
            "MLA → non-MLA",
            lambda: layout.convert(np.zeros((2, 1, 4, 576), np.uint16), MLA, HND.with_(head_dim=576)),
            "dst_layout",
        ),
        ("non-MLA → MLA", lambda: layout.convert(HX, HND, MLA), "dst_layout"),
        ("fp8_ds_mla on a non-MLA layout", lambda: Layout("vllm_hnd", dtype="fp8_ds_mla", **G), "layout.dtype"),
        (
            "fp8_ds_mla with head_dim ≠ 576",
            lambda: Layout("mla", layers=1, heads=1, head_dim=512, dtype="fp8_ds_mla"),
            "layout.dtype",
        ),
        ("MLA with several heads", lambda: Layout("mla", layers=1, heads=2, head_dim=576), "layout.heads"),
        (
            "missing tokens with a source block table",
            lambda: layout.convert(HX, HND, NEU, src_block_table=[0, 1]),
            "tokens",
        ),
        ("(k, v) tuple for a single-buffer layout", lambda: layout.convert((X, X), NEU, HND), "src"),
        ("one array for a (k, v) layout", lambda: layout.convert(np.zeros((2, 4, 4, 16), np.uint16), SGL, NEU), "src"),
        ("geometry differs", lambda: layout.convert(X, NEU, HND.with_(layers=3)), "dst_layout"),
        (
            "a dtype cast is not a layout conversion",
            lambda: layout.convert(X, NEU, HND.with_(dtype="float32")),
            "dst_layout.dtype",
        ),
        (
            "fp8_ds_mla from float32",
            lambda: layout.convert(
                np.zeros((2, 3, 576), np.float32),
                MLA.with_(name="mla_neutral", dtype="float32"),
                MLA.with_(dtype="fp8_ds_mla"),
            ),
            "dst_layout.dtype",
        ),
        (
            "legacy with a dtype change",
            lambda: layout.convert(X, NEU, HND.with_(name="vllm_legacy", dtype="fp8_e4m3")),
            "dst_layout.dtype",
        ),
        ("bad fp8 scale", lambda: layout.convert(X, NEU, HND.with_(dtype="fp8_e4m3"), k_scale=0.0), "k_scale"),
        (
            "fp8 e4m3 to e5m2 fnuz is not a flavour change",
            lambda: layout.convert(
                HND.with_(dtype="fp8_e4m3").empty(2), HND.with_(dtype="fp8_e4m3"), HND.with_(dtype="fp8_e5m2fnuz")
            ),
            "dst_layout.dtype",
        ),
        ("dst block table too short", lambda: layout.convert(X, NEU, HND, dst_block_table=[0, 1]), "dst_block_table"),
        (
            "slot mapping disagrees with tokens",
            lambda: layout.gather(HX, HND, slot_mapping=[0, -1, 1], tokens=3),
            "src_slot_mapping",
        ),
        ("zero threads", lambda: layout.convert(X, NEU, HND, threads=0), "threads"),
        ("negative tokens", lambda: layout.convert(X, NEU, HND, tokens=-1), "tokens"),
        ("out of the wrong shape", lambda: layout.convert(X, NEU, HND, out=HND.empty(2)), "out"),
        (
            "float block table",
            lambda: layout.convert(HX, HND, NEU, tokens=4, src_block_table=FLOATS),
            "src_block_table",
        ),
        (
            "table and slot mapping together",
            lambda: layout.convert(HX, HND, NEU, tokens=4, src_block_table=[0], src_slot_mapping=[0, 1, 2, 3]),
            "src_slot_mapping",
        ),
    ]


def bug(what: str, call: Callable[[], object], path: str, reason: str) -> Any:
    """A bad input that an earlier kvwire did not report as a ``LayoutError`` naming the argument (``reason``
    says how it failed); kept as a regression case."""
    return pytest.param(what, call, path, id=what)


READ_ONLY = np.zeros((2, 3, 4, 4, 32), dtype=np.uint16)
READ_ONLY.flags.writeable = False

#: Library bugs found by these tests, now fixed (the reasons say how they used to fail).
BUG_CASES = [
    bug(
        "wrong number of scales",
        lambda: layout.convert(X, NEU, HND.with_(dtype="fp8_e4m3"), k_scale=[1.0, 1.0, 1.0]),
        "k_scale",
        "layout._scales broadcasts k_scale with numpy before any check: a plain ValueError from numpy",
    ),
    bug(
        "scale that is not a number",
        lambda: layout.convert(X, NEU, HND.with_(dtype="fp8_e4m3"), v_scale="a"),  # type: ignore[arg-type]
        "v_scale",
        "layout._scales: np.asarray('a', float32) raises a plain ValueError",
    ),
    bug(
        "negative destination block with the default out",
        lambda: layout.convert(X, NEU, HND, dst_block_table=[-1, -2, -3]),
        "dst_block_table[0]",
        "layout._count_needed sizes out from max(table) + 1 = 0 blocks; the error names 'out', never passed",
    ),
    bug(
        "negative threads",
        lambda: layout.convert(X, NEU, HND, threads=-1),
        "threads",
        "threads=-1 reaches the binding's usize: OverflowError instead of LayoutError",
    ),
    bug(
        "read-only out",
        lambda: layout.convert(X, NEU, HND, out=READ_ONLY),
        "out",
        "the binding unwraps PyReadwriteArray: pyo3 PanicException (NotWriteable) crosses the boundary",
    ),
    bug(
        "out that is the source array",
        lambda: layout.convert(HX, HND, HND, tokens=12, src_block_table=[0, 1, 2], dst_block_table=[1, 2, 0], out=HX),
        "out",
        "the binding unwraps the numpy borrow: pyo3 PanicException (AlreadyBorrowed) crosses the boundary",
    ),
]


@pytest.mark.parametrize(
    ("what", "call", "path"),
    [*err_cases(), *BUG_CASES],
    ids=[c[0] for c in err_cases()] + [str(p.id) for p in BUG_CASES],
)
def test_bad_input_raises_layout_error_naming_the_argument(what: str, call: Callable[[], object], path: str) -> None:
    """Each kind of bad input raises ``kvwire.LayoutError`` (a ``ValueError``) whose ``path`` names the
    argument (or starts with it: ``out`` covers ``out[0]``), with a message; the process
    keeps working."""
    with pytest.raises(kvwire.LayoutError) as e:
        call()
    assert isinstance(e.value, ValueError)
    got = e.value.path
    assert got == path or got.startswith((path + "[", path + ".")), (what, got, str(e.value))
    assert str(e.value)
    ok = layout.convert(X, NEU, HND)
    assert isinstance(ok, np.ndarray) and ok.shape == (2, 3, 4, 4, 32)


# --- 8. threads ---------------------------------------------------------------------------------------------


def test_output_is_identical_with_one_and_two_threads() -> None:
    """A few-MiB conversion (copy through block tables with re-blocking, a per-token-head quantisation, a
    slot-mapping gather) gives the same bytes with threads=1, threads=2 and the default."""
    rng = np.random.default_rng(16)
    layers, heads, d, tokens = 2, 8, 64, 2000  # 8 MiB of bf16
    x = ref.bf16_bits(rng.standard_normal((layers, 2, tokens, heads, d)).astype(np.float32))
    g: dict[str, Any] = {"layers": layers, "heads": heads, "head_dim": d, "dtype": "bfloat16"}
    n, hnd, nhd = lay("neutral", **g), lay("vllm_hnd", block_size=16, **g), lay("vllm_nhd", block_size=64, **g)
    t16, t64 = table_for(rng, tokens, 16, spare=10), table_for(rng, tokens, 64, spare=2)
    cache = layout.convert(x, n, hnd, dst_block_table=t16, threads=1)
    for threads in (2, None):
        assert_same(layout.convert(x, n, hnd, dst_block_table=t16, threads=threads), cache)
    assert_same(cache, ref.engine("vllm_hnd", x, 16, t16))
    runs = [
        layout.convert(cache, hnd, nhd, tokens=tokens, src_block_table=t16, dst_block_table=t64, threads=t)
        for t in (1, 2, None)
    ]
    assert_same(runs[0], runs[1])
    assert_same(runs[0], runs[2])
    q = hnd.with_(dtype="fp8_per_token_head")
    quant = [layout.convert(x, n, q, threads=t) for t in (1, 2)]
    assert_same(quant[0], quant[1])
    mapping = rng.permutation(np.arange(-1, 1200)).astype(np.int64)
    gathered = [layout.gather(cache, hnd, slot_mapping=mapping, threads=t) for t in (1, 2)]
    assert_same(gathered[0], gathered[1])
