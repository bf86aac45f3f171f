"""Checks of the arguments the kernel wrappers (:mod:`kvwire.quant`, :mod:`kvwire.layout`) share, raising the
caller's kvwire error class with the argument named and the reason in words."""

from __future__ import annotations

from typing import Any

import numpy as np

from kvwire._system import available_memory_bytes
from kvwire.errors import KvwireError, ResourceError

#: Most worker threads a kernel call may ask for.
MAX_THREADS = 1024


def threads(value: Any, error: type[KvwireError]) -> int | None:
    """``None`` (the default: every core for large inputs) or a whole number in [1, :data:`MAX_THREADS`].

    >>> from kvwire.errors import QuantError
    >>> threads(4, QuantError)
    4
    """
    if value is None:
        return None
    if not isinstance(value, int | np.integer) or isinstance(value, bool) or not 1 <= value <= MAX_THREADS:
        shown = repr(value) if not isinstance(value, int) or abs(value) < 10**20 else "a number of more than 20 digits"
        raise error(f"threads: must be a whole number from 1 to {MAX_THREADS}, got {shown}", "threads")
    return int(value)


def whole(value: Any, name: str, low: int, high: int, error: type[KvwireError]) -> int:
    """A whole number in [low, high] (an argument such as ``group_size``), or ``error`` naming ``name``.

    >>> from kvwire.errors import QuantError
    >>> whole(32, "group_size", 1, 2**20, QuantError)
    32
    """
    if not isinstance(value, int | np.integer) or isinstance(value, bool) or not low <= value <= high:
        shown = repr(value) if not isinstance(value, int) or abs(value) < 10**20 else "a number of more than 20 digits"
        raise error(f"{name}: must be a whole number from {low:,} to {high:,}, got {shown}", name)
    return int(value)


def scale(value: Any, name: str, error: type[KvwireError]) -> float:
    """A positive finite number that stays positive and finite as float32 (a tensor scale), returned as the
    float32 value the kernel will use, or ``error`` naming ``name``.

    >>> from kvwire.errors import QuantError
    >>> scale(0.5, "tensor_scale", QuantError)
    0.5
    >>> scale(1e-60, "tensor_scale", QuantError)
    Traceback (most recent call last):
    ...
    kvwire.errors.QuantError: tensor_scale: must be a positive finite number within float32's range, got 1e-60
    """
    if isinstance(value, bool) or not isinstance(value, int | float | np.integer | np.floating):
        raise error(f"{name}: expected a number, got {type(value).__name__} {_shown(value)}", name)
    with np.errstate(over="ignore", under="ignore"):
        f32 = np.float32(value)
    if not (np.isfinite(f32) and f32 > 0 and np.isfinite(float(value))):
        raise error(f"{name}: must be a positive finite number within float32's range, got {_shown(value)}", name)
    return float(f32)


def array(a: Any, name: str, dtype: Any, error: type[KvwireError]) -> np.ndarray:
    """A numpy array of ``dtype`` (native byte order), C-contiguous and aligned, or ``error`` saying which of
    these it is not (an unaligned view is not called "non-contiguous")."""
    want = np.dtype(dtype)
    if not isinstance(a, np.ndarray):
        raise error(f"{name}: expected a numpy array of {want.name}, got {type(a).__name__}", name)
    if a.dtype != want:
        raise error(f"{name}: expected a {want.name} array, got {a.dtype}", name)
    if not a.flags.c_contiguous:
        raise error(f"{name}: must be C-contiguous (np.ascontiguousarray copies it)", name)
    if not a.flags.aligned:
        raise error(f"{name}: its data is not aligned to its {a.itemsize}-byte elements (np.array copies it)", name)
    return a


def _shown(value: Any) -> str:
    """``repr(value)``, cut short for huge integers and long texts (errors quote at most a line of input)."""
    if isinstance(value, int) and abs(value) >= 10**20:
        return "a number of more than 20 digits"
    text = repr(value)
    return text if len(text) <= 80 else f"{text[:77]}..."


