"""The module paths kvwire had before its modules moved into rooms (``kvwire.run``, ``kvwire.trace_spec``,
``kvwire.quant`` ...). Each old path imports the very module object that now lives in its room — not a copy —
so code written against the old paths keeps working, monkeypatching included:

>>> import kvwire, kvwire.run
>>> kvwire.run is kvwire.results.run, kvwire.run.KEEP_REQUESTS_MAX
(True, 2000000)

Modules that ``import kvwire`` loads anyway are entered under their old names at once (:func:`alias_loaded`);
the others (the CLI's, the report, the plots) are imported only when an old path asks for them
(:class:`MovedFinder`), so the old paths cost ``import kvwire`` nothing.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import sys
import types
from typing import TYPE_CHECKING, cast

if TYPE_CHECKING:
    from importlib.abc import Loader

#: Old module path -> the module's home now.
MOVED: dict[str, str] = {
    "kvwire.quant": "kvwire.kernels.quant",
    "kvwire.layout": "kvwire.kernels.layout",
    "kvwire.quant_report": "kvwire.kernels.report",
    "kvwire.trace_formats": "kvwire.traces.formats",
    "kvwire.trace_spec": "kvwire.traces.spec",
    "kvwire.trace_ops": "kvwire.traces.ops",
    "kvwire.trace_stats": "kvwire.traces.stats",
    "kvwire.block_hashes": "kvwire.traces.hashes",
    "kvwire.run": "kvwire.results.run",
    "kvwire.summary": "kvwire.results.summary",
    "kvwire.row_writer": "kvwire.results.writer",
    "kvwire.report": "kvwire.results.report",
    "kvwire.timeline": "kvwire.results.timeline",
    "kvwire.ceilings": "kvwire.results.ceilings",
    "kvwire.sessions": "kvwire.results.sessions",
    "kvwire.handoff": "kvwire.results.handoff",
    "kvwire.sweep": "kvwire.planning.sweep",
    "kvwire.capacity": "kvwire.planning.capacity",
    "kvwire.plot": "kvwire.planning.plot",
    "kvwire.progress": "kvwire.planning.progress",
    "kvwire.cli_trace": "kvwire.cli.trace",
}


class _MovedLoader:
    """Loads an old path as the module at its new home (imported there, under its own name). A loader is any object
    with ``create_module`` and ``exec_module`` (``importlib.abc`` is not imported: it costs ``import kvwire`` time)."""

    def __init__(self, new: str) -> None:
        self.new = new
        self.home: importlib.machinery.ModuleSpec | None = None

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        module = importlib.import_module(self.new)
        self.home = module.__spec__
        return module

    def exec_module(self, module: types.ModuleType) -> None:
        # The import system has just given the module the old path's spec: give it back its own.
        module.__spec__ = self.home


class MovedFinder:
    """Finds the old module paths of :data:`MOVED` (and nothing else): a meta path finder (``find_spec``)."""

    def find_spec(
        self, fullname: str, path: object = None, target: types.ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        new = MOVED.get(fullname)
        if new is None:
            return None
        return importlib.machinery.ModuleSpec(fullname, cast("Loader", _MovedLoader(new)))


def alias_loaded() -> None:
    """Enter every moved module already imported under its old path too, and install :class:`MovedFinder` for
    the rest. An old path that names a function of ``kvwire`` (``kvwire.sweep``, ``kvwire.capacity``,
    ``kvwire.ceilings``, ``kvwire.handoff``) is always loaded by then, so importing it never replaces the
    function with the module."""
    for old, new in MOVED.items():
        if new in sys.modules:
            sys.modules.setdefault(old, sys.modules[new])
    if not any(isinstance(f, MovedFinder) for f in sys.meta_path):
        sys.meta_path.append(MovedFinder())


def module(name: str) -> types.ModuleType:
    """The module an old attribute path ``kvwire.<name>`` names.

    Raises:
        AttributeError: ``name`` is not an old module path.
    """
    new = MOVED.get(f"kvwire.{name}")
    if new is None:
        raise AttributeError(f"module 'kvwire' has no attribute {name!r}")
    return importlib.import_module(new)


__all__ = ["MOVED", "MovedFinder", "alias_loaded", "module"]
