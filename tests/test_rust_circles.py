"""No import circles in the Rust core: ``rust/kvwire-core/src`` reads one way, file by file and room by room.

The check reads every ``*.rs`` file under ``rust/kvwire-core/src`` (standalone: the standard library only, no
``kvwire`` import, no compiler) and collects the module paths each file names:

* ``crate::``, ``super::`` and ``self::`` paths in ``use`` trees, groups included (``use crate::{a::b, c::{d, e as
  f}};``), and inline anywhere in the code (``crate::a::b::f(...)``, ``super::x::Y``, ``self::z``, ``$crate::``
  in macros, ``crate::name!`` of an exported macro);
* ``super::`` (repeated or not) and ``self::`` resolved against the file's own module (``foo/mod.rs`` is module
  ``foo``, ``foo/bar.rs`` is ``foo::bar``);
* bare paths through a module the file imported by name (``use crate::quant;`` then ``quant::block::X``).

A parent's bare paths into the modules it declares (``mod bar;`` then ``pub use bar::X`` or ``bar::f()``) are
containment, not dependence, and make no edge: a room's ``mod.rs`` re-exports its parts and an ``impl`` may be
split over its files. Comments (doc links included), string and character literals are skipped, and so are
``#[cfg(test)] mod ... { }`` blocks: a file's unit tests are not part of what the file depends on (they may build
a scenario to test a leaf); other ``#[cfg(test)]`` items count.

Each path names the file it goes through: the deepest ``a/b.rs`` or ``a/b/mod.rs`` that exists along it
(``crate::workload::Arrivals`` names ``workload/mod.rs``, ``crate::workload::trace::Trace`` names
``workload/trace.rs``, ``crate::Result`` names ``lib.rs``); where that file only imports the name (``lib.rs``
says ``pub use error::{Error, Result}``), the path names the file the import points at too, and so on.

Three checks, each naming what it finds with the file and line of every step:

* the file graph has no circle (a file naming itself is no edge);
* the room graph has no circle: a room is a top-level module (``scenario``, ``engine``, ``workload``, ``error``,
  ...), a file's room the first name of its module path; ``lib.rs`` (the crate root, re-exports only) is no room;
* no room names a room on a higher floor (``FLOORS``, after ``shared/spec/architecture.md``).
"""

from __future__ import annotations

import functools
import re
from collections import defaultdict
from itertools import pairwise
from pathlib import Path

#: ``<repository>/tests/test_rust_circles.py`` -> ``<repository>/rust/kvwire-core/src``.
SRC = Path(__file__).resolve().parents[1] / "rust" / "kvwire-core" / "src"

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_KEYWORDS = {"crate", "super", "self"}


# ---------------------------------------------------------------------------------------------------------------
# Lexing: blank out comments and literals (keeping line numbers), then cut the text into tokens.


def _blank(text: str, start: int, end: int, out: list[str]) -> None:
    """Replace ``text[start:end]`` by spaces in ``out``, keeping its newlines."""
    for i in range(start, end):
        if text[i] != "\n":
            out[i] = " "


def strip_comments_and_literals(text: str) -> str:
    """The source with every comment, string, byte string, raw string and character literal blanked out."""
    out = list(text)
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            _blank(text, i, j, out)
            i = j
        elif text.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if text.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif text.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            _blank(text, i, j, out)
            i = j
        elif (m := re.compile(r'(?:b|c)?r(#*)"').match(text, i)) and (i == 0 or not _is_ident_char(text[i - 1])):
            close = '"' + m.group(1)
            j = text.find(close, m.end())
            j = n if j < 0 else j + len(close)
            _blank(text, i, j, out)
            i = j
        elif c == '"' or (c in "bc" and text.startswith('"', i + 1) and (i == 0 or not _is_ident_char(text[i - 1]))):
            j = i + (1 if c == '"' else 2)
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            _blank(text, i, j + 1, out)
            i = j + 1
        elif c == "'":
            # A character literal ('a', '\n', '\u{1F600}', b'x' via the 'b' before it) or a lifetime ('a).
            m = re.compile(r"'(?:\\(?:u\{[0-9A-Fa-f_]*\}|x[0-9A-Fa-f]{2}|.)|[^\\'\n])'").match(text, i)
            if m:
                _blank(text, i, m.end(), out)
                i = m.end()
            else:
                i += 1
        else:
            i += 1
    return "".join(out)


def _is_ident_char(c: str) -> bool:
    return c.isalnum() or c == "_"


