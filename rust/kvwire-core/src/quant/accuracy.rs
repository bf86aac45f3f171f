//! Accuracy of a reconstruction: SQNR, cosine similarity, MSE and maximum absolute error, in one pass
//! with `f64` accumulation. Pairs where either value is not finite are left out and counted.

/// Error metrics of `x_hat` against `x`. With no finite pair to compare (`count` 0) every metric is NaN.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Accuracy {
    /// 10·log10(Σx² / Σ(x − x̂)²), dB (+∞ for an exact reconstruction).
    pub sqnr_db: f64,
    /// x·x̂ / √(|x|²·|x̂|²) (1 when both are zero vectors, 0 when only one is).
    pub cosine: f64,
    pub mse: f64,
    pub max_abs: f64,
    /// Finite pairs compared.
    pub count: usize,
    /// Pairs left out because a value was NaN or ±Inf.
    pub nonfinite: usize,
}

/// Compare `x_hat` with `x` (equal lengths).
pub fn error(x: &[f32], x_hat: &[f32]) -> Accuracy {
    let (mut sx, mut se, mut sxy, mut syy, mut max_abs) = (0f64, 0f64, 0f64, 0f64, 0f64);
    let mut count = 0usize;
    for (&a, &b) in x.iter().zip(x_hat) {
        if !(a.is_finite() && b.is_finite()) {
            continue;
        }
        let (a, b) = (a as f64, b as f64);
        let d = a - b;
        sx += a * a;
        se += d * d;
        sxy += a * b;
        syy += b * b;
        max_abs = max_abs.max(d.abs());
        count += 1;
    }
    if count == 0 {
        // Nothing compared: no figure at all, rather than the "perfect" one an empty sum would give.
        let nan = f64::NAN;
        return Accuracy {
            sqnr_db: nan,
            cosine: nan,
            mse: nan,
            max_abs: nan,
            count,
            nonfinite: x.len().min(x_hat.len()),
        };
    }
    let sqnr_db = if se == 0.0 {
        f64::INFINITY
    } else if sx == 0.0 {
        f64::NEG_INFINITY
    } else {
        10.0 * (sx / se).log10()
    };
    let cosine = match (sx == 0.0, syy == 0.0) {
        (true, true) => 1.0,
        (true, false) | (false, true) => 0.0,
        _ => sxy / (sx * syy).sqrt(),
    };
    Accuracy { sqnr_db, cosine, mse: se / count as f64, max_abs, count, nonfinite: x.len().min(x_hat.len()) - count }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// No finite pair (all NaN/Inf, or empty): NaN metrics and count 0, not SQNR +∞ and cosine 1.
    #[test]
    fn nothing_compared_gives_no_figures() {
        for (x, y) in [(&[f32::NAN, f32::INFINITY][..], &[f32::NAN, 1.0][..]), (&[][..], &[][..])] {
            let e = error(x, y);
            assert_eq!((e.count, e.nonfinite), (0, x.len()));
            assert!(e.sqnr_db.is_nan() && e.cosine.is_nan() && e.mse.is_nan() && e.max_abs.is_nan(), "{e:?}");
        }
    }

    #[test]
    fn closed_forms() {
        // x = (3, 4), x̂ = (3, 3): Σx² = 25, Σe² = 1 → 13.98 dB; cos = 21/(5·√18).
        let e = error(&[3.0, 4.0], &[3.0, 3.0]);
        assert!((e.sqnr_db - 10.0 * 25f64.log10()).abs() < 1e-12);
        assert!((e.cosine - 21.0 / (5.0 * 18f64.sqrt())).abs() < 1e-12);
        assert_eq!((e.mse, e.max_abs, e.count, e.nonfinite), (0.5, 1.0, 2, 0));
        let exact = error(&[1.0, -2.0], &[1.0, -2.0]);
        assert_eq!((exact.sqnr_db, exact.cosine), (f64::INFINITY, 1.0));
        let nan = error(&[1.0, f32::NAN], &[1.0, 0.0]);
        assert_eq!((nan.count, nan.nonfinite), (1, 1));
        assert_eq!(error(&[0.0], &[0.0]).cosine, 1.0);
    }
}
