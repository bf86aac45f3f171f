//! Inter-token latency statistics without one stored value per token.
//!
//! A million-request run produces hundreds of millions of per-token gaps, but within one decode step every
//! continuing sequence sees the same gap. Gaps are therefore recorded with a weight into buckets keyed by
//! the top 13 mantissa bits of the `f64` (relative bucket width ≤ 2⁻¹³ ≈ 1.2e-4); each bucket keeps its
//! count, sum, minimum and maximum and is represented by its value when min = max (exact) or else by the
//! mean of its values. Percentiles use numpy's "linear" rule over the flattened multiset; max is exact and the
//! mean is computed from a double-double sum (correctly rounded in practice, always within [min, max]).

/// Mantissa bits kept in a bucket key.
const KEY_MANTISSA_BITS: u32 = 13;
const PAGE_SHIFT: u32 = 52 - KEY_MANTISSA_BITS;
const PAGE_LEN: usize = 1 << KEY_MANTISSA_BITS;

/// One bucket: count, then the bit patterns of sum, min and max (all-zero = empty, so pages can be
/// allocated zeroed and mapped lazily by the OS).
type Bucket = [u64; 4];

fn bucket_value(b: &Bucket) -> f64 {
    let (min, max) = (f64::from_bits(b[2]), f64::from_bits(b[3]));
    if min == max {
        min
    } else {
        // The rounded mean can stray an ulp outside the values it averages: clamp it back.
        (f64::from_bits(b[1]) / b[0] as f64).max(min).min(max)
    }
}

/// The rounding error of `prod = v * w`, exactly: Dekker's product, with the split of the integer weight
/// trivial when `w < 2^26` (the common case, and no call to a software FMA on baseline x86-64).
#[inline]
fn two_prod_err(v: f64, w: f64, prod: f64) -> f64 {
    if w < 67_108_864.0 {
        let c = 134_217_729.0 * v;
        let hi = c - (c - v);
        let lo = v - hi;
        (hi * w - prod) + lo * w
    } else {
        v.mul_add(w, -prod)
    }
}

/// Weighted, bucketed sample of non-negative durations. Buckets live in dense pages, one page per
/// binade (sign + exponent) touched, so consecutive similar gaps hit neighbouring memory.
#[derive(Clone, Debug, Default)]
pub struct ItlHistogram {
    pages: Vec<Option<Box<[Bucket]>>>,
    count: u64,
    /// Σ value·weight as an unevaluated double-double (`sum + sum_lo`), so the mean is correctly rounded
    /// in practice (in particular, `weight` copies of one value have exactly that value as mean).
    sum: f64,
    sum_lo: f64,
    min: f64,
    max: f64,
}

/// Summary statistics of a sample, in seconds. `None` fields: empty sample.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Quantiles {
    pub count: u64,
    pub mean: Option<f64>,
    pub p50: Option<f64>,
    pub p90: Option<f64>,
    pub p95: Option<f64>,
    pub p99: Option<f64>,
    pub p99_9: Option<f64>,
    pub max: Option<f64>,
}

impl ItlHistogram {
    /// Record `weight` copies of `value` (≥ 0, not NaN).
    #[inline]
    pub fn record(&mut self, value: f64, weight: u64) {
        if weight == 0 {
            return;
        }
        let bits = value.to_bits();
        let page = (bits >> 52) as usize;
        if !matches!(self.pages.get(page), Some(Some(_))) {
            self.add_page(page);
        }
        // Through i64: one instruction where u64 → f64 takes several (a weight is far below 2⁶³).
        let w = weight as i64 as f64;
        let prod = value * w;
        let Some(Some(page)) = self.pages.get_mut(page) else { unreachable!("page added above") };
        let b = &mut page[((bits >> PAGE_SHIFT) as usize) & (PAGE_LEN - 1)];
        if b[0] == 0 {
            *b = [weight, prod.to_bits(), bits, bits];
        } else {
            b[0] += weight;
            b[1] = (f64::from_bits(b[1]) + prod).to_bits();
            // `value` is not NaN: plain comparisons give what f64::min / f64::max give, with fewer instructions.
            if value < f64::from_bits(b[2]) {
                b[2] = bits;
            }
            if value > f64::from_bits(b[3]) {
                b[3] = bits;
            }
        }
        if self.count == 0 || value < self.min {
            self.min = value;
        }
        self.count += weight;
        // Exact product error (two-prod) added into a double-double (two-sum).
        let prod_err = two_prod_err(value, w, prod);
        let t = self.sum + prod;
        let bp = t - self.sum;
        let t_err = (self.sum - (t - bp)) + (prod - bp);
        self.sum = t;
        self.sum_lo += t_err + prod_err;
        if value > self.max {
            self.max = value;
        }
    }

