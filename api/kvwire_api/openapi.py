"""How the service's types appear in its OpenAPI document.

Request bodies whose unknown keys the service refuses (the scenario and everything in it, the sweep,
capacity and hand-off bodies) are documented as closed objects (``additionalProperties: false``), so that
clients and schema-driven testers know an extra key is an error, not ignored.
"""

from __future__ import annotations

import typing
from typing import Any

from litestar.openapi.spec import Schema
from litestar.plugins import OpenAPISchemaPlugin
from litestar.typing import FieldDefinition


def typed_dicts_in(root: Any) -> set[Any]:
    """``root`` and every TypedDict reachable through its annotations (unions, lists and dicts included)."""
    found: set[Any] = set()

    def visit(tp: Any) -> None:
        if typing.is_typeddict(tp):
            if tp in found:
                return
            found.add(tp)
            for ann in typing.get_type_hints(tp).values():
                visit(ann)
        for arg in typing.get_args(tp):
            visit(arg)

    visit(root)
    return found


class ClosedTypedDictPlugin(OpenAPISchemaPlugin):
    """Documents the given TypedDicts (and those they contain) with ``additionalProperties: false``."""

    def __init__(self, *roots: Any) -> None:
        self.closed: set[Any] = set()
        for root in roots:
            self.closed |= typed_dicts_in(root)

    def is_plugin_supported_field(self, field_definition: FieldDefinition) -> bool:
        return field_definition.type_ in self.closed

    def to_openapi_schema(self, field_definition: FieldDefinition, schema_creator: Any) -> Schema:
        tp = field_definition.type_
        hints = field_definition.get_type_hints(include_extras=True, resolve_generics=True)
        schema: Schema = schema_creator.create_component_schema(
            field_definition,
            required=sorted(tp.__required_keys__),
            property_fields={k: FieldDefinition.from_kwarg(v, k) for k, v in hints.items()},
        )
        schema.additional_properties = False
        return schema


__all__ = ["ClosedTypedDictPlugin", "typed_dicts_in"]
