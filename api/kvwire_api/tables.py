"""Tables over HTTP: JSON (an array of row objects), CSV or Parquet, chosen by ``Accept`` or ``?format=``.

>>> pick_format("text/csv, application/json;q=0.5", None)
'csv'
>>> pick_format("*/*", None), pick_format(None, "parquet")
('json', 'parquet')
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal, cast

import polars as pl
from litestar import Response
from litestar.datastructures import Headers
from litestar.datastructures.headers import Accept
from litestar.exceptions import HTTPException
from litestar.openapi.spec import OpenAPIFormat, OpenAPIMediaType, OpenAPIType, Operation, Schema
from litestar.params import QueryParameter

TableFormat = Literal["json", "csv", "parquet"]
#: The ``?format=`` query parameter of table endpoints (overrides ``Accept``).
FormatQuery = Annotated[
    TableFormat | None,
    QueryParameter(name="format", description="json, csv or parquet (overrides Accept)", required=False),
]

MEDIA_TYPES: dict[str, str] = {
    "json": "application/json",
    "csv": "text/csv",
    "parquet": "application/vnd.apache.parquet",
}
#: Other names clients use for Parquet.
_ALIASES = {"application/x-parquet": "parquet", "application/parquet": "parquet"}


def pick_format(accept: str | None, query: str | None) -> TableFormat:
    """The table format: ``?format=`` wins, then the best ``Accept`` match, JSON by default.

    Raises:
        HTTPException: 406 when ``Accept`` names only formats the service cannot produce; 400 for an
            unknown ``?format=``.
    """
    if query is not None:
        if query not in MEDIA_TYPES:
            raise HTTPException(
                status_code=400, detail=f"format: must be one of {', '.join(MEDIA_TYPES)}, got {query!r}"
            )
        return cast(TableFormat, query)
    if not accept or not accept.strip():
        return "json"
    offered = [*MEDIA_TYPES.values(), *_ALIASES]
    best = Accept(accept).best_match(offered)
    if best is None:
        raise HTTPException(
            status_code=406,
            detail=f"Accept: none of {accept!r} can be produced; ask for {', '.join(MEDIA_TYPES.values())}",
        )
    if best in _ALIASES:
        return "parquet"
    return cast(TableFormat, next(k for k, v in MEDIA_TYPES.items() if v == best))


def encode(df: pl.DataFrame, fmt: TableFormat) -> bytes:
    """The table's bytes in ``fmt`` (JSON rows keep nulls as ``null``; floats are never NaN here)."""
    if fmt == "json":
        return df.write_json().encode() if df.width else b"[]"
    if fmt == "csv":
        return df.write_csv().encode()
    buf = io.BytesIO()
    df.write_parquet(buf, compression="lz4")
    return buf.getvalue()


def table_response(source: pl.DataFrame | Path, fmt: TableFormat, name: str) -> Response[bytes]:
    """A response with the table (a DataFrame, or a Parquet file sent as it is stored when Parquet is asked)."""
    if isinstance(source, Path):
        body = source.read_bytes() if fmt == "parquet" else encode(pl.read_parquet(source), fmt)
    else:
        body = encode(source, fmt)
    ext = {"json": "json", "csv": "csv", "parquet": "parquet"}[fmt]
    headers = {"Content-Disposition": f'inline; filename="{name}.{ext}"', "Vary": "Accept"}
    return Response(content=body, media_type=MEDIA_TYPES[fmt], headers=headers)


def negotiate(headers: Headers, query: str | None) -> TableFormat:
    return pick_format(headers.get("accept"), query)


@dataclass
class TableOperation(Operation):
    """The OpenAPI operation of a table endpoint: its 200 response in all three formats."""

    def __post_init__(self) -> None:
        ok: Any = (self.responses or {}).get("200")
        if ok is None:
            return
        row = Schema(type=OpenAPIType.OBJECT, description="one row of the table, by column name")
        ok.content = {
            MEDIA_TYPES["json"]: OpenAPIMediaType(schema=Schema(type=OpenAPIType.ARRAY, items=row)),
            MEDIA_TYPES["csv"]: OpenAPIMediaType(schema=Schema(type=OpenAPIType.STRING)),
            MEDIA_TYPES["parquet"]: OpenAPIMediaType(
                schema=Schema(type=OpenAPIType.STRING, format=OpenAPIFormat.BINARY)
            ),
        }


__all__ = [
    "MEDIA_TYPES",
    "FormatQuery",
    "TableFormat",
    "TableOperation",
    "encode",
    "negotiate",
    "pick_format",
    "table_response",
]
