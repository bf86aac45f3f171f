// DOM helpers: a small element builder, labelled form fields tied to scenario paths, and the display of the
// service's field errors next to the field they name.

/** `el("div", {class: "x", onclick: f}, child, "text")`: an element with attributes, listeners and children. */
export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith("on") && typeof v === "function") node.addEventListener(k.slice(2), v);
    else if (k === "class") node.className = v;
    else if (k === "text") node.textContent = v;
    else if (k === "html") node.innerHTML = v;
    else node.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) continue;
    node.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return node;
}

let ids = 0;
const uid = (prefix) => `${prefix}-${++ids}`;

/** A labelled field: `{label, path, kind: "select"|"number"|"text", options: [[value, text]], hint, id,
 * min, max, step, placeholder}`. The control carries `data-path` (the scenario or argument path it sets) and
 * `aria-describedby` pointing at its hint and its error line. */
export function field(spec) {
  const id = spec.id || uid("f");
  const errorId = `${id}-error`;
  const hintId = spec.hint ? `${id}-hint` : null;
  let control;
  if (spec.kind === "select") {
    control = el("select", { id, name: spec.name || spec.path });
    setOptions(control, spec.options || []);
  } else {
    control = el("input", {
      id,
      name: spec.name || spec.path,
      type: spec.kind === "number" ? "number" : "text",
      inputmode: spec.kind === "number" ? "decimal" : null,
      min: spec.min,
      max: spec.max,
      step: spec.step ?? (spec.kind === "number" ? "any" : null),
      placeholder: spec.placeholder,
      autocomplete: "off",
    });
  }
  control.dataset.path = spec.path;
  control.setAttribute("aria-describedby", [hintId, errorId].filter(Boolean).join(" "));
  return el(
    "div",
    { class: "field", "data-field": spec.path },
    el("label", { for: id }, spec.label),
    control,
    spec.hint ? el("p", { class: "hint", id: hintId }, spec.hint) : null,
    el("p", { class: "error", id: errorId, hidden: true, "aria-live": "polite" }),
  );
}

/** Replace a select's options with `[[value, text], ...]`, keeping its value when it still exists. */
export function setOptions(select, options) {
  const keep = select.value;
  select.replaceChildren(...options.map(([value, text]) => el("option", { value }, text)));
  if (options.some(([v]) => v === keep)) select.value = keep;
}

/** Remove every field error under `root`. */
export function clearErrors(root) {
  for (const c of root.querySelectorAll("[aria-invalid]")) c.removeAttribute("aria-invalid");
  for (const e of root.querySelectorAll(".field .error")) {
    e.textContent = "";
    e.hidden = true;
  }
}

/** The control under `root` that an error `path` names: the field with that path, else the first field inside
 * it ("prefill" -> "prefill.device"), else the nearest field that contains it. `alias` maps paths the API
 * uses to the path of the control that sets them. */
export function controlFor(root, path, alias = {}) {
  if (path === undefined || path === null) return null;
  const p = alias[path] ?? path;
  const controls = [...root.querySelectorAll("[data-path]")].filter((c) => !c.closest("[hidden]"));
  const exact = controls.find((c) => c.dataset.path === p);
  if (exact) return exact;
  if (!p) return null;
  const inside = controls.find((c) => c.dataset.path.startsWith(`${p}.`));
  if (inside) return inside;
  const containing = controls
    .filter((c) => p.startsWith(`${c.dataset.path}.`) || p.startsWith(`${c.dataset.path}[`))
    .sort((a, b) => b.dataset.path.length - a.dataset.path.length);
  return containing[0] || null;
}

/** Show each problem (`{path, message}`) next to the control its path names; returns the problems that no
 * control takes (for a general message). */
export function showErrors(root, problems, alias = {}) {
  const left = [];
  for (const p of problems) {
    const control = controlFor(root, p.path, alias);
    const line = control && document.getElementById(`${control.id}-error`);
    if (!line) {
      left.push(p);
      continue;
    }
    control.setAttribute("aria-invalid", "true");
    line.textContent = line.textContent ? `${line.textContent} ${p.message}` : p.message;
    line.hidden = false;
  }
  return left;
}

/** A list of problems for an error box ("path: message" once, even when the message repeats the path). */
export function problemList(problems) {
  return el(
    "ul",
    {},
    problems.map((p) => {
      const where = p.point !== undefined ? `point ${p.point} (${JSON.stringify(p.values)}): ` : "";
      const msg = p.path && !p.message.startsWith(p.path) ? `${p.path}: ${p.message}` : p.message;
      return el("li", {}, where + msg);
    }),
  );
}

/** Run `fn` at most once per `waitMs`, after the calls stop. */
export function debounce(fn, waitMs) {
  let t = null;
  return (...args) => {
    clearTimeout(t);
    t = setTimeout(() => fn(...args), waitMs);
  };
}

/** A <dl> figure card: label, value and unit, optional detail line. */
export function figure(key, label) {
  const value = el("span", { class: "value" });
  const unit = el("span", { class: "unit" });
  const detail = el("span", { class: "detail" });
  const node = el("div", { class: "figure", "data-figure": key }, el("dt", {}, label), el("dd", {}, value, unit, detail));
  return {
    node,
    set(v, u = "", d = "") {
      value.textContent = v;
      unit.textContent = u ? ` ${u}` : "";
      detail.textContent = d;
    },
  };
}

/** The value at a dotted `path` of an object (undefined when absent). */
export function getPath(obj, path) {
  let cur = obj;
  for (const part of path.split(".")) {
    if (cur === null || typeof cur !== "object" || !(part in cur)) return undefined;
    cur = cur[part];
  }
  return cur;
}

/** `obj` with `path` set to `value` (created as needed), or removed when `value` is undefined (and any
 * object left empty by it). Mutates and returns `obj`. */
export function setPath(obj, path, value) {
  const parts = path.split(".");
  const trail = [obj];
  let cur = obj;
  for (const part of parts.slice(0, -1)) {
    if (cur[part] === null || typeof cur[part] !== "object" || Array.isArray(cur[part])) {
      if (value === undefined) return obj;
      cur[part] = {};
    }
    cur = cur[part];
    trail.push(cur);
  }
  const last = parts[parts.length - 1];
  if (value === undefined) {
    delete cur[last];
    for (let i = parts.length - 2; i >= 0; i--) {
      if (Object.keys(trail[i + 1]).length) break;
      delete trail[i][parts[i]];
    }
  } else cur[last] = value;
  return obj;
}
