"""The service reads no file a request names (issue 24 item 4): a ``model.hf_config`` anywhere in a body — a
scenario, a sweep's base, grid or zip (nested or as a dotted key), a capacity search, a hand-off call, a scenario
file's text, a key spelt with ``\\u`` escapes — is a 422 naming the field, and the file is never opened (the
test's file would be read and reported if it were)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from litestar.testing import TestClient


@pytest.fixture
def config(tmp_path: Path) -> str:
    """A readable, valid config.json on the server's machine: a service that read it would run the scenario."""
    p = tmp_path / "config.json"
    p.write_text(json.dumps({"num_hidden_layers": 2, "hidden_size": 256, "num_attention_heads": 4,
                             "intermediate_size": 512, "vocab_size": 1000}))  # fmt: skip
    return str(p)


def bodies(path: str) -> list[tuple[str, Any, str]]:
    model = {"hf_config": path}
    return [
        ("/v1/simulations", {"model": model, "workload": {"requests": 5}}, "model.hf_config"),
        ("/v1/scenarios/validate", {"model": model}, "model.hf_config"),
        ("/v1/scenarios/format", {"scenario": {"model": model}, "format": "json"}, "scenario.model.hf_config"),
        ("/v1/sweeps", {"base": {"model": model}, "grid": {"link": ["eth-25g"]}}, "base.model.hf_config"),
        ("/v1/sweeps", {"base": {}, "grid": {"model": ["llama3-8b", model]}}, "grid.model[1].hf_config"),
        ("/v1/capacity", {"scenario": {"model": model}}, "scenario.model.hf_config"),
        ("/v1/handoff", {"model": model}, "model.hf_config"),
        ("/v1/sweeps", {"base": {}, "grid": {"model.hf_config": [path]}}, "grid.model.hf_config"),
        ("/v1/sweeps", {"base": {}, "zip": {"model.hf_config": [path]}}, "zip.model.hf_config"),
        # the key spelt with a JSON escape: the body is text, not re-encoded by the client
        ("/v1/simulations", json.dumps({"model": model}).replace("hf_config", "hf_confi\\u0067"), "model.hf_config"),
    ]


@pytest.mark.parametrize("case", range(10))
def test_hf_config_is_refused_naming_the_field(client: TestClient[Any], config: str, case: int) -> None:
    """Each body with a model.hf_config is a 422 whose path names it and which says what to send instead:
    also a sweep's dotted grid or zip key and a key spelt with a \\u escape."""
    url, body, path = bodies(config)[case]
    if isinstance(body, str):
        r = client.post(url, content=body, headers={"Content-Type": "application/json"})
    else:
        r = client.post(url, json=body)
    assert r.status_code == 422, r.text
    assert r.json()["path"] == path
    assert "inline model fields" in r.json()["detail"] and "model_from_hf_config" in r.json()["detail"]


def test_scenario_text_with_hf_config_is_refused(client: TestClient[Any], config: str) -> None:
    """POST /v1/scenarios/parse reads TOML text: its model.hf_config is refused too, not read."""
    text = f'[model]\nhf_config = "{config}"\n'
    r = client.post("/v1/scenarios/parse", json={"text": text, "format": "toml"})
    assert r.status_code == 422, r.text
    assert r.json()["path"] == "model.hf_config"


def test_the_inline_fields_are_accepted(client: TestClient[Any], config: str) -> None:
    """What the refusal says to send instead (the converted model) runs."""
    from kvwire.scenario.hf import model_from_hf_config

    r = client.post("/v1/scenarios/validate", json={"model": model_from_hf_config(config)})
    assert r.status_code == 200, r.text
