"""A key given twice in one JSON object (issue 23): ``json.loads`` keeps the last value silently, so a scenario
file, a sweep file, a ``--set`` value and the service's scenario text would each run something other than what
one of the two lines says. Every one is refused, naming the key's dotted path (TOML refuses it already).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kvwire
import pytest
from api_support import make_client
from kvwire.scenario import with_overrides
from kvwire.scenario.load import loads_json
from kvwire_api.scenario_text import parse_text
from litestar.testing import TestClient

#: (document, dotted path of its repeated key)
REPEATED = [
    ('{"link": "eth-25g", "link": "ib-ndr"}', "link"),
    ('{"workload": {"seed": 1, "requests": 10, "seed": 2}}', "workload.seed"),
    ('{"workload": {"arrivals": {"rate_per_s": 4, "rate_per_s": 8}}}', "workload.arrivals.rate_per_s"),
    ('{"a": [{"x": 1}, {"y": 1, "y": 2}]}', "a[1].y"),
    # the first "slo" (itself holding a repeat) is replaced by the second: the repeat that remains is "slo"
    ('{"slo": {"ttft_s": 1, "ttft_s": 2}, "slo": {}}', "slo"),
]


@pytest.mark.parametrize(("text", "path"), REPEATED)
def test_loader_names_the_repeated_key(text: str, path: str) -> None:
    """The one JSON loader refuses a repeated key with a ScenarioError whose path is the key's dotted path,
    though json.loads reads the text without complaint."""
    json.loads(text)
    with pytest.raises(kvwire.ScenarioError) as info:
        loads_json(text)
    assert info.value.path == path
    assert str(info.value).startswith(f"{path}: ") and "more than once" in str(info.value)


def test_same_key_in_different_objects_is_fine() -> None:
    """The same key in two different objects (or an array of objects) is not a repeat."""
    text = '{"prefill": {"device": "h100"}, "decode": {"device": "h100"}, "l": [{"x": 1}, {"x": 2}]}'
    assert loads_json(text) == json.loads(text)


def test_scenario_file(tmp_path: Path) -> None:
    """load_scenario (and so kvwire.simulate and validate of the file) of a .json scenario with a repeated
    key: a ScenarioError naming the file in the message and the key in its path."""
    p = tmp_path / "s.json"
    p.write_text('{"workload": {"requests": 10,\n "requests": 20}}')
    for call in (kvwire.load_scenario, kvwire.validate, kvwire.simulate):
        with pytest.raises(kvwire.ScenarioError) as info:
            call(p)  # type: ignore[operator]
        assert info.value.path == "workload.requests"
        assert str(info.value).startswith(f"{p}: workload.requests: ")


def test_toml_already_refuses(tmp_path: Path) -> None:
    """The TOML form of the same file is refused by tomllib (a regression check: both formats refuse)."""
    p = tmp_path / "s.toml"
    p.write_text("[workload]\nrequests = 10\nrequests = 20\n")
    with pytest.raises(kvwire.ScenarioError, match="invalid TOML"):
        kvwire.load_scenario(p)


def test_sweep_file(tmp_path: Path) -> None:
    """A .json sweep definition with a key given twice in its grid: a ScenarioError naming it (load_sweep
    reads files with load_scenario's reader)."""
    p = tmp_path / "sweep.json"
    p.write_text('{"grid": {"link": ["eth-25g"], "link": ["ib-ndr", "eth-100g"]}}')
    with pytest.raises(kvwire.ScenarioError) as info:
        kvwire.load_sweep(p)
    assert info.value.path == "grid.link"


def test_set_value() -> None:
    """A --set value holding an object with a repeated key: a ScenarioError naming the assignment's path and
    the key (it was taken as the last value)."""
    with pytest.raises(kvwire.ScenarioError) as info:
        with_overrides({}, ['link={"preset": "eth-25g", "channels": 1, "channels": 4}'])
    assert info.value.path == "link.channels"
    assert str(info.value).startswith("--set link.channels: ")


def test_service_text() -> None:
    """parse_text (the service's POST /v1/scenarios/parse) of JSON with a repeated key: a ScenarioError naming
    the key, not a syntax error."""
    with pytest.raises(kvwire.ScenarioError) as info:
        parse_text('{"workload": {"seed": 1, "seed": 2}}', "json")
    assert info.value.path == "workload.seed"


@pytest.fixture
def client(tmp_path: Path) -> Iterator[TestClient[Any]]:
    with make_client(tmp_path) as c:
        yield c


def test_service_route(client: TestClient[Any]) -> None:
    """POST /v1/scenarios/parse of JSON text with a repeated key: a 422 whose path is the key."""
    r = client.post("/v1/scenarios/parse", json={"text": '{"link": "a", "link": "b"}', "format": "json"})
    assert r.status_code == 422, r.text
    assert r.json()["path"] == "link"