_TOKEN = re.compile(r"\$?[A-Za-z_][A-Za-z0-9_]*|::|\S")


def tokens(text: str) -> list[tuple[str, int]]:
    """``(token, line)`` pairs of already stripped source: identifiers, ``::`` and single punctuation marks."""
    out, line, pos = [], 1, 0
    for m in _TOKEN.finditer(text):
        line += text.count("\n", pos, m.start())
        pos = m.start()
        out.append((m.group(), line))
    return out


def drop_test_modules(toks: list[tuple[str, int]]) -> list[tuple[str, int]]:
    """The tokens without ``#[cfg(test)] mod name { ... }`` blocks (other attributes may sit between)."""
    out, i, n = [], 0, len(toks)
    while i < n:
        if [t for t, _ in toks[i : i + 7]] == ["#", "[", "cfg", "(", "test", ")", "]"]:
            j = i + 7
            while j < n and toks[j][0] == "#":  # further attributes: #[...]
                depth, j = 0, j + 1
                while j < n:
                    depth += {"[": 1, "]": -1}.get(toks[j][0], 0)
                    j += 1
                    if depth == 0:
                        break
            k = j + 1 if j < n and toks[j][0] == "pub" else j
            if k + 2 < n and toks[k][0] == "mod" and toks[k + 2][0] == "{":
                depth, j = 0, k + 2
                while j < n:
                    depth += {"{": 1, "}": -1}.get(toks[j][0], 0)
                    j += 1
                    if depth == 0:
                        break
                i = j
                continue
        out.append(toks[i])
        i += 1
    return out


# ---------------------------------------------------------------------------------------------------------------
# Paths: use trees and inline paths, as lists of names.


def _use_tree(toks: list[tuple[str, int]], i: int, prefix: list[str], out: list[tuple[list[str], str | None]]) -> int:
    """Parse one use tree at ``toks[i]`` under ``prefix``; append ``(path, alias)`` leaves; return the next index."""
    path = list(prefix)
    n = len(toks)
    if i < n and toks[i][0] == "::":  # `use ::std::x` (a leading `::`)
        i += 1
    while i < n:
        t = toks[i][0]
        if t == "{":
            i += 1
            while i < n and toks[i][0] != "}":
                i = _use_tree(toks, i, path, out)
                if i < n and toks[i][0] == ",":
                    i += 1
            return i + 1
        if t == "*":
            out.append((path, None))
            return i + 1
        if _IDENT.fullmatch(t.lstrip("$")):
            path.append(t.lstrip("$"))
            i += 1
            if i < n and toks[i][0] == "::":
                i += 1
                continue
            alias = None
            if i + 1 < n and toks[i][0] == "as":
                alias, i = toks[i + 1][0], i + 2
            out.append((path, alias))
            return i
        return i + 1  # something unexpected: skip it
    return i


def references(toks: list[tuple[str, int]]) -> list[tuple[list[str], int, bool, str | None]]:
    """Every path the tokens name: ``(names, line, is_use, alias)``; ``alias`` is the name a ``use`` binds."""
    out = []
    i, n = 0, len(toks)
    while i < n:
        t, line = toks[i]
        if t == "use" and (i == 0 or toks[i - 1][0] != "::"):
            leaves: list[tuple[list[str], str | None]] = []
            j = _use_tree(toks, i + 1, [], leaves)
            while j < n and toks[j][0] != ";":
                j += 1
            for path, alias in leaves:
                out.append((path, line, True, alias))
            i = j + 1
            continue
        if (
            _IDENT.fullmatch(t.lstrip("$"))
            and i + 1 < n
            and toks[i + 1][0] == "::"
            and (i == 0 or toks[i - 1][0] != "::")
        ):
            path, j = [t.lstrip("$")], i + 1
            while j + 1 < n and toks[j][0] == "::" and _IDENT.fullmatch(toks[j + 1][0]):
                path.append(toks[j + 1][0])
                j += 2
            out.append((path, line, False, None))
            i = j
            continue
        i += 1
    return out


# ---------------------------------------------------------------------------------------------------------------
# Files and the graph.


def module_of(path: Path) -> tuple[str, ...]:
    """``lib.rs`` -> ``()``, ``a/mod.rs`` -> ``("a",)``, ``a/b.rs`` -> ``("a", "b")``."""
    parts = path.relative_to(SRC).with_suffix("").parts
    if parts == ("lib",):
        return ()
    return parts[:-1] if parts[-1] == "mod" else parts


