"""The service's side of the web page, in process: the page and its files are served (inside the package, nothing
from another host, under the weight budget, public when the service has a token), and the endpoints added for
it give the library's answers: many hand-offs at once, checking a scenario without running it, the default
scenario, a run's latency CDFs and report, best-split jobs, and the richer list of stored runs."""

from __future__ import annotations

import html.parser
import io
import json
import re
from pathlib import Path
from typing import Any

import kvwire
import numpy as np
import polars as pl
import pytest
from api_support import make_client, wait_for_job
from kvwire.results import report
from kvwire_api.routes.catalog import MAX_BATCH
from kvwire_api.routes.page import STATIC_DIR
from litestar.testing import TestClient
from polars.testing import assert_frame_equal

#: The page's budget (issue 14): everything it loads.
MAX_PAGE_BYTES = 2_000_000
#: The only absolute URL the page's files may contain: the SVG namespace (a name, never fetched).
SVG_NAMESPACE = "http://www.w3.org/2000/svg"


def without_wall_column(df: pl.DataFrame) -> pl.DataFrame:
    return df.drop([c for c in df.columns if c.startswith("run.wall_s")])


# --------------------------------------------------------------------------------------------------
# The page and its files


class _Refs(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.refs: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for name, value in attrs:
            if name in ("src", "href") and value and value.startswith("/static/"):
                self.refs.append(value)


def page_files(client: TestClient[Any]) -> dict[str, bytes]:
    """Every file the page loads: the HTML's references, and every module the scripts import, transitively."""
    index = client.get("/")
    parser = _Refs()
    parser.feed(index.text)
    files = {"/": index.content}
    todo = list(parser.refs)
    while todo:
        url = todo.pop()
        if url in files:
            continue
        r = client.get(url)
        assert r.status_code == 200, url
        files[url] = r.content
        if url.endswith(".js"):
            for spec in re.findall(r"""(?:import|from)\s*\(?\s*["'](\.{1,2}/[^"']+)["']""", r.text):
                todo.append(str(Path(url).parent / spec).replace("/./", "/"))
    return files


def test_page_is_served_with_its_files(client: TestClient[Any]) -> None:
    """GET / is the page (HTML, revalidated on each load); it loads its stylesheet, icon and module script from
    /static, whose every import is served with a JavaScript content type; the whole page weighs at most 2 MB; the
    page is not in the OpenAPI document."""
    r = client.get("/")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
    assert r.headers["cache-control"] == "no-cache"
    files = page_files(client)
    assert {"/static/app.css", "/static/favicon.svg", "/static/js/main.js"} <= set(files)
    scripts = [u for u in files if u.endswith(".js")]
    assert len(scripts) >= 8  # main, api, ui, format, charts, schema, explorer, runner, sweeps
    for url in scripts:
        assert re.match(r"(text|application)/javascript", client.get(url).headers["content-type"]), url
    assert sum(len(b) for b in files.values()) <= MAX_PAGE_BYTES
    doc = client.get("/schema/openapi.json").json()
    assert "/" not in doc["paths"] and not any(p.startswith("/static") for p in doc["paths"])
    assert client.get("/static/no-such-file.js").status_code == 404


def test_page_fetches_nothing_from_another_host() -> None:
    """No file of the page names another host (no CDN, no fonts, no analytics): the only absolute URL in them is
    the SVG namespace; every file is inside the package directory."""
    files = [p for p in STATIC_DIR.rglob("*") if p.is_file()]
    assert files
    for p in files:
        urls = set(re.findall(r"""(?:https?:)?//[A-Za-z0-9.-]+\.[A-Za-z]{2,}[^\s"'`)]*""", p.read_text()))
        assert urls <= {SVG_NAMESPACE}, (p.name, urls)


def test_page_is_public_when_the_service_has_a_token(tmp_path: Path) -> None:
    """With a token, the page and its files load without it (they hold no data); the API still needs it."""
    with make_client(tmp_path, token="s3cret-token") as c:
        assert c.get("/").status_code == 200
        assert c.get("/static/js/main.js").status_code == 200
        assert c.get("/v1/presets").status_code == 401
        assert c.post("/v1/handoff/batch", json=[{}]).status_code == 401


# --------------------------------------------------------------------------------------------------
# POST /v1/handoff/batch


def test_handoff_batch_equals_the_library(client: TestClient[Any]) -> None:
    """Each answer of the batch is kvwire.handoff of the same arguments, in order."""
    bodies: list[dict[str, Any]] = [
        {},
        {"link": "eth-25g", "prompt_tokens": 2048, "streaming": "layer", "cost": {"prefill_lm_head": "all"}},
        {"model": "llama3-70b", "device": "h100", "devices_per_instance": 2, "compression": "fp8", "link": "eth-100g"},
        {"model": "deepseek-v3", "device": "h200", "devices_per_instance": 8, "prompt_tokens": 100_000},
    ]
    r = client.post("/v1/handoff/batch", json=bodies)
    assert r.status_code == 200, r.text
    assert r.json() == [json.loads(json.dumps(kvwire.handoff(**b))) for b in bodies]
    assert client.post("/v1/handoff/batch", json=[]).json() == []


def test_handoff_batch_errors_name_the_call(client: TestClient[Any]) -> None:
    """A refused call is a 422 naming its index and field (``[1].prompt_tokens``) with the library's message; an
    unknown argument and a model that does not fit too; more than MAX_BATCH calls are refused; a body that is
    not a list of objects is a 400."""
    with pytest.raises(kvwire.ScenarioError) as info:
        kvwire.handoff(prompt_tokens=0)
    r = client.post("/v1/handoff/batch", json=[{}, {"prompt_tokens": 0}])
    assert r.status_code == 422
    assert r.json()["path"] == "[1].prompt_tokens"
    assert r.json()["detail"] == f"[1].{info.value}"
    assert client.post("/v1/handoff/batch", json=[{"promt_tokens": 5}]).json()["path"] == "[0].promt_tokens"
    assert client.post("/v1/handoff/batch", json=[{}, {}, {"model": "deepseek-v3"}]).json()["path"] == "[2].prefill"
    r = client.post("/v1/handoff/batch", json=[{}] * (MAX_BATCH + 1))
    assert r.status_code == 422 and "limit" in r.json()["detail"]
    assert client.post("/v1/handoff/batch", json={"prompt_tokens": 5}).status_code == 400
    assert client.post("/v1/handoff/batch", json=[5]).status_code == 400


# --------------------------------------------------------------------------------------------------
# /v1/scenarios


def test_default_scenario_is_the_library_default(client: TestClient[Any]) -> None:
    """GET /v1/scenarios/default is kvwire.default_scenario()."""
    assert client.get("/v1/scenarios/default").json() == json.loads(json.dumps(kvwire.default_scenario()))


def test_validate_gives_the_request_count_and_ceilings(client: TestClient[Any]) -> None:
    """A scenario the service would run: 200 with its request count and kvwire.ceilings of it; nothing is
    stored (no run appears)."""
    for scenario, n in (({}, 800), ({"link": "eth-25g", "workload": {"requests": 2000}}, 2000),
                        ({"mode": "colocated", "workload": {"requests": 10}}, 10)):  # fmt: skip
        r = client.post("/v1/scenarios/validate", json=scenario)
        assert r.status_code == 200, r.text
        assert r.json() == {"requests": n, "ceilings": json.loads(json.dumps(kvwire.ceilings(scenario)))}
    assert client.get("/v1/simulations").json() == []


@pytest.mark.parametrize(
    "scenario",
    [
        {"workload": {"arrivals": {"rate_per_s": -1}}},
        {"workload": {"bogus": 1}},
        {"model": "no-such-model"},
        {"model": "deepseek-v3"},
        {"handoff": {"compression": "fp9"}},
    ],
)
def test_validate_refuses_what_a_run_refuses(client: TestClient[Any], scenario: dict[str, Any]) -> None:
    """An invalid scenario is the 422 POST /v1/simulations gives, with the library's message and path."""
    with pytest.raises(kvwire.ScenarioError) as info:
        kvwire.validate(scenario)
    r = client.post("/v1/scenarios/validate", json=scenario)
    assert r.status_code == 422
    assert (r.json()["path"], r.json()["detail"]) == (info.value.path, str(info.value))
    run = client.post("/v1/simulations", json=scenario)
    assert (run.status_code, run.json()["detail"]) == (422, r.json()["detail"])


def test_validate_applies_the_synchronous_bound_and_trace_ids(tmp_path: Path) -> None:
    """Beyond max_sync_requests the answer is the refusal a run would get (same message, path workload.requests);
    an uploaded trace counts its rows; an unknown trace id is refused naming workload.trace.file."""
    with make_client(tmp_path, max_sync_requests=1000) as c:
        big = {"workload": {"requests": 1001}}
        r = c.post("/v1/scenarios/validate", json=big)
        assert (r.status_code, r.json()["path"]) == (422, "workload.requests")
        assert r.json()["detail"] == c.post("/v1/simulations", json=big).json()["detail"]
        csv = b"TIMESTAMP,ContextTokens,GeneratedTokens\n" + b"".join(
            f"2023-11-16 18:15:{i:02d}.0000000,{100 + i},{10 + i}\n".encode() for i in range(30)
        )
        trace = c.post("/v1/traces", content=csv, headers={"Content-Type": "text/csv"}).json()
        r = c.post("/v1/scenarios/validate", json={"workload": {"trace": {"file": trace["id"]}}})
        assert r.status_code == 200, r.text
        assert r.json()["requests"] == 30
        missing = c.post("/v1/scenarios/validate", json={"workload": {"trace": {"file": "0" * 32}}})
        assert (missing.status_code, missing.json()["path"]) == (422, "workload.trace.file")


# --------------------------------------------------------------------------------------------------
# /v1/simulations/{id}/cdf and /report

CDF_SCENARIO = {"link": "eth-25g", "workload": {"requests": 1500, "arrivals": {"rate_per_s": 11}}}


@pytest.fixture
def stored(client: TestClient[Any]) -> tuple[str, kvwire.SimResult]:
    r = client.post("/v1/simulations", json=CDF_SCENARIO)
    assert r.status_code == 201
    return r.headers["location"], kvwire.simulate(CDF_SCENARIO)


def test_cdf_points_are_quantiles_of_the_library_table(
    client: TestClient[Any], stored: tuple[str, kvwire.SimResult]
) -> None:
    """Each CDF point (v, q) is a quantile of the library's own request table: over the measured requests (every
    transferred one for the hand-off), at least floor((n-1)q)+1 values are <= v and at most ceil((n-1)q) are
    < v (the order statistics that bracket a linear-interpolation quantile); points rise with q; q runs from 0
    to 1; the named fractions give the summary's percentiles exactly; ``points`` sets the grid."""
    loc, res = stored
    doc = client.get(f"{loc}/cdf?points=50").json()
    req = res.requests
    measured = req.filter(pl.col("measured"))
    for metric, frame in (("ttft_s", measured), ("tpot_s", measured), ("e2e_s", measured), ("handoff_s", req)):
        values = np.sort(frame[metric].drop_nulls().to_numpy())
        series = doc[metric]
        n = values.size
        assert series["count"] == n > 0
        qs, vs = np.array(series["fractions"]), np.array(series["values_s"])
        assert qs[0] == 0 and qs[-1] == 1 and np.all(np.diff(qs) > 0) and np.all(np.diff(vs) >= 0)
        assert 50 <= qs.size <= 55
        for q, v in zip(qs, vs, strict=True):
            assert np.count_nonzero(values <= v) >= np.floor((n - 1) * q) + 1
            assert np.count_nonzero(values < v) <= np.ceil((n - 1) * q)
        stats = res.summary["latency"][metric]
        for name, q in (("p50", 0.5), ("p90", 0.9), ("p99", 0.99), ("p99_9", 0.999)):
            assert vs[list(qs).index(q)] == pytest.approx(stats[name], rel=1e-12)
        assert vs[0] == values[0] and vs[-1] == stats["max"]
    assert len(client.get(f"{loc}/cdf").json()["ttft_s"]["fractions"]) >= 200


def test_cdf_of_a_tiny_run_and_bad_arguments(client: TestClient[Any]) -> None:
    """A run with one request gives one point per metric that exists and an empty series where none does (a
    one-token output has no TPOT); ``points`` out of [2, 2000] is a 400; an unknown run is a 404."""
    one = {"workload": {"trace": {"arrival_s": [0.0], "prompt_tokens": [100], "output_tokens": [1]}},
           "metrics": {"warmup_fraction": 0}}  # fmt: skip
    loc = client.post("/v1/simulations", json=one).headers["location"]
    doc = client.get(f"{loc}/cdf").json()
    assert doc["ttft_s"]["count"] == 1 and len(set(doc["ttft_s"]["values_s"])) == 1
    assert doc["tpot_s"] == {"count": 0, "values_s": [], "fractions": []}
    for bad in (1, 2001, "x"):
        assert client.get(f"{loc}/cdf?points={bad}").status_code == 400
    assert client.get(f"/v1/simulations/{'0' * 32}/cdf").status_code == 404


def test_report_is_the_cli_report(client: TestClient[Any], stored: tuple[str, kvwire.SimResult]) -> None:
    """GET .../report is kvwire's own report of the same scenario (text/plain), but for the measured wall time;
    it holds the hot-spot sentence the page shows."""
    loc, res = stored
    r = client.get(f"{loc}/report")
    assert r.headers["content-type"].startswith("text/plain")
    wall = re.compile(r"in \d+\.\d{3} s$", re.M)
    assert wall.sub("in <wall> s", r.text) == wall.sub("in <wall> s", report.render(res))
    assert any(line.startswith("hot-spot: ") for line in r.text.splitlines())
    assert client.get(f"/v1/simulations/{'0' * 32}/report").status_code == 404


def test_run_list_says_what_ran_and_how_it_went(client: TestClient[Any]) -> None:
    """GET /v1/simulations lists, per run, the model and link names, mode, arrival rate, TTFT/TPOT p99 and SLO
    attainment of its stored scenario and summary; None where a run has no such figure (colocated: no link;
    a replayed trace: no rate)."""
    runs = [
        {"link": "eth-25g", "workload": {"requests": 300, "arrivals": {"rate_per_s": 9}}},
        {"mode": "colocated", "workload": {"requests": 100}},
        {"workload": {"trace": {"arrival_s": [0.0, 0.5], "prompt_tokens": [10, 20], "output_tokens": [5, 6]}}},
    ]
    for sc in runs:
        assert client.post("/v1/simulations", json=sc).status_code == 201
    listed = client.get("/v1/simulations").json()[::-1]
    for sc, item in zip(runs, listed, strict=True):
        res = kvwire.simulate(sc)
        lat = res.summary["latency"]
        assert item["requests"] == res.summary["requests"]["total"]
        assert item["model"] == res.scenario["model"]["name"] == "Llama-3-8B"
        assert item["mode"] == res.scenario["mode"]
        assert item["ttft_p99_s"] == lat["ttft_s"]["p99"] and item["tpot_p99_s"] == lat["tpot_s"]["p99"]
        assert item["slo_attainment"] == res.summary["slo"]["attainment"]
    assert listed[0]["link"] == "25 GbE" and listed[0]["rate_per_s"] == 9
    assert listed[1]["link"] is None and listed[1]["mode"] == "colocated"
    assert listed[2]["rate_per_s"] is None


# --------------------------------------------------------------------------------------------------
# /v1/splits

SPLIT = {"scenario": {"workload": {"requests": 300}}, "total_instances": 3, "rel_tol": 0.05}


def test_split_job_equals_the_library(client: TestClient[Any]) -> None:
    """POST /v1/splits runs kvwire.best_split as a job: its result is the library's (without the points, which
    are the job's result table, equal to the library's but for wall-clock time); progress counted splits."""
    expected = kvwire.best_split(SPLIT["scenario"], 3, rel_tol=0.05)
    r = client.post("/v1/splits", json=SPLIT)
    assert r.status_code == 202, r.text
    assert r.json()["kind"] == "split" and r.json()["total"] == 2
    loc = r.headers["location"]
    job = wait_for_job(client, loc)  # type: ignore[arg-type]
    assert job["status"] == "done", job
    want = {k: v for k, v in expected.to_dict().items() if k != "points"}
    assert job["result"] == json.loads(json.dumps(want))
    got = pl.read_parquet(io.BytesIO(client.get(f"{loc}/results?format=parquet").content))
    assert_frame_equal(without_wall_column(got), without_wall_column(expected.points))
    assert [j["id"] for j in client.get("/v1/splits").json()] == [job["id"]]
    assert client.get(f"/v1/capacity/{job['id']}").status_code == 404


def test_split_errors(tmp_path: Path) -> None:
    """What best_split refuses is a 422 naming the argument before any job exists (fewer than 2 instances, a
    colocated scenario, a bad target, an unknown key); more splits than max_sweep_points are refused before
    anything is resolved; total_instances is required (400)."""
    with make_client(tmp_path, max_sweep_points=10) as c:
        for body, path in (
            ({"total_instances": 1}, "total_instances"),
            ({"total_instances": 4, "scenario": {"mode": "colocated"}}, "mode"),
            ({"total_instances": 4, "slo_attainment": 2}, "slo_attainment"),
            ({"total_instances": 4, "workers": 2}, "workers"),
            ({"total_instances": 12}, "total_instances"),
            ({"total_instances": 2**62}, "total_instances"),
            ({"total_instances": 4, "scenario": {"workload": {"requests": -1}}}, "workload.requests"),
        ):
            r = c.post("/v1/splits", json=body)
            assert (r.status_code, r.json()["path"]) == (422, path), r.text
        assert c.post("/v1/splits", json={"scenario": {}}).status_code == 400
        assert c.get("/v1/splits").json() == []
