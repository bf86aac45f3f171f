// TOML for the scenario editor: parse(text) -> object and stringify(object) -> text. Covers TOML 1.0 except
// dates and times (a scenario has none): tables, arrays of tables, dotted and quoted keys, basic/literal and
// multi-line strings, integers (decimal, hex, octal, binary, underscores), floats (inf, nan), booleans, arrays
// and inline tables. Errors are TomlError with the 1-based line and column.

export class TomlError extends Error {
  constructor(message, line, column) {
    super(`line ${line}, column ${column}: ${message}`);
    this.line = line;
    this.column = column;
  }
}

const BARE = /^[A-Za-z0-9_-]+$/;

class Parser {
  constructor(text) {
    this.s = text.replace(/\r\n/g, "\n");
    this.i = 0;
    this.root = {};
    this.defined = new Set(); // tables given by a [header] or as a value: cannot be opened again
    this.implicit = new Set(); // tables created by a dotted key or header path
    this.arrays = new Set(); // arrays of tables (by object)
    this.frozen = new WeakSet(); // inline tables and static arrays: closed
  }

  fail(msg, at = this.i) {
    const before = this.s.slice(0, at);
    const line = before.split("\n").length;
    const column = at - before.lastIndexOf("\n");
    throw new TomlError(msg, line, column);
  }

  peek(n = 0) {
    return this.s[this.i + n];
  }

  ws() {
    while (this.peek() === " " || this.peek() === "\t") this.i++;
  }

  comment() {
    if (this.peek() === "#") {
      while (this.i < this.s.length && this.peek() !== "\n") {
        const c = this.s.charCodeAt(this.i);
        if ((c < 0x20 && c !== 9) || c === 0x7f) this.fail("control characters are not allowed in comments");
        this.i++;
      }
    }
  }

  eol() {
    this.ws();
    this.comment();
    if (this.i < this.s.length && this.peek() !== "\n") this.fail(`expected the end of the line, found ${JSON.stringify(this.peek())}`);
    this.i++;
  }

  // blank lines, comments and newlines inside arrays
  gap() {
    for (;;) {
      this.ws();
      this.comment();
      if (this.peek() === "\n") this.i++;
      else return;
    }
  }

  parse() {
    let table = this.root;
    while (this.i < this.s.length) {
      this.ws();
      const c = this.peek();
      if (c === "\n") {
        this.i++;
        continue;
      }
      if (c === "#") {
        this.comment();
        continue;
      }
      if (c === undefined) break;
      if (c === "[") table = this.header();
      else {
        this.keyValue(table);
        this.eol();
      }
    }
    return this.root;
  }

  key() {
    const parts = [];
    for (;;) {
      this.ws();
      const c = this.peek();
      if (c === '"') parts.push(this.basicString());
      else if (c === "'") parts.push(this.literalString());
      else {
        const start = this.i;
        while (this.i < this.s.length && /[A-Za-z0-9_-]/.test(this.peek())) this.i++;
        if (start === this.i) this.fail(c === undefined || c === "\n" ? "expected a key" : `unexpected ${JSON.stringify(c)} in a key`);
        parts.push(this.s.slice(start, this.i));
      }
      this.ws();
      if (this.peek() !== ".") return parts;
      this.i++;
    }
  }

  descend(table, parts, at, forHeader) {
    let cur = table;
    for (const part of parts) {
      if (!(part in cur)) {
        cur[part] = {};
        this.implicit.add(cur[part]);
      }
      let next = cur[part];
      if (Array.isArray(next) && this.arrays.has(next) && forHeader) next = next[next.length - 1];
      if (next === null || typeof next !== "object" || Array.isArray(next) || this.frozen.has(next)) {
        this.fail(`${JSON.stringify(part)} is already a value, not a table`, at);
      }
      if (!forHeader && this.defined.has(next) && !this.implicit.has(next)) {
        this.fail(`table ${JSON.stringify(part)} is already defined`, at);
      }
      cur = next;
    }
    return cur;
  }

  header() {
    const at = this.i;
    const array = this.peek(1) === "[";
    this.i += array ? 2 : 1;
    const parts = this.key();
    if (this.peek() !== "]" || (array && this.peek(1) !== "]")) this.fail(`expected ${array ? "]]" : "]"} to close the table header`);
    this.i += array ? 2 : 1;
    this.eol();
    const parent = this.descend(this.root, parts.slice(0, -1), at, true);
    const last = parts[parts.length - 1];
    if (array) {
      if (!(last in parent)) {
        parent[last] = [];
        this.arrays.add(parent[last]);
      }
      if (!this.arrays.has(parent[last])) this.fail(`${JSON.stringify(last)} is already a value, not an array of tables`, at);
      const t = {};
      parent[last].push(t);
      return t;
    }
    if (last in parent) {
      const t = parent[last];
      if (t === null || typeof t !== "object" || Array.isArray(t) || this.frozen.has(t)) this.fail(`${JSON.stringify(last)} is already a value, not a table`, at);
      if (!this.implicit.has(t) || this.defined.has(t)) this.fail(`table [${parts.join(".")}] is defined twice`, at);
      this.implicit.delete(t);
      this.defined.add(t);
      return t;
    }
    const t = {};
    parent[last] = t;
    this.defined.add(t);
    return t;
  }

