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


class TraceFileError(TraceError):
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

    def __init__(self, message: str, path: str = "", file: str = "", line: int | None = None,
                 column: str | None = None) -> None:  # fmt: skip
        super().__init__(message, path)
        self.file = file
        self.line = line
        self.column = column

    def __reduce__(self) -> tuple[type[TraceFileError], tuple[str, str, str, int | None, str | None]]:  # type: ignore[override]
        return (type(self), (str(self), self.path, self.file, self.line, self.column))


class QuantError(KvwireError, ValueError):
    """A quantisation request that does not fit its input: wrong dtype, non-contiguous array, an axis whose
    length is not a multiple of the block size, or scales/codes of the wrong size. ``path`` names the
    argument (``"x"``, ``"axis"``, ``"scales"``, ...)."""


class LayoutError(KvwireError, ValueError):
    """A layout conversion that does not fit its input: an unknown layout or dtype, an array of the wrong
    shape or dtype, a block table or slot mapping that points outside the cache (or, for a destination,
    twice at the same block), head ranges that do not match. ``path`` names the argument
    (``"src_block_table[3]"``, ``"dst_layout.dtype"``, ...)."""


class InternalError(KvwireError, RuntimeError):
    """A broken internal invariant of the simulator. Never expected: please report it."""


__all__ = [
    "DoesNotFitError",
    "InternalError",
    "KvwireError",
    "LayoutError",
    "QuantError",
    "ScenarioError",
    "TraceError",
    "TraceFileError",
    "UnknownPresetError",
]
