//! The per-request part of the summary, accumulated row by row as requests finish (bounded-memory runs,
//! `keep_requests=False` in Python), so that no per-request table is needed.
//!
//! It computes exactly what `python/kvwire/summary.py` computes from the table's columns: counts, the
//! measured set's SLO attainment and arrival window, the stage means, output tokens and mean E2E of the
//! completed requests — and the latency statistics of `ttft_s`, `tpot_s`, `e2e_s` (measured requests) and
//! `handoff_s` (every transferred request) from a [`LogSketch`]: exact count, exact max, a mean from a
//! double-double sum (correctly rounded in practice, where the table's mean is numpy's pairwise sum: both
//! agree to ~1e-15 relative), and percentiles within [`SKETCH_RELATIVE_ERROR`] of numpy's "linear"
//! percentiles of the same values (`sketch.rs` proves the bound).

use super::exact::ExactSum;
use super::itl::Quantiles;
use super::sketch::LogSketch;
use super::table::RequestTable;

/// Relative error bound of every percentile a [`LogSketch`] reports, against numpy's "linear" percentile of
/// the exact (non-negative) values: 2⁻¹³ ≈ 1.22e-4 (the ITL histogram's bound too).
pub const SKETCH_RELATIVE_ERROR: f64 = super::sketch::RELATIVE_ERROR;

/// Count, sum, min and max of a stream of values: the mean kept inside [min, max] like the table's.
#[derive(Clone, Copy, Debug, Default)]
pub struct Moments {
    pub count: u64,
    pub sum: ExactSum,
    pub min: f64,
    pub max: f64,
}

impl Moments {
    #[inline]
    pub fn add(&mut self, x: f64) {
        if self.count == 0 {
            self.min = x;
            self.max = x;
        } else {
            self.min = self.min.min(x);
            self.max = self.max.max(x);
        }
        self.count += 1;
        self.sum.add(x);
    }

    /// The mean, clamped to [min, max]; `None` when empty.
    pub fn mean(&self) -> Option<f64> {
        (self.count > 0).then(|| (self.sum.value() / self.count as f64).clamp(self.min, self.max))
    }
}

/// The stages of `summary.stages`, in order.
pub const STAGES: [&str; 6] =
    ["prefill_queue_s", "prefill_s", "kv_wait_s", "kv_transfer_s", "decode_queue_s", "decode_s"];

/// Row-by-row accumulator of the per-request figures of the summary.
#[derive(Clone, Debug)]
pub struct RowSummary {
    ttft_slo_s: f64,
    tpot_slo_s: f64,
    pub total: u64,
    pub over_context: u64,
    pub local_decode: u64,
    pub measured: u64,
    /// Measured requests meeting both SLOs.
    pub slo_met: u64,
    /// Arrival times of the measured requests (min and max: the goodput window).
    pub measured_arrival: Moments,
    /// Σ output tokens of completed requests.
    pub output_tokens_done: u64,
    /// E2E of every completed request (Little's law's W).
    pub e2e_done: Moments,
    /// Per stage, over the measured requests that had it.
    pub stages: [Moments; 6],
    pub ttft: LogSketch,
    pub tpot: LogSketch,
    pub e2e: LogSketch,
    pub handoff: LogSketch,
}

impl RowSummary {
    pub fn new(ttft_slo_s: f64, tpot_slo_s: f64) -> Self {
        RowSummary {
            ttft_slo_s,
            tpot_slo_s,
            total: 0,
            over_context: 0,
            local_decode: 0,
            measured: 0,
            slo_met: 0,
            measured_arrival: Moments::default(),
            output_tokens_done: 0,
            e2e_done: Moments::default(),
            stages: [Moments::default(); 6],
            ttft: LogSketch::default(),
            tpot: LogSketch::default(),
            e2e: LogSketch::default(),
            handoff: LogSketch::default(),
        }
    }

