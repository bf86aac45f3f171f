"""``POST /v1/scenarios/parse`` and ``/format``, in process: a scenario file's text reads as the library reads the
file (every example TOML exactly as ``tomllib`` and ``kvwire.load_scenario`` read it, types included), what
``format`` writes is ``kvwire.scenario.to_toml``'s text and reads back to the same object, syntax errors are a 400
with the line and column the parser names, values no scenario can hold are a 422 naming the field, bodies of the
wrong shape are a 400 naming the key, oversize bodies a 413; the OpenAPI document describes both endpoints."""

from __future__ import annotations

import json
import re
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kvwire
import pytest
from api_support import make_client
from hypothesis import given, settings
from hypothesis import strategies as st
from kvwire.scenario import load_scenario, to_toml
from kvwire_api.scenario_text import format_scenario, parse_text
from litestar.testing import TestClient
from shared_paths import EXAMPLES as EXAMPLES_DIR

#: Every example TOML file (scenarios and sweep definitions), wherever it sits under examples/.
EXAMPLES = sorted(EXAMPLES_DIR.rglob("*.toml"))

#: A document with every kind of value a scenario file may hold (dates and non-finite numbers apart: no scenario
#: holds one, see test_values_no_scenario_holds_are_refused_naming_the_field).
EVERY_KIND = (
    r'''# every kind of value a scenario file may hold
title = "kvwire \"quoted\" \u00e9 \t tab"
literal = 'C:\path\no escapes'
multi = """
line one
  line two \
  joined"""
'''
    + "multi_lit = '''raw \\n kept'''\n"
    + r""""quoted key" = 1
dotted.key.here = true
hex = 0xDEAD_beef
oct = 0o755
bin = 0b1101
big = 1_000_000
neg = -17
float = -3.5e-3
exp = 6.02E23
whole = 14.0
largest = 18446744073709551615
arr = [1, 2.5, "three", [4, 5], { six = 6 }, ]
nested = [
  # a comment inside
  1,
  2,
]
inline = { a = 1, b.c = "d", e = { f = [] } }
[table.sub]
x = 1
[[points]]
n = 1
[[points]]
n = 2
[points.detail]
ok = false
"""
)

#: Documents tomllib refuses, each with where it stops (line, column), as its message says.
BAD_TOML = [
    "a = 1\na = 2\n",
    'a = "unterminated\n',
    "a = 01\n",
    "[t]\n[t]\n",
    "a = [1 2]\n",
    "= 1\n",
    "a = 1\nb = 2 3\n",
    "[workload\nrequests = 300\n",
    "a.b = 1\n[a]\nb.c = 2\n",
]


@pytest.fixture
def client(tmp_path: Path) -> Iterator[TestClient[Any]]:
    with make_client(tmp_path) as c:
        yield c


def typed(value: Any) -> Any:
    """``value`` with every scalar tagged by its JSON type, so that ``==`` tells 14 from 14.0 and 1 from true."""
    if isinstance(value, dict):
        return {k: typed(v) for k, v in value.items()}
    if isinstance(value, list):
        return [typed(v) for v in value]
    return (type(value).__name__, value)


def parse(client: TestClient[Any], text: str, fmt: str = "toml") -> Any:
    return client.post("/v1/scenarios/parse", json={"text": text, "format": fmt})


def fmt_text(client: TestClient[Any], scenario: Any, fmt: str = "toml") -> Any:
    return client.post("/v1/scenarios/format", json={"scenario": scenario, "format": fmt})


def test_there_are_example_tomls() -> None:
    """The examples this file checks exist (a glob that found nothing would check nothing)."""
    assert len(EXAMPLES) >= 2, EXAMPLES


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_every_example_parses_exactly_as_the_library_reads_it(client: TestClient[Any], path: Path) -> None:
    """An example file's text parses to exactly ``tomllib.loads`` of it, which is what ``kvwire.load_scenario``
    reads from the file: same keys, same values, same JSON types (14.0 stays a float); as JSON text too."""
    text = path.read_text(encoding="utf-8")
    want = tomllib.loads(text)
    assert typed(load_scenario(path)) == typed(want)
    r = parse(client, text)
    assert r.status_code == 200, r.text
    assert typed(r.json()["scenario"]) == typed(want)
    r = parse(client, json.dumps(want), "json")
    assert r.status_code == 200, r.text
    assert typed(r.json()["scenario"]) == typed(want)


