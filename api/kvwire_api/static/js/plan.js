// The Plan tab: the best deployment of a model on a GPU budget (POST /v1/plans, kvwire.plan as a job). A form
// (model, budget rows of device kind and count, SLO, objective, requests per run, optional TP list and modes);
// live progress in configurations (Server-Sent Events), Cancel; then the summary, the frontier chart (every
// evaluated configuration faint, the frontier joined, the best highlighted: click the best or a frontier point
// to run it in the Scenario runner), the best's launch settings, the report and the table of evaluated configurations.

import { ApiError, downloadLink, get, post } from "./api.js";
import { scatterChart } from "./charts.js";
import { active, follow, progressWords, showRefusal } from "./jobs.js";
import { fixed, int } from "./format.js";
import { clearErrors, el, field, setOptions } from "./ui.js";

const URL_BASE = "/v1/plans";
const OBJECTIVES = [
  ["throughput_per_gpu", "Most output tokens/s per GPU"],
  ["min_gpus", "Fewest GPUs for a target rate"],
];
const MODES = [["colocated", "Colocated"], ["disaggregated", "Disaggregated"]];
/** The fields a plan may vary besides the pools' layouts, as the library's words name them (VARIED_SHORT). */
const VARIED_SHORT = { max_decode_batch: "batch", max_num_batched_tokens: "tokens", kv_format: "kv", compression: "hand-off", link: "link" };
const EVALUATED = ["verified", "screened"];

/** A number typed in a field: the number, the text itself when it is not one (the service says why), or
 * undefined when empty. */
function value(input) {
  const t = input.value.trim();
  if (t === "") return undefined;
  const n = Number(t);
  return Number.isFinite(n) ? n : t;
}

/** "1, 2 4" -> [1, 2, 4] (what is not a number is kept as typed, for the service to name). */
function list(text) {
  return text.split(/[\s,]+/).filter(Boolean).map((t) => (Number.isFinite(Number(t)) ? Number(t) : t));
}

/** The fields a plan's rows vary (the library's `varied`): the device when the budget has several kinds,
 * and each field of VARIED_SHORT with more than one value among the rows. */
function variedOf(rows, budget) {
  const out = Object.keys(budget || {}).length > 1 ? ["device"] : [];
  for (const key of Object.keys(VARIED_SHORT)) {
    if (new Set(rows.map((r) => r[key]).filter((v) => v !== null && v !== undefined)).size > 1) out.push(key);
  }
  return out;
}

/** A configuration in a few words, as the library's report writes it ("colocated 2x tp1", "P 1x tp1 / D 1x tp2"). */
export function describe(row, varied = []) {
  const lay = (pool) => {
    let s = `${row[`${pool}_instances`]}x tp${row[`${pool}_tp`]}`;
    for (const k of ["pp", "ep", "dp"]) if (row[`${pool}_${k}`] > 1) s += ` ${k}${row[`${pool}_${k}`]}`;
    if (varied.includes("device") && row[`${pool}_device`]) s += ` ${row[`${pool}_device`]}`;
    return s;
  };
  let text = row.mode === "colocated" ? `colocated ${lay("colocated")}` : `P ${lay("prefill")} / D ${lay("decode")}`;
  for (const key of varied) if (key !== "device" && row[key] !== null && row[key] !== undefined) text += `, ${VARIED_SHORT[key]} ${row[key]}`;
  return text;
}

/** Whether a table row is the plan's best (the same figures: both come from the same row of the plan). */
const isBest = (row, best) => !!best && row.gpus === best.gpus && row.capacity_req_per_s === best.rate_per_s &&
  row.output_tokens_per_s_per_gpu === best.output_tokens_per_s_per_gpu && row.output_tokens_per_s_per_user === best.output_tokens_per_s_per_user;

