// Small SVG charts drawn here (no library): lines on linear or log axes, horizontal bars (stacked or not) and the
// hand-off timeline. Each chart is a <figure> with a caption, an SVG with a text description, an HTML legend,
// a hover read-out and a "Data" table of every plotted value; it redraws when its container is resized.
// The plotted data is also on the figure as JSON (`data-series`), for tests and for anyone who wants it.

import { el } from "./ui.js";

const SVG = "http://www.w3.org/2000/svg";

/** Categorical colours that stay apart for the common colour-vision deficiencies (Tableau 10). */
export const PALETTE = [
  "#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac",
];

function s(tag, attrs = {}, ...children) {
  const node = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) if (v !== null && v !== undefined) node.setAttribute(k, v);
  for (const c of children.flat()) if (c) node.append(c);
  return node;
}

function text(x, y, str, attrs = {}) {
  const t = s("text", { x, y, ...attrs });
  t.textContent = str;
  return t;
}

// ------------------------------------------------------------------ scales and ticks

/** A round tick step (1, 2 or 5 times a power of ten) giving about `count` ticks over `span`. */
function niceStep(span, count) {
  const raw = span / Math.max(1, count);
  const mag = 10 ** Math.floor(Math.log10(raw));
  const n = raw / mag;
  return (n < 1.5 ? 1 : n < 3 ? 2 : n < 7 ? 5 : 10) * mag;
}

function linearScale(lo, hi, size, reverse, opts = {}) {
  if (!(hi > lo)) {
    const pad = Math.abs(lo) * 0.1 || 1;
    [lo, hi] = [lo - pad, hi + pad];
  }
  const step = niceStep(hi - lo, opts.ticks || 5);
  const d0 = opts.fixedMin ? lo : Math.floor(lo / step) * step;
  const d1 = opts.fixedMax ? hi : Math.ceil(hi / step) * step;
  const ticks = [];
  for (let v = Math.ceil(d0 / step) * step; v <= d1 + step * 1e-9; v += step) ticks.push(+v.toPrecision(12));
  const f = (v) => (reverse ? size - ((v - d0) / (d1 - d0)) * size : ((v - d0) / (d1 - d0)) * size);
  return { f, ticks, domain: [d0, d1] };
}

function logScale(lo, hi, size, reverse) {
  const l0 = Math.floor(Math.log10(lo));
  let l1 = Math.ceil(Math.log10(hi));
  if (l1 === l0) l1 += 1;
  const ticks = [];
  const decades = l1 - l0;
  for (let e = l0; e <= l1; e++) {
    ticks.push(10 ** e);
    if (decades <= 3 && e < l1) ticks.push(2 * 10 ** e, 5 * 10 ** e);
  }
  ticks.sort((a, b) => a - b);
  const f = (v) => {
    const t = (Math.log10(v) - l0) / (l1 - l0);
    return reverse ? size - t * size : t * size;
  };
  return { f, ticks, domain: [10 ** l0, 10 ** l1] };
}

/** A scale over `values`: log or linear; `min`/`max` fix an end, `zero` starts a linear axis at 0, `tight` ends
 * the axis at the data (x axes) instead of the next round tick (y axes). */
function scale(values, size, reverse, opts) {
  const finite = values.filter((v) => Number.isFinite(v) && (!opts.log || v > 0));
  let lo = opts.min ?? Math.min(...finite);
  let hi = opts.max ?? Math.max(...finite);
  if (!finite.length) [lo, hi] = [opts.min ?? 0, opts.max ?? 1];
  if (opts.log) return logScale(lo, hi, size, reverse);
  if (opts.zero && lo > 0) lo = 0;
  const tight = opts.tight && hi > lo;
  return linearScale(lo, hi, size, reverse, { fixedMin: opts.min !== undefined || tight, fixedMax: opts.max !== undefined || tight });
}

// ------------------------------------------------------------------ the frame every chart shares

function frame(host, spec, draw) {
  host.replaceChildren();
  const figure = el("figure", { class: "chart", "data-chart": spec.id || "" });
  if (spec.title) figure.append(el("figcaption", {}, spec.title));
  const holder = el("div", { class: "plot" });
  const tooltip = el("div", { class: "tooltip", hidden: true, role: "presentation" });
  const legend = el("div", { class: "legend", "aria-hidden": "true" });
  figure.append(holder, tooltip, legend);
  if (spec.table) figure.append(dataTable(spec.table));
  if (spec.data) figure.dataset.series = JSON.stringify(spec.data);
  host.append(figure);
  const render = () => {
    const width = Math.max(260, Math.floor(holder.clientWidth || host.clientWidth || 600));
    holder.replaceChildren(draw(width, { tooltip, figure }));
  };
  render();
  let group = null;
  for (const [name, color, strong, style] of spec.legend || []) {
    if (style?.group && style.group !== group) {
      if (group !== null) legend.append(el("i", { class: "legend-break" }));
      group = style.group;
      legend.append(el("b", { class: "legend-group" }, `${group}:`));
    }
    const swatch = style ? legendSwatch(color, style) : el("i", { style: `background:${color}` });
    legend.append(el("span", { class: strong ? "strong" : "", "data-group": style?.group || null }, swatch, name));
  }
  if (host._observer) host._observer.disconnect();
  let last = holder.clientWidth;
  host._observer = new ResizeObserver(() => {
    if (Math.abs(holder.clientWidth - last) < 2) return;
    last = holder.clientWidth;
    render();
  });
  host._observer.observe(holder);
  return figure;
}

