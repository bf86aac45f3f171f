"""The web page's charts and cards people can read (issue 23, items 5 and 6), in headless Chromium against a real
``kvwire-api`` server, as test_web_page.py.

What the tests show: the runner's cards say which TTFT rule is in force (read from the run's scenario echo
``metrics.first_token``), over which window goodput and throughput are, and lead with the load (offered /
ceiling) rather than a 99.9% busy decode pool; the sweep charts order a categorical link axis by bandwidth and
draw it as points, keep every interval inside what is possible (SLO attainment by Wilson's score interval, the
library's own numbers), give every line its own dash and marker, draw one chart per value of a chosen field,
filter, say the TTFT rule, and refuse more lines than can be told apart; the hand-off explorer groups its 12
link lines by family and labels each at its end. Without Chromium the module is skipped, saying so."""

from __future__ import annotations

import itertools
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kvwire
import numpy as np
import polars as pl
import pytest
from api_support import Server, running
from browser_support import console_errors, fixed, js, screenshot, set_viewport, wait_for
from kvwire.planning import intervals

RATE = "workload.arrivals.rate_per_s"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, driver: Any) -> Iterator[Server]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KVWIRE_API_")}
    with running(tmp_path_factory.mktemp("web-charts") / "data", env) as s:
        yield s


def open_page(driver: Any, server: Server, fragment: str) -> None:
    set_viewport(driver, 1280, 800)
    driver.get("about:blank")
    driver.get(f"{server.url}/{fragment}")
    wait_for(driver, lambda: js(driver, "return document.body.dataset.ready") == "true", "the page")


def card(driver: Any, key: str) -> dict[str, str] | None:
    """A figure card's value+unit and detail line, or None when there is no such card."""
    out: dict[str, str] | None = js(
        driver,
        """const f = document.querySelector(`[data-figure="${arguments[0]}"]`);
        return f && {value: f.querySelector('.value').textContent + f.querySelector('.unit').textContent,
                     detail: f.querySelector('.detail').textContent, rule: f.dataset.firstToken || null};""",
        key,
    )
    return out


def no_console_errors(driver: Any) -> None:
    errors = console_errors(driver)
    assert errors == [], errors


def pct(x: float) -> str:
    return f"{fixed(x * 100, 1)}%"


# --------------------------------------------------------------------------------------------------
# The runner's cards


@pytest.mark.parametrize("rule", ["prefill", "decode"])
def test_cards_say_the_ttft_rule_windows_and_load(driver: Any, server: Server, shots: Path, rule: str) -> None:
    """A run with metrics.first_token set: the TTFT card and the line under the cards say that rule (the run's
    scenario echo, not a guess); goodput says its window (slo.goodput_window_s) and throughput that it is over
    the run (throughput.window_s); a Load card shows the highest load factor, the load chart every pool's, and
    each utilisation bar its pool's load beside the busy share (decode 99.9% busy at about 28% load)."""
    scenario = {"workload": {"requests": 800}, "metrics": {"first_token": rule}}
    with server.client() as c:
        sim = c.post("/v1/simulations", json=scenario).json()
    open_page(driver, server, f"#run?id={sim['id']}")
    wait_for(driver, lambda: js(driver, "return document.getElementById('run').dataset.state") == "done", "the run")
    res = kvwire.simulate(scenario)
    s = res.summary
    assert res.scenario["metrics"]["first_token"] == rule
    ttft = card(driver, "ttft-p99")
    assert ttft is not None and ttft["rule"] == rule
    short = {"prefill": "first token out of prefill", "decode": "first token once decode has the KV"}[rule]
    assert ttft["detail"].endswith(short)
    line = js(driver, "return document.getElementById('run-ttft-rule').textContent")
    assert f'metrics.first_token "{rule}"' in line
    slo = card(driver, "slo")
    window = fixed(s["slo"]["goodput_window_s"], 1)
    assert slo is not None and f"over the {window} s of measured arrivals" in slo["detail"]
    thr = card(driver, "throughput")
    assert thr is not None and f"over the run ({fixed(s['throughput']['window_s'], 1)} s)" in thr["detail"]
    factors = s["load"]["load_factor"]
    pool, top = max(factors.items(), key=lambda kv: kv[1])
    load = card(driver, "load")
    assert load is not None and load["value"] == pct(top) and load["detail"].startswith(f"{pool}:")
    load_bars = json.loads(js(driver, "return document.querySelector('#run-load figure').dataset.series"))
    bars = {r["label"]: r["segments"][0]["value"] for r in load_bars}
    assert bars == factors
    ends = js(
        driver, "return [...document.querySelectorAll('#run-utilisation text.bar-label')].map(t => t.textContent)"
    )
    decode = s["utilisation"]["decode-0"]
    assert f"{pct(decode)} · load {pct(factors['decode'])}" in ends
    assert decode > 0.99 and factors["decode"] < 0.5  # the case of the issue: busy, but far from saturated
    screenshot(driver, shots / f"charts-run-{rule}.png")
    no_console_errors(driver)


