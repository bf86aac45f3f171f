"""The runner's parallelism, formats and speculative-decoding fields (issue 24) in headless Chromium (Selenium,
as test_web_page.py) against a real ``kvwire-api`` server on 127.0.0.1.

What the tests show: decode TP 2, FP8 weights and speculative decoding set in the form are what the run sends
and what the service ran (the stored run's scenario echo, ``GET /v1/simulations/{id}``), no ``parallel`` is
sent for a pool whose degrees are blank, and the results show the run's per-instance layout and collective
share and its tokens per step as the summary has them; a TP that does not divide the model's heads, a layout
whose weights do not fit and a devices_per_instance that disagrees with the layout are refused with the
library's message next to the TP field that causes them; a scenario with ``parallel``, formats and
``speculative`` typed in the editor shows its values in the form, and editing or clearing them changes (or
removes) the fields the scenario holds. The console has no errors but the service's refusals."""

from __future__ import annotations

import base64
import json
import os
from collections.abc import Iterator
from typing import Any

import httpx
import kvwire
import pytest
from api_support import Server
from browser_support import console_errors, field_error, fixed, js, set_viewport, wait_for

#: The multiplication sign of the layout note ("TP 2 x PP 1 x DP 1" with it).
X = "\N{MULTIPLICATION SIGN}"

#: A small first run (the page runs a #run?s= link's scenario when it opens).
SMALL = {"workload": {"requests": 200}}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, driver: Any) -> Iterator[Server]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KVWIRE_API_", "KVWIRE_DOCS_DIR"))}
    s = Server(tmp_path_factory.mktemp("web-parallel") / "data", env).start()
    try:
        yield s
    finally:
        s.stop()


def open_runner(driver: Any, server: Server, scenario: dict[str, Any]) -> None:
    """A fresh load of the runner on ``scenario`` (a shared link), its run done."""
    code = base64.urlsafe_b64encode(json.dumps(scenario).encode()).decode().rstrip("=")
    set_viewport(driver, 1280, 800)
    driver.get("about:blank")
    driver.get(f"{server.url}/#run?s={code}")
    wait_for(driver, lambda: js(driver, "return document.body.dataset.ready") == "true", "the page")
    wait_for(driver, lambda: js(driver, "return document.getElementById('run').dataset.state") == "done", "run", 60)


def type_into(driver: Any, element_id: str, text: str) -> None:
    """Replace a control's text by typing (select all, delete, then the keys)."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    el = driver.find_element(By.ID, element_id)
    el.click()
    el.send_keys(Keys.CONTROL, "a")
    el.send_keys(Keys.DELETE)
    if text:
        el.send_keys(text)


def choose(driver: Any, select_id: str, value: str) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    Select(driver.find_element(By.ID, select_id)).select_by_value(value)


def click(driver: Any, element_id: str) -> None:
    from selenium.webdriver.common.by import By

    driver.find_element(By.ID, element_id).click()


def editor(driver: Any) -> Any:
    """The scenario the editor's JSON holds (what a run sends)."""
    return json.loads(js(driver, "return document.getElementById('run-editor').value"))


def set_editor(driver: Any, text: str) -> None:
    js(
        driver,
        """const t = document.getElementById('run-editor'); t.focus(); t.value = arguments[0];
        t.dispatchEvent(new Event('input', {bubbles: true}));""",
        text,
    )


def value(driver: Any, element_id: str) -> Any:
    script = "const c = document.getElementById(arguments[0]); return c.type === 'checkbox' ? c.checked : c.value"
    return js(driver, script, element_id)


def text_of(driver: Any, element_id: str) -> str:
    return str(js(driver, "return document.getElementById(arguments[0]).textContent", element_id))


def refusal(scenario: dict[str, Any]) -> kvwire.ScenarioError:
    with pytest.raises(kvwire.ScenarioError) as info:
        kvwire.validate(scenario)
    return info.value


