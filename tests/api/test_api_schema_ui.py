"""``/schema`` works without internet: every script, stylesheet and icon its pages reference is served by the
service itself (issue 23, item 7: Litestar's default pages loaded Redoc and Swagger UI from CDNs, so the page was
blank offline). Without the Swagger UI package the page says what to install and references nothing."""

from __future__ import annotations

from html.parser import HTMLParser
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from api_support import make_client
from kvwire_api.routes import schema_ui
from litestar.testing import TestClient

#: The HTML pages of the OpenAPI document.
PAGES = ("/schema", "/schema/swagger")


class References(HTMLParser):
    """Every URL a page makes the browser load: ``src`` of scripts, images and frames, ``href`` of links."""

    def __init__(self) -> None:
        super().__init__()
        self.urls: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag in ("script", "img", "iframe", "source") and a.get("src"):
            self.urls.append(str(a["src"]))
        if tag == "link" and a.get("href"):
            self.urls.append(str(a["href"]))


def references(html: str) -> list[str]:
    parser = References()
    parser.feed(html)
    return parser.urls


def test_every_asset_of_the_schema_pages_is_served_by_the_service(client: TestClient[Any]) -> None:
    """Each page is HTML that loads Swagger UI; each URL it references has no scheme or host of its own (so
    the browser asks this server) and is answered 200 with a non-empty body by the same server. Before the fix
    the pages referenced cdn.jsdelivr.net, cdn.redoc.ly and fonts.googleapis.com."""
    assert schema_ui.swagger_ui_dir() is not None, f"Swagger UI is missing: pip install {schema_ui.PACKAGE}"
    for page in PAGES:
        r = client.get(page)
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/html"), (page, r.text[:200])
        urls = references(r.text)
        assert any(u.endswith(".js") for u in urls) and any(u.endswith(".css") for u in urls), (page, urls)
        assert "SwaggerUIBundle(" in r.text
        for url in urls:
            parts = urlsplit(url)
            assert not parts.scheme and not parts.netloc, f"{page} loads {url} from elsewhere"
            asset = client.get(url)
            assert asset.status_code == 200 and asset.content, (page, url, asset.status_code)


def test_assets_are_public_like_the_page(tmp_path: Path) -> None:
    """With a token, the pages need it but their files do not (a browser sends no bearer token for a
    ``<script src>``; the files hold no data)."""
    with make_client(tmp_path, token="tok") as c:
        assert c.get("/schema").status_code == 401
        page = c.get("/schema", headers={"Authorization": "Bearer tok"})
        assert page.status_code == 200
        for url in references(page.text):
            assert c.get(url).status_code == 200, url


def test_without_swagger_ui_the_page_names_the_package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Where the package is missing, ``/schema`` is a page that loads nothing, names the package to install and
    links to the document, which is still served."""
    monkeypatch.setattr(schema_ui, "swagger_ui_dir", lambda: None)
    with make_client(tmp_path) as c:
        r = c.get("/schema")
        assert r.status_code == 200 and schema_ui.PACKAGE in r.text
        assert "/schema/openapi.json" in references(r.text) or "href='/schema/openapi.json'" in r.text
        assert all(not u.endswith((".js", ".css")) for u in references(r.text))
        assert c.get("/schema/openapi.json").status_code == 200
        assert c.get("/schema/openapi.yaml").status_code == 200
