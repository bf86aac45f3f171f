"""The web page's Plan tab in a real browser (headless Chromium driven by Selenium) against a real ``kvwire-api``
server process, as test_web_page.py.

Oracle: the service's own plan job (GET /v1/plans/{id} and /results, fetched here over HTTP): the page must
plot and list exactly what the job found, and the run it opens must be the job's best scenario; a refused
budget shows the service's message at the field it names. Without Chromium the module is skipped, saying so."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from api_support import Server, running
from browser_support import console_errors, field_error, js, screenshot, set_viewport, wait_for

EVALUATED = ("verified", "screened")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, driver: Any) -> Iterator[Server]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KVWIRE_API_")}
    with running(tmp_path_factory.mktemp("web-plan") / "data", env) as s:
        yield s


def open_plan(driver: Any, server: Server) -> None:
    set_viewport(driver, 1280, 800)
    driver.get("about:blank")
    driver.get(f"{server.url}/#plan")
    wait_for(driver, lambda: js(driver, "return document.body.dataset.ready") == "true", "the page")
    wait_for(driver, lambda: js(driver, "return document.getElementById('plan').dataset.state") == "ready", "the form")


def type_into(driver: Any, element_id: str, text: str) -> None:
    from selenium.webdriver.common.by import By

    box = driver.find_element(By.ID, element_id)
    box.clear()
    box.send_keys(text)


def test_a_plan_shows_its_frontier_table_and_runs_its_best(driver: Any, server: Server, tmp_path: Path) -> None:
    """Llama-3-8B on 2 x H100, 150 requests per run, TP 1: the progress line ends at "3 of 3 configurations"; the
    chart has one frontier marker per row of the job's ``result.frontier`` and one best marker (a focusable
    button), every evaluated row of /results as a faint dot and as a table row (the best's row marked); the
    summary says what the job counted; the launch settings are the job's vLLM command; clicking the best point
    opens, in the Scenario runner, a stored run whose scenario is the job's ``result.best.scenario``."""
    from selenium.webdriver.common.by import By

    open_plan(driver, server)
    type_into(driver, "pl-count-1", "2")
    type_into(driver, "pl-requests", "150")
    type_into(driver, "pl-tp", "1")
    driver.find_element(By.ID, "pl-start").click()
    wait_for(driver, lambda: js(driver, "return document.getElementById('pl-job').dataset.rendered"), "the plan", 180)
    job_id = js(driver, "return document.getElementById('pl-job').dataset.job")
    assert driver.current_url.endswith(f"#plan?job={job_id}")
    with server.client() as c:
        job = c.get(f"/v1/plans/{job_id}").json()
        table = c.get(f"/v1/plans/{job_id}/results?format=json").json()
    assert job["status"] == "done", job
    result = job["result"]
    assert js(driver, "return document.getElementById('pl-status').textContent") == "done"
    assert js(driver, "return document.getElementById('pl-progress-text').textContent") == "3 of 3 configurations"
    summary = js(driver, "return document.getElementById('pl-summary').textContent")
    assert f"{result['considered']} configurations considered" in summary, summary
    assert f"{result['simulations']} simulations" in summary and f"timing: {result['timing']}" in summary, summary

    plot = "#pl-chart svg[role=img]"
    count = "return document.querySelectorAll(arguments[0]).length"
    assert result["frontier"], result
    assert js(driver, count, f'{plot} .marker[data-series="frontier"]') == len(result["frontier"])
    evaluated = [r for r in table if r["status"] in EVALUATED]
    assert js(driver, count, f'{plot} .marker[data-series="evaluated"]') == len(evaluated)
    assert js(driver, count, f'{plot} g.pick[data-key="best"][role=button][tabindex="0"] .marker') == 1
    # the best and each frontier row have their scenario (result.frontier_scenarios): each is a button
    assert js(driver, count, f"{plot} g.pick") == 1 + len(result["frontier"]) == 1 + len(result["frontier_scenarios"])
    assert js(driver, count, "#pl-table tbody tr") == len(evaluated)
    assert js(driver, count, '#pl-table tbody tr[data-best="true"]') == 1
    launch = js(driver, "return document.getElementById('pl-launch').textContent")
    assert result["launch"]["colocated"]["vllm"] in launch, launch
    best = result["best"]
    assert best["configuration"] in js(driver, "return document.getElementById('pl-best').textContent")
    screenshot(driver, tmp_path / "plan.png", full=True)

    # the best point, from the keyboard: focus it, Enter
    js(driver, "document.querySelector('#pl-chart g.pick[data-key=best]').focus()")
    driver.switch_to.active_element.send_keys("\n")
    wait_for(driver, lambda: js(driver, "return document.body.dataset.view") == "run", "the runner")
    wait_for(driver, lambda: js(driver, "return document.getElementById('run').dataset.state") == "done", "the run", 60)
    run_id = js(driver, "return document.getElementById('run').dataset.runId")
    assert driver.current_url.endswith(f"#run?id={run_id}")
    with server.client() as c:
        sim = c.get(f"/v1/simulations/{run_id}").json()
        again = c.post("/v1/simulations", json=best["scenario"]).json()
    assert sim["scenario"] == again["scenario"]  # the run is of the best's scenario, as the service stores it
    assert sim["summary"]["requests"] == again["summary"]["requests"]
    assert console_errors(driver) == []


def test_a_refused_budget_shows_the_error_at_its_count(driver: Any, server: Server) -> None:
    """A second device kind with a count of 0: the service's 422 (path ``gpus``, naming the kind) is shown at
    that row's count, not the first row's, and no job starts; the tabs still reach the Plan tab from the
    keyboard (ArrowRight from Sweeps & capacity, End from the first tab)."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    open_plan(driver, server)
    driver.find_element(By.ID, "pl-add-device").click()
    row = "return document.querySelectorAll('#pl-budget [data-budget-row]')[1]"
    second = js(driver, f"{row}.querySelector('input').id")
    kind = js(driver, f"{row}.querySelector('select').value")
    type_into(driver, second, "0")
    with server.client() as c:
        before = len(c.get("/v1/plans").json())
    driver.find_element(By.ID, "pl-start").click()
    wait_for(driver, lambda: field_error(driver, second), "the error at the count")
    assert f"of {kind}" in field_error(driver, second)
    assert field_error(driver, "pl-count-1") == ""
    assert js(driver, "return document.getElementById('pl-errors').hidden") is True
    with server.client() as c:
        assert len(c.get("/v1/plans").json()) == before
    assert console_errors(driver, allow_statuses=(422,)) == []

    driver.find_element(By.ID, "tab-sweeps").click()
    wait_for(driver, lambda: js(driver, "return document.body.dataset.view") == "sweeps", "the sweeps view")
    driver.find_element(By.ID, "tab-sweeps").send_keys(Keys.ARROW_RIGHT)
    wait_for(driver, lambda: js(driver, "return document.body.dataset.view") == "plan", "the plan view")
    assert driver.switch_to.active_element.get_attribute("id") == "tab-plan"
    driver.find_element(By.ID, "tab-explorer").click()
    driver.find_element(By.ID, "tab-explorer").send_keys(Keys.END)
    wait_for(driver, lambda: js(driver, "return document.body.dataset.view") == "plan", "the plan view (End)")


def test_a_queued_plan_shows_its_total_and_is_cancelled(driver: Any, server: Server) -> None:
    """Behind a long sweep (the service runs jobs one at a time), a plan started from the page waits queued: its
    progress line already says "0 of N configurations" with the job's total (known at the 202); its Cancel
    button cancels it: the service says cancelled, the page says so and offers no Cancel any more."""
    from selenium.webdriver.common.by import By

    with server.client() as c:
        long = {"base": {"workload": {"requests": 4000}}, "grid": {"workload.seed": list(range(200))}}
        blocker = c.post("/v1/sweeps", json=long).headers["location"]
        try:
            open_plan(driver, server)
            type_into(driver, "pl-count-1", "2")
            type_into(driver, "pl-requests", "150")
            type_into(driver, "pl-tp", "1")
            driver.find_element(By.ID, "pl-start").click()
            wait_for(
                driver,
                lambda: js(driver, "return document.getElementById('pl-status')?.textContent") == "queued",
                "queued",
            )
            job_id = js(driver, "return document.getElementById('pl-job').dataset.job")
            job = c.get(f"/v1/plans/{job_id}").json()
            assert (job["status"], job["done"], job["total"]) == ("queued", 0, 3), job
            progress = "return document.getElementById('pl-progress-text').textContent"
            assert js(driver, progress) == "0 of 3 configurations"
            assert js(driver, "return document.getElementById('pl-cancel') !== null")
            js(driver, "document.getElementById('pl-cancel').click()")
            wait_for(
                driver,
                lambda: js(driver, "return document.getElementById('pl-job').dataset.status") == "cancelled",
                "cancelled",
            )
            assert c.get(f"/v1/plans/{job_id}").json()["status"] == "cancelled"
            assert js(driver, "return document.getElementById('pl-cancel')") is None
            assert js(driver, "return !!document.getElementById('pl-ended')")
        finally:
            c.post(f"{blocker}/cancel")
    assert console_errors(driver) == []
