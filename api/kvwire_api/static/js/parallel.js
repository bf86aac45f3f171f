// The scenario runner's fields for parallelism inside an instance, the model's weight and activation formats and
// speculative decoding (issue 24), and the figures a run reports about them.
//
// Form: per pool (prefill, decode, colocated) the TP / PP / EP / DP degrees and the micro-batches of
// `<pool>.parallel` (blank: not set, so no `parallel` is sent and the pool keeps the old meaning of
// devices_per_instance), `model.weights` and
// `model.activations` (blank: the preset's), and `speculative` (a toggle; its method, draft tokens, acceptance
// and, for method "draft", the draft model). Results: a per-instance table (layout, matmul format, the busy time's
// compute-bound, memory-bound and power-capped shares, the share in collectives not hidden under compute) when
// the run has a parallel layout, collectives or a non-BF16 matmul format, and a "tokens per step" card when the
// summary has `speculative`. Only what the summary contains is shown.

import { fixed, int, pct } from "./format.js";
import { el, field, getPath, setOptions, setPath } from "./ui.js";

export const POOLS = ["prefill", "decode", "colocated"];
const POOL_NAMES = { prefill: "Prefill", decode: "Decode", colocated: "Colocated" };
const DEGREES = [
  ["tp", "TP", "tensor-parallel ranks"], ["pp", "PP", "pipeline stages"],
  ["ep", "EP", "expert-parallel ranks (MoE models)"], ["dp", "DP", "attention data-parallel ranks"],
];
/** A pipeline's micro-batches (groups of a step's sequences kept in flight; pp > 1 only). */
const MICRO = ["micro_batches", "Micro-batches", "groups of a step's sequences kept in flight in the pipeline (PP > 1 only)"];
const WEIGHTS = [["bf16", "bf16"], ["fp8", "fp8"], ["fp4", "fp4 (NVFP4)"], ["mxfp4", "mxfp4"], ["int4", "int4"]];
const ACTIVATIONS = [["bf16", "bf16"], ["fp8", "fp8"], ["fp4", "fp4 (NVFP4)"], ["mxfp4", "mxfp4"]];
const METHODS = [["mtp", "mtp (the model's MTP head)"], ["eagle", "eagle (an EAGLE draft head)"], ["draft", "draft (a separate draft model)"]];
/** What turning speculative decoding on sets (the example of docs/concepts/speculative.md). */
export const SPECULATIVE_DEFAULT = { method: "mtp", tokens: 3, acceptance: 0.7 };
/** Paths whose control holds a list ("0.8, 0.6"): a number alone, or numbers separated by commas. */
export const LIST_PATHS = new Set(["speculative.acceptance"]);
const FORMAT_PATHS = new Set(["model.weights", "model.activations"]);

const presetOf = (v) => (v && typeof v === "object" ? v.preset : v);
const GRID5 = "display:grid;grid-template-columns:repeat(5,minmax(0,1fr));gap:0.5rem;align-items:start";

/** The text a list control shows for `v`, and the value it sends for `raw` (numbers where they read as such). */
export function showList(v) {
  return Array.isArray(v) ? v.map(String).join(", ") : String(v);
}
export function readList(raw) {
  const parts = raw.replace(/^\[|\]$/g, "").split(",").map((x) => x.trim()).filter((x) => x !== "");
  const values = parts.map((x) => (/^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$/.test(x) ? Number(x) : x));
  return values.length === 1 && !raw.includes(",") ? values[0] : values;
}

/** The form's parts: `model` (weights and activations, for the "Model and hardware" fieldset), `parallel` and
 * `speculative` (fieldsets) and `toggle` (the speculative checkbox, which carries no path); `fill(s)` shows what
 * scenario `s` implies beyond the controls' values (defaults, the devices a layout takes, which parts show);
 * `alias(s)` maps error paths to the control that sets them. */
