"""Windowing, rescaling and thinning of a request table — pure functions of a Polars DataFrame with an
``arrival_s`` column (seconds, non-decreasing), every other column carried along unchanged.

The scenario's ``workload.trace`` options and :func:`kvwire.read_trace` apply exactly these, in this order:
:func:`window` (``start_s``, ``duration_s``), :func:`thin` (``sample``, ``seed``), then :func:`scale_time`
(``time_scale``) or :func:`scale_to_rate` (``rate_per_s``).

>>> import polars as pl
>>> t = pl.DataFrame({"arrival_s": [0.0, 1.0, 2.0, 3.0, 4.0], "prompt_tokens": [5] * 5})
>>> window(t, start_s=1.0, duration_s=2.0)["arrival_s"].to_list()
[0.0, 1.0]
>>> scale_time(t, 0.5)["arrival_s"].to_list()
[0.0, 0.5, 1.0, 1.5, 2.0]
>>> mean_rate_per_s(scale_to_rate(t, 4.0))
4.0
>>> thin(t, 1.0).height, thin(t, 0.5, seed=3).height <= 5
(5, True)
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt
import polars as pl

from kvwire.errors import ScenarioError

_GAMMA = 0x9E3779B97F4A7C15
_MASK = (1 << 64) - 1


def _number(name: str, value: object, *, positive: bool, at_most: float | None = None) -> float:
    """A finite float argument (> 0 when ``positive``, else ≥ 0), or a ScenarioError naming it."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ScenarioError(f"{name}: expected a finite number, got {value!r}", name)
    v = float(value)
    if v < 0 or (positive and v == 0):
        raise ScenarioError(f"{name}: must be {'> 0' if positive else '≥ 0'}, got {value!r}", name)
    if at_most is not None and v > at_most:
        raise ScenarioError(f"{name}: must be ≤ {at_most:g}, got {value!r}", name)
    return v


