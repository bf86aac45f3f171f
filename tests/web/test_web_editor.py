"""The scenario editor of the web page reads its text with the service, in headless Chromium (Selenium, as
test_web_page.py) against a real ``kvwire-api`` server on 127.0.0.1: every example TOML typed in is, once the
typing pauses, exactly what ``tomllib`` reads from the file, and switching to JSON and back gives the same object
(the TOML as ``kvwire.scenario.to_toml`` writes it); what a run or a check sends is that object; a pause of 300 ms
is one reading, an answer about older text never overwrites newer text; a syntax error shows tomllib's line,
column and message. The page links to the documentation site when the service serves one, and only then."""

from __future__ import annotations

import contextlib
import json
import os
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kvwire
import pytest
from api_support import Server
from browser_support import console_errors, js, set_viewport, wait_for
from kvwire.scenario import to_toml
from shared_paths import EXAMPLES as EXAMPLES_DIR

#: Every example TOML file (sweep definitions and scenarios), wherever it sits under examples/.
EXAMPLES = sorted(EXAMPLES_DIR.rglob("*.toml"))
#: Scenarios a run sends as they are (the examples above are sweep definitions: the page's schema check stops
#: those before the service): the default in full, and a small run.
SCENARIOS = {
    "default": to_toml(kvwire.default_scenario()),
    "small-run": '# a small run\nlink = "ib-ndr"\n\n[workload]\nrequests = 300\nseed = 7\n'
    "[workload.arrivals]\nrate_per_s = 6.5\n\n[slo]\nttft_s = 2.0\n",
}
#: Records the body of every POST the page sends (``__sent``) and the order their answers come back in
#: (``__answered``); delays the ones whose body holds ``window.__slow.marker`` by ``window.__slow.ms``.
SPY = """
if (!window.__spied) {
  window.__spied = true;
  window.__sent = [];
  window.__answered = [];
  window.__slow = null;
  const original = window.fetch;
  window.fetch = async (url, init = {}) => {
    if (init.method !== "POST") return original(url, init);
    const body = JSON.parse(init.body);
    window.__sent.push({ url: String(url), body });
    const slow = window.__slow;
    if (slow && init.body.includes(slow.marker)) await new Promise((r) => setTimeout(r, slow.ms));
    const answer = await original(url, init);
    window.__answered.push({ url: String(url), body });
    return answer;
  };
}
"""


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith(("KVWIRE_API_", "KVWIRE_DOCS_DIR"))}


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small documentation site (what ``mkdocs build`` leaves: an index.html and pages)."""
    root = tmp_path_factory.mktemp("site")
    page = '<!doctype html><title>kvwire documentation</title><link rel="icon" href="data:,"><h1>The guide</h1>\n'
    (root / "index.html").write_text(page)
    return root


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, driver: Any, site: Path) -> Iterator[Server]:
    """A server with the documentation site (given by KVWIRE_DOCS_DIR)."""
    s = Server(tmp_path_factory.mktemp("editor") / "data", {**_env(), "KVWIRE_DOCS_DIR": str(site)}).start()
    try:
        yield s
    finally:
        s.stop()


def open_runner(driver: Any, server: Server) -> None:
    """A fresh load of the runner, its first run done, with the POST spy installed."""
    set_viewport(driver, 1280, 800)
    driver.get("about:blank")
    driver.get(f"{server.url}/#run")
    wait_for(driver, lambda: js(driver, "return document.body.dataset.ready") == "true", "the page")
    wait_for(driver, lambda: js(driver, "return document.getElementById('run').dataset.state") == "done", "a run", 60)
    js(driver, SPY)


def editor(driver: Any) -> str:
    return str(js(driver, "return document.getElementById('run-editor').value"))


def check_line(driver: Any) -> str:
    return str(js(driver, "return document.getElementById('run-check').textContent"))


def settled(driver: Any, what: str) -> None:
    """Wait until the editor's text and the page's scenario agree (no reading or writing under way)."""
    wait_for(
        driver, lambda: js(driver, "return document.getElementById('run-editor').dataset.reading") == "false", what
    )


def type_text(driver: Any, text: str) -> None:
    """Put ``text`` in the editor and fire ``input`` as typing does."""
    js(
        driver,
        """const t = document.getElementById('run-editor'); t.focus(); t.value = arguments[0];
        t.dispatchEvent(new Event('input', {bubbles: true}));""",
        text,
    )


def choose(driver: Any, fmt: str) -> None:
    driver.find_element("css selector", f"label:has(input[name='run-format'][value='{fmt}'])").click()
    settled(driver, f"the editor in {fmt}")
    assert js(driver, "return document.querySelector('input[name=run-format]:checked').value") == fmt


def sent(driver: Any, endpoint: str) -> list[Any]:
    """The bodies the page POSTed to ``endpoint`` since the spy was installed."""
    return [x["body"] for x in js(driver, "return window.__sent") if x["url"].endswith(endpoint)]


def same(a: Any, b: Any) -> bool:
    """Equal as the page can hold them: JavaScript has one number type (14.0 is 14), nothing else is loosened
    (a boolean is not a number, a string not a number, every key and item must match)."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a == b
    return type(a) is type(b) and a == b