@pytest.mark.parametrize(
    "text", [*(p.read_text(encoding="utf-8") for p in EXAMPLES), EVERY_KIND, to_toml(kvwire.default_scenario())]
)
def test_format_then_parse_gives_back_the_object(client: TestClient[Any], text: str) -> None:
    """What format writes is the library's own text (``to_toml``; JSON indented by 2 spaces) and parses back to
    the same object, types included."""
    obj = parse(client, text).json()["scenario"]
    assert typed(obj) == typed(tomllib.loads(text))
    toml_text = fmt_text(client, obj).json()["text"]
    assert toml_text == to_toml(obj)
    assert typed(parse(client, toml_text).json()["scenario"]) == typed(obj)
    json_text = fmt_text(client, obj, "json").json()["text"]
    assert json_text == json.dumps(obj, indent=2, ensure_ascii=False) + "\n"
    assert typed(parse(client, json_text, "json").json()["scenario"]) == typed(obj)


def test_format_leaves_null_fields_out_of_toml(client: TestClient[Any]) -> None:
    """TOML has no null: a null field (the default, in a scenario) is left out of TOML and kept in JSON."""
    obj = {"link": "eth-25g", "workload": {"seed": None, "requests": 100}}
    text = fmt_text(client, obj).json()["text"]
    assert text == to_toml(obj) and "seed" not in text
    assert parse(client, text).json()["scenario"] == {"link": "eth-25g", "workload": {"requests": 100}}
    assert parse(client, fmt_text(client, obj, "json").json()["text"], "json").json()["scenario"] == obj


def where_tomllib_stops(text: str) -> tuple[int, int, str]:
    """(line, column, message) of tomllib's error for ``text``, read from its message."""
    with pytest.raises(tomllib.TOMLDecodeError) as info:
        tomllib.loads(text)
    m = re.fullmatch(r"(.*) \(at line (\d+), column (\d+)\)", str(info.value))
    assert m, str(info.value)
    return int(m.group(2)), int(m.group(3)), m.group(1)


@pytest.mark.parametrize("text", BAD_TOML)
def test_toml_syntax_errors_name_the_line_and_column(client: TestClient[Any], text: str) -> None:
    """A document tomllib refuses is a 400 naming the body's ``text``, with tomllib's message, line and column."""
    line, column, message = where_tomllib_stops(text)
    r = parse(client, text)
    assert r.status_code == 400, r.text
    body = r.json()
    assert body["path"] == "text"
    assert body["extra"] == [{"key": "text", "message": message, "source": "body", "line": line, "column": column}]
    assert body["detail"] == f"text: invalid TOML at line {line}, column {column}: {message}"


def test_a_toml_error_at_the_end_of_the_document_names_where_it_ends(client: TestClient[Any]) -> None:
    """tomllib says "at end of document" for an unterminated string: the answer gives that place's line and
    column (line 2, column 7 of 'a = 1\\nb = "x')."""
    text = 'a = 1\nb = "x'
    with pytest.raises(tomllib.TOMLDecodeError, match=r"at end of document"):
        tomllib.loads(text)
    item = parse(client, text).json()["extra"][0]
    assert (item["line"], item["column"], item["message"]) == (2, 7, "Unterminated string")


@pytest.mark.parametrize("text", ['{"workload": {"requests": ', '{"a": 1,\n "b": }', "{'a': 1}", ""])
def test_json_syntax_errors_name_the_line_and_column(client: TestClient[Any], text: str) -> None:
    """JSON text is read by ``json.loads`` (as ``load_scenario`` reads a .json file): its errors are a 400 with
    Python's line, column and message."""
    with pytest.raises(json.JSONDecodeError) as info:
        json.loads(text)
    e = info.value
    r = parse(client, text, "json")
    assert r.status_code == 400, r.text
    assert r.json()["path"] == "text"
    assert r.json()["extra"][0] == {
        "key": "text",
        "message": e.msg,
        "source": "body",
        "line": e.lineno,
        "column": e.colno,
    }