  keyValue(table) {
    const at = this.i;
    const parts = this.key();
    if (this.peek() !== "=") this.fail(`expected "=" after the key ${parts.join(".")}`);
    this.i++;
    this.ws();
    const target = this.descend(table, parts.slice(0, -1), at, false);
    const last = parts[parts.length - 1];
    if (last in target) this.fail(`${JSON.stringify(parts.join("."))} is defined twice`, at);
    const v = this.value();
    target[last] = v;
    if (v && typeof v === "object" && !Array.isArray(v)) this.defined.add(v);
  }

  value() {
    const c = this.peek();
    if (c === '"') return this.s.startsWith('"""', this.i) ? this.multiBasic() : this.basicString();
    if (c === "'") return this.s.startsWith("'''", this.i) ? this.multiLiteral() : this.literalString();
    if (c === "[") return this.array();
    if (c === "{") return this.inlineTable();
    if (this.s.startsWith("true", this.i) && !/[A-Za-z0-9_]/.test(this.s[this.i + 4] || "")) {
      this.i += 4;
      return true;
    }
    if (this.s.startsWith("false", this.i) && !/[A-Za-z0-9_]/.test(this.s[this.i + 5] || "")) {
      this.i += 5;
      return false;
    }
    return this.number();
  }

  number() {
    const start = this.i;
    const m = /^[+-]?(inf|nan)|^0x[0-9A-Fa-f_]+|^0o[0-7_]+|^0b[01_]+|^[+-]?[0-9_]+(\.[0-9_]+)?([eE][+-]?[0-9_]+)?/.exec(this.s.slice(this.i));
    if (!m || !m[0]) {
      const c = this.peek();
      this.fail(c === undefined || c === "\n" ? "expected a value" : `unexpected ${JSON.stringify(c)}: not a TOML value`);
    }
    const raw = m[0];
    this.i += raw.length;
    if (/^[0-9]{4}-/.test(this.s.slice(start, start + 5)) || this.peek() === ":") this.fail("dates and times are not supported in a scenario", start);
    if (/inf$/.test(raw)) return raw.startsWith("-") ? -Infinity : Infinity;
    if (/nan$/.test(raw)) return NaN;
    const underscores = /(^|[^0-9A-Fa-f])_|_($|[^0-9A-Fa-f])|__/;
    if (underscores.test(raw.replace(/^0[xob]/, ""))) this.fail(`misplaced underscore in ${raw}`, start);
    const clean = raw.replace(/_/g, "");
    if (/^0[xob]/.test(clean)) {
      const base = { x: 16, o: 8, b: 2 }[clean[1]];
      return parseInt(clean.slice(2), base);
    }
    if (/^[+-]?0[0-9]/.test(clean)) this.fail(`leading zeros are not allowed: ${raw}`, start);
    if (/[.eE]/.test(clean)) {
      if (/\.([eE]|$)/.test(clean) || /^[+-]?\./.test(clean)) this.fail(`a float needs digits on both sides of the point: ${raw}`, start);
      return parseFloat(clean);
    }
    const n = Number(clean);
    if (!Number.isSafeInteger(n)) this.fail(`integer ${raw} does not fit in a double exactly`, start);
    return n;
  }

  escape() {
    const c = this.s[this.i++];
    const simple = { b: "\b", t: "\t", n: "\n", f: "\f", r: "\r", '"': '"', "\\": "\\", e: "\u001b" };
    if (c in simple) return simple[c];
    if (c === "u" || c === "U") {
      const n = c === "u" ? 4 : 8;
      const hex = this.s.slice(this.i, this.i + n);
      if (!/^[0-9A-Fa-f]+$/.test(hex) || hex.length !== n) this.fail(`bad \\${c} escape`);
      this.i += n;
      const cp = parseInt(hex, 16);
      if (cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) this.fail(`\\${c}${hex} is not a Unicode scalar value`);
      return String.fromCodePoint(cp);
    }
    this.fail(`unknown escape \\${c}`, this.i - 2);
  }