# --------------------------------------------------------------------------------------------------
# The sweep charts

BASE = {"workload": {"requests": 300}, "metrics": {"first_token": "decode"}}
LINKS = ["nvlink4", "eth-25g", "ib-ndr"]  # the grid's order; by bandwidth: eth-25g 3.125, ib-ndr 50, nvlink4 450 GB/s
BY_BANDWIDTH = ["eth-25g", "ib-ndr", "nvlink4"]
RATES = [4, 14]


def chart(driver: Any, metric: str, index: int = 0) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """(the plotted series, {title, categories, dashes, shapes per series}) of a metric's index-th chart."""
    out = js(
        driver,
        """const f = document.querySelectorAll(`[data-metric="${arguments[0]}"] figure`)[arguments[1]];
        if (!f) return null;
        const paths = [...f.querySelectorAll('path[data-series]')];
        return [JSON.parse(f.dataset.series), {title: f.querySelector('figcaption').textContent,
                categories: f.dataset.categories ? JSON.parse(f.dataset.categories) : null,
                dashes: paths.map(p => p.getAttribute('stroke-dasharray')),
                shapes: [...new Set([...f.querySelectorAll('.marker')].map(
                    m => m.getAttribute('stroke') + m.dataset.shape))]}];""",
        metric,
        index,
    )
    assert out, f"no chart {index} of {metric}"
    return out[0], out[1]


def job_status(driver: Any) -> str | None:
    """The job view's status (None before it shows a job)."""
    out: str | None = js(driver, "return document.getElementById('sw-job')?.dataset.status || null")
    return out


def chart_count(driver: Any, metric: str) -> int:
    """How many charts of ``metric`` the sweep view shows."""
    return int(js(driver, 'return document.querySelectorAll(`[data-metric="${arguments[0]}"] figure`).length', metric))


def facets(driver: Any, metric: str) -> list[str]:
    """The facet values of ``metric``'s charts, in the page's order."""
    out: list[str] = js(
        driver,
        'return [...document.querySelectorAll(`[data-metric="${arguments[0]}"] [data-facet]`)]'
        ".map(e => e.dataset.facet)",
        metric,
    )
    return out


def choose(driver: Any, control_id: str, value: str) -> None:
    """Pick a value of one of the sweep view's selects (the view redraws on change)."""
    js(
        driver,
        """const c = document.getElementById(arguments[0]); c.value = arguments[1];
        c.dispatchEvent(new Event('change', {bubbles: true}));""",
        control_id,
        value,
    )


