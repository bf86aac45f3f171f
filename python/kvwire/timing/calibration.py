"""The calibrated source: a device preset fitted to measured step times (``kvwire calibrate``,
:func:`kvwire.calibrate`), written to a JSON file and put into a scenario's pools by
``cost.timing = {"source": "calibrated", "file": "my-a100.json"}``.

The file (:data:`KIND`, :data:`VERSION`) holds:

- ``base_device``: the device preset that was fitted (``"a100"``);
- ``device``: the fitted device as an inline device, usable wherever a device goes:
  ``{"preset": "a100", "flops_eff": ..., "bw_eff": ..., "scale_up": {"domain": 8, "bandwidth_gb_per_s": ...,
  "latency_us": ...}}`` (``scale_up`` only when rows with ``tp > 1`` were fitted; its bandwidth then is the
  geometric mean of the per-tp fits, for a tp the measurements did not have);
- ``scale_up_by_tp``: the scale-up link fitted for each tensor-parallel degree measured (``{"8": {...}}``);
- ``step_overhead_s``: the fitted per-step overhead (the scenario's ``cost.step_overhead_s``);
- ``fit``: one record per parameter (``parameter``, ``value``, ``default``, ``unit``, ``lower``, ``upper``,
  ``at_bound``); ``errors``: the error table (per phase, model and tp: the default device's, in-sample and
  k-fold held-out median, p90 and max absolute % error); ``held_out``: the held-out error per phase;
  ``method``: the loss, its scale, the optimiser, folds and seed; ``rows``, ``models``, ``tps``; ``source``: the
  measurement file's name (no folder), format and SHA-256; ``kvwire_version``.

:func:`apply_calibration` reads the file (a relative path is relative to the scenario file that names it, as a
trace file is, or to the working directory for a scenario given as a dict) and puts
``device`` (with the pool's tp's scale-up link when one was fitted) into every pool whose device is
``base_device`` (a preset name, or an inline device with that preset: its other fields are kept, the fitted ones
replaced), sets ``cost.step_overhead_s`` (the core has one overhead for all pools: it applies to every pool),
and writes ``cost.timing.provenance`` (what was fitted, the base device, the rows, the held-out error, the pools
it went into): deterministic, with neither dates nor folders, and echoed by the run.

>>> doc = {"kind": KIND, "version": VERSION, "base_device": "h100", "step_overhead_s": 0.002,
...        "device": {"preset": "h100", "flops_eff": 0.5, "bw_eff": 0.7}, "scale_up_by_tp": {}}
>>> out = apply_document({}, {"source": "calibrated", "file": "x.json"}, doc)
>>> out["prefill"]["device"], out["cost"]["step_overhead_s"]
({'preset': 'h100', 'flops_eff': 0.5, 'bw_eff': 0.7}, 0.002)
>>> sorted(out["cost"]["timing"]["provenance"]["pools"])
['decode', 'prefill']
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import kvwire._core as _core
from kvwire.errors import ScenarioError

#: The file's kind marker.
KIND = "kvwire-calibration"
#: The file format's version (a newer file is refused, naming both).
VERSION = 1
#: Where every error about the file points.
FIELD = "cost.timing.file"
#: The device fields a calibration sets.
FITTED_DEVICE_FIELDS = ("flops_eff", "bw_eff", "scale_up")


def _fail(why: str) -> ScenarioError:
    return ScenarioError(f"{FIELD}: {why}", FIELD)


def _number(doc: Mapping[str, Any], key: str, name: str, low: float = 0.0) -> float:
    v = doc.get(key)
    if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v) or v < low:
        raise _fail(f"{name}: {key} must be a finite number ≥ {low:g}, got {json.dumps(v)[:40]}")
    return float(v)


def check_document(doc: Any, name: str) -> dict[str, Any]:
    """``doc`` checked as a calibration file named ``name`` (the fields :func:`apply_calibration` uses).

    Raises:
        ScenarioError: naming ``cost.timing.file``: not a kvwire calibration, a newer version, a field missing
            or of the wrong type.
    """
    if not isinstance(doc, dict) or doc.get("kind") != KIND:
        raise _fail(f'{name} is not a kvwire calibration file (no "kind": "{KIND}"; kvwire calibrate -o writes one)')
    version = doc.get("version")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise _fail(f"{name}: version must be a whole number ≥ 1, got {json.dumps(version)[:40]}")
    if version > VERSION:
        raise _fail(f"{name} is a calibration file of version {version}; this kvwire reads version {VERSION}")
    base = doc.get("base_device")
    if not isinstance(base, str) or not base:
        raise _fail(f"{name}: base_device must be a device preset name")
    device = doc.get("device")
    if not isinstance(device, dict) or device.get("preset") != base:
        raise _fail(f"{name}: device must be an inline device whose preset is the base_device {base!r}")
    for key in ("flops_eff", "bw_eff"):
        if key in device:
            _number(device, key, name, 0.0)
    _number(doc, "step_overhead_s", name)
    by_tp = doc.get("scale_up_by_tp", {})
    if not isinstance(by_tp, dict) or not all(
        isinstance(k, str) and k.isdigit() and isinstance(v, dict) for k, v in by_tp.items()
    ):
        raise _fail(f'{name}: scale_up_by_tp must map tensor-parallel degrees ("8") to scale_up objects')
    return doc


def read_calibration(path: str | Path) -> dict[str, Any]:
    """The calibration file at ``path``, checked (:func:`check_document`).

    Raises:
        ScenarioError: naming ``cost.timing.file``: the file cannot be read, is not JSON, or is not a calibration.
    """
    name = repr(str(path))
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as e:
        raise _fail(f"cannot read {name}: {e.strerror or e}") from None
    except UnicodeDecodeError:
        raise _fail(f"{name} is not UTF-8 text (a calibration file is JSON)") from None
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        raise _fail(f"{name} is not JSON (line {e.lineno} column {e.colno}: {e.msg})") from None
    except RecursionError:
        raise _fail(f"{name} is nested too deeply to be a calibration file") from None
    return check_document(doc, name)


def _pools(echo: dict[str, Any]) -> list[str]:
    return ["colocated"] if echo.get("mode") == "colocated" else ["prefill", "decode"]


def _preset(device: Any) -> str | None:
    if isinstance(device, str):
        return device
    if isinstance(device, Mapping):
        p = device.get("preset")
        return p if isinstance(p, str) else None
    return None


def apply_document(scenario: dict[str, Any], timing: dict[str, Any], doc: dict[str, Any]) -> dict[str, Any]:
    """``scenario`` with the calibration ``doc`` applied (see the module's docstring); ``timing`` is
    ``cost.timing`` as given."""
    base = doc["base_device"]
    cost = scenario.get("cost") if isinstance(scenario.get("cost"), Mapping) else {}
    rest = {**scenario, "cost": {k: v for k, v in dict(cost or {}).items() if k != "timing"}}
    echo: dict[str, Any] = json.loads(_core.echo_json(json.dumps(rest, allow_nan=False)))
    out = dict(rest)
    pools: dict[str, Any] = {}
    seen = []
    for name in _pools(echo):
        pool = echo[name]
        preset = _preset(pool.get("device"))
        seen.append(f"{name}: {preset or 'an inline device'}")
        if preset != base:
            continue
        par = pool.get("parallel")
        tp = int(par.get("tp", 1)) if isinstance(par, Mapping) else None
        fitted = dict(doc["device"])
        per_tp = doc.get("scale_up_by_tp", {}).get(str(tp)) if tp is not None else None
        if per_tp is not None:
            fitted["scale_up"] = dict(per_tp)
        given = scenario.get(name) if isinstance(scenario.get(name), Mapping) else {}
        given_device = dict(given or {}).get("device")
        if isinstance(given_device, Mapping):
            fitted = {**{k: v for k, v in given_device.items() if k not in FITTED_DEVICE_FIELDS}, **fitted}
        out[name] = {**dict(given or {}), "device": fitted}
        pools[name] = {
            "tp": tp if tp is not None else 1,
            "scale_up": f"fitted at tp {tp}" if per_tp is not None else ("geometric mean of the fitted tps"
                                                                         if "scale_up" in fitted else "preset"),
        }  # fmt: skip
    if not pools:
        raise _fail(
            f"the calibration in {timing.get('file')!r} is of device {base!r}; no pool of this scenario runs on it "
            f"({', '.join(seen)}): give the pools device {json.dumps(base)}"
        )
    fit: list[Any] = doc["fit"] if isinstance(doc.get("fit"), list) else []
    fitted_values = {
        r["parameter"]: r["value"] for r in fit if isinstance(r, Mapping) and "parameter" in r and "value" in r
    }
    source = doc.get("source") if isinstance(doc.get("source"), Mapping) else {}
    provenance = {
        "calibration": f"{KIND} {doc['version']}",
        "base_device": base,
        "fitted": fitted_values,
        "rows": doc.get("rows"),
        "measurements": dict(source or {}).get("file"),
        "held_out_error_pct": doc.get("held_out"),
        "pools": pools,
    }
    out["cost"] = {
        **rest["cost"],
        "step_overhead_s": float(doc["step_overhead_s"]),
        "timing": {**timing, "provenance": provenance},
    }
    return out


def apply_calibration(scenario: dict[str, Any], timing: dict[str, Any]) -> dict[str, Any]:
    """``scenario`` (plain JSON data) with the calibration file that ``timing["file"]`` names applied: the fitted
    device in every pool of the base device, ``cost.step_overhead_s`` from the file, ``cost.timing.provenance``
    written (the module's docstring).

    Raises:
        ScenarioError: naming ``cost.timing.file``: no file given, a file that cannot be read or is not a
            calibration, or no pool on the calibration's device; a bad scenario as the core says.
    """
    file = timing.get("file")
    if not isinstance(file, str) or not file:
        raise _fail('expected the path of a calibration file (kvwire calibrate -o FILE) for source "calibrated"')
    return apply_document(scenario, timing, read_calibration(file))


__all__ = [
    "FIELD",
    "FITTED_DEVICE_FIELDS",
    "KIND",
    "VERSION",
    "apply_calibration",
    "apply_document",
    "check_document",
    "read_calibration",
]
