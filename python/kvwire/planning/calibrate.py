"""Calibration: fit a device preset's efficiencies, the per-step overhead and the scale-up link to measured step
times, so that the core's roofline reproduces them (``docs/concepts/calibration.md``).

The parameters (:func:`parameters`): ``flops_eff`` and ``bw_eff`` of the device, ``cost.step_overhead_s``, and
for each tensor-parallel degree ``n`` measured (``1 < n ≤`` the device's scale-up domain) ``scale_up_eff_tp{n}``,
the share of the scale-up link's bandwidth the TP all-reduces get. Every prediction is the core's, through
:func:`kvwire.results.steps.step_times`, on a colocated pool of the row's model on the device (inline, with the
candidate values) with ``parallel = {"tp": tp}``: one call per (model, tp) group and candidate.

The fit minimises the soft-L1 loss of the log ratio r = ln(predicted / measured),
rho(r) = 2 s² (√(1 + (r/s)²) - 1) with s = :data:`LOSS_SCALE` (0.1, about 10%): quadratic for small errors, linear
for large ones, so a few wild rows (an outlier, a shape the roofline cannot express) pull the fit much less than
under least squares. Each phase weighs the same (the mean of rho over its rows, summed over the phases). The
minimiser is Nelder-Mead (written here, numpy only) over the parameters mapped into their bounds (each bound
pair on a log scale, through a logistic function), restarted from its best point until a restart gains nothing.

K-fold held-out error: the distinct step shapes (phase, model, tp, batch, prompt and context tokens: a shape's
repeated measurements stay together) are dealt into ``folds`` folds in an order drawn from ``seed``; each fold is
predicted by a fit on the others, from the same start.

>>> import polars as pl
>>> [p.name for p in parameters("a100", [1, 8])]
['flops_eff', 'bw_eff', 'step_overhead_s', 'scale_up_eff_tp8']
"""

from __future__ import annotations

import hashlib
import json
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from kvwire._core import __version__
from kvwire.errors import MeasurementError, ScenarioError
from kvwire.presets import catalog
from kvwire.results.steps import step_times
from kvwire.timing import calibration as calfile
from kvwire.timing.measured import check_table, file_format, read_measured

#: The soft-L1 loss's scale, in log units (r = 0.1 is a prediction 10.5% high).
LOSS_SCALE = 0.1
#: The most candidate evaluations one fit may take.
MAX_EVALS = 4000
#: Bounds of the fitted parameters (lower, upper).
BOUNDS = {"flops_eff": (0.01, 1.0), "bw_eff": (0.01, 1.0), "step_overhead_s": (1e-6, 1.0), "scale_up_eff": (1e-3, 1.0)}
#: The default per-step overhead (the scenario default's ``cost.step_overhead_s``).
DEFAULT_OVERHEAD_S = 0.0005


@dataclass(frozen=True)
class Param:
    """One fitted parameter: its name, bounds, the preset's value and unit."""

    name: str
    lower: float
    upper: float
    default: float
    unit: str


def _scale_up(device: str) -> dict[str, Any] | None:
    """The preset's scale-up link as figures: ``{"domain", "bandwidth_gb_per_s", "latency_us"}``."""
    cat = catalog()
    su = cat["devices"][device].get("scale_up")
    if not isinstance(su, dict):
        return None
    if "link" in su:
        link = cat["links"][su["link"]]
        return {"domain": su["domain"], "bandwidth_gb_per_s": link["bandwidth_gb_per_s"],
                "latency_us": link["latency_us"], "link": su["link"]}  # fmt: skip
    return {k: su[k] for k in ("domain", "bandwidth_gb_per_s", "latency_us")}


def significant(x: float, digits: int = 4) -> float:
    """``x`` rounded to ``digits`` significant digits (what a calibration file keeps).

    >>> significant(0.0228808), significant(100.2349807)
    (0.02288, 100.2)
    """
    if x == 0 or not math.isfinite(x):
        return x
    return round(x, digits - 1 - math.floor(math.log10(abs(x))))


