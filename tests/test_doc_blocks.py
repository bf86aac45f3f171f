"""Every command and code block of ``README.md`` and ``docs/**/*.md`` runs, and shows what it really prints.

A page's blocks run in order, in one temporary directory (so a block may use a file an earlier one wrote) and,
for Python, in one namespace:

* ``python``: executed.
* ``sh``: every command line runs (``kvwire ...`` through the CLI in this process; anything else, such as
  ``curl``, in ``bash``).
* ``console``: every ``$ command`` runs and what it prints must be the lines shown under it (compared with
  whitespace ignored, ``...`` matching anything, wall-clock times and service ids free).
* ``toml`` / ``json``: a scenario is checked with ``kvwire.validate``, a sweep definition with
  ``kvwire.sweep_points``; with a ``title="name"`` the file is written first, for the blocks after it.
* any other block (plain output): an HTML comment on the line before it, ``<!-- output of: COMMAND -->``, names
  the command whose real output it is, and the test runs it and compares.

A block that cannot run has ``<!-- not run: why -->`` on the line before it; a block that is neither run nor
marked with a reason fails the test. Paths ``../shared/...``, ``examples/...`` and ``benches/...`` are relative
to the repository root; ``localhost:8000`` is a real ``kvwire-api`` server the test starts on a free port.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import runpy
import shlex
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import kvwire
import pytest
from click.testing import CliRunner
from kvwire.cli import main
from shared_paths import SHARED

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]

FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})(?P<info>[^`]*)$")
MARK = re.compile(r"^\s*<!--\s*(?P<kind>not run|output of):(?P<text>.*?)-->\s*$")
TITLE = re.compile(r'title="(?P<title>[^"]+)"')
SHELL_LANGS = {"sh", "bash", "shell"}
#: Figures that differ from run to run: the wall-clock time of a run or a sweep.
WALL = re.compile(r"\b(?P<what>steps|rows) in [0-9]+(?:\.[0-9]+)? s\b")
#: A service id (a uuid4 in hex); the one shown in the docs stands for the one the server hands out.
SERVICE_ID = re.compile(r"\b[0-9a-f]{32}\b")
#: The address the docs' HTTP examples use: a server the test starts on a free port.
DOCS_SERVER = re.compile(r"\b(?:localhost|127\.0\.0\.1):8000\b")
#: Tools the docs' shell examples use besides kvwire.
TOOLS = ("curl", "jq")


@dataclass
class Block:
    """One fenced code block of a page: its language, an optional file name, its text and its mark."""

    page: Path
    line: int
    lang: str
    title: str | None
    code: str
    mark: tuple[str, str] | None

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def blocks_of(text: str, page: Path) -> list[Block]:
    """The fenced code blocks of a Markdown text, with the ``<!-- ... -->`` mark of the line before each."""
    lines = text.splitlines()
    out: list[Block] = []
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if m is None:
            i += 1
            continue
        indent, fence, info = m["indent"], m["fence"], m["info"].strip()
        start = i
        body: list[str] = []
        i += 1
        while i < len(lines) and not (
            lines[i].strip().startswith(fence[0] * len(fence)) and lines[i].strip().strip(fence[0]) == ""
        ):
            body.append(lines[i].removeprefix(indent))
            i += 1
        if i == len(lines):
            raise AssertionError(f"{page}:{start + 1}: a code block that never ends")
        i += 1
        prev = next((ln for ln in reversed(lines[:start]) if ln.strip()), "")
        mk = MARK.match(prev)
        title = TITLE.search(info)
        out.append(
            Block(
                page=page,
                line=start + 1,
                lang=info.split()[0].lower() if info else "",
                title=title["title"] if title else None,
                code="\n".join(body) + "\n",
                mark=(mk["kind"], mk["text"].strip()) if mk else None,
            )
        )
    return out


def kind_of(block: Block) -> str:
    """What the test does with a block: ``skip``, ``python``, ``shell``, ``console``, ``file`` or ``output``;
    an error if the block is neither runnable nor marked with a reason."""
    if block.mark is not None:
        kind, text = block.mark
        if not text:
            raise AssertionError(f"{block.where}: <!-- {kind}: --> needs a reason or a command")
        if kind == "not run":
            return "skip"
        if block.lang in {"python", "py", "console", "toml", "json", *SHELL_LANGS}:
            raise AssertionError(f"{block.where}: <!-- output of: --> marks an output block, not a {block.lang} one")
        return "output"
    if block.lang in {"python", "py"}:
        return "python"
    if block.lang in SHELL_LANGS:
        return "shell"
    if block.lang in {"console", "toml", "json"}:
        return "console" if block.lang == "console" else "file"
    raise AssertionError(
        f"{block.where}: a {block.lang or 'plain'} block that is neither run nor marked: put "
        "<!-- output of: COMMAND --> (its real output) or <!-- not run: why --> on the line before it"
    )


def normalise(text: str) -> str:
    """Output as compared: wall-clock times blanked, then every whitespace character removed (the docs
    re-wrap long JSON lines and align columns)."""
    return re.sub(r"\s+", "", WALL.sub(r"\g<what> in - s", text))


def output_pattern(shown: str) -> tuple[re.Pattern[str], dict[str, str]]:
    """A regex for the real output of a command shown as ``shown``: ``...`` (or ``…``) matches anything, and
    every service id is a group (the same id twice must be the same id twice). Also the group of each id."""
    groups: dict[str, str] = {}
    parts: list[str] = []
    for piece in re.split(r"(\.\.\.|…|[0-9a-f]{32})", normalise(shown)):
        if piece in {"...", "…"}:
            parts.append(".*?")
        elif SERVICE_ID.fullmatch(piece):
            if piece in groups:
                parts.append(f"(?P={groups[piece]})")
            else:
                groups[piece] = f"id{len(groups)}"
                parts.append(f"(?P<{groups[piece]}>[0-9a-f]{{32}})")
        else:
            parts.append(re.escape(piece))
    return re.compile("".join(parts), re.DOTALL), groups


def check_output(shown: str, real: str, where: str) -> dict[str, str]:
    """Fails unless ``real`` is what the docs show; returns the docs' service ids mapped to the real ones."""
    pattern, groups = output_pattern(shown)
    m = pattern.fullmatch(normalise(real))
    if m is None:
        pytest.fail(f"{where}: the docs show\n{shown}\nbut the command prints\n{real}", pytrace=False)
    return {doc_id: m[name] for doc_id, name in groups.items()}


