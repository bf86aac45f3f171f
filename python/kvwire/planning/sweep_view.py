"""What a sweep plot shows, worked out from the sweep table before anything is drawn: the rows kept by the
filters (``where``), the x field (numeric or categorical, its values in a meaningful order), the panels
(``facet``), the lines (``by``), one value per point with its interval over replicates, and a refusal naming
the fields when a line would join different configurations. No matplotlib here: :mod:`kvwire.planning.plot`
draws a :class:`SweepView`.

Orders: numbers numerically; link presets by bandwidth (bandwidth x NICs x NIC efficiency from
:func:`kvwire.presets.catalog`, slowest first); ``false`` before ``true``; other text in the sweep's own order
(the order of the grid's values).

>>> import polars as pl
>>> t = pl.DataFrame({"point": [0, 1, 2], "link": ["nvlink4", "eth-25g", "ib-ndr"], "replicate": [0, 0, 0],
...                   "slo.attainment": [1.0, 0.5, 0.9]})
>>> v = sweep_view(t, "link", ["slo.attainment"])
>>> v.categorical, v.categories
(True, ['eth-25g', 'ib-ndr', 'nvlink4'])
"""

from __future__ import annotations

import contextlib
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import polars as pl

from kvwire.errors import PlotError
from kvwire.planning.intervals import interval
from kvwire.presets import catalog

#: Most lines in one panel (more cannot be told apart: colours, markers and dashes run out).
MAX_SERIES = 12
#: Most panels of one faceted plot.
MAX_FACETS = 12
#: How lines may be combined when fields vary beyond ``x``, ``by`` and ``facet``.
AGGREGATES = ("mean", "min", "max")
#: What ``metrics.first_token`` says the TTFT columns end at.
FIRST_TOKEN_WORDS = {
    "prefill": 'TTFT ends at the first token out of prefill (metrics.first_token "prefill")',
    "decode": 'TTFT ends when the decode side has the KV cache (metrics.first_token "decode")',
}
#: The same, short, for a panel's title.
FIRST_TOKEN_SHORT = {"prefill": "first token out of prefill", "decode": "first token once decode has the KV"}


def swept_fields(table: pl.DataFrame) -> list[str]:
    """The swept columns of a sweep table: those between ``point`` and ``replicate`` ([] for another table)."""
    cols = table.columns
    if "replicate" not in cols:
        return []
    start = cols.index("point") + 1 if "point" in cols and cols.index("point") < cols.index("replicate") else 0
    return cols[start : cols.index("replicate")]


def value_text(v: Any) -> str:
    """A swept value as a label: ``8`` for 8.0, ``0.25``, ``ib-ndr``, ``true``."""
    if isinstance(v, bool):
        return str(v).lower()
    if isinstance(v, float) and v.is_integer() and abs(v) < 1e15:
        return str(int(v))
    if isinstance(v, float):
        return f"{v:g}"
    return "none" if v is None else str(v)


def link_bandwidth(value: Any) -> float | None:
    """Aggregate bandwidth (GB/s) of a link value: a preset name, or the JSON text of ``{"preset": ...}``
    with its overrides; None when not a known link."""
    links = catalog()["links"]
    spec: dict[str, Any] = {}
    if isinstance(value, str) and value in links:
        spec = dict(links[value])
    elif isinstance(value, str) and value.startswith("{"):
        try:
            d = json.loads(value)
        except json.JSONDecodeError:
            return None
        if not isinstance(d, dict) or d.get("preset") not in links:
            return None
        spec = {**links[d["preset"]], **d}
    else:
        return None
    try:
        eff = spec.get("nic_efficiency")
        return float(spec["bandwidth_gb_per_s"]) * float(spec.get("nics", 1)) * (1.0 if eff is None else float(eff))
    except (KeyError, TypeError, ValueError):
        return None


def _is_link_field(name: str) -> bool:
    return name in ("link", "link.preset") or name.endswith((".link", ".link.preset"))


def _number(text: str) -> float | None:
    try:
        x = float(text)
    except ValueError:
        return None
    return x if math.isfinite(x) else None