def bandwidth(eff: float, nominal: float) -> float:
    """The scale-up bandwidth, GB/s, of an efficiency ``eff`` of the link's ``nominal`` (to 6 digits)."""
    return significant(eff * nominal, 6)


def parameters(device: str, tps: Sequence[int]) -> list[Param]:
    """The parameters a calibration of ``device`` fits for rows of tensor-parallel degrees ``tps``."""
    preset = catalog()["devices"][device]
    out = [
        Param("flops_eff", *BOUNDS["flops_eff"], float(preset["flops_eff"]), "of peak FLOP/s"),
        Param("bw_eff", *BOUNDS["bw_eff"], float(preset["bw_eff"]), "of HBM bandwidth"),
        Param("step_overhead_s", *BOUNDS["step_overhead_s"], DEFAULT_OVERHEAD_S, "s per step"),
    ]
    su = _scale_up(device)
    for tp in sorted(set(tps)):
        if su is not None and 1 < tp <= su["domain"]:
            name = su.get("link", "scale-up link")
            unit = f"of {name}'s {su['bandwidth_gb_per_s']:g} GB/s"
            out.append(Param(f"scale_up_eff_tp{tp}", *BOUNDS["scale_up_eff"], 1.0, unit))
    return out


# --------------------------------------------------------------------------------------------------
# The minimiser


def _to_values(u: np.ndarray, params: Sequence[Param]) -> np.ndarray:
    z = 1.0 / (1.0 + np.exp(-np.clip(u, -40, 40)))
    lo = np.array([p.lower for p in params])
    hi = np.array([p.upper for p in params])
    out: np.ndarray = lo * (hi / lo) ** z
    return out


def _to_u(values: Sequence[float], params: Sequence[Param]) -> np.ndarray:
    z = np.array([math.log(v / p.lower) / math.log(p.upper / p.lower) for v, p in zip(values, params, strict=True)])
    z = np.clip(z, 0.03, 0.97)  # start inside the bounds, where the logistic still moves
    out: np.ndarray = np.log(z / (1 - z))
    return out


def nelder_mead(
    f: Callable[[np.ndarray], float],
    x0: np.ndarray,
    step: float = 0.6,
    xtol: float = 1e-4,
    ftol: float = 1e-10,
    max_evals: int = MAX_EVALS,
) -> tuple[np.ndarray, float, int]:
    """Minimise ``f`` from ``x0`` with Nelder-Mead (reflection 1, expansion 2, contraction ½, shrink ½; Lagarias
    et al., SIAM J. Optim. 9(1), 1998), restarted from the best point with a fresh simplex until a restart no
    longer improves ``f`` by more than ``ftol``. Returns the best point, its value and the evaluations used.

    >>> x, fx, n = nelder_mead(lambda v: float((v[0] - 1) ** 2 + 10 * (v[1] + 2) ** 2), np.zeros(2))
    >>> [round(float(c), 3) for c in x], fx < 1e-8
    ([1.0, -2.0], True)
    """
    evals = 0

    def call(x: np.ndarray) -> float:
        nonlocal evals
        evals += 1
        v = f(x)
        return v if math.isfinite(v) else math.inf

    n = len(x0)
    best_x, best_f = np.array(x0, dtype=float), call(np.array(x0, dtype=float))
    while evals < max_evals:
        simplex = [best_x] + [best_x + step * np.eye(n)[i] for i in range(n)]
        values = [best_f] + [call(x) for x in simplex[1:]]
        while evals < max_evals:
            order = np.argsort(values, kind="stable")
            simplex = [simplex[i] for i in order]
            values = [values[i] for i in order]
            spread = max(float(np.max(np.abs(x - simplex[0]))) for x in simplex[1:])
            if spread < xtol and values[-1] - values[0] <= ftol * (1 + abs(values[0])):
                break
            centre = np.mean(simplex[:-1], axis=0)
            worst = simplex[-1]
            xr = centre + (centre - worst)
            fr = call(xr)
            if fr < values[0]:
                xe = centre + 2 * (centre - worst)
                fe = call(xe)
                simplex[-1], values[-1] = (xe, fe) if fe < fr else (xr, fr)
            elif fr < values[-2]:
                simplex[-1], values[-1] = xr, fr
            else:
                outside = fr < values[-1]
                xc = centre + 0.5 * ((xr if outside else worst) - centre)
                fc = call(xc)
                if fc < (fr if outside else values[-1]):
                    simplex[-1], values[-1] = xc, fc
                else:
                    simplex = [simplex[0]] + [simplex[0] + 0.5 * (x - simplex[0]) for x in simplex[1:]]
                    values = [values[0]] + [call(x) for x in simplex[1:]]
        i = int(np.argmin(values))
        gained = best_f - values[i]
        if values[i] < best_f:
            best_x, best_f = simplex[i], values[i]
        if gained <= ftol * (1 + abs(best_f)):
            break
        step = max(step * 0.5, 10 * xtol)
    return best_x, best_f, evals