def console_commands(code: str) -> list[tuple[str, str]]:
    """``(command, output shown)`` of a console block: a command starts with ``$ `` and goes on over the
    next lines while a quote is open or the line ends with a backslash."""
    out: list[tuple[str, str]] = []
    lines = code.splitlines()
    i = 0
    if lines and not lines[0].startswith("$ "):
        raise AssertionError(f"a console block starts with {lines[0]!r}, not a '$ ' command")
    while i < len(lines):
        cmd = lines[i].removeprefix("$ ")
        i += 1
        while i < len(lines) and (cmd.endswith("\\") or not _closed(cmd)):
            cmd = cmd + "\n" + lines[i]
            i += 1
        shown: list[str] = []
        while i < len(lines) and not lines[i].startswith("$ "):
            shown.append(lines[i])
            i += 1
        out.append((cmd, "\n".join(shown)))
    return out


def _closed(cmd: str) -> bool:
    try:
        shlex.split(cmd, comments=True)
    except ValueError:
        return False
    return True


def shell_commands(code: str) -> list[str]:
    """The command lines of a ``sh`` block (comment lines dropped, backslash continuations joined)."""
    out: list[str] = []
    pending = ""
    for line in code.splitlines():
        if not pending and (not line.strip() or line.lstrip().startswith("#")):
            continue
        pending = f"{pending}\n{line}" if pending else line
        if not pending.endswith("\\") and _closed(pending):
            out.append(pending)
            pending = ""
    if pending:
        raise AssertionError(f"a shell block ends inside a command: {pending!r}")
    return out


