"""``/v1/traces``: upload a request trace (Azure CSV or Mooncake JSONL) and reference it by id from scenarios.

The body is the file itself, streamed to the data directory up to ``max_trace_bytes`` (413 beyond), parsed
once with ``kvwire.read_trace`` (a malformed file is a 422 naming the row) and kept as Parquet. Scenarios
name it as ``{"workload": {"trace": {"file": "<id>"}}}``; the service resolves the id to its own file, never
to a path from a request.
"""

from __future__ import annotations

import dataclasses
import os
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import anyio
import kvwire
from litestar import Controller, Request, delete, get, post
from litestar.di import NamedDependency
from litestar.exceptions import HTTPException
from litestar.openapi.datastructures import ResponseSpec
from litestar.openapi.spec import OpenAPIMediaType, OpenAPIType, Operation, RequestBody, Schema
from litestar.params import FromPath, QueryParameter

from kvwire_api.routes.common import check_id, errors, not_found
from kvwire_api.services import Services
from kvwire_api.store import TraceRecord, new_id
from kvwire_api.types import ErrorDict, TraceFormatName, TraceInfoDict

#: Content types of each trace format (the first is the one documented).
CONTENT_TYPES = {
    "azure": ("text/csv", "application/csv"),
    "mooncake": ("application/x-ndjson", "application/jsonl", "application/jsonlines", "application/json"),
}
SUFFIX = {"azure": ".csv", "mooncake": ".jsonl"}


def too_large(limit: int) -> str:
    """The 413 of a trace over ``max_trace_bytes``: the limit, where it is set, and what to do."""
    return (
        f"the trace is larger than {limit:,} bytes, this service's limit (KVWIRE_API_MAX_TRACE_BYTES): upload a "
        "shorter part of it, or replay it with the kvwire library or CLI on your own machine"
    )


def trace_format(content_type: str, query: str | None, filename: str | None) -> str:
    """The trace format from ``?format=``, else the content type, else the file name's extension."""
    if query is not None:
        if query not in SUFFIX:
            raise HTTPException(status_code=400, detail=f"format: must be azure or mooncake, got {query!r}")
        return query
    media = content_type.split(";", 1)[0].strip().lower()
    for fmt, types in CONTENT_TYPES.items():
        if media in types:
            return fmt
    if filename:
        suffix = Path(filename).suffix.lower()
        for fmt, sfx in SUFFIX.items():
            if suffix == sfx or (fmt == "mooncake" and suffix == ".json"):
                return fmt
    raise HTTPException(
        status_code=415,
        detail=f"Content-Type {media or '(none)'!r}: send an Azure CSV as text/csv or a Mooncake trace as "
        "application/x-ndjson (or say ?format=azure|mooncake)",
    )


def parse_and_store(svc: Services, trace_id: str, raw: Path, fmt: str, filename: str, nbytes: int) -> TraceRecord:
    """Parse the uploaded file with the library's reader and keep it as Parquet (the raw file is removed)."""
    try:
        table = kvwire.read_azure_csv(raw) if fmt == "azure" else kvwire.read_mooncake_jsonl(raw)
    except kvwire.TraceError as e:
        # The reader names the file by its temporary path; name the upload instead.
        msg = str(e).replace(str(raw), filename)
        raise kvwire.TraceError(msg, e.path.replace(str(raw), "body")) from None
    finally:
        raw.unlink(missing_ok=True)
    rec = svc.store.put_trace(trace_id, filename, fmt, table, nbytes)
    svc.store.trim_traces(svc.settings.max_traces)
    return rec


def info(rec: TraceRecord) -> TraceInfoDict:
    return dataclasses.asdict(rec)  # type: ignore[return-value]


@dataclass
class UploadOperation(Operation):
    """The upload's request body: the trace file itself, in either format."""

    def __post_init__(self) -> None:
        text = Schema(type=OpenAPIType.STRING)
        self.request_body = RequestBody(
            content={
                CONTENT_TYPES["azure"][0]: OpenAPIMediaType(schema=text),
                CONTENT_TYPES["mooncake"][0]: OpenAPIMediaType(schema=text),
            },
            description="The trace file: Azure LLM CSV (TIMESTAMP,ContextTokens,GeneratedTokens) or Mooncake "
            "JSON Lines (timestamp ms, input_length, output_length)",
            required=True,
        )


class TraceController(Controller):
    path = "/v1/traces"
    tags = ("traces",)

    @post(
        "/",
        status_code=201,
        summary="Upload a trace file",
        operation_class=UploadOperation,
        request_max_body_size=None,  # enforced below, while streaming, with the service's own limit
        responses={
            **errors(400, 413, 422),
            415: ResponseSpec(ErrorDict, description="Unknown trace format", generate_examples=False),
        },
    )
    async def upload(
        self,
        request: Request[Any, Any, Any],
        svc: NamedDependency[Services],
        fmt: Annotated[TraceFormatName | None, QueryParameter(name="format", required=False)] = None,
        filename: Annotated[str | None, QueryParameter(name="filename", required=False, max_length=255)] = None,
    ) -> TraceInfoDict:
        kind = trace_format(request.headers.get("content-type", ""), fmt, filename)
        limit = svc.settings.max_trace_bytes
        announced = request.headers.get("content-length")
        if announced is not None and announced.isdigit() and int(announced) > limit:
            raise HTTPException(status_code=413, detail=too_large(limit))
        trace_id = new_id()
        raw = svc.store.root / "traces" / f"{trace_id}.upload.tmp-{uuid.uuid4().hex[:8]}{SUFFIX[kind]}"
        nbytes = 0
        try:
            async with await anyio.open_file(raw, "wb") as f:
                async for chunk in request.stream():
                    nbytes += len(chunk)
                    if nbytes > limit:
                        raise HTTPException(status_code=413, detail=too_large(limit))
                    await f.write(chunk)
        except BaseException:
            raw.unlink(missing_ok=True)
            raise
        name = os.path.basename(filename) if filename else f"upload{SUFFIX[kind]}"
        rec = await anyio.to_thread.run_sync(parse_and_store, svc, trace_id, raw, kind, name, nbytes)
        return info(rec)

    @get("/", summary="Uploaded traces, newest first", responses=errors())
    async def list_traces(self, svc: NamedDependency[Services]) -> list[TraceInfoDict]:
        return [info(r) for r in await anyio.to_thread.run_sync(svc.store.list_traces)]

    @get("/{trace_id:str}", summary="One uploaded trace", responses=errors(404))
    async def read(self, trace_id: FromPath[str], svc: NamedDependency[Services]) -> TraceInfoDict:
        check_id(trace_id, "trace")
        rec = await anyio.to_thread.run_sync(svc.store.get_trace, trace_id)
        if rec is None:
            raise not_found("trace", trace_id)
        return info(rec)

    @delete("/{trace_id:str}", summary="Delete an uploaded trace", responses=errors(404))
    async def remove(self, trace_id: FromPath[str], svc: NamedDependency[Services]) -> None:
        check_id(trace_id, "trace")
        if not await anyio.to_thread.run_sync(svc.store.delete_trace, trace_id):
            raise not_found("trace", trace_id)


__all__ = ["TraceController", "trace_format"]