export function formParts({ catalog, def }) {
  const models = Object.entries(catalog.models).map(([k, v]) => [k, `${v.name} (${k})`]);
  const weights = field({ path: "model.weights", label: "Weights", kind: "select", options: [["", "default"], ...WEIGHTS], id: "run-weights" });
  const activations = field({
    path: "model.activations", label: "Activations", kind: "select",
    options: [["", `default (${def("model.activations") ?? "bf16"})`], ...ACTIVATIONS], id: "run-activations",
  });
  const model = el("div", { class: "grid2" }, weights, activations);

  const rows = {};
  const notes = {};
  for (const pool of POOLS) {
    const controls = [...DEGREES, MICRO].map(([k, label, what]) => {
      const f = field({ path: `${pool}.parallel.${k}`, label, kind: "text", placeholder: "1", id: `run-${pool}-${k}` });
      f.querySelector("label").title = what;
      return f;
    });
    notes[pool] = el("p", { class: "hint", id: `run-${pool}-layout`, style: "margin:0" });
    rows[pool] = el("div", { class: "field", "data-pool": pool },
      el("span", { class: "label" }, POOL_NAMES[pool]), el("div", { style: GRID5 }, controls), notes[pool]);
  }
  const parallel = el("fieldset", { class: "group", id: "run-parallel" },
    el("legend", {}, "Parallelism per instance"),
    el("p", { class: "note", style: "margin:0;font-size:0.78rem" },
      "Tensor, pipeline, expert and attention-data parallel degrees, and the pipeline's micro-batches. Blank: no parallel layout (the instance's devices act as one); with any degree set an instance has TP × PP × DP devices and pays for its collectives."),
    rows.prefill, rows.decode, rows.colocated);

  const toggle = el("input", { type: "checkbox", id: "run-spec-on" });
  const method = field({ path: "speculative.method", label: "Method", kind: "select", options: METHODS, id: "run-spec-method" });
  const tokens = field({ path: "speculative.tokens", label: "Draft tokens per step (γ)", kind: "text", placeholder: "1 to 16", id: "run-spec-tokens" });
  const acceptance = field({
    path: "speculative.acceptance", label: "Acceptance (α)", kind: "text", id: "run-spec-acceptance",
    hint: "one probability, or one per draft position: 0.8, 0.6, 0.4",
  });
  acceptance.querySelector("input").dataset.list = "true";
  const draft = field({ path: "speculative.draft_model", label: "Draft model", kind: "select", options: [["", "choose one"], ...models], id: "run-spec-draft" });
  const specFields = el("div", { class: "grid2", id: "run-spec-fields", hidden: true }, method, tokens, acceptance, draft);
  const speculative = el("fieldset", { class: "group", id: "run-speculative" },
    el("legend", {}, "Speculative decoding"),
    el("label", { for: "run-spec-on", style: "display:flex;gap:0.4rem;align-items:center;font-size:0.84rem;font-weight:600" }, toggle, "Draft and verify tokens each decode step"),
    specFields);

  function fill(s) {
    const name = presetOf(s.model) ?? def("model");
    const m = catalog.models[name];
    const own = s.model && typeof s.model === "object" && s.model.weight_bytes_per_param;
    const bytes = own ?? m?.weight_bytes_per_param;
    const preset = m?.weights ?? (bytes !== undefined ? `${fixed(bytes, bytes % 1 ? 2 : 0)} B per weight` : "the model's");
    setOptions(weights.querySelector("select"), [["", `default (${preset})`], ...WEIGHTS]);
    const colocated = s.mode === "colocated";
    rows.prefill.hidden = colocated;
    rows.decode.hidden = colocated;
    rows.colocated.hidden = !colocated;
    for (const pool of POOLS) notes[pool].textContent = layoutNote(s, pool);
    const spec = s.speculative;
    toggle.checked = spec !== undefined && spec !== null;
    specFields.hidden = !toggle.checked;
    draft.hidden = !(spec && spec.method === "draft");
  }

  /** A pool's line under its degrees: the devices an instance takes and the device's scale-up domain. */
  function layoutNote(s, pool) {
    const p = getPath(s, `${pool}.parallel`);
    const devName = presetOf(getPath(s, `${pool}.device`)) ?? def(`${pool}.device`);
    const dev = catalog.devices[devName];
    const domain = dev ? (dev.scale_up ? `; ${dev.name}: ${dev.scale_up.domain} GPUs per scale-up domain` : `; ${dev.name} has no scale-up domain`) : "";
    if (!p || typeof p !== "object") {
      const n = getPath(s, `${pool}.devices_per_instance`) ?? def(`${pool}.devices_per_instance`);
      return `No parallel layout: ${n ?? 1} device${n === 1 ? "" : "s"} per instance acting as one${domain}.`;
    }
    const d = Object.fromEntries(DEGREES.map(([k]) => [k, p[k] ?? 1]));
    if (!DEGREES.every(([k]) => Number.isInteger(d[k]) && d[k] > 0)) return `Degrees are whole numbers ≥ 1${domain}.`;
    return `${int(d.tp * d.pp * d.dp)} devices per instance (TP ${d.tp} × PP ${d.pp} × DP ${d.dp}${d.ep > 1 ? `, EP ${d.ep}` : ""})${domain}.`;
  }

  /** A pool's devices_per_instance that disagrees with its parallel layout is shown at its TP field. */
  function alias(s) {
    const out = {};
    for (const pool of POOLS) {
      if (getPath(s, `${pool}.parallel`)) out[`${pool}.devices_per_instance`] = `${pool}.parallel.tp`;
    }
    return out;
  }

  return { model, parallel, speculative, toggle, fill, alias };
}

/** Set `model.weights` or `model.activations` of scenario `s` (true when `path` is one of them): a preset
 * name becomes `{"preset": name, ...}`, and back once no format is left; a model's own weight_bytes_per_param
 * goes when weights are set (the format says the bytes, and the two must not disagree). */