def text(value: Any, name: str, error: type[KvwireError]) -> str:
    """A string argument (a format, an element, a layout name), or ``error`` naming ``name`` — a list or a
    number where a name is expected is refused here instead of failing inside a dict lookup.

    >>> from kvwire.errors import QuantError
    >>> text("mxfp4", "format", QuantError)
    'mxfp4'
    >>> text(["mxfp4"], "format", QuantError)
    Traceback (most recent call last):
    ...
    kvwire.errors.QuantError: format: expected a name (a string), got list ['mxfp4']
    """
    if not isinstance(value, str):
        raise error(f"{name}: expected a name (a string), got {type(value).__name__} {_shown(value)}", name)
    return value


def flag(value: Any, name: str, error: type[KvwireError]) -> bool:
    """``True`` or ``False`` (a numpy bool too), or ``error`` naming ``name`` — ``"no"`` is a true string, so a
    string or a number here is refused rather than read as a truth value.

    >>> from kvwire.errors import QuantError
    >>> flag(True, "saturate", QuantError)
    True
    >>> flag("no", "saturate", QuantError)
    Traceback (most recent call last):
    ...
    kvwire.errors.QuantError: saturate: expected True or False, got str 'no'
    """
    if not isinstance(value, bool | np.bool_):
        raise error(f"{name}: expected True or False, got {type(value).__name__} {_shown(value)}", name)
    return bool(value)


def shape(value: Any, name: str, error: type[KvwireError]) -> tuple[int, ...]:
    """An array shape: a whole number ≥ 0, or a tuple or list of them (no bools, no floats), as a tuple.

    >>> from kvwire.errors import QuantError
    >>> shape([4, 64], "shape", QuantError), shape(5, "shape", QuantError)
    ((4, 64), (5,))
    """
    dims = [value] if isinstance(value, int | np.integer) and not isinstance(value, bool) else value
    if not isinstance(dims, tuple | list) or not all(
        isinstance(d, int | np.integer) and not isinstance(d, bool) and d >= 0 for d in dims
    ):
        raise error(f"{name}: expected a tuple of whole numbers ≥ 0, got {_shown(value)}", name)
    return tuple(int(d) for d in dims)


def size(dims: tuple[int, ...]) -> int:
    """Number of elements of an array of shape ``dims`` (an exact Python integer, however large).

    >>> size((2**40, 2**40)) == 2**80
    True
    """
    n = 1
    for d in dims:
        n *= d
    return n


def check_memory(nbytes: int, path: str, what: str, available: int | None = None) -> None:
    """Refuse an allocation of ``nbytes`` that does not fit in the memory available, before it is made.

    Raises:
        ResourceError: ``nbytes`` exceeds ``available`` (default: what :func:`available_memory_bytes`
            reads; nothing is refused where it cannot be read); ``path`` names the argument that sets the
            size, the message gives both figures.

    >>> check_memory(2**50, "blocks", "2^40 blocks", available=2**30)
    Traceback (most recent call last):
    ...
    kvwire.errors.ResourceError: blocks: 2^40 blocks need 1,125,899.9 GB but 1.1 GB of memory is available
    """
    free = available_memory_bytes() if available is None else available
    if free is not None and nbytes > free:
        raise ResourceError(
            f"{path}: {what} need {nbytes / 1e9:,.1f} GB but {free / 1e9:,.1f} GB of memory is available", path
        )


def allocate(dims: tuple[int, ...], dtype: Any, path: str, what: str, *, zero: bool = False) -> np.ndarray:
    """``np.empty`` (or ``np.zeros``) of ``dims`` after :func:`check_memory`; an allocation that still fails
    is a :class:`~kvwire.errors.ResourceError` naming ``path``, never a bare ``MemoryError`` from numpy.

    >>> allocate((2, 3), np.float32, "shape", "the output", zero=True).tolist()
    [[0.0, 0.0, 0.0], [0.0, 0.0, 0.0]]
    """
    dt = np.dtype(dtype)
    nbytes = size(dims) * dt.itemsize
    check_memory(nbytes, path, what)
    try:
        return np.zeros(dims, dtype=dt) if zero else np.empty(dims, dtype=dt)
    except (MemoryError, ValueError) as e:  # ValueError: "array is too big" (more than the address space)
        raise ResourceError(f"{path}: {what} ({nbytes / 1e9:,.1f} GB) cannot be allocated: {e}", path) from None