function dataTable({ columns, rows, caption }) {
  return el(
    "details",
    { class: "chart-data" },
    el("summary", {}, "Data"),
    el(
      "div",
      { class: "table-wrap" },
      el(
        "table",
        {},
        caption ? el("caption", { class: "visually-hidden" }, caption) : null,
        el("thead", {}, el("tr", {}, columns.map((c) => el("th", { scope: "col" }, c)))),
        el("tbody", {}, rows.map((r) => el("tr", {}, r.map((v) => el("td", {}, v))))),
      ),
    ),
  );
}

function svgRoot(width, height, label) {
  return s("svg", { width, height, viewBox: `0 0 ${width} ${height}`, role: "img", "aria-label": label });
}

/** Marker shapes and dash patterns cycled with the colours: lines that coincide stay distinguishable. */
export const MARKERS = ["circle", "square", "triangle", "diamond", "down", "cross", "plus", "star"];
export const DASHES = [null, "6 3", "2 3", "9 3 2 3"];

/** A series' style: its own colour, dash and hollow marker, each marker a little smaller than the one before
 * (coinciding points show one inside the other). `se.dash`/`se.marker` override. */
export function seriesStyle(se, i) {
  return {
    color: se.color || PALETTE[i % 10],
    dash: se.dashed ? "5 4" : se.dash !== undefined ? se.dash : DASHES[i % DASHES.length],
    marker: se.marker || MARKERS[i % MARKERS.length],
    size: Math.max(2.6, 5 - 0.35 * i),
    group: se.group || null,
  };
}

/** An SVG marker of `shape` centred at (x, y), `r` its half-size, hollow (drawn in `color`). */
function marker(shape, x, y, r, color, filled = false) {
  const pts = (list) => list.map(([a, b]) => `${(x + a * r).toFixed(1)},${(y + b * r).toFixed(1)}`).join(" ");
  const attrs = { fill: filled ? color : "var(--card)", stroke: color, "stroke-width": 1.4, class: "marker", "data-shape": shape };
  if (shape === "square") return s("rect", { ...attrs, x: x - r * 0.85, y: y - r * 0.85, width: r * 1.7, height: r * 1.7 });
  if (shape === "triangle") return s("polygon", { ...attrs, points: pts([[0, -1.1], [1, 0.75], [-1, 0.75]]) });
  if (shape === "down") return s("polygon", { ...attrs, points: pts([[0, 1.1], [1, -0.75], [-1, -0.75]]) });
  if (shape === "diamond") return s("polygon", { ...attrs, points: pts([[0, -1.2], [1, 0], [0, 1.2], [-1, 0]]) });
  if (shape === "cross") return s("path", { ...attrs, fill: "none", d: `M${x - r},${y - r}L${x + r},${y + r}M${x - r},${y + r}L${x + r},${y - r}` });
  if (shape === "plus") return s("path", { ...attrs, fill: "none", d: `M${x - r},${y}L${x + r},${y}M${x},${y - r}L${x},${y + r}` });
  if (shape === "star") {
    const star = [];
    for (let k = 0; k < 10; k++) {
      const a = (Math.PI / 5) * k - Math.PI / 2;
      const rr = k % 2 ? 0.5 : 1.2;
      star.push([Math.cos(a) * rr, Math.sin(a) * rr]);
    }
    return s("polygon", { ...attrs, points: pts(star) });
  }
  return s("circle", { ...attrs, cx: x, cy: y, r });
}

/** Move labels (sorted by `y`) apart to at least `gap` between neighbours, each run of overlapping labels centred
 * on where its labels want to be, all inside [0, h]. */
