// Checks a value against a schema of the service's OpenAPI document (/schema/openapi.json), as you type: the
// keywords that document uses ($ref, type, enum, const, properties, required, additionalProperties, items,
// prefixItems, oneOf/anyOf). Problems come back as {path, message}, with paths written as the library writes
// them ("workload.arrivals.rate_per_s", "workload.trace.arrival_s[3]"). The service checks values and presets.

function jsonType(v) {
  if (v === null) return "null";
  if (Array.isArray(v)) return "array";
  if (typeof v === "number") return Number.isInteger(v) ? "integer" : "number";
  return typeof v; // string, boolean, object
}

function admits(type, actual) {
  return type === actual || (type === "number" && actual === "integer");
}

function join(path, key) {
  return typeof key === "number" ? `${path}[${key}]` : path ? `${path}.${key}` : key;
}

function describe(v) {
  const t = jsonType(v);
  if (t === "string") return `the string ${JSON.stringify(v.length > 40 ? `${v.slice(0, 40)}…` : v)}`;
  if (t === "object" || t === "array") return `an ${t}`;
  return `${t === "integer" ? "the number" : t === "number" ? "the number" : t} ${JSON.stringify(v)}`;
}

export class SchemaChecker {
  /** `doc`: the OpenAPI document; schemas are looked up in its components. */
  constructor(doc) {
    this.doc = doc;
  }

  resolve(schema) {
    let cur = schema;
    for (let i = 0; cur && cur.$ref && i < 32; i++) cur = this.doc.components.schemas[cur.$ref.split("/").pop()];
    return cur || {};
  }

  /** The problems of `value` against the component schema `name` (e.g. "ScenarioBody"). */
  check(value, name) {
    const out = [];
    this.walk(value, { $ref: `#/components/schemas/${name}` }, "", out);
    return out;
  }

  types(schema) {
    const sch = this.resolve(schema);
    const alts = sch.oneOf || sch.anyOf;
    if (alts) return alts.flatMap((a) => this.types(a));
    if (sch.type) return Array.isArray(sch.type) ? sch.type : [sch.type];
    if (sch.properties) return ["object"];
    return ["any"];
  }

  walk(value, schema, path, out) {
    const sch = this.resolve(schema);
    const alts = sch.oneOf || sch.anyOf;
    const actual = jsonType(value);
    if (alts) {
      const fitting = alts.filter((a) => this.types(a).some((t) => t === "any" || admits(t, actual)));
      if (!fitting.length) {
        const wanted = [...new Set(alts.flatMap((a) => this.types(a)))].join(" or ");
        out.push({ path, message: `expected ${wanted}, got ${describe(value)}` });
        return;
      }
      let firstProblems = null;
      for (const alt of fitting) {
        const problems = [];
        this.walk(value, alt, path, problems);
        if (!problems.length) return;
        firstProblems = firstProblems || problems;
      }
      out.push(...firstProblems);
      return;
    }
    if (sch.type) {
      const allowed = Array.isArray(sch.type) ? sch.type : [sch.type];
      if (!allowed.some((t) => admits(t, actual))) {
        out.push({ path, message: `expected ${allowed.join(" or ")}, got ${describe(value)}` });
        return;
      }
    }
    if (sch.enum && !sch.enum.some((e) => e === value)) {
      out.push({ path, message: `expected one of ${sch.enum.map((e) => JSON.stringify(e)).join(", ")}, got ${describe(value)}` });
      return;
    }
    if ("const" in sch && sch.const !== value) {
      out.push({ path, message: `expected ${JSON.stringify(sch.const)}, got ${describe(value)}` });
      return;
    }
    if (actual === "object") {
      const props = sch.properties || {};
      for (const key of sch.required || []) {
        if (!(key in value)) out.push({ path: join(path, key), message: "missing (required)" });
      }
      for (const [key, v] of Object.entries(value)) {
        if (key in props) this.walk(v, props[key], join(path, key), out);
        else if (sch.additionalProperties === false) {
          const known = Object.keys(props);
          out.push({ path: join(path, key), message: `unknown field, expected one of ${known.join(", ")}` });
        } else if (sch.additionalProperties && typeof sch.additionalProperties === "object") {
          this.walk(v, sch.additionalProperties, join(path, key), out);
        }
      }
    }
    if (actual === "array") {
      const prefix = sch.prefixItems || [];
      if (prefix.length && sch.items === undefined && value.length !== prefix.length) {
        out.push({ path, message: `expected ${prefix.length} items, got ${value.length}` });
      }
      value.forEach((v, i) => {
        if (i < prefix.length) this.walk(v, prefix[i], join(path, i), out);
        else if (sch.items && typeof sch.items === "object") this.walk(v, sch.items, join(path, i), out);
      });
    }
  }
}
