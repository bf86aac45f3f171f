"""``/schema``: the OpenAPI document as an interactive page that works without internet.

Litestar's OpenAPI pages load their scripts and stylesheets from CDNs, so on a machine without internet
``/schema`` was a blank page. Here every file the page references is served by the service itself:
Swagger UI's distribution (``swagger-ui-bundle.js``, ``swagger-ui-standalone-preset.js``, ``swagger-ui.css``,
its icon) comes from the ``swagger_ui_bundle`` package that the PyPI package ``swagger-ui-bundle-v2``
installs (Swagger UI 5, Apache-2.0, the licence shipped in the package's metadata) and is served under
``/schema/assets/``. Swagger UI 5 or later is needed: the document is OpenAPI 3.1, which Swagger UI 4 (the
older ``swagger-ui-bundle`` package) cannot render.

Pages: ``/schema`` and ``/schema/swagger`` (Swagger UI), ``/schema/openapi.json``, ``/schema/openapi.yaml``
(the document). Without the package, ``/schema`` is a plain page that says which package to install and links
to the document: never a page that waits for a CDN. The assets, like the web page's own files, are public (they
hold no data); the pages themselves need the token when the service has one.
"""

from __future__ import annotations

import importlib.util
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from litestar import Request
from litestar.datastructures import CacheControlHeader
from litestar.openapi.plugins import OpenAPIRenderPlugin, SwaggerRenderPlugin, YamlRenderPlugin
from litestar.router import Router
from litestar.static_files import create_static_files_router

#: Where the UI's files are served.
ASSETS_PATH = "/schema/assets"
#: The PyPI package that ships them (its import name is ``swagger_ui_bundle``).
PACKAGE = "swagger-ui-bundle-v2"
#: The files the page loads (relative to the distribution's directory).
FILES = ("swagger-ui-bundle.js", "swagger-ui-standalone-preset.js", "swagger-ui.css", "favicon-32x32.png")
#: The oldest Swagger UI that renders OpenAPI 3.1.
MIN_MAJOR = 5
_VERSION = re.compile(r"^swagger-ui-(\d+)\.(\d+)\.(\d+)$")


def swagger_ui_dir() -> Path | None:
    """The directory of the installed Swagger UI distribution (version 5 or later, with every file of
    :data:`FILES`), or None when none is installed. The newest version wins when several are vendored."""
    spec = importlib.util.find_spec("swagger_ui_bundle")
    if spec is None or not spec.submodule_search_locations:
        return None
    found: list[tuple[tuple[int, int, int], Path]] = []
    for location in spec.submodule_search_locations:
        vendor = Path(location) / "vendor"
        for d in vendor.glob("swagger-ui-*") if vendor.is_dir() else ():
            m = _VERSION.match(d.name)
            if m and int(m.group(1)) >= MIN_MAJOR and all((d / f).is_file() for f in FILES):
                found.append(((int(m.group(1)), int(m.group(2)), int(m.group(3))), d))
    return max(found)[1] if found else None


class MissingUIPlugin(OpenAPIRenderPlugin):
    """``/schema`` without Swagger UI installed: a page with no scripts that names the package and links to
    the document."""

    def __init__(self, *, path: str | Sequence[str] = ("/", "/swagger"), **kwargs: Any) -> None:
        super().__init__(path=path, favicon="", **kwargs)

    def render(self, request: Request[Any, Any, Any], openapi_schema: dict[str, Any]) -> bytes:
        """A plain HTML page: what to install, and where the document is."""
        doc = self.get_openapi_json_route(request)
        title = openapi_schema["info"]["title"]
        return (
            f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{title} API</title></head><body>"
            f"<h1>{title} API</h1><p>The interactive page needs Swagger UI, which this installation lacks: "
            f"<code>pip install {PACKAGE}</code> (or install <code>kvwire-api</code> with its dependencies) "
            f"and restart the service.</p><p>The OpenAPI document: <a href='{doc}'>{doc}</a> "
            f"(YAML: <a href='{doc.replace('.json', '.yaml')}'>openapi.yaml</a>).</p></body></html>"
        ).encode()


def render_plugins() -> list[OpenAPIRenderPlugin]:
    """The pages under ``/schema``: Swagger UI with its files served from :data:`ASSETS_PATH` (or the plain
    page of :class:`MissingUIPlugin`), and the document as YAML (JSON is always served by Litestar)."""
    yaml = YamlRenderPlugin()
    if swagger_ui_dir() is None:
        return [MissingUIPlugin(), yaml]
    swagger = SwaggerRenderPlugin(
        path=["/", "/swagger"],
        js_url=f"{ASSETS_PATH}/swagger-ui-bundle.js",
        css_url=f"{ASSETS_PATH}/swagger-ui.css",
        standalone_preset_js_url=f"{ASSETS_PATH}/swagger-ui-standalone-preset.js",
        favicon=f"<link rel='icon' type='image/png' href='{ASSETS_PATH}/favicon-32x32.png'>",
    )
    return [swagger, yaml]


def assets_router() -> Router | None:
    """``/schema/assets/<file>``: Swagger UI's files (public, cached for a day), or None without them."""
    root = swagger_ui_dir()
    if root is None:
        return None
    return create_static_files_router(
        path=ASSETS_PATH,
        directories=[root],
        opt={"public": True},
        cache_control=CacheControlHeader(max_age=86400),
        name="schema-assets",
        include_in_schema=False,
    )


__all__ = ["ASSETS_PATH", "FILES", "PACKAGE", "MissingUIPlugin", "assets_router", "render_plugins", "swagger_ui_dir"]