function spreadLabels(tags, gap, h) {
  let clusters = tags.map((t) => ({ items: [t], want: t.y, top: t.y }));
  for (let moved = true; moved;) {
    moved = false;
    const next = [];
    for (const c of clusters) {
      const last = next[next.length - 1];
      if (last && c.top < last.top + last.items.length * gap) {
        const items = [...last.items, ...c.items];
        const want = items.reduce((a, t) => a + t.y, 0) / items.length;
        next[next.length - 1] = { items, want, top: want - ((items.length - 1) * gap) / 2 };
        moved = true;
      } else next.push(c);
    }
    for (const c of next) c.top = Math.min(Math.max(c.top, 0), Math.max(0, h - (c.items.length - 1) * gap));
    clusters = next;
  }
  for (const c of clusters) c.items.forEach((t, i) => { t.y = c.top + i * gap; });
}

function legendSwatch(color, style) {
  const svg = s("svg", { width: 26, height: 12, viewBox: "0 0 26 12", "aria-hidden": "true", class: "swatch" });
  svg.append(s("line", { x1: 1, x2: 25, y1: 6, y2: 6, stroke: color, "stroke-width": 2, "stroke-dasharray": style.dash }));
  if (style.marker) svg.append(marker(style.marker, 13, 6, 3.6, color));
  return svg;
}

function axisLeft(g, y, ticks, fmt, width, x0) {
  const grid = s("g", { class: "grid" });
  const axis = s("g", { class: "axis" });
  for (const t of ticks) {
    const py = y(t);
    grid.append(s("line", { x1: x0, x2: width, y1: py, y2: py }));
    axis.append(text(x0 - 6, py + 3.5, fmt(t), { "text-anchor": "end" }));
  }
  g.append(grid, axis);
}

function axisBottom(g, x, ticks, fmt, y0, y1, width) {
  const grid = s("g", { class: "grid" });
  const axis = s("g", { class: "axis" });
  let lastX = -Infinity;
  for (const t of ticks) {
    const px = x(t);
    grid.append(s("line", { x1: px, x2: px, y1: y0, y2: y1 }));
    const label = fmt(t);
    if (px - lastX < label.length * 6.5 + 6) continue; // no overlapping labels
    lastX = px;
    axis.append(text(px, y1 + 15, label, { "text-anchor": "middle" }));
  }
  axis.append(s("line", { x1: 0, x2: width ?? x(ticks[ticks.length - 1]), y1, y2: y1 }));
  g.append(grid, axis);
}

// ------------------------------------------------------------------ line chart

/**
 * Lines: `{id, title, x: {label, log, format, min, max, categories}, y: {label, log, format, min, max, zero},
 * series: [{name, points: [[x, y], ...], low: [...], high: [...], color, dash, marker, group, strong, dashed}],
 * tag}], vlines: [{x, label}], hlines: [{y, label}], height, step, joined, labels}`.
 * `step: true` draws each series as a staircase (an empirical CDF of few points). `x.categories` (labels in
 * order) makes a categorical axis: each series' points sit beside each other at their category and are not
 * joined (`joined: false` is the default there). `low`/`high` draw an interval bar at each point. Each series
 * has its own dash and hollow marker (see `seriesStyle`), so lines that coincide stay distinguishable;
 * `labels: "end"` writes each series' `tag` (or name) at its last point (moved apart where they would overlap).
 */
