"""The house keeps its floors: the Python package's imports, read from the source with ``ast`` (every import,
at the top of a module or inside a function), form no circle between modules and none between rooms, and every
import between rooms goes down the floors below. The checker is proven to see circles on a small package written
to ``tmp_path`` (so a checker that saw nothing would fail here), and the rooms are kept readable: each has a
docstring saying what lives there, no module is much above 700 lines.

Floors, from the ground up (rooms on one floor do not import each other):

====== ===================================================================================================
floor  rooms
====== ===================================================================================================
-1     the compiled ``_core`` (the Rust core's bindings)
0      ``errors``, ``presets`` (the core's catalogue), ``_moved`` (the old module paths), ``_system`` (memory)
1      ``kernels`` (quantisation, layouts), ``traces`` (trace files into request tables), ``timing`` (the
       timing sources: measured step-time tables, their cache, calibration files)
2      ``scenario`` (the scenario dict: read, check, edit; a scenario may name a trace file)
3      ``results`` (a run and what comes back)
4      ``planning`` (many runs: sweeps, capacity, plots)
5      ``cli`` (the command line)
6      ``kvwire/__init__.py`` (the public API: re-exports only; nothing imports it)
====== ===================================================================================================
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from shared_paths import ROOT

PACKAGE = ROOT / "python" / "kvwire"
SERVICE = ROOT / "api" / "kvwire_api"

FLOORS = {
    "errors": 0,
    "presets": 0,
    "_moved": 0,
    "_system": 0,
    "_core": -1,
    "kernels": 1,
    "traces": 1,
    "timing": 1,
    "scenario": 2,
    "results": 3,
    "planning": 4,
    "cli": 5,
    "": 6,  # kvwire/__init__.py
}
#: A module may be somewhat longer than this before it must be split ("about 700 lines").
MAX_LINES = 720


@dataclass(frozen=True)
class Package:
    """A package on disk: its name, its folder and its modules (dotted name -> file)."""

    name: str
    folder: Path
    modules: dict[str, Path]
    #: Compiled or stub-only modules (no ``.py`` file), e.g. ``kvwire._core``.
    leaves: frozenset[str]

    @classmethod
    def read(cls, folder: Path) -> Package:
        name = folder.name
        modules: dict[str, Path] = {}
        for path in sorted(folder.rglob("*.py")):
            parts = [name, *path.relative_to(folder).with_suffix("").parts]
            if parts[-1] == "__init__":
                parts.pop()
            modules[".".join(parts)] = path
        leaves = frozenset(
            ".".join([name, *p.relative_to(folder).with_suffix("").parts]) for p in folder.rglob("*.pyi")
        ) - set(modules)
        return cls(name, folder, modules, leaves)

    def is_package(self, module: str) -> bool:
        return self.modules[module].name == "__init__.py"

    def resolve(self, dotted: str) -> str | None:
        """The module ``dotted`` names (itself, or its longest prefix that is a module), or ``None`` outside."""
        parts = dotted.split(".")
        while parts:
            candidate = ".".join(parts)
            if candidate in self.modules or candidate in self.leaves:
                return candidate
            parts.pop()
        return None

    def imports(self, module: str) -> Iterator[tuple[str, int]]:
        """``(imported module, line)`` for every import statement of ``module`` that names this package."""
        tree = ast.parse(self.modules[module].read_text(encoding="utf-8"))
        here = module if self.is_package(module) else module.rpartition(".")[0]
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    target = self.resolve(alias.name)
                    if target is not None:
                        yield target, node.lineno
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base_parts = here.split(".")[: len(here.split(".")) - (node.level - 1)]
                    base = ".".join(base_parts + ([node.module] if node.module else []))
                else:
                    base = node.module or ""
                for alias in node.names:
                    # ``from a.b import c``: the module a.b.c if there is one, else a.b itself.
                    sub = f"{base}.{alias.name}"
                    target = sub if sub in self.modules or sub in self.leaves else self.resolve(base)
                    if target is not None:
                        yield target, node.lineno

    def graph(self) -> dict[str, set[str]]:
        return {m: {t for t, _ in self.imports(m) if t != m} for m in self.modules}

    def room(self, module: str) -> str:
        """``results`` for ``kvwire.results.run``, ``errors`` for ``kvwire.errors``, ``""`` for the package."""
        parts = module.split(".")
        return parts[1] if len(parts) > 1 else ""


def find_circle(graph: dict[str, set[str]]) -> list[str] | None:
    """One circle of ``graph`` as ``[a, b, ..., a]``, or ``None`` when it has none (iterative DFS)."""
    state: dict[str, int] = {}  # 1 on the path, 2 done
    for start in sorted(graph):
        if state.get(start):
            continue
        path: list[str] = [start]
        stack: list[Iterator[str]] = [iter(sorted(graph.get(start, ())))]
        state[start] = 1
        while stack:
            nxt = next(stack[-1], None)
            if nxt is None:
                state[path.pop()] = 2
                stack.pop()
                continue
            if state.get(nxt) == 1:
                return [*path[path.index(nxt) :], nxt]
            if not state.get(nxt):
                state[nxt] = 1
                path.append(nxt)
                stack.append(iter(sorted(graph.get(nxt, ()))))
    return None


def room_graph(pkg: Package) -> dict[str, set[str]]:
    rooms: dict[str, set[str]] = {}
    for module, targets in pkg.graph().items():
        here = pkg.room(module)
        rooms.setdefault(here, set()).update(pkg.room(t) for t in targets if pkg.room(t) != here)
    return rooms


# --------------------------------------------------------------------------------------------------
# The checker sees circles


def write_package(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = root / "demo" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root / "demo"


@pytest.mark.parametrize(
    ("files", "expected"),
    [
        # a -> b -> a, one inside a function (a lazy import is still a circle)
        (
            {"__init__.py": "", "a.py": "from demo.b import f\n", "b.py": "def f():\n    from demo import a\n"},
            ["demo.a", "demo.b", "demo.a"],
        ),
        # through a room's __init__ and a relative import
        (
            {
                "__init__.py": "",
                "low/__init__.py": "from .x import g\n",
                "low/x.py": "import demo.high.y\n",
                "high/__init__.py": "",
                "high/y.py": "from demo.low import g\n",
            },
            ["demo.high.y", "demo.low", "demo.low.x", "demo.high.y"],
        ),
    ],
)
def test_the_checker_finds_a_circle(tmp_path: Path, files: dict[str, str], expected: list[str]) -> None:
    """A package written with a deliberate circle is caught, naming the modules around it."""
    pkg = Package.read(write_package(tmp_path, files))
    circle = find_circle(pkg.graph())
    assert circle is not None
    assert circle[0] == circle[-1] and sorted(set(circle)) == sorted(set(expected))


def test_the_checker_passes_a_tree(tmp_path: Path) -> None:
    """Imports that only go down (from a module, its package and a compiled leaf) are no circle."""
    files = {"__init__.py": "from demo.b import f\n", "a.py": "from demo import _core\n", "b.py": "import demo.a\n"}
    pkg = Package.read(write_package(tmp_path, {**files, "_core.pyi": ""}))
    assert pkg.graph() == {"demo": {"demo.b"}, "demo.a": {"demo._core"}, "demo.b": {"demo.a"}}
    assert find_circle(pkg.graph()) is None


# --------------------------------------------------------------------------------------------------
# The package


@pytest.fixture(scope="module")
def kvwire_pkg() -> Package:
    return Package.read(PACKAGE)


def test_no_circle_between_modules(kvwire_pkg: Package) -> None:
    """No module of ``kvwire`` imports, directly or through others, a module that imports it."""
    assert len(kvwire_pkg.modules) >= 40  # the walk found the package
    circle = find_circle(kvwire_pkg.graph())
    assert circle is None, "import circle: " + " -> ".join(circle or [])


def test_no_circle_between_rooms(kvwire_pkg: Package) -> None:
    """The rooms (``results``, ``traces``, ...) import each other without a circle, so importing one room's
    module (which runs the room's ``__init__``) never comes back to a room half imported."""
    circle = find_circle(room_graph(kvwire_pkg))
    assert circle is None, "circle between rooms: " + " -> ".join(circle or [])


def test_imports_go_down_the_floors(kvwire_pkg: Package) -> None:
    """Every import from one room into another goes to a lower floor (the table in this module's docstring);
    nothing imports ``kvwire/__init__.py``."""
    rooms = {kvwire_pkg.room(m) for m in kvwire_pkg.modules}
    assert rooms <= set(FLOORS), f"rooms without a floor: {sorted(rooms - set(FLOORS))}"
    wrong = [
        f"{module}:{line} imports {target} (floor {FLOORS[kvwire_pkg.room(target)]} from floor "
        f"{FLOORS[kvwire_pkg.room(module)]})"
        for module in kvwire_pkg.modules
        for target, line in kvwire_pkg.imports(module)
        if kvwire_pkg.room(target) != kvwire_pkg.room(module)
        and FLOORS[kvwire_pkg.room(target)] >= FLOORS[kvwire_pkg.room(module)]
    ]
    assert not wrong, "\n".join(wrong)


def test_each_room_says_what_lives_there(kvwire_pkg: Package) -> None:
    """Every module has a docstring; a room's ``__init__`` says in its first sentence what the room holds."""
    missing = [m for m, path in kvwire_pkg.modules.items() if not ast.get_docstring(ast.parse(path.read_text("utf-8")))]
    assert not missing, f"modules without a docstring: {missing}"


def test_modules_stay_readable(kvwire_pkg: Package) -> None:
    """No module of the package grows much past 700 lines (split it by concern instead)."""
    long = {m: n for m, p in kvwire_pkg.modules.items() if (n := len(p.read_text("utf-8").splitlines())) > MAX_LINES}
    assert not long, long


def test_the_service_has_no_circle() -> None:
    """The HTTP service's package (``kvwire_api``) has no circle between its modules either."""
    pkg = Package.read(SERVICE)
    assert len(pkg.modules) >= 10
    circle = find_circle(pkg.graph())
    assert circle is None, "import circle: " + " -> ".join(circle or [])
