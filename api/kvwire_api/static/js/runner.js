// The scenario runner: a form for the common fields and a JSON/TOML editor for all of them (one scenario behind
// both). The editor's text is read by the service as the library reads a scenario file (POST /v1/scenarios/parse,
// 300 ms after the last key; TOML is written by POST /v1/scenarios/format), so the page and the library never
// disagree on a file; the scenario is checked against the OpenAPI schema and then by the service
// (POST /v1/scenarios/validate);
// a run (POST /v1/simulations) shows the percentile table, TTFT/TPOT CDFs, stage breakdown, utilisation,
// energy, the report's hot-spot sentence, where its step times came from (a measured source's provenance) and
// downloads; the URL carries the scenario, so it can be shared. The "Step times" fieldset sets `cost.timing`
// from what GET /v1/timing offers: the roofline, or the measured database's systems, engines and data versions.
// The parallel layout per pool, the model's weight and activation formats and speculative decoding are parallel.js's
// fields; a run's per-instance split and tokens per step are its figures.

import { ApiError, downloadLink, get, getText, post } from "./api.js";
import { barChart, lineChart, PALETTE } from "./charts.js";
import { compact, fixed, int, pct } from "./format.js";
import { formParts, instancesCard, LIST_PATHS, readList, setDegree, setModelFormat, showList, speculativeFigure, SPECULATIVE_DEFAULT } from "./parallel.js";
import { SchemaChecker } from "./schema.js";
import { clearErrors, debounce, el, field, figure, getPath, problemList, setOptions, setPath, showErrors } from "./ui.js";

const FIRST = { link: "eth-25g", workload: { requests: 2000, arrivals: { rate_per_s: 10 } } };
const PRESET_PATHS = new Set(["model", "link", "prefill.device", "decode.device", "colocated.device"]);
const METRICS = [["ttft_s", "TTFT"], ["tpot_s", "TPOT"], ["itl_s", "ITL"], ["e2e_s", "E2E"], ["handoff_s", "hand-off"]];
const COLUMNS = [["mean", "mean"], ["p50", "p50"], ["p90", "p90"], ["p95", "p95"], ["p99", "p99"], ["p99_9", "p99.9"], ["max", "max"]];
const STAGES = [
  ["prefill_queue_s", "prefill queue"], ["prefill_s", "prefill"], ["kv_wait_s", "KV wait"],
  ["kv_transfer_s", "KV transfer"], ["decode_queue_s", "decode queue"], ["decode_s", "decode"],
];
const ENERGY = [["static_j", "static"], ["compute_j", "compute"], ["memory_j", "memory"], ["link_j", "link"], ["transit_j", "in transit"], ["convert_j", "conversion"]];
const MAX_SHARE_CHARS = 16_000;
/** How long the editor waits after the last key before the service reads its text. */
const READ_DELAY_MS = 300;
const FORMAT_NAMES = { json: "JSON", toml: "TOML" };
const HOT = "#d9480f";
const CALM = "#4e79a7";
/** `cost.timing`, the measured source's name there, and the serving engine it takes when none is named. */
const TIMING = "cost.timing";
const MEASURED = "aiconfigurator";
const DEFAULT_BACKEND = "vllm";
const MEASURED_KEYS = ["source", "system", "backend", "version", "model"];