export function setModelFormat(s, path, value, defaultModel) {
  if (!FORMAT_PATHS.has(path)) return false;
  const key = path.slice("model.".length);
  let m = s.model;
  if (value === undefined) {
    if (!m || typeof m !== "object") return true;
    delete m[key];
    const keys = Object.keys(m);
    if (keys.length === 1 && keys[0] === "preset") s.model = m.preset;
    return true;
  }
  if (!m || typeof m !== "object") m = { preset: m ?? defaultModel };
  m[key] = value;
  if (key === "weights") delete m.weight_bytes_per_param;
  s.model = m;
  return true;
}

/** Set a degree of a pool's `parallel` in scenario `s` (true when `path` is one): the pool's
 * devices_per_instance goes while it has `parallel`, since the layout gives it (a stored run's echo holds both,
 * and a changed degree would otherwise disagree with it). */
export function setDegree(s, path, value) {
  const m = /^(prefill|decode|colocated)\.parallel\.(tp|pp|ep|dp)$/.exec(path);
  if (!m) return false;
  setPath(s, path, value);
  const p = getPath(s, `${m[1]}.parallel`);
  if (p && typeof p === "object") setPath(s, `${m[1]}.devices_per_instance`, undefined);
  return true;
}

// ------------------------------------------------------------------ results

const layoutText = (p) => ["tp", "pp", "ep", "dp"].filter((k) => (p[k] ?? 1) > 1).map((k) => `${k.toUpperCase()}${p[k]}`).join(" ") || "all 1";

/** The per-instance card, or null when the run has no parallel layout, no collective time and only BF16 matmuls. */
export function instancesCard(sim) {
  const s = sim.summary;
  const insts = Object.entries(s.instances || {});
  const layouts = {};
  for (const pool of POOLS) {
    const p = getPath(sim.scenario || {}, `${pool}.parallel`);
    if (p && typeof p === "object") layouts[pool] = p;
  }
  const anyComm = insts.some(([, v]) => v.comm_fraction > 0);
  const anyFormat = insts.some(([, v]) => (v.compute_format && v.compute_format !== "bf16") || v.compute_fallback_from);
  if (!insts.length || (!Object.keys(layouts).length && !anyComm && !anyFormat)) return null;
  const poolOf = (k) => k.replace(/-\d+$/, "");
  const rows = insts.map(([name, v]) => {
    const p = layouts[poolOf(name)];
    const cb = v.compute_bound_fraction;
    const pw = v.power_capped_fraction;
    const mem = cb === null || cb === undefined || pw === null || pw === undefined ? null : Math.max(0, 1 - cb - pw);
    const fmt = v.compute_fallback_from ? `${v.compute_format} (no ${v.compute_fallback_from})` : v.compute_format ?? "–";
    return el("tr", { "data-instance": name, "data-comm": v.comm_fraction ?? "" },
      el("th", { scope: "row" }, name), el("td", {}, int(v.devices)),
      el("td", { class: "left" }, p ? layoutText(p) : "no parallel"), el("td", {}, pct(v.comm_fraction)),
      el("td", {}, pct(cb)), el("td", {}, pct(mem)), el("td", {}, pct(pw)),
      anyFormat ? el("td", { class: "left" }, fmt) : null);
  });
  const heads = ["instance", "devices", "layout", "collectives", "compute-bound", "memory-bound", "power-capped", ...(anyFormat ? ["matmuls"] : [])];
  return el("div", { class: "card", id: "run-instances-card" },
    el("h2", {}, "Per instance", el("span", { class: "sub" }, "shares of each instance's busy time")),
    el("div", { class: "table-wrap" }, el("table", { id: "run-instances" },
      el("caption", { class: "visually-hidden" }, "Per instance: layout, matmul format and shares of busy time"),
      el("thead", {}, el("tr", {}, heads.map((h) => el("th", { scope: "col", class: h === "layout" || h === "matmuls" ? "left" : null }, h)))),
      el("tbody", {}, rows))),
    el("p", { class: "note", style: "margin-top:0.5rem" },
      "Collectives: the time in all-reduces, all-to-alls and pipeline hand-overs not hidden under compute (cost.comm_overlap); compute-bound, memory-bound, power-capped: the steps' time (collectives included) by what bound the roofline."));
}

/** The "tokens per step" card's [key, label, value, unit, detail] when the summary has `speculative`, else null. */
export function speculativeFigure(s) {
  const sp = s.speculative;
  if (!sp) return null;
  return ["speculative", "Tokens / step", fixed(sp.tokens_per_step, 2), "",
    `speculative: ${fixed(sp.accepted_tokens_per_step, 2)} drafts accepted per verify step; drafting ${pct(sp.draft_share_of_busy)} of busy time`];
}