def soft_l1(r: np.ndarray, scale: float = LOSS_SCALE) -> np.ndarray:
    """rho(r) = 2 s² (√(1 + (r/s)²) - 1): r² near 0, 2 s |r| far from it."""
    out: np.ndarray = 2 * scale**2 * (np.sqrt(1 + (r / scale) ** 2) - 1)
    return out


# --------------------------------------------------------------------------------------------------
# Predictions


@dataclass
class _Group:
    """The distinct shapes of one (model, tp) group and where each row's shape is."""

    model: str
    tp: int
    shapes: pl.DataFrame
    rows: np.ndarray  # row indices into the table
    shape_of_row: np.ndarray  # shape index of each of those rows


class _Predictor:
    """Step times of a table's rows for candidate parameters, one ``step_times`` call per (model, tp) group."""

    def __init__(self, table: pl.DataFrame, device: str, params: Sequence[Param]) -> None:
        self.table = table
        self.device = device
        self.params = list(params)
        self.scale_up = _scale_up(device)
        self.groups: list[_Group] = []
        keyed = table.with_row_index("_row")
        for (model, tp), sub in keyed.group_by(["model", "tp"], maintain_order=True):
            shapes = sub.select("phase", "batch", "prompt_tokens", "context_tokens").unique(maintain_order=True)
            index = {tuple(r): i for i, r in enumerate(shapes.iter_rows())}
            of_row = [index[tuple(r)] for r in sub.select(shapes.columns).iter_rows()]
            self.groups.append(_Group(str(model), int(tp), shapes, sub["_row"].to_numpy(), np.array(of_row)))
        self.calls = 0

    def scenario(self, values: Mapping[str, float], model: str, tp: int) -> dict[str, Any]:
        dev: dict[str, Any] = {"preset": self.device, "flops_eff": values["flops_eff"], "bw_eff": values["bw_eff"]}
        eff = values.get(f"scale_up_eff_tp{tp}")
        if eff is not None and self.scale_up is not None:
            dev["scale_up"] = {
                "domain": self.scale_up["domain"],
                "bandwidth_gb_per_s": bandwidth(eff, self.scale_up["bandwidth_gb_per_s"]),
                "latency_us": self.scale_up["latency_us"],
            }
        return {
            "model": model,
            "mode": "colocated",
            "colocated": {"device": dev, "parallel": {"tp": tp}, "devices_per_instance": tp},
            "cost": {"step_overhead_s": values["step_overhead_s"]},
        }

    def __call__(self, values: Mapping[str, float], groups: Sequence[int] | None = None) -> np.ndarray:
        """Predicted time, s, of every row (NaN for rows outside ``groups``)."""
        out = np.full(self.table.height, np.nan)
        for gi in range(len(self.groups)) if groups is None else groups:
            g = self.groups[gi]
            self.calls += 1
            try:
                t = step_times(self.scenario(values, g.model, g.tp), g.shapes)["time_s"].to_numpy()
            except ScenarioError as e:
                raise ScenarioError(f"{g.model} at tp {g.tp} on {self.device}: {e}", e.path) from None
            out[g.rows] = t[g.shape_of_row]
        return out

    def defaults(self) -> dict[str, float]:
        return {p.name: p.default for p in self.params}


