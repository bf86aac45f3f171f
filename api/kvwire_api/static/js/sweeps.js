// The sweep dashboard: start a sweep, a capacity search or a best split from a base scenario; follow it live
// (Server-Sent Events from /events); chart SLO attainment and p99 TTFT/TPOT against the swept field per
// configuration, the capacity search's points, the capacity per prefill:decode split; list the stored runs and
// jobs; download results.

import { ApiError, del, downloadLink, get, post } from "./api.js";
import { barChart, lineChart } from "./charts.js";
import { active, follow, progressWords, showRefusal } from "./jobs.js";
import { interval, valueKey, valueOrder } from "./stats.js";
import { compact, fixed, int, pct, when } from "./format.js";
import { clearErrors, el, field, figure } from "./ui.js";

const KINDS = {
  sweep: { path: "/v1/sweeps", name: "Sweep" },
  capacity: { path: "/v1/capacity", name: "Capacity search" },
  split: { path: "/v1/splits", name: "Best split" },
};
const RATE = "workload.arrivals.rate_per_s";
const COMMON_PATHS = [
  RATE, "link", "handoff.compression", "handoff.streaming", "prefill.instances", "decode.instances", "prefill.device",
  "decode.device", "model", "workload.prompt_tokens.mean", "workload.output_tokens.mean", "workload.seed", "slo.ttft_s",
  "slo.tpot_s", "link.channels", "scheduler.max_decode_batch", "scheduler.max_prefill_tokens",
];
const METRICS = [
  ["slo.attainment", "SLO attainment", (v) => v, (v) => pct(v, 0), { min: 0, max: 1 }],
  ["latency.ttft_s.p99", "p99 TTFT (ms)", (v) => v * 1e3, compact, { zero: true }],
  ["latency.tpot_s.p99", "p99 TPOT (ms)", (v) => v * 1e3, compact, { zero: true }],
];
const FIRST_GRID = [[RATE, "4, 8, 12, 16"], ["link", "ib-ndr, eth-25g"]];

/** A value typed in a grid cell: JSON when it reads as JSON (numbers, true, {"preset": ...}), else a string. */
function cell(text) {
  const t = text.trim();
  try {
    return JSON.parse(t);
  } catch {
    return t;
  }
}

/** Split "4, 8, {"a": 1, "b": 2}" at the top-level commas. */
function splitValues(text) {
  const out = [];
  let depth = 0;
  let quote = false;
  let cur = "";
  for (const ch of text) {
    if (ch === '"') quote = !quote;
    if (!quote && (ch === "{" || ch === "[")) depth++;
    if (!quote && (ch === "}" || ch === "]")) depth--;
    if (ch === "," && !depth && !quote) {
      out.push(cur);
      cur = "";
    } else cur += ch;
  }
  out.push(cur);
  return out.map((s) => s.trim()).filter((s) => s !== "").map(cell);
}