    /// Account the finished row `i` of `t` (completed or rejected: nothing will change it any more).
    pub fn add(&mut self, t: &RequestTable, i: usize) {
        self.total += 1;
        self.over_context += t.over_context[i] as u64;
        self.local_decode += t.local_decode[i] as u64;
        let a = t.arrival_s[i];
        let out = t.output_tokens[i];
        let first = t.first_token_s[i];
        let seen = if t.first_token_seen_s.is_empty() { first } else { t.first_token_seen_s[i] };
        let finish = t.finish_s[i];
        let handoff = t.kv_ready_s[i] - first;
        if !handoff.is_nan() {
            self.handoff.record(handoff);
        }
        if !finish.is_nan() {
            self.output_tokens_done += out as u64;
            self.e2e_done.add(finish - a);
        }
        if !t.measured[i] {
            return;
        }
        self.measured += 1;
        self.measured_arrival.add(a);
        let ttft = seen - a;
        let tpot = if out >= 2 { (finish - seen) / (out as f64 - 1.0) } else { f64::NAN };
        let e2e = finish - a;
        for (sketch, v) in [(&mut self.ttft, ttft), (&mut self.tpot, tpot), (&mut self.e2e, e2e)] {
            if !v.is_nan() {
                sketch.record(v);
            }
        }
        // NaN compares false, as the table's nulls do.
        if ttft <= self.ttft_slo_s && (tpot.is_nan() || tpot <= self.tpot_slo_s) {
            self.slo_met += 1;
        }
        let (ps, ks, kr, ds) = (t.prefill_start_s[i], t.kv_start_s[i], t.kv_ready_s[i], t.decode_start_s[i]);
        // A request decoded where it was prefilled has no KV arrival: it waited 0 for it (NaN if it never
        // decoded: `ds · 0`, as the table's `ds − ds`).
        let decode_queue = if kr.is_nan() { ds * 0.0 } else { ds - kr };
        let spans = [ps - a, first - ps, ks - first, kr - ks, decode_queue, finish - ds];
        for (m, v) in self.stages.iter_mut().zip(spans) {
            if !v.is_nan() {
                m.add(v);
            }
        }
    }

    /// The figures as JSON (`None`/null where a figure does not exist).
    pub fn to_json(&self) -> serde_json::Value {
        let q = |s: &LogSketch| quantiles_json(&s.quantiles());
        let moments = |m: &Moments| {
            serde_json::json!({
                "count": m.count, "sum": m.sum.value(), "mean": m.mean(),
                "min": (m.count > 0).then_some(m.min), "max": (m.count > 0).then_some(m.max),
            })
        };
        let stages: serde_json::Map<String, serde_json::Value> =
            STAGES.iter().zip(&self.stages).map(|(name, m)| (name.to_string(), moments(m))).collect();
        serde_json::json!({
            "total": self.total,
            "over_context": self.over_context,
            "local_decode": self.local_decode,
            "measured": self.measured,
            "slo_met": self.slo_met,
            "measured_arrival": moments(&self.measured_arrival),
            "output_tokens_done": self.output_tokens_done,
            "e2e_done": moments(&self.e2e_done),
            "stages": stages,
            "latency": {
                "ttft_s": q(&self.ttft), "tpot_s": q(&self.tpot), "e2e_s": q(&self.e2e), "handoff_s": q(&self.handoff),
            },
            "relative_error": SKETCH_RELATIVE_ERROR,
        })
    }
}

/// count, mean, p50 … p99_9, max as JSON.
pub fn quantiles_json(q: &Quantiles) -> serde_json::Value {
    serde_json::json!({
        "count": q.count, "mean": q.mean, "p50": q.p50, "p90": q.p90, "p95": q.p95,
        "p99": q.p99, "p99_9": q.p99_9, "max": q.max,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The double-double sum keeps what plain summation loses: 1 + 2⁻⁵³ + 2⁻⁵³ = 1 + 2⁻⁵² exactly.
    #[test]
    fn exact_sum_keeps_low_order_terms() {
        let tiny = 2f64.powi(-53);
        let mut s = ExactSum::default();
        for v in [1.0, tiny, tiny] {
            s.add(v);
        }
        assert_eq!(s.value(), 1.0 + 2f64.powi(-52));
        assert_eq!((1.0 + tiny) + tiny, 1.0, "premise: plain summation loses both");
    }

    /// Moments of a known set: mean 2.5, min 1, max 4; the mean of one repeated value is that value.
    #[test]
    fn moments_of_known_values() {
        let mut m = Moments::default();
        assert_eq!(m.mean(), None);
        for v in [4.0, 1.0, 2.0, 3.0] {
            m.add(v);
        }
        assert_eq!((m.count, m.min, m.max, m.mean()), (4, 1.0, 4.0, Some(2.5)));
        let mut m = Moments::default();
        for _ in 0..1000 {
            m.add(0.1);
        }
        assert_eq!(m.mean(), Some(0.1));
    }
}