def _objective(pred: _Predictor, measured: np.ndarray, phases: np.ndarray, mask: np.ndarray) -> Callable[..., float]:
    """The loss of the rows in ``mask`` as a function of the unconstrained vector."""
    groups = sorted({gi for gi, g in enumerate(pred.groups) if mask[g.rows].any()})
    phase_masks = [mask & (phases == ph) for ph in ("prefill", "decode")]
    phase_masks = [m for m in phase_masks if m.any()]
    log_meas = np.log(measured)

    def f(u: np.ndarray) -> float:
        values = dict(zip([p.name for p in pred.params], _to_values(u, pred.params), strict=True))
        t = pred(values, groups)
        r = np.log(t) - log_meas
        return float(sum(np.mean(soft_l1(r[m])) for m in phase_masks))

    return f


def _fit(pred: _Predictor, measured: np.ndarray, phases: np.ndarray, mask: np.ndarray) -> dict[str, float]:
    f = _objective(pred, measured, phases, mask)
    u0 = _to_u([p.default for p in pred.params], pred.params)
    u, _, _ = nelder_mead(f, u0)
    return dict(zip([p.name for p in pred.params], (float(v) for v in _to_values(u, pred.params)), strict=True))


# --------------------------------------------------------------------------------------------------
# The result


def _stats(err: np.ndarray) -> tuple[float, float, float]:
    a = np.abs(err[np.isfinite(err)])
    if a.size == 0:
        return (math.nan, math.nan, math.nan)
    return (float(np.median(a)), float(np.percentile(a, 90)), float(np.max(a)))


def error_table(table: pl.DataFrame, columns: Mapping[str, str]) -> pl.DataFrame:
    """Median, p90 and max of |error %| of each ``columns`` (label → a column of signed % errors of ``table``), per
    phase, model and tp, then per phase over all (model ``"all"``, tp null)."""
    records = []
    keys: list[tuple[str, str | None, int | None]] = []
    for ph in ("prefill", "decode"):
        sub = table.filter(pl.col("phase") == ph)
        if sub.height == 0:
            continue
        for m, tp in sub.select("model", "tp").unique(maintain_order=True).sort("model", "tp").iter_rows():
            keys.append((ph, m, tp))
        keys.append((ph, None, None))
    for ph, m, tp in keys:
        sub = table.filter(pl.col("phase") == ph)
        if m is not None:
            sub = sub.filter((pl.col("model") == m) & (pl.col("tp") == tp))
        rec: dict[str, Any] = {"phase": ph, "model": m or "all", "tp": tp, "rows": sub.height}
        for label, col in columns.items():
            med, p90, mx = _stats(sub[col].to_numpy())
            rec |= {f"{label}_median_pct": med, f"{label}_p90_pct": p90, f"{label}_max_pct": mx}
        records.append(rec)
    return pl.DataFrame(records, schema_overrides={"tp": pl.Int64})


def _pct(pred: pl.Expr) -> pl.Expr:
    return (pred / pl.col("measured_s") - 1) * 100