def value_order(name: str, values: Sequence[Any]) -> list[Any]:
    """The distinct ``values`` of field ``name`` in the order a reader expects (see the module docstring).

    >>> value_order("link", ["ib-ndr", "nvlink4", "eth-25g", "pcie5"])
    ['eth-25g', 'ib-ndr', 'pcie5', 'nvlink4']
    >>> value_order("x", ["10", "9", "100"])
    ['9', '10', '100']
    """
    distinct = list(dict.fromkeys(values))
    present = [v for v in distinct if v is not None]
    tail = [None] if None in distinct else []
    if all(isinstance(v, bool) for v in present):
        return sorted(present) + tail
    if all(isinstance(v, int | float) and not isinstance(v, bool) for v in present):
        return sorted(present) + tail
    if _is_link_field(name):
        known = [(link_bandwidth(v), i, v) for i, v in enumerate(present)]
        ranked = sorted((bw, i, v) for bw, i, v in known if bw is not None)
        return [v for _, _, v in ranked] + [v for bw, _, v in known if bw is None] + tail
    numbers = [_number(str(v)) for v in present]
    if present and all(n is not None for n in numbers):
        return [v for _, v in sorted(zip(numbers, present, strict=True), key=lambda p: p[0])] + tail  # type: ignore[arg-type,return-value]
    return present + tail


def _match(table: pl.DataFrame, name: str, value: Any) -> pl.Expr:
    """The filter ``name == value``, the value typed as the user wrote it ("8" for a numeric column)."""
    dtype = table.schema[name]
    c = pl.col(name)
    if value is None or (isinstance(value, str) and value.lower() in ("none", "null")):
        return c.is_null()
    if dtype == pl.Boolean:
        text = str(value).lower()
        if text not in ("true", "false"):
            raise PlotError(f"where: {name}={value}: {name} is true or false", name)
        return c == (text == "true")
    if dtype.is_numeric():
        x = value if isinstance(value, int | float) and not isinstance(value, bool) else _number(str(value))
        if x is None:
            raise PlotError(f"where: {name}={value}: {name} holds numbers", name)
        return c.cast(pl.Float64) == float(x)
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
    if isinstance(value, str) and value[:1] in "{[" and table.filter(c == value).height == 0:
        with contextlib.suppress(json.JSONDecodeError):  # JSON written with other spacing or key order
            text = json.dumps(json.loads(value), sort_keys=True)
    return c.cast(pl.String) == text


def parse_where(where: Mapping[str, Any] | Sequence[str] | str | None) -> list[tuple[str, Any]]:
    """``{"link": "ib-ndr"}`` or ``["link=ib-ndr", "decode.instances=2"]`` -> [(field, value)]."""
    if where is None:
        return []
    if isinstance(where, Mapping):
        return [(str(k), v) for k, v in where.items()]
    items = [where] if isinstance(where, str) else list(where)
    out: list[tuple[str, Any]] = []
    for item in items:
        if not isinstance(item, str) or "=" not in item:
            raise PlotError(f"where: expected FIELD=VALUE, got {item!r}", "where")
        name, _, value = item.partition("=")
        out.append((name.strip(), value.strip()))
    return out


def filter_rows(table: pl.DataFrame, where: Mapping[str, Any] | Sequence[str] | str | None) -> pl.DataFrame:
    """The rows of ``table`` with every ``where`` value (see :func:`parse_where`).

    Raises:
        PlotError: a field the table lacks (naming it and listing the swept fields), a value of the wrong kind,
            or a value no row has (listing the values there are).
    """
    for name, value in parse_where(where):
        if name not in table.columns:
            raise PlotError(f"where: no field {name!r} in the sweep table; the swept fields are {_known(table)}", name)
        kept = table.filter(_match(table, name, value))
        if kept.height == 0:
            there = ", ".join(value_text(v) for v in value_order(name, table[name].to_list()))
            raise PlotError(f"where: no row has {name}={value}; {name} is one of: {there}", name)
        table = kept
    return table


def _known(table: pl.DataFrame) -> str:
    swept = swept_fields(table)
    return ", ".join(swept) if swept else "(none: not a sweep table)"


@dataclass
class Line:
    """One line (or set of points) of a panel: the ``by`` values, its label, and per x value its value and
    interval (NaN interval ends when there are no replicates or the points were aggregated)."""

    key: tuple[Any, ...]
    label: str
    x: list[Any]
    centre: np.ndarray
    low: np.ndarray
    high: np.ndarray


