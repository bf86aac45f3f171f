// The sweep dashboard: start a sweep, a capacity search or a best split from a base scenario; follow it live
// (Server-Sent Events from /events); chart SLO attainment and p99 TTFT/TPOT against the swept field per
// configuration, the capacity search's points, the capacity per prefill:decode split; list the stored runs and
// jobs; download results.

import { ApiError, del, downloadLink, events, get, post } from "./api.js";
import { barChart, lineChart, PALETTE } from "./charts.js";
import { compact, duration, fixed, int, pct, when } from "./format.js";
import { clearErrors, el, field, figure, problemList, showErrors } from "./ui.js";

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

const active = (job) => ["queued", "running"].includes(job.status);

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

export function mountSweeps(root, { runnerScenario }) {
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
      const { data } = await post(KINDS[k].path, definition());
      location.hash = `#sweeps?job=${k}/${data.id}`;
    } catch (e) {
      const problems = e instanceof ApiError ? e.problems().map(place) : [{ path: "", message: `The service did not answer: ${e.message}` }];
      const left = showErrors(form, problems);
      general.replaceChildren(problemList(left));
      general.hidden = !left.length;
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
    const actions = el("div", { class: "actions" });
    const body = el("div", { class: "stack", id: "sw-results" });
    jobView.replaceChildren(
      el("h2", {}, `${info.name}`, el("span", { class: "sub mono" }, id), badge),
      el("div", { class: "progress-line", "aria-live": "polite" }, bar, progressText),
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
        renderJob(body, k, job, rows);
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
      const eta = job.status === "running" && job.eta_s !== null ? ` · about ${duration(job.eta_s)} left` : "";
      progressText.textContent = `${int(job.done)} of ${job.total === null ? "?" : int(job.total)} ${unit}${eta}`;
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
      const job = await get(url);
      show(job);
      await draw(job, true);
      if (!active(job)) return;
      for await (const ev of events(`${url}/events`, ctl.signal)) {
        const doc = JSON.parse(ev.data);
        if (ev.event === "deleted") break;
        jobView.dataset.progressEvents = String(Number(jobView.dataset.progressEvents) + 1);
        show(doc);
        const final = ev.event !== "progress";
        if (final || k === "sweep") await draw(doc, final);
        if (final) {
          loadHistory();
          break;
        }
      }
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

function renderJob(host, kind, job, rows) {
  if (kind === "sweep") return renderSweep(host, job, rows);
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

function renderSweep(host, job, rows) {
  if (!rows.length) {
    host.replaceChildren(el("p", { class: "empty" }, job.status === "done" ? "No points." : "Waiting for the first points…"));
    return;
  }
  const swept = sweptFields(rows);
  const numeric = swept.filter((f) => rows.every((r) => typeof r[f] === "number"));
  const prevX = host.querySelector("#sw-x")?.value;
  const x = numeric.includes(prevX) ? prevX : numeric[0];
  // one value per point: the mean over its replicates
  const points = new Map();
  for (const r of rows) {
    if (!points.has(r.point)) points.set(r.point, { row: r, n: 0, sums: {} });
    const p = points.get(r.point);
    p.n += 1;
    for (const [m] of METRICS) p.sums[m] = (p.sums[m] ?? 0) + (r[m] ?? NaN);
  }
  const configOf = (r) => swept.filter((f) => f !== x).map((f) => `${f.split(".").pop()}=${typeof r[f] === "string" ? r[f] : JSON.stringify(r[f])}`).join(", ");
  const configs = [...new Set([...points.values()].map((p) => configOf(p.row)))];
  const charts = el("div", { class: "stack" });
  const controls = el("div", { class: "actions" });
  if (numeric.length > 1) {
    const select = el("select", { id: "sw-x", "aria-label": "Swept field on the x axis" }, numeric.map((f) => el("option", { value: f }, f)));
    select.value = x;
    select.addEventListener("change", () => renderSweep(host, job, rows));
    controls.append(el("label", { for: "sw-x", class: "note" }, "x axis:"), select);
  }
  host.replaceChildren(
    el("p", { class: "note" }, `${int(points.size)} point${points.size === 1 ? "" : "s"}${job.status === "done" ? "" : " so far"} · swept: ${swept.join(", ") || "nothing"}`),
    controls, charts);
  for (const [m, label, scaleY, fmtY, yopts] of METRICS) {
    const holder = el("div", { "data-metric": m });
    charts.append(holder);
    if (x) {
      const ys = [...points.values()].map((p) => scaleY(p.sums[m] / p.n)).filter((v) => Number.isFinite(v));
      const spread = ys.length && Math.min(...ys) > 0 ? Math.max(...ys) / Math.min(...ys) : 0;
      const axis = m !== "slo.attainment" && spread > 30 ? { log: true } : yopts; // long tails: a log axis
      const series = configs.map((c, i) => ({
        name: c || label,
        color: PALETTE[i % 10],
        points: [...points.values()].filter((p) => configOf(p.row) === c)
          .map((p) => [p.row[x], scaleY(p.sums[m] / p.n)]).sort((a, b) => a[0] - b[0]),
      }));
      lineChart(holder, {
        id: `sw-${m}`, title: `${label} against ${x}`, series, height: 210,
        x: { label: x, format: compact }, y: { label: axis.log ? `${label}, log scale` : label, format: fmtY, ...axis },
      });
    } else {
      barChart(holder, {
        id: `sw-${m}`, title: label,
        rows: [...points.values()].map((p) => ({ label: configOf(p.row) || `point ${p.row.point}`, segments: [{ name: label, value: scaleY(p.sums[m] / p.n) }] })),
        x: { label, format: fmtY, max: yopts.max },
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
