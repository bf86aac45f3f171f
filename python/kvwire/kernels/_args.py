"""Checks of the arguments the kernel wrappers (:mod:`kvwire.quant`, :mod:`kvwire.layout`) share, raising the
caller's kvwire error class with the argument named and the reason in words."""

from __future__ import annotations

from typing import Any

import numpy as np

from kvwire.errors import KvwireError

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
