"""The runner's "Step times" selector (``cost.timing``) in headless Chromium (Selenium, as test_web_page.py)
against a real ``kvwire-api`` server on 127.0.0.1 whose timing-table cache is a folder of this module's own
(``KVWIRE_CACHE_DIR``).

What the tests show: the selector offers the default, the roofline and the measured source named with the
installed aiconfigurator-core's version, as ``GET /v1/timing`` says; choosing "measured" shows the system,
serving-engine and data-version selects filled from the service's ``offered`` rows (a system's own engines
only), and the editor then holds ``cost.timing`` with the source, system and engine; a measured run shows the
line saying where its step times came from, the report's own ``step times:`` line with the data version; going
back to the default removes ``cost.timing`` from the editor's JSON (never ``{}``), the roofline keeps only its
source; ``cost.timing`` typed in the editor sets the selects. Without the package on the server the measured
choice is there but disabled, with the install command; if ``GET /v1/timing`` fails the page still works and
offers the roofline only, saying why. The console has no errors. The measured tests need the package
(``pip install 'kvwire[measured]'``; CI installs it) and skip with that reason where it is absent."""

from __future__ import annotations

import json
import os
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import kvwire
import pytest
from api_support import Server
from browser_support import console_errors, js, screenshot, set_viewport, wait_for
from kvwire.results import report
from kvwire.timing import aiconfigurator as aic
from kvwire.timing import resolve as res

needs_package = pytest.mark.skipif(
    not aic.installed(), reason="needs aiconfigurator-core: pip install 'kvwire[measured]'"
)

