"""The web page in a real browser: headless Chromium (Debian's ``chromium`` + ``chromium-driver``) driven by
Selenium against a real ``kvwire-api`` server process on 127.0.0.1. One browser and one server for the module.

What the tests show: the explorer puts the article's 25 GbE figures on screen; a scenario run renders the
library's numbers (percentile table, CDFs, stages, utilisation, energy, hot-spot) and downloads the library's
request table; the editor is checked as you type (schema, then service; test_web_editor.py shows that it reads
every example file as tomllib does); invalid input shows the API's own message next to the field; a sweep shows
live progress and a chart of the library's values, a best split its capacities; Cancel keeps a job and Delete
removes it; every control has a name, tabs work from the keyboard, nothing overflows a phone-width screen; every
view's screenshot (under the run's pytest temporary directory) is not blank; the console has no errors. Without
Chromium the module is skipped, saying so."""

from __future__ import annotations

import base64
import io
import json
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import kvwire
import numpy as np
import polars as pl
import pytest
from api_support import Server, running
from browser_support import console_errors, field_error, fixed, js, screenshot, set_viewport, wait_for
from kvwire.results import report
from polars.testing import assert_frame_equal

#: The article's figures for Llama-3-8B, 2,048 tokens over 25 GbE (../shared/spec/handoff.md), as the page
#: prints them: 268.4 MB handed off, 85.9 ms on the wire, the link full at 11.6 hand-offs/s; prefill 59.0 ms
#: (the reference's LM head on every token); 28.7 ms exposed with layer streaming, 1.36 ms with FP8 as well.
ARTICLE = {
    "bytes_per_token": "131,072 B",
    "handoff_bytes": "268.4 MB",
    "wire_bytes": "268.4 MB",
    "transfer_s": "85.9 ms",
    "prefill_s": "59.0 ms",
    "exposed_s": "85.9 ms",
    "link_full_rate_per_s": "11.6 req/s",
}

#: Issue 14's budget for the page: everything it loads.
PAGE_BYTES = 2_000_000

RUN = {"link": "eth-25g", "workload": {"requests": 1500, "arrivals": {"rate_per_s": 11}}}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, driver: Any) -> Iterator[Server]:
    env = {k: v for k, v in __import__("os").environ.items() if not k.startswith("KVWIRE_API_")}
    env["KVWIRE_API_JOB_WORKERS"] = "1"  # a sweep's points finish one by one: progress to watch
    s = Server(tmp_path_factory.mktemp("web") / "data", env).start()
    try:
        yield s
    finally:
        s.stop()


@pytest.fixture(scope="module")
def shots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where the screenshots go: a directory under this pytest run's temporary directory (--basetemp)."""
    return tmp_path_factory.mktemp("screenshots")


def open_page(driver: Any, server: Server, fragment: str) -> None:
    """A fresh load of the page at ``fragment`` (through about:blank: a new fragment alone would not reload)."""
    set_viewport(driver, 1280, 800)
    driver.get("about:blank")
    driver.get(f"{server.url}/{fragment}")
    wait_for(driver, lambda: driver.execute_script("return document.body.dataset.ready") == "true", "the page")


def data(driver: Any, element_id: str, key: str) -> Any:
    """An element's ``data-<key>`` value (None when absent)."""
    return js(
        driver, "const e = document.getElementById(arguments[0]); return e && e.dataset[arguments[1]];", element_id, key
    )


def wait_data(driver: Any, element_id: str, key: str, want: str, what: str, timeout_s: float = 30.0) -> None:
    wait_for(driver, lambda: data(driver, element_id, key) == want, what, timeout_s)


def text_of(driver: Any, element_id: str) -> str:
    return str(js(driver, "return document.getElementById(arguments[0]).textContent", element_id))


def figure(driver: Any, key: str) -> str:
    """A figure card's value and unit as shown ("85.9 ms")."""
    return str(
        js(
            driver,
            """const f = document.querySelector(`[data-figure="${arguments[0]}"]`);
        return f ? (f.querySelector('.value').textContent + f.querySelector('.unit').textContent) : null;""",
            key,
        )
    )


