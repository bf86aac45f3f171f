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

from typing import Any


class KvwireError(Exception):
    """Base class of every kvwire exception.

    Attributes:
        path: the offending input — a dotted scenario field, a table column and row, or an argument name
            (``""`` if the error concerns everything).
    """

    def __init__(self, message: str, path: str = "") -> None:
        super().__init__(message)
        self.path = path

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
    """The model's weights do not fit on an instance of the pool named by ``path``."""


class TraceError(ScenarioError):
    """An explicit request table is malformed; ``path`` names the column and first offending row."""


class QuantError(KvwireError, ValueError):
    """A quantisation request that does not fit its input: wrong dtype, non-contiguous array, an axis whose
    length is not a multiple of the block size, or scales/codes of the wrong size. ``path`` names the
    argument (``"x"``, ``"axis"``, ``"scales"``, ...)."""


class LayoutError(KvwireError, ValueError):
    """A layout conversion that does not fit its input: an unknown layout or dtype, an array of the wrong
    shape or dtype, a block table or slot mapping that points outside the cache (or, for a destination,
    twice at the same block), head ranges that do not match. ``path`` names the argument
    (``"src_block_table[3]"``, ``"dst_layout.dtype"``, ...)."""


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


class InternalError(KvwireError, RuntimeError):
    """A broken internal invariant of the simulator. Never expected: please report it."""


__all__ = [
    "Cancelled",
    "DoesNotFitError",
    "InternalError",
    "KvwireError",
    "LayoutError",
    "PlotError",
    "QuantError",
    "ScenarioError",
    "SweepError",
    "TraceError",
    "UnknownPresetError",
]
