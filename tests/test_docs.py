"""The runnable examples in the public API's docstrings (``>>>``) produce the output they show."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = [
    "kvwire",
    "kvwire.block_hashes",
    "kvwire.capacity",
    "kvwire.ceilings",
    "kvwire.errors",
    "kvwire.handoff",
    "kvwire.layout",
    "kvwire.plot",
    "kvwire.progress",
    "kvwire.presets",
    "kvwire.quant",
    "kvwire.run",
    "kvwire.scenario",
    "kvwire.sessions",
    "kvwire.sweep",
    "kvwire.trace_formats",
    "kvwire.trace_ops",
    "kvwire.trace_spec",
    "kvwire.trace_stats",
    "kvwire.traces",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name: str) -> None:
    """Every ``>>>`` example of the module runs and prints what its docstring says."""
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples failed in {name}"
    assert result.attempted > 0, f"{name} has no examples"