def file_of(module: tuple[str, ...], files: dict[tuple[str, ...], Path]) -> tuple[str, ...]:
    """The deepest module along ``module`` that is a file (the crate root at worst)."""
    for k in range(len(module), -1, -1):
        if module[:k] in files:
            return module[:k]
    return ()


def resolve(names: list[str], here: tuple[str, ...], local: dict[str, tuple[str, ...]]) -> tuple[str, ...] | None:
    """The absolute module path ``names`` points into, from module ``here``; ``None`` for another crate."""
    first, rest = names[0], tuple(n for n in names[1:] if n not in ("self", "super"))
    if first == "crate":
        return rest
    if first == "self":
        return here + rest
    if first == "super":
        ups = next((k for k, n in enumerate(names) if n != "super"), len(names))  # `super::super::x`: 2
        return here[: max(len(here) - ups, 0)] + rest
    if first in local:
        return local[first] + rest
    return None


def _declared_modules(toks: list[tuple[str, int]], here: tuple[str, ...]) -> dict[str, tuple[str, ...]]:
    """Modules the tokens declare (``mod x;``, ``pub mod x;``, ``pub(crate) mod x;``): bare ``x::...`` names them."""
    return {
        toks[k + 1][0]: (*here, toks[k + 1][0])
        for k in range(len(toks) - 2)
        if toks[k][0] == "mod" and toks[k + 2][0] == ";"
    }


def _exported_macros(toks: list[tuple[str, int]]) -> list[str]:
    """Names of ``#[macro_export] macro_rules! name``: they live at the crate root as ``crate::name!``."""
    out = []
    for k in range(len(toks) - 4):
        if [t for t, _ in toks[k : k + 4]] == ["#", "[", "macro_export", "]"]:
            j = k + 4
            while j + 2 < len(toks) and toks[j][0] != "macro_rules":
                j += 1
            if j + 2 < len(toks) and toks[j + 1][0] == "!":
                out.append(toks[j + 2][0])
    return out


@functools.cache
def build_graph() -> tuple[dict[tuple[str, ...], dict[tuple[str, ...], int]], dict[tuple[str, ...], Path]]:
    """``{file module: {named file module: first line naming it}}`` and ``{file module: path}``.

    A path names the file it goes through and, where that file only imports the name (``crate::Result``, with
    ``lib.rs`` saying ``pub use error::Result``), also the file the import points at, and so on: naming
    ``crate::scenario::X`` depends on ``scenario/`` even when ``scenario/`` re-exports ``X`` from below. Read once
    per session (the tests share it and do not change it).
    """
    files = {module_of(p): p for p in sorted(SRC.rglob("*.rs"))}
    parsed = {}
    macros: dict[str, tuple[str, ...]] = {}
    for here, path in files.items():
        toks = drop_test_modules(tokens(strip_comments_and_literals(path.read_text(encoding="utf-8"))))
        local = _declared_modules(toks, here)
        refs = references(toks)
        for name in _exported_macros(toks):
            macros[name] = here
        parsed[here] = (local, refs)
    # What each name a file imports points at (absolute), and which module names a file may use bare.
    binds: dict[tuple[str, ...], dict[str, tuple[str, ...]]] = {}
    imported: dict[tuple[str, ...], set[str]] = {}
    for here, (local, refs) in parsed.items():
        b: dict[str, tuple[str, ...]] = {}
        imported[here] = set()
        for names, _, is_use, alias in refs:
            if not is_use or not names:
                continue
            if names[-1] == "self":
                names = names[:-1]
            if not names:
                continue
            target = resolve(names, here, local)
            if target:
                b[alias or target[-1]] = target
                if target in files and (alias or target[-1]) not in local:  # `use crate::quant;`, `quant::x::Y`
                    local[alias or target[-1]] = target
                    imported[here].add(alias or target[-1])
        binds[here] = b

    def land(
        target: tuple[str, ...], seen: frozenset[tuple[tuple[str, ...], str]] = frozenset()
    ) -> list[tuple[str, ...]]:
        """The file ``target`` names, then, through every name that file only imports, the files it leads to."""
        dest = file_of(target, files)
        rest = target[len(dest) :]
        if not dest and len(rest) == 1 and rest[0] in macros:  # `crate::name!` of a `#[macro_export]`
            return [dest, macros[rest[0]]]
        if rest and rest[0] in binds[dest] and (dest, rest[0]) not in seen:
            return [dest, *land(binds[dest][rest[0]] + rest[1:], seen | {(dest, rest[0])})]
        return [dest]

    graph: dict[tuple[str, ...], dict[tuple[str, ...], int]] = {}
    for here, (local, refs) in parsed.items():
        edges: dict[tuple[str, ...], int] = {}
        for names, line, _, _ in refs:
            if not names or (len(names) == 1 and names[0] not in _KEYWORDS):
                continue
            if names[0] not in _KEYWORDS and names[0] not in imported[here]:
                continue  # another crate, or a parent naming a module it declares (containment, not a dependency)
            target = resolve(names, here, local)
            if target is None:
                continue
            for dest in land(target):
                if dest != here and dest not in edges:
                    edges[dest] = line
        graph[here] = edges
    return graph, files


