"""``GET /health``: always answered from memory on the event loop (no I/O, no token), even under load."""

from __future__ import annotations

import kvwire
from litestar import get
from litestar.di import NamedDependency

from kvwire_api.routes.docs import DOCS_PATH
from kvwire_api.services import Services
from kvwire_api.types import HealthDict
from kvwire_api.version import __version__


@get("/health", summary="Liveness and load", tags=["service"], opt={"public": True})
async def health(svc: NamedDependency[Services]) -> HealthDict:
    slots = svc.slots
    return {
        "status": "ok",
        "version": __version__,
        "kvwire_version": kvwire.__version__,
        "simulations": {
            "threads": slots.threads,
            "running": slots.running,
            "waiting": slots.waiting,
            "queue": slots.queue,
            "rejected": slots.rejected,
        },
        "jobs": svc.runner.counts(),
        "auth": svc.settings.token is not None,
        "docs": DOCS_PATH if svc.settings.docs_dir is not None else None,
        "executor": svc.runner.describe(),
    }


__all__ = ["health"]