def start_sweep(driver: Any, server: Server) -> None:
    """Start the sweep (BASE, RATE x LINKS, 2 replicates) from the page's form and wait for its charts."""
    from selenium.webdriver.common.by import By

    open_page(driver, server, "#sweeps")
    js(driver, "const t = document.getElementById('sw-base'); t.value = arguments[0];", json.dumps(BASE))
    for i, values in ((1, ", ".join(map(str, RATES))), (2, ", ".join(LINKS))):
        js(driver, "document.getElementById(arguments[0]).value = arguments[1];", f"sw-grid-values-{i}", values)
    js(driver, "document.getElementById('sw-replicates').value = '2';")
    driver.find_element(By.ID, "sw-start").click()
    wait_for(driver, lambda: job_status(driver) == "done", "the sweep", 180)
    wait_for(driver, lambda: chart_count(driver, "latency.tpot_s.p99") > 0, "the charts")


def test_sweep_charts_order_bound_style_facet_and_filter(driver: Any, server: Server, shots: Path) -> None:
    """A sweep of rate x link with 2 replicates started from the page: the lines are the links slowest first,
    each with its own dash and marker; every interval is the library's (kvwire.planning.intervals over
    kvwire.sweep's table) and inside [0, 1] for SLO attainment, >= 0 for latencies; the TTFT rule the base
    named is said. x = link: categories by bandwidth, points not joined. Charts per link: one chart per link,
    in bandwidth order; keeping one link: one line."""
    start_sweep(driver, server)
    table = kvwire.sweep(BASE, {RATE: RATES, "link": LINKS}, replicates=2)
    assert "once decode has the KV" in chart(driver, "latency.ttft_s.p99")[1]["title"]
    assert 'metrics.first_token "decode"' in js(driver, "return document.getElementById('sw-ttft-rule').textContent")
    for metric, scale in (("slo.attainment", 1.0), ("latency.ttft_s.p99", 1e3), ("latency.tpot_s.p99", 1e3)):
        series, info = chart(driver, metric)
        assert [se["name"] for se in series] == [f"link={k}" for k in BY_BANDWIDTH]
        assert len(set(info["dashes"])) == 3 and len(info["shapes"]) == 3  # coinciding lines stay apart
        for se, link in zip(series, BY_BANDWIDTH, strict=True):
            for (rate, y), lo, hi in zip(se["points"], se["low"], se["high"], strict=True):
                rows = table.filter((pl.col("link") == link) & (pl.col(RATE) == rate))
                want = intervals.interval(metric, rows[metric].to_numpy(), rows["requests.measured"].to_numpy())
                np.testing.assert_allclose([y, lo, hi], np.array(want) * scale, rtol=1e-9, err_msg=f"{metric} {link}")
                assert lo >= 0.0 and (metric != "slo.attainment" or hi <= 1.0)
    choose(driver, "sw-x", "link")
    wait_for(driver, lambda: chart(driver, "slo.attainment")[1]["categories"] == BY_BANDWIDTH, "links by bandwidth")
    series, info = chart(driver, "slo.attainment")
    assert [se["name"] for se in series] == ["rate_per_s=4", "rate_per_s=14"]
    assert [p[0] for p in series[0]["points"]] == BY_BANDWIDTH and info["dashes"] == []  # points, no lines
    choose(driver, "sw-x", RATE)
    wait_for(driver, lambda: js(driver, "return !!document.getElementById('sw-facet')"), "the facet control")
    choose(driver, "sw-facet", "link")
    wait_for(driver, lambda: facets(driver, "slo.attainment") == BY_BANDWIDTH, "one chart per link")
    assert all(len(chart(driver, "slo.attainment", i)[0]) == 1 for i in range(3))
    choose(driver, "sw-facet", "")
    wait_for(driver, lambda: js(driver, "return !!document.querySelector('[data-where=\"link\"]')"), "the link filter")
    where = js(driver, "return document.querySelector('[data-where=\"link\"]').id")
    choose(driver, where, "eth-25g")
    one = ["SLO attainment"]
    wait_for(driver, lambda: [se["name"] for se in chart(driver, "slo.attainment")[0]] == one, "one line")
    screenshot(driver, shots / "charts-sweep.png", full=True)
    no_console_errors(driver)


