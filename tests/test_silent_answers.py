"""Silent wrong answers (issue 9 item 8): each input below used to give a wrong result without an error.
Each test is the issue's reproducer; each now fails with a kvwire error naming the argument, or gives the
right answer."""

from __future__ import annotations

import json
import math

import kvwire
import numpy as np
import pytest
from kvwire import layout, quant

NHD = layout.Layout("vllm_nhd", layers=2, heads=2, head_dim=8, block_size=4, dtype="float16")
HND = NHD.with_(name="vllm_hnd")


@pytest.mark.parametrize("fn", ["convert", "gather"])
def test_big_endian_arrays_are_refused(fn: str) -> None:
    """``layout.convert``/``gather`` copied a big-endian array's raw bytes as if they were native (every value
    scrambled); now the non-native byte order is refused naming the argument, as ``quant`` does. The same
    values in native order convert exactly."""
    rng = np.random.default_rng(0)
    native = rng.standard_normal(NHD.shape(3)).astype(np.float16)
    big = native.astype(native.dtype.newbyteorder(">"))
    assert (big == native).all() and big.dtype.name == "float16"
    with pytest.raises(kvwire.LayoutError) as e:
        if fn == "convert":
            layout.convert(big, NHD, HND)
        else:
            layout.gather(big, NHD, block_table=[0, 1], tokens=8)
    assert e.value.path == "src" and "byte order" in str(e.value)
    out = layout.convert(native, NHD, HND)
    assert isinstance(out, np.ndarray)
    assert (out.transpose(0, 1, 3, 2, 4) == native).all()
    # quant refuses it too (a wrong dtype for its kernels).
    with pytest.raises(kvwire.QuantError):
        quant.quantize(native.astype(">f4"), "fp8_e4m3")


