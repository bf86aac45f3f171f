// Calls to the kvwire service: JSON in and out, its error bodies as ApiError (with the field `path`), the bearer
// token when the service has one (asked for once, kept for the browser tab), Server-Sent Events over fetch.

const TOKEN_KEY = "kvwire-token";

/** An error answer of the service: `status`, `detail`, `path` (the field, as kvwire.ScenarioError.path) and
 * `extra` (every problem: a sweep's bad points each add one). */
export class ApiError extends Error {
  constructor(status, body) {
    const detail = body && typeof body === "object" ? body.detail : String(body || "");
    super(detail || `HTTP ${status}`);
    this.status = status;
    this.detail = detail || `HTTP ${status}`;
    this.path = (body && body.path) || "";
    this.extra = (body && Array.isArray(body.extra) && body.extra) || [];
  }

  /** Every problem as {path, message}: the `extra` entries, or the error itself. */
  problems() {
    const items = this.extra.filter((x) => x && x.message);
    if (!items.length) return [{ path: this.path, message: this.detail }];
    return items.map((x) => ({ path: x.key || "", message: x.message, point: x.point, values: x.values }));
  }
}

export function token() {
  return sessionStorage.getItem(TOKEN_KEY);
}

function headers(extra = {}) {
  const h = { ...extra };
  const t = token();
  if (t) h.Authorization = `Bearer ${t}`;
  return h;
}

let asking = null;

/** Ask for the token in the page's dialog (one dialog however many calls were refused). */
function askToken() {
  if (asking) return asking;
  const dialog = document.getElementById("token-dialog");
  asking = new Promise((resolve) => {
    const input = dialog.querySelector("input");
    input.value = "";
    dialog.addEventListener(
      "close",
      () => {
        asking = null;
        if (dialog.returnValue === "ok" && input.value.trim()) {
          sessionStorage.setItem(TOKEN_KEY, input.value.trim());
          resolve(true);
        } else resolve(false);
      },
      { once: true },
    );
    dialog.showModal();
  });
  return asking;
}

/** fetch() with the token; a 401 asks for it and tries once more. */
export async function send(url, init = {}) {
  const r = await fetch(url, { ...init, headers: headers(init.headers) });
  if (r.status === 401 && (await askToken())) return fetch(url, { ...init, headers: headers(init.headers) });
  return r;
}

async function parse(r) {
  const text = await r.text();
  let body = text;
  try {
    body = text ? JSON.parse(text) : null;
  } catch {
    // not JSON (a proxy's page, say): keep the text as the detail
  }
  if (!r.ok) throw new ApiError(r.status, body);
  return body;
}

/** GET a JSON document. */
export async function get(url, init = {}) {
  return parse(await send(url, { ...init, headers: { Accept: "application/json", ...(init.headers || {}) } }));
}

/** GET a text document. */
export async function getText(url, init = {}) {
  const r = await send(url, init);
  if (!r.ok) return parse(r);
  return r.text();
}

/** POST a JSON body; returns the parsed answer and its Location header. */
export async function post(url, body, init = {}) {
  const r = await send(url, {
    ...init,
    method: "POST",
    headers: { "Content-Type": "application/json", Accept: "application/json" },
    body: JSON.stringify(body),
  });
  const data = await parse(r);
  return { data, location: r.headers.get("location") };
}

/** DELETE; resolves to the status code. */
export async function del(url) {
  const r = await send(url, { method: "DELETE" });
  if (!r.ok) await parse(r);
  return r.status;
}

/** Server-Sent Events of `url`, as {event, data, id} objects, until the stream ends or `signal` aborts. */
export async function* events(url, signal) {
  const r = await send(url, { headers: { Accept: "text/event-stream" }, signal });
  if (!r.ok) await parse(r);
  const reader = r.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += value;
    let m;
    while ((m = /\r?\n\r?\n/.exec(buffer))) {
      const block = buffer.slice(0, m.index);
      buffer = buffer.slice(m.index + m[0].length);
      const fields = {};
      for (const line of block.split(/\r?\n/)) {
        if (!line || line.startsWith(":")) continue;
        const i = line.indexOf(":");
        const name = i < 0 ? line : line.slice(0, i);
        const v = i < 0 ? "" : line.slice(i + 1).replace(/^ /, "");
        fields[name] = name in fields ? `${fields[name]}\n${v}` : v;
      }
      if ("data" in fields) yield { event: fields.event || "message", data: fields.data, id: fields.id };
    }
  }
}

/** A download link for a service URL: a plain link, or, when the service has a token, one that fetches the
 * file with the token and saves it. */
export function downloadLink(url, filename, text) {
  const a = document.createElement("a");
  a.href = url;
  a.className = "button small";
  a.setAttribute("download", filename);
  a.textContent = text;
  a.addEventListener("click", async (e) => {
    if (!token()) return;
    e.preventDefault();
    const r = await send(url);
    if (!r.ok) return;
    const blob = URL.createObjectURL(await r.blob());
    const tmp = document.createElement("a");
    tmp.href = blob;
    tmp.download = filename;
    tmp.click();
    setTimeout(() => URL.revokeObjectURL(blob), 10_000);
  });
  return a;
}