    /// Allocate page `page` (zeroed: every bucket empty), first growing the page list to hold it.
    #[cold]
    #[inline(never)]
    fn add_page(&mut self, page: usize) {
        if page >= self.pages.len() {
            self.pages.resize_with(page + 1, || None);
        }
        self.pages[page].get_or_insert_with(|| vec![[0u64; 4]; PAGE_LEN].into_boxed_slice());
    }

    /// The mean from the double-double sum: hi/n corrected by the remainder.
    fn mean(&self) -> f64 {
        let n = self.count as f64;
        let q = self.sum / n;
        let r = (-q).mul_add(n, self.sum) + self.sum_lo;
        (q + r / n).max(self.min).min(self.max)
    }

    pub fn count(&self) -> u64 {
        self.count
    }

    /// Mean, percentiles (numpy "linear") and max.
    pub fn quantiles(&self) -> Quantiles {
        if self.count == 0 {
            return Quantiles::default();
        }
        // Non-empty buckets in ascending key order (= ascending value for non-negative floats), with
        // cumulative counts for rank → bucket lookups.
        let mut b: Vec<&Bucket> = Vec::new();
        let mut cum = Vec::new();
        let mut acc = 0u64;
        for page in self.pages.iter().flatten() {
            for bucket in page.iter().filter(|x| x[0] > 0) {
                acc += bucket[0];
                b.push(bucket);
                cum.push(acc);
            }
        }
        let at = |rank: u64| -> f64 { bucket_value(b[cum.partition_point(|&c| c <= rank)]) };
        linear_quantiles(self.count, self.mean(), self.max, at)
    }
}