def test_tp_weights_and_speculation_set_in_the_form_are_what_runs(driver: Any, server: Server) -> None:
    """Decode TP 2, FP8 weights and speculative decoding on, set in the form: the editor holds
    decode.parallel.tp 2, model {"preset", "weights": "fp8"} and the documented speculative example, and no
    prefill.parallel; the run's stored scenario echo has them; the per-instance table shows decode-0's TP2 on 2
    devices and its collective share, the tokens-per-step card the summary's; the stored run opened by its link
    shows its values in the form, and changing its TP keeps it valid."""
    open_runner(driver, server, SMALL)
    first = js(driver, "return document.getElementById('run').dataset.runId")
    assert js(driver, "return document.getElementById('run-instances')") is None  # no layout, BF16: no table
    type_into(driver, "run-decode-tp", "2")
    choose(driver, "run-weights", "fp8")
    click(driver, "run-spec-on")
    wait_for(driver, lambda: "4 devices" not in text_of(driver, "run-decode-layout"), "the layout note")
    assert text_of(driver, "run-decode-layout").startswith(f"2 devices per instance (TP 2 {X} PP 1 {X} DP 1)")
    sent = editor(driver)
    assert sent["decode"]["parallel"] == {"tp": 2}
    assert "parallel" not in sent.get("prefill", {})
    assert sent["model"] == {"preset": "llama3-8b", "weights": "fp8"}
    assert sent["speculative"] == {"method": "mtp", "tokens": 3, "acceptance": 0.7}

    click(driver, "run-button")
    done = "const r = document.getElementById('run'); return r.dataset.state === 'done' && r.dataset.runId"
    wait_for(driver, lambda: js(driver, done) not in (None, False, first), "the new run", 60)
    run_id = js(driver, "return document.getElementById('run').dataset.runId")
    stored = httpx.get(f"{server.url}/v1/simulations/{run_id}").json()
    echo = stored["scenario"]
    assert echo["decode"]["parallel"]["tp"] == 2
    assert echo["decode"]["devices_per_instance"] == 2
    assert echo["model"]["weights"] == "fp8"
    assert echo["speculative"]["method"] == "mtp"
    s = stored["summary"]
    assert s["instances"]["decode-0"]["comm_fraction"] > 0
    row = js(
        driver,
        """const r = document.querySelector('#run-instances tr[data-instance="decode-0"]');
        return [r.dataset.comm, [...r.cells].map(c => c.textContent)];""",
    )
    assert float(row[0]) == s["instances"]["decode-0"]["comm_fraction"]
    assert row[1][:4] == ["decode-0", "2", "TP2", f"{fixed(s['instances']['decode-0']['comm_fraction'] * 100, 1)}%"]
    assert "(TP2)" in text_of(driver, "run-headline")
    card = js(driver, "return document.querySelector('[data-figure=\"speculative\"] .value').textContent")
    assert card == fixed(s["speculative"]["tokens_per_step"], 2)

    # the stored run opened (#run?id=): its echo shows in the form, and a changed TP drops the echo's
    # devices_per_instance (the layout gives it) instead of disagreeing with it
    driver.get("about:blank")
    driver.get(f"{server.url}/#run?id={run_id}")
    status = "const e = document.getElementById('run-status'); return e && e.textContent"
    wait_for(driver, lambda: js(driver, status) == f"Stored run {run_id}.", "the stored run")
    assert [value(driver, k) for k in ("run-decode-tp", "run-decode-pp", "run-weights", "run-spec-on")] == [
        "2", "1", "fp8", True
    ]  # fmt: skip
    type_into(driver, "run-decode-tp", "4")
    wait_for(driver, lambda: editor(driver)["decode"]["parallel"]["tp"] == 4, "TP 4 in the scenario")
    assert "devices_per_instance" not in editor(driver)["decode"]
    wait_for(driver, lambda: text_of(driver, "run-check").startswith("✓ Valid"), "the changed echo valid")
    assert console_errors(driver) == []