@dataclass
class PageRun:
    """The state a page's blocks share: its directory, its Python namespace, a server, the ids seen."""

    dir: Path
    namespace: dict[str, Any] = field(default_factory=lambda: {"__name__": "__docs__"})
    ids: dict[str, str] = field(default_factory=dict)
    server: Any = None
    missing: list[str] = field(default_factory=list)

    def rewrite(self, text: str) -> str:
        """The docs' relative paths made absolute, the docs' server address made the test's, known ids."""
        text = text.replace("../shared/", f"{SHARED}/")
        text = re.sub(r"(?<![\w./-])(examples|benches)/", lambda m: f"{ROOT}/{m.group(1)}/", text)
        if DOCS_SERVER.search(text):
            text = DOCS_SERVER.sub(f"127.0.0.1:{self.start_server().port}", text)
        for doc_id, real_id in self.ids.items():
            text = text.replace(doc_id, real_id)
        return text

    def start_server(self) -> Any:
        if self.server is None:
            from api_support import Server

            env = {k: v for k, v in os.environ.items() if k != "KVWIRE_API_TOKEN"}
            (self.dir / ".server").mkdir()
            self.server = Server(self.dir / ".server" / "data", env=env)
            self.server.env = env  # the token unset, whatever the caller's environment says
            self.server.start()
        return self.server

    def unrewrite(self, output: str) -> str:
        """An output as the docs show it: the repository-relative paths the commands were given."""
        return (
            output.replace(f"{SHARED}/", "../shared/")
            .replace(f"{ROOT}/examples/", "examples/")
            .replace(f"{ROOT}/benches/", "benches/")
        )

    def run(self, cmd: str, where: str) -> str | None:
        """Runs one command line; its output, or None when a tool it needs is missing (noted)."""
        tokens = _tokens(cmd)
        operators = {t for t in tokens if set(t) <= set("|&;<>()")}
        if operators <= {"&&", ">"} and all(p[:1] == ["kvwire"] for p in _pipeline_parts(tokens)):
            return self.unrewrite(self._run_kvwire(tokens, where))
        for tool in TOOLS:
            if re.search(rf"(^|[|&;\s]){tool}\s", cmd) and shutil.which(tool) is None:
                self.missing.append(f"{where}: {tool} is not installed")
                return None
        proc = subprocess.run(
            ["bash", "-c", "set -euo pipefail\n" + self.rewrite(cmd)],
            cwd=self.dir,
            capture_output=True,
            text=True,
            timeout=300,
            env={k: v for k, v in os.environ.items() if k != "KVWIRE_API_TOKEN"},
        )
        if proc.returncode != 0:
            pytest.fail(f"{where}: {cmd!r} exited with {proc.returncode}:\n{proc.stdout}{proc.stderr}", pytrace=False)
        return self.unrewrite(proc.stdout)

    def _run_kvwire(self, tokens: list[str], where: str) -> str:
        """``kvwire ...`` commands (joined by ``&&``, each optionally ``> FILE``) through the CLI, in process."""
        out: list[str] = []
        for part in _pipeline_parts(tokens):
            target = None
            if ">" in part:
                at = part.index(">")
                target, part = part[at + 1], part[:at]
            args = [self.rewrite(a) for a in part[1:]]
            if args and args[0] == "serve":
                raise AssertionError(f"{where}: kvwire serve runs until stopped: mark its block <!-- not run: -->")
            res = CliRunner().invoke(main, args, prog_name="kvwire", catch_exceptions=True)
            if res.exit_code != 0:
                pytest.fail(f"{where}: kvwire {shlex.join(part[1:])} exited with {res.exit_code}:\n{res.output}")
            if target is not None:
                (self.dir / target).write_text(res.stdout, encoding="utf-8")
            else:
                out.append(res.stdout)
        return "".join(out)

    def run_output_of(self, cmd: str, where: str) -> str | None:
        """The real output of an ``<!-- output of: ... -->`` command; ``python examples/x.py`` runs in process
        (its ``sys.argv`` the script alone, as on the command line, not pytest's)."""
        words = shlex.split(cmd)
        if words[:1] == ["python"] and len(words) == 2:
            buf = io.StringIO()
            script = self.rewrite(words[1])
            argv = sys.argv
            sys.argv = [script]
            try:
                with contextlib.redirect_stdout(buf):
                    runpy.run_path(script, run_name="__main__")
            finally:
                sys.argv = argv
            return self.unrewrite(buf.getvalue())
        return self.run(cmd, where)

    def close(self) -> None:
        if self.server is not None:
            self.server.stop()


def _tokens(cmd: str) -> list[str]:
    lex = shlex.shlex(cmd.replace("\\\n", " "), posix=True, punctuation_chars="|&;<>()")
    lex.whitespace_split = True
    return list(lex)


def _pipeline_parts(tokens: list[str]) -> list[list[str]]:
    parts: list[list[str]] = [[]]
    for t in tokens:
        if t == "&&":
            parts.append([])
        else:
            parts[-1].append(t)
    return parts


def check_file_block(block: Block, page: PageRun) -> None:
    """A scenario or sweep definition (TOML or JSON): written if it has a name, then checked."""
    text = page.rewrite(block.code)
    data = tomllib.loads(text) if block.lang == "toml" else json.loads(text)
    target: Path | dict[str, Any] = data
    if block.title is not None:
        target = page.dir / block.title
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    if set(data) & {"base", "grid", "zip", "replicates"}:
        assert kvwire.sweep_points(target), f"{block.where}: a sweep with no points"
    else:
        kvwire.validate(target)


