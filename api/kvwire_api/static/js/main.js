// The page: four views behind tabs (hand-off explorer, scenario runner, sweeps, plan), chosen by the URL's hash
// (#explorer, #run?s=<scenario>, #run?id=<run>, #sweeps?job=<kind>/<id>, #plan?job=<id>), so every view can be
// linked to; a link to the documentation site when the service serves one (GET /health's `docs`). The presets,
// the default scenario, the OpenAPI document and the timing sources are fetched together; only the last may fail.

import { get } from "./api.js";
import { mountExplorer } from "./explorer.js";
import { mountPlan } from "./plan.js";
import { mountRunner } from "./runner.js";
import { mountSweeps } from "./sweeps.js";
import { el } from "./ui.js";

const VIEWS = ["explorer", "run", "sweeps", "plan"];

function route() {
  const hash = location.hash.replace(/^#/, "");
  const [name, query] = hash.split("?");
  return { view: VIEWS.includes(name) ? name : "explorer", params: new URLSearchParams(query || "") };
}

function selectTab(view, focus = false) {
  for (const tab of document.querySelectorAll('[role="tab"]')) {
    const on = tab.getAttribute("aria-controls") === view;
    tab.setAttribute("aria-selected", String(on));
    tab.tabIndex = on ? 0 : -1;
    if (on && focus) tab.focus();
  }
  for (const v of VIEWS) document.getElementById(v).hidden = v !== view;
}

function tabKeys() {
  const tabs = [...document.querySelectorAll('[role="tab"]')];
  for (const tab of tabs) {
    tab.addEventListener("click", () => {
      location.hash = `#${tab.getAttribute("aria-controls")}`;
    });
    tab.addEventListener("keydown", (e) => {
      const i = tabs.indexOf(tab);
      const next = { ArrowRight: i + 1, ArrowLeft: i - 1, Home: 0, End: tabs.length - 1 }[e.key];
      if (next === undefined) return;
      e.preventDefault();
      const t = tabs[(next + tabs.length) % tabs.length];
      location.hash = `#${t.getAttribute("aria-controls")}`;
      t.focus();
    });
  }
}

async function health() {
  const status = document.getElementById("server-status");
  try {
    const h = await get("/health");
    status.textContent = `kvwire ${h.kvwire_version} · ${h.simulations.threads} simulation thread${h.simulations.threads === 1 ? "" : "s"}`;
    status.classList.remove("down");
    // the documentation site, when the service serves one (kvwire serve --docs DIR)
    if (typeof h.docs === "string" && h.docs.startsWith("/") && !document.getElementById("docs-link")) {
      status.before(el("a", { class: "docs-link", id: "docs-link", href: h.docs }, "Documentation"));
    }
  } catch (e) {
    status.textContent = "service not answering";
    status.classList.add("down");
  }
}

async function main() {
  tabKeys();
  const { view } = route();
  selectTab(view);
  health();
  let catalog;
  let defaults;
  let openapi;
  // the timing sources (GET /v1/timing): the page works without them, the runner then offers the roofline only
  const timing = get("/v1/timing").then((t) => ({ sources: t }), (e) => ({ sources: null, error: e.message }));
  try {
    [catalog, defaults, openapi] = await Promise.all([get("/v1/presets"), get("/v1/scenarios/default"), get("/schema/openapi.json")]);
  } catch (e) {
    document.getElementById("main").prepend(el("p", { class: "callout warn" }, `The page could not load the service's presets: ${e.message}`));
    return;
  }
  const views = {
    explorer: mountExplorer(document.getElementById("explorer"), catalog),
    run: mountRunner(document.getElementById("run"), { catalog, defaults, openapi, timing: await timing }),
  };
  views.sweeps = mountSweeps(document.getElementById("sweeps"), { runnerScenario: views.run.scenario, catalog });
  views.plan = mountPlan(document.getElementById("plan"), { catalog, defaults });
  const opened = new Set();
  const show = () => {
    const r = route();
    selectTab(r.view);
    if (r.view === "explorer") {
      if (!opened.has("explorer")) views.explorer.refresh();
    } else views[r.view].open(r.params);
    opened.add(r.view);
    document.body.dataset.view = r.view;
  };
  window.addEventListener("hashchange", show);
  show();
  document.body.dataset.ready = "true";
}

main();
