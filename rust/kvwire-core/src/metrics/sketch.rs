//! A mergeable quantile sketch of non-negative values with a proven relative error (the latency metrics of a
//! streamed run, which keeps no per-request table).
//!
//! Log buckets in the style of DDSketch: a value's bucket is its binary exponent and the top
//! [`MANTISSA_BITS`] = 12 bits of its mantissa, so a bucket spans `[B, B + 2^(e−12))` for values in
//! `[2^e, 2^(e+1))`; only a count is kept per bucket (4 bytes; one 16 KiB page per binade touched). A bucket
//! reads as its midpoint, which is within half a bucket, `2^(e−13) ≤ 2⁻¹³·v`, of every value `v` in it.
//!
//! **Error bound.** Replacing every value by its bucket's midpoint is a non-decreasing map, so the k-th
//! smallest midpoint is the midpoint of the k-th smallest value; numpy's "linear" percentile interpolates
//! between two order statistics `a ≤ b` with weights `(1 − t, t)`, and `|(1−t)(â−a) + t(b̂−b)| ≤
//! 2⁻¹³((1−t)a + tb)`. Every reported percentile is therefore within [`RELATIVE_ERROR`] = 2⁻¹³ ≈ 1.22e-4 of
//! the exact one (plus floating-point rounding of the interpolation); midpoints are clamped into the exact
//! [min, max], zeros are counted apart and read as 0. Count and max are exact; the mean comes from a
//! double-double sum. Merging two sketches adds their counts (the same values recorded into one sketch).

use super::exact::ExactSum;
use super::itl::Quantiles;

/// Mantissa bits of a bucket key.
pub const MANTISSA_BITS: u32 = 12;
/// Relative error bound of every percentile the sketch reports (half a bucket): 2⁻¹³.
pub const RELATIVE_ERROR: f64 = 1.0 / 8192.0;
const SHIFT: u32 = 52 - MANTISSA_BITS;
const PAGE_LEN: usize = 1 << MANTISSA_BITS;

/// The sketch (see the module documentation).
#[derive(Clone, Debug, Default)]
pub struct LogSketch {
    /// One page of bucket counts per binade (biased exponent) touched.
    pages: Vec<Option<Box<[u32]>>>,
    zeros: u64,
    count: u64,
    sum: ExactSum,
    min: f64,
    max: f64,
}

impl LogSketch {
    /// Record one value (≥ 0; anything not > 0, including −0, is recorded as 0).
    #[inline]
    pub fn record(&mut self, v: f64) {
        if self.count == 0 {
            self.min = f64::INFINITY;
            self.max = 0.0;
        }
        self.count += 1;
        if v.is_nan() || v <= 0.0 {
            self.zeros += 1;
            self.min = self.min.min(0.0);
            return;
        }
        self.sum.add(v);
        self.min = self.min.min(v);
        self.max = self.max.max(v);
        let bits = v.to_bits();
        let page = (bits >> 52) as usize;
        if page >= self.pages.len() {
            self.pages.resize_with(page + 1, || None);
        }
        let p = self.pages[page].get_or_insert_with(|| vec![0u32; PAGE_LEN].into_boxed_slice());
        p[((bits >> SHIFT) as usize) & (PAGE_LEN - 1)] += 1;
    }

    /// Add `other`'s values (the sketch of both sets).
    pub fn merge(&mut self, other: &LogSketch) {
        if other.count == 0 {
            return;
        }
        if self.count == 0 {
            *self = other.clone();
            return;
        }
        if other.pages.len() > self.pages.len() {
            self.pages.resize_with(other.pages.len(), || None);
        }
        for (mine, theirs) in self.pages.iter_mut().zip(&other.pages) {
            if let Some(t) = theirs {
                let m = mine.get_or_insert_with(|| vec![0u32; PAGE_LEN].into_boxed_slice());
                for (a, b) in m.iter_mut().zip(t.iter()) {
                    *a += b;
                }
            }
        }
        self.zeros += other.zeros;
        self.count += other.count;
        self.sum.add(other.sum.value());
        self.min = self.min.min(other.min);
        self.max = self.max.max(other.max);
    }

    pub fn count(&self) -> u64 {
        self.count
    }

