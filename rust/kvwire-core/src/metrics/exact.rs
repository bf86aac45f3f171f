//! An exactly rounded running sum, shared by the per-request moments (`rows.rs`) and the quantile sketch
//! (`sketch.rs`).

/// A sum kept as an unevaluated double-double (hi + lo), so that means of millions of values stay
/// correctly rounded in practice, whatever the order of addition.
#[derive(Clone, Copy, Debug, Default)]
pub struct ExactSum {
    hi: f64,
    lo: f64,
}

impl ExactSum {
    #[inline]
    pub fn add(&mut self, x: f64) {
        let t = self.hi + x;
        let bp = t - self.hi;
        self.lo += (self.hi - (t - bp)) + (x - bp);
        self.hi = t;
    }

    pub fn value(&self) -> f64 {
        self.hi + self.lo
    }
}