def series(driver: Any, host_id: str) -> Any:
    """The data a chart plotted (its figure's ``data-series``)."""
    raw = js(
        driver, "const f = document.querySelector(`#${arguments[0]} figure`); return f && f.dataset.series;", host_id
    )
    assert raw, f"no chart in #{host_id}"
    return json.loads(raw)


def type_into(driver: Any, element_id: str, text: str) -> None:
    """Replace a control's text by typing, as a user does (select all, then the keys)."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    el = driver.find_element(By.ID, element_id)
    el.click()
    el.send_keys(Keys.CONTROL, "a")
    el.send_keys(Keys.DELETE)
    el.send_keys(text)


def set_editor(driver: Any, element_id: str, text: str) -> None:
    """Put ``text`` in a textarea and fire ``input`` as typing would (long texts: faster than key by key)."""
    js(
        driver,
        """const t = document.getElementById(arguments[0]); t.focus(); t.value = arguments[1];
        t.dispatchEvent(new Event('input', {bubbles: true}));""",
        element_id,
        text,
    )


#: The API's refusals of invalid input (malformed, invalid): logged by the browser as failed loads.
REFUSALS = (400, 422)


def no_console_errors(driver: Any, allow_statuses: tuple[int, ...] = ()) -> None:
    errors = console_errors(driver, allow_statuses)
    assert errors == [], errors


# --------------------------------------------------------------------------------------------------
# The hand-off explorer


def test_explorer_shows_the_articles_figures(driver: Any, server: Server, shots: Path) -> None:
    """Loading the page fetches at most 2 MB, all from the service. The article's example (Llama-3-8B, 2,048
    tokens, 25 GbE, LM head on every token) shows 268.4 MB, 85.9 ms on the wire, 59.0 ms of prefill, the link
    full at 11.6 req/s; layer streaming shows 28.7 ms exposed, with FP8 1.36 ms; typing another prompt length
    updates the figures; the chart has a line per link whose 2,048-token points are kvwire.handoff's."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    open_page(driver, server, "#explorer")
    wait_data(driver, "explorer", "state", "ready", "figures")
    loaded = js(
        driver,
        """return performance.getEntriesByType('navigation').concat(performance.getEntriesByType('resource'))
        .map(e => [e.name, e.decodedBodySize]);""",
    )
    assert {u.split("/", 3)[3] for u, _ in loaded} >= {"static/js/main.js", "v1/presets", "schema/openapi.json"}
    assert all(u.startswith(server.url) for u, _ in loaded), loaded  # nothing from another host
    assert sum(n for _, n in loaded) <= PAGE_BYTES  # everything the page loaded, API answers included
    driver.find_element(By.ID, "ex-article").click()
    for key, want in ARTICLE.items():
        wait_for(driver, lambda k=key, w=want: figure(driver, k) == w, f"{key} = {want}", 10)  # type: ignore[misc]
    driver.find_element(By.CSS_SELECTOR, "label:has(#ex-streaming-layer)").click()
    wait_for(driver, lambda: figure(driver, "exposed_s") == "28.7 ms", "28.7 ms exposed with layer streaming", 10)
    assert figure(driver, "transfer_s") == "85.9 ms" and figure(driver, "handoff_bytes") == "268.4 MB"
    wait_data(driver, "explorer", "state", "ready", "chart")
    cost = {"prefill_lm_head": "all"}
    links = kvwire.catalog()["links"]
    lines = {s["name"]: dict(map(tuple, s["points"])) for s in series(driver, "ex-chart")}
    assert set(lines) == {v["name"] for v in links.values()}
    for key, link in links.items():
        want = kvwire.handoff("llama3-8b", 2048, link=key, streaming="layer", cost=cost)["exposed_s"] * 1e3
        assert lines[link["name"]][2048] == pytest.approx(want, rel=1e-12), key
    screenshot(driver, shots / "explorer-1280x800.png")

    Select(driver.find_element(By.ID, "ex-compression")).select_by_value("fp8_e4m3")
    wait_for(driver, lambda: figure(driver, "exposed_s") == "1.36 ms", "1.36 ms with FP8 and streaming", 10)
    assert figure(driver, "wire_bytes") == "134.2 MB"
    type_into(driver, "ex-prompt", "4096")
    want = kvwire.handoff("llama3-8b", 4096, link="eth-25g", compression="fp8", streaming="layer", cost=cost)
    wait_for(
        driver, lambda: figure(driver, "handoff_bytes") == f"{fixed(want['handoff_bytes'] / 1e6, 1)} MB", "4,096 tokens"
    )
    assert figure(driver, "exposed_s") == f"{fixed(want['exposed_s'] * 1e3, 2)} ms"
    no_console_errors(driver)