export function mountSweeps(root, { runnerScenario, catalog = {} }) {
  /** The TTFT rule of the sweeps this page started (job id -> the base's metrics.first_token). */
  const rules = new Map();
  // ------------------------------------------------------------ the form
  const kindChoice = el("div", { class: "choices", role: "radiogroup", "aria-label": "Job kind" },
    Object.entries(KINDS).map(([k, v], i) => el("label", {}, el("input", { type: "radio", name: "sw-kind", value: k, checked: i === 0 }), v.name)));
  const base = el("textarea", { class: "code short", id: "sw-base", rows: 7, spellcheck: "false", "data-path": "base", "aria-describedby": "sw-base-error" });
  base.value = `${JSON.stringify({ workload: { requests: 1000 } }, null, 2)}\n`;
  const baseField = el("div", { class: "field" },
    el("div", { class: "editor-head" }, el("label", { for: "sw-base", id: "sw-base-label" }, "Base scenario (JSON)"),
      el("button", { type: "button", class: "button small", id: "sw-from-runner" }, "Use the runner's scenario")),
    base, el("p", { class: "error", id: "sw-base-error", hidden: true, "aria-live": "polite" }));

  const gridRows = el("div", { class: "stack", id: "sw-grid", style: "gap:0.5rem" });
  const datalist = el("datalist", { id: "sw-paths" }, COMMON_PATHS.map((p) => el("option", { value: p })));
  let rowId = 0;
  function addRow(path = "", values = "") {
    const id = ++rowId;
    const pathInput = el("input", { type: "text", id: `sw-grid-path-${id}`, list: "sw-paths", value: path, "aria-label": `Swept field ${id}`, placeholder: "field path", "data-role": "path" });
    const valuesInput = el("input", { type: "text", id: `sw-grid-values-${id}`, value: values, "aria-label": `Values of swept field ${id}`, placeholder: "values, comma-separated", "data-path": `grid.${path}`, "aria-describedby": `sw-grid-values-${id}-error` });
    pathInput.addEventListener("input", () => { valuesInput.dataset.path = `grid.${pathInput.value.trim()}`; });
    const row = el("div", { class: "field", "data-grid-row": id },
      el("div", { style: "display:grid;grid-template-columns:minmax(0,1.1fr) minmax(0,1fr) auto;gap:0.4rem" }, pathInput, valuesInput,
        el("button", { type: "button", class: "button small", "aria-label": `Remove swept field ${id}`, onclick: () => row.remove() }, "×")),
      el("p", { class: "error", id: `sw-grid-values-${id}-error`, hidden: true, "aria-live": "polite" }));
    gridRows.append(row);
  }
  for (const [p, v] of FIRST_GRID) addRow(p, v);
  const replicates = field({ id: "sw-replicates", path: "replicates", label: "Replicates (seeds per point)", kind: "text", placeholder: "1" });
  const sweepPart = el("div", { class: "stack", "data-kind": "sweep", style: "gap:0.6rem" },
    el("div", { class: "field" }, el("span", { class: "label" }, "Grid: every combination of these values"), gridRows,
      el("div", {}, el("button", { type: "button", class: "button small", id: "sw-add", onclick: () => addRow() }, "+ Add a field"))),
    datalist, replicates);

  const target = field({ id: "sw-target", path: "slo_attainment", label: "SLO attainment target", kind: "text", placeholder: "0.9" });
  const relTol = field({ id: "sw-rel-tol", path: "rel_tol", label: "Relative tolerance", kind: "text", placeholder: "0.02" });
  const searchField = field({ id: "sw-field", path: "field", label: "Searched field", kind: "text", placeholder: RATE, hint: "Another field needs bounds." });
  const low = field({ id: "sw-low", path: "bounds", label: "Bounds: low", kind: "text", placeholder: "from the ceilings" });
  const high = field({ id: "sw-high", path: "bounds", label: "high", kind: "text", placeholder: "" });
  const total = field({ id: "sw-total", path: "total_instances", label: "Instances to split", kind: "text", placeholder: "4" });
  total.querySelector("input").value = "4";
  const searchPart = el("div", { class: "stack", "data-kind": "capacity split", style: "gap:0.6rem", hidden: true },
    el("div", { class: "grid2" }, total, target),
    el("div", { class: "grid2" }, relTol, searchField),
    el("div", { class: "grid2" }, low, high));

  const general = el("div", { class: "errors", role: "alert", hidden: true, id: "sw-errors" });
  const start = el("button", { type: "button", class: "button primary", id: "sw-start" }, "Start");
  const form = el("form", { class: "card controls", id: "sw-form", novalidate: true, "aria-label": "New job" },
    el("h2", {}, "New job"), kindChoice, baseField, sweepPart, searchPart, general, el("div", { class: "actions" }, start));

  const jobView = el("div", { class: "card", id: "sw-job" }, el("p", { class: "empty" }, "Start a job, or open one from the list below."));
  const history = el("div", { class: "card", id: "sw-history" });
  root.append(
    el("div", { class: "intro" },
      el("h1", {}, "Sweeps and capacity"),
      el("p", {}, "Run a scenario over a grid of values, find the highest load that still meets the SLO, or the best prefill:decode split. Jobs run on the service and survive its restarts; progress streams live.")),
    el("div", { class: "layout wide-left" }, form, el("div", { class: "stack" }, jobView, history)),
  );

  const kind = () => form.querySelector('input[name="sw-kind"]:checked').value;
  function showKind() {
    const k = kind();
    sweepPart.hidden = k !== "sweep";
    searchPart.hidden = k === "sweep";
    total.hidden = k !== "split";
    base.dataset.path = k === "sweep" ? "base" : "scenario";
    form.querySelector("#sw-base-label").textContent = k === "sweep" ? "Base scenario (JSON)" : "Scenario (JSON)";
    start.textContent = `Start the ${KINDS[k].name.toLowerCase()}`;
  }
  kindChoice.addEventListener("change", showKind);
  showKind();
  form.querySelector("#sw-from-runner").addEventListener("click", () => {
    base.value = `${JSON.stringify(runnerScenario(), null, 2)}\n`;
  });
  form.addEventListener("submit", (e) => e.preventDefault());

  const text = (id) => form.querySelector(`#${id}`).value.trim();
  const number = (id) => (text(id) === "" ? undefined : cell(text(id)));

  function definition() {
    let scenario;
    try {
      scenario = JSON.parse(base.value || "{}");
    } catch (e) {
      throw new ApiError(400, { detail: `JSON: ${e.message}`, path: base.dataset.path });
    }
    const k = kind();
    if (k === "sweep") {
      const grid = {};
      for (const row of gridRows.querySelectorAll("[data-grid-row]")) {
        const p = row.querySelector('[data-role="path"]').value.trim();
        const v = row.querySelector("[data-path]").value;
        if (p) grid[p] = splitValues(v);
      }
      const body = { base: scenario, grid };
      if (number("sw-replicates") !== undefined) body.replicates = number("sw-replicates");
      return body;
    }
    const body = { scenario };
    for (const [id, key] of [["sw-target", "slo_attainment"], ["sw-rel-tol", "rel_tol"], ["sw-field", "field"]]) {
      if (number(id) !== undefined) body[key] = key === "field" ? text(id) : number(id);
    }
    if (number("sw-low") !== undefined || number("sw-high") !== undefined) body.bounds = [number("sw-low"), number("sw-high")];
    if (k === "split") body.total_instances = number("sw-total");
    return body;
  }

  /** The control an error of this job kind belongs to: a grid row's values, a named argument, or the
   * scenario editor (every other path is a path inside the scenario). */
  function place(problem) {
    const p = problem.path || "";
    const rows = [...gridRows.querySelectorAll("[data-path]")];
    const row = rows.find((r) => r.dataset.path === `grid.${p}` || r.dataset.path === p);
    if (row) return { ...problem, path: row.dataset.path };
    if (["replicates", "slo_attainment", "rel_tol", "field", "bounds", "total_instances"].includes(p) || p === "") return problem;
    const prefix = base.dataset.path;
    return { ...problem, path: p.startsWith(`${prefix}.`) || p === prefix ? p : `${prefix}.${p}` };
  }

  start.addEventListener("click", async () => {
    clearErrors(form);
    base.removeAttribute("aria-invalid");
    general.hidden = true;
    const k = kind();
    start.disabled = true;
    try {
      const body = definition();
      const { data } = await post(KINDS[k].path, body);
      const rule = body.base?.metrics?.first_token ?? body.base?.["metrics.first_token"];
      if (typeof rule === "string") rules.set(data.id, rule);
      location.hash = `#sweeps?job=${k}/${data.id}`;
    } catch (e) {
      showRefusal(e, form, general, place);
    } finally {
      start.disabled = false;
    }
  });

  // ------------------------------------------------------------ one job, live
  let following = null;
  async function openJob(k, id) {
    if (following) following.abort();
    const ctl = new AbortController();
    following = ctl;
    const info = KINDS[k];
    if (!info) return;
    const url = `${info.path}/${id}`;
    const badge = el("span", { class: "badge", id: "sw-status" });
    const bar = el("progress", { id: "sw-progress", max: 1, value: 0, "aria-label": "Progress" });
    const progressText = el("span", { id: "sw-progress-text" });
    const where = el("span", { id: "sw-where", class: "sub" });
    const actions = el("div", { class: "actions" });
    const body = el("div", { class: "stack", id: "sw-results" });
    jobView.replaceChildren(
      el("h2", {}, `${info.name}`, el("span", { class: "sub mono" }, id), badge),
      el("div", { class: "progress-line", "aria-live": "polite" }, bar, progressText, where),
      actions, body);
    jobView.dataset.job = `${k}/${id}`;
    jobView.dataset.progressEvents = "0";
    jobView.dataset.progressSeen = "";
    let lastDraw = 0;
    let drawn = null;
    const draw = async (job, force) => {
      const now = performance.now();
      if (!force && now - lastDraw < 1200) return;
      lastDraw = now;
      drawn = job.status;
      try {
        const rows = await get(`${url}/results?format=json`);
        if (ctl.signal.aborted) return;
        renderJob(body, k, job, rows, { links: catalog.links || {}, firstToken: rules.get(id) });
      } catch (e) {
        if (!ctl.signal.aborted) body.replaceChildren(el("p", { class: "empty" }, e.message));
      }
    };
    const show = (job) => {
      badge.className = `badge ${job.status}`;
      badge.textContent = job.status;
      jobView.dataset.status = job.status;
      const totalN = job.total ?? 0;
      bar.max = Math.max(1, totalN);
      bar.value = job.done;
      jobView.dataset.progressSeen += `${jobView.dataset.progressSeen ? "," : ""}${job.done}/${job.total ?? ""}`;
      const unit = k === "split" && job.status !== "done" ? "splits" : k === "sweep" ? "points" : "simulations";
      progressText.textContent = progressWords(job, unit);
      // where the service runs it: its own threads, or the Dask cluster it was started with (--dask)
      const ex = job.executor;
      where.textContent = ex && ex.kind === "dask" ? ` · on cluster ${ex.scheduler}` : " · local threads";
      where.dataset.executor = ex ? ex.kind : "threads";
      if (job.error) body.prepend(el("p", { class: "callout warn" }, job.error.detail));
      actions.replaceChildren(
        downloadLink(`${url}/results?format=csv`, `${k}-${id}.csv`, "Results CSV"),
        downloadLink(`${url}/results?format=parquet`, `${k}-${id}.parquet`, "Parquet"),
      );
      if (active(job)) {
        actions.append(el("button", { type: "button", class: "button small danger", onclick: () => post(`${url}/cancel`).catch(() => {}) }, "Cancel"));
      }
    };
    try {
      await follow(url, ctl.signal, async (doc, final, streamed) => {
        if (streamed) jobView.dataset.progressEvents = String(Number(jobView.dataset.progressEvents) + 1);
        show(doc);
        if (!streamed) await draw(doc, true);
        else if (final || k === "sweep") await draw(doc, final);
        if (final && streamed) loadHistory();
      });
    } catch (e) {
      if (ctl.signal.aborted) return;
      body.replaceChildren(el("p", { class: "empty" }, e instanceof ApiError ? e.detail : e.message));
    }
    if (drawn === null) await draw({ status: jobView.dataset.status }, true);
  }

  // ------------------------------------------------------------ the history
  async function loadHistory() {
    let jobs;
    let runs;
    try {
      const lists = await Promise.all(Object.values(KINDS).map((k) => get(`${k.path}`)));
      jobs = lists.flat().sort((a, b) => b.created_s - a.created_s);
      runs = await get("/v1/simulations?limit=25");
    } catch (e) {
      history.replaceChildren(el("p", { class: "empty" }, `The lists could not be read: ${e.message}`));
      return;
    }
    const jobRows = jobs.map((j) => el("tr", { "data-job": `${j.kind}/${j.id}` },
      el("td", { class: "left" }, KINDS[j.kind].name),
      el("td", { class: "left" }, el("a", { href: `#sweeps?job=${j.kind}/${j.id}`, class: "mono" }, j.id.slice(0, 8))),
      el("td", { class: "left" }, el("span", { class: `badge ${j.status}` }, j.status)),
      el("td", {}, `${int(j.done)} / ${j.total === null ? "?" : int(j.total)}`),
      el("td", {}, when(j.created_s)),
      el("td", { class: "left" }, el("div", { class: "actions" },
        downloadLink(`${KINDS[j.kind].path}/${j.id}/results?format=csv`, `${j.kind}-${j.id}.csv`, "CSV"),
        el("button", { type: "button", class: "button small danger", "aria-label": `${active(j) ? "Cancel" : "Delete"} job ${j.id}`, onclick: async () => {
          if (!active(j) && !window.confirm(`Delete the ${KINDS[j.kind].name.toLowerCase()} ${j.id.slice(0, 8)} and its results?`)) return;
          try {
            if (active(j)) await post(`${KINDS[j.kind].path}/${j.id}/cancel`);
            else await del(`${KINDS[j.kind].path}/${j.id}`);
          } finally {
            loadHistory();
          }
        } }, active(j) ? "Cancel" : "Delete")))));
    const runRows = runs.map((r) => el("tr", { "data-run": r.id },
      el("td", { class: "left" }, el("a", { href: `#run?id=${r.id}`, class: "mono" }, r.id.slice(0, 8))),
      el("td", { class: "left" }, [r.model, r.mode === "colocated" ? "colocated" : r.link].filter(Boolean).join(" · ")),
      el("td", {}, r.rate_per_s === null ? "trace" : fixed(r.rate_per_s, 1)),
      el("td", {}, int(r.requests)),
      el("td", {}, r.ttft_p99_s === null ? "–" : fixed(r.ttft_p99_s * 1e3, 1)),
      el("td", {}, pct(r.slo_attainment)),
      el("td", {}, when(r.created_s)),
      el("td", { class: "left" }, el("div", { class: "actions" },
        downloadLink(`/v1/simulations/${r.id}/requests?format=csv`, `${r.id}-requests.csv`, "CSV"),
        downloadLink(`/v1/simulations/${r.id}/requests?format=parquet`, `${r.id}-requests.parquet`, "Parquet")))));
    history.replaceChildren(
      el("h2", {}, "Jobs", el("span", { class: "sub" }, `${jobs.length} stored`)),
      jobs.length ? el("div", { class: "table-wrap" }, el("table", { id: "sw-jobs" },
        el("thead", {}, el("tr", {}, [["kind"], ["id"], ["status"], ["points", 1], ["created", 1], ["results"]].map(([h, right]) => el("th", { scope: "col", class: right ? "" : "left" }, h)))),
        el("tbody", {}, jobRows))) : el("p", { class: "empty" }, "No jobs yet."),
      el("h2", { style: "margin-top:1rem" }, "Simulations", el("span", { class: "sub" }, `the ${runs.length} newest stored runs`)),
      runs.length ? el("div", { class: "table-wrap" }, el("table", { id: "sw-runs" },
        el("thead", {}, el("tr", {}, [["id"], ["model · link"], ["req/s", 1], ["requests", 1], ["TTFT p99 ms", 1], ["SLO met", 1], ["created", 1], ["request table"]].map(([h, right]) => el("th", { scope: "col", class: right ? "" : "left" }, h)))),
        el("tbody", {}, runRows))) : el("p", { class: "empty" }, "No stored runs yet."),
    );
  }

  return {
    open(params) {
      loadHistory();
      const job = params.get("job");
      if (job && job.includes("/")) {
        const [k, id] = job.split("/");
        if (jobView.dataset.job !== `${k}/${id}` || !following) openJob(k, id);
      }
    },
  };
}