@dataclass
class CalibrationResult:
    """What :func:`calibrate` fitted and how well it fits.

    Attributes:
        base_device: the device preset fitted.
        device: the fitted device, an inline device usable wherever a device goes (``scale_up``: the geometric
            mean of the per-tp fits, when there were any).
        scale_up_by_tp: the fitted scale-up link per tensor-parallel degree measured (``{8: {...}}``).
        step_overhead_s: the fitted ``cost.step_overhead_s``.
        fit: one row per parameter: ``parameter``, ``value``, ``default`` (the preset's), ``unit``, ``lower``,
            ``upper``, ``at_bound`` (within 0.1% of a bound: the data push it there).
        errors: per phase, model and tp (then per phase over all, model ``"all"``): ``rows`` and the median, p90
            and max absolute % error of the default device (``default_*``), of the fit on all rows (``in_*``)
            and of the k-fold held-out predictions (``held_out_*``; null with ``folds=0``).
        table: one row per measurement: its shape, ``measured_s``, ``default_s``, ``calibrated_s``,
            ``held_out_s`` and their signed % errors, and ``fold``.
        folds: the number of folds; seed: their seed; rows: measurements used; source: the measurement file's
            name, format and SHA-256 (``None`` for a table given in memory).
        fit_s: the wall-clock time of the whole calibration (the k folds included), s.
    """

    base_device: str
    device: dict[str, Any]
    scale_up_by_tp: dict[int, dict[str, Any]]
    step_overhead_s: float
    fit: pl.DataFrame
    errors: pl.DataFrame
    table: pl.DataFrame
    folds: int
    seed: int
    rows: int
    source: dict[str, Any] | None
    fit_s: float = field(default=0.0, compare=False)

    def held_out(self) -> dict[str, dict[str, float]]:
        """The held-out median and p90 absolute % error per phase (``{}`` without folds)."""
        out = {}
        for r in self.errors.filter(pl.col("model") == "all").iter_rows(named=True):
            if r["held_out_median_pct"] is not None and math.isfinite(r["held_out_median_pct"]):
                out[r["phase"]] = {"median": r["held_out_median_pct"], "p90": r["held_out_p90_pct"]}
        return out

    def document(self) -> dict[str, Any]:
        """The calibration file's content (:mod:`kvwire.timing.calibration`)."""

        def plain(v: Any) -> Any:
            return None if isinstance(v, float) and not math.isfinite(v) else v

        doc = {
            "kind": calfile.KIND,
            "version": calfile.VERSION,
            "base_device": self.base_device,
            "device": self.device,
            "scale_up_by_tp": {str(k): v for k, v in sorted(self.scale_up_by_tp.items())},
            "step_overhead_s": self.step_overhead_s,
            "fit": self.fit.to_dicts(),
            "errors": [{k: plain(v) for k, v in r.items()} for r in self.errors.to_dicts()],
            "held_out": self.held_out(),
            "method": {
                "residual": "ln(predicted / measured)",
                "loss": "soft_l1",
                "loss_scale": LOSS_SCALE,
                "weights": "each phase the same",
                "optimiser": "nelder-mead (bounded, log-logistic map), restarted",
                "folds": self.folds,
                "fold_unit": "distinct step shape",
                "seed": self.seed,
            },
            "rows": self.rows,
            "models": sorted(self.table["model"].unique().to_list()),
            "tps": sorted(int(t) for t in self.table["tp"].unique().to_list()),
            "source": self.source,
            "kvwire_version": __version__,
        }
        calfile.check_document(doc, "the calibration")
        return doc

    def write(self, path: str | Path) -> Path:
        """Write the calibration file (JSON) and return its path; ``cost.timing = {"source": "calibrated",
        "file": path}`` then puts the fitted device into a scenario's pools."""
        p = Path(path)
        p.write_text(json.dumps(self.document(), indent=2, allow_nan=False) + "\n", encoding="utf-8")
        return p


def _load(measured: str | Path | pl.DataFrame, fmt: str | None) -> tuple[pl.DataFrame, dict[str, Any] | None, str]:
    if isinstance(measured, pl.DataFrame):
        return check_table(measured), None, "measured"
    table = read_measured(measured, fmt)
    found = fmt or file_format(measured)
    digest = hashlib.sha256(Path(measured).read_bytes()).hexdigest()
    return table, {"file": Path(measured).name, "format": found, "sha256": digest}, str(measured)


