"""Windowing, rescaling and thinning of request tables (kvwire.trace_ops), and the same options applied by
the readers (read_trace, TraceScan.batches).

Oracles are independent arithmetic: Python floats for the windows and scale factors, a straight-line
SplitMix64 (Steele, Lea & Flood; Vigna's reference code) with its published first outputs for the thinning
stream, and binomial bounds for the kept fraction. Order preservation and exact rates are checked on random
tables with Hypothesis.
"""

from __future__ import annotations

import itertools
import math
from pathlib import Path

import kvwire
import numpy as np
import polars as pl
import pytest
from hypothesis import given
from hypothesis import strategies as st
from kvwire import traces
from kvwire.traces import ops

MASK = (1 << 64) - 1


def splitmix64(seed: int, n: int) -> list[int]:
    """The first ``n`` outputs of SplitMix64 seeded with ``seed``, written out as the reference code does."""
    out, state = [], seed
    for _ in range(n):
        state = (state + 0x9E3779B97F4A7C15) & MASK
        z = state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
        out.append(z ^ (z >> 31))
    return out


def table(arrivals: list[float]) -> pl.DataFrame:
    n = len(arrivals)
    return pl.DataFrame(
        {"arrival_s": arrivals, "prompt_tokens": list(range(1, n + 1)), "output_tokens": [i % 5 for i in range(n)]},
        schema={"arrival_s": pl.Float64, "prompt_tokens": pl.Int64, "output_tokens": pl.Int64},
    )


sorted_arrivals = st.lists(
    st.floats(min_value=0, max_value=1e6, allow_nan=False, allow_infinity=False), min_size=0, max_size=60
).map(sorted)


def test_splitmix64_reference_vector() -> None:
    """The reference SplitMix64 here gives the published first outputs for seed 1234567, so it can judge the
    library's vectorised stream."""
    assert splitmix64(1234567, 5) == [
        6457827717110365317,
        3203168211198807973,
        9817491932198370423,
        4593380528125082431,
        16408922859458223821,
    ]


@pytest.mark.parametrize("seed", [0, 1, 1234567, 2**64 - 1])
def test_keep_mask_is_the_splitmix64_stream(seed: int) -> None:
    """Row i is kept exactly when (x_i >> 11) · 2^-53 < sample for the i-th SplitMix64 output x_i, also for
    a chunk starting at an offset."""
    xs = splitmix64(seed, 300)
    for sample in (0.1, 0.5, 0.937):
        expected = [(x >> 11) * 2.0**-53 < sample for x in xs]
        assert ops.keep_mask(300, sample, seed).tolist() == expected
        assert ops.keep_mask(100, sample, seed, offset=200).tolist() == expected[200:]


def test_thin_keeps_the_expected_fraction_in_order() -> None:
    """Thinning 200,000 rows at 0.3 keeps a fraction within 5 binomial standard deviations of 0.3, in order,
    the same rows for the same seed, different rows for another seed; sample=1 keeps everything."""
    n, p = 200_000, 0.3
    t = table([float(i) for i in range(n)])
    a = traces.thin(t, p, seed=11)
    sd = math.sqrt(n * p * (1 - p))
    assert abs(a.height - n * p) < 5 * sd
    assert (a["arrival_s"].diff().drop_nulls() > 0).all()
    assert a.equals(traces.thin(t, p, seed=11))
    assert not a.equals(traces.thin(t, p, seed=12))
    assert traces.thin(t, 1.0).equals(t)


def test_thin_by_chunks_equals_whole() -> None:
    """Thinning a table chunk by chunk with offsets keeps exactly the rows thinning it whole keeps."""
    t = table([float(i) for i in range(10_000)])
    whole = traces.thin(t, 0.42, seed=5)
    parts = [traces.thin(t.slice(o, 1_337), 0.42, seed=5, offset=o) for o in range(0, t.height, 1_337)]
    assert pl.concat(parts).equals(whole)


@given(sorted_arrivals, st.floats(0, 1e6), st.one_of(st.none(), st.floats(1e-3, 1e6)))
def test_window_is_a_filter_and_a_shift(arrivals: list[float], start: float, duration: float | None) -> None:
    """window keeps exactly the rows with start ≤ a < start + duration (Python's own comparisons), in order,
    with arrival a - start (Python's subtraction), other columns untouched."""
    t = table(arrivals)
    out = traces.window(t, start, duration)
    end = math.inf if duration is None else start + duration
    keep = [i for i, a in enumerate(arrivals) if start <= a < end]
    assert out["arrival_s"].to_list() == [arrivals[i] - start for i in keep]
    assert out["prompt_tokens"].to_list() == [i + 1 for i in keep]
    assert out.columns == t.columns