@pytest.mark.parametrize("text", ["[1, 2]", '"a string"', "3", "null"])
def test_json_that_is_not_an_object_is_refused(client: TestClient[Any], text: str) -> None:
    """A scenario is an object: other JSON documents are a 400 naming ``text`` (load_scenario refuses them)."""
    r = parse(client, text, "json")
    assert r.status_code == 400, r.text
    assert r.json()["path"] == "text"
    assert "a scenario must be a JSON object / TOML table" in r.json()["detail"]


@pytest.mark.parametrize(
    ("text", "fmt", "path"),
    [
        ("[workload.arrivals]\nrate_per_s = inf\n", "toml", "workload.arrivals.rate_per_s"),
        ("[workload]\nrequests = nan\n", "toml", "workload.requests"),
        ("when = 1979-05-27\n", "toml", "when"),
        ("[slo]\nat = 07:32:00\n", "toml", "slo.at"),
        ('{"workload": {"seed": 18446744073709551616}}', "json", "workload.seed"),
        ('{"slo": {"ttft_s": NaN}}', "json", "slo.ttft_s"),
        ('{"slo": {"ttft_s": -Infinity}}', "json", "slo.ttft_s"),
    ],
)
def test_values_no_scenario_holds_are_refused_naming_the_field(
    client: TestClient[Any], text: str, fmt: str, path: str
) -> None:
    """tomllib and json.loads read these, but no scenario can hold them and the library refuses them before
    any check, naming the field (``kvwire.simulate`` of the same file says the same): a 422 with that path."""
    with pytest.raises(kvwire.ScenarioError) as info:
        kvwire.scenario.scenario_json(tomllib.loads(text) if fmt == "toml" else json.loads(text))
    r = parse(client, text, fmt)
    assert r.status_code == 422, r.text
    assert (r.json()["path"], r.json()["detail"]) == (path, str(info.value))


def test_text_that_cannot_be_a_document_is_a_400(client: TestClient[Any]) -> None:
    """Nesting too deep for the parsers and integers past Python's digit limit are a 400 naming ``text``."""
    deep = parse(client, "a = " + "[" * 5000 + "]" * 5000)
    huge = parse(client, "a = " + "9" * 5000)
    for r in (deep, huge):
        assert r.status_code == 400, r.text
        assert r.json()["path"] == "text"
    assert "nested too deeply" in deep.json()["detail"]
    assert "4,300 digits" in huge.json()["detail"]


@pytest.mark.parametrize(
    ("endpoint", "body", "path"),
    [
        ("parse", {"text": 3, "format": "toml"}, "text"),
        ("parse", {"text": "a = 1", "format": "yaml"}, "format"),
        ("parse", {"format": "toml"}, "text"),
        ("parse", {"text": "a = 1"}, "format"),
        ("parse", {"text": "a = 1", "format": "toml", "fromat": "json"}, "fromat"),
        ("format", {"scenario": [], "format": "toml"}, "scenario"),
        ("format", {"scenario": {}, "format": 1}, "format"),
        ("format", {"format": "json"}, "scenario"),
        ("format", {"scenario": {}, "format": "toml", "text": ""}, "text"),
    ],
)
def test_wrong_bodies_are_a_400_naming_the_key(
    client: TestClient[Any], endpoint: str, body: dict[str, Any], path: str
) -> None:
    """A wrong type, a format other than toml/json, a missing key and an unknown key are each a 400 whose
    ``path`` names the key."""
    r = client.post(f"/v1/scenarios/{endpoint}", json=body)
    assert r.status_code == 400, r.text
    assert r.json()["path"] == path, r.text
    assert r.json()["detail"].startswith(f"{path}: "), r.text