def select_rows(table: pl.DataFrame, device: str, model: str | None, name: str) -> pl.DataFrame:
    """The rows measured on ``device`` (or on no named device) and of ``model`` (all models when ``None``),
    each model a kvwire preset.

    Raises:
        MeasurementError: no rows on the device or of the model, or a model that is not a kvwire preset (naming
            the row's line and the column).
    """
    devices = catalog()["devices"]
    if device not in devices:
        raise MeasurementError(f"device: unknown device preset {device!r}; known: {', '.join(sorted(devices))}",
                               "device", file=name)  # fmt: skip
    on = table.filter(pl.col("device").is_null() | (pl.col("device") == device))
    if on.height == 0:
        counts = table.group_by("device").len().sort("device")
        said = ", ".join(f"{d} ({n} rows)" for d, n in counts.iter_rows())
        raise MeasurementError(
            f"{name}: no rows measured on {device}; the file has {said}: give that device (--device)",
            "device",
            file=name,
        )
    if model is not None:
        mine = on.filter(pl.col("model") == model)
        if mine.height == 0:
            have = ", ".join(sorted(on["model"].unique().to_list()))
            raise MeasurementError(f"{name}: no rows of model {model!r}; the file has {have}", "model", file=name)
        on = mine
    known = catalog()["models"]
    for m in on["model"].unique(maintain_order=True).to_list():
        if m not in known:
            line = int(on.filter(pl.col("model") == m)["source_row"][0])
            raise MeasurementError(
                f"{name}, line {line}, column model: {m!r} is not a kvwire model preset (kvwire presets lists them); "
                "calibration times each row on the model it names",
                f"{name}:{line}:model",
                file=name,
                line=line,
                column="model",
            )
    return on


def _folds(table: pl.DataFrame, folds: int, seed: int) -> np.ndarray:
    keys = ["phase", "model", "tp", "batch", "prompt_tokens", "context_tokens"]
    shapes = table.select(keys).unique(maintain_order=True)
    if folds > shapes.height:
        raise ScenarioError(f"folds: {folds} folds need at least as many distinct shapes; there are {shapes.height}",
                            "folds")  # fmt: skip
    order = np.random.default_rng(seed).permutation(shapes.height)
    fold_of_shape = np.empty(shapes.height, dtype=np.int64)
    fold_of_shape[order] = np.arange(shapes.height) % folds
    index = {tuple(r): i for i, r in enumerate(shapes.iter_rows())}
    return np.array([fold_of_shape[index[tuple(r)]] for r in table.select(keys).iter_rows()], dtype=np.int64)


