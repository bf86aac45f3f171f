"""Griffe extension for the API reference: a package name that Python binds to a function is that function.

``kvwire/__init__.py`` does ``from kvwire.sweep import sweep``: at run time ``kvwire.sweep`` is the function,
but static analysis keeps the submodule of the same name. This extension makes the package member the
function, as Python does, so ``::: kvwire.sweep`` documents what users call. Aliases into the shadowed module
(``kvwire.load_sweep``, ...) are resolved first, while the module can still be found by its path. A package
without such a name is left as it is.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import griffe


def _aliases(obj: griffe.Object, seen: set[int]) -> Iterator[griffe.Alias]:
    if id(obj) in seen:
        return
    seen.add(id(obj))
    for member in obj.members.values():
        if isinstance(member, griffe.Alias):
            yield member
        elif member.is_module or member.is_class:
            yield from _aliases(member, seen)


class PublicNames(griffe.Extension):
    """Binds each package name imported over a submodule of the same name to the imported object."""

    def on_package(self, *, pkg: griffe.Module, **kwargs: Any) -> None:
        shadowed = {
            name: target
            for name, target in pkg.imports.items()
            if isinstance(pkg.members.get(name), griffe.Module) and target != f"{pkg.path}.{name}"
        }
        if not shadowed:
            return
        prefixes = tuple(f"{pkg.path}.{name}." for name in shadowed)
        for alias in _aliases(pkg, set()):
            if alias.target_path.startswith(prefixes):
                alias.final_target  # noqa: B018  (resolves and keeps the target)
        for name, target in shadowed.items():
            module = pkg.members[name]
            obj = module.members[target.rsplit(".", 1)[1]]
            obj = obj.final_target if isinstance(obj, griffe.Alias) else obj
            pkg.set_member(name, griffe.Alias(name, obj, parent=pkg))