export function mountPlan(root, { catalog, defaults = {} }) {
  const models = Object.entries(catalog.models || {});
  const devices = Object.keys(catalog.devices || {});
  // ------------------------------------------------------------ the form
  const model = field({ id: "pl-model", path: "model", label: "Model", kind: "select", options: models.map(([k, m]) => [k, `${m.name} (${k})`]) });
  const modelSelect = model.querySelector("select");
  modelSelect.value = catalog.models?.[defaults.model] ? defaults.model : models[0]?.[0] ?? "";

  const budgetRows = el("div", { class: "stack", id: "pl-budget", style: "gap:0.5rem" });
  let rowId = 0;
  const rows = () => [...budgetRows.querySelectorAll("[data-budget-row]")];
  function addDevice(device, n = 8) {
    const id = ++rowId;
    const used = new Set(rows().map((r) => r.querySelector("select").value));
    const kind = device ?? devices.find((d) => !used.has(d)) ?? devices[0];
    const select = el("select", { id: `pl-device-${id}`, "aria-label": `Device kind ${id}`, "data-path": `gpus.${id}.device`, "aria-describedby": `pl-count-${id}-error` });
    setOptions(select, devices.map((d) => [d, catalog.devices[d]?.name ? `${catalog.devices[d].name} (${d})` : d]));
    select.value = kind;
    const count = el("input", { type: "number", id: `pl-count-${id}`, min: 1, step: 1, inputmode: "numeric", value: n, autocomplete: "off",
      "aria-label": `Number of GPUs of device kind ${id}`, "data-path": `gpus.${id}.count`, "aria-describedby": `pl-count-${id}-error` });
    const remove = el("button", { type: "button", class: "button small", "aria-label": `Remove device kind ${id}`, onclick: () => { row.remove(); refreshRemove(); } }, "×");
    const row = el("div", { class: "field", "data-budget-row": id },
      el("div", { style: "display:grid;grid-template-columns:minmax(0,1.4fr) minmax(0,0.8fr) auto;gap:0.4rem" }, select, count, remove),
      el("p", { class: "error", id: `pl-count-${id}-error`, hidden: true, "aria-live": "polite" }));
    budgetRows.append(row);
    refreshRemove();
  }
  function refreshRemove() {
    const all = rows();
    for (const r of all) r.querySelector("button").hidden = all.length < 2;
    addButton.disabled = all.length >= devices.length;
  }
  const addButton = el("button", { type: "button", class: "button small", id: "pl-add-device", onclick: () => addDevice() }, "+ Add a device kind");
  const budget = el("fieldset", { class: "group", id: "pl-gpus" },
    el("legend", {}, "GPU budget"),
    el("p", { class: "note", style: "margin:0" }, "Each device kind and how many; several kinds make heterogeneous pools (a colocated pool is of one kind, prefill and decode may be of two)."),
    budgetRows, el("div", {}, addButton));

  const ttft = field({ id: "pl-ttft", path: "slo.ttft_s", label: "TTFT SLO (s)", kind: "number", min: 0 });
  const tpot = field({ id: "pl-tpot", path: "slo.tpot_s", label: "TPOT SLO (s)", kind: "number", min: 0 });
  const attainment = field({ id: "pl-attainment", path: "slo.attainment", label: "Attainment", kind: "number", min: 0, max: 1, hint: "Share of requests that must meet both." });
  const requests = field({ id: "pl-requests", path: "workload.requests", label: "Requests per run", kind: "number", min: 1, step: 1 });
  const slo = el("fieldset", { class: "group" }, el("legend", {}, "SLO and workload"),
    el("div", { class: "grid2" }, ttft, tpot), el("div", { class: "grid2" }, attainment, requests));
  root.dataset.state = "loading";
  const set = (f, v) => { f.querySelector("input").value = v ?? ""; };
  set(ttft, defaults.slo?.ttft_s ?? 1);
  set(tpot, 0.05);
  set(attainment, 0.9);
  set(requests, 400);

  const objective = field({ id: "pl-objective", path: "objective", label: "Objective", kind: "select", options: OBJECTIVES });
  const rate = field({ id: "pl-rate", path: "rate_per_s", label: "Target rate (req/s)", kind: "number", min: 0, hint: "The fewest GPUs whose capacity reaches it." });
  rate.hidden = true;
  objective.querySelector("select").addEventListener("change", () => { rate.hidden = objective.querySelector("select").value !== "min_gpus"; });

  const tp = field({ id: "pl-tp", path: "space.tp", label: "Tensor-parallel sizes", kind: "text", placeholder: "every size that fits", hint: "Comma-separated, e.g. 1, 2, 4." });
  const modes = el("div", { class: "field", "data-field": "space.mode" },
    el("span", { class: "label", id: "pl-modes-label" }, "Modes"),
    el("div", { class: "choices", role: "group", "aria-labelledby": "pl-modes-label" },
      MODES.map(([v, t], i) => el("label", {}, el("input", { type: "checkbox", id: `pl-mode-${v}`, value: v, checked: true, "data-path": i ? `space.mode.${v}` : "space.mode", "aria-describedby": "pl-mode-colocated-error" }), t))),
    el("p", { class: "error", id: "pl-mode-colocated-error", hidden: true, "aria-live": "polite" }));
  const space = el("fieldset", { class: "group" }, el("legend", {}, "Search space (optional)"), tp, modes);

  const general = el("div", { class: "errors", role: "alert", hidden: true, id: "pl-errors" });
  const start = el("button", { type: "button", class: "button primary", id: "pl-start" }, "Plan");
  const pending = el("span", { class: "note", id: "pl-pending", "aria-live": "polite" });
  const form = el("form", { class: "card controls", id: "pl-form", novalidate: true, "aria-label": "New plan" },
    el("h2", {}, "New plan"), model, budget, slo, el("fieldset", { class: "group" }, el("legend", {}, "Objective"), el("div", { class: "grid2" }, objective, rate)),
    space, general, el("div", { class: "actions" }, start, pending));
  form.addEventListener("submit", (e) => e.preventDefault());

  const jobView = el("div", { class: "card", id: "pl-job" }, el("p", { class: "empty" }, "Plan a deployment: its progress and its frontier appear here."));
  root.append(
    el("div", { class: "intro" },
      el("h1", {}, "Plan a deployment"),
      el("p", {}, "Every configuration a GPU budget holds (colocated or disaggregated, each pool's parallelism and instance count), each searched for its capacity at the SLO: the frontier of throughput per GPU against speed per user, the best configuration and how to launch it.")),
    el("div", { class: "layout wide-left" }, form, el("div", { class: "stack" }, jobView)),
  );
  addDevice(devices.includes("h100") ? "h100" : devices[0], 8);
  root.dataset.state = "ready";

  function definition() {
    const gpus = {};
    for (const r of rows()) gpus[r.querySelector("select").value] = value(r.querySelector("input"));
    const body = { model: modelSelect.value, gpus };
    const sloBody = {};
    for (const [f, key] of [[ttft, "ttft_s"], [tpot, "tpot_s"], [attainment, "attainment"]]) {
      const v = value(f.querySelector("input"));
      if (v !== undefined) sloBody[key] = v;
    }
    if (Object.keys(sloBody).length) body.slo = sloBody;
    const n = value(requests.querySelector("input"));
    if (n !== undefined) body.workload = { requests: n };
    body.objective = objective.querySelector("select").value;
    if (body.objective === "min_gpus") body.rate_per_s = value(rate.querySelector("input")) ?? null;
    const spaceBody = {};
    const tps = tp.querySelector("input").value.trim();
    if (tps) spaceBody.tp = list(tps);
    const chosen = MODES.map(([v]) => v).filter((v) => form.querySelector(`#pl-mode-${v}`).checked);
    if (chosen.length < MODES.length) spaceBody.mode = chosen;
    if (Object.keys(spaceBody).length) body.space = spaceBody;
    return body;
  }

  /** The control a problem belongs to: `gpus` goes to the count of the device kind its message names (else the
   * first), `space.mode...` to the modes; every other path to the field with that path. */
  function place(problem) {
    const p = problem.path || "";
    if (p === "gpus" || p.startsWith("gpus.")) {
      const all = rows();
      const named = all.find((r) => new RegExp(`\\b${r.querySelector("select").value}\\b`).test(problem.message)) || all[0];
      return named ? { ...problem, path: named.querySelector("input").dataset.path } : problem;
    }
    if (p.startsWith("space.mode")) return { ...problem, path: "space.mode" };
    return problem;
  }

  start.addEventListener("click", async () => {
    clearErrors(form);
    general.hidden = true;
    start.disabled = true;
    pending.textContent = "Checking every configuration of the budget…";
    try {
      const { data } = await post(URL_BASE, definition());
      location.hash = `#plan?job=${data.id}`;
    } catch (e) {
      showRefusal(e, form, general, place);
    } finally {
      start.disabled = false;
      pending.textContent = "";
    }
  });

  // ------------------------------------------------------------ one plan, live
  let following = null;
  async function openJob(id) {
    if (following) following.abort();
    const ctl = new AbortController();
    following = ctl;
    const url = `${URL_BASE}/${id}`;
    const badge = el("span", { class: "badge", id: "pl-status" });
    const bar = el("progress", { id: "pl-progress", max: 1, value: 0, "aria-label": "Configurations decided" });
    const progressText = el("span", { id: "pl-progress-text" });
    const actions = el("div", { class: "actions" });
    const body = el("div", { class: "stack", id: "pl-results" });
    jobView.replaceChildren(
      el("h2", {}, "Plan", el("span", { class: "sub mono" }, id), badge),
      el("div", { class: "progress-line", "aria-live": "polite" }, bar, progressText),
      actions, body);
    jobView.dataset.job = id;
    jobView.dataset.status = "";
    const show = (job) => {
      badge.className = `badge ${job.status}`;
      badge.textContent = job.status;
      jobView.dataset.status = job.status;
      bar.max = Math.max(1, job.total ?? 0);
      bar.value = job.done;
      progressText.textContent = progressWords(job, job.unit || "configurations");
      actions.replaceChildren(downloadLink(`${url}/results?format=csv`, `plan-${id}.csv`, "Table CSV"));
      if (active(job)) {
        actions.append(el("button", { type: "button", class: "button small danger", id: "pl-cancel", onclick: () => post(`${url}/cancel`).catch(() => {}) }, "Cancel"));
      }
    };
    try {
      const last = await follow(url, ctl.signal, (doc) => show(doc));
      if (ctl.signal.aborted || !last) return;
      if (last.status !== "done" || !last.result) {
        body.replaceChildren(el("p", { class: "callout warn", id: "pl-ended" }, last.error?.detail || `The plan ended ${last.status}.`));
        return;
      }
      const table = await get(`${url}/results?format=json`);
      if (ctl.signal.aborted) return;
      renderPlan(body, last.result, table);
      jobView.dataset.rendered = id;
    } catch (e) {
      if (!ctl.signal.aborted) body.replaceChildren(el("p", { class: "empty" }, e instanceof ApiError ? e.detail : e.message));
    }
  }

  return {
    open(params) {
      const id = params.get("job");
      if (id && (jobView.dataset.job !== id || !following)) openJob(id);
    },
  };
}

