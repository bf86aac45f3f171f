// Intervals and orders for the sweep charts, the same as the library's (kvwire.planning.intervals and
// kvwire.planning.sweep_view): a Wilson score interval for SLO attainment (inside [0, 1]), a Student-t interval
// clipped to what the quantity can be for the rest (latencies >= 0, busy shares in [0, 1]); link presets in
// bandwidth order, numbers numerically, other values in the sweep's order.

/** The 0.975 quantile of the standard normal distribution. */
export const Z_975 = 1.959963984540054;

/** The 0.975 quantile of Student's t with `dof` whole degrees of freedom: bisection on the closed-form CDF
 * (Abramowitz & Stegun 26.7.3-4), as kvwire.planning.sweep.t_quantile_975. */
export function tQuantile975(dof) {
  const central = (t) => {
    const theta = Math.atan(t / Math.sqrt(dof));
    const s = Math.sin(theta);
    const c2 = Math.cos(theta) ** 2;
    if (dof % 2 === 1) {
      let term = Math.cos(theta);
      let total = 0;
      if (dof > 1) {
        total = term;
        for (let k = 3; k < dof - 1; k += 2) {
          term *= (c2 * (k - 1)) / k;
          total += term;
        }
      }
      return (2 / Math.PI) * (theta + s * total);
    }
    let term = 1;
    let total = 1;
    for (let k = 2; k < dof - 1; k += 2) {
      term *= (c2 * (k - 1)) / k;
      total += term;
    }
    return s * total;
  };
  let lo = 0;
  let hi = 1;
  while (central(hi) < 0.95) hi *= 2;
  for (let i = 0; i < 200; i++) {
    const mid = 0.5 * (lo + hi);
    if (central(mid) < 0.95) lo = mid;
    else hi = mid;
    if (hi - lo <= 1e-15 * hi) break;
  }
  return 0.5 * (lo + hi);
}

/** Wilson's score interval of a proportion `p` over `n` trials (Wilson 1927): [low, high], inside [0, 1]. */
export function wilson(p, n, z = Z_975) {
  const z2 = z * z;
  const centre = (p + z2 / (2 * n)) / (1 + z2 / n);
  const half = (z / (1 + z2 / n)) * Math.sqrt((p * (1 - p)) / n + z2 / (4 * n * n));
  return [Math.min(Math.max(0, centre - half), p), Math.max(Math.min(1, centre + half), p)];
}

const finite = (values) => values.filter((v) => v !== null && v !== undefined && Number.isFinite(v));
const mean = (v) => v.reduce((a, b) => a + b, 0) / v.length;
const variance = (v) => {
  const m = mean(v);
  return v.reduce((a, b) => a + (b - m) ** 2, 0) / (v.length - 1);
};

/** Columns that are shares in [0, 1]. */
export function isShare(metric) {
  return ["slo.attainment", "load.admitted_fraction", "load.handoff_fraction", "link.transit_bound_fraction",
    "prefix_cache.hit_token_ratio", "hotspot.utilisation"].includes(metric) || metric.startsWith("utilisation.")
    || [".compute_bound_fraction", ".power_capped_fraction", ".mbu", ".mfu"].some((s) => metric.endsWith(s));
}

/** [mean, low, high] of SLO attainment over replicates: Wilson around the mean over an effective number of
 * requests min(N, p(1-p)k/s²) (N: the replicates' measured requests, or k without them). */
export function attainmentInterval(values, measured) {
  const v = finite(values);
  const k = v.length;
  if (!k) return [NaN, NaN, NaN];
  const p = Math.min(1, Math.max(0, mean(v)));
  if (k === 1) return [p, p, p];
  let total = k;
  if (measured && measured.length === values.length && measured.every((m) => Number.isFinite(m))) {
    const sum = measured.reduce((a, b) => a + b, 0);
    if (sum > 0) total = sum;
  }
  const s2 = variance(v);
  let n = s2 <= 0 ? total : Math.min(total, (p * (1 - p) * k) / s2);
  if (!(n > 0)) n = k;
  return [p, ...wilson(p, n)];
}

/** [mean, low, high]: the 95% t interval of the mean, clipped to [lo, hi]. */
export function meanInterval(values, bounds = [-Infinity, Infinity]) {
  const v = finite(values);
  if (!v.length) return [NaN, NaN, NaN];
  const c = mean(v);
  if (v.length === 1) return [c, c, c];
  const half = (tQuantile975(v.length - 1) * Math.sqrt(variance(v))) / Math.sqrt(v.length);
  return [c, Math.min(c, Math.max(bounds[0], c - half)), Math.max(c, Math.min(bounds[1], c + half))];
}

/** [mean, low, high] of `metric` over a point's replicates (see the module comment). */
export function interval(metric, values, measured) {
  if (metric === "slo.attainment") return attainmentInterval(values, measured);
  if (isShare(metric)) return meanInterval(values, [0, 1]);
  const v = finite(values);
  return meanInterval(values, !v.length || Math.min(...v) >= 0 ? [0, Infinity] : [-Infinity, Infinity]);
}

/** A link value's aggregate bandwidth in GB/s (bandwidth x NICs x NIC efficiency), or null. */
export function linkBandwidth(value, links) {
  let spec = null;
  if (typeof value === "string" && links[value]) spec = links[value];
  else if (typeof value === "string" && value.startsWith("{")) {
    try {
      const d = JSON.parse(value);
      if (d && links[d.preset]) spec = { ...links[d.preset], ...d };
    } catch {
      return null;
    }
  } else if (value && typeof value === "object" && links[value.preset]) spec = { ...links[value.preset], ...value };
  if (!spec) return null;
  return spec.bandwidth_gb_per_s * (spec.nics ?? 1) * (spec.nic_efficiency ?? 1);
}

const isLinkField = (name) => ["link", "link.preset"].includes(name) || name.endsWith(".link") || name.endsWith(".link.preset");

/** A value as a key and a label: strings as they are, the rest as JSON ("8", "true", '{"preset": ...}'). */
export const valueKey = (v) => (typeof v === "string" ? v : JSON.stringify(v));

/** The distinct values of field `name` in a reader's order: numbers numerically, links by bandwidth (slowest
 * first, unknown ones after), false before true, numeric text numerically, other values as they come. */
export function valueOrder(name, values, links = {}) {
  const seen = new Map();
  for (const v of values) if (!seen.has(valueKey(v))) seen.set(valueKey(v), v);
  const distinct = [...seen.values()];
  const present = distinct.filter((v) => v !== null && v !== undefined);
  const tail = distinct.length > present.length ? [null] : [];
  if (present.every((v) => typeof v === "number")) return [...present].sort((a, b) => a - b).concat(tail);
  if (present.every((v) => typeof v === "boolean")) return [...present].sort((a, b) => Number(a) - Number(b)).concat(tail);
  if (isLinkField(name)) {
    const ranked = present.map((v, i) => ({ v, i, bw: linkBandwidth(v, links) }));
    const known = ranked.filter((r) => r.bw !== null).sort((a, b) => a.bw - b.bw || a.i - b.i);
    return known.map((r) => r.v).concat(ranked.filter((r) => r.bw === null).map((r) => r.v), tail);
  }
  const nums = present.map((v) => (typeof v === "string" && v.trim() !== "" ? Number(v) : NaN));
  if (present.length && nums.every((n) => Number.isFinite(n))) {
    return present.map((v, i) => [nums[i], i, v]).sort((a, b) => a[0] - b[0] || a[1] - b[1]).map((r) => r[2]).concat(tail);
  }
  return present.concat(tail);
}
