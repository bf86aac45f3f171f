// The hand-off explorer: one request's KV cache from prefill to decode on an idle link (POST /v1/handoff), its
// figures and timeline, and the exposed time against prompt length for every link (POST /v1/handoff/batch).

import { ApiError, post } from "./api.js";
import { DASHES, lineChart, MARKERS, timeline } from "./charts.js";
import { bytesParts, compact, fixed, int, msParts } from "./format.js";
import { clearErrors, debounce, el, field, figure, problemList, showErrors } from "./ui.js";

/** The article's example (Llama-3-8B, 2,048 tokens over 25 GbE, the reference's LM head on every token). */
const ARTICLE = {
  model: "llama3-8b", prompt_tokens: 2048, link: "eth-25g", compression: "none", device: "h100",
  devices_per_instance: 1, lm_head: "all",
};
/** Where the API names a field the form sets differently ("prefill" does not fit: more devices per instance). */
const ALIAS = { prefill: "devices_per_instance", decode: "devices_per_instance", "cost.prefill_lm_head": "lm_head", cost: "lm_head" };

/** Link families, each one hue (its members told apart by dash and marker, fastest darkest): a link's family is
 * read from its preset key. */
export const LINK_FAMILIES = [
  { name: "NVLink", test: (k) => k.startsWith("nvlink"), colors: ["#1b4f8a", "#3a78c2", "#7fb0e6"] },
  { name: "InfiniBand", test: (k) => k.startsWith("ib-"), colors: ["#2f7d32", "#66b36a"] },
  { name: "RoCE (RDMA over Ethernet)", test: (k) => k.startsWith("roce"), colors: ["#7b3f99", "#b07aa1"] },
  { name: "Ethernet", test: (k) => k.startsWith("eth-"), colors: ["#c25a0f", "#f29d4b"] },
  { name: "PCIe", test: (k) => k.startsWith("pcie"), colors: ["#8c6d1f", "#c9a227"] },
  { name: "Other", test: () => true, colors: ["#5f6b7a", "#9aa3ad"] },
];

/** The links grouped by family (families in the order above, the links of one by bandwidth, fastest first),
 * each with its colour, dash and marker. */
export function linkStyles(links) {
  const bw = (l) => l.bandwidth_gb_per_s * (l.nics ?? 1) * (l.nic_efficiency ?? 1);
  const out = [];
  for (const fam of LINK_FAMILIES) {
    const members = links.filter(([k]) => fam.test(k) && !out.some((o) => o.key === k)).sort((a, b) => bw(b[1]) - bw(a[1]));
    members.forEach(([k, l], j) => out.push({
      key: k, name: l.name, tag: k, group: fam.name, color: fam.colors[Math.min(j, fam.colors.length - 1)],
      dash: DASHES[j % DASHES.length], marker: MARKERS[j % MARKERS.length],
    }));
  }
  return out;
}

const sliderToTokens = (v) => Math.round(2 ** (v / 8));
const tokensToSlider = (t) => Math.round(8 * Math.log2(Math.max(1, t)));

