"""The grid of step shapes a measured source is asked at, and the table the core reads.

Prefill: sequences x computed tokens per sequence x cached tokens per sequence; decode: sequences x context
tokens per sequence. Points are whole numbers spaced geometrically (sequences by 2, prompt tokens by 2^¼,
cached tokens by 2 from 16, decode batch by 2^½, context by 2^¼), wide enough for any step a scenario takes
(beyond the last point the core continues the last segment).

The core interpolates multilinearly in the coordinates themselves (``rust/kvwire-core/src/cost/table.rs``):
exact at grid points, exact for a + b·x + c·y + d·x·y, and the error elsewhere comes from the curvature the
grid does not resolve. :func:`centres` gives the points midway (geometrically) between grid points where that
error is largest; the bound stated with a table is the largest error measured there.

>>> prefill_axes()[0][:12]
[1, 2, 3, 4, 5, 6, 7, 8, 10, 11, 13, 16]
>>> geometric(1, 16, 2)
[1, 2, 4, 8, 16]
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
from collections.abc import Callable
from typing import Any

#: Bumped when what a grid point means changes (the points themselves are in :func:`fingerprint`).
GRID_VERSION = 1
#: The most tokens per sequence the grid covers (beyond: the last segment continued).
MAX_TOKENS = 131_072


def geometric(lo: int, hi: int, ratio: float) -> list[int]:
    """Whole numbers from ``lo`` to ``hi`` (both included) spaced by ``ratio``, without repeats."""
    out: list[int] = []
    k = 0
    while True:
        v = round(lo * ratio**k)
        if v > hi:
            break
        if not out or v > out[-1]:
            out.append(v)
        k += 1
    if out[-1] != hi:
        out.append(hi)
    return out


def prefill_axes() -> list[list[int]]:
    """Sequences, computed tokens per sequence, cached tokens per sequence."""
    return [geometric(1, 1024, 2**0.25), geometric(1, MAX_TOKENS, 2**0.25), [0, *geometric(16, MAX_TOKENS, 2)]]


def decode_axes() -> list[list[int]]:
    """Sequences, context tokens per sequence."""
    return [geometric(1, 2048, 2**0.25), geometric(1, MAX_TOKENS, 2**0.25)]


def fingerprint() -> str:
    """A hash of the grid's points: part of every cache key, so that a grid with other points misses."""
    text = json.dumps([prefill_axes(), decode_axes(), GRID_VERSION])
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def fill(axes: list[list[int]], f: Callable[..., float]) -> list[float]:
    """``f`` (seconds) at every point of ``axes``, row-major (the last axis fastest)."""
    values: list[float] = []

    def walk(prefix: list[int], k: int) -> None:
        if k == len(axes):
            values.append(f(*prefix))
            return
        for v in axes[k]:
            walk([*prefix, v], k + 1)

    walk([], 0)
    return values


def centres(axis: list[int]) -> list[int]:
    """Whole numbers geometrically midway between neighbouring points (where neighbours are ≥ 2 apart)."""
    out = []
    for a, b in itertools.pairwise(axis):
        m = round(math.sqrt(a * b)) if a > 0 else round(b / 2)
        if a < m < b:
            out.append(m)
    return out


def table(prefill: list[float], decode: list[float]) -> dict[str, Any]:
    """The core's ``TableSpec``: both grids with their axes."""
    return {
        "prefill": {"axes": [[float(v) for v in a] for a in prefill_axes()], "values_s": prefill},
        "decode": {"axes": [[float(v) for v in a] for a in decode_axes()], "values_s": decode},
    }


__all__ = [
    "GRID_VERSION",
    "MAX_TOKENS",
    "centres",
    "decode_axes",
    "fill",
    "fingerprint",
    "geometric",
    "prefill_axes",
    "table",
]
