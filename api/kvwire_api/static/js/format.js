// Number formatting for the page: one place, so every figure reads the same way (en-US grouping, SI units).
// Rounding is Intl.NumberFormat's (half away from zero on the exact binary value).

const cache = new Map();

/** `x` with exactly `digits` decimals and thousands separators ("1,234.5"). */
export function fixed(x, digits = 1) {
  if (x === null || x === undefined || !Number.isFinite(x)) return "–";
  let f = cache.get(digits);
  if (!f) {
    f = new Intl.NumberFormat("en-US", { minimumFractionDigits: digits, maximumFractionDigits: digits });
    cache.set(digits, f);
  }
  return f.format(x);
}

/** An integer with separators ("131,072"). */
export const int = (x) => fixed(x, 0);

/** Decimals for a time or size shown on a card: 1 from 10 up, 2 from 1, 3 below ("85.9", "1.36", "0.596"). */
export function adaptiveDigits(x) {
  const a = Math.abs(x);
  if (a >= 10 || a === 0) return 1;
  if (a >= 1) return 2;
  return 3;
}

/** Seconds as milliseconds, adaptive decimals: [number text, "ms"]. */
export function msParts(seconds) {
  const ms = seconds * 1e3;
  return [fixed(ms, adaptiveDigits(ms)), "ms"];
}

/** Seconds as a millisecond string with `digits` decimals ("85.9 ms"). */
export function ms(seconds, digits = 1) {
  if (seconds === null || seconds === undefined) return "–";
  return `${fixed(seconds * 1e3, digits)} ms`;
}

/** Bytes in decimal units, one decimal (GB with two): [number text, unit]. */
export function bytesParts(b) {
  if (b >= 1e12) return [fixed(b / 1e12, 2), "TB"];
  if (b >= 1e9) return [fixed(b / 1e9, 2), "GB"];
  if (b >= 1e6) return [fixed(b / 1e6, 1), "MB"];
  if (b >= 1e3) return [fixed(b / 1e3, 1), "kB"];
  return [int(b), "B"];
}

/** A share as a percentage with one decimal ("64.4%"). */
export function pct(x, digits = 1) {
  if (x === null || x === undefined || !Number.isFinite(x)) return "–";
  return `${fixed(x * 100, digits)}%`;
}

/** A compact axis label: 1,500 → "1.5k", 2e6 → "2M", 0.002 → "0.002". */
export function compact(x) {
  const a = Math.abs(x);
  if (a >= 1e6) return `${trim(x / 1e6)}M`;
  if (a >= 1e3) return `${trim(x / 1e3)}k`;
  return trim(x);
}

function trim(x) {
  return String(Number(x.toPrecision(4)));
}

/** A time of day from epoch seconds ("14:03:27"), with the date when it is not today. */
export function when(epochS) {
  const d = new Date(epochS * 1000);
  const today = new Date();
  const time = d.toLocaleTimeString("en-GB", { hour12: false });
  if (d.toDateString() === today.toDateString()) return time;
  return `${d.toISOString().slice(0, 10)} ${time}`;
}

/** A duration in seconds, short ("3 s", "2 min 5 s"). */
export function duration(s) {
  if (s === null || s === undefined || !Number.isFinite(s)) return "–";
  if (s < 60) return `${fixed(s, s < 10 ? 1 : 0)} s`;
  const m = Math.floor(s / 60);
  return `${m} min ${Math.round(s - 60 * m)} s`;
}