@dataclass
class SweepView:
    """What to draw: see :func:`sweep_view`."""

    x: str
    metrics: list[str]
    categorical: bool
    categories: list[Any]
    by: list[str]
    facet: str | None
    facet_values: list[Any]
    where: list[tuple[str, Any]]
    aggregate: str | None
    aggregated_over: list[str]
    replicated: bool
    first_token: str | None
    points: pl.DataFrame = field(repr=False)

    def lines(self, metric: str, facet_value: Any = None) -> list[Line]:
        """The lines of one panel, in legend order (the ``by`` values ordered as :func:`value_order`)."""
        pts = self.points
        if self.facet is not None:
            pts = pts.filter(pl.col(self.facet).is_null() if facet_value is None else pl.col(self.facet) == facet_value)
        keys: list[tuple[Any, ...]] = pts.select(self.by).unique(maintain_order=True).rows() if self.by else [()]
        orders = [value_order(c, self.points[c].to_list()) for c in self.by]
        keys.sort(key=lambda k: tuple(o.index(v) for o, v in zip(orders, k, strict=True)))
        xs_order = self.categories if self.categorical else None
        out = []
        for key in keys:
            sel = pts
            for c, v in zip(self.by, key, strict=True):
                sel = sel.filter(pl.col(c).is_null() if v is None else pl.col(c) == v)
            xs = sel[self.x].to_list()
            rank: list[Any] = [xs_order.index(v) for v in xs] if xs_order is not None else xs
            idx = sorted(range(len(xs)), key=lambda i: (rank[i] is None, rank[i] or 0))
            cols = {s: sel[f"{metric}:{s}"].cast(pl.Float64).to_numpy()[idx] for s in ("centre", "low", "high")}
            label = ", ".join(f"{c}={value_text(v)}" for c, v in zip(self.by, key, strict=True))
            out.append(Line(tuple(key), label, [xs[i] for i in idx], cols["centre"], cols["low"], cols["high"]))
        return out


def _first_token(table: pl.DataFrame, given: str | None) -> str | None:
    if given is not None:
        return given
    for c in table.columns:
        if c.rsplit(".", 1)[-1] == "first_token" and table.schema[c] == pl.String:
            values = table[c].drop_nulls().unique().to_list()
            if len(values) == 1:
                return str(values[0])
            if values:
                return "varies"
    return None


def _points(table: pl.DataFrame, swept: list[str], metrics: list[str], replicated: bool) -> pl.DataFrame:
    """One row per point: its swept values and, per metric, ``:centre`` (the mean over replicates) and the
    interval ``:low``/``:high`` (NaN without replicates)."""
    key = ["point"] if "point" in table.columns else swept
    measured = "requests.measured" in table.columns
    groups = table.group_by(key, maintain_order=True).agg(
        *[pl.col(c).first() for c in swept if c not in key],
        *[pl.col(m).cast(pl.Float64) for m in metrics],
        *([pl.col("requests.measured").cast(pl.Float64).alias("__measured")] if measured else []),
    )
    cols: dict[str, list[float]] = {f"{m}:{s}": [] for m in metrics for s in ("centre", "low", "high")}
    for row in groups.iter_rows(named=True):
        m_counts = np.array(row["__measured"], dtype=float) if measured else None
        for m in metrics:
            v = np.array([math.nan if x is None else x for x in row[m]], dtype=float)
            if replicated:
                c, lo, hi = interval(m, v, m_counts)
            else:
                finite = v[np.isfinite(v)]
                c, lo, hi = (float(finite.mean()) if finite.size else math.nan), math.nan, math.nan
            cols[f"{m}:centre"].append(c)
            cols[f"{m}:low"].append(lo)
            cols[f"{m}:high"].append(hi)
    return groups.select(swept).with_columns(pl.Series(k, v, dtype=pl.Float64) for k, v in cols.items())


