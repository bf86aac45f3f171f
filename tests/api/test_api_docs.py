"""The documentation site under ``/docs``, on real ``kvwire-api`` servers on 127.0.0.1: a small site written in
``tmp_path`` is served from ``--docs DIR``, ``KVWIRE_DOCS_DIR`` or ``site/`` in the directory the server starts in
(index.html for directories, after a redirect to the trailing slash; each file with its content type; the site's
404 page for unknown paths; nothing outside the site, whether by ``..``, its encoding or a symbolic link); with no
site every ``/docs`` address is 404 and ``GET /health`` says ``"docs": null``. ``kvwire serve`` and ``kvwire-api``
take ``--docs DIR`` and ``--no-docs``."""

from __future__ import annotations

import contextlib
import http.client
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from api_support import Server, make_client
from click.testing import CliRunner
from kvwire_api import server as api_server
from kvwire_api.config import Settings, SettingsError

#: The site's files: path -> (bytes, the content type the server must give).
SITE = {
    "index.html": (
        b"<!doctype html><title>kvwire docs</title><a href='guide/'>guide</a>\n",
        "text/html; charset=utf-8",
    ),
    "guide/index.html": (b"<!doctype html><title>guide</title>\n", "text/html; charset=utf-8"),
    "404.html": (b"<!doctype html><title>not here</title>\n", "text/html; charset=utf-8"),
    "assets/app.js": (b"export const x = 1;\n", "text/javascript; charset=utf-8"),
    "assets/style.css": (b"body { color: #123; }\n", "text/css; charset=utf-8"),
    "assets/logo.svg": (b"<svg xmlns='http://www.w3.org/2000/svg'/>\n", "image/svg+xml"),
    "assets/font.woff2": (b"wOF2\x00\x01", "font/woff2"),
    "search/search_index.json": (b'{"docs": []}\n', "application/json"),
    "sitemap.xml.gz": (b"\x1f\x8b\x08\x00", "application/gzip"),
}
SECRET = b"outside the site\n"


def write_site(root: Path) -> Path:
    """The site under ``root / "site"``, a secret file beside it and a symbolic link from the site to it."""
    site = root / "site"
    for rel, (body, _) in SITE.items():
        (site / rel).parent.mkdir(parents=True, exist_ok=True)
        (site / rel).write_bytes(body)
    (root / "secret.txt").write_bytes(SECRET)
    (site / "leak.txt").symlink_to(root / "secret.txt")
    return site


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KVWIRE_API_", "KVWIRE_DOCS_DIR"))}
    return {**env, **extra}


@contextlib.contextmanager
def serving(tmp_path: Path, cwd: Path, **env: str) -> Iterator[Server]:
    """A server started in ``cwd`` (the directory a default ``site/`` is looked for in)."""
    with contextlib.chdir(cwd):
        server = Server(tmp_path / "data", clean_env(**env)).start()
    try:
        yield server
    finally:
        server.stop()


def raw_get(server: Server, path: str) -> tuple[int, bytes]:
    """GET ``path`` exactly as written (no client normalises its dots or its escapes)."""
    conn = http.client.HTTPConnection(server.host, server.port, timeout=30)
    try:
        conn.request("GET", path)
        r = conn.getresponse()
        return r.status, r.read()
    finally:
        conn.close()


def check_site(server: Server) -> None:
    with server.client(follow_redirects=False) as c:
        assert c.get("/health").json()["docs"] == "/docs/"
        for rel, (body, ctype) in SITE.items():
            r = c.get(f"/docs/{rel}")
            assert (r.status_code, r.headers["content-type"], r.content) == (200, ctype, body), rel
        for bare, slash in (("/docs", "/docs/"), ("/docs/guide", "/docs/guide/")):
            r = c.get(bare)
            assert (r.status_code, r.headers["location"]) == (301, slash)
        assert c.get("/docs/").content == SITE["index.html"][0]
        assert c.get("/docs/guide/").content == SITE["guide/index.html"][0]
        missing = c.get("/docs/no/such/page")
        assert (missing.status_code, missing.content) == (404, SITE["404.html"][0])
    for path in (
        "/docs/../secret.txt",
        "/docs/%2e%2e/secret.txt",
        "/docs/assets/..%2f..%2fsecret.txt",
        "/docs/assets/%2E%2E/%2E%2E/secret.txt",
        "/docs/leak.txt",
        "/docs/%00",
    ):
        status, body = raw_get(server, path)
        assert status == 404 and SECRET not in body, (path, status, body)


def test_docs_dir_from_the_environment_is_served(tmp_path: Path) -> None:
    """KVWIRE_DOCS_DIR=DIR: the site's files with their content types, directories as their index.html after a
    redirect to the trailing slash, the site's 404 page, nothing outside the site."""
    site = write_site(tmp_path / "built")
    with serving(tmp_path, tmp_path, KVWIRE_DOCS_DIR=str(site)) as server:
        check_site(server)


def test_site_in_the_starting_directory_is_served_by_default(tmp_path: Path) -> None:
    """Without --docs or KVWIRE_DOCS_DIR, ``site/`` of the directory the server starts in is served when it holds an
    index.html (mkdocs build's output)."""
    write_site(tmp_path / "repo")
    with serving(tmp_path, tmp_path / "repo") as server:
        check_site(server)