export function mountExplorer(root, catalog) {
  const models = Object.entries(catalog.models);
  const links = Object.entries(catalog.links);
  const formats = Object.entries(catalog.formats);
  const devices = Object.entries(catalog.devices);

  const form = el("form", { class: "card controls", id: "ex-form", novalidate: true, "aria-label": "Hand-off" });
  const fModel = field({ id: "ex-model", label: "Model", path: "model", kind: "select", options: models.map(([k, m]) => [k, `${m.name} (${k})`]) });
  const fPrompt = field({ id: "ex-prompt", label: "Prompt tokens", path: "prompt_tokens", kind: "number", min: 1, step: 1 });
  const slider = el("input", { type: "range", id: "ex-prompt-slider", min: 0, max: 8 * 17, step: 1, "aria-label": "Prompt tokens (logarithmic slider)" });
  const promptInput = fPrompt.querySelector("input");
  const pair = el("div", { class: "range-pair" });
  promptInput.replaceWith(pair);
  pair.append(promptInput, slider);
  const fLink = field({ id: "ex-link", label: "Link", path: "link", kind: "select", options: links.map(([k, l]) => [k, `${l.name} · ${fixed(l.bandwidth_gb_per_s, l.bandwidth_gb_per_s < 10 ? 3 : 0)} GB/s`]) });
  const fFormat = field({
    id: "ex-compression", label: "Compression on the wire", path: "compression", kind: "select",
    options: formats.map(([k, f]) => [k, k === "none" ? "none (bf16 as stored)" : `${k} · ${fixed(f.ratio_vs_bf16, 2)}× smaller`]),
  });
  const streaming = el("fieldset", { class: "field", "data-field": "streaming" },
    el("legend", { class: "label" }, "Streaming"),
    el("div", { class: "choices" },
      el("label", {}, el("input", { type: "radio", name: "streaming", value: "whole", checked: true, "data-path": "streaming", id: "ex-streaming-whole" }), "Whole cache after the prefill"),
      el("label", {}, el("input", { type: "radio", name: "streaming", value: "layer", "data-path": "streaming", id: "ex-streaming-layer" }), "Layer by layer")),
    el("p", { class: "error", id: "ex-streaming-whole-error", hidden: true, "aria-live": "polite" }));
  const fDevice = field({ id: "ex-device", label: "Prefill device", path: "device", kind: "select", options: devices.map(([k, d]) => [k, `${d.name} (${k})`]) });
  const fDpi = field({ id: "ex-dpi", label: "Devices per instance", path: "devices_per_instance", kind: "number", min: 1, step: 1, hint: "Tensor-parallel GPUs per prefill and decode instance." });
  const fHead = field({
    id: "ex-lm-head", label: "LM head charged on", path: "lm_head", kind: "select",
    options: [["last", "the last prompt token (kvwire's default)"], ["all", "every prompt token (the article)"]],
    hint: "The article's reference simulator charges the LM head on every prompt token; engines compute it for the last one.",
  });
  const general = el("div", { class: "errors", role: "alert", hidden: true });
  const article = el("button", { type: "button", class: "button", id: "ex-article" }, "The article's example");
  form.append(
    el("h2", {}, "One request"),
    general,
    fModel, fPrompt, fLink, fFormat, streaming,
    el("div", { class: "grid2" }, fDevice, fDpi),
    fHead,
    el("div", { class: "actions" }, article, el("span", { class: "note" }, "Llama-3-8B, 2,048 tokens, 25 GbE")),
  );

  const cards = {
    bytes_per_token: figure("bytes_per_token", "KV per token"),
    handoff_bytes: figure("handoff_bytes", "Hand-off"),
    wire_bytes: figure("wire_bytes", "On the wire"),
    link_full_rate_per_s: figure("link_full_rate_per_s", "Link full at"),
    prefill_s: figure("prefill_s", "Prefill"),
    transfer_s: figure("transfer_s", "Transfer"),
    exposed_s: figure("exposed_s", "Exposed after prefill"),
  };
  cards.exposed_s.node.classList.add("hot");
  const figures = el("dl", { class: "figures handoff", id: "ex-figures", "aria-live": "polite", "aria-label": "Hand-off figures" }, Object.values(cards).map((c) => c.node));
  const timelineHost = el("div", { id: "ex-timeline" });
  const chartHost = el("div", { id: "ex-chart" });
  const sentence = el("p", { class: "headline", id: "ex-sentence" });
  root.append(
    el("div", { class: "intro" },
      el("h1", {}, "Hand-off explorer"),
      el("p", {}, "One prompt's KV cache leaves the prefill GPU for the decode GPU on an otherwise idle link: how big it is, how long it is on the wire, and how much of that the user waits for after the prefill. The closed form of ",
        el("code", {}, "kvwire.handoff"), ", priced with the simulator's own cost model.")),
    el("div", { class: "layout" }, form,
      el("div", { class: "stack" }, figures,
        el("div", { class: "card" }, el("h2", {}, "One hand-off in time"), sentence, timelineHost),
        el("div", { class: "card" }, el("h2", {}, "Exposed time against prompt length", el("span", { class: "sub" }, "every link, this model, compression and streaming")), chartHost))),
  );

  const q = (sel) => form.querySelector(sel);
  const state = () => ({
    model: q("#ex-model").value,
    prompt_tokens: promptInput.value === "" ? null : Number(promptInput.value),
    link: q("#ex-link").value,
    compression: q("#ex-compression").value,
    streaming: q('input[name="streaming"]:checked').value,
    device: q("#ex-device").value,
    devices_per_instance: q("#ex-dpi").value === "" ? null : Number(q("#ex-dpi").value),
    lm_head: q("#ex-lm-head").value,
  });
  const body = (st, overrides = {}) => {
    const b = { ...st, cost: { prefill_lm_head: st.lm_head }, ...overrides };
    delete b.lm_head;
    for (const k of ["prompt_tokens", "devices_per_instance"]) if (b[k] === null) delete b[k];
    return b;
  };
  const set = (st) => {
    q("#ex-model").value = st.model;
    promptInput.value = st.prompt_tokens;
    slider.value = tokensToSlider(st.prompt_tokens);
    q("#ex-link").value = st.link;
    q("#ex-compression").value = st.compression;
    q(`input[name="streaming"][value="${st.streaming || "whole"}"]`).checked = true;
    q("#ex-device").value = st.device;
    q("#ex-dpi").value = st.devices_per_instance;
    q("#ex-lm-head").value = st.lm_head;
  };
  set({ ...ARTICLE, link: "ib-ndr", lm_head: "last" });

  let seq = 0;
  let curveKey = "";
  async function update() {
    const my = ++seq;
    const st = state();
    root.dataset.state = "loading";
    let result;
    try {
      result = (await post("/v1/handoff", body(st))).data;
    } catch (e) {
      if (my !== seq) return;
      clearErrors(form);
      const left = e instanceof ApiError ? showErrors(form, e.problems(), ALIAS) : [{ message: `The service did not answer: ${e.message}` }];
      general.replaceChildren(problemList(left));
      general.hidden = !left.length;
      root.dataset.state = "error";
      return;
    }
    if (my !== seq) return;
    clearErrors(form);
    general.hidden = true;
    show(result, st);
    const key = JSON.stringify(body(st, { prompt_tokens: 0, link: "" }));
    if (key !== curveKey) {
      curveKey = key;
      await curves(st, my);
    } else markPrompt(st);
    if (my === seq) root.dataset.state = "ready";
  }

  function show(r, st) {
    cards.bytes_per_token.set(int(r.bytes_per_token), "B", r.bytes_per_token >= 1024 ? `${fixed(r.bytes_per_token / 1024, r.bytes_per_token % 1024 ? 2 : 0)} KiB` : "");
    cards.handoff_bytes.set(...bytesParts(r.handoff_bytes), `${int(r.prompt_tokens)} tokens × ${r.layers} layers`);
    const ratio = r.handoff_bytes / r.wire_bytes;
    cards.wire_bytes.set(...bytesParts(r.wire_bytes), st.compression === "none" ? "uncompressed" : `${fixed(ratio, 2)}× smaller (${st.compression})`);
    cards.transfer_s.set(...msParts(r.transfer_s), "latency + bytes / bandwidth");
    cards.prefill_s.set(...msParts(r.prefill_s), `on ${st.devices_per_instance} × ${st.device}`);
    cards.exposed_s.set(...msParts(r.exposed_s), r.streaming === "layer" ? "slices leave as layers finish" : "the whole transfer");
    cards.link_full_rate_per_s.set(fixed(r.link_full_rate_per_s, 1), "req/s", "hand-offs alone fill the link");
    const [pv, pu] = msParts(r.prefill_s);
    const [ev, eu] = msParts(r.exposed_s);
    sentence.textContent = `The prefill takes ${pv} ${pu}; the user then waits ${ev} ${eu} more for the KV cache to land${r.streaming === "layer" ? " (layer-wise streaming overlaps the rest with the prefill)" : ""}.`;
    timeline(timelineHost, r, (s) => msParts(s).join(" "));
  }

  let lastCurves = null;
  async function curves(st, my) {
    const maxCtx = catalog.models[st.model]?.max_context_tokens || 131072;
    const lengths = [];
    for (let t = 128; t < maxCtx; t = Math.round(t * Math.SQRT2)) lengths.push(t);
    lengths.push(maxCtx);
    const calls = [];
    for (const [k] of links) for (const n of lengths) calls.push(body(st, { link: k, prompt_tokens: n }));
    let results;
    try {
      results = (await post("/v1/handoff/batch", calls)).data;
    } catch (e) {
      chartHost.replaceChildren(el("p", { class: "empty" }, `No curves: ${e instanceof ApiError ? e.detail : e.message}`));
      lastCurves = null;
      return;
    }
    if (my !== seq) return;
    const index = new Map(links.map(([k], i) => [k, i]));
    lastCurves = linkStyles(links).map((st) => ({
      ...st, points: lengths.map((n, j) => [n, results[index.get(st.key) * lengths.length + j].exposed_s * 1e3]),
    }));
    markPrompt(st);
  }

  function markPrompt(st) {
    if (!lastCurves) return;
    lineChart(chartHost, {
      id: "exposed-vs-prompt",
      x: { label: "prompt tokens", log: true, format: compact },
      y: { label: "exposed after prefill (ms)", log: true, format: (v) => (v >= 1 ? compact(v) : String(Number(v.toPrecision(2)))) },
      series: lastCurves.map((c) => ({ ...c, strong: c.key === st.link })),
      vlines: st.prompt_tokens > 0 ? [{ x: st.prompt_tokens, label: `${int(st.prompt_tokens)} tokens` }] : [],
      labels: "end",
      height: 340,
    });
  }

  const later = debounce(update, 120);
  form.addEventListener("input", (e) => {
    if (e.target === slider) promptInput.value = sliderToTokens(Number(slider.value));
    else if (e.target === promptInput && promptInput.value !== "") slider.value = tokensToSlider(Number(promptInput.value));
    later();
  });
  form.addEventListener("change", later);
  form.addEventListener("submit", (e) => e.preventDefault());
  article.addEventListener("click", () => {
    set({ ...ARTICLE, streaming: q('input[name="streaming"]:checked').value });
    update();
  });
  return { refresh: update };
}