@given(sorted_arrivals, st.floats(1e-3, 1e3))
def test_scale_time_multiplies_every_arrival(arrivals: list[float], k: float) -> None:
    """scale_time multiplies every arrival by k (Python's multiplication, exactly), so order is kept and every
    gap scales by k."""
    out = traces.scale_time(table(arrivals), k)
    assert out["arrival_s"].to_list() == [a * k for a in arrivals]
    got = out["arrival_s"].to_list()
    assert all(x <= y for x, y in itertools.pairwise(got))


def _has_a_rate(a: list[float]) -> bool:
    """Two arrivals at different times whose mean rate a float holds (a span of a few subnormal seconds has
    none: scale_to_rate refuses it, tested in test_scale_to_rate_refuses_what_has_no_rate)."""
    return len(a) >= 2 and a[-1] > a[0] and math.isfinite((len(a) - 1) / (a[-1] - a[0]))


def test_scale_to_rate_refuses_what_has_no_rate() -> None:
    """One request, requests all at one instant, and a span of subnormal seconds (a rate beyond a float) have
    no mean rate to scale: refused naming rate_per_s."""
    for arrivals in ([1.0], [2.0, 2.0], [0.0, 2.2250738585072014e-311]):
        with pytest.raises(kvwire.ScenarioError) as e:
            traces.scale_to_rate(table(arrivals), 10.0)
        assert e.value.path == "rate_per_s"


@given(sorted_arrivals.filter(_has_a_rate), st.floats(1e-3, 1e4))
def test_scale_to_rate_hits_the_rate(arrivals: list[float], rate: float) -> None:
    """scale_to_rate multiplies arrivals by ((n - 1)/(last - first))/rate (computed here in Python); the mean
    rate (n - 1)/(last - first) of the result is the target to 1e-12 relative, and order is kept."""
    n = len(arrivals)
    k = ((n - 1) / (arrivals[-1] - arrivals[0])) / rate
    out = traces.scale_to_rate(table(arrivals), rate)
    got = out["arrival_s"].to_list()
    assert got == [a * k for a in arrivals]
    measured = (n - 1) / (got[-1] - got[0])
    assert math.isclose(measured, rate, rel_tol=1e-12)
    assert math.isclose(traces.mean_rate_per_s(out) or 0.0, rate, rel_tol=1e-12)
    assert all(x <= y for x, y in itertools.pairwise(got))


def test_rate_needs_a_rate() -> None:
    """A target rate needs two requests at different times; otherwise a ScenarioError naming rate_per_s."""
    for arrivals in ([], [3.0], [2.0, 2.0]):
        assert traces.mean_rate_per_s(table(arrivals)) is None
        with pytest.raises(kvwire.ScenarioError) as info:
            traces.scale_to_rate(table(arrivals), 5.0)
        assert info.value.path == "rate_per_s"


@pytest.mark.parametrize(
    ("call", "path"),
    [
        (lambda t: traces.window(t, -1.0), "start_s"),
        (lambda t: traces.window(t, 0.0, 0.0), "duration_s"),
        (lambda t: traces.window(t, float("nan")), "start_s"),
        (lambda t: traces.scale_time(t, 0.0), "time_scale"),
        (lambda t: traces.scale_time(t, float("inf")), "time_scale"),
        (lambda t: traces.scale_to_rate(t, -2.0), "rate_per_s"),
        (lambda t: traces.thin(t, 0.0), "sample"),
        (lambda t: traces.thin(t, 1.5), "sample"),
        (lambda t: traces.thin(t, 0.5, seed=-1), "seed"),
        (lambda t: traces.thin(t, 0.5, seed=2**64), "seed"),
        (lambda t: traces.thin(t, True), "sample"),
    ],
)
def test_bad_arguments_name_themselves(call: object, path: str) -> None:
    """Out-of-range or non-finite options are ScenarioErrors whose path is the argument's name."""
    with pytest.raises(kvwire.ScenarioError) as info:
        call(table([0.0, 1.0]))  # type: ignore[operator]
    assert info.value.path == path


# --------------------------------------------------------------------------------------------------
# The readers apply the same operations


def write_azure(tmp_path: Path, n: int = 2_000, seed: int = 0) -> tuple[Path, list[float]]:
    """An Azure 2024-layout file with ``n`` requests at known microsecond times; returns the arrivals."""
    rng = np.random.default_rng(seed)
    us = np.cumsum(rng.integers(0, 3_000_000, n))
    rows = []
    for i, t in enumerate(us.tolist()):
        s, frac = divmod(int(t), 1_000_000)
        stamp = f"2024-05-12 {s // 3600:02d}:{s // 60 % 60:02d}:{s % 60:02d}"
        rows.append(f"{stamp}{'' if frac == 0 else f'.{frac:06d}'}+00:00,{100 + i},{i % 9}")
    p = tmp_path / "azure.csv"
    p.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n" + "\n".join(rows) + "\n")
    return p, [(t - int(us[0])) / 1e6 for t in us.tolist()]