// ------------------------------------------------------------------ the result of a job

function renderJob(host, kind, job, rows, ctx) {
  if (kind === "sweep") return renderSweep(host, job, rows, ctx);
  if (kind === "capacity") return renderCapacity(host, job, rows);
  return renderSplit(host, job, rows);
}

/** The swept fields of a sweep's result rows: the columns between `point` and `replicate`. */
function sweptFields(rows) {
  const keys = Object.keys(rows[0]);
  const a = keys.indexOf("point");
  const b = keys.indexOf("replicate");
  return a >= 0 && b > a ? keys.slice(a + 1, b) : [];
}

/** What metrics.first_token says TTFT ends at, in words (long for the note, short for a chart's title). */
const FIRST_TOKEN = {
  prefill: ['TTFT ends at the first token out of prefill (metrics.first_token "prefill")', "first token out of prefill"],
  decode: ['TTFT ends when the decode side has the KV cache (metrics.first_token "decode")', "first token once decode has the KV"],
};
/** Most lines one chart may hold (colours, markers and dashes run out beyond). */
const MAX_LINES = 12;

/** The TTFT rule of a sweep's rows: a `metrics.first_token` column (or any column ending in `.first_token`),
 * else the rule the page's own submission named; "varies" when the points differ; null when unknown. */