def test_out_aliasing_the_input_through_another_base_is_refused() -> None:
    """An ``out=`` that is the input's memory seen through another object (``np.frombuffer`` of the same
    bytes: a different base, so an identity check missed it) is refused naming ``out``; the conversion
    would have read what it was writing."""
    src = np.zeros(NHD.shape(2), dtype=np.float16)
    alias = np.frombuffer(src.data, dtype=np.float16).reshape(HND.shape(2))
    assert alias.base is not src and np.shares_memory(alias, src)
    with pytest.raises(kvwire.LayoutError) as e:
        layout.convert(src, NHD, HND, out=alias)
    assert e.value.path == "out" and "shares memory with src" in str(e.value)
    # A view that overlaps only partly is refused as well; a separate buffer is fine.
    big = np.zeros((2 * int(np.prod(NHD.shape(2))),), dtype=np.float16)
    a = big[: src.size].reshape(NHD.shape(2))
    b = big[src.size // 2 : src.size // 2 + src.size].reshape(HND.shape(2))
    with pytest.raises(kvwire.LayoutError):
        layout.convert(a, NHD, HND, out=b)
    layout.convert(src, NHD, HND, out=np.zeros(HND.shape(2), dtype=np.float16))


def test_huge_geometry_byte_counts_do_not_wrap() -> None:
    """Layout byte counts wrapped for huge geometries (``nbytes`` returned 0); now a geometry needing more
    than 2^40 bytes per block is refused naming the field, and a request too large for 64 bits is refused
    naming ``tokens``."""
    with pytest.raises(kvwire.LayoutError) as e:
        layout.Layout("vllm_nhd", layers=2**20, heads=1, head_dim=2**20, block_size=2**20)
    assert e.value.path == "layout.block_size"
    with pytest.raises(kvwire.LayoutError) as e:
        layout.Layout("neutral", layers=1, heads=2**20, head_dim=2**20, dtype="float32")
    assert e.value.path == "layout.heads"
    big = layout.Layout("vllm_nhd", layers=2**10, heads=2**4, head_dim=2**10, block_size=2**10, dtype="float32")
    assert big.nbytes(2**10) == 2**37  # one block: 1024 layers x 2 x 16 heads x 1024 dims x 1024 slots x 4 B
    assert big.nbytes(2**26) == 2**53
    with pytest.raises(kvwire.LayoutError) as e:
        big.nbytes(2**40)  # 2^30 blocks of 2^37 bytes: past 2^64
    assert e.value.path == "tokens"


def test_quant_error_with_nothing_compared_is_no_figure() -> None:
    """``quant.error`` returned perfect accuracy (SQNR inf, cosine 1) when no finite pair was compared; now
    its metrics are None with count 0."""
    x = np.array([np.nan, np.inf, 1.0], dtype=np.float32)
    y = np.array([1.0, 2.0, np.nan], dtype=np.float32)
    e = quant.error(x, y)
    assert e == {"sqnr_db": None, "cosine": None, "mse": None, "max_abs": None, "count": 0, "nonfinite": 3}
    assert quant.error(np.zeros(0, np.float32), np.zeros(0, np.float32))["sqnr_db"] is None
    exact = quant.error(np.ones(4, np.float32), np.ones(4, np.float32))
    assert exact["sqnr_db"] == math.inf and exact["cosine"] == 1.0 and exact["count"] == 4


@pytest.mark.parametrize(
    ("scenario", "requests", "path"),
    [
        ({"workload": {"arrivals": {"rate_per_s": 1e-306}}}, None, "workload.arrivals.rate_per_s"),
        ({"link": {"preset": "ib-ndr", "bandwidth_gb_per_s": 5e-324}}, None, "link.bandwidth_gb_per_s"),
        ({"prefill": {"device": {"preset": "h100", "peak_tflops": 1e-300}}}, None, "prefill.device.peak_tflops"),
        ({"decode": {"device": {"preset": "h100", "bw_eff": 1e-300}}}, None, "decode.device.bw_eff"),
        ({"cost": {"s_min": 1e-300}}, None, "cost.s_min"),
        ({}, {"arrival_s": [1e306], "prompt_tokens": [10], "output_tokens": [5]}, "requests.arrival_s[0]"),
        ({"workload": {"trace": {"arrival_s": [0.0, 1e306], "prompt_tokens": [1, 1], "output_tokens": [1, 1]}}},
         None, "workload.trace.arrival_s[1]"),
    ],
)  # fmt: skip
def test_inputs_that_would_give_infinite_times_are_refused(
    scenario: dict[str, object], requests: dict[str, list[float]] | None, path: str
) -> None:
    """Inputs that passed validation but produced infinite times (and then a TypeError in ``summary`` or
    ``repr``) are refused naming the field: rates below 1e-6 (per second, GB/s, TFLOP/s or derating), a
    clock floor below 0.01, arrivals later than 1e12 s."""
    with pytest.raises(kvwire.ScenarioError) as e:
        kvwire.simulate(scenario, requests=requests)
    assert e.value.path == path, (e.value.path, str(e.value))


def test_slowest_accepted_rates_give_finite_results() -> None:
    """At the smallest accepted rates the run's figures are finite and its summary is strict JSON."""
    res = kvwire.simulate(
        {
            "link": {"preset": "ib-ndr", "bandwidth_gb_per_s": 1e-6},
            "workload": {"requests": 5, "arrivals": {"rate_per_s": 1e-6}},
        }
    )
    text = json.dumps(res.summary, allow_nan=False)
    assert "Infinity" not in text
    assert math.isfinite(res.summary["run"]["horizon_s"]) and math.isfinite(res.summary["energy"]["total_j"])
    assert "SimResult(5 requests" in repr(res)


@pytest.mark.parametrize(
    ("scenario", "path"),
    [
        ({"slo": [5, 6]}, "slo"),
        ({"cost": [0.001]}, "cost"),
        ({"workload": {"arrivals": [8.0]}}, "workload.arrivals"),
        ({"prefill": [{"device": "h100"}]}, "prefill"),
        ({"model": {"preset": "llama3-8b", "layers": [32]}}, "model.layers"),
        ({"router": {"disaggregate": ["conditional"]}}, "router.disaggregate"),
    ],
)
def test_lists_in_place_of_objects_are_refused(scenario: dict[str, object], path: str) -> None:
    """``{"slo": [5, 6]}`` ran with TTFT 5 s and TPOT 6 s (serde reads a struct from a list by position); a
    list anywhere but the request-table columns is now refused naming its place."""
    with pytest.raises(kvwire.ScenarioError) as e:
        kvwire.validate(scenario)
    assert e.value.path == path
    assert "got a list" in str(e.value)
    # The columns of a request table are lists, and stay accepted.
    kvwire.validate({"workload": {"trace": {"arrival_s": [0.0], "prompt_tokens": [3], "output_tokens": [2]}}})
