"""The command line's JSON output: strict JSON only (no ``Infinity`` or ``NaN``, which ``json.loads`` takes
but RFC 8259 and most parsers refuse); a non-finite number is written as ``null``, as in the summary."""

from __future__ import annotations

import json
from typing import Any

from kvwire.results.summary import finite


def dumps(value: Any) -> str:
    """``value`` as indented strict JSON, every non-finite float written as ``null``.

    >>> print(dumps({"load_factor": float("inf"), "rate": 2.0}))
    {
      "load_factor": null,
      "rate": 2.0
    }
    """
    return json.dumps(finite(value), indent=2, allow_nan=False)


__all__ = ["dumps"]