#: The runner's first scenario (runner.js FIRST), which the page runs when it opens #run.
FIRST = {"link": "eth-25g", "workload": {"requests": 2000, "arrivals": {"rate_per_s": 10}}}
SOURCE, SYSTEM, BACKEND, VERSION = "run-timing-source", "run-timing-system", "run-timing-backend", "run-timing-version"


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("timing-cache")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, driver: Any, cache_dir: Path) -> Iterator[Server]:
    """A server whose measured tables go to this module's cache folder."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KVWIRE_API_", "KVWIRE_DOCS_DIR"))}
    env["KVWIRE_CACHE_DIR"] = str(cache_dir)
    s = Server(tmp_path_factory.mktemp("web-timing") / "data", env).start()
    try:
        yield s
    finally:
        s.stop()


@pytest.fixture(scope="module")
def timing(server: Server) -> dict[str, Any]:
    """What GET /v1/timing answers (the selector's source)."""
    body: dict[str, Any] = httpx.get(f"{server.url}/v1/timing").json()
    return body


@pytest.fixture(scope="module")
def shots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("timing-screenshots")


@pytest.fixture
def fake_timing(driver: Any) -> Iterator[Any]:
    """``install(script)``: run ``script`` in every page before its own scripts (a stand-in for the service's
    GET /v1/timing), removed at the end of the test."""
    ids: list[str] = []

    def install(script: str) -> None:
        ids.append(driver.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": script})["identifier"])

    yield install
    for i in ids:
        driver.execute_cdp_cmd("Page.removeScriptToEvaluateOnNewDocument", {"identifier": i})


def open_runner(driver: Any, server: Server) -> None:
    """A fresh load of #run, its first run (the roofline) done."""
    set_viewport(driver, 1280, 800)
    driver.get("about:blank")
    driver.get(f"{server.url}/#run")
    wait_for(driver, lambda: js(driver, "return document.body.dataset.ready") == "true", "the page")
    wait_for(driver, lambda: js(driver, "return document.getElementById('run').dataset.state") == "done", "run", 60)


def options(driver: Any, select_id: str) -> list[list[Any]]:
    """A select's options as [value, text, disabled]."""
    rows: list[list[Any]] = js(
        driver,
        "return [...document.getElementById(arguments[0]).options].map(o => [o.value, o.textContent, o.disabled])",
        select_id,
    )
    return rows


def values(driver: Any, select_id: str) -> list[str]:
    return [v for v, _, _ in options(driver, select_id)]


def choose(driver: Any, select_id: str, value: str) -> None:
    """Pick an option as a user does (Selenium clicks it)."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    Select(driver.find_element(By.ID, select_id)).select_by_value(value)


def editor(driver: Any) -> Any:
    """The scenario the editor's JSON holds."""
    return json.loads(js(driver, "return document.getElementById('run-editor').value"))


def timing_in_editor(driver: Any) -> Any:
    return editor(driver).get("cost", {}).get("timing")


def shown(driver: Any, element_id: str) -> bool:
    """Whether an element is on screen (neither it nor any parent hidden)."""
    return bool(
        js(driver, "const e = document.getElementById(arguments[0]); return !!e && !e.closest('[hidden]')", element_id)
    )


def check_text(driver: Any) -> str:
    return str(js(driver, "return document.getElementById('run-check').textContent"))


def no_console_errors(driver: Any) -> None:
    errors = console_errors(driver)
    assert errors == [], errors


@needs_package
def test_measured_shows_the_services_systems_and_engines(driver: Any, server: Server, timing: dict[str, Any]) -> None:
    """The selector lists default (roofline), roofline and "measured: aiconfigurator-core <version>" (the
    version GET /v1/timing gives), the measured selects hidden; choosing measured shows the system select with
    every system of the service's offered rows and the engine select with the chosen system's engines only
    (b60: vLLM alone), the data-version select that pair's versions, newest first as "newest (<version>)";
    the editor then holds cost.timing with the source, the system the scenario's H100 maps to (h100_sxm) and
    vLLM; a version chosen is written, and dropped when another engine does not have it."""
    open_runner(driver, server)
    aicfg = timing["aiconfigurator"]
    rows = {(r["system"], r["backend"]): r["versions"] for r in aicfg["offered"]}
    assert options(driver, SOURCE) == [
        ["", "default (roofline)", False],
        ["roofline", "roofline (kvwire's cost model)", False],
        ["aiconfigurator", f"measured: aiconfigurator-core {aicfg['version']}", False],
    ]
    assert not shown(driver, SYSTEM) and timing_in_editor(driver) is None

    choose(driver, SOURCE, "aiconfigurator")
    wait_for(driver, lambda: shown(driver, SYSTEM), "the measured selects")
    assert timing_in_editor(driver) == {"source": "aiconfigurator", "system": "h100_sxm", "backend": "vllm"}
    assert values(driver, SYSTEM) == ["", *sorted({s for s, _ in rows})]
    assert values(driver, BACKEND) == ["", *[b for s, b in rows if s == "h100_sxm"]]
    newest = rows[("h100_sxm", "vllm")][0]
    assert options(driver, VERSION)[0][:2] == ["", f"newest ({newest})"]
    assert values(driver, VERSION)[1:] == rows[("h100_sxm", "vllm")]
    assert js(driver, "return document.getElementById(arguments[0]).value", SYSTEM) == "h100_sxm"

    choose(driver, SYSTEM, "b60")
    wait_for(driver, lambda: timing_in_editor(driver).get("system") == "b60", "b60 in the editor")
    assert values(driver, BACKEND) == ["", *[b for s, b in rows if s == "b60"]] == ["", "vllm"]
    assert timing_in_editor(driver) == {"source": "aiconfigurator", "system": "b60", "backend": "vllm"}

    choose(driver, SYSTEM, "h100_sxm")
    choose(driver, BACKEND, "sglang")
    wait_for(driver, lambda: timing_in_editor(driver).get("backend") == "sglang", "SGLang in the editor")
    assert values(driver, VERSION)[1:] == rows[("h100_sxm", "sglang")]
    older = rows[("h100_sxm", "sglang")][-1]
    choose(driver, VERSION, older)
    wait_for(driver, lambda: timing_in_editor(driver).get("version") == older, "the version in the editor")
    assert timing_in_editor(driver) == {
        "source": "aiconfigurator",
        "system": "h100_sxm",
        "backend": "sglang",
        "version": older,
    }
    if older not in rows[("h100_sxm", "vllm")]:
        choose(driver, BACKEND, "vllm")
        wait_for(driver, lambda: timing_in_editor(driver).get("backend") == "vllm", "vLLM again")
        assert "version" not in timing_in_editor(driver)  # vLLM has no such version: back to the newest
    no_console_errors(driver)


@needs_package
def test_a_measured_run_says_where_its_step_times_came_from(
    driver: Any, server: Server, timing: dict[str, Any], cache_dir: Path, shots: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first run (the roofline) shows no step-times line. With measured, h100_sxm and vLLM chosen and Run
    pressed at once (the service checks and runs the scenario side by side, each resolving the tables), the
    run shows, under the results, "Step times: " and the report's own step-times line of kvwire.simulate on the
    same scenario: the provider and its version, per pool the system, engine, data version (the newest the
    service offers) and the interpolation bound; the line carries the source and data version; the check
    passes; no call failed."""
    open_runner(driver, server)
    assert js(driver, "return document.getElementById('run-timing-line')") is None
    choose(driver, SOURCE, "aiconfigurator")
    wait_for(driver, lambda: timing_in_editor(driver) is not None, "cost.timing in the editor")
    driver.find_element("id", "run-button").click()  # at once: the run and the check resolve the tables together
    wait_for(driver, lambda: js(driver, "return !!document.getElementById('run-timing-line')"), "the timing line", 120)
    wait_for(driver, lambda: check_text(driver).startswith("✓ Valid"), "the measured scenario checked", 60)

    scenario = editor(driver)
    assert scenario == {
        **FIRST,
        "cost": {"timing": {"source": "aiconfigurator", "system": "h100_sxm", "backend": "vllm"}},
    }
    monkeypatch.setenv("KVWIRE_CACHE_DIR", str(cache_dir))  # the tables the server built
    res._MEMORY.clear()
    want = next(x for x in report.render(kvwire.simulate(scenario)).splitlines() if x.startswith("step times: "))
    res._MEMORY.clear()
    line = js(driver, "return document.getElementById('run-timing-line').textContent")
    assert line == "Step times: " + want.removeprefix("step times: ")
    aicfg = timing["aiconfigurator"]
    newest = next(r["versions"][0] for r in aicfg["offered"] if (r["system"], r["backend"]) == ("h100_sxm", "vllm"))
    assert f"measured (aiconfigurator-core {aicfg['version']})" in line
    assert f"prefill h100_sxm vllm {newest}" in line and f"decode h100_sxm vllm {newest}" in line
    assert "interpolation within" in line
    got = js(
        driver, "const e = document.getElementById('run-timing-line'); return [e.dataset.source, e.dataset.versions]"
    )
    assert got == ["aiconfigurator", newest]
    screenshot(driver, shots / "run-measured-full.png", full=True)
    no_console_errors(driver)


@needs_package
def test_back_to_default_removes_cost_timing(driver: Any, server: Server) -> None:
    """After measured, the roofline keeps cost.timing = {"source": "roofline"} alone (the measured fields go);
    the default removes cost.timing from the editor's JSON, and with it the cost object the scenario did not
    otherwise have — never an empty {} — and the TOML view has no [cost.timing] table either; cost.timing
    typed in the editor sets the selector (source, system, engine)."""
    open_runner(driver, server)
    choose(driver, SOURCE, "aiconfigurator")
    wait_for(driver, lambda: timing_in_editor(driver) is not None, "cost.timing in the editor")
    choose(driver, SOURCE, "roofline")
    wait_for(driver, lambda: timing_in_editor(driver) == {"source": "roofline"}, "the roofline alone")
    assert not shown(driver, SYSTEM)
    choose(driver, SOURCE, "aiconfigurator")
    wait_for(driver, lambda: (timing_in_editor(driver) or {}).get("source") == "aiconfigurator", "measured again")
    choose(driver, SOURCE, "")
    wait_for(driver, lambda: "cost" not in editor(driver), "cost.timing removed")
    assert editor(driver) == FIRST
    assert not shown(driver, SYSTEM)
    driver.find_element("css selector", "label:has(input[name='run-format'][value='toml'])").click()
    wait_for(
        driver, lambda: js(driver, "return document.getElementById('run-editor').dataset.reading") == "false", "TOML"
    )
    text = js(driver, "return document.getElementById('run-editor').value")
    assert "timing" not in text and tomllib.loads(text) == FIRST
    driver.find_element("css selector", "label:has(input[name='run-format'][value='json'])").click()
    wait_for(
        driver,
        lambda: js(driver, "return document.getElementById('run-editor').value").lstrip().startswith("{"),
        "JSON",
    )

    typed = {**FIRST, "cost": {"timing": {"source": "aiconfigurator", "system": "h200_sxm", "backend": "trtllm"}}}
    js(
        driver,
        """const t = document.getElementById('run-editor'); t.value = arguments[0];
        t.dispatchEvent(new Event('input', {bubbles: true}));""",
        json.dumps(typed),
    )
    wait_for(
        driver,
        lambda: js(driver, "return document.getElementById(arguments[0]).value", SYSTEM) == "h200_sxm",
        "the system",
    )
    assert js(driver, "return document.getElementById(arguments[0]).value", SOURCE) == "aiconfigurator"
    assert js(driver, "return document.getElementById(arguments[0]).value", BACKEND) == "trtllm"
    assert shown(driver, BACKEND)
    no_console_errors(driver)


def absent_answer() -> dict[str, Any]:
    """GET /v1/timing of a service without aiconfigurator-core (kvwire_api.routes.catalog.timing_sources)."""
    from kvwire.timing import SOURCES

    return {
        "sources": list(SOURCES),
        "aiconfigurator": {
            "installed": False,
            "version": None,
            "install": "pip install 'kvwire[measured]'",
            "offered": [],
        },
    }


#: Answers GET /v1/timing with ``window.__timing`` (a body, or null: the call fails as a network error would).
STAND_IN = """
(() => {
  const original = window.fetch;
  window.fetch = (url, init) => {
    if (!String(url).endsWith("/v1/timing")) return original(url, init);
    const body = %s;
    if (body === null) return Promise.reject(new TypeError("Failed to fetch"));
    const headers = { "Content-Type": "application/json" };
    return Promise.resolve(new Response(JSON.stringify(body), { status: 200, headers }));
  };
})();
"""


def test_without_the_package_measured_is_disabled_with_the_install_command(
    driver: Any, server: Server, fake_timing: Any
) -> None:
    """A service without aiconfigurator-core (its GET /v1/timing answer stood in for): the measured choice is
    listed but disabled, the hint under the selector gives the install command, and runs go on with the
    roofline."""
    fake_timing(STAND_IN % json.dumps(absent_answer()))
    open_runner(driver, server)
    assert options(driver, SOURCE) == [
        ["", "default (roofline)", False],
        ["roofline", "roofline (kvwire's cost model)", False],
        ["aiconfigurator", "measured: aiconfigurator-core (not installed)", True],
    ]
    hint = js(driver, "return document.getElementById(arguments[0] + '-hint').textContent", SOURCE)
    assert (
        hint == "Measured step times need the aiconfigurator-core package on the server: pip install 'kvwire[measured]'"
    )
    assert js(
        driver, "return document.getElementById(arguments[0]).getAttribute('aria-describedby')", SOURCE
    ).startswith(f"{SOURCE}-hint")
    assert not shown(driver, SYSTEM)
    no_console_errors(driver)


def test_if_the_timing_call_fails_the_page_offers_the_roofline_only(
    driver: Any, server: Server, fake_timing: Any
) -> None:
    """GET /v1/timing failing (a network error) does not stop the page: it is ready, the runner's first run
    completes, the selector offers the default and the roofline only, with a note saying the service did not
    say which sources it has; choosing the roofline still writes cost.timing."""
    fake_timing(STAND_IN % "null")
    open_runner(driver, server)
    assert values(driver, SOURCE) == ["", "roofline"]
    hint = js(driver, "return document.getElementById(arguments[0] + '-hint').textContent", SOURCE)
    assert (
        hint == "The service did not say which timing sources it has (Failed to fetch): only the roofline is offered."
    )
    choose(driver, SOURCE, "roofline")
    wait_for(driver, lambda: timing_in_editor(driver) == {"source": "roofline"}, "the roofline")
    no_console_errors(driver)