def test_a_refused_layout_is_shown_at_its_tp_field(driver: Any, server: Server) -> None:
    """Decode TP 3 for Llama-3-8B's 32 heads, prefill TP 1 for Llama-3-70B's weights and a devices_per_instance
    that disagrees with decode's layout: each refusal, the library's message, is shown next to that pool's TP."""
    open_runner(driver, server, SMALL)
    type_into(driver, "run-decode-tp", "3")
    heads = refusal({"decode": {"parallel": {"tp": 3}}})
    assert heads.path == "decode.parallel.tp"
    wait_for(driver, lambda: field_error(driver, "run-decode-tp") == str(heads), "the TP error as you type")
    click(driver, "run-button")  # the run is refused with the same message at the same field
    wait_for(driver, lambda: js(driver, "return document.getElementById('run').dataset.state") == "error", "refusal")
    assert field_error(driver, "run-decode-tp") == str(heads)

    fit = {"model": "llama3-70b", "prefill": {"parallel": {"tp": 1}}, "decode": {"parallel": {"tp": 4}}}
    too_big = refusal(fit)
    assert too_big.path == "prefill.parallel.tp" and "does not fit" in str(too_big)
    set_editor(driver, json.dumps(fit))
    wait_for(driver, lambda: field_error(driver, "run-prefill-tp") == str(too_big), "the fit error at prefill TP")
    assert value(driver, "run-prefill-tp") == "1"

    disagree = {"decode": {"devices_per_instance": 4, "parallel": {"tp": 2}}}
    mismatch = refusal(disagree)
    assert mismatch.path == "decode.devices_per_instance"
    set_editor(driver, json.dumps(disagree))
    wait_for(driver, lambda: field_error(driver, "run-decode-tp") == str(mismatch), "the mismatch at decode TP")
    assert console_errors(driver, (422,)) == []  # the service's refusals are logged as failed loads


def test_a_scenario_with_parallel_shows_in_the_form_and_edits_round_trip(driver: Any, server: Server) -> None:
    """A scenario typed in the editor with both pools' layouts, FP8 weights and activations and an EAGLE
    speculation with per-position acceptance shows each value in its field; editing acceptance, clearing decode
    micro-batches, PP then TP, clearing the weights and turning speculation off change the scenario to match,
    and remove what is left empty (no `parallel`, no `speculative`, the model a preset name again)."""
    open_runner(driver, server, SMALL)
    scenario = {
        "model": {"preset": "llama3-70b", "weights": "fp8", "activations": "fp8"},
        "prefill": {"parallel": {"tp": 4}},
        "decode": {"parallel": {"tp": 2, "pp": 2, "micro_batches": 2}},
        "speculative": {"method": "eagle", "tokens": 2, "acceptance": [0.8, 0.6]},
        "workload": {"requests": 200},
    }
    kvwire.validate(scenario)
    set_editor(driver, json.dumps(scenario))
    wait_for(driver, lambda: text_of(driver, "run-check").startswith("✓ Valid: 200 requests"), "the scenario read")
    want = {
        "run-prefill-tp": "4", "run-prefill-pp": "", "run-decode-tp": "2", "run-decode-pp": "2", "run-decode-ep": "",
        "run-decode-micro_batches": "2", "run-prefill-micro_batches": "",
        "run-weights": "fp8", "run-activations": "fp8", "run-spec-on": True, "run-spec-method": "eagle",
        "run-spec-tokens": "2", "run-spec-acceptance": "0.8, 0.6",
    }  # fmt: skip
    assert {k: value(driver, k) for k in want} == want
    assert text_of(driver, "run-decode-layout").startswith(f"4 devices per instance (TP 2 {X} PP 2 {X} DP 1)")
    assert js(driver, "return !!document.getElementById('run-spec-draft').closest('[hidden]')")  # eagle: no draft

    type_into(driver, "run-spec-acceptance", "0.7")
    wait_for(driver, lambda: editor(driver)["speculative"]["acceptance"] == 0.7, "one acceptance")
    type_into(driver, "run-spec-acceptance", "0.9, 0.5")
    wait_for(driver, lambda: editor(driver)["speculative"]["acceptance"] == [0.9, 0.5], "a list again")
    type_into(driver, "run-decode-micro_batches", "")
    wait_for(driver, lambda: editor(driver)["decode"] == {"parallel": {"tp": 2, "pp": 2}}, "micro-batches cleared")
    type_into(driver, "run-decode-pp", "")
    wait_for(driver, lambda: editor(driver)["decode"] == {"parallel": {"tp": 2}}, "decode PP cleared")
    type_into(driver, "run-decode-tp", "")
    wait_for(driver, lambda: "decode" not in editor(driver), "decode's parallel gone")
    choose(driver, "run-weights", "")
    choose(driver, "run-activations", "")
    wait_for(driver, lambda: editor(driver)["model"] == "llama3-70b", "the model a preset name again")
    click(driver, "run-spec-on")
    wait_for(driver, lambda: "speculative" not in editor(driver), "speculation off")
    assert editor(driver) == {"model": "llama3-70b", "prefill": {"parallel": {"tp": 4}}, "workload": {"requests": 200}}
    wait_for(driver, lambda: text_of(driver, "run-check").startswith("✓ Valid"), "still valid")
    assert console_errors(driver) == []