def no_console_errors(driver: Any) -> None:
    errors = console_errors(driver, (400, 422))  # the syntax error and refused scenarios are logged as failed loads
    assert errors == [], errors


def test_there_are_example_tomls() -> None:
    assert len(EXAMPLES) >= 2, EXAMPLES


def test_every_example_reads_as_tomllib_reads_it_and_round_trips(driver: Any, server: Server) -> None:
    """For every example TOML: typed into the editor in TOML mode, the page asks the service once the typing
    pauses and holds exactly what tomllib reads from the file (shown when switching to JSON: the JSON the page
    submits); switching back to TOML shows kvwire.scenario.to_toml of that object, which reads back to it; and
    JSON again gives the same object. The scenarios among them are what the page then sends to be checked."""
    open_runner(driver, server)
    choose(driver, "toml")
    docs = {p.name: p.read_text(encoding="utf-8") for p in EXAMPLES} | SCENARIOS
    for name, text in docs.items():
        want = tomllib.loads(text)
        type_text(driver, text)
        settled(driver, f"the editor to read {name}")
        assert sent(driver, "/v1/scenarios/parse")[-1] == {"text": text, "format": "toml"}
        choose(driver, "json")
        held = json.loads(editor(driver))
        assert same(held, want), (name, held, want)
        choose(driver, "toml")
        assert editor(driver) == to_toml(held), name
        assert same(tomllib.loads(editor(driver)), want), name
        choose(driver, "json")
        assert same(json.loads(editor(driver)), want), name
        choose(driver, "toml")
    for name, text in SCENARIOS.items():
        type_text(driver, text)
        wait_for(driver, lambda: check_line(driver).startswith("✓ Valid"), f"{name} checked by the service", 60)
        assert same(sent(driver, "/v1/scenarios/validate")[-1], tomllib.loads(text)), name
    no_console_errors(driver)


def test_a_run_sends_what_the_editor_says_even_before_the_pause(driver: Any, server: Server) -> None:
    """Run pressed at once after typing (before the 300 ms pause): the page reads the text first and runs
    exactly that scenario."""
    open_runner(driver, server)
    choose(driver, "toml")
    text = SCENARIOS["small-run"].replace("requests = 300", "requests = 250")
    type_text(driver, text)
    js(driver, "document.getElementById('run-button').click()")
    wait_for(driver, lambda: sent(driver, "/v1/simulations"), "the run")
    assert same(sent(driver, "/v1/simulations")[-1], tomllib.loads(text))
    wait_for(driver, lambda: js(driver, "return document.getElementById('run').dataset.state") == "done", "a run", 60)
    no_console_errors(driver)