  basicString() {
    this.i++;
    let out = "";
    for (;;) {
      const c = this.s[this.i];
      if (c === undefined || c === "\n") this.fail("unterminated string");
      this.i++;
      if (c === '"') return out;
      if (c === "\\") out += this.escape();
      else out += c;
    }
  }

  literalString() {
    this.i++;
    const end = this.s.indexOf("'", this.i);
    const nl = this.s.indexOf("\n", this.i);
    if (end < 0 || (nl >= 0 && nl < end)) this.fail("unterminated string");
    const out = this.s.slice(this.i, end);
    this.i = end + 1;
    return out;
  }

  multiBasic() {
    this.i += 3;
    if (this.peek() === "\n") this.i++;
    let out = "";
    for (;;) {
      if (this.i >= this.s.length) this.fail("unterminated multi-line string");
      if (this.s.startsWith('"""', this.i)) {
        let q = 3;
        while (this.s[this.i + q] === '"' && q < 5) q++;
        out += '"'.repeat(q - 3);
        this.i += q;
        return out;
      }
      const c = this.s[this.i++];
      if (c === "\\") {
        if (/^[ \t]*\n/.test(this.s.slice(this.i))) {
          while (/[ \t\n]/.test(this.peek() || "")) this.i++;
        } else out += this.escape();
      } else out += c;
    }
  }

  multiLiteral() {
    this.i += 3;
    if (this.peek() === "\n") this.i++;
    const end = this.s.indexOf("'''", this.i);
    if (end < 0) this.fail("unterminated multi-line string");
    let q = 3;
    while (this.s[end + q] === "'" && q < 5) q++;
    const out = this.s.slice(this.i, end) + "'".repeat(q - 3);
    this.i = end + q;
    return out;
  }

  array() {
    this.i++;
    const out = [];
    for (;;) {
      this.gap();
      if (this.peek() === "]") {
        this.i++;
        break;
      }
      out.push(this.value());
      this.gap();
      if (this.peek() === ",") {
        this.i++;
        continue;
      }
      if (this.peek() === "]") {
        this.i++;
        break;
      }
      this.fail(this.peek() === undefined ? "unterminated array" : `expected "," or "]" in an array, found ${JSON.stringify(this.peek())}`);
    }
    this.frozen.add(out);
    return out;
  }

  inlineTable() {
    this.i++;
    const t = {};
    this.ws();
    if (this.peek() === "}") {
      this.i++;
      this.frozen.add(t);
      return t;
    }
    for (;;) {
      this.keyValue(t);
      this.ws();
      if (this.peek() === ",") {
        this.i++;
        continue;
      }
      if (this.peek() === "}") {
        this.i++;
        break;
      }
      this.fail(`expected "," or "}" in an inline table, found ${JSON.stringify(this.peek() ?? "the end")}`);
    }
    this.frozen.add(t);
    return t;
  }
}

/** The object a TOML document describes (throws TomlError). */
export function parse(text) {
  return new Parser(text).parse();
}

function key(k) {
  return BARE.test(k) ? k : JSON.stringify(k);
}

function scalar(v, where) {
  if (typeof v === "string") return JSON.stringify(v);
  if (typeof v === "boolean") return String(v);
  if (typeof v === "number") {
    if (Number.isNaN(v)) return "nan";
    if (!Number.isFinite(v)) return v > 0 ? "inf" : "-inf";
    return String(v);
  }
  if (Array.isArray(v)) return `[${v.filter((x) => x !== null).map((x) => scalar(x, where)).join(", ")}]`;
  if (v && typeof v === "object") {
    const items = Object.entries(v).filter(([, x]) => x !== null);
    return items.length ? `{ ${items.map(([k, x]) => `${key(k)} = ${scalar(x, where)}`).join(", ")} }` : "{}";
  }
  throw new Error(`${where}: TOML cannot hold ${v}`);
}

const isTable = (v) => v !== null && typeof v === "object" && !Array.isArray(v);

/** The TOML text of an object: plain values first, then one [table] per nested object (nulls are left out,
 * as TOML has none; arrays of objects become arrays of inline tables). */
export function stringify(obj) {
  const out = [];
  const emit = (o, path) => {
    const plain = Object.entries(o).filter(([, v]) => v !== null && !isTable(v));
    const tables = Object.entries(o).filter(([, v]) => isTable(v));
    if (path.length && (plain.length || !tables.length)) out.push(`${out.length ? "\n" : ""}[${path.map(key).join(".")}]`);
    for (const [k, v] of plain) out.push(`${key(k)} = ${scalar(v, [...path, k].join("."))}`);
    for (const [k, v] of tables) emit(v, [...path, k]);
  };
  emit(obj, []);
  return `${out.join("\n")}\n`;
}