OPTION_SETS = [
    {},
    {"start_s": 600.0},
    {"start_s": 600.0, "duration_s": 900.0},
    {"time_scale": 0.25},
    {"sample": 0.3, "seed": 9},
    {"start_s": 100.0, "duration_s": 2000.0, "sample": 0.5, "seed": 3, "time_scale": 2.0},
    {"duration_s": 1500.0, "sample": 0.7, "rate_per_s": 4.0},
]


@pytest.mark.parametrize("options", OPTION_SETS, ids=lambda o: ",".join(o) or "none")
def test_read_trace_options_compose_the_pure_functions(tmp_path: Path, options: dict[str, float]) -> None:
    """read_trace(path, **options) equals window → thin → scale applied to the plain read (the window pushed
    into the scan changes nothing), and its arrivals are the file's microsecond times transformed in Python."""
    p, arrivals = write_azure(tmp_path)
    got = kvwire.read_trace(p, **options)  # type: ignore[arg-type]
    t = kvwire.read_trace(p)
    assert t["arrival_s"].to_list() == arrivals
    start, duration = options.get("start_s", 0.0), options.get("duration_s")
    t = traces.window(t, start, duration)
    t = traces.thin(t, options.get("sample", 1.0), int(options.get("seed", 0)))
    t = (
        traces.scale_to_rate(t, options["rate_per_s"])
        if "rate_per_s" in options
        else traces.scale_time(t, options.get("time_scale", 1.0))
    )
    assert got.equals(t)
    end = math.inf if duration is None else start + duration
    inside = [a - start for a in arrivals if start <= a < end]
    assert got.height <= len(inside)
    if "sample" not in options and "rate_per_s" not in options:
        assert got["arrival_s"].to_list() == [a * options.get("time_scale", 1.0) for a in inside]


@pytest.mark.parametrize("options", OPTION_SETS, ids=lambda o: ",".join(o) or "none")
@pytest.mark.parametrize("rows", [7, 97, 1_000_000])
def test_batches_equal_collect(tmp_path: Path, options: dict[str, float], rows: int) -> None:
    """TraceScan.batches yields, in order, chunks that concatenate to exactly TraceScan.collect(), for any
    chunk size and option set (thinning keyed on the position in the stream; the rate measured first)."""
    p, _ = write_azure(tmp_path, n=1_500)
    scan = kvwire.scan_trace(p, **options)  # type: ignore[arg-type]
    chunks = list(scan.batches(rows=rows))
    assert all(c.height for c in chunks)
    assert pl.concat(chunks).equals(scan.collect())


def test_batches_check_order_across_chunks(tmp_path: Path) -> None:
    """A request out of order right at a chunk boundary is found by batches too, naming its line."""
    rows = [f'{{"timestamp": {t}, "input_length": 5, "output_length": 1}}' for t in (0, 10, 20, 15, 30)]
    p = tmp_path / "m.jsonl"
    p.write_text("\n".join(rows) + "\n")
    with pytest.raises(kvwire.TraceFileError) as info:
        list(kvwire.scan_trace(p).batches(rows=3))
    assert info.value.line == 4 and "line 3" in str(info.value)


def test_option_errors_from_read_trace(tmp_path: Path) -> None:
    """Bad options are refused before the file is read, naming the option; time_scale and rate_per_s
    together are refused."""
    p, _ = write_azure(tmp_path, n=10)
    for options, path in [
        ({"start_s": -5}, "start_s"),
        ({"sample": 0}, "sample"),
        ({"seed": 1.5}, "seed"),
        ({"time_scale": 2.0, "rate_per_s": 3.0}, "rate_per_s"),
        ({"duration_s": float("inf")}, "duration_s"),
    ]:
        with pytest.raises(kvwire.ScenarioError) as info:
            kvwire.read_trace(p, **options)  # type: ignore[arg-type]
        assert info.value.path == path


def test_window_past_the_end_is_empty(tmp_path: Path) -> None:
    """A window after the last request reads as an empty table with the request columns."""
    p, arrivals = write_azure(tmp_path, n=20)
    out = kvwire.read_trace(p, start_s=arrivals[-1] + 1.0)
    assert out.height == 0 and out.columns == ["arrival_s", "prompt_tokens", "output_tokens"]
