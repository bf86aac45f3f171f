"""Exceptions raised by kvwire.

Every error that comes from a scenario or a request table names the offending input in ``path``
(for example ``"workload.arrivals.rate_per_s"`` or ``"requests.prompt_tokens[17]"``) and the message says
why it was refused. The classes are defined here and raised from Rust through one mapping
(``rust/kvwire-py/src/errors.rs``).

>>> import kvwire
>>> try:
...     kvwire.simulate({"workload": {"arrivals": {"rate_per_s": -1}}})
... except kvwire.ScenarioError as e:
...     print(e.path)
workload.arrivals.rate_per_s
"""

from __future__ import annotations

import re
from typing import Any

#: Longest run of the offending input an error message quotes, characters.
QUOTE_LIMIT = 200
#: Longest error message, characters (its middle is left out beyond).
MESSAGE_LIMIT = 1000
_LONG_RUN = re.compile(rf"[^\s,…]{{{QUOTE_LIMIT + 1},}}")


def shorten(text: str) -> str:
    """An error text that quotes at most :data:`QUOTE_LIMIT` characters of any one input value and is at
    most about :data:`MESSAGE_LIMIT` characters long (a 100 MB CSV field must not end up on stderr).

    >>> s = shorten("bad value " + "x" * 500)
    >>> len(s), s[-21:]
    (228, 'xxx… (500 characters)')
    >>> shorten(s) == s
    True
    """
    text = _LONG_RUN.sub(lambda m: f"{m.group(0)[:QUOTE_LIMIT]}… ({len(m.group(0)):,} characters)", text)
    if len(text) > MESSAGE_LIMIT:
        cut = len(text) - MESSAGE_LIMIT
        text = f"{text[: MESSAGE_LIMIT - 200]} … ({cut:,} characters left out) … {text[-200:]}"
    return text


class KvwireError(Exception):
    """Base class of every kvwire exception.

    Attributes:
        path: the offending input — a dotted scenario field, a table column and row, or an argument name
            (``""`` if the error concerns everything).
    """

    def __init__(self, message: str, path: str = "") -> None:
        super().__init__(shorten(message))
        self.path = shorten(path)

    def __reduce__(self) -> tuple[type[KvwireError], tuple[str, str]]:
        return (type(self), (str(self), self.path))


class ScenarioError(KvwireError, ValueError):
    """A scenario field is missing, of the wrong type, out of range or unknown.

    Attributes:
        path: dotted path of the offending field (``""`` if it concerns the whole scenario).
    """


class UnknownPresetError(ScenarioError):
    """A model, device or link preset name that does not exist (the message lists the known ones)."""


class DoesNotFitError(ScenarioError):
    """The model's weights do not fit on an instance of the pool named by ``path``.

    Attributes:
        devices_needed: the fewest devices per instance (``devices_per_instance``) that hold the weights and a
            token of KV — e.g. how many wafers of the illustrative ``wafer-scale`` device's 44 GB of SRAM a
            model needs; ``None`` when not even the largest allowed instance (1,024 devices) does.

    >>> import kvwire
    >>> try:
    ...     kvwire.validate({"model": "llama3-70b", "prefill": {"device": "mi300x"},
    ...                      "decode": {"device": "wafer-scale"}})
    ... except kvwire.DoesNotFitError as e:
    ...     print(e.path, e.devices_needed)
    decode 4
    """

    def __init__(self, message: str, path: str = "", devices_needed: int | None = None) -> None:
        super().__init__(message, path)
        self.devices_needed = devices_needed

    def __reduce__(self) -> tuple[type[KvwireError], tuple[str, str, int | None]]:  # type: ignore[override]
        return (type(self), (str(self), self.path, self.devices_needed))


class _InFile(KvwireError):
    """What an error about one place in a file carries besides its message and path: the file, the line and the
    column (:class:`TraceFileError`, :class:`MeasurementError`)."""

    file: str
    line: int | None
    column: str | None

    def __init__(self, message: str, path: str = "", file: str = "", line: int | None = None,
                 column: str | None = None) -> None:  # fmt: skip
        super().__init__(message, path)
        self.file = file
        self.line = line
        self.column = column

    def __reduce__(self) -> tuple[type[_InFile], tuple[str, str, str, int | None, str | None]]:  # type: ignore[override]
        return (type(self), (str(self), self.path, self.file, self.line, self.column))


