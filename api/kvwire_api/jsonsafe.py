"""Strict JSON: what the service writes (responses, stored documents, Server-Sent Events) never holds ``NaN``,
``Infinity`` or ``-Infinity``, which are not JSON and which strict parsers (``JSON.parse`` in a browser,
``json.loads(..., parse_constant=...)``, jq) refuse.

A non-finite float becomes ``null``, the same as the library's "no such figure" (a summary value the run cannot
give is ``None``). Responses are encoded by msgspec, which already writes ``null`` for them; the documents the
service stores and the events it streams go through :func:`dumps`, so a summary with an infinite value is
stored and answered (``null``), never refused with a 500.

>>> dumps({"load_factor": float("inf"), "p99": [1.5, float("nan")]})
'{"load_factor":null,"p99":[1.5,null]}'
"""

from __future__ import annotations

import json
from typing import Any

from kvwire.results.summary import finite


def dumps(value: Any, **kwargs: Any) -> str:
    """Compact strict JSON of ``value`` (non-finite floats as ``null``; anything else that JSON cannot hold
    raises, as :func:`json.dumps` does)."""
    kwargs.setdefault("separators", (",", ":"))
    return json.dumps(finite(value), allow_nan=False, **kwargs)


__all__ = ["dumps", "finite"]