function firstTokenOf(rows, known) {
  const key = Object.keys(rows[0]).find((k) => k === "metrics.first_token" || k.endsWith(".first_token"));
  if (key) {
    const values = [...new Set(rows.map((r) => r[key]).filter((v) => typeof v === "string"))];
    if (values.length === 1) return values[0];
    if (values.length > 1) return "varies";
  }
  return known || null;
}

/** One value per point and metric: [mean, low, high] over its replicates (low/high NaN without replicates). */
function pointStats(rows) {
  const points = new Map();
  for (const r of rows) {
    if (!points.has(r.point)) points.set(r.point, { row: r, rows: [] });
    points.get(r.point).rows.push(r);
  }
  const replicated = [...points.values()].some((p) => p.rows.length > 1);
  for (const p of points.values()) {
    p.stats = {};
    const measured = p.rows.map((r) => r["requests.measured"]);
    for (const [m] of METRICS) {
      const values = p.rows.map((r) => (r[m] === null || r[m] === undefined ? NaN : r[m]));
      p.stats[m] = replicated ? interval(m, values, measured.every((v) => typeof v === "number") ? measured : null)
        : [values.filter(Number.isFinite).reduce((a, b) => a + b, 0) / values.filter(Number.isFinite).length, NaN, NaN];
    }
  }
  return { points: [...points.values()], replicated };
}