# --------------------------------------------------------------------------------------------------
# The scenario runner


def encoded(scenario: dict[str, Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(scenario).encode()).decode().rstrip("=")


def test_run_shows_the_librarys_numbers(driver: Any, server: Server, shots: Path) -> None:
    """A shared link (#run?s=<scenario>) runs the scenario: the percentile table, the TTFT p99 card, the CDFs
    (quantiles of the library's own request table), the stage, utilisation and energy charts and the hot-spot
    sentence equal kvwire.simulate's; the URL decodes to the scenario; the CSV and Parquet downloads are the
    library's request table."""
    open_page(driver, server, f"#run?s={encoded(RUN)}")
    wait_data(driver, "run", "state", "done", "the run", 60)
    res = kvwire.simulate(RUN)
    s = res.summary
    names = {"ttft_s": "TTFT", "tpot_s": "TPOT", "itl_s": "ITL", "e2e_s": "E2E", "handoff_s": "hand-off"}
    table = js(
        driver,
        """return [...document.querySelectorAll('#run-percentiles tbody tr')].map(
        r => [r.dataset.metric, [...r.cells].map(c => c.textContent)]);""",
    )
    assert [m for m, _ in table] == list(names)
    for metric, cells in table:
        stats = s["latency"][metric]
        want = [names[metric]] + [
            fixed(stats[k] * 1e3, 1) for k in ("mean", "p50", "p90", "p95", "p99", "p99_9", "max")
        ]
        assert cells == want, metric
    assert figure(driver, "ttft-p99") == f"{fixed(s['latency']['ttft_s']['p99'] * 1e3, 1)} ms"
    assert figure(driver, "slo") == f"{fixed(s['slo']['attainment'] * 100, 1)}%"

    measured = res.requests.filter(pl.col("measured"))
    for host, metric in (("run-cdf-ttft", "ttft_s"), ("run-cdf-tpot", "tpot_s")):
        (line,) = series(driver, host)
        values = measured[metric].drop_nulls().to_numpy()
        points = np.array(line["points"])
        assert len(points) >= 200
        want = np.quantile(values, points[:, 1]) * 1e3
        np.testing.assert_allclose(points[:, 0], want, rtol=1e-12)
    stages = {r["label"]: r["segments"][0]["value"] for r in series(driver, "run-stages")}
    assert list(stages.values()) == pytest.approx([v * 1e3 for v in s["stages"].values()], rel=1e-12)
    util = {r["label"]: r["segments"][0]["value"] for r in series(driver, "run-utilisation")}
    assert util == s["utilisation"]
    (energy,) = series(driver, "run-energy")
    assert sum(sg["value"] for sg in energy["segments"]) == pytest.approx(s["energy"]["total_j"] / 1e3, rel=1e-12)
    hot = next(line for line in report.render(res).splitlines() if line.startswith("hot-spot: "))
    assert js(driver, "return document.getElementById('run-hotspot').textContent") == "Hot-spot: " + hot[10:]

    fragment = driver.current_url.split("#", 1)[1]
    assert fragment.startswith("run?s=")
    code = fragment[len("run?s=") :]
    assert json.loads(base64.urlsafe_b64decode(code + "=" * (-len(code) % 4))) == RUN
    links = js(driver, "return [...document.querySelectorAll('#run-results a[download]')].map(a => a.href)")
    csv = next(u for u in links if u.endswith("requests?format=csv"))
    parquet = next(u for u in links if u.endswith("requests?format=parquet"))
    assert_frame_equal(pl.read_csv(io.BytesIO(httpx.get(csv).content), schema=res.requests.schema), res.requests)
    assert_frame_equal(pl.read_parquet(io.BytesIO(httpx.get(parquet).content)), res.requests)
    screenshot(driver, shots / "run-1280x800.png")
    screenshot(driver, shots / "run-full.png", full=True)
    no_console_errors(driver)


def test_editor_is_checked_as_you_type(driver: Any, server: Server) -> None:
    """Typing in the editor: broken JSON is reported as such; a wrong type is reported from the OpenAPI schema
    next to the form field it belongs to; a value the schema allows but the service refuses shows the service's
    message next to its field; an unknown key is listed; a valid scenario shows its request count. Switching to
    TOML writes the scenario as TOML that tomllib reads back to it, and TOML typed in is checked the same way."""
    open_page(driver, server, "#run")
    wait_data(driver, "run", "state", "done", "the first run", 60)

    def check() -> str:
        return text_of(driver, "run-check")

    set_editor(driver, "run-editor", '{"workload": {"requests": ')
    wait_for(driver, lambda: check().startswith("JSON: "), "a JSON syntax error")
    set_editor(driver, "run-editor", '{"workload": {"requests": "many"}}')
    wait_for(driver, lambda: "against the schema" in check(), "a schema error")
    req_id = js(driver, "return document.querySelector('#run-form [data-path=\"workload.requests\"]').id")
    assert field_error(driver, req_id) == 'expected integer, got the string "many"'
    bad = {"workload": {"arrivals": {"rate_per_s": -1}}}
    with pytest.raises(kvwire.ScenarioError) as info:
        kvwire.validate(bad)
    set_editor(driver, "run-editor", json.dumps(bad))
    rate_id = js(driver, "return document.querySelector('#run-form [data-path=\"workload.arrivals.rate_per_s\"]').id")
    wait_for(driver, lambda: field_error(driver, rate_id) == str(info.value), "the service's message at the rate")
    set_editor(driver, "run-editor", '{"wrkload": {}}')
    wait_for(driver, lambda: "wrkload: unknown field" in text_of(driver, "run-editor-errors"), "the unknown key")
    good = {"link": "eth-25g", "workload": {"requests": 700, "arrivals": {"rate_per_s": 5.5}}, "slo": {"ttft_s": 2}}
    set_editor(driver, "run-editor", json.dumps(good))
    wait_for(driver, lambda: check().startswith("✓ Valid: 700 requests"), "a valid scenario")

    driver.find_element("css selector", "label:has(input[name='run-format'][value='toml'])").click()
    wait_data(driver, "run-editor", "reading", "false", "the scenario written as TOML by the service")
    text = js(driver, "return document.getElementById('run-editor').value")
    assert tomllib.loads(text) == good
    set_editor(driver, "run-editor", '[workload]\nrequests = 300 # fewer\n[workload.arrivals]\nrate_per_s = "x"\n')
    wait_for(driver, lambda: "against the schema" in check(), "a schema error in TOML")
    set_editor(driver, "run-editor", "[workload]\nrequests = 300\n")
    wait_for(driver, lambda: check().startswith("✓ Valid: 300 requests"), "valid TOML")
    assert js(driver, "return document.querySelector('#run-form [data-path=\"workload.requests\"]').value") == "300"
    set_editor(driver, "run-editor", "[workload\nrequests = 300\n")
    wait_for(driver, lambda: check().startswith("TOML: line 1"), "a TOML syntax error with its line")
    no_console_errors(driver, REFUSALS)  # the service's 422 for rate -1 is logged as a failed load


# --------------------------------------------------------------------------------------------------
# Invalid input


def test_invalid_input_shows_the_api_error_next_to_the_field(driver: Any, server: Server, shots: Path) -> None:
    """Invalid values typed in the forms come back from the API (422) and its message, the library's, is shown
    next to the field that holds them (aria-invalid, described by the message): the runner's arrival rate on
    Run, the explorer's prompt length and a model too large for one device (next to devices per instance), and
    a sweep value refused for one point."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    open_page(driver, server, "#run")
    wait_data(driver, "run", "state", "done", "the first run", 60)
    rate_id = js(driver, "return document.querySelector('#run-form [data-path=\"workload.arrivals.rate_per_s\"]').id")
    type_into(driver, rate_id, "-1")
    driver.find_element(By.ID, "run-button").click()
    scenario = json.loads(js(driver, "return document.getElementById('run-editor').value"))
    assert scenario["workload"]["arrivals"]["rate_per_s"] == -1
    with pytest.raises(kvwire.ScenarioError) as info:
        kvwire.validate(scenario)
    wait_for(driver, lambda: field_error(driver, rate_id) == str(info.value), "the rate's error")
    screenshot(driver, shots / "run-invalid-1280x800.png")

    open_page(driver, server, "#explorer")
    wait_data(driver, "explorer", "state", "ready", "figures")
    type_into(driver, "ex-prompt", "0")
    with pytest.raises(kvwire.ScenarioError) as info:
        kvwire.handoff(prompt_tokens=0)
    wait_for(driver, lambda: field_error(driver, "ex-prompt") == str(info.value), "the prompt's error")
    type_into(driver, "ex-prompt", "2048")
    wait_for(driver, lambda: field_error(driver, "ex-prompt") == "", "the error cleared")
    Select(driver.find_element(By.ID, "ex-model")).select_by_value("deepseek-v3")
    with pytest.raises(kvwire.DoesNotFitError) as fit:
        kvwire.handoff("deepseek-v3", 2048, devices_per_instance=1)
    wait_for(driver, lambda: field_error(driver, "ex-dpi") == str(fit.value), "the fit error at devices per instance")
    type_into(driver, "ex-dpi", "8")
    Select(driver.find_element(By.ID, "ex-device")).select_by_value("h200")
    wait_for(driver, lambda: figure(driver, "bytes_per_token") == "70,272 B", "DeepSeek-V3 on 8 x H200")
    assert field_error(driver, "ex-dpi") == ""

    open_page(driver, server, "#sweeps")
    type_into(driver, "sw-grid-values-1", "4, -1")
    driver.find_element(By.ID, "sw-start").click()
    with pytest.raises(kvwire.SweepError) as sweep:
        grid = {"workload.arrivals.rate_per_s": [4, -1], "link": ["ib-ndr", "eth-25g"]}
        kvwire.sweep_points({"base": {"workload": {"requests": 1000}}, "grid": grid})
    messages = " ".join(e["message"] for e in sweep.value.errors)
    wait_for(driver, lambda: field_error(driver, "sw-grid-values-1") == messages, "the sweep point's error")
    no_console_errors(driver, REFUSALS)


# --------------------------------------------------------------------------------------------------
# Sweeps, capacity, splits, history

SWEEP_BASE = {"workload": {"requests": 60000}}
SWEEP_RATES = [3, 6, 9, 12, 15, 18]


def test_sweep_shows_live_progress_and_its_chart(driver: Any, server: Server, shots: Path) -> None:
    """A sweep started from the dashboard streams its progress (the page saw points done strictly between 0 and
    the total while it ran, over Server-Sent Events) and ends done; its charts hold, per link, SLO attainment and
    p99 TTFT/TPOT against the rate equal to kvwire.sweep of the same definition; the job is listed and its CSV
    download is the library's table."""
    from selenium.webdriver.common.by import By

    open_page(driver, server, "#sweeps")
    set_editor(driver, "sw-base", json.dumps(SWEEP_BASE))
    type_into(driver, "sw-grid-values-1", ", ".join(map(str, SWEEP_RATES)))
    driver.find_element(By.ID, "sw-start").click()
    wait_data(driver, "sw-job", "status", "done", "the sweep", 180)
    seen = [
        tuple(map(int, x.split("/")))
        for x in js(driver, "return document.getElementById('sw-job').dataset.progressSeen").split(",")
    ]
    assert any(0 < done < total for done, total in seen), seen
    assert seen[-1] == (12, 12)
    assert js(driver, "return document.getElementById('sw-progress').value") == 12
    # where it ran: this server has no Dask cluster (a cluster's page says "on cluster tcp://...")
    assert js(driver, "return document.getElementById('sw-where').textContent") == " · local threads"
    wait_for(
        driver,
        lambda: js(driver, "return !!document.querySelector('[data-metric=\"latency.tpot_s.p99\"] figure')"),
        "the charts",
    )

    definition = {
        "base": SWEEP_BASE,
        "grid": {"workload.arrivals.rate_per_s": SWEEP_RATES, "link": ["ib-ndr", "eth-25g"]},
    }
    table = kvwire.sweep(definition)
    for metric, scale in (("slo.attainment", 1.0), ("latency.ttft_s.p99", 1e3), ("latency.tpot_s.p99", 1e3)):
        raw = js(
            driver, 'return document.querySelector(`[data-metric="${arguments[0]}"] figure`).dataset.series', metric
        )
        lines = {s["name"]: s["points"] for s in json.loads(raw)}
        for link in ("ib-ndr", "eth-25g"):
            rows = table.filter(pl.col("link") == link).sort("workload.arrivals.rate_per_s")
            got = np.array(lines[f"link={link}"], dtype=float)
            assert got[:, 0].tolist() == rows["workload.arrivals.rate_per_s"].to_list()
            np.testing.assert_allclose(got[:, 1], rows[metric].to_numpy() * scale, rtol=1e-12, err_msg=metric)
    job = js(driver, "return document.getElementById('sw-job').dataset.job")
    wait_for(
        driver,
        lambda: js(driver, 'return !!document.querySelector(`#sw-jobs tr[data-job="${arguments[0]}"]`)', job),
        "the job listed",
    )
    csv = js(driver, "return [...document.querySelectorAll('#sw-job a[download]')].map(a => a.href)")[0]
    downloaded = pl.read_csv(io.BytesIO(httpx.get(csv).content))
    assert_frame_equal(
        downloaded.select(["point", "link", "slo.attainment"]), table.select(["point", "link", "slo.attainment"])
    )
    screenshot(driver, shots / "sweeps-1280x800.png")
    screenshot(driver, shots / "sweeps-full.png", full=True)
    no_console_errors(driver)


def test_capacity_per_split_and_stored_runs(driver: Any, server: Server, shots: Path) -> None:
    """A best split started from the dashboard charts each prefill:decode split's capacity as kvwire.best_split
    finds it, naming the best; a capacity search charts the library's evaluated points; a stored run listed on
    the dashboard opens in the runner with its own numbers."""
    from selenium.webdriver.common.by import By

    scenario = {"workload": {"requests": 300}}
    open_page(driver, server, "#sweeps")
    driver.find_element(By.CSS_SELECTOR, "label:has(input[name='sw-kind'][value='split'])").click()
    set_editor(driver, "sw-base", json.dumps(scenario))
    type_into(driver, "sw-total", "3")
    driver.find_element(By.ID, "sw-start").click()
    wait_data(driver, "sw-job", "status", "done", "the split", 120)
    wait_for(driver, lambda: js(driver, "return !!document.querySelector('#sw-results figure')"), "the split chart")
    split = kvwire.best_split(scenario, 3)
    bars = {r["label"]: r["segments"][0]["value"] for r in series(driver, "sw-results")}
    assert bars == {f"{s['prefill']}:{s['decode']}": s["capacity"] for s in split.splits}
    best = js(driver, "return document.getElementById('sw-best').textContent")
    assert best.startswith(f"Best split: {split.best['prefill']}:{split.best['decode']} ")  # type: ignore[index]
    screenshot(driver, shots / "split-1280x800.png")

    driver.find_element(By.CSS_SELECTOR, "label:has(input[name='sw-kind'][value='capacity'])").click()
    driver.find_element(By.ID, "sw-start").click()
    wait_for(driver, lambda: data(driver, "sw-job", "job").startswith("capacity/"), "the capacity search")
    wait_data(driver, "sw-job", "status", "done", "the capacity search's end", 120)
    wait_for(driver, lambda: js(driver, "return !!document.querySelector('#sw-results figure')"), "the capacity chart")
    cap = kvwire.capacity(scenario)
    (line,) = series(driver, "sw-results")
    want = sorted(zip(cap.points["workload.arrivals.rate_per_s"], cap.points["slo.attainment"], strict=True))
    assert line["points"] == [list(p) for p in want]
    assert figure(driver, "capacity") == f"{fixed(cap.capacity, 2)} req/s"  # type: ignore[arg-type]

    with server.client() as c:
        run_id = c.post("/v1/simulations", json={"workload": {"requests": 400}}).json()["id"]
    open_page(driver, server, "#sweeps")
    wait_for(
        driver,
        lambda: js(driver, 'return !!document.querySelector(`#sw-runs tr[data-run="${arguments[0]}"]`)', run_id),
        "the run listed",
    )
    driver.find_element(By.CSS_SELECTOR, f'#sw-runs tr[data-run="{run_id}"] a').click()
    wait_data(driver, "run", "runId", run_id, "the stored run")
    wait_data(driver, "run", "state", "done", "the stored run's results")
    res = kvwire.simulate({"workload": {"requests": 400}})
    assert figure(driver, "ttft-p99") == f"{fixed(res.summary['latency']['ttft_s']['p99'] * 1e3, 1)} ms"
    no_console_errors(driver)


# --------------------------------------------------------------------------------------------------
# Accessibility and screens


UNNAMED = """return [...document.querySelectorAll('input, select, textarea, button, [role="tab"]')]
    .filter(c => c.offsetParent !== null)
    .filter(c => !(c.labels && c.labels.length) && !c.getAttribute('aria-label') && !c.getAttribute('aria-labelledby')
                 && !(c.tagName === 'BUTTON' && c.textContent.trim()))
    .map(c => c.outerHTML.slice(0, 120));"""


def test_cancel_keeps_the_job_and_delete_removes_it(driver: Any, server: Server) -> None:
    """The job view's Cancel button stops a running sweep and keeps it (POST .../cancel: the page then shows
    ``cancelled`` and the service still has the job, with its finished points); the job list's Delete button
    (after the confirmation) removes it (the service answers 404 for it)."""
    with server.client() as c:
        definition = {"base": {"workload": {"requests": 4000}}, "grid": {"workload.seed": list(range(200))}}
        loc = c.post("/v1/sweeps", json=definition).headers["location"]
        job_id = loc.rsplit("/", 1)[1]
        wait_for(driver, lambda: c.get(loc).json()["done"] >= 1, "the sweep's first point", 60)
        open_page(driver, server, f"#sweeps?job=sweep/{job_id}")
        wait_data(driver, "sw-job", "status", "running", "the running sweep")
        # Found and clicked in one script: the job view re-renders on every progress event, so an element found
        # by one WebDriver call can be stale by the next.
        cancel = "//*[@id='sw-job']//button[normalize-space()='Cancel']"
        click = (
            "const b = document.evaluate(arguments[0], document, null, 9, null).singleNodeValue;"
            " b?.click(); return !!b;"
        )
        wait_for(driver, lambda: js(driver, click, cancel), "the Cancel button clicked")
        wait_data(driver, "sw-job", "status", "cancelled", "the cancelled sweep", 60)
        job = c.get(loc).json()
        assert job["status"] == "cancelled" and 1 <= job["done"] < 200
        assert c.get(f"{loc}/results?format=json").json()  # the finished points are kept
        row = f'#sw-jobs tr[data-job="sweep/{job_id}"] button[aria-label="Delete job {job_id}"]'
        wait_for(driver, lambda: js(driver, "return !!document.querySelector(arguments[0])", row), "the Delete button")
        js(driver, "window.confirm = () => true; document.querySelector(arguments[0]).click();", row)
        wait_for(driver, lambda: c.get(loc).status_code == 404, "the job deleted")
        wait_for(
            driver,
            lambda: (
                not js(
                    driver, 'return !!document.querySelector(`#sw-jobs tr[data-job="sweep/${arguments[0]}"]`)', job_id
                )
            ),
            "the job gone from the list",
        )
    no_console_errors(driver)


@pytest.mark.parametrize("width,height", [(1280, 800), (390, 844)])
def test_every_view_is_labelled_keyboard_usable_and_fits(
    driver: Any, server: Server, shots: Path, width: int, height: int
) -> None:
    """At 1280x800 and at a phone's 390x844: every visible control of every view has an accessible name; the
    tabs switch views with the arrow keys (focus follows, the URL says which); nothing is wider than the screen;
    each view's screenshot is not blank."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    open_page(driver, server, "#explorer")
    set_viewport(driver, width, height)
    for view, ready in (("explorer", "ready"), ("run", "done"), ("sweeps", None), ("plan", "ready")):
        if view != "explorer":
            tab = driver.switch_to.active_element
            tab.send_keys(Keys.ARROW_RIGHT)
        else:
            driver.find_element(By.ID, "tab-explorer").click()
        wait_for(driver, lambda v=view: js(driver, "return document.body.dataset.view") == v, f"the {view} view")  # type: ignore[misc]
        assert driver.switch_to.active_element.get_attribute("id") == f"tab-{view}"
        assert driver.current_url.split("#", 1)[1].split("?")[0] == view
        if ready:
            wait_data(driver, view, "state", ready, f"{view} ready", 60)
        else:
            wait_for(driver, lambda: js(driver, "return !!document.querySelector('#sw-history h2')"), "the history")
        assert js(driver, UNNAMED) == [], view
        overflow = js(driver, "return document.documentElement.scrollWidth - document.documentElement.clientWidth")
        assert overflow <= 1, f"{view} is {overflow} px wider than the {width} px screen"
        screenshot(driver, shots / f"view-{view}-{width}x{height}.png")
    no_console_errors(driver)


def test_a_service_with_a_token_asks_for_it_once(driver: Any, tmp_path: Path) -> None:
    """With KVWIRE_API_TOKEN set, the page still loads (it holds no data); the first refused call opens a dialog
    asking for the token, once for every call refused together; with it, the calls are retried and the runner's
    first run completes, and the progress stream of a job (fetched with the token) reaches its end."""
    from selenium.webdriver.common.by import By

    env = {k: v for k, v in __import__("os").environ.items() if not k.startswith("KVWIRE_API_")}
    env.update(KVWIRE_API_TOKEN="tok-web", KVWIRE_API_JOB_WORKERS="1")
    with running(tmp_path / "data", env) as server:
        set_viewport(driver, 1280, 800)
        driver.get("about:blank")
        driver.get(f"{server.url}/#run")
        wait_for(driver, lambda: js(driver, "return document.getElementById('token-dialog').open"), "the token dialog")
        driver.find_element(By.ID, "token-input").send_keys("tok-web")
        driver.find_element(By.CSS_SELECTOR, "#token-dialog button[value=ok]").click()
        wait_data(driver, "run", "state", "done", "the first run with the token", 60)
        assert not js(driver, "return document.getElementById('token-dialog').open")
        sweep = {"grid": {"workload.seed": list(range(1, 9))}, "base": SWEEP_BASE}
        with server.client(headers={"Authorization": "Bearer tok-web"}) as c:
            job = c.post("/v1/sweeps", json=sweep).json()
        driver.get(f"{server.url}/#sweeps?job=sweep/{job['id']}")
        wait_data(driver, "sw-job", "status", "done", "the job followed with the token", 60)
        assert int(data(driver, "sw-job", "progressEvents")) >= 1  # events came over the stream
        job_row = f'#sw-jobs tr[data-job="sweep/{job["id"]}"] .badge.done'
        wait_for(driver, lambda: js(driver, "return !!document.querySelector(arguments[0])", job_row), "the job list")
        driver.get("about:blank")  # leave before the server stops: no call of the page may be left in flight
    no_console_errors(driver, (401,))  # the first calls, refused before the token was given