def room_graph(
    graph: dict[tuple[str, ...], dict[tuple[str, ...], int]],
) -> dict[str, dict[str, tuple[tuple[str, ...], tuple[str, ...], int]]]:
    """``{room: {room it names: (a file, the file it names, line)}}``; the crate root is no room."""
    rooms: dict[str, dict[str, tuple[tuple[str, ...], tuple[str, ...], int]]] = defaultdict(dict)
    for src, edges in graph.items():
        if not src:
            continue
        rooms[src[0]]
        for dst, line in edges.items():
            if dst and dst[0] != src[0]:
                rooms[src[0]].setdefault(dst[0], (src, dst, line))
    return dict(rooms)


#: At most this many circles are spelled out per tangle (strongly connected component).
MAX_CHAINS = 12


def circles(graph: dict) -> list[tuple[list, list[list]]]:
    """Each strongly connected component with more than one node (Tarjan): its sorted nodes and the distinct
    shortest closed chains through each of them (so that separate circles tangled together all show)."""
    index: dict = {}
    low: dict = {}
    stack: list = []
    on: set = set()
    comps: list[list] = []
    counter = [0]

    def visit(v) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, {}):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                comps.append(comp)

    for v in sorted(graph):
        if v not in index:
            visit(v)
    out = []
    for comp in comps:
        chains: dict[tuple, list] = {}
        for start in sorted(comp):
            chain = _one_cycle(graph, set(comp), start)
            k = chain.index(min(chain[:-1]))
            chains.setdefault(tuple(chain[k:-1] + chain[:k]), chain)
        out.append((sorted(comp), sorted(chains.values(), key=lambda c: (len(c), c))[:MAX_CHAINS]))
    return out


def _one_cycle(graph: dict, comp: set, start: object) -> list:
    """A shortest closed chain through ``start`` inside a strongly connected component."""
    prev = {start: None}
    frontier = [start]
    while frontier:
        nxt = []
        for v in frontier:
            for w in sorted(graph.get(v, {})):
                if w not in comp:
                    continue
                if w == start:
                    chain = [v]
                    while prev[chain[-1]] is not None:
                        chain.append(prev[chain[-1]])
                    return [*chain[::-1], start]
                if w not in prev:
                    prev[w] = v
                    nxt.append(w)
        frontier = nxt
    return [start, start]


def _file_name(module: tuple[str, ...], files: dict[tuple[str, ...], Path]) -> str:
    return files[module].relative_to(SRC).as_posix()


def describe_file_circles(graph, files) -> list[str]:
    out = []
    for members, chains in circles(graph):
        lines = [f"{len(members)} files tangled ({', '.join(_file_name(m, files) for m in members)}):"]
        for chain in chains:
            lines.append("  " + " -> ".join(_file_name(m, files) for m in chain))
            lines += [
                f"      {_file_name(a, files)}:{graph[a][b]} names {_file_name(b, files)}" for a, b in pairwise(chain)
            ]
        out.append("\n    ".join(lines))
    return out


def describe_room_circles(graph, files) -> list[str]:
    rooms = room_graph(graph)
    out = []
    for members, chains in circles(rooms):
        lines = [f"{len(members)} rooms tangled ({', '.join(members)}):"]
        for chain in chains:
            lines.append("  " + " -> ".join(chain))
            for a, b in pairwise(chain):
                src, dst, line = rooms[a][b]
                lines.append(f"      {a} -> {b}: {_file_name(src, files)}:{line} names {_file_name(dst, files)}")
        out.append("\n    ".join(lines))
    return out


# ---------------------------------------------------------------------------------------------------------------
# The tests.