function renderSweep(host, job, rows, ctx = {}) {
  if (!rows.length) {
    host.replaceChildren(el("p", { class: "empty" }, job.status === "done" ? "No points." : "Waiting for the first points…"));
    return;
  }
  const links = ctx.links || {};
  const swept = sweptFields(rows);
  const numeric = swept.filter((f) => rows.every((r) => typeof r[f] === "number"));
  // the choices made before this redraw (a live sweep redraws as points arrive)
  const prev = {
    x: host.querySelector("#sw-x")?.value,
    facet: host.querySelector("#sw-facet")?.value,
    where: Object.fromEntries([...host.querySelectorAll("[data-where]")].map((c) => [c.dataset.where, c.value])),
  };
  const x = swept.includes(prev.x) ? prev.x : numeric[0] ?? swept[0];
  const facet = swept.includes(prev.facet) && prev.facet !== x ? prev.facet : "";
  const orderOf = (f, list = rows) => valueOrder(f, list.map((r) => r[f]), links);
  const filters = swept.filter((f) => f !== x && f !== facet && orderOf(f).length > 1);
  const kept = rows.filter((r) => filters.every((f) => !prev.where[f] || valueKey(r[f]) === prev.where[f]));
  const { points, replicated } = pointStats(kept.length ? kept : rows);
  const varying = swept.filter((f) => f !== x && f !== facet && orderOf(f, points.map((p) => p.row)).length > 1);
  const tails = varying.map((f) => f.split(".").pop());
  const short = (f, i) => (tails.filter((t) => t === tails[i]).length > 1 ? f : tails[i]);
  const configOf = (r) => varying.map((f, i) => `${short(f, i)}=${valueKey(r[f])}`).join(", ");
  const orders = varying.map((f) => orderOf(f, points.map((p) => p.row)).map(valueKey));
  const rank = (r) => varying.map((f, i) => orders[i].indexOf(valueKey(r[f])));
  const configs = [...new Map(points.map((p) => [configOf(p.row), rank(p.row)]))]
    .sort((a, b) => a[1].reduce((acc, v, i) => acc || v - b[1][i], 0)).map(([c]) => c);
  const categorical = x && !numeric.includes(x);
  const categories = categorical ? orderOf(x, points.map((p) => p.row)).map(valueKey) : null;
  const facets = facet ? orderOf(facet, points.map((p) => p.row)) : [undefined];
  const rule = firstTokenOf(rows, ctx.firstToken);

  const controls = el("div", { class: "actions sweep-controls" });
  if (swept.length > 1) {
    const select = el("select", { id: "sw-x", "aria-label": "Field on the x axis" }, swept.map((f) => el("option", { value: f }, f)));
    select.value = x;
    const facetSelect = el("select", { id: "sw-facet", "aria-label": "One chart per value of" },
      el("option", { value: "" }, "none"), swept.filter((f) => f !== x).map((f) => el("option", { value: f }, f)));
    facetSelect.value = facet;
    controls.append(el("label", { for: "sw-x", class: "note" }, "x axis:"), select,
      el("label", { for: "sw-facet", class: "note" }, "charts per:"), facetSelect);
    filters.forEach((f, i) => {
      const id = `sw-where-${i}`;
      const c = el("select", { id, "data-where": f, "aria-label": `Keep only this ${f}` },
        el("option", { value: "" }, `all ${f}`), orderOf(f).map((v) => el("option", { value: valueKey(v) }, `${f} = ${valueKey(v)}`)));
      c.value = prev.where[f] && [...c.options].some((o) => o.value === prev.where[f]) ? prev.where[f] : "";
      controls.append(c);
    });
    controls.addEventListener("change", () => renderSweep(host, job, rows, ctx));
  }
  const charts = el("div", { class: "stack" });
  host.replaceChildren(
    el("p", { class: "note" }, `${int(points.length)} point${points.length === 1 ? "" : "s"}${job.status === "done" ? "" : " so far"} · swept: ${swept.join(", ") || "nothing"}${replicated ? " · each point the mean of its replicates, bars 95% intervals (SLO attainment: Wilson score)" : ""}`),
    controls,
    rule ? el("p", { class: "note", id: "sw-ttft-rule" }, rule === "varies" ? "TTFT ends where each point's metrics.first_token says (the points differ)" : FIRST_TOKEN[rule]?.[0] ?? `metrics.first_token "${rule}"`) : "",
    charts);
  if (x && configs.length > MAX_LINES) {
    charts.append(el("p", { class: "callout warn", id: "sw-too-many" },
      `${configs.length} lines per chart are more than ${MAX_LINES} one can tell apart (${varying.map((f) => `${f}: ${orderOf(f).length} values`).join(", ")}): choose “charts per” a field, or keep only some values.`));
    return;
  }
  for (const [m, label, scaleY, fmtY, yopts] of METRICS) {
    const holder = el("div", { "data-metric": m });
    charts.append(holder);
    const ruleShort = m.startsWith("latency.ttft_s") || m.startsWith("slo.") ? FIRST_TOKEN[rule]?.[1] : null;
    for (const fv of facets) {
      const part = el("div", facet ? { "data-facet": valueKey(fv) } : {});
      holder.append(part);
      const mine = points.filter((p) => fv === undefined || valueKey(p.row[facet]) === valueKey(fv));
      const where = facet ? ` · ${facet} = ${valueKey(fv)}` : "";
      if (!x) {
        barChart(part, {
          id: `sw-${m}`, title: label + where,
          rows: mine.map((p) => ({ label: configOf(p.row) || `point ${p.row.point}`, segments: [{ name: label, value: scaleY(p.stats[m][0]) }] })),
          x: { label, format: fmtY, max: yopts.max },
        });
        continue;
      }
      const ys = mine.map((p) => scaleY(p.stats[m][0])).filter((v) => Number.isFinite(v));
      const spread = ys.length && Math.min(...ys) > 0 ? Math.max(...ys) / Math.min(...ys) : 0;
      const axis = m !== "slo.attainment" && spread > 30 ? { log: true } : yopts; // long tails: a log axis
      const series = configs.map((c) => {
        const pts = mine.filter((p) => configOf(p.row) === c);
        if (categorical) pts.sort((a, b) => categories.indexOf(valueKey(a.row[x])) - categories.indexOf(valueKey(b.row[x])));
        else pts.sort((a, b) => a.row[x] - b.row[x]);
        const se = { name: c || label, points: pts.map((p) => [categorical ? valueKey(p.row[x]) : p.row[x], scaleY(p.stats[m][0])]) };
        if (replicated) {
          se.low = pts.map((p) => scaleY(p.stats[m][1]));
          se.high = pts.map((p) => scaleY(p.stats[m][2]));
        }
        return se;
      }).filter((se) => se.points.length);
      lineChart(part, {
        id: `sw-${m}`, title: `${label} against ${x}${ruleShort ? ` (${ruleShort})` : ""}${where}`, series, height: 210,
        x: { label: x, format: compact, ...(categorical ? { categories } : {}) },
        y: { label: axis.log ? `${label}, log scale` : label, format: fmtY, ...axis },
      });
    }
  }
}