def test_without_a_site_docs_are_404_and_health_says_so(tmp_path: Path) -> None:
    """No site configured (and no site/ where the server starts, or one without index.html): every /docs address is
    a 404 saying how to serve one, /health says docs null; the page is still served."""
    (tmp_path / "empty" / "site").mkdir(parents=True)
    (tmp_path / "empty" / "site" / "readme.txt").write_text("not a built site\n")
    with serving(tmp_path, tmp_path / "empty") as server, server.client(follow_redirects=False) as c:
        assert c.get("/health").json()["docs"] is None
        for path in ("/docs", "/docs/", "/docs/index.html", "/docs/site/readme.txt", "/docs/readme.txt"):
            r = c.get(path)
            assert r.status_code == 404, path
            assert "--docs DIR" in r.json()["detail"]
        assert c.get("/").status_code == 200


def test_docs_are_public_when_the_service_has_a_token(tmp_path: Path) -> None:
    """Like the page, the site holds no data: it is served without the token; the API still needs it."""
    site = write_site(tmp_path)
    with make_client(tmp_path, token="s3cret-token", docs_dir=site) as c:
        assert c.get("/docs/").status_code == 200
        assert c.get("/docs/assets/app.js").status_code == 200
        assert c.get("/v1/limits").status_code == 401


def test_docs_are_not_in_the_openapi_document(tmp_path: Path) -> None:
    with make_client(tmp_path, docs_dir=write_site(tmp_path)) as c:
        assert not any(p.startswith("/docs") for p in c.get("/schema/openapi.json").json()["paths"])


@pytest.fixture
def started(monkeypatch: pytest.MonkeyPatch) -> list[Settings]:
    """Calls of the server's ``serve`` (replaced: nothing is bound), with the settings each got."""
    calls: list[Settings] = []
    monkeypatch.setattr(api_server, "serve", lambda settings, cluster=None: calls.append(settings))
    for name in [k for k in os.environ if k.startswith(("KVWIRE_API_", "KVWIRE_DOCS_DIR"))]:
        monkeypatch.delenv(name)
    return calls


def test_cli_docs_options(tmp_path: Path, started: list[Settings], monkeypatch: pytest.MonkeyPatch) -> None:
    """``kvwire-api --docs DIR`` serves DIR; ``--no-docs`` serves none even where site/ would be found, and
    with ``--docs`` is a usage error; a DIR that is not a built site is refused at start, saying why."""
    site = write_site(tmp_path / "repo")
    monkeypatch.chdir(tmp_path / "repo")
    run = CliRunner().invoke
    data = ["--data-dir", str(tmp_path / "data")]
    assert run(api_server.main, [*data, "--docs", str(site)]).exit_code == 0
    assert run(api_server.main, data).exit_code == 0
    assert run(api_server.main, [*data, "--no-docs"]).exit_code == 0
    assert [s.docs_dir for s in started] == [site, Path("site").absolute(), None]
    both = run(api_server.main, [*data, "--no-docs", "--docs", str(site)])
    assert both.exit_code == 2 and "contradict" in both.output
    (tmp_path / "not-built").mkdir()
    for bad, why in ((tmp_path / "not-built", "has no index.html"), (tmp_path / "absent", "is not a directory")):
        r = run(api_server.main, [*data, "--docs", str(bad)])
        assert r.exit_code == 1 and why in r.output, r.output
    assert len(started) == 3


def test_kvwire_serve_passes_docs_to_the_service(tmp_path: Path, started: list[Settings]) -> None:
    """``kvwire serve --docs DIR`` is the service's option (the command forwards its arguments)."""
    from kvwire.cli import main as kvwire_main

    site = write_site(tmp_path)
    r = CliRunner().invoke(kvwire_main, ["serve", "--data-dir", str(tmp_path / "data"), "--docs", str(site)])
    assert r.exit_code == 0, r.output
    assert [s.docs_dir for s in started] == [site]
    help_text = CliRunner().invoke(kvwire_main, ["serve", "--help"]).output
    assert "--docs" in help_text and "--no-docs" in help_text


def test_settings_docs_dir(tmp_path: Path) -> None:
    """from_env: KVWIRE_DOCS_DIR, else site/ of the current directory with an index.html, else None."""
    site = write_site(tmp_path)
    env: dict[str, Any] = {"KVWIRE_DOCS_DIR": str(site)}
    assert Settings.from_env(environ=env, data_dir=tmp_path).docs_dir == site
    assert Settings.from_env(environ=env, data_dir=tmp_path, no_docs=True).docs_dir is None
    with contextlib.chdir(tmp_path):
        assert Settings.from_env(environ={}, data_dir=tmp_path).docs_dir == Path.cwd() / "site"
    with contextlib.chdir(site):
        assert Settings.from_env(environ={}, data_dir=tmp_path).docs_dir is None
    with pytest.raises(SettingsError, match=r"has no index\.html"):
        Settings.from_env(environ={}, data_dir=tmp_path, docs_dir=tmp_path)


def test_module_examples() -> None:
    """The ``>>>`` examples of kvwire_api.routes.docs (content types, the path check) print what they show."""
    import doctest

    from kvwire_api.routes import docs

    result = doctest.testmod(docs)
    assert result.failed == 0 and result.attempted >= 3, result