def test_too_many_lines_are_refused(driver: Any, server: Server) -> None:
    """13 configurations besides x (13 seeds): the page says they are more than 12 lines one can tell apart and
    how to split them, instead of drawing them."""
    definition = {"base": {"workload": {"requests": 60}}, "grid": {RATE: [2, 4], "workload.seed": list(range(1, 14))}}
    with server.client() as c:
        job = c.post("/v1/sweeps", json=definition).json()
    open_page(driver, server, f"#sweeps?job=sweep/{job['id']}")
    wait_for(driver, lambda: job_status(driver) == "done", "the job", 120)
    wait_for(driver, lambda: js(driver, "return !!document.getElementById('sw-too-many')"), "the refusal")
    text = js(driver, "return document.getElementById('sw-too-many').textContent")
    assert "13 lines per chart are more than 12" in text and "workload.seed: 13 values" in text
    assert chart_count(driver, "slo.attainment") == 0
    no_console_errors(driver)


# --------------------------------------------------------------------------------------------------
# The explorer's link lines

FAMILIES = {
    "nvlink3": "NVLink", "nvlink4": "NVLink", "nvlink5": "NVLink", "ib-ndr": "InfiniBand", "ib-ndr-nixl": "InfiniBand",
    "roce-4x200g": "RoCE (RDMA over Ethernet)", "roce-8x400g": "RoCE (RDMA over Ethernet)", "eth-100g": "Ethernet",
    "eth-25g": "Ethernet", "pcie4": "PCIe", "pcie5": "PCIe", "cpo-optical": "Other",
}  # fmt: skip


def test_explorer_groups_link_lines_by_family(driver: Any, server: Server, shots: Path) -> None:
    """The exposed-time chart's 12 lines are grouped by link family (the legend has a heading per family, its
    links under it), each line has its own colour/dash/marker, and each is labelled at its end with its preset
    name, no two labels on top of each other."""
    open_page(driver, server, "#explorer")
    state = "return document.getElementById('explorer').dataset.state"
    wait_for(driver, lambda: js(driver, state) == "ready", "figures")
    links = kvwire.catalog()["links"]
    assert set(links) == set(FAMILIES)  # a new preset needs its family here
    series = json.loads(js(driver, "return document.querySelector('#ex-chart figure').dataset.series"))
    names = {v["name"]: k for k, v in links.items()}
    assert {names[se["name"]]: se["group"] for se in series} == FAMILIES
    groups = [se["group"] for se in series]
    assert groups == sorted(groups, key=groups.index)  # each family's lines together
    legend = js(
        driver,
        """return [...document.querySelectorAll('#ex-chart .legend > .legend-group, #ex-chart .legend > [data-group]')]
        .map(e => e.classList.contains('legend-group') ? ['group', e.textContent.replace(/:$/, '')]
                                                       : ['line', e.dataset.group, e.textContent])""",
    )
    headings = [g for kind, g, *_ in legend if kind == "group"]
    assert headings == list(dict.fromkeys(groups))
    current = None
    for entry in legend:
        if entry[0] == "group":
            current = entry[1]
        else:
            assert entry[1] == current and FAMILIES[names[entry[2]]] == current
    styles = js(
        driver,
        """return [...document.querySelectorAll('#ex-chart path[data-series]')].map(
        p => [p.getAttribute('stroke'), p.getAttribute('stroke-dasharray')])""",
    )
    assert len(styles) == 12 and len({tuple(x) for x in styles}) == 12
    labels = js(
        driver,
        """return [...document.querySelectorAll('#ex-chart .end-labels text')].map(
        t => [t.textContent, t.getBBox().y, t.getBBox().height])""",
    )
    assert sorted(t for t, _, _ in labels) == sorted(links)
    ys = sorted(y for _, y, _ in labels)
    assert all(b - a >= 9.5 for a, b in itertools.pairwise(ys))
    screenshot(driver, shots / "charts-explorer.png")
    no_console_errors(driver)


@pytest.fixture(scope="module")
def shots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where the screenshots go: under this pytest run's temporary directory."""
    return tmp_path_factory.mktemp("chart-shots")