function renderCapacity(host, job, rows) {
  const r = job.result;
  const field = r?.field || RATE;
  const cards = el("dl", { class: "figures" });
  if (r) {
    const c = figure("capacity", "Capacity");
    c.set(r.capacity === null ? "–" : fixed(r.capacity, 2), field === RATE ? "req/s" : "", `meets the SLO for ≥ ${pct(r.slo_attainment, 0)}`);
    const f = figure("failed_at", "Missed at");
    f.set(r.failed_at === null ? "–" : fixed(r.failed_at, 2), field === RATE ? "req/s" : "", `within ${pct(r.rel_tol, 0)}`);
    cards.append(c.node, f.node);
    if (r.ceilings) {
      const g = figure("ceiling", "Analytic ceiling");
      g.set(fixed(r.ceilings.ceiling_req_per_s, 2), "req/s", `binding: ${r.binding}`);
      cards.append(g.node);
    }
  }
  const holder = el("div", {});
  host.replaceChildren(cards, r?.note ? el("p", { class: "callout" }, r.note) : "", holder);
  if (!rows.length) return;
  const pts = rows.map((p) => [p[field], p["slo.attainment"]]).sort((a, b) => a[0] - b[0]);
  lineChart(holder, {
    id: "sw-capacity", title: `SLO attainment of each evaluated ${field === RATE ? "rate" : "value"}`,
    series: [{ name: "SLO attainment", points: pts, color: "#3451c7" }],
    x: { label: field, format: compact }, y: { label: "SLO attainment", format: (v) => pct(v, 0), min: 0, max: 1 },
    hlines: r ? [{ y: r.slo_attainment, label: `target ${pct(r.slo_attainment, 0)}` }] : [],
    vlines: r && r.capacity !== null ? [{ x: r.capacity, label: `capacity ${fixed(r.capacity, 2)}` }] : [],
    height: 240,
  });
}