def calibrate(
    path: str | Path | pl.DataFrame,
    device: str = "h100",
    model: str | None = None,
    *,
    folds: int = 5,
    seed: int = 0,
    fmt: str | None = None,
) -> CalibrationResult:
    """Fit ``device``'s ``flops_eff`` and ``bw_eff``, the per-step overhead and (for rows with tp > 1) the
    scale-up bandwidth per tp to the measured steps of ``path`` (the module's docstring: the loss, the optimiser,
    the folds).

    Args:
        path: a measurement file (:func:`kvwire.timing.measured.read_measured`) or its normalised table.
        device: the device preset the steps ran on; rows that name another device are left out.
        model: only this model's rows (a kvwire preset); ``None``: every model of the file.
        folds: folds of the held-out error (≥ 2), or 0 for none.
        seed: the seed of the folds' order.
        fmt: the file's format (``None``: detected).

    Returns:
        A :class:`CalibrationResult`; ``.write(path)`` writes the file ``cost.timing`` names.

    Raises:
        MeasurementError: a bad file, no rows on the device or of the model, a model that is not a preset.
        ScenarioError: a step the core refuses (naming the model and tp), ``folds`` out of range.
    """
    t0 = time.perf_counter()
    if folds == 1 or folds < 0:
        raise ScenarioError(f"folds: expected 0 (none) or at least 2, got {folds}", "folds")
    raw, source, name = _load(path, fmt)
    table = select_rows(raw, device, model, name)
    params = parameters(device, table["tp"].unique().to_list())
    pred = _Predictor(table, device, params)
    measured = table["time_s"].to_numpy()
    phases = table["phase"].to_numpy()
    everything = np.ones(table.height, dtype=bool)
    default = pred(pred.defaults())
    # The values as the file keeps them (4 significant digits), so that every figure reported is theirs.
    values = {k: significant(v) for k, v in _fit(pred, measured, phases, everything).items()}
    fitted = pred(values)
    held = np.full(table.height, np.nan)
    fold = np.full(table.height, -1, dtype=np.int64)
    if folds:
        fold = _folds(table, folds, seed)
        for k in range(folds):
            v = _fit(pred, measured, phases, fold != k)
            out = fold == k
            groups = sorted({gi for gi, g in enumerate(pred.groups) if out[g.rows].any()})
            held[out] = pred(v, groups)[out]
    shown = table.select("phase", "model", "tp", "batch", "prompt_tokens", "context_tokens", "source_row").with_columns(
        measured_s=pl.Series(measured), default_s=pl.Series(default), calibrated_s=pl.Series(fitted),
        held_out_s=pl.Series(held), fold=pl.Series(fold),
    )  # fmt: skip
    shown = shown.with_columns(
        default_error_pct=_pct(pl.col("default_s")),
        error_pct=_pct(pl.col("calibrated_s")),
        held_out_error_pct=_pct(pl.col("held_out_s")).fill_nan(None),
    )
    errors = error_table(
        shown.with_columns(pl.col("held_out_error_pct").fill_null(float("nan"))),
        {"default": "default_error_pct", "in": "error_pct", "held_out": "held_out_error_pct"},
    )
    fit = pl.DataFrame(
        [
            {
                "parameter": p.name,
                "value": values[p.name],
                "default": p.default,
                "unit": p.unit,
                "lower": p.lower,
                "upper": p.upper,
                "at_bound": values[p.name] <= p.lower * 1.001 or values[p.name] >= p.upper / 1.001,
            }
            for p in params
        ]
    )
    su = pred.scale_up
    by_tp: dict[int, dict[str, Any]] = {}
    for p in params:
        if p.name.startswith("scale_up_eff_tp") and su is not None:
            tp = int(p.name.removeprefix("scale_up_eff_tp"))
            gb_per_s = bandwidth(values[p.name], su["bandwidth_gb_per_s"])
            by_tp[tp] = {"domain": su["domain"], "bandwidth_gb_per_s": gb_per_s, "latency_us": su["latency_us"]}
    fitted_device: dict[str, Any] = {"preset": device, "flops_eff": values["flops_eff"], "bw_eff": values["bw_eff"]}
    if by_tp and su is not None:
        mean = significant(math.exp(sum(math.log(v["bandwidth_gb_per_s"]) for v in by_tp.values()) / len(by_tp)), 6)
        fitted_device["scale_up"] = {"domain": su["domain"], "bandwidth_gb_per_s": mean, "latency_us": su["latency_us"]}
    return CalibrationResult(
        base_device=device,
        device=fitted_device,
        scale_up_by_tp=by_tp,
        step_overhead_s=values["step_overhead_s"],
        fit=fit,
        errors=errors,
        table=shown,
        folds=folds,
        seed=seed,
        rows=table.height,
        source=source,
        fit_s=time.perf_counter() - t0,
    )


__all__ = [
    "BOUNDS",
    "LOSS_SCALE",
    "CalibrationResult",
    "Param",
    "bandwidth",
    "calibrate",
    "error_table",
    "nelder_mead",
    "parameters",
    "select_rows",
    "significant",
    "soft_l1",
]