export function lineChart(host, spec) {
  const series = spec.series.filter((se) => se.points.length);
  const cats = spec.x.categories || null;
  const joined = spec.joined ?? !cats;
  const fmtX = cats ? String : spec.x.format || String;
  const fmtY = spec.y.format || String;
  const styles = new Map(spec.series.map((se, i) => [se, seriesStyle(se, i)]));
  const table = tableOf(series, spec.x.label, fmtX, fmtY);
  const legend = spec.series.length > 1 ? series.map((se) => [se.name, styles.get(se).color, se.strong, styles.get(se)]) : [];
  const data = spec.series.map((se) => ({
    name: se.name, points: se.points, ...(se.low ? { low: se.low, high: se.high } : {}), ...(se.group ? { group: se.group } : {}),
  }));
  const label = `${spec.title || "chart"}: ${spec.y.label} against ${spec.x.label}` +
    (series.length > 1 ? `, ${series.length} series (${series.map((x) => x.name).join(", ")})` : "");
  const figureNode = frame(host, { ...spec, table, legend, data }, (width, { tooltip, figure }) => {
    const height = spec.height || 250;
    const endLabels = spec.labels === "end";
    const m = { top: 22, right: endLabels ? 14 + Math.min(150, 6.2 * Math.max(...series.map((se) => (se.tag ?? se.name).length))) : 14, bottom: 40, left: 14 };
    const ends = (se, i) => [se.points[i][1], se.low?.[i], se.high?.[i]].filter((v) => v !== null && v !== undefined);
    const allX = cats ? [] : series.flatMap((se) => se.points.map((p) => p[0])).concat((spec.vlines || []).map((v) => v.x));
    const allY = series.flatMap((se) => se.points.flatMap((_, i) => ends(se, i))).concat((spec.hlines || []).map((h) => h.y));
    const yProbe = scale(allY, 100, true, spec.y);
    m.left = 22 + Math.max(...yProbe.ticks.map((t) => fmtY(t).length)) * 6.3;
    const w = width - m.left - m.right;
    const h = height - m.top - m.bottom;
    const x = cats ? linearScale(-0.5, cats.length - 0.5, w, false, { fixedMin: true, fixedMax: true }) : scale(allX, w, false, { tight: true, ...spec.x });
    const y = scale(allY, h, true, spec.y);
    // where a point is drawn: its x, or its category with this series' offset beside the others
    const n = series.length;
    const offset = (k) => (cats && n > 1 ? (k - (n - 1) / 2) * (0.5 / n) : 0);
    const posX = (k, px) => (cats ? x.f(cats.indexOf(String(px)) + offset(k)) : x.f(px));
    const svg = svgRoot(width, height, label);
    const g = s("g", { transform: `translate(${m.left},${m.top})` });
    svg.append(g);
    axisLeft(g, y.f, y.ticks, fmtY, w, 0);
    if (cats) axisBottom(g, x.f, cats.map((_, i) => i), (i) => cats[i], 0, h, w);
    else axisBottom(g, x.f, x.ticks, fmtX, 0, h, w);
    g.append(text(w / 2, h + 34, spec.x.label, { class: "axis-label", "text-anchor": "middle" }));
    svg.append(text(4, 12, spec.y.label, { class: "axis-label" }));
    const clipId = `clip-${Math.random().toString(36).slice(2)}`;
    svg.append(s("defs", {}, s("clipPath", { id: clipId }, s("rect", { x: -6, y: -6, width: w + 12, height: h + 12 }))));
    const lines = s("g", { "clip-path": `url(#${clipId})` });
    const ordered = series.map((se, k) => ({ se, k, color: styles.get(se).color, style: styles.get(se) }));
    ordered.sort((a, b) => (a.se.strong ? 1 : 0) - (b.se.strong ? 1 : 0)); // the emphasised line on top
    const ok = (px, py) => (cats ? cats.includes(String(px)) : Number.isFinite(px) && (!spec.x.log || px > 0)) && Number.isFinite(py) && (!spec.y.log || py > 0);
    const dim = (se) => (series.some((o) => o.strong) && !se.strong ? 0.5 : 1);
    for (const { se, k, color, style } of ordered) {
      if (joined) {
        let d = "";
        let pen = false;
        let prev = null;
        for (const [px, py] of se.points) {
          if (!ok(px, py)) {
            pen = false;
            continue;
          }
          const X = posX(k, px).toFixed(1);
          const Y = y.f(py).toFixed(1);
          if (pen && spec.step && prev) d += `L${X},${prev}`;
          d += `${pen ? "L" : "M"}${X},${Y}`;
          pen = true;
          prev = Y;
        }
        lines.append(s("path", {
          d, fill: "none", stroke: color, "stroke-width": se.strong ? 3 : 1.8, "stroke-dasharray": style.dash,
          opacity: dim(se), "stroke-linejoin": "round", "data-series": se.name,
        }));
      }
      if (se.low) {
        se.points.forEach(([px, py], i) => {
          const lo = se.low[i];
          const hi = se.high[i];
          if (!ok(px, py) || lo === null || hi === null || !Number.isFinite(lo) || !Number.isFinite(hi)) return;
          const X = posX(k, px);
          const Y0 = y.f(spec.y.log ? Math.max(lo, 1e-300) : lo);
          const Y1 = y.f(hi);
          lines.append(s("path", {
            d: `M${X},${Y0}V${Y1}M${X - 3},${Y0}h6M${X - 3},${Y1}h6`, stroke: color, "stroke-width": 1.2, fill: "none",
            opacity: dim(se), class: "interval",
          }));
        });
      }
      if ((se.points.length <= 24 || !joined) && !spec.step) {
        for (const [px, py] of se.points) {
          if (!ok(px, py)) continue;
          const mk = marker(style.marker, posX(k, px), y.f(py), se.strong ? style.size + 0.8 : style.size, color);
          mk.setAttribute("opacity", dim(se));
          lines.append(mk);
        }
      }
    }
    g.append(lines);
    if (endLabels) {
      const tags = ordered.map(({ se, color }) => {
        const last = [...se.points].reverse().find(([px, py]) => ok(px, py));
        return last ? { se, color, x: posX(0, last[0]), y: y.f(last[1]) } : null;
      }).filter(Boolean).sort((a, b) => a.y - b.y);
      spreadLabels(tags, 11, h);
      const layer = s("g", { class: "end-labels" });
      for (const t of tags) {
        layer.append(text(t.x + 6, t.y + 3.5, t.se.tag ?? t.se.name, { class: t.se.strong ? "bar-label" : null, style: `fill:${t.color}`, "data-series": t.se.name }));
      }
      g.append(layer);
    }
    for (const v of spec.vlines || []) {
      const px = x.f(v.x);
      g.append(s("g", { class: "mark" }, s("line", { x1: px, x2: px, y1: 0, y2: h }),
        text(px + 4, 11, v.label || "", { "text-anchor": px > w * 0.7 ? "end" : "start", dx: px > w * 0.7 ? -8 : 0 })));
    }
    for (const hl of spec.hlines || []) {
      const py = y.f(hl.y);
      g.append(s("g", { class: "mark" }, s("line", { x1: 0, x2: w, y1: py, y2: py }), text(w - 4, py - 4, hl.label || "", { "text-anchor": "end" })));
    }
    const describe = (se, p) => {
      const i = se.points.indexOf(p);
      const range = se.low && Number.isFinite(se.low[i]) ? ` (95%: ${fmtY(se.low[i])} – ${fmtY(se.high[i])})` : "";
      return `${se.name ? `${se.name}: ` : ""}${fmtX(p[0])} → ${fmtY(p[1])}${range}`;
    };
    hover(svg, g, m, ordered, (p, k) => posX(k, p[0]), y.f, describe, tooltip, figure, ok);
    return svg;
  });
  if (cats) figureNode.dataset.categories = JSON.stringify(cats);
  return figureNode;
}