// ------------------------------------------------------------------ a finished plan

/** POST a configuration's scenario (the best's, or a frontier row's) to /v1/simulations and open the run in the
 * Scenario runner. */
async function runScenario(scenario, status, what = "the best configuration") {
  status.textContent = `Running ${what}…`;
  try {
    const { data } = await post("/v1/simulations", scenario);
    status.textContent = "";
    location.hash = `#run?id=${data.id}`;
  } catch (e) {
    status.textContent = `The run was refused: ${e instanceof ApiError ? e.detail : e.message}`;
  }
}

function renderPlan(host, result, table) {
  const best = result.best;
  const evaluated = table.filter((r) => EVALUATED.includes(r.status));
  const varied = variedOf(table, result.gpus);
  const words = (r) => describe(r, varied);
  const budget = Object.entries(result.gpus || {}).map(([d, n]) => `${int(n)} × ${d}`).join(" + ");
  const runStatus = el("p", { class: "note", id: "pl-run-status", "aria-live": "polite" });
  const run = () => runScenario(best.scenario, runStatus);
  const summary = el("p", { class: "note", id: "pl-summary" },
    `${result.model} on ${budget}: ${int(result.considered)} configurations considered, ${int(result.refused)} refused by kvwire, ` +
    `${int(result.pruned)} pruned by the ceilings, ${int(evaluated.length)} evaluated; ${int(result.simulations)} simulations · timing: ${result.timing}`);
  const bestLine = best
    ? el("div", { class: "callout", id: "pl-best" },
      el("strong", {}, "Best: "),
      `${best.configuration} on ${int(best.gpus)} GPUs at ${fixed(best.rate_per_s, 2)} req/s: ${fixed(best.output_tokens_per_s_per_gpu, 1)} output tokens/s per GPU, ${fixed(best.output_tokens_per_s_per_user, 1)} per user `,
      el("button", { type: "button", class: "button small", id: "pl-run-best", onclick: run }, "Run it"))
    : el("p", { class: "callout warn", id: "pl-best" }, "No configuration meets the SLO (or the target rate) on this budget.");
  const chart = el("div", { id: "pl-chart" });
  const launchText = [];
  for (const [pool, l] of Object.entries(result.launch || {})) {
    if (pool === "note" || !l || typeof l !== "object") continue;
    launchText.push(`# ${pool} × ${l.instances}`);
    for (const [engine, cmd] of Object.entries(l)) if (engine !== "instances") launchText.push(`# ${engine}`, cmd);
    launchText.push("");
  }
  host.replaceChildren(
    summary, bestLine, runStatus, chart,
    launchText.length ? el("div", {}, el("h3", {}, "Launch settings of the best"),
      result.launch?.note ? el("p", { class: "note" }, result.launch.note) : "",
      el("pre", { class: "report", id: "pl-launch" }, launchText.join("\n").trim())) : "",
    el("details", { id: "pl-report" }, el("summary", {}, "The plan's report"), el("pre", { class: "report" }, result.report || "")),
    planTable(evaluated, result, words, run));
  const point = (r, key) => ({ x: r.output_tokens_per_s_per_user, y: r.output_tokens_per_s_per_gpu, key, label: `${words(r)} (${int(r.gpus)} GPUs)` });
  // each frontier row keeps its index into result.frontier: result.frontier_scenarios[k] is row k's scenario
  const scenarios = result.frontier_scenarios || [];
  const frontier = (result.frontier || []).map((r, k) => ({ r, k }))
    .sort((a, b) => a.r.output_tokens_per_s_per_user - b.r.output_tokens_per_s_per_user);
  const bestRow = best && (frontier.map((f) => f.r).find((r) => isBest(r, best)) || evaluated.find((r) => isBest(r, best)));
  const frontierIndex = (p) => (String(p.key).startsWith("frontier-") ? Number(String(p.key).slice("frontier-".length)) : -1);
  scatterChart(chart, {
    id: "pl-frontier",
    title: "Throughput per GPU against speed per user, at each configuration's capacity",
    x: { label: "output tokens/s per user", format: (v) => fixed(v, v < 10 ? 1 : 0) },
    y: { label: "output tokens/s per GPU", format: (v) => fixed(v, 0), zero: true },
    series: [
      { name: "evaluated", faint: true, color: "#8a93a5", points: evaluated.map((r) => point(r)) },
      { name: "frontier", joined: true, color: "#3451c7", marker: "circle", dash: null, points: frontier.map(({ r, k }) => point(r, `frontier-${k}`)) },
      ...(bestRow ? [{ name: "best", strong: true, color: "#d9480f", marker: "star", dash: null, points: [point(bestRow, "best")] }] : []),
    ],
    // the best and every frontier row come with their scenario at capacity: a click runs it
    pickable: (p) => p.key === "best" || scenarios[frontierIndex(p)] !== undefined,
    onPick: (p) => (p.key === "best" ? run()
      : runScenario(scenarios[frontierIndex(p)], runStatus, words(result.frontier[frontierIndex(p)]))),
  });
}

