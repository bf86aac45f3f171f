"""The web page: ``GET /`` serves ``static/index.html``; ``/static/...`` its stylesheet, scripts and icon.

Everything the page needs ships inside this package (no CDN, no build step): plain ES modules and SVG charts
drawn by them. The page holds no data of its own, so it is public even when the service has a token; the page
then asks for the token and sends it with its API calls.
"""

from __future__ import annotations

from pathlib import Path

from litestar import Response, get
from litestar.datastructures import CacheControlHeader
from litestar.router import Router
from litestar.static_files import create_static_files_router

#: The page's files.
STATIC_DIR = Path(__file__).resolve().parents[1] / "static"
#: The browser revalidates every file on each load (an upgraded service serves its new page at once).
REVALIDATE = CacheControlHeader(no_cache=True)


@get("/", include_in_schema=False, opt={"public": True}, cache_control=REVALIDATE)
async def index() -> Response[bytes]:
    """The page (``static/index.html``)."""
    body = (STATIC_DIR / "index.html").read_bytes()
    return Response(body, media_type="text/html")


def static_router() -> Router:
    """``/static/<file>``: the page's stylesheet, scripts and icon, public and revalidated on each load."""
    return create_static_files_router(
        path="/static", directories=[STATIC_DIR], opt={"public": True}, cache_control=REVALIDATE, name="page"
    )


__all__ = ["STATIC_DIR", "index", "static_router"]
