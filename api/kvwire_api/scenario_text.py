"""Scenario files as text: read TOML or JSON text as ``kvwire.load_scenario`` reads a ``.toml`` or ``.json``
file, and write an object back as text (TOML by ``kvwire.scenario.to_toml``). The web page's editor uses these
(``POST /v1/scenarios/parse`` and ``/format``), so the page and the library read every file the same way.

Syntax only: the object is not checked as a scenario (``POST /v1/scenarios/validate`` does that), so a sweep
definition reads as well as a scenario. What the library refuses before any check is refused here too: text
that is not a document (:class:`TextSyntaxError`, with the line and column the parser names) and values no
scenario can hold, such as ``inf``, a date or an integer beyond 64 bits (``kvwire.ScenarioError`` naming the
field, as ``kvwire.simulate`` would refuse the same file).

>>> parse_text('link = "eth-25g"\\n[workload.arrivals]\\nrate_per_s = 14.0\\n', "toml")
{'link': 'eth-25g', 'workload': {'arrivals': {'rate_per_s': 14.0}}}
>>> print(format_scenario({"link": "eth-25g", "slo": {"ttft_s": None}}, "toml"), end="")
link = "eth-25g"
<BLANKLINE>
[slo]
>>> try:
...     parse_text("[workload\\n", "toml")
... except TextSyntaxError as e:
...     (e.line, e.column, e.message)
(1, 10, "Expected ']' at the end of a table declaration")
"""

from __future__ import annotations

import json
import re
import tomllib
from collections.abc import Mapping
from typing import Any

import kvwire
from kvwire.scenario import scenario_json, to_toml
from kvwire.scenario.load import loads_json

#: tomllib's message ends with where it stopped: ``(at line 3, column 7)`` or ``(at end of document)``.
_WHERE = re.compile(r"\s*\((?:at line (\d+), column (\d+)|at end of document)\)\s*$")


class TextSyntaxError(Exception):
    """Text that is not a TOML or JSON document of an object; ``line`` and ``column`` (1-based) say where the
    parser stopped, when it says (None otherwise)."""

    def __init__(self, fmt: str | None, message: str, line: int | None = None, column: int | None = None) -> None:
        where = f" at line {line}, column {column}" if line is not None else ""
        super().__init__(f"text: invalid {fmt.upper()}{where}: {message}" if fmt else f"text: {message}")
        self.format = fmt
        self.message = message
        self.line = line
        self.column = column


def _end_of(text: str) -> tuple[int, int]:
    """The line and column of the end of ``text``, counted as tomllib counts them."""
    line = text.count("\n") + 1
    return line, len(text) - text.rfind("\n") if line > 1 else len(text) + 1


def _toml_error(text: str, e: tomllib.TOMLDecodeError) -> TextSyntaxError:
    message = str(e)
    m = _WHERE.search(message)
    if m is None:
        return TextSyntaxError("toml", message)
    line, column = (int(m.group(1)), int(m.group(2))) if m.group(1) else _end_of(text)
    return TextSyntaxError("toml", message[: m.start()], line, column)


#: What the service says of a field that would name a file on the server.
SERVER_FILE = (
    "the service reads no file a request names: send the inline model fields instead "
    "(kvwire.scenario.hf.model_from_hf_config(path) converts a config.json on your machine)"
)


#: What the service says of a calibration file (``cost.timing.file``).
CALIBRATION_FILE = (
    'the service reads no file a request names: send the calibrated device inline instead (the "device" of '
    "kvwire calibrate's output, or kvwire.calibrate(...).device, as prefill.device / decode.device, with its "
    "step_overhead_s as cost.step_overhead_s)"
)


_INDEX = re.compile(r"(\[\d+\])+$")


def _is_timing(path: str) -> bool:
    """Whether ``path`` names a ``timing`` object, or an item of a list of them (a sweep's grid of
    ``cost.timing`` values: ``grid.cost.timing[0]``)."""
    bare = _INDEX.sub("", path)
    return bare == "timing" or bare.endswith(".timing")