function planTable(rows, result, words, run) {
  const sorted = [...rows].sort((a, b) => (b.output_tokens_per_s_per_gpu ?? -1) - (a.output_tokens_per_s_per_gpu ?? -1));
  const onFrontier = (r) => (result.frontier || []).some((f) => words(f) === words(r) && f.gpus === r.gpus);
  const ms = (s) => (s === null || s === undefined ? "–" : fixed(s * 1e3, 1));
  const cols = [["configuration", 1], ["GPUs"], ["req/s"], ["tok/s/GPU"], ["tok/s/user"], ["TTFT p99 ms"], ["TPOT p99 ms"], ["binding", 1], ["status", 1], ["", 1]];
  return el("div", {},
    el("h3", {}, "Evaluated configurations", el("span", { class: "sub" }, ` ${int(rows.length)}; the best's run opens in the Scenario runner`)),
    el("div", { class: "table-wrap" }, el("table", { id: "pl-table" },
      el("thead", {}, el("tr", {}, cols.map(([h, left]) => el("th", { scope: "col", class: left ? "left" : "" }, h)))),
      el("tbody", {}, sorted.map((r) => {
        const isTheBest = isBest(r, result.best);
        return el("tr", { "data-status": r.status, "data-frontier": onFrontier(r) ? "true" : null, "data-best": isTheBest ? "true" : null },
          el("td", { class: "left" }, words(r)),
          el("td", {}, int(r.gpus)),
          el("td", {}, r.capacity_req_per_s === null ? "–" : fixed(r.capacity_req_per_s, 2)),
          el("td", {}, r.output_tokens_per_s_per_gpu === null ? "–" : fixed(r.output_tokens_per_s_per_gpu, 1)),
          el("td", {}, r.output_tokens_per_s_per_user === null ? "–" : fixed(r.output_tokens_per_s_per_user, 1)),
          el("td", {}, ms(r.ttft_p99_s)),
          el("td", {}, ms(r.tpot_p99_s)),
          el("td", { class: "left" }, r.binding ?? "–"),
          el("td", { class: "left" }, `${r.status}${isTheBest ? " · best" : onFrontier(r) ? " · frontier" : ""}`),
          el("td", { class: "left" }, isTheBest ? el("button", { type: "button", class: "button small", "aria-label": "Run the best configuration", onclick: run }, "run") : ""));
      })))));
}