/** The scenario as URL-safe base64 of its JSON (UTF-8), and back. */
export function encodeScenario(obj) {
  const bytes = new TextEncoder().encode(JSON.stringify(obj));
  let bin = "";
  for (const b of bytes) bin += String.fromCharCode(b);
  return btoa(bin).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

export function decodeScenario(text) {
  const bin = atob(text.replace(/-/g, "+").replace(/_/g, "/"));
  return JSON.parse(new TextDecoder().decode(Uint8Array.from(bin, (c) => c.charCodeAt(0))));
}

export function mountRunner(root, { catalog, defaults, openapi, timing = { sources: null, error: "not asked" } }) {
  const checker = new SchemaChecker(openapi);
  let scenario = structuredClone(FIRST);
  let format = "json";
  let syntaxError = null;
  // Every change of the scenario or of the editor's text counts one edit; an answer of the service about the
  // text (parse, format) is used only if no edit came after its request: the last answer wins, a stale one never
  // overwrites a newer edit.
  let edits = 0;
  // Readings and writings of the editor's text under way (or waiting for the typing to pause): while any is,
  // the editor's data-reading is "true" and a run first waits for them.
  let pending = 0;
  let readTimer = null;
  let reading = Promise.resolve();

  // ------------------------------------------------------------ the form
  const def = (path) => {
    const v = getPath(defaults, path);
    return v && typeof v === "object" ? v.preset : v;
  };
  const presetOptions = (kind, path) => [["", `default (${def(path)})`], ...Object.entries(catalog[kind]).map(([k, v]) => [k, `${v.name} (${k})`])];
  const enumOptions = (path, values) => [["", `default (${def(path)})`], ...values.map((v) => [v, v])];
  const num = (path, label, hint) => field({ path, label, kind: "text", placeholder: String(def(path) ?? ""), hint });
  const fields = {
    model: field({ path: "model", label: "Model", kind: "select", options: presetOptions("models", "model") }),
    mode: field({ path: "mode", label: "Mode", kind: "select", options: enumOptions("mode", ["disaggregated", "colocated"]) }),
    pDev: field({ path: "prefill.device", label: "Prefill device", kind: "select", options: presetOptions("devices", "prefill.device") }),
    pN: num("prefill.instances", "Prefill instances"),
    dDev: field({ path: "decode.device", label: "Decode device", kind: "select", options: presetOptions("devices", "decode.device") }),
    dN: num("decode.instances", "Decode instances"),
    cDev: field({ path: "colocated.device", label: "Device", kind: "select", options: presetOptions("devices", "colocated.device") }),
    cN: num("colocated.instances", "Instances"),
    link: field({ path: "link", label: "KV link", kind: "select", options: presetOptions("links", "link") }),
    comp: field({ path: "handoff.compression", label: "Compression", kind: "select", options: enumOptions("handoff.compression", Object.keys(catalog.formats)) }),
    stream: field({ path: "handoff.streaming", label: "Streaming", kind: "select", options: enumOptions("handoff.streaming", ["whole", "layer"]) }),
    n: num("workload.requests", "Requests"),
    rate: num("workload.arrivals.rate_per_s", "Arrival rate (req/s)"),
    prompt: num("workload.prompt_tokens.mean", "Mean prompt tokens"),
    output: num("workload.output_tokens.mean", "Mean output tokens"),
    seed: num("workload.seed", "Seed"),
    ttft: num("slo.ttft_s", "TTFT SLO (s)"),
    tpot: num("slo.tpot_s", "TPOT SLO (s)"),
  };
  const steps = timingFields(timing, def);
  const extra = formParts({ catalog, def });
  const disagg = el("div", { class: "grid2" }, fields.pDev, fields.pN, fields.dDev, fields.dN);
  const coloc = el("div", { class: "grid2", hidden: true }, fields.cDev, fields.cN);
  const linkGroup = el("fieldset", { class: "group" }, el("legend", {}, "Link and hand-off"), fields.link, el("div", { class: "grid2" }, fields.comp, fields.stream));
  const form = el("form", { class: "controls", id: "run-form", novalidate: true, "aria-label": "Scenario" },
    el("fieldset", {}, el("legend", {}, "Model and hardware"), el("div", { class: "grid2" }, fields.model, fields.mode), extra.model, disagg, coloc),
    extra.parallel,
    linkGroup,
    el("fieldset", { class: "group" }, el("legend", {}, "Workload"), el("div", { class: "grid2" }, fields.n, fields.rate, fields.prompt, fields.output, fields.seed)),
    el("fieldset", { class: "group" }, el("legend", {}, "Service-level objective"), el("div", { class: "grid2" }, fields.ttft, fields.tpot)),
    extra.speculative,
    steps.group,
  );

  // ------------------------------------------------------------ the editor
  const editor = el("textarea", {
    class: "code", id: "run-editor", spellcheck: "false", autocomplete: "off", "aria-describedby": "run-check run-editor-errors",
    rows: 16,
  });
  editor.dataset.reading = "false";
  const fmtChoice = el("div", { class: "choices", role: "radiogroup", "aria-label": "Editor format" },
    el("label", {}, el("input", { type: "radio", name: "run-format", value: "json", checked: true }), "JSON"),
    el("label", {}, el("input", { type: "radio", name: "run-format", value: "toml" }), "TOML"));
  const check = el("p", { class: "check busy", id: "run-check", "aria-live": "polite" }, "Checking…");
  const editorErrors = el("div", { class: "errors", id: "run-editor-errors", role: "alert", hidden: true });
  const runButton = el("button", { type: "button", class: "button primary", id: "run-button" }, "Run");
  const resetButton = el("button", { type: "button", class: "button", id: "run-reset" }, "Default scenario");
  const runStatus = el("span", { class: "note", id: "run-status", "aria-live": "polite" });

  const results = el("div", { class: "stack", id: "run-results" }, el("div", { class: "card empty" }, "Run a scenario to see its results here."));
  root.append(
    el("div", { class: "intro" },
      el("h1", {}, "Scenario runner"),
      el("p", {}, "Simulate a disaggregated (or colocated) deployment request by request. Set the common fields in the form or any field in the editor; both are checked as you type, against the service's schema and then by the service itself.")),
    el("div", { class: "layout wide-left" },
      el("div", { class: "stack" },
        el("div", { class: "card" }, el("h2", {}, "Scenario"), form),
        el("div", { class: "card" },
          el("div", { class: "editor-head" }, el("label", { for: "run-editor" }, el("strong", {}, "Every field")), fmtChoice),
          editor, check, editorErrors,
          el("div", { class: "actions", style: "margin-top:0.6rem" }, runButton, resetButton, runStatus))),
      results),
  );

  /** The text a form control shows for the scenario's value at `path`. */
  function shown(path) {
    let v = getPath(scenario, path);
    if (PRESET_PATHS.has(path) && v && typeof v === "object") v = v.preset;
    if (LIST_PATHS.has(path) && v !== undefined && v !== null) return showList(v);
    return v === undefined || v === null ? "" : typeof v === "object" ? JSON.stringify(v) : String(v);
  }

  function fillForm() {
    steps.fill(scenario);
    extra.fill(scenario);
    for (const c of form.querySelectorAll("[data-path]")) {
      const text = shown(c.dataset.path);
      if (c.tagName === "SELECT" && text && ![...c.options].some((o) => o.value === text)) {
        c.append(el("option", { value: text }, text));
      }
      c.value = text;
    }
    const colocated = scenario.mode === "colocated";
    disagg.hidden = colocated;
    coloc.hidden = !colocated;
    linkGroup.hidden = colocated;
  }

  function begin() {
    pending += 1;
    editor.dataset.reading = "true";
  }
  function end() {
    pending -= 1;
    if (pending === 0) editor.dataset.reading = "false";
  }

  /** Write the scenario into the editor: JSON here, TOML by the service (kvwire.scenario.to_toml). */
  async function renderEditor() {
    const my = ++edits;
    syntaxError = null;
    if (format !== "toml") {
      editor.value = `${JSON.stringify(scenario, null, 2)}\n`;
      return;
    }
    begin();
    try {
      const { data } = await post("/v1/scenarios/format", { scenario, format: "toml" });
      if (my === edits) editor.value = data.text;
    } catch (e) {
      if (my !== edits) return;
      // TOML cannot hold this scenario (or the service did not answer): show it as JSON, and say why
      format = "json";
      fmtChoice.querySelector('input[value="json"]').checked = true;
      editor.value = `${JSON.stringify(scenario, null, 2)}\n`;
      setCheck("bad", `Shown as JSON: ${e instanceof ApiError ? `TOML cannot hold this scenario (${e.detail})` : `the service did not answer: ${e.message}`}`);
    } finally {
      end();
    }
  }

  /** The editor's syntax error as the page shows it: "TOML: line 3, column 7: Expected ']' …". */
  function syntaxMessage(fmt, e) {
    const name = FORMAT_NAMES[fmt];
    if (!(e instanceof ApiError)) return `${name}: the service did not answer: ${e.message}`;
    const at = e.extra.find((x) => x && x.key === "text" && Number.isInteger(x.line));
    if (at) return `${name}: line ${at.line}, column ${at.column}: ${at.message}`;
    if (e.path === "text" && e.extra.length && e.extra[0].message) return `${name}: ${e.extra[0].message}`;
    return `${name}: ${e.detail}`;
  }

  /** Read the editor's text with the service (as kvwire.load_scenario reads a file), then check it. */
  async function readEditor() {
    const my = edits;
    const fmt = format;
    try {
      const { data } = await post("/v1/scenarios/parse", { text: editor.value, format: fmt });
      if (my !== edits) return; // a newer edit: its own reading follows
      scenario = data.scenario;
      syntaxError = null;
      fillForm();
    } catch (e) {
      if (my !== edits) return;
      syntaxError = syntaxMessage(fmt, e);
    } finally {
      end();
    }
    runCheck();
  }
  function startReading() {
    readTimer = null;
    reading = readEditor();
    return reading;
  }
  /** Wait until the scenario is what the editor says (a pending reading is started at once). */
  async function settle() {
    for (;;) {
      if (readTimer !== null) {
        clearTimeout(readTimer);
        startReading();
      }
      const r = reading;
      await r;
      if (readTimer === null && r === reading) return;
    }
  }

  function readField(c) {
    const raw = c.value.trim();
    if (raw === "") return undefined;
    if (c.tagName === "SELECT") return raw;
    if (c.dataset.list) return readList(raw);
    return /^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$/.test(raw) ? Number(raw) : raw;
  }

  function fieldChanged(c) {
    const path = c.dataset.path;
    const value = readField(c);
    if (path.startsWith(`${TIMING}.`)) {
      // cost.timing is one object: its fields are set together (clearing the source removes all of it)
      steps.set(scenario, path.slice(TIMING.length + 1), value);
      fillForm();
      renderEditor();
      checkLater();
      return;
    }
    const cur = getPath(scenario, path);
    if (setModelFormat(scenario, path, value, def("model")) || setDegree(scenario, path, value)) {
      // model.weights / model.activations on the model (a preset name becoming {"preset": ...}); a pool's
      // parallel degree (its devices_per_instance then derived)
    } else if (PRESET_PATHS.has(path) && cur && typeof cur === "object") setPath(scenario, `${path}.preset`, value);
    else setPath(scenario, path, value);
    if (path === "mode") fillForm();
    else extra.fill(scenario); // what the change implies: a layout's devices, the draft model's field, defaults
    renderEditor();
    checkLater();
  }
  form.addEventListener("input", (e) => {
    const c = e.target.closest("[data-path]");
    if (c) fieldChanged(c);
  });
  // a select chosen without an input event (some browsers and automation fire only change): the same, once
  form.addEventListener("change", (e) => {
    const c = e.target.closest("select[data-path]");
    if (c && c.value !== shown(c.dataset.path)) fieldChanged(c);
  });
  form.addEventListener("submit", (e) => e.preventDefault());
  // speculative decoding on (the documented example, to edit) or off (no `speculative` at all)
  extra.toggle.addEventListener("change", () => {
    setPath(scenario, "speculative", extra.toggle.checked ? structuredClone(SPECULATIVE_DEFAULT) : undefined);
    fillForm();
    renderEditor();
    checkLater();
  });

  editor.addEventListener("input", () => {
    edits += 1;
    if (readTimer === null) begin();
    else clearTimeout(readTimer);
    readTimer = setTimeout(startReading, READ_DELAY_MS);
    checkSeq += 1; // an answer of the service about the text before this edit is stale
    setCheck("busy", "Checking…");
  });
  fmtChoice.addEventListener("change", async (e) => {
    const want = e.target.value;
    begin();
    try {
      await settle();
      if (syntaxError) {
        // keep the text the user is fixing; switch back
        fmtChoice.querySelector(`input[value="${format}"]`).checked = true;
        return;
      }
      format = want;
      renderEditor();
    } finally {
      end();
    }
  });

  // ------------------------------------------------------------ checking as you type
  let checkSeq = 0;
  function setCheck(kind, text) {
    check.className = `check ${kind}`;
    check.textContent = text;
  }
  function showProblems(problems) {
    const left = showErrors(form, problems, extra.alias(scenario));
    editorErrors.replaceChildren(problemList(problems));
    editorErrors.hidden = !problems.length;
    return left;
  }
  async function runCheck() {
    const my = ++checkSeq;
    clearErrors(form);
    editorErrors.hidden = true;
    editor.removeAttribute("aria-invalid");
    if (syntaxError) {
      editor.setAttribute("aria-invalid", "true");
      setCheck("bad", syntaxError);
      return false;
    }
    const problems = checker.check(scenario, "ScenarioBody");
    if (problems.length) {
      editor.setAttribute("aria-invalid", "true");
      setCheck("bad", `${problems.length} problem${problems.length > 1 ? "s" : ""} against the schema`);
      showProblems(problems);
      return false;
    }
    setCheck("busy", "Checking with the service…");
    try {
      const v = (await post("/v1/scenarios/validate", scenario)).data;
      if (my !== checkSeq) return null;
      const c = v.ceilings;
      const ceil = c ? ` · ceiling ${fixed(c.ceiling_req_per_s, 1)} req/s (${c.binding})${c.offered_req_per_s ? `, offered ${fixed(c.offered_req_per_s, 1)} req/s` : ""}` : "";
      setCheck("ok", `✓ Valid: ${int(v.requests)} requests${ceil}`);
      return true;
    } catch (e) {
      if (my !== checkSeq) return null;
      editor.setAttribute("aria-invalid", "true");
      if (!(e instanceof ApiError)) {
        setCheck("bad", `The service did not answer: ${e.message}`);
        return false;
      }
      setCheck("bad", "Refused by the service");
      showProblems(e.problems());
      return false;
    }
  }
  const checkLater = debounce(() => {
    // results of another scenario stay on screen, marked as such, until the next run
    if (root.dataset.runId) results.classList.toggle("stale", JSON.stringify(scenario) !== lastRun);
    return runCheck();
  }, 250);
  let lastRun = null;

  // ------------------------------------------------------------ running
  async function run() {
    await settle();
    if (syntaxError || checker.check(scenario, "ScenarioBody").length) {
      await runCheck();
      return;
    }
    runButton.disabled = true;
    runStatus.textContent = "Running…";
    root.dataset.state = "running";
    try {
      const { data } = await post("/v1/simulations", scenario);
      const share = encodeScenario(scenario);
      if (share.length <= MAX_SHARE_CHARS) history.replaceState(null, "", `#run?s=${share}`);
      await showRun(data);
      runStatus.textContent = `Done: ${int(data.summary.requests.total)} requests simulated in ${fixed(data.summary.run.wall_s, 3)} s.`;
      setCheck("ok", check.textContent.startsWith("✓") ? check.textContent : "✓ Valid");
      clearErrors(form);
      editorErrors.hidden = true;
    } catch (e) {
      root.dataset.state = "error";
      runStatus.textContent = "";
      if (!(e instanceof ApiError)) {
        setCheck("bad", `The service did not answer: ${e.message}`);
        return;
      }
      clearErrors(form);
      setCheck("bad", `Refused (${e.status})`);
      showProblems(e.problems());
    } finally {
      runButton.disabled = false;
    }
  }
  runButton.addEventListener("click", run);
  resetButton.addEventListener("click", () => {
    scenario = {};
    fillForm();
    renderEditor();
    runCheck();
  });

  async function showRun(sim) {
    const base = `/v1/simulations/${sim.id}`;
    const [cdf, report] = await Promise.all([get(`${base}/cdf?points=200`), getText(`${base}/report`)]);
    renderResults(results, sim, cdf, report);
    lastRun = JSON.stringify(scenario);
    results.classList.remove("stale");
    root.dataset.state = "done";
    root.dataset.runId = sim.id;
  }

  // ------------------------------------------------------------ opening a URL
  async function open(params) {
    if (params.get("s")) {
      try {
        scenario = decodeScenario(params.get("s"));
      } catch {
        setCheck("bad", "The link's scenario could not be read");
        return;
      }
      fillForm();
      renderEditor();
      if (await runCheck()) await run();
      return;
    }
    if (params.get("id")) {
      try {
        const sim = await get(`/v1/simulations/${encodeURIComponent(params.get("id"))}`);
        scenario = sim.scenario;
        fillForm();
        renderEditor();
        runCheck();
        await showRun(sim);
        runStatus.textContent = `Stored run ${sim.id}.`;
      } catch (e) {
        runStatus.textContent = e instanceof ApiError ? e.detail : e.message;
      }
      return;
    }
    if (!root.dataset.runId) {
      fillForm();
      renderEditor();
      if (await runCheck()) await run();
    }
  }

  fillForm();
  renderEditor();
  return { open, scenario: () => structuredClone(scenario) };
}

// ------------------------------------------------------------------ results

function renderResults(host, sim, cdf, report) {
  const s = sim.summary;
  const lines = report.split("\n");
  const hotspot = lines.find((l) => l.startsWith("hot-spot:"));
  const near = lines.find((l) => l.startsWith("near capacity"));
  const timingLine = stepTimesLine(sim.scenario, lines);
  const lat = s.latency;
  const slo = s.slo;
  const rule = ttftRule(sim.scenario);
  const factors = s.load?.load_factor || {};
  const top = Object.entries(factors).filter(([, v]) => Number.isFinite(v)).sort((a, b) => b[1] - a[1])[0];
  const goodWindow = slo.goodput_window_s ? ` over the ${fixed(slo.goodput_window_s, 1)} s of measured arrivals` : "";
  const cards = [
    ["ttft-p99", "TTFT p99", fixed(lat.ttft_s.p99 * 1e3, 1), "ms", `SLO ${fixed(slo.ttft_s * 1e3, 0)} ms · ${rule.short}`],
    ["tpot-p99", "TPOT p99", fixed(lat.tpot_s.p99 === null ? null : lat.tpot_s.p99 * 1e3, 1), "ms", `SLO ${fixed(slo.tpot_s * 1e3, 0)} ms`],
    ["slo", "SLO met", pct(slo.attainment), "", `goodput ${fixed(slo.goodput_req_per_s, 2)} req/s${goodWindow}`],
    ["throughput", "Throughput", fixed(s.throughput.req_per_s, 2), "req/s", `${int(s.throughput.output_tokens_per_s)} tokens/s; over the run (${fixed(s.throughput.window_s, 1)} s)`],
    top ? ["load", "Load", pct(top[1]), "", `${top[0]}: offered / ceiling, the highest pool`] : null,
    speculativeFigure(s),
    ["energy", "Energy", fixed(s.energy.j_per_output_token, 3), "J/token", `average ${int(s.energy.avg_power_w)} W`],
  ].filter(Boolean).map(([key, label, v, unit, detail]) => {
    const f = figure(key, label);
    f.set(v, unit, detail);
    if (key === "slo" && slo.attainment >= 0.99) f.node.classList.add("good");
    if (key === "slo" && slo.attainment < 0.9) f.node.classList.add("poor");
    if (key === "ttft-p99") f.node.dataset.firstToken = rule.key;
    if (key === "load" && top[1] >= 1) f.node.classList.add("poor");
    return f.node;
  });

  const table = el("table", { id: "run-percentiles" },
    el("caption", { class: "visually-hidden" }, "Latency percentiles in milliseconds"),
    el("thead", {}, el("tr", {}, el("th", { scope: "col" }, "latency (ms)"), COLUMNS.map(([, h]) => el("th", { scope: "col" }, h)))),
    el("tbody", {}, METRICS.map(([m, name]) => el("tr", { "data-metric": m }, el("th", { scope: "row" }, name),
      COLUMNS.map(([k]) => el("td", {}, lat[m][k] === null ? "–" : fixed(lat[m][k] * 1e3, 1)))))));

  const base = `/v1/simulations/${sim.id}`;
  const head = el("div", { class: "card" },
    el("h2", {}, "Results", el("span", { class: "sub mono" }, sim.id)),
    el("p", { class: "headline", id: "run-headline" }, el("strong", {}, pretty(lines[0].replace(/^kvwire: /, ""))), ` · ${lines[1].replace(/^requests: /, "")}`),
    el("dl", { class: "figures run" }, cards),
    el("p", { class: "note", id: "run-ttft-rule", "data-first-token": rule.key, style: "margin-top:0.6rem" }, rule.long),
    s.load && s.load.overloaded ? el("p", { class: "callout warn", style: "margin-top:0.8rem", id: "run-overload" }, s.load.overload_note) : null,
    hotspot ? el("p", { class: "callout", style: "margin-top:0.8rem", id: "run-hotspot" }, el("strong", {}, "Hot-spot: "), hotspot.replace(/^hot-spot: /, "")) : null,
    near ? el("p", { class: "callout warn", style: "margin-top:0.5rem" }, near) : null,
    timingLine,
    el("div", { class: "actions", style: "margin-top:0.8rem" },
      el("span", { class: "note" }, "Request table:"),
      downloadLink(`${base}/requests?format=csv`, `${sim.id}-requests.csv`, "CSV"),
      downloadLink(`${base}/requests?format=parquet`, `${sim.id}-requests.parquet`, "Parquet"),
      el("span", { class: "note" }, "Percentiles:"),
      downloadLink(`${base}/percentiles?format=csv`, `${sim.id}-percentiles.csv`, "CSV"),
      shareButton()));

  const pctCard = el("div", { class: "card" }, el("h2", {}, "Latency percentiles", el("span", { class: "sub" }, `${int(s.requests.measured)} measured requests (hand-off: every transferred request)`)),
    el("div", { class: "table-wrap" }, table));

  const ttftHost = el("div", { id: "run-cdf-ttft" });
  const tpotHost = el("div", { id: "run-cdf-tpot" });
  const cdfCard = el("div", { class: "row2" }, el("div", { class: "card" }, ttftHost), el("div", { class: "card" }, tpotHost));
  const stageHost = el("div", { id: "run-stages" });
  const utilHost = el("div", { id: "run-utilisation" });
  const loadHost = el("div", { id: "run-load" });
  const energyHost = el("div", { id: "run-energy" });
  const e = s.energy;
  const energyCard = el("div", { class: "card" }, el("h2", {}, "Energy", el("span", { class: "sub" },
    `${fixed(e.j_per_output_token, 3)} J per output token · ${fixed(e.total_j / 1e3, 1)} kJ in total · average ${int(e.avg_power_w)} W`)), energyHost);
  const reportCard = el("div", { class: "card" }, el("details", {}, el("summary", {}, "The report, as kvwire run prints it"), el("pre", { class: "report", id: "run-report" }, report)));
  host.replaceChildren(...[head, instancesCard(sim), pctCard, cdfCard,
    el("div", { class: "row2" }, el("div", { class: "card" }, stageHost), el("div", { class: "card" }, loadHost, utilHost)),
    energyCard, reportCard].filter(Boolean));

  cdfChart(ttftHost, "run-cdf-ttft", "TTFT distribution", cdf.ttft_s, slo.ttft_s);
  cdfChart(tpotHost, "run-cdf-tpot", "TPOT distribution", cdf.tpot_s, slo.tpot_s);
  const hot = s.hotspot && s.hotspot.stage;
  barChart(stageHost, {
    id: "run-stages", title: "Where a request's time goes (mean per stage)",
    rows: STAGES.map(([k, name]) => ({ label: name, strong: k === hot, segments: [{ name, value: s.stages[k] === null ? 0 : s.stages[k] * 1e3, color: k === hot ? HOT : CALM }] })),
    x: { label: "ms per request (a skipped stage counts 0)", format: (v) => fixed(v, 1), tick: compact },
  });
  const loadRows = Object.entries(factors).filter(([, v]) => Number.isFinite(v));
  if (loadRows.length) {
    barChart(loadHost, {
      id: "run-load", title: "Load (offered rate / the pool's ceiling)",
      rows: loadRows.map(([k, v]) => ({ label: k, segments: [{ name: k, value: v, color: v >= 1 ? HOT : CALM }] })),
      x: { label: "offered / ceiling (100%: the pool saturates)", format: (v) => pct(v, 0), max: Math.max(1, ...loadRows.map(([, v]) => v)) },
      total: (r) => pct(r.segments[0].value),
    });
  } else loadHost.replaceChildren();
  const util = Object.entries(s.utilisation).filter(([, v]) => v !== null);
  const poolOf = (k) => k.replace(/-\d+$/, "");
  barChart(utilHost, {
    id: "run-utilisation", title: "Busy share of the run (a step of any batch size counts as busy)",
    rows: util.map(([k, v]) => ({ label: k, segments: [{ name: k, value: v, color: k === s.hotspot?.resource ? HOT : CALM }] })),
    x: { label: "share of the run with a step or transfer running", format: (v) => pct(v, v < 0.1 && v > 0 ? 1 : 0), max: 1 },
    total: (r) => {
      const f = factors[poolOf(r.label)] ?? factors[r.label];
      return `${pct(r.segments[0].value)}${Number.isFinite(f) ? ` · load ${pct(f)}` : ""}`;
    },
  });
  const parts = ENERGY.filter(([k]) => e.breakdown[k]);
  barChart(energyHost, {
    id: "run-energy", title: "",
    rows: [{ label: "energy", segments: parts.map(([k, name], i) => ({ name, value: e.breakdown[k] / 1e3, color: PALETTE[[0, 1, 4, 2, 6, 5][i] ?? i] })) }],
    x: { label: "kJ", format: (v) => fixed(v, 1), tick: compact },
  });
}

// ------------------------------------------------------------------ step times (cost.timing)

/** The "Step times" fieldset: `cost.timing.source` (default, roofline or the measured database, disabled with
 * the install command when the service lacks its package, absent when GET /v1/timing did not answer) and, for
 * the measured source, its system, serving engine (only those the system has) and data version. `fill(s)`
 * shows scenario `s`'s choice; `set(s, key, value)` changes one field of `s.cost.timing`, keeping it one that
 * the measured database offers. */
function timingFields(timing, def) {
  const t = timing.sources;
  const aic = t && t.aiconfigurator;
  const offered = aic && aic.installed ? aic.offered : [];
  const systems = [...new Set(offered.map((r) => r.system))];
  const backendsOf = (system) => [...new Set(offered.filter((r) => !system || r.system === system).map((r) => r.backend))];
  const versionsOf = (system, backend) => (system && offered.find((r) => r.system === system && r.backend === (backend || DEFAULT_BACKEND))?.versions) || [];

  const sourceOptions = [["", `default (${def(`${TIMING}.source`) ?? "roofline"})`], ["roofline", "roofline (kvwire's cost model)"]];
  let hint;
  if (!t) hint = `The service did not say which timing sources it has (${timing.error}): only the roofline is offered.`;
  else if (!aic.installed) hint = `Measured step times need the aiconfigurator-core package on the server: ${aic.install}`;
  else hint = "Measured step times come from NVIDIA's kernel database: a table per pool is built when the scenario is checked (seconds the first time, then cached).";
  if (t) sourceOptions.push([MEASURED, aic.installed ? `measured: aiconfigurator-core ${aic.version}` : "measured: aiconfigurator-core (not installed)"]);
  const source = field({ path: `${TIMING}.source`, label: "Step times from", kind: "select", options: sourceOptions, hint, id: "run-timing-source" });
  const sourceSelect = source.querySelector("select");
  const measuredOption = sourceSelect.querySelector(`option[value="${MEASURED}"]`);
  if (measuredOption && !aic.installed) measuredOption.disabled = true;
  const system = field({ path: `${TIMING}.system`, label: "Measured system", kind: "select", options: [], id: "run-timing-system" });
  const backend = field({ path: `${TIMING}.backend`, label: "Serving engine", kind: "select", options: [], id: "run-timing-backend" });
  const version = field({ path: `${TIMING}.version`, label: "Data version", kind: "select", options: [], id: "run-timing-version" });
  const measured = el("div", { class: "grid2", id: "run-timing-measured", hidden: true }, system, backend, version);
  const group = el("fieldset", { class: "group", id: "run-timing" }, el("legend", {}, "Step times"), source, measured);
  if (t) group.dataset.offered = String(offered.length);

  const current = (s) => {
    const v = getPath(s, TIMING);
    return v && typeof v === "object" && !Array.isArray(v) ? v : null;
  };
  /** The measured system a scenario's devices map to (h100 -> h100_sxm), else H100 SXM, else the first. */
  const guessSystem = (s) => {
    const pool = s.mode === "colocated" ? "colocated" : "prefill";
    let dev = getPath(s, `${pool}.device`) ?? def(`${pool}.device`);
    if (dev && typeof dev === "object") dev = dev.preset;
    const want = [dev, `${dev}_sxm`, "h100_sxm"].find((x) => systems.includes(x));
    return want ?? systems[0];
  };
  const guessBackend = (sys) => {
    const have = backendsOf(sys);
    return have.includes(DEFAULT_BACKEND) ? DEFAULT_BACKEND : have[0];
  };

  function fill(s) {
    const cur = current(s) || {};
    const sys = typeof cur.system === "string" ? cur.system : "";
    const be = typeof cur.backend === "string" ? cur.backend : "";
    const versions = versionsOf(sys, be);
    setOptions(system.querySelector("select"), [["", "each pool's device"], ...systems.map((x) => [x, x])]);
    setOptions(backend.querySelector("select"), [["", `default (${DEFAULT_BACKEND})`], ...backendsOf(sys).map((x) => [x, x])]);
    setOptions(version.querySelector("select"), [["", versions.length ? `newest (${versions[0]})` : "newest"], ...versions.map((x) => [x, x])]);
    measured.hidden = cur.source !== MEASURED;
  }

  function set(s, key, value) {
    if (key === "source" && value === undefined) {
      setPath(s, TIMING, undefined); // the default: no cost.timing at all, never {}
      return;
    }
    if (key === "source" && value !== MEASURED) {
      setPath(s, TIMING, { source: value }); // the roofline takes no other field
      return;
    }
    const cur = current(s) || {};
    // choosing the measured source keeps only what it takes (a calibrated source's file goes)
    const next = key === "source" ? Object.fromEntries(Object.entries(cur).filter(([k]) => MEASURED_KEYS.includes(k))) : { ...cur };
    if (value === undefined) delete next[key];
    else next[key] = value;
    if (next.source === MEASURED && offered.length) {
      // a measured choice the database has: a system and engine named, the engine one the system has, the
      // version one the pair has (an unknown system, typed in the editor, is left for the service to refuse)
      if (key === "source" && next.system === undefined) next.system = guessSystem(s);
      const have = backendsOf(next.system);
      const knownSystem = !next.system || systems.includes(next.system);
      if (knownSystem && (next.backend === undefined ? key === "source" : !have.includes(next.backend))) next.backend = guessBackend(next.system);
      if (next.version !== undefined && next.version !== null && knownSystem && !versionsOf(next.system, next.backend).includes(next.version)) delete next.version;
    }
    setPath(s, TIMING, next);
  }

  return { group, fill, set };
}

/** The line under the results that says where a run's step times came from — the report's `step times:` line
 * (provider and its version, then per pool the system, serving engine, data version, model, layout and the
 * interpolation bound) — when the run's scenario echo has `cost.timing.provenance`; null otherwise. */
export function stepTimesLine(scenario, reportLines) {
  const t = scenario?.cost?.timing;
  const prov = t && t.provenance;
  const line = reportLines.find((l) => l.startsWith("step times: "));
  if (!prov || !line) return null;
  const pools = Object.values(prov.pools || {});
  return el("p", {
    class: "note", id: "run-timing-line", style: "margin-top:0.5rem",
    "data-source": t.source, "data-versions": [...new Set(pools.map((p) => p.version))].join(","),
  }, el("strong", {}, "Step times: "), line.slice("step times: ".length));
}

/** The TTFT rule in force, read from the run's scenario echo (`metrics.first_token`): its key, a short form for
 * the TTFT card and a sentence. */
export function ttftRule(scenario) {
  const key = scenario?.metrics?.first_token ?? "decode";
  if (key === "decode") {
    return { key, short: "first token once decode has the KV",
      long: 'TTFT ends when the decode side has the KV cache (metrics.first_token "decode"): the hand-off is part of it.' };
  }
  return { key, short: "first token out of prefill",
    long: 'TTFT ends at the first token out of prefill (metrics.first_token "prefill", the reference\'s rule): the KV hand-off is not part of it.' };
}

/** The report's topology line with typographic arrows and multiplication signs. */
function pretty(line) {
  return line.replace(/ -> /g, " → ").replace(/(\d) x /g, "$1 × ");
}

function cdfChart(host, id, title, series, sloS) {
  if (!series.count) {
    host.replaceChildren(el("p", { class: "empty" }, `${title}: no request has this latency.`));
    return;
  }
  const points = series.values_s.map((v, i) => [v * 1e3, series.fractions[i]]);
  const max = points[points.length - 1][0];
  const sloMs = sloS * 1e3;
  const sloText = `${fixed(sloMs, Number.isInteger(sloMs) ? 0 : 1)} ms`;
  lineChart(host, {
    id, title: `${title} (${int(series.count)} requests)`,
    x: { label: "ms", format: compact, min: 0 },
    y: { label: "fraction of requests", format: (v) => fixed(v, 1), min: 0, max: 1 },
    series: [{ name: title, points, color: "#3451c7" }],
    vlines: sloMs <= max * 1.25 ? [{ x: sloMs, label: `SLO ${sloText}` }] : [],
    height: 230,
  });
  if (sloMs > max * 1.25) host.querySelector("figcaption").append(el("span", { class: "sub" }, ` · all below the SLO of ${sloText}`));
}

function shareButton() {
  const b = el("button", { type: "button", class: "button small", id: "run-share" }, "Copy link");
  b.addEventListener("click", async () => {
    try {
      await navigator.clipboard.writeText(location.href);
      b.textContent = "Link copied";
    } catch {
      b.textContent = "Copy the address bar";
    }
    setTimeout(() => { b.textContent = "Copy link"; }, 2000);
  });
  return b;
}