def sweep_view(
    table: pl.DataFrame,
    x: str | None,
    metrics: Sequence[str],
    *,
    by: str | Sequence[str] | None = None,
    facet: str | None = None,
    where: Mapping[str, Any] | Sequence[str] | str | None = None,
    aggregate: str | None = None,
    first_token: str | None = None,
    max_series: int = MAX_SERIES,
) -> SweepView:
    """Work out a sweep plot (the arguments of :func:`kvwire.planning.plot.metric_vs`).

    Raises:
        PlotError: an unknown field (naming it and listing the swept ones), a filter that keeps nothing (listing
            the values there are), fields that vary beyond ``x``, ``by`` and ``facet`` without ``aggregate``
            (naming them), more than ``max_series`` lines or :data:`MAX_FACETS` panels.
    """
    if not isinstance(table, pl.DataFrame):
        raise PlotError("table: expected a sweep table (a polars DataFrame)", "table")
    metrics = list(metrics)
    if not metrics:
        raise PlotError("metrics: name at least one summary column", "metrics")
    if aggregate is not None and aggregate not in AGGREGATES:
        raise PlotError(f"aggregate: expected one of {', '.join(AGGREGATES)}, got {aggregate!r}", "aggregate")
    if isinstance(max_series, bool) or not isinstance(max_series, int) or max_series < 1:
        raise PlotError(f"max_series: expected a whole number >= 1, got {max_series!r}", "max_series")
    if table.height == 0:
        raise PlotError("table: the sweep table has no rows to draw", "table")
    if first_token not in (None, "prefill", "decode", "varies"):
        raise PlotError(f"first_token: expected 'prefill' or 'decode', got {first_token!r}", "first_token")
    swept = swept_fields(table)
    filters = parse_where(where)
    table = filter_rows(table, where)
    fixed = {n for n, _ in filters}
    if x is None:
        x = next((c for c in swept if c not in fixed and c != facet), swept[0] if swept else None)
        if x is None:
            raise PlotError("x: name the field for the x axis (the table has no swept fields)", "x")
    for name, what in ((x, "x"), (facet, "facet"), *((m, "metrics") for m in metrics)):
        if name is not None and name not in table.columns:
            raise PlotError(f"{name}: no such column in the sweep table ({what}); the swept fields are "
                            f"{_known(table)}", name)  # fmt: skip
    for m in metrics:
        if not (table.schema[m].is_numeric() or table.schema[m] == pl.Boolean or table.schema[m] == pl.Null):
            raise PlotError(f"metrics: {m} holds {table.schema[m]} values, not numbers; name a numeric summary "
                            f"column", m)  # fmt: skip
    if facet == x:
        raise PlotError(f"facet: {facet} is already the x axis", "facet")
    varying = {c for c in table.columns if c in swept or c == x} - fixed
    varying = {c for c in varying if table[c].n_unique() > 1}
    if by is None:
        by = [c for c in swept if c not in (x, facet) and c in varying]
    by = [by] if isinstance(by, str) else list(by)
    for c in by:
        if c not in table.columns:
            raise PlotError(f"by: no field {c!r} in the sweep table; the swept fields are {_known(table)}", c)
        if c in (x, facet):
            raise PlotError(f"by: {c} is already the {'x axis' if c == x else 'facet'}", "by")
    rest = [c for c in swept if c not in (x, facet, *by) and c in varying]
    if rest and aggregate is None:
        shown = {c: ", ".join(value_text(v) for v in value_order(c, table[c].to_list())[:6]) for c in rest}
        detail = "; ".join(f"{c} takes {table[c].n_unique()} values ({shown[c]})" for c in rest)
        first = value_text(value_order(rest[0], table[rest[0]].to_list())[0])
        them = "them" if len(rest) > 1 else "it"
        raise PlotError(
            f"by: a line would join different configurations: {detail}. Draw one panel per value (facet, "
            f"--facet {rest[0]}), keep one value (where, --where {rest[0]}={first}), add {them} to by (--by), or "
            f"combine the points over {them} (aggregate, --aggregate {'|'.join(AGGREGATES)})",
            "by",
        )
    replicated = "replicate" in table.columns and table["replicate"].n_unique() > 1
    pts = _points(table, [c for c in dict.fromkeys([*swept, x, *by, *([facet] if facet else [])])], metrics,
                  replicated)  # fmt: skip
    if rest:
        group = [*dict.fromkeys([x, *by, *([facet] if facet else [])])]
        fn = {"mean": pl.mean, "min": pl.min, "max": pl.max}[aggregate]  # type: ignore[index]
        pts = pts.group_by(group, maintain_order=True).agg(
            *[fn(f"{m}:centre") for m in metrics],
            *[pl.lit(math.nan).alias(f"{m}:{s}") for m in metrics for s in ("low", "high")],
        )
    n_series = pts.select(by).n_unique() if by else 1
    if n_series > max_series:
        counts = ", ".join(f"{c} ({pts[c].n_unique()} values)" for c in by)
        raise PlotError(
            f"by: {n_series} lines per panel are more than {max_series} one can tell apart ({counts}); draw one "
            f"panel per value of one of them (facet, --facet {by[0]}) or keep some values (where, --where "
            f"{by[0]}=VALUE)",
            "by",
        )
    facet_values = value_order(facet, pts[facet].to_list()) if facet else [None]
    if len(facet_values) > MAX_FACETS:
        raise PlotError(f"facet: {facet} takes {len(facet_values)} values, more than {MAX_FACETS} panels; "
                        f"keep some (where, --where {facet}=VALUE) or draw it as lines (by)", "facet")  # fmt: skip
    dtype = pts.schema[x]
    categorical = not dtype.is_numeric()
    categories = value_order(x, pts[x].to_list()) if categorical else []
    return SweepView(
        x=x, metrics=metrics, categorical=categorical, categories=categories, by=by, facet=facet,
        facet_values=facet_values, where=filters, aggregate=aggregate if rest else None, aggregated_over=rest,
        replicated=replicated and not rest, first_token=_first_token(table, first_token), points=pts,
    )  # fmt: skip


__all__ = [
    "AGGREGATES",
    "FIRST_TOKEN_SHORT",
    "FIRST_TOKEN_WORDS",
    "MAX_FACETS",
    "MAX_SERIES",
    "Line",
    "SweepView",
    "filter_rows",
    "link_bandwidth",
    "parse_where",
    "sweep_view",
    "swept_fields",
    "value_order",
    "value_text",
]