function hover(svg, g, m, ordered, fx, fy, describe, tooltip, figure, ok) {
  const dot = s("circle", { r: 4.5, fill: "transparent" });
  const layer = s("g", { class: "hover" }, dot);
  g.append(layer);
  svg.addEventListener("pointermove", (e) => {
    const box = svg.getBoundingClientRect();
    const mx = e.clientX - box.left - m.left;
    const my = e.clientY - box.top - m.top;
    let best = null;
    for (const { se, k, color } of ordered) {
      for (const p of se.points) {
        if (!ok(p[0], p[1])) continue;
        const d = (fx(p, k) - mx) ** 2 + (fy(p[1]) - my) ** 2;
        if (!best || d < best.d) best = { d, se, p, k, color };
      }
    }
    if (!best || best.d > 60 ** 2) {
      tooltip.hidden = true;
      dot.setAttribute("fill", "transparent");
      return;
    }
    dot.setAttribute("cx", fx(best.p, best.k));
    dot.setAttribute("cy", fy(best.p[1]));
    dot.setAttribute("fill", best.color);
    tooltip.textContent = describe(best.se, best.p);
    tooltip.hidden = false;
    const fb = figure.getBoundingClientRect();
    tooltip.style.left = `${box.left - fb.left + m.left + fx(best.p, best.k)}px`;
    tooltip.style.top = `${box.top - fb.top + m.top + fy(best.p[1])}px`;
  });
  svg.addEventListener("pointerleave", () => {
    tooltip.hidden = true;
    dot.setAttribute("fill", "transparent");
  });
}

function tableOf(series, xLabel, fmtX, fmtY) {
  const cell = (se, i) => {
    const v = fmtY(se.points[i][1]);
    const lo = se.low?.[i];
    return lo !== null && lo !== undefined && Number.isFinite(lo) ? `${v} (${fmtY(lo)} – ${fmtY(se.high[i])})` : v;
  };
  const xs = series.map((se) => se.points.map((p) => p[0]).join());
  const shared = series.length > 0 && xs.every((v) => v === xs[0]);
  if (shared) {
    return {
      columns: [xLabel, ...series.map((se) => se.name || "value")],
      rows: series[0].points.map((p, i) => [fmtX(p[0]), ...series.map((se) => cell(se, i))]),
    };
  }
  return {
    columns: ["series", xLabel, "value"],
    rows: series.flatMap((se) => se.points.map((p, i) => [se.name, fmtX(p[0]), cell(se, i)])),
  };
}

// ------------------------------------------------------------------ horizontal bars

/**
 * Bars: `{id, title, rows: [{label, segments: [{name, value, color}], strong}], x: {label, format, tick, max},
 * total: fn(row) -> label at the bar's end, markers: [{row, value, label}], height}`. Segments of a row stack.
 */
