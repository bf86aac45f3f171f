"""``cost.timing`` over HTTP, against a real ``kvwire-api`` server process on 127.0.0.1 whose timing-table cache
is a folder of this module's own (``KVWIRE_CACHE_DIR`` in the server's environment).

What the tests show: ``GET /v1/timing`` lists the sources and what the installed aiconfigurator-core measured
(h100_sxm with vLLM among them), exactly ``kvwire.timing.aiconfigurator.offered()``, and validates against the
OpenAPI document; a small measured run is the library's own run of the same scenario, its echo carries the
provenance of both pools' tables (built into that cache folder) and its report says so; a calibration file
(``cost.timing.file``) is a 422 naming the field wherever a body holds it — a scenario, a sweep's base, grid or
zip, a capacity search, a scenario's text, a key spelt with ``\\u`` escapes — and the file is never opened; a
system, engine or data version the database lacks is a 422 naming its field, never a 500. The measured tests
need the package (``pip install 'kvwire[measured]'``; CI installs it) and skip with that reason where it is
absent."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import jsonschema_rs
import kvwire
import pytest
from api_support import Server, without_wall_clock
from kvwire.timing import SOURCES
from kvwire.timing import aiconfigurator as aic
from kvwire.timing import resolve as res

needs_package = pytest.mark.skipif(
    not aic.installed(), reason="needs aiconfigurator-core: pip install 'kvwire[measured]'"
)

MEASURED = {"source": "aiconfigurator", "system": "h100_sxm", "backend": "vllm"}
SMALL = {"workload": {"requests": 50, "arrivals": {"rate_per_s": 5}}}


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The timing-table cache of the server (and of the library runs these tests compare with)."""
    return tmp_path_factory.mktemp("timing-cache")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, cache_dir: Path) -> Iterator[Server]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KVWIRE_API_")}
    env["KVWIRE_CACHE_DIR"] = str(cache_dir)
    s = Server(tmp_path_factory.mktemp("timing") / "data", env).start()
    try:
        yield s
    finally:
        s.stop()


@pytest.fixture(scope="module")
def client(server: Server) -> Iterator[httpx.Client]:
    with server.client() as c:
        yield c


