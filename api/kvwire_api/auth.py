"""The bearer-token rule: when the service has a token (``KVWIRE_API_TOKEN``), every endpoint except
``/health`` requires ``Authorization: Bearer <token>``; without one (loopback only), nothing is required."""

from __future__ import annotations

import hmac
from typing import Any

from litestar.connection import ASGIConnection
from litestar.exceptions import NotAuthorizedException
from litestar.handlers.base import BaseRouteHandler


def require_token(connection: ASGIConnection[Any, Any, Any, Any], handler: BaseRouteHandler) -> None:
    """Litestar guard: 401 unless the request carries the service's bearer token (or the route is public)."""
    token: str | None = connection.app.state.services.settings.token
    if token is None or handler.opt.get("public"):
        return
    scheme, _, value = connection.headers.get("authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not hmac.compare_digest(value.strip().encode(), token.encode()):
        raise NotAuthorizedException(
            detail="this service requires 'Authorization: Bearer <token>' (the token is KVWIRE_API_TOKEN)",
            headers={"WWW-Authenticate": 'Bearer realm="kvwire"'},
        )


__all__ = ["require_token"]