def test_typing_is_read_once_and_a_stale_answer_never_wins(driver: Any, server: Server) -> None:
    """Keys within 300 ms of each other are one reading (of the last text); an answer about older text that
    arrives after a newer edit's answer is dropped: the page holds the newer text's object."""
    open_runner(driver, server)
    choose(driver, "toml")
    before = len(sent(driver, "/v1/scenarios/parse"))
    for n in (1, 2, 3):
        type_text(driver, f"[workload]\nrequests = {n}00\n")
    settled(driver, "one reading")
    parses = sent(driver, "/v1/scenarios/parse")[before:]
    assert parses == [{"text": "[workload]\nrequests = 300\n", "format": "toml"}]

    js(driver, "window.__slow = {marker: 'old-text', ms: 2000}")
    old = '# old-text\nlink = "eth-25g"\n'
    new = 'link = "nvlink4"\n'
    type_text(driver, old)
    wait_for(driver, lambda: {"text": old, "format": "toml"} in sent(driver, "/v1/scenarios/parse"), "the slow reading")
    type_text(driver, new)
    settled(driver, "both readings answered")
    answered = [x["body"]["text"] for x in js(driver, "return window.__answered") if x["url"].endswith("/parse")]
    assert answered[-2:] == [new, old]  # the older text's answer came last
    assert editor(driver) == new
    js(driver, "window.__slow = null")
    choose(driver, "json")
    assert json.loads(editor(driver)) == {"link": "nvlink4"}
    no_console_errors(driver)


def test_a_syntax_error_shows_tomllibs_line_and_column(driver: Any, server: Server) -> None:
    """Broken TOML shows tomllib's own message, line and column, and keeps the editor in TOML (the text being
    fixed is not rewritten); fixed, it reads again."""
    open_runner(driver, server)
    choose(driver, "toml")
    text = "[workload]\nrequests = 300\n[workload.arrivals\nrate_per_s = 2.0\n"
    with pytest.raises(tomllib.TOMLDecodeError) as info:
        tomllib.loads(text)
    message, _, where = str(info.value).rpartition(" (at ")
    line, column = where.removeprefix("line ").removesuffix(")").split(", column ")
    type_text(driver, text)
    want = f"TOML: line {line}, column {column}: {message}"
    wait_for(driver, lambda: check_line(driver) == want, "the syntax error")
    assert js(driver, "return document.getElementById('run-editor').getAttribute('aria-invalid')") == "true"
    driver.find_element("css selector", "label:has(input[name='run-format'][value='json'])").click()
    settled(driver, "the refused switch")
    assert js(driver, "return document.querySelector('input[name=run-format]:checked').value") == "toml"
    assert editor(driver) == text
    type_text(driver, text.replace("[workload.arrivals\n", "[workload.arrivals]\n"))
    wait_for(driver, lambda: check_line(driver).startswith("✓ Valid: 300 requests"), "the fixed text", 60)
    no_console_errors(driver)


def test_the_page_links_to_the_docs_only_when_the_service_has_them(driver: Any, server: Server, tmp_path: Path) -> None:
    """With a site (GET /health's docs), the page's header links to /docs/, which opens the site; a service
    without one shows no link."""
    open_runner(driver, server)
    wait_for(driver, lambda: js(driver, "return !!document.getElementById('docs-link')"), "the docs link")
    assert js(driver, "return document.getElementById('docs-link').getAttribute('href')") == "/docs/"
    driver.find_element("id", "docs-link").click()
    wait_for(driver, lambda: driver.title == "kvwire documentation", "the documentation site")
    assert driver.current_url == f"{server.url}/docs/"

    (tmp_path / "cwd").mkdir()
    with contextlib.chdir(tmp_path / "cwd"):  # no site/ where this one starts
        bare = Server(tmp_path / "data", _env()).start()
    try:
        open_runner(driver, bare)
        wait_for(
            driver,
            lambda: "simulation thread" in js(driver, "return document.getElementById('server-status').textContent"),
            "health",
        )
        assert js(driver, "return document.getElementById('docs-link')") is None
    finally:
        bare.stop()
    no_console_errors(driver)
