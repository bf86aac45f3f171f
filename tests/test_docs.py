"""The runnable examples in the package's docstrings (``>>>``) produce the output they show: every module of
``kvwire`` that holds an example is found by walking the package, so a new module's examples run too."""

from __future__ import annotations

import doctest
import importlib
import importlib.util
import pkgutil
from pathlib import Path

import kvwire
import pytest

#: Modules not imported here: ``python -m kvwire.cli`` runs the command line when imported.
NOT_IMPORTED = {"kvwire.cli.__main__"}


def modules_with_examples() -> list[str]:
    """Every module of the package whose source holds a ``>>>`` line, the package itself included."""
    names = ["kvwire"] + [m.name for m in pkgutil.walk_packages(kvwire.__path__, "kvwire.")]
    out = []
    for name in names:
        if name in NOT_IMPORTED:
            continue
        spec = importlib.util.find_spec(name)
        origin = spec.origin if spec is not None else None
        if origin and origin.endswith(".py") and ">>>" in Path(origin).read_text(encoding="utf-8"):
            out.append(name)
    return sorted(out)


MODULES = modules_with_examples()


def test_the_walk_finds_the_rooms() -> None:
    """The walk reaches into every room (a walk that found nothing would make the examples test vacuous)."""
    rooms = {name.split(".")[1] for name in MODULES if name.count(".") >= 1}
    assert {"kernels", "traces", "scenario", "results", "planning", "cli"} <= rooms
    assert len(MODULES) >= 30


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name: str) -> None:
    """Every ``>>>`` example of the module runs and prints what its docstring says."""
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples failed in {name}"
    assert result.attempted > 0, f"{name} has a '>>>' line but no example doctest can run"