def refuse_server_files(value: Any, path: str = "") -> None:
    """Refuse a ``hf_config`` key anywhere in ``value`` (``model.hf_config`` names a Hugging Face config.json
    that the library reads; the service reads no path a request gives), and a ``file`` in a ``timing`` object
    (``cost.timing.file``, a calibration file). A dotted key counts by its last part, as a sweep's grid and zip
    set fields by dotted paths (``{"grid": {"model.hf_config": [...]}}``, ``{"grid": {"cost.timing": [{...}]}}``).
    Raises ``kvwire.ScenarioError`` naming the field (``model.hf_config``, ``base.model.hf_config``,
    ``grid.model[0].hf_config``, ``grid.model.hf_config``, ``cost.timing.file``, ``grid.cost.timing[0].file``).

    >>> try:
    ...     refuse_server_files({"model": {"hf_config": "/etc/passwd"}})
    ... except kvwire.ScenarioError as e:
    ...     e.path
    'model.hf_config'
    >>> try:
    ...     refuse_server_files({"cost": {"timing": {"source": "calibrated", "file": "/etc/passwd"}}})
    ... except kvwire.ScenarioError as e:
    ...     e.path
    'cost.timing.file'
    >>> try:
    ...     refuse_server_files({"grid": {"cost.timing.file": ["/etc/passwd"]}})
    ... except kvwire.ScenarioError as e:
    ...     e.path
    'grid.cost.timing.file'
    """
    stack: list[tuple[Any, str]] = [(value, path)]
    while stack:
        node, here = stack.pop()
        if isinstance(node, Mapping):
            for k in node:
                where = f"{here}.{k}" if here else str(k)
                parent, _, last = where.rpartition(".")
                if last == "hf_config":
                    raise kvwire.ScenarioError(f"{where}: {SERVER_FILE}", where)
                if last == "file" and _is_timing(parent):
                    raise kvwire.ScenarioError(f"{where}: {CALIBRATION_FILE}", where)
            stack.extend((v, f"{here}.{k}" if here else str(k)) for k, v in node.items())
        elif isinstance(node, list):
            stack.extend((v, f"{here}[{i}]") for i, v in enumerate(node))


def _kind(value: Any) -> str:
    return {list: "an array", str: "a string", bool: "a boolean", type(None): "null"}.get(type(value), "a number")


def parse_text(text: str, fmt: str) -> dict[str, Any]:
    """The object ``text`` holds, read as ``kvwire.load_scenario`` reads a file of format ``fmt`` (``"toml"``:
    ``tomllib.loads``; ``"json"``: ``kvwire.scenario.load.loads_json``, which refuses a key given twice), in the
    JSON form the library runs (``scenario_json``).

    Raises:
        TextSyntaxError: not a document of that format, or not a table/object.
        kvwire.ScenarioError: a value no scenario can hold (non-finite number, date or time, integer beyond 64
            bits, nesting deeper than the library allows), a JSON key given twice in one object, or a
            ``model.hf_config`` (:func:`refuse_server_files`), naming its field.
    """
    data: Any
    try:
        if fmt == "toml":
            data = tomllib.loads(text)
        elif fmt == "json":
            data = loads_json(text)  # a key given twice: kvwire.ScenarioError naming it, as load_scenario
        else:
            raise ValueError(f"format: expected 'toml' or 'json', got {fmt!r}")
    except tomllib.TOMLDecodeError as e:
        raise _toml_error(text, e) from None
    except json.JSONDecodeError as e:
        raise TextSyntaxError("json", e.msg, e.lineno, e.colno) from None
    except RecursionError:
        raise TextSyntaxError(fmt, "nested too deeply to be a scenario") from None
    except kvwire.ScenarioError:  # a repeated key (a ValueError, but not a syntax error)
        raise
    except ValueError as e:  # Python's limit on the digits of an integer read from text
        why = "it holds an integer of more than 4,300 digits" if "4300 digits" in str(e) else str(e)
        raise TextSyntaxError(fmt, why) from None
    if not isinstance(data, dict):
        raise TextSyntaxError(None, f"a scenario must be a JSON object / TOML table, not {_kind(data)}")
    refuse_server_files(data)  # scenario_json would read a model.hf_config's file
    plain: dict[str, Any] = json.loads(scenario_json(data))
    return plain


def _no_null_in_arrays(value: Any, path: str) -> None:
    """TOML has no null: a null field is left out (it means the default), but an array cannot skip an item."""
    if isinstance(value, Mapping):
        for k, v in value.items():
            _no_null_in_arrays(v, f"{path}.{k}" if path else str(k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            where = f"{path}[{i}]"
            if v is None:
                raise kvwire.ScenarioError(f"{where}: TOML has no null, and an array cannot leave an item out", where)
            _no_null_in_arrays(v, where)


def format_scenario(scenario: Mapping[str, Any], fmt: str) -> str:
    """``scenario`` as text of format ``fmt``: TOML by ``kvwire.scenario.to_toml`` (null fields left out: in a
    scenario they mean the default), or JSON indented by 2 spaces with a final newline, as the web page writes it.

    Raises:
        kvwire.ScenarioError: a value the text cannot hold, naming its field.
    """
    refuse_server_files(scenario)
    plain: dict[str, Any] = json.loads(scenario_json(scenario))  # the library's checks: finite, 64-bit, depth
    if fmt == "toml":
        _no_null_in_arrays(plain, "")
        return to_toml(plain)
    if fmt == "json":
        return json.dumps(plain, indent=2, ensure_ascii=False) + "\n"
    raise ValueError(f"format: expected 'toml' or 'json', got {fmt!r}")


__all__ = ["SERVER_FILE", "TextSyntaxError", "format_scenario", "parse_text", "refuse_server_files"]