@pytest.fixture
def library_cache(cache_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """This process's library runs read and write the server's cache folder (tables from memory are dropped)."""
    monkeypatch.setenv("KVWIRE_CACHE_DIR", str(cache_dir))
    res._MEMORY.clear()
    yield cache_dir
    res._MEMORY.clear()


def response_validator(client: httpx.Client, path: str) -> Any:
    doc = client.get("/schema/openapi.json").json()
    schema = doc["paths"][path]["get"]["responses"]["200"]["content"]["application/json"]["schema"]
    return jsonschema_rs.Draft202012Validator({**schema, "components": doc["components"]})


def test_timing_lists_the_sources_and_what_the_package_measured(client: httpx.Client) -> None:
    """GET /v1/timing: the three sources in kvwire.timing.SOURCES' order; whether aiconfigurator-core is
    installed, its version and the command that installs it; its rows (system, backend, versions newest
    first) are kvwire.timing.aiconfigurator.offered(), h100_sxm with vLLM among them; the answer validates
    against the OpenAPI document's TimingSourcesDict."""
    r = client.get("/v1/timing")
    assert r.status_code == 200, r.text
    body = r.json()
    assert set(body) == {"sources", "aiconfigurator"}
    assert body["sources"] == list(SOURCES) == ["roofline", "aiconfigurator", "calibrated"]
    a = body["aiconfigurator"]
    assert set(a) == {"installed", "version", "install", "offered"}
    assert a["install"] == "pip install 'kvwire[measured]'"
    assert a["installed"] is aic.installed()
    response_validator(client, "/v1/timing").validate(body)
    if not a["installed"]:
        assert a["version"] is None and a["offered"] == []
        pytest.skip("aiconfigurator-core is not installed here: the offered rows are empty")
    assert a["version"] == aic.version()
    assert a["offered"] == aic.offered()
    rows = {(row["system"], row["backend"]): row["versions"] for row in a["offered"]}
    assert rows[("h100_sxm", "vllm")], "h100_sxm/vllm has no data version"
    for (system, backend), versions in rows.items():
        assert backend in aic.BACKENDS and versions, (system, backend)
        assert len(set(versions)) == len(versions), (system, backend)
    assert not response_validator(client, "/v1/timing").is_valid({**body, "sources": ["guessed"]})


@needs_package
def test_measured_run_is_the_librarys_and_echoes_its_provenance(client: httpx.Client, library_cache: Path) -> None:
    """POST /v1/simulations with the measured source (50 requests): 201; the summary is kvwire.simulate's of
    the same scenario (the tables read from the same cache folder, which the server filled: its
    KVWIRE_CACHE_DIR reached it); the echoed scenario's cost.timing keeps the request's fields and adds the
    provenance — the provider and its version, and per pool the system, engine, newest data version, model and
    the interpolation bound — equal to the library's; the stored run's report has the 'step times' line."""
    scenario = {**SMALL, "cost": {"timing": MEASURED}}
    r = client.post("/v1/simulations", json=scenario)
    assert r.status_code == 201, r.text
    sim = r.json()
    tables = sorted((library_cache / "timing").iterdir())
    assert tables, "the server built no table in its KVWIRE_CACHE_DIR"
    timing = sim["scenario"]["cost"]["timing"]
    assert {k: timing[k] for k in MEASURED} == MEASURED
    prov = timing["provenance"]
    assert prov["provider"] == f"aiconfigurator-core {aic.version()}"
    newest = next(
        row["versions"][0] for row in aic.offered() if (row["system"], row["backend"]) == ("h100_sxm", "vllm")
    )
    assert set(prov["pools"]) == {"prefill", "decode"}
    for pool in prov["pools"].values():
        assert (pool["system"], pool["backend"], pool["version"]) == ("h100_sxm", "vllm", newest)
        assert pool["model"] == aic.MODELS["llama3-8b"]
        assert 0 < pool["bound"]["prefill"] < 1 and 0 < pool["bound"]["decode"] < 1
    assert "tables" not in timing  # the echo names the tables' data, it does not carry them

    lib = kvwire.simulate(scenario)
    assert without_wall_clock(sim["summary"]) == without_wall_clock(json.loads(json.dumps(lib.summary)))
    assert lib.scenario["cost"]["timing"]["provenance"] == prov
    assert sorted((library_cache / "timing").iterdir()) == tables  # the library read the server's tables

    report = client.get(f"/v1/simulations/{sim['id']}/report").text
    line = next(x for x in report.splitlines() if x.startswith("step times: "))
    assert line.startswith(
        f"step times: measured (aiconfigurator-core {aic.version()}): prefill h100_sxm vllm {newest}"
    )


#: Where a test's calibration file goes in a body (the real path replaces it).
FILE = "@FILE@"
CAL = {"source": "calibrated", "file": FILE}
BASE = {"workload": {"requests": 5}}
#: A scenario that names a calibration file.
WITH_FILE = {**BASE, "cost": {"timing": CAL}}
#: id: (endpoint, body, the error's path) for every way a body can name cost.timing.file.
FILE_BODIES: dict[str, tuple[str, Any, str]] = {
    "scenario": ("/v1/simulations", WITH_FILE, "cost.timing.file"),
    "escaped-key": ("/v1/simulations", json.dumps(WITH_FILE).replace('"file"', '"fil\\u0065"'), "cost.timing.file"),
    "validate": ("/v1/scenarios/validate", WITH_FILE, "cost.timing.file"),
    "sweep-base": ("/v1/sweeps", {"base": WITH_FILE, "grid": {"link": ["eth-25g"]}}, "base.cost.timing.file"),
    "sweep-grid-timing": (
        "/v1/sweeps", {"base": BASE, "grid": {"cost.timing": [{"source": "roofline"}, CAL]}}, "grid.cost.timing[1].file"
    ),
    "sweep-grid-dotted": ("/v1/sweeps", {"base": BASE, "grid": {"cost.timing.file": [FILE]}}, "grid.cost.timing.file"),
    "sweep-zip-dotted": ("/v1/sweeps", {"base": BASE, "zip": {"cost.timing.file": [FILE]}}, "zip.cost.timing.file"),
    "capacity": ("/v1/capacity", {"scenario": WITH_FILE}, "scenario.cost.timing.file"),
    "format": ("/v1/scenarios/format", {"scenario": WITH_FILE, "format": "toml"}, "scenario.cost.timing.file"),
}  # fmt: skip


@pytest.mark.parametrize("case", list(FILE_BODIES))
def test_a_calibration_file_is_refused_naming_the_field(client: httpx.Client, tmp_path: Path, case: str) -> None:
    """Each body that names cost.timing.file — in a scenario, a sweep's base, its grid or zip (as a dotted key
    or inside a swept cost.timing), a capacity search, a scenario to format, the key spelt with a \\u escape —
    is a 422 whose path names the field and which says to send the calibrated device inline; the file, which
    exists, is never opened (its access time does not move)."""
    path = tmp_path / "my-h100.json"
    path.write_text(json.dumps({"device": {"peak_tflops": 1.0}}))
    os.utime(path, (1_000_000, 1_000_000))
    endpoint, body, where = FILE_BODIES[case]
    text = (body if isinstance(body, str) else json.dumps(body)).replace(FILE, str(path))
    r = client.post(endpoint, content=text, headers={"Content-Type": "application/json"})
    assert r.status_code == 422, r.text
    err = r.json()
    assert err["path"] == where, err
    assert err["detail"].startswith(f"{where}: the service reads no file a request names"), err
    assert "calibrated device inline" in err["detail"]
    assert path.stat().st_atime == 1_000_000  # never read


def test_a_calibration_file_in_scenario_text_is_refused(client: httpx.Client, tmp_path: Path) -> None:
    """POST /v1/scenarios/parse reads TOML and JSON text: a [cost.timing] table with a file is a 422 naming
    cost.timing.file, as the same scenario posted as JSON."""
    text = f'[cost.timing]\nsource = "calibrated"\nfile = "{tmp_path / "cal.json"}"\n'
    r = client.post("/v1/scenarios/parse", json={"text": text, "format": "toml"})
    assert r.status_code == 422 and r.json()["path"] == "cost.timing.file", r.text
    doc = json.dumps({"cost": {"timing": {**CAL, "file": str(tmp_path / "cal.json")}}})
    r = client.post("/v1/scenarios/parse", json={"text": doc, "format": "json"})
    assert r.status_code == 422 and r.json()["path"] == "cost.timing.file", r.text


@needs_package
@pytest.mark.parametrize(
    ("timing", "where"),
    [
        ({"system": "h100_pcie_nonexistent"}, "cost.timing.system"),
        # the library names the pool after the field: "cost.timing (prefill pool)"
        ({"system": "b60", "backend": "trtllm"}, "cost.timing (prefill pool)"),
        ({"version": "0.0.0-none"}, "cost.timing.version"),
        ({"backend": "tgi"}, "cost.timing.backend"),
    ],
    ids=["unknown-system", "engine-the-system-lacks", "unknown-version", "unknown-engine"],
)
def test_what_the_database_lacks_is_a_4xx_naming_the_field(
    client: httpx.Client, library_cache: Path, timing: dict[str, Any], where: str
) -> None:
    """A measured scenario with a system, serving engine or data version the database lacks is refused by
    POST /v1/scenarios/validate and POST /v1/simulations with a 4xx (never a 500) whose path names the field
    (an engine the schema does not list: a 400 or 422 at cost.timing.backend), and the error is the library's
    own message where the library is the one refusing."""
    scenario = {**SMALL, "cost": {"timing": {**MEASURED, **timing}}}
    for endpoint in ("/v1/scenarios/validate", "/v1/simulations"):
        r = client.post(endpoint, json=scenario)
        assert 400 <= r.status_code < 500, (endpoint, r.status_code, r.text)
        err = r.json()
        assert err["path"] == where, (endpoint, err)
    if r.status_code == 422 and where != "cost.timing.backend":
        with pytest.raises(kvwire.ScenarioError) as info:
            kvwire.validate(scenario)
        assert info.value.path == err["path"] and str(info.value) == err["detail"]