def test_the_reader_sees_the_core() -> None:
    """The checker reads what it should: the crate is where it looks, and known edges are found."""
    graph, files = build_graph()
    assert () in files and ("engine",) in files, f"no kvwire-core sources under {SRC}"
    assert ("cost",) in graph[("engine",)] or any(dst[:1] == ("cost",) for dst in graph[("engine",)]), (
        "the engine asks cost/ for step times: the reader lost that edge"
    )
    # Groups, `super::` and bare child paths resolve to files.
    toks = tokens(strip_comments_and_literals("use crate::{a::b, c::{d as e, self}}; use super::x::Y; z::w();"))
    assert [(p, a) for p, _, u, a in references(toks) if u] == [
        (["crate", "a", "b"], None),
        (["crate", "c", "d"], "e"),
        (["crate", "c", "self"], None),
        (["super", "x", "Y"], None),
    ]
    assert resolve(["super", "x", "Y"], ("m", "n"), {}) == ("m", "x", "Y")
    assert resolve(["super", "super", "g"], ("m", "n"), {}) == ("g",)
    assert resolve(["crate", "c", "self"], ("m",), {}) == ("c",)
    assert resolve(["self", "x"], ("m",), {}) == ("m", "x")
    assert resolve(["z", "w"], ("m",), {"z": ("m", "z")}) == ("m", "z", "w")
    assert resolve(["std", "fmt"], ("m",), {}) is None
    # Comments, strings and test modules do not count.
    src = "// crate::a::b\n/* crate::c */ let s = \"crate::d\"; let c = 'x';\n"
    src += "#[cfg(test)]\nmod tests { use crate::e; }\n"
    assert references(drop_test_modules(tokens(strip_comments_and_literals(src)))) == []


def test_no_file_circles() -> None:
    graph, files = build_graph()
    found = describe_file_circles(graph, files)
    assert not found, "import circles between files of rust/kvwire-core/src:\n  " + "\n  ".join(found)


def test_no_room_circles() -> None:
    graph, files = build_graph()
    found = describe_room_circles(graph, files)
    assert not found, "import circles between rooms of rust/kvwire-core/src:\n  " + "\n  ".join(found)


#: The floors of ``rust/kvwire-core/src`` (``shared/spec/architecture.md``), ground first: a room may name rooms
#: of its own floor or lower, never higher. A new room takes its place here.
FLOORS: dict[str, int] = {
    # The ground: imports nothing of the crate.
    "error": 0,
    "limits": 0,
    # The leaves: physics, number formats, layouts, workload, metrics, policy (the ground and each other).
    "cost": 1,
    "quant": 1,
    "layout": 1,
    "workload": 1,
    "metrics": 1,
    "policy": 1,
    # The hand-off path (byte counts from quant/layout, compute time from cost) and the preset catalogue.
    "handoff": 2,
    "catalog": 2,
    # The validated scenario and what it derives (its pools' KV capacity, its request table).
    "scenario": 3,
    # Analysis of a scenario, then the engine on top.
    "ceilings": 4,
    # Single steps of a scenario's pools, timed as the engine charges them (calibration, fidelity).
    "steps": 4,
    "engine": 5,
}


def test_no_room_names_a_higher_floor() -> None:
    graph, files = build_graph()
    rooms = room_graph(graph)
    unplaced = sorted(set(rooms) - set(FLOORS))
    assert not unplaced, f"rooms of rust/kvwire-core/src without a floor in FLOORS: {unplaced}; give each one"
    up = [
        f"{a} (floor {FLOORS[a]}) -> {b} (floor {FLOORS[b]}): {_file_name(src, files)}:{line} names "
        f"{_file_name(dst, files)}"
        for a, edges in sorted(rooms.items())
        for b, (src, dst, line) in sorted(edges.items())
        if FLOORS[b] > FLOORS[a]
    ]
    assert not up, "rooms of rust/kvwire-core/src naming a higher floor:\n  " + "\n  ".join(up)


if __name__ == "__main__":  # a look at the graph: `python tests/test_rust_circles.py`
    g, f = build_graph()
    for m, e in sorted(g.items()):
        print(_file_name(m, f), "->", ", ".join(sorted(_file_name(d, f) for d in e)))
    print("\nfile circles:\n  " + "\n  ".join(describe_file_circles(g, f)))
    print("\nroom circles:\n  " + "\n  ".join(describe_room_circles(g, f)))