def seed_value(name: str, value: object) -> int:
    """A seed: a whole number in [0, 2^64)."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= _MASK:
        raise ScenarioError(f"{name}: expected a whole number in [0, 2^64), got {value!r}", name)
    return int(value)


def window(requests: pl.DataFrame, start_s: float = 0.0, duration_s: float | None = None) -> pl.DataFrame:
    """The requests arriving in ``[start_s, start_s + duration_s)`` (to the end when ``duration_s`` is
    ``None``), with ``start_s`` subtracted from their arrival times, so the window starts at t = 0.

    >>> import polars as pl
    >>> window(pl.DataFrame({"arrival_s": [0.5, 1.0, 2.5]}), start_s=1.0)["arrival_s"].to_list()
    [0.0, 1.5]
    """
    start = _number("start_s", start_s, positive=False)
    a = pl.col("arrival_s")
    keep = a >= start
    if duration_s is not None:
        keep = keep & (a < start + _number("duration_s", duration_s, positive=True))
    out = requests.filter(keep)
    return out.with_columns(a - start) if start else out


def scale_time(requests: pl.DataFrame, time_scale: float) -> pl.DataFrame:
    """Every arrival time multiplied by ``time_scale``: 0.5 replays the trace twice as fast (every gap
    halved, the rate doubled), 2 at half the rate.

    >>> import polars as pl
    >>> scale_time(pl.DataFrame({"arrival_s": [0.0, 3.0]}), 2.0)["arrival_s"].to_list()
    [0.0, 6.0]
    """
    k = _number("time_scale", time_scale, positive=True)
    return requests if k == 1.0 else requests.with_columns(pl.col("arrival_s") * k)


def mean_rate_per_s(requests: pl.DataFrame) -> float | None:
    """The mean arrival rate: (n - 1) / (last - first arrival), the inverse of the mean gap between
    requests; ``None`` with fewer than two requests, when they all arrive at once, or when the rate is beyond
    a float (a span of a few subnormal seconds).

    >>> import polars as pl
    >>> mean_rate_per_s(pl.DataFrame({"arrival_s": [1.0, 1.5, 3.0]}))
    1.0
    """
    return _rate(requests.height, *_ends(requests))


def _ends(requests: pl.DataFrame) -> tuple[float, float]:
    if requests.height == 0:
        return math.nan, math.nan
    a = requests["arrival_s"]
    return float(a[0]), float(a[-1])


def _rate(n: int, first: float, last: float) -> float | None:
    if n < 2 or not last > first:
        return None
    rate = (n - 1) / (last - first)
    return rate if math.isfinite(rate) else None  # a span of a few subnormal seconds: no rate a float holds


def rate_factor(n: int, first: float, last: float, rate_per_s: float) -> float:
    """The time scale that gives ``n`` requests spanning ``[first, last]`` the mean rate ``rate_per_s``."""
    target = _number("rate_per_s", rate_per_s, positive=True)
    observed = _rate(n, first, last)
    if observed is None:
        raise ScenarioError(
            f"rate_per_s: a mean rate needs at least two requests at different times; the trace has {n}"
            + (" arriving at once" if n >= 2 and not last > first else "")
            + (f" spanning only {last - first:g} s" if n >= 2 and last > first else ""),
            "rate_per_s",
        )
    return observed / target


def scale_to_rate(requests: pl.DataFrame, rate_per_s: float) -> pl.DataFrame:
    """The arrival times scaled (as :func:`scale_time`) so that :func:`mean_rate_per_s` becomes
    ``rate_per_s``. Raises :class:`~kvwire.ScenarioError` (``path`` ``rate_per_s``) when the table has no
    mean rate.

    >>> import polars as pl
    >>> scale_to_rate(pl.DataFrame({"arrival_s": [0.0, 10.0, 20.0]}), 1.0)["arrival_s"].to_list()
    [0.0, 1.0, 2.0]
    """
    k = rate_factor(requests.height, *_ends(requests), rate_per_s)
    return requests.with_columns(pl.col("arrival_s") * k)


def keep_mask(n: int, sample: float, seed: int = 0, offset: int = 0) -> npt.NDArray[np.bool_]:
    """Which of rows ``offset .. offset + n - 1`` seeded thinning keeps: row i is kept when
    ``u_i < sample``, where u_i = (x_i >> 11) · 2^-53 and x_i is output i (0-based) of the SplitMix64
    generator seeded with ``seed`` — a counter-based stream, so a table thinned in chunks keeps exactly the
    rows it keeps whole.

    >>> keep_mask(4, 1.0).tolist()
    [True, True, True, True]
    """
    p = _number("sample", sample, positive=True, at_most=1.0)
    s = seed_value("seed", seed)
    if p == 1.0:
        return np.ones(n, dtype=np.bool_)
    with np.errstate(over="ignore"):
        z = np.arange(offset + 1, offset + n + 1, dtype=np.uint64) * np.uint64(_GAMMA) + np.uint64(s)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z = z ^ (z >> np.uint64(31))
    u = (z >> np.uint64(11)).astype(np.float64) * 2.0**-53
    keep: npt.NDArray[np.bool_] = u < p
    return keep


def thin(requests: pl.DataFrame, sample: float, seed: int = 0, *, offset: int = 0) -> pl.DataFrame:
    """Seeded thinning: each request kept independently with probability ``sample`` (0 < sample ≤ 1), the
    same rows for the same seed on every run; order kept. ``offset`` is the position of the table's first
    row in a longer stream (for thinning chunk by chunk). See :func:`keep_mask`.

    >>> import polars as pl
    >>> t = pl.DataFrame({"arrival_s": [float(i) for i in range(1000)]})
    >>> 400 < thin(t, 0.5, seed=7).height < 600
    True
    """
    mask = keep_mask(requests.height, sample, seed, offset)
    return requests if bool(mask.all()) else requests.filter(pl.Series(mask))


__all__ = ["keep_mask", "mean_rate_per_s", "rate_factor", "scale_time", "scale_to_rate", "thin", "window"]