/// Mean, numpy-"linear" percentiles and max of `count` sorted values, the value of rank `r` being `at(r)`.
pub(crate) fn linear_quantiles(count: u64, mean: f64, max: f64, at: impl Fn(u64) -> f64) -> Quantiles {
    let q = |p: f64| -> f64 {
        let k = (count - 1) as f64 * p / 100.0;
        let lo = k.floor();
        let hi = k.ceil();
        let (vl, vh) = (at(lo as u64), at(hi as u64));
        vl + (vh - vl) * (k - lo)
    };
    Quantiles {
        count,
        mean: Some(mean),
        p50: Some(q(50.0)),
        p90: Some(q(90.0)),
        p95: Some(q(95.0)),
        p99: Some(q(99.0)),
        p99_9: Some(q(99.9)),
        max: Some(max),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// numpy's default percentile (linear interpolation) on an explicit sorted vector: the oracle.
    fn np_percentile(sorted: &[f64], p: f64) -> f64 {
        let k = (sorted.len() - 1) as f64 * p / 100.0;
        let (lo, hi) = (k.floor() as usize, k.ceil() as usize);
        sorted[lo] + (sorted[hi] - sorted[lo]) * (k - lo as f64)
    }

    #[test]
    fn empty_histogram_has_no_statistics() {
        let q = ItlHistogram::default().quantiles();
        assert_eq!(q.count, 0);
        assert_eq!(q.p50, None);
        assert_eq!(q.mean, None);
    }

    /// The product error is exact: v·w = prod + err in exact (integer) arithmetic.
    #[test]
    fn two_prod_err_is_exact() {
        for (v, w) in [(0.1, 3.0), (0.4503335571287868, 759.0), (1.0 / 3.0, 67_108_863.0), (0.7, 1e9)] {
            let prod = v * w;
            let err = two_prod_err(v, w, prod);
            assert_eq!(err, v.mul_add(w, -prod), "{v} {w}");
        }
    }

    /// The mean of many copies of one value is that value, and percentiles stay within [min, max].
    #[test]
    fn mean_and_percentiles_stay_exact_and_in_range() {
        let mut h = ItlHistogram::default();
        h.record(0.4503335571287868, 759);
        let q = h.quantiles();
        assert_eq!(q.mean, Some(0.4503335571287868));
        let mut h = ItlHistogram::default();
        let base = 0.18890412214363428_f64;
        h.record(base, 3);
        h.record(f64::from_bits(base.to_bits() - 1), 5);
        let q = h.quantiles();
        assert!(q.p99_9.unwrap() <= q.max.unwrap() && q.p50.unwrap() >= f64::from_bits(base.to_bits() - 1));
    }

    /// p95 of 0..9 is 8.55 (numpy and Polars "linear").
    #[test]
    fn known_percentile() {
        let mut h = ItlHistogram::default();
        for i in 0..10 {
            h.record(i as f64, 1);
        }
        let q = h.quantiles();
        assert!((q.p95.unwrap() - 8.55).abs() < 1e-12);
        assert_eq!(q.max, Some(9.0));
        assert_eq!(q.mean, Some(4.5));
    }

    proptest! {
        /// With few distinct values (each in its own bucket) the weighted histogram equals numpy on the
        /// flattened data exactly; with arbitrary values it is within the bucket width.
        #[test]
        fn matches_flattened_oracle(vals in prop::collection::vec((1e-4f64..10.0, 1u64..50), 1..60)) {
            let mut h = ItlHistogram::default();
            let mut flat = Vec::new();
            for &(v, w) in &vals {
                h.record(v, w);
                flat.extend(std::iter::repeat_n(v, w as usize));
            }
            flat.sort_by(f64::total_cmp);
            let q = h.quantiles();
            for (p, got) in [(50.0, q.p50), (90.0, q.p90), (99.0, q.p99), (99.9, q.p99_9)] {
                let want = np_percentile(&flat, p);
                prop_assert!((got.unwrap() - want).abs() <= want * 2.0f64.powi(-(KEY_MANTISSA_BITS as i32)), "p{p}: {got:?} vs {want}");
            }
            prop_assert_eq!(q.max.unwrap(), *flat.last().unwrap());
            let mean: f64 = flat.iter().sum::<f64>() / flat.len() as f64;
            prop_assert!((q.mean.unwrap() - mean).abs() <= mean * 1e-12);
            prop_assert_eq!(q.count, flat.len() as u64);
        }

        #[test]
        fn exact_when_values_repeat(reps in prop::collection::vec((0usize..5, 1u64..1000), 1..40)) {
            let values = [0.0061, 0.0075, 0.0123, 0.25, 1.5];
            let mut h = ItlHistogram::default();
            let mut flat = Vec::new();
            for &(i, w) in &reps {
                h.record(values[i], w);
                flat.extend(std::iter::repeat_n(values[i], w as usize));
            }
            flat.sort_by(f64::total_cmp);
            let q = h.quantiles();
            prop_assert_eq!(q.p50.unwrap(), np_percentile(&flat, 50.0));
            prop_assert_eq!(q.p99.unwrap(), np_percentile(&flat, 99.0));
        }
    }

    /// Dekker's product error is exact for any integer weight, including weights ≥ 2²⁶ with many
    /// significant bits (which the split path could not multiply exactly); the oracle is the correctly
    /// rounded fused multiply-add.
    #[test]
    fn two_prod_err_is_exact_for_wide_weights() {
        for (v, w) in [
            (1.0 / 3.0, 999_999_999.0),
            (0.1, 67_108_865.0),
            (0.4503335571287868, 4_294_967_295.0),
            (0.7, 123_456_789_012.0),
            (1.0 / 7.0, 67_108_863.0),
        ] {
            let prod = v * w;
            assert_eq!(two_prod_err(v, w, prod), v.mul_add(w, -prod), "{v} {w}");
        }
    }

    /// A bucket holding distinct values is represented by their weighted mean (the module's documented
    /// rule): 1 and 1 + 2⁻²⁰ share a bucket (width 2⁻¹³ relative), so with weights 3 and 1 every percentile
    /// reads (3·1 + 1 + 2⁻²⁰)/4 = 1 + 2⁻²²; max stays exact and the mean is that same exact value. With
    /// weights 1 and 1 the bucket reads 1 + 2⁻²¹, which for p50 is numpy's answer too.
    #[test]
    fn a_bucket_of_distinct_values_reads_as_their_mean() {
        let (a, b) = (1.0, 1.0 + 2f64.powi(-20));
        let mut h = ItlHistogram::default();
        h.record(a, 3);
        h.record(b, 1);
        let q = h.quantiles();
        let mean = 1.0 + 2f64.powi(-22);
        for p in [q.p50, q.p90, q.p99_9] {
            assert_eq!(p, Some(mean));
        }
        assert_eq!(q.max, Some(b));
        assert_eq!(q.mean, Some(mean));
        let mut h = ItlHistogram::default();
        h.record(a, 1);
        h.record(b, 1);
        let q = h.quantiles();
        assert_eq!(q.p50, Some(1.0 + 2f64.powi(-21)));
        assert_eq!(q.p50, Some(np_percentile(&[a, b], 50.0)));
    }

    /// The mean is exact where plain summation is not: {1, 2⁻⁵³, 2⁻⁵³, 0} sums to 1 + 2⁻⁵² exactly, but
    /// adding in order in `f64` loses both small terms (1 + 2⁻⁵³ rounds to 1). The exact mean,
    /// (1 + 2⁻⁵²)/4 = 2⁻² + 2⁻⁵⁴, is representable, and the double-double sum must return it.
    #[test]
    fn mean_keeps_the_low_order_part_plain_summation_loses() {
        let tiny = 2f64.powi(-53);
        let mut h = ItlHistogram::default();
        for v in [1.0, tiny, tiny, 0.0] {
            h.record(v, 1);
        }
        assert_eq!(((1.0 + tiny) + tiny) / 4.0, 0.25, "premise: plain summation loses the tail");
        assert_eq!(h.quantiles().mean, Some(0.25 + 2f64.powi(-54)));
    }

    /// The product error of a weighted record enters the mean: 0.1 × 3 is not exact in `f64`, and the
    /// exact mean of the doubles {0.1, 0.1, 0.1, 0.2} is 0.125 + 6.9·10⁻¹⁸, within half an ulp of 0.125
    /// (2⁻⁵⁶ ≈ 1.4·10⁻¹⁷), so the correctly rounded mean is 0.125.
    #[test]
    fn mean_includes_the_rounding_error_of_weighted_products() {
        let mut h = ItlHistogram::default();
        h.record(0.1, 3);
        h.record(0.2, 1);
        assert_ne!(0.1 * 3.0, 0.3, "premise: the product rounds");
        assert_eq!(h.quantiles().mean, Some(0.125));
    }

    /// `count` is the total weight recorded; zero-weight records add nothing.
    #[test]
    fn count_is_the_total_weight() {
        let mut h = ItlHistogram::default();
        assert_eq!(h.count(), 0);
        h.record(0.5, 7);
        h.record(0.25, 0);
        h.record(0.125, 2);
        assert_eq!(h.count(), 9);
        assert_eq!(h.quantiles().count, 9);
    }
}
