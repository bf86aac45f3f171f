"""Quantisation kernel benchmarks on 256 MiB inputs, each compared in the same run with ml_dtypes ``astype``
and numpy copies of the same buffer (`spec/quant.md` §4 baselines).

A normal ``pytest`` run executes each benchmark once on a small input as a smoke test; set
``KVWIRE_BENCH_MIB=256`` (with ``--benchmark-enable``) to measure at the issue's size:

    KVWIRE_BENCH_MIB=256 pytest benches/bench_quant.py --benchmark-enable --benchmark-only \\
        --benchmark-json=benches/results/<date>-quant.json

Throughput is reported in ``extra_info`` as GB/s of input (decode: of output).
"""

from __future__ import annotations

import os
from typing import Any

import ml_dtypes
import numpy as np
import pytest
from kvwire import quant

MIB = int(os.environ.get("KVWIRE_BENCH_MIB", "4"))
N = MIB * 2**20 // 4  # float32 values


@pytest.fixture(scope="module")
def x32() -> np.ndarray:
    return np.random.default_rng(0).standard_normal(N, dtype=np.float32).reshape(-1, 128)


@pytest.fixture(scope="module")
def x16(x32: np.ndarray) -> np.ndarray:
    return x32.astype(ml_dtypes.bfloat16)


def _record(benchmark: Any, nbytes: int) -> None:
    # Throughput from the best round (the least disturbed by the shared machine).
    if benchmark.stats is not None:
        benchmark.extra_info["gb_per_s"] = nbytes / benchmark.stats.stats.min / 1e9


ROUNDS = dict(rounds=5, iterations=1, warmup_rounds=1)


@pytest.mark.parametrize("threads", [1, 2])
def test_cast_f32_to_e4m3fn(benchmark: Any, x32: np.ndarray, threads: int) -> None:
    """f32 → E4M3FN element-wise (target ≥ 10 GB/s per core), into a preallocated output."""
    out = np.empty(x32.shape, dtype=np.uint8)
    benchmark.pedantic(quant.cast, args=(x32, "e4m3fn"), kwargs={"out": out, "threads": threads}, **ROUNDS)
    _record(benchmark, x32.nbytes)
    assert out.shape == x32.shape


def test_cast_f32_to_e4m3fn_allocating(benchmark: Any, x32: np.ndarray) -> None:
    """f32 → E4M3FN with a freshly allocated output (includes page-fault cost), one thread."""
    benchmark.pedantic(quant.cast, args=(x32, "e4m3fn"), kwargs={"threads": 1}, **ROUNDS)
    _record(benchmark, x32.nbytes)


@pytest.mark.parametrize("threads", [1, 2])
def test_cast_bf16_to_e4m3fn(benchmark: Any, x16: np.ndarray, threads: int) -> None:
    """bf16 → E4M3FN (target ≥ 6 GB/s per core)."""
    out = np.empty(x16.shape, dtype=np.uint8)
    benchmark.pedantic(quant.cast, args=(x16, "e4m3fn"), kwargs={"out": out, "threads": threads}, **ROUNDS)
    _record(benchmark, x16.nbytes)


@pytest.mark.parametrize("fmt", ["mxfp4", "nvfp4", "mxfp8_e4m3", "fp8_e4m3", "int4_asym_g32"])
@pytest.mark.parametrize("threads", [1, 2])
def test_quantize(benchmark: Any, x32: np.ndarray, fmt: str, threads: int) -> None:
    """Block formats (targets: MXFP4 and NVFP4 ≥ 4 GB/s per core), new output buffers each call."""
    benchmark.pedantic(quant.quantize, args=(x32, fmt), kwargs={"threads": threads}, **ROUNDS)
    _record(benchmark, x32.nbytes)


@pytest.mark.parametrize("fmt", ["nvfp4", "fp8_e4m3"])
@pytest.mark.parametrize("threads", [1, 2])
def test_quantize_given_scale(benchmark: Any, x32: np.ndarray, fmt: str, threads: int) -> None:
    """A given (calibrated) tensor scale: one pass over the input, no pass for its largest magnitude (target:
    NVFP4 at least 0.7 of memcpy on one thread, issue 27), new output buffers each call."""
    scale = quant.quantize(x32, fmt).tensor_scale
    benchmark.pedantic(quant.quantize, args=(x32, fmt), kwargs={"threads": threads, "tensor_scale": scale}, **ROUNDS)
    _record(benchmark, x32.nbytes)


@pytest.mark.parametrize("threads", [1, 2])
def test_decode_e4m3fn_to_f32(benchmark: Any, x32: np.ndarray, threads: int) -> None:
    """E4M3FN → f32 (target ≥ 5 GB/s of output per core), into a preallocated output."""
    codes = quant.cast(x32, "e4m3fn")
    out = np.empty(x32.shape, dtype=np.float32)
    benchmark.pedantic(quant.decode, args=(codes, "e4m3fn"), kwargs={"out": out, "threads": threads}, **ROUNDS)
    _record(benchmark, out.nbytes)


# Baselines on the same buffers, in the same run.


def test_baseline_numpy_copyto(benchmark: Any, x32: np.ndarray) -> None:
    """numpy copy into a preallocated buffer (memcpy; GB/s of input read)."""
    dst = np.empty_like(x32)
    benchmark.pedantic(np.copyto, args=(dst, x32), **ROUNDS)
    _record(benchmark, x32.nbytes)


def test_baseline_numpy_copy(benchmark: Any, x32: np.ndarray) -> None:
    """numpy ``x.copy()`` (allocating)."""
    benchmark.pedantic(x32.copy, **ROUNDS)
    _record(benchmark, x32.nbytes)


def test_baseline_ml_dtypes_f32_to_e4m3fn(benchmark: Any, x32: np.ndarray) -> None:
    """ml_dtypes ``astype(float8_e4m3fn)`` of the same buffer."""
    benchmark.pedantic(x32.astype, args=(ml_dtypes.float8_e4m3fn,), rounds=2, iterations=1)
    _record(benchmark, x32.nbytes)


def test_baseline_ml_dtypes_bf16_to_e4m3fn(benchmark: Any, x16: np.ndarray) -> None:
    """ml_dtypes ``astype(float8_e4m3fn)`` from bfloat16."""
    benchmark.pedantic(x16.astype, args=(ml_dtypes.float8_e4m3fn,), rounds=2, iterations=1)
    _record(benchmark, x16.nbytes)


def test_baseline_ml_dtypes_e4m3fn_to_f32(benchmark: Any, x32: np.ndarray) -> None:
    """ml_dtypes e4m3fn → float32 (GB/s of output)."""
    f8 = x32.astype(ml_dtypes.float8_e4m3fn)
    benchmark.pedantic(f8.astype, args=(np.float32,), rounds=2, iterations=1)
    _record(benchmark, x32.nbytes)
