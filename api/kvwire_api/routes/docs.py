"""``/docs/...``: the documentation site (a built MkDocs ``site/``, ``Settings.docs_dir``) as static files.

A directory is served as its ``index.html`` (``/docs`` and ``/docs/guide`` first redirect to the address with a
trailing slash, so that the site's relative links resolve); every file has its content type; nothing outside
the site's directory is ever served (``..`` and symbolic links that leave it are answered 404). An unknown path
gets the site's own ``404.html`` (status 404) when it has one. Without a site every ``/docs`` address is 404,
and ``GET /health`` says ``"docs": null``, so the web page shows no link. Public like the page: a site holds no
data.
"""

from __future__ import annotations

import mimetypes
from pathlib import Path
from typing import Any

from litestar import Request, Response, get
from litestar.datastructures import CacheControlHeader
from litestar.exceptions import NotFoundException
from litestar.params import FromPath
from litestar.response import File, Redirect
from litestar.router import Router

#: Where the site is served (``GET /health``'s ``docs`` when there is one).
DOCS_PATH = "/docs/"
#: Content types of a static site's files that the platform's table may lack or name otherwise (text types are
#: sent with ``charset=utf-8``).
CONTENT_TYPES = {
    ".html": "text/html",
    ".css": "text/css",
    ".js": "text/javascript",
    ".mjs": "text/javascript",
    ".json": "application/json",
    ".map": "application/json",
    ".svg": "image/svg+xml",
    ".xml": "application/xml",
    ".txt": "text/plain",
    ".png": "image/png",
    ".ico": "image/vnd.microsoft.icon",
    ".woff": "font/woff",
    ".woff2": "font/woff2",
    ".ttf": "font/ttf",
    ".gz": "application/gzip",
}
#: The browser revalidates on each load (a rebuilt site is seen at once).
REVALIDATE = CacheControlHeader(no_cache=True)


def content_type(path: Path) -> str:
    """The content type of a site file, by its suffix.

    >>> content_type(Path("assets/app.js")), content_type(Path("sitemap.xml.gz")), content_type(Path("x.bin"))
    ('text/javascript', 'application/gzip', 'application/octet-stream')
    """
    known = CONTENT_TYPES.get(path.suffix.lower())
    if known:
        return known
    guessed, encoding = mimetypes.guess_type(path.name)
    return guessed if guessed and not encoding else "application/octet-stream"


def inside(root: Path, relative: str) -> Path | None:
    """``root / relative`` with every ``..`` and symbolic link resolved, or None when that leaves ``root``
    (which must be resolved already) or cannot be a path.

    >>> root = Path("/srv/site")
    >>> inside(root, "guide/index.html"), inside(root, "../secret"), inside(root, "a/../../b")
    (PosixPath('/srv/site/guide/index.html'), None, None)
    """
    if "\x00" in relative:
        return None
    try:
        target = (root / relative.lstrip("/")).resolve()
    except (OSError, RuntimeError, ValueError):  # a symbolic link loop, a name the platform refuses
        return None
    return target if target == root or target.is_relative_to(root) else None


def _no_site() -> NotFoundException:
    return NotFoundException(
        detail="this service serves no documentation site: build one with `mkdocs build` and start the service "
        "with --docs DIR (or KVWIRE_DOCS_DIR, or from the directory that holds site/)"
    )


def docs_router(docs_dir: Path | None) -> Router:
    """The ``/docs`` routes for the site in ``docs_dir`` (None: every address answers 404)."""
    root = docs_dir.resolve() if docs_dir is not None else None

    def not_found() -> Response[Any]:
        page = root / "404.html" if root is not None else None
        if page is None or not page.is_file():
            raise _no_site() if root is None else NotFoundException(detail="no such page of the documentation")
        return File(page, media_type=CONTENT_TYPES[".html"], content_disposition_type="inline", status_code=404)

    def serve(file_path: str, request: Request[Any, Any, Any]) -> Response[Any]:
        if root is None:
            raise _no_site()
        target = inside(root, file_path)
        if target is None:
            return not_found()
        if target.is_dir():
            # the router drops a trailing slash from the path it matches: the raw path still has it
            raw = (request.scope.get("raw_path") or request.url.path.encode()).decode("latin-1")
            if not raw.endswith("/"):
                return Redirect(path=f"{raw}/", status_code=301)
            target = target / "index.html"
        if not target.is_file():
            return not_found()
        return File(target, media_type=content_type(target), content_disposition_type="inline")

    @get("/", include_in_schema=False, cache_control=REVALIDATE, name="docs-root")
    async def docs_root(request: Request[Any, Any, Any]) -> Response[Any]:
        return serve("", request)

    @get("/{file_path:path}", include_in_schema=False, cache_control=REVALIDATE, name="docs-file")
    async def docs_file(file_path: FromPath[str], request: Request[Any, Any, Any]) -> Response[Any]:
        return serve(file_path, request)

    return Router(path="/docs", route_handlers=[docs_root, docs_file], opt={"public": True})


__all__ = ["CONTENT_TYPES", "DOCS_PATH", "content_type", "docs_router", "inside"]