export function barChart(host, spec) {
  const names = [...new Set(spec.rows.flatMap((r) => r.segments.map((sg) => sg.name)))];
  const colorOf = (sg, i) => sg.color || PALETTE[names.indexOf(sg.name) % 10] || PALETTE[i % 10];
  const fmt = spec.x.format || String;
  const stacked = spec.rows.some((r) => r.segments.length > 1);
  const legend = stacked ? names.map((n) => {
    const sg = spec.rows.flatMap((r) => r.segments).find((x) => x.name === n);
    return [n, colorOf(sg, 0)];
  }) : [];
  const table = stacked ? {
    columns: ["", ...names, "total"],
    rows: spec.rows.map((r) => {
      const vals = names.map((n) => r.segments.find((sg) => sg.name === n)?.value);
      const total = r.segments.reduce((a, sg) => a + (sg.value || 0), 0);
      return [r.label, ...vals.map((v) => (v === undefined || v === null ? "–" : fmt(v))), fmt(total)];
    }),
  } : { columns: ["", spec.x.label], rows: spec.rows.map((r) => [r.label, fmt(r.segments[0]?.value)]) };
  const data = spec.rows.map((r) => ({ label: r.label, segments: r.segments.map(({ name, value }) => ({ name, value })) }));
  const label = `${spec.title || "bars"}: ${spec.rows.map((r) => `${r.label} ${fmt(r.segments.reduce((a, sg) => a + (sg.value || 0), 0))}`).join(", ")}`;
  return frame(host, { ...spec, legend, table, data }, (width, { tooltip, figure }) => {
    const barH = spec.barHeight || 22;
    const gap = 10;
    const labelW = Math.min(170, 12 + Math.max(...spec.rows.map((r) => r.label.length)) * 6.6);
    const totals = spec.rows.map((r) => r.segments.reduce((a, sg) => a + Math.max(0, sg.value || 0), 0));
    const endWidth = Math.max(0, ...spec.rows.map((r, i) => String(spec.total ? spec.total(r) : fmt(totals[i])).length));
    const m = { top: 6, right: Math.max(64, Math.min(200, 12 + endWidth * 6.4)), bottom: 38, left: labelW };
    const h = spec.rows.length * (barH + gap);
    const height = h + m.top + m.bottom;
    const w = width - m.left - m.right;
    const markerMax = Math.max(0, ...(spec.markers || []).map((mk) => mk.value));
    const x = linearScale(0, spec.x.max ?? Math.max(...totals, markerMax, 1e-12), w, false, { fixedMin: true, fixedMax: spec.x.max !== undefined });
    const svg = svgRoot(width, height, label);
    const g = s("g", { transform: `translate(${m.left},${m.top})` });
    svg.append(g);
    axisBottom(g, x.f, x.ticks, spec.x.tick || fmt, 0, h, w);
    g.append(text(w / 2, h + 32, spec.x.label, { class: "axis-label", "text-anchor": "middle" }));
    spec.rows.forEach((r, i) => {
      const y0 = i * (barH + gap) + gap / 2;
      g.append(text(-8, y0 + barH / 2 + 4, r.label, { "text-anchor": "end", class: r.strong ? "bar-label" : null }));
      let acc = 0;
      r.segments.forEach((sg, j) => {
        const v = Math.max(0, sg.value || 0);
        const rect = s("rect", {
          x: x.f(acc), y: y0, width: Math.max(0, x.f(acc + v) - x.f(acc)), height: barH, rx: 2,
          fill: colorOf(sg, j), opacity: spec.rows.some((o) => o.strong) && !r.strong ? 0.6 : 1,
        });
        rect.addEventListener("pointerenter", (e) => {
          tooltip.textContent = `${r.label}${sg.name ? ` · ${sg.name}` : ""}: ${fmt(sg.value)}`;
          tooltip.hidden = false;
          const fb = figure.getBoundingClientRect();
          const rb = e.target.getBoundingClientRect();
          tooltip.style.left = `${rb.left - fb.left + rb.width / 2}px`;
          tooltip.style.top = `${rb.top - fb.top}px`;
        });
        rect.addEventListener("pointerleave", () => { tooltip.hidden = true; });
        g.append(rect);
        acc += v;
      });
      const end = spec.total ? spec.total(r) : fmt(totals[i]);
      const marks = (spec.markers || []).filter((mk) => mk.row === r.label && Number.isFinite(mk.value)).map((mk) => mk.value);
      g.append(text(Math.max(x.f(acc), ...marks.map(x.f)) + 6, y0 + barH / 2 + 4, end, { class: "bar-label" }));
    });
    for (const mk of spec.markers || []) {
      const i = spec.rows.findIndex((r) => r.label === mk.row);
      if (i < 0 || !Number.isFinite(mk.value)) continue;
      const y0 = i * (barH + gap) + gap / 2;
      const px = x.f(mk.value);
      g.append(s("g", { class: "mark" }, s("line", { x1: px, x2: px, y1: y0 - 3, y2: y0 + barH + 3 })));
    }
    return svg;
  });
}

// ------------------------------------------------------------------ the hand-off timeline