class TraceError(ScenarioError):
    """An explicit request table is malformed; ``path`` names the column and first offending row."""


class TraceFileError(_InFile, TraceError):
    """A trace file that cannot be read as a request table: unreadable, empty, binary or not UTF-8, an
    unknown or mismatched format, a missing column, a value that is not a timestamp or a whole number of
    tokens, a negative length, or requests out of time order.

    The message names the file, the line and the column; the same facts are attributes.

    Attributes:
        file: the trace file as given.
        line: 1-based line of the offending record (``None`` when the problem is not one line's, or for
            Parquet files, which have rows instead of lines).
        column: the offending column or JSON field as named in the file (``None`` if not one column's).
        path: ``"FILE:LINE:COLUMN"`` (shorter when line or column is unknown).
    """


class MeasurementError(_InFile, KvwireError, ValueError):
    """A file of measured step times that cannot be read (:mod:`kvwire.timing.measured`): unreadable or empty,
    an unknown format, a missing column, a cell that is not a number or not a whole number, a time that is not
    positive, an unknown phase, an unknown device name; or a format that does not hold whole steps (Vidur's
    per-operator profiles).

    The message names the file, the line and the column; the same facts are attributes.

    Attributes:
        file: the file as given.
        line: 1-based line of the offending row (``None`` when the problem is not one row's).
        column: the offending column as named in the file (``None`` if not one column's).
        path: ``"FILE:LINE:COLUMN"`` (shorter when line or column is unknown).
    """


class QuantError(KvwireError, ValueError):
    """A quantisation request that does not fit its input: wrong dtype, non-contiguous array, an axis whose
    length is not a multiple of the block size, or scales/codes of the wrong size. ``path`` names the
    argument (``"x"``, ``"axis"``, ``"scales"``, ...)."""


class LayoutError(KvwireError, ValueError):
    """A layout conversion that does not fit its input: an unknown layout or dtype, an array of the wrong
    shape or dtype, a block table or slot mapping that points outside the cache (or, for a destination,
    twice at the same block), head ranges that do not match. ``path`` names the argument
    (``"src_block_table[3]"``, ``"dst_layout.dtype"``, ...)."""


class ResourceError(KvwireError, MemoryError):
    """A run that does not fit the machine: refused before it starts with the memory it would need and the
    memory available (or an allocation that failed). ``path`` names what sets its size
    (``"workload.requests"`` or ``"requests"``). A ``MemoryError``, so ``except MemoryError`` catches it."""


class SweepError(ScenarioError):
    """Points of a sweep that do not validate, all of them, found before any point runs.

    Attributes:
        errors: one dict per bad point: ``{"point": int, "values": {path: value}, "path": str, "message": str}``
            (a malformed definition itself — a key, an empty list, zip lists of different lengths — is a plain
            :class:`ScenarioError` naming the key).
    """

    def __init__(self, message: str, path: str = "", errors: list[dict[str, Any]] | None = None) -> None:
        super().__init__(message, path)
        self.errors: list[dict[str, Any]] = list(errors or [])

    def __reduce__(self) -> tuple[type[SweepError], tuple[str, str, list[dict[str, Any]]]]:  # type: ignore[override]
        return (type(self), (str(self), self.path, self.errors))


class Cancelled(KvwireError):
    """A sweep or search stopped because its ``cancel`` event was set; the points that finished were kept
    (written to ``out`` for a sweep)."""


class PlotError(KvwireError, ValueError):
    """Data that cannot be drawn as asked by :mod:`kvwire.plot` (a missing column, no values, a file that
    cannot be read); ``path`` names the argument or column."""


class RequestsNotKeptError(KvwireError, LookupError):
    """``SimResult.requests`` of a run that did not keep its per-request table (``keep_requests=False``, or a
    run above :data:`kvwire.results.run.KEEP_REQUESTS_MAX` requests); the message says how to get the table."""


class InternalError(KvwireError, RuntimeError):
    """A broken internal invariant of the simulator. Never expected: please report it."""


__all__ = [
    "Cancelled",
    "DoesNotFitError",
    "InternalError",
    "KvwireError",
    "LayoutError",
    "MeasurementError",
    "PlotError",
    "QuantError",
    "RequestsNotKeptError",
    "ResourceError",
    "ScenarioError",
    "SweepError",
    "TraceError",
    "TraceFileError",
    "UnknownPresetError",
]