def test_format_refuses_what_toml_cannot_hold_naming_the_field(client: TestClient[Any]) -> None:
    """A null inside an array (TOML cannot skip an item) and nesting deeper than a scenario's limit are a 422
    naming the field inside the body's ``scenario``; JSON keeps the null."""
    r = fmt_text(client, {"workload": {"trace": {"arrival_s": [0.0, None]}}})
    assert r.status_code == 422, r.text
    assert r.json()["path"] == "scenario.workload.trace.arrival_s[1]"
    assert r.json()["detail"].startswith("scenario.workload.trace.arrival_s[1]: TOML has no null")
    assert fmt_text(client, {"a": [None]}, "json").json()["text"] == '{\n  "a": [\n    null\n  ]\n}\n'
    deep: dict[str, Any] = {}
    node = deep
    for _ in range(40):
        node["a"] = {}
        node = node["a"]
    for f in ("toml", "json"):
        r = fmt_text(client, deep, f)
        assert r.status_code == 422, r.text
        assert r.json()["path"].startswith("scenario.a.a.a")


def test_oversize_bodies_are_refused(tmp_path: Path) -> None:
    """Bodies over the service's max_body_bytes are a 413 on both endpoints, and read below it."""
    with make_client(tmp_path, max_body_bytes=2_000) as c:
        for endpoint, body in (
            ("parse", {"text": "# comment\n" * 300, "format": "toml"}),
            ("format", {"scenario": {"note": "x" * 3_000}, "format": "toml"}),
        ):
            r = c.post(f"/v1/scenarios/{endpoint}", json=body)
            assert r.status_code == 413, r.text
            assert r.json()["status_code"] == 413
        assert parse(c, "# comment\n" * 100).json() == {"scenario": {}}


def test_both_endpoints_are_in_the_openapi_document(client: TestClient[Any]) -> None:
    """The document gives each endpoint's closed body (text/scenario and a format of toml or json), its answer,
    and the error codes it can give."""
    doc = client.get("/schema/openapi.json").json()
    schemas = doc["components"]["schemas"]

    def ref(s: dict[str, Any]) -> dict[str, Any]:
        return schemas[s["$ref"].rsplit("/", 1)[1]] if "$ref" in s else s

    for endpoint, keys, answer in (
        ("parse", {"text", "format"}, "scenario"),
        ("format", {"scenario", "format"}, "text"),
    ):
        op = doc["paths"][f"/v1/scenarios/{endpoint}"]["post"]
        body = ref(op["requestBody"]["content"]["application/json"]["schema"])
        assert set(body["properties"]) == keys and set(body["required"]) == keys
        assert body["additionalProperties"] is False
        assert ref(body["properties"]["format"])["enum"] == ["toml", "json"]
        assert set(op["responses"]) == {"200", "400", "401", "413", "422"}
        ok = ref(op["responses"]["200"]["content"]["application/json"]["schema"])
        assert ok["required"] == [answer]


# A property: the service's reader and writer agree with each other and with the library on any object.

_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**64 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8)
)
_VALUES = st.recursive(
    _SCALARS, lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=6), c, max_size=4), max_leaves=16
)


def _without_nulls(v: Any) -> Any:
    if isinstance(v, dict):
        return {k: _without_nulls(x) for k, x in v.items() if x is not None}
    if isinstance(v, list):
        return [_without_nulls(x) for x in v]
    return v


def _has_null_item(v: Any) -> bool:
    if isinstance(v, dict):
        return any(_has_null_item(x) for x in v.values())
    if isinstance(v, list):
        return any(x is None or _has_null_item(x) for x in v)
    return False


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.text(max_size=6), _VALUES, max_size=5))
def test_any_object_round_trips_through_format_and_parse(obj: dict[str, Any]) -> None:
    """Any JSON object reads back from its JSON text unchanged and from its TOML text without its null fields
    (``to_toml``'s text, which tomllib reads the same), types included; only a null inside an array is refused
    for TOML, naming it."""
    assert typed(parse_text(format_scenario(obj, "json"), "json")) == typed(obj)
    if _has_null_item(obj):
        with pytest.raises(kvwire.ScenarioError, match="TOML has no null"):
            format_scenario(obj, "toml")
        return
    text = format_scenario(obj, "toml")
    assert text == to_toml(obj)
    assert typed(parse_text(text, "toml")) == typed(tomllib.loads(text)) == typed(_without_nulls(obj))


def test_module_examples() -> None:
    """The ``>>>`` examples of kvwire_api.scenario_text print what they show."""
    import doctest

    from kvwire_api import scenario_text

    result = doctest.testmod(scenario_text, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0 and result.attempted >= 3, result