/**
 * One request's prefill and KV transfer on a time axis: `{prefill_s, transfer_s, exposed_s, streaming}`. The
 * transfer ends `exposed_s` after the prefill; the part after the prefill is what the user waits for.
 */
export function timeline(host, r, fmtMs) {
  const end = r.prefill_s + r.exposed_s;
  const start = Math.max(0, end - r.transfer_s);
  const rows = [
    ["Prefill (GPU)", 0, r.prefill_s, "#4e79a7"],
    [r.streaming === "layer" ? "KV transfer, layer by layer" : "KV transfer, whole cache", start, end, "#f28e2b"],
  ];
  const data = { prefill_s: r.prefill_s, transfer_start_s: start, transfer_end_s: end, exposed_s: r.exposed_s };
  const table = {
    columns: ["", "starts", "ends"],
    rows: rows.map(([name, a, b]) => [name, fmtMs(a), fmtMs(b)]).concat([["exposed after the prefill", fmtMs(r.prefill_s), fmtMs(end)]]),
  };
  const label = `Timeline: prefill ends at ${fmtMs(r.prefill_s)}, the KV transfer runs from ${fmtMs(start)} to ${fmtMs(end)}; ${fmtMs(r.exposed_s)} exposed`;
  return frame(host, { id: "timeline", table, data }, (width) => {
    const m = { top: 26, right: 20, bottom: 34, left: 170 };
    const barH = 24;
    const h = rows.length * (barH + 14);
    const height = h + m.top + m.bottom;
    const w = width - m.left - m.right;
    const x = linearScale(0, Math.max(end, r.prefill_s) * 1.04, w, false, { fixedMin: true });
    const svg = svgRoot(width, height, label);
    const g = s("g", { transform: `translate(${m.left},${m.top})` });
    svg.append(g);
    axisBottom(g, x.f, x.ticks, (v) => `${Number((v * 1e3).toPrecision(4))} ms`, 0, h, w);
    const px0 = x.f(r.prefill_s);
    const px1 = x.f(end);
    if (px1 - px0 > 0.5) g.append(s("rect", { x: px0, y: -m.top, width: px1 - px0, height: h + m.top, fill: "var(--hot)", opacity: 0.14 }));
    // the exposed time, written above its shaded span (kept inside the plot)
    const exposedText = `exposed ${fmtMs(r.exposed_s)}`;
    const half = exposedText.length * 3.4;
    const cx = Math.min(Math.max((px0 + px1) / 2, half), w - half);
    g.append(text(cx, -10, exposedText, { "text-anchor": "middle", class: "bar-label", style: "fill: var(--hot)" }));
    rows.forEach(([name, a, b, color], i) => {
      const y0 = i * (barH + 14) + 6;
      g.append(text(-8, y0 + barH / 2 + 4, name, { "text-anchor": "end", class: "bar-label" }));
      g.append(s("rect", { x: x.f(a), y: y0, width: Math.max(1.5, x.f(b) - x.f(a)), height: barH, rx: 3, fill: color }));
    });
    g.append(s("line", { x1: px0, x2: px0, y1: 0, y2: h, stroke: "var(--ink)", "stroke-dasharray": "3 3", opacity: 0.6 }));
    return svg;
  });
}

// ------------------------------------------------------------------ scatter (points, some joined, some to pick)

/**
 * Points: `{id, title, x: {label, format, log, zero}, y: {...}, series: [{name, points: [{x, y, key, label}],
 * joined, faint, color, marker, strong}], onPick(point, series), pickable(point, series), height}`. A `faint` series is small light dots;
 * a `joined` one a line through its points (in their order) with markers; a `strong` one drawn on top, larger
 * and filled. With `onPick`, every point with a `key` of a non-faint series is a focusable button (its
 * `label` its title and accessible name; `pickable` may narrow which) that picks it on click, Enter or Space; each marker carries
 * `data-series` and `data-key`.
 */