def run_block(block: Block, page: PageRun) -> None:
    kind = kind_of(block)
    if kind == "skip":
        return
    if kind == "python":
        code = compile(page.rewrite(block.code), block.where, "exec")
        exec(code, page.namespace)
    elif kind == "shell":
        for cmd in shell_commands(block.code):
            page.run(cmd, block.where)
    elif kind == "console":
        for cmd, shown in console_commands(block.code):
            real = page.run(cmd, block.where)
            if real is not None and shown.strip():
                page.ids.update(check_output(shown, real, f"{block.where}: $ {cmd}"))
    elif kind == "file":
        check_file_block(block, page)
    else:
        assert block.mark is not None
        real = page.run_output_of(block.mark[1], block.where)
        if real is not None:
            page.ids.update(check_output(block.code, real, f"{block.where} (output of {block.mark[1]})"))


@contextlib.contextmanager
def page_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[PageRun]:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MPLBACKEND", "Agg")
    monkeypatch.setenv("KVWIRE_DATA_DIR", str(tmp_path / ".data"))
    run = PageRun(tmp_path)
    try:
        yield run
    finally:
        run.close()


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_every_block_of_the_page_runs(page: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The page's blocks run in order and print what the page shows; blocks marked "not run" give a reason."""
    blocks = blocks_of(page.read_text(encoding="utf-8"), page)
    with page_run(tmp_path, monkeypatch) as run:
        for block in blocks:
            run_block(block, run)
    if run.missing:
        if os.environ.get("KVWIRE_REQUIRE_TOOLS") == "1":
            pytest.fail("; ".join(run.missing))
        pytest.skip("; ".join(run.missing) + " (the other blocks ran)")


def test_the_pages_are_found_and_most_blocks_run() -> None:
    """The docs exist and are mostly run: README's three examples and the site's pages; every mark has a
    reason, and the blocks left unrun are a small share."""
    assert (ROOT / "docs" / "index.md").is_file()
    kinds = [kind_of(b) for p in PAGES for b in blocks_of(p.read_text(encoding="utf-8"), p)]
    readme = [kind_of(b) for b in blocks_of((ROOT / "README.md").read_text(encoding="utf-8"), ROOT / "README.md")]
    assert {"python", "console", "output"} <= set(readme), readme
    assert kinds.count("skip") * 5 < len(kinds), f"{kinds.count('skip')} of {len(kinds)} blocks are not run"


def test_an_unmarked_output_block_fails() -> None:
    """A plain block with no mark is refused, and so is a mark without a reason."""
    page = ROOT / "x.md"
    with pytest.raises(AssertionError, match="neither run nor marked"):
        kind_of(blocks_of("text\n\n```\nsome output\n```\n", page)[0])
    with pytest.raises(AssertionError, match="needs a reason"):
        kind_of(blocks_of("<!-- not run: -->\n```sh\npip install .\n```\n", page)[0])
    marked = blocks_of("<!-- not run: installs packages -->\n```sh\npip install .\n```\n", page)[0]
    assert kind_of(marked) == "skip"
    indented = blocks_of("- item\n\n  <!-- output of: kvwire presets -->\n  ```\n  x\n  ```\n", page)[0]
    assert (kind_of(indented), indented.code) == ("output", "x\n")


def test_the_output_check_catches_a_changed_figure() -> None:
    """Outputs are compared figure by figure: a changed number fails, re-wrapping and ``...`` do not, and a
    service id shown stands for the real one."""
    real = "capacity: 11.200 (SLO met by >= 90%)\n" + '{"id": "' + "a" * 32 + '", "eta_s": 0}\n'
    ids = check_output("capacity:   11.200 (SLO ...)\n{\n" + '"id": "' + "0" * 32 + '",\n "eta_s": 0}', real, "x")
    assert ids == {"0" * 32: "a" * 32}
    with pytest.raises(pytest.fail.Exception):
        check_output("capacity: 11.201 (SLO met by >= 90%)\n...", real, "x")
    assert normalise("2,051 events, 14,568 steps in 0.002 s") == normalise("2,051 events, 14,568 steps in 9.5 s")


def test_shell_and_console_blocks_split_into_commands() -> None:
    """Continuation lines (a backslash, an open quote) belong to their command; comments are not commands."""
    code = '$ curl -s x \\\n    -d \'{"a": 1,\n         "b": 2}\'\n{"ok": 1}\n$ kvwire presets\nmodels\n'
    assert [c for c, _ in console_commands(code)] == [
        'curl -s x \\\n    -d \'{"a": 1,\n         "b": 2}\'',
        "kvwire presets",
    ]
    assert shell_commands("# a comment\nkvwire run --set a=1   # note\n\nkvwire presets\n") == [
        "kvwire run --set a=1   # note",
        "kvwire presets",
    ]