function renderSplit(host, job, rows) {
  const r = job.result;
  if (!r) {
    host.replaceChildren(el("p", { class: "empty" }, "The capacities appear when every split has been searched."));
    return;
  }
  const holder = el("div", {});
  const best = r.best;
  host.replaceChildren(
    best ? el("p", { class: "callout", id: "sw-best" }, el("strong", {}, "Best split: "), `${best.prefill}:${best.decode} (prefill:decode), ${fixed(best.capacity, 2)} req/s at ≥ ${pct(r.slo_attainment, 0)} SLO attainment`) : el("p", { class: "callout warn" }, "No split meets the SLO."),
    holder,
    el("p", { class: "note" }, `${int(rows.length)} simulations; the tick on each bar is that split's analytic ceiling.`));
  barChart(holder, {
    id: "sw-split", title: `Capacity per prefill:decode split of ${r.total_instances} instances`,
    rows: r.splits.map((s) => ({ label: `${s.prefill}:${s.decode}`, strong: best && s.prefill === best.prefill, segments: [{ name: "capacity", value: s.capacity ?? 0, color: best && s.prefill === best.prefill ? "#3451c7" : "#8da2e8" }] })),
    markers: r.splits.filter((s) => s.ceiling !== null).map((s) => ({ row: `${s.prefill}:${s.decode}`, value: s.ceiling })),
    x: { label: "req/s meeting the SLO", format: (v) => fixed(v, 2), tick: compact },
    total: (row) => `${fixed(row.segments[0].value, 2)} req/s`,
  });
}