export function scatterChart(host, spec) {
  const series = spec.series.filter((se) => se.points.length);
  const fmtX = spec.x.format || String;
  const fmtY = spec.y.format || String;
  const styles = new Map(spec.series.map((se, i) => [se, seriesStyle(se, i)]));
  const legend = series.map((se) => [se.name, styles.get(se).color, se.strong, { ...styles.get(se), dash: se.joined ? styles.get(se).dash : "0 100" }]);
  const data = spec.series.map((se) => ({ name: se.name, points: se.points.map((p) => [p.x, p.y]), keys: se.points.map((p) => p.key ?? null) }));
  const table = {
    columns: ["series", spec.x.label, spec.y.label],
    rows: series.flatMap((se) => se.points.map((p) => [p.label ? `${se.name}: ${p.label}` : se.name, fmtX(p.x), fmtY(p.y)])),
  };
  const label = `${spec.title || "chart"}: ${spec.y.label} against ${spec.x.label}, ${series.map((se) => `${se.name} (${se.points.length})`).join(", ")}`;
  return frame(host, { ...spec, table, legend, data }, (width, { tooltip, figure }) => {
    const height = spec.height || 280;
    const m = { top: 22, right: 18, bottom: 40, left: 14 };
    const okX = (v) => Number.isFinite(v) && (!spec.x.log || v > 0);
    const okY = (v) => Number.isFinite(v) && (!spec.y.log || v > 0);
    const all = series.flatMap((se) => se.points).filter((p) => okX(p.x) && okY(p.y));
    const yProbe = scale(all.map((p) => p.y), 100, true, spec.y);
    m.left = 22 + Math.max(...yProbe.ticks.map((t) => fmtY(t).length)) * 6.3;
    const w = width - m.left - m.right;
    const h = height - m.top - m.bottom;
    const xs = all.map((p) => p.x);
    const pad = xs.length ? (Math.max(...xs) - Math.min(...xs)) * 0.04 || Math.abs(xs[0]) * 0.05 || 1 : 0;
    const x = scale(spec.x.log ? xs : xs.concat(xs.length ? [Math.min(...xs) - pad, Math.max(...xs) + pad] : []), w, false, spec.x);
    const y = scale(all.map((p) => p.y), h, true, spec.y);
    const svg = svgRoot(width, height, label);
    const g = s("g", { transform: `translate(${m.left},${m.top})` });
    svg.append(g);
    axisLeft(g, y.f, y.ticks, fmtY, w, 0);
    axisBottom(g, x.f, x.ticks, fmtX, 0, h, w);
    g.append(text(w / 2, h + 34, spec.x.label, { class: "axis-label", "text-anchor": "middle" }));
    svg.append(text(4, 12, spec.y.label, { class: "axis-label" }));
    const ordered = series.map((se) => ({ se, style: styles.get(se) }));
    ordered.sort((a, b) => (a.se.faint ? 0 : a.se.strong ? 2 : 1) - (b.se.faint ? 0 : b.se.strong ? 2 : 1));
    const describe = (se, p) => `${p.label || se.name}: ${spec.x.label} ${fmtX(p.x)}, ${spec.y.label} ${fmtY(p.y)}`;
    for (const { se, style } of ordered) {
      const layer = s("g", { class: "points", "data-series": se.name });
      const pts = se.points.filter((p) => okX(p.x) && okY(p.y));
      if (se.joined && pts.length > 1) {
        const d = pts.map((p, i) => `${i ? "L" : "M"}${x.f(p.x).toFixed(1)},${y.f(p.y).toFixed(1)}`).join("");
        layer.append(s("path", { d, fill: "none", stroke: style.color, "stroke-width": 2, "stroke-dasharray": style.dash, "stroke-linejoin": "round" }));
      }
      for (const p of pts) {
        const px = x.f(p.x);
        const py = y.f(p.y);
        const mk = se.faint
          ? s("circle", { cx: px, cy: py, r: 3, fill: style.color, opacity: 0.28, class: "marker faint" })
          : marker(style.marker, px, py, se.strong ? style.size + 2.5 : style.size, style.color, !!se.strong);
        mk.dataset.series = se.name;
        if (p.key !== undefined && p.key !== null) mk.dataset.key = String(p.key);
        const pickable = spec.onPick && !se.faint && p.key !== undefined && p.key !== null && (!spec.pickable || spec.pickable(p, se));
        const node = pickable ? s("g", { class: "pick", tabindex: 0, role: "button", "aria-label": describe(se, p), "data-key": String(p.key), "data-series": se.name }, mk) : mk;
        const tip = s("title");
        tip.textContent = describe(se, p) + (pickable ? " (open its run)" : "");
        node.prepend(tip);
        const showTip = () => {
          tooltip.textContent = describe(se, p);
          tooltip.hidden = false;
          const fb = figure.getBoundingClientRect();
          const sb = svg.getBoundingClientRect();
          tooltip.style.left = `${sb.left - fb.left + m.left + px}px`;
          tooltip.style.top = `${sb.top - fb.top + m.top + py}px`;
        };
        node.addEventListener("pointerenter", showTip);
        node.addEventListener("pointerleave", () => { tooltip.hidden = true; });
        if (pickable) {
          node.addEventListener("focus", showTip);
          node.addEventListener("blur", () => { tooltip.hidden = true; });
          node.addEventListener("click", () => spec.onPick(p, se));
          node.addEventListener("keydown", (e) => {
            if (e.key !== "Enter" && e.key !== " ") return;
            e.preventDefault();
            spec.onPick(p, se);
          });
        }
        layer.append(node);
      }
      g.append(layer);
    }
    return svg;
  });
}