    /// Mean, percentiles (numpy "linear" on the bucket midpoints) and max; `None` fields when empty.
    pub fn quantiles(&self) -> Quantiles {
        if self.count == 0 {
            return Quantiles::default();
        }
        // Non-empty buckets in ascending value order: (cumulative count, midpoint).
        let mut cum: Vec<(u64, f64)> = Vec::new();
        let mut acc = self.zeros;
        if self.zeros > 0 {
            cum.push((acc, 0.0));
        }
        for (page, counts) in self.pages.iter().enumerate() {
            let Some(counts) = counts else { continue };
            for (i, &c) in counts.iter().enumerate().filter(|(_, &c)| c > 0) {
                acc += c as u64;
                let mid = f64::from_bits(((page as u64) << 52) | ((i as u64) << SHIFT) | (1u64 << (SHIFT - 1)));
                cum.push((acc, mid.clamp(self.min, self.max)));
            }
        }
        let at = |rank: u64| cum[cum.partition_point(|&(c, _)| c <= rank)].1;
        let positive = self.count - self.zeros;
        let mean = if positive == 0 { 0.0 } else { (self.sum.value() / self.count as f64).clamp(self.min, self.max) };
        super::itl::linear_quantiles(self.count, mean, self.max, at)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// numpy's default percentile (linear interpolation) on a sorted vector: the oracle.
    fn np_percentile(sorted: &[f64], p: f64) -> f64 {
        let k = (sorted.len() - 1) as f64 * p / 100.0;
        let (lo, hi) = (k.floor() as usize, k.ceil() as usize);
        sorted[lo] + (sorted[hi] - sorted[lo]) * (k - lo as f64)
    }

    fn check_against_exact(values: &[f64]) -> std::result::Result<(), TestCaseError> {
        let mut s = LogSketch::default();
        for &v in values {
            s.record(v);
        }
        let mut sorted = values.to_vec();
        sorted.sort_by(f64::total_cmp);
        let q = s.quantiles();
        for (p, got) in [(50.0, q.p50), (90.0, q.p90), (95.0, q.p95), (99.0, q.p99), (99.9, q.p99_9)] {
            let want = np_percentile(&sorted, p);
            let got = got.unwrap();
            // The bound, plus a few ulps for the rounding of the two interpolations.
            let tol = RELATIVE_ERROR * want + 4.0 * f64::EPSILON * want;
            prop_assert!((got - want).abs() <= tol, "p{p}: {got} vs exact {want} (tolerance {tol})");
        }
        prop_assert_eq!(q.count, values.len() as u64);
        prop_assert_eq!(q.max.unwrap(), *sorted.last().unwrap());
        let mean = sorted.iter().sum::<f64>() / sorted.len() as f64;
        prop_assert!((q.mean.unwrap() - mean).abs() <= 1e-12 * mean.abs().max(1e-300));
        Ok(())
    }

    proptest! {
        /// The stated error bound, against exact (numpy "linear") percentiles: values spread log-uniformly over
        /// twelve decades (1 µs to 1e6 s), as latencies of any scale.
        #[test]
        fn percentiles_within_the_bound_over_many_decades(exps in prop::collection::vec(-6.0f64..6.0, 1..3000)) {
            let values: Vec<f64> = exps.iter().map(|e| 10f64.powf(*e)).collect();
            check_against_exact(&values)?;
        }

        /// … and for values packed into one binade (many values per bucket), with exact zeros mixed in.
        #[test]
        fn percentiles_within_the_bound_in_one_binade(
            xs in prop::collection::vec(1.0f64..2.0, 1..3000), zeros in 0usize..50) {
            let mut values = xs;
            values.extend(std::iter::repeat_n(0.0, zeros));
            check_against_exact(&values)?;
        }

        /// Merging two sketches equals recording both sets into one.
        #[test]
        fn merge_equals_one_sketch(a in prop::collection::vec(0.0f64..100.0, 0..300), b in prop::collection::vec(0.0f64..100.0, 0..300)) {
            let (mut sa, mut sb, mut all) = (LogSketch::default(), LogSketch::default(), LogSketch::default());
            for &v in &a { sa.record(v); all.record(v); }
            for &v in &b { sb.record(v); all.record(v); }
            sa.merge(&sb);
            let (x, y) = (sa.quantiles(), all.quantiles());
            prop_assert_eq!((x.count, x.p50, x.p99, x.max), (y.count, y.p50, y.p99, y.max));
        }
    }

    /// The bound is tight in the right place: one value reads as itself (midpoint clamped to [min, max]);
    /// the empty sketch reports nothing.
    #[test]
    fn single_value_and_empty() {
        assert_eq!(LogSketch::default().quantiles().p50, None);
        let mut s = LogSketch::default();
        s.record(0.123456789);
        let q = s.quantiles();
        assert_eq!(
            (q.p50, q.p99_9, q.max, q.mean),
            (Some(0.123456789), Some(0.123456789), Some(0.123456789), Some(0.123456789))
        );
    }

    /// Zeros read as 0, not as the smallest bucket's midpoint; −0 counts as 0.
    #[test]
    fn zeros_read_as_zero() {
        let mut s = LogSketch::default();
        for v in [0.0, -0.0, 0.0, 5.0] {
            s.record(v);
        }
        let q = s.quantiles();
        assert_eq!(q.p50, Some(0.0));
        assert_eq!(q.max, Some(5.0));
        assert_eq!(q.mean, Some(1.25));
    }
}
