"""Layout conversion benchmarks on 256 MiB bf16 caches, each compared in the same run with a numpy
permute-copy and a numpy same-layout copy of the same bytes (`spec/quant.md` §4 baselines).

The cache is vLLM's (blocks, block_size 16, 8 heads, 2·128) bf16, one layer. A normal ``pytest`` run executes
each benchmark once on a small cache as a smoke test; set ``KVWIRE_BENCH_MIB=256`` (with
``--benchmark-enable``) to measure at the issue's size:

    KVWIRE_BENCH_MIB=256 pytest benches/bench_layout.py --benchmark-enable --benchmark-only \\
        --benchmark-json=benches/results/<date>-layout.json

Throughput is reported in ``extra_info`` as GB/s of cache converted (bytes read).
"""

from __future__ import annotations

import os
from typing import Any

import ml_dtypes
import numpy as np
import pytest
from kvwire import layout

MIB = int(os.environ.get("KVWIRE_BENCH_MIB", "4"))
HEADS, HEAD_DIM, BLOCK = 8, 128, 16
BLOCK_BYTES = BLOCK * HEADS * 2 * HEAD_DIM * 2
BLOCKS = MIB * 2**20 // BLOCK_BYTES
NHD = layout.Layout("vllm_nhd", layers=1, heads=HEADS, head_dim=HEAD_DIM, block_size=BLOCK, dtype="bfloat16")
HND = NHD.with_(name="vllm_hnd")
NEUTRAL = NHD.with_(name="neutral")
ROUNDS = dict(rounds=5, iterations=1, warmup_rounds=1)


@pytest.fixture(scope="module")
def nhd() -> np.ndarray:
    raw = np.random.default_rng(0).integers(0, 2**16, size=NHD.shape(BLOCKS), dtype=np.uint16)
    return raw.view(ml_dtypes.bfloat16)


def _record(benchmark: Any, nbytes: int) -> None:
    # Throughput from the best round (the least disturbed by the shared machine).
    if benchmark.stats is not None:
        benchmark.extra_info["gb_per_s"] = nbytes / benchmark.stats.stats.min / 1e9


@pytest.mark.parametrize("threads", [1, 2])
def test_nhd_to_hnd(benchmark: Any, nhd: np.ndarray, threads: int) -> None:
    """vLLM NHD → HND, bf16 (target ≥ 8 GB/s per core), into a preallocated cache."""
    out = HND.empty(BLOCKS)
    benchmark.pedantic(layout.convert, args=(nhd, NHD, HND), kwargs={"out": out, "threads": threads}, **ROUNDS)
    _record(benchmark, nhd.nbytes)
    assert np.array_equal(out[0, 0, 1, 0].view(np.uint16), nhd[0, 0, 0, 1].view(np.uint16))


@pytest.mark.parametrize("threads", [1, 2])
def test_hnd_to_nhd(benchmark: Any, nhd: np.ndarray, threads: int) -> None:
    """vLLM HND → NHD, bf16 (the inverse permutation)."""
    hnd = layout.convert(nhd, NHD, HND)
    out = NHD.empty(BLOCKS)
    benchmark.pedantic(layout.convert, args=(hnd, HND, NHD), kwargs={"out": out, "threads": threads}, **ROUNDS)
    _record(benchmark, nhd.nbytes)
    assert np.array_equal(out.view(np.uint16), nhd.view(np.uint16))


@pytest.mark.parametrize("threads", [1, 2])
def test_gather_block_table(benchmark: Any, nhd: np.ndarray, threads: int) -> None:
    """Gather one request's blocks through a shuffled block table into the neutral form (target ≥ 70% of
    the same-layout copy below)."""
    table = np.random.default_rng(1).permutation(BLOCKS).astype(np.int32)
    out = NEUTRAL.empty(BLOCKS * BLOCK)
    kwargs = {"tokens": BLOCKS * BLOCK, "src_block_table": table, "out": out, "threads": threads}
    benchmark.pedantic(layout.convert, args=(nhd, NHD, NEUTRAL), kwargs=kwargs, **ROUNDS)
    _record(benchmark, nhd.nbytes)


def test_numpy_permute_copy(benchmark: Any, nhd: np.ndarray) -> None:
    """Baseline: numpy NHD → HND permute-copy of the same bytes into a preallocated array."""
    src = nhd.view(np.uint16).reshape(BLOCKS, BLOCK, HEADS, 2 * HEAD_DIM).transpose(0, 2, 1, 3)
    out = np.empty((BLOCKS, HEADS, BLOCK, 2 * HEAD_DIM), dtype=np.uint16)
    benchmark.pedantic(np.copyto, args=(out, src), **ROUNDS)
    _record(benchmark, nhd.nbytes)


def test_numpy_same_layout_copy(benchmark: Any, nhd: np.ndarray) -> None:
    """Baseline: numpy copy of the same bytes, same layout (memcpy into a preallocated array)."""
    src = nhd.view(np.uint16)
    out = np.empty_like(src)
    benchmark.pedantic(np.copyto, args=(out, src), **ROUNDS)
    _record(benchmark, nhd.nbytes)


def test_quantise_to_fp8_ds_mla(benchmark: Any) -> None:
    """bf16 MLA (576 values) → the 656-byte fp8_ds_mla record, through the same kernel walk (scalar codec)."""
    mla = layout.Layout("mla", layers=1, heads=1, head_dim=576, block_size=64, dtype="bfloat16")
    blocks = max(1, MIB * 2**20 // (64 * 576 * 2))
    src = np.random.default_rng(2).standard_normal(mla.shape(blocks), dtype=np.float32).astype(ml_dtypes.bfloat16)
    out = mla.with_(dtype="fp8_ds_mla").empty(blocks)
    benchmark.pedantic(
        layout.convert, args=(src, mla, mla.with_(dtype="fp8_ds_mla")), kwargs={"out": out, "threads": 1}, **ROUNDS
    )
    _record(benchmark, src.nbytes)
