"""Pieces every route module uses: the ``svc`` dependency, documented error responses, id checks."""

from __future__ import annotations

from litestar.datastructures import State
from litestar.exceptions import NotFoundException
from litestar.openapi.datastructures import ResponseSpec

from kvwire_api.services import Services
from kvwire_api.store import valid_id
from kvwire_api.types import ErrorDict

_DESCRIPTIONS = {
    400: "Malformed body: not JSON, or a value of the wrong JSON type (`path` names it)",
    401: "Missing or wrong `Authorization: Bearer` token (when the service has one)",
    404: "No such id",
    406: "The `Accept` header asks for a format the endpoint cannot produce",
    409: "The job is in a state that does not allow this",
    413: "Request body larger than the service's limit",
    422: "The scenario or argument is refused; `path` names the field as `kvwire.ScenarioError.path` does",
    503: "Every simulation thread is busy and the waiting line is full, or the run exceeded the synchronous "
    "time limit; retry after `Retry-After` seconds",
}


def errors(*codes: int, described: dict[int, str] | None = None) -> dict[int, ResponseSpec]:
    """OpenAPI descriptions of the error responses an endpoint can give (401 is added to all of them);
    ``described`` replaces the usual description of a code where the endpoint means more by it."""
    text = {**_DESCRIPTIONS, **(described or {})}
    return {
        c: ResponseSpec(data_container=ErrorDict, description=text[c], generate_examples=False)
        for c in sorted({401, *codes, *(described or {})})
    }


def provide_services(state: State) -> Services:
    services: Services = state.services
    return services


def check_id(value: str, what: str) -> str:
    """404 for anything that is not an id this service hands out (so ids are safe in file names)."""
    if not valid_id(value):
        raise NotFoundException(detail=f"no {what} with id {value!r}")
    return value


def not_found(what: str, value: str) -> NotFoundException:
    return NotFoundException(detail=f"no {what} with id {value!r}")


__all__ = ["check_id", "errors", "not_found", "provide_services"]
