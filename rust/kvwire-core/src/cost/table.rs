//! Step times from a measured source: a table of prefill and decode step times on a grid of step shapes,
//! interpolated (`docs/concepts/timing.md`).
//!
//! The tables are built outside the core (the Python package asks a provider such as `aiconfigurator-core`
//! for a step time at every grid point, at validation, and caches them) and handed in with the scenario; the
//! core only reads them, so no Python runs in the event loop.
//!
//! **Interpolation.** Multilinear in the shape's coordinates (not in their logarithms) between the grid's
//! points, along every axis at once: at a grid point it returns the stored value exactly (the corner weights
//! are exactly 1 and 0), between points it is monotone along each axis wherever the data are, and it is
//! exact for any step time of the form a + b·x + c·y + d·x·y (fixed cost, per-token cost, per-sequence cost,
//! and the batch × length product that dominates both prefill and decode). Beyond the last point of an axis
//! the last segment is continued (a step time grows linearly in tokens there); the result is never below
//! the table's smallest value. The error against the provider between points comes from the curvature the
//! grid does not resolve (attention's quadratic term); the Python side measures it at the cell centres when
//! it builds the grid and states it as the table's bound.

use std::sync::Arc;

use crate::error::{Error, Result};

/// A step's shape, what a measured step time depends on. The roofline reads only [`Self::tokens`] and
/// [`Self::ctx_tokens`] (for a parallel layout's collectives).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Shape {
    /// Sequences with prompt tokens computed in the step (whole prompts or chunks).
    pub prefill_seqs: u64,
    /// Prompt tokens computed in the step.
    pub prefill_tokens: u64,
    /// Cached tokens the computed prompt tokens attend to (a reused prefix, earlier chunks).
    pub cached_tokens: u64,
    /// Decoding sequences (one token each).
    pub decode_rows: u64,
    /// KV tokens the decoding sequences read.
    pub decode_ctx: u64,
}

impl Shape {
    /// A prefill step: `seqs` prompts, `tokens` computed tokens after `cached` cached ones.
    #[inline(always)]
    pub fn prefill(seqs: u64, tokens: u64, cached: u64) -> Self {
        Shape { prefill_seqs: seqs, prefill_tokens: tokens, cached_tokens: cached, decode_rows: 0, decode_ctx: 0 }
    }

    /// A decode step of `rows` sequences reading `ctx` KV tokens in all.
    #[inline(always)]
    pub fn decode(rows: u64, ctx: u64) -> Self {
        Shape { prefill_seqs: 0, prefill_tokens: 0, cached_tokens: 0, decode_rows: rows, decode_ctx: ctx }
    }

    /// Tokens computed in the step: prompt tokens plus one per decoding sequence.
    #[inline(always)]
    pub fn tokens(&self) -> u64 {
        self.prefill_tokens + self.decode_rows
    }

    /// KV tokens read in the step: the decode context plus the prompts' cached tokens.
    #[inline(always)]
    pub fn ctx_tokens(&self) -> u64 {
        self.decode_ctx + self.cached_tokens
    }
}

/// Values on a rectangular grid (row-major, the last axis fastest), interpolated multilinearly.
#[derive(Clone, Debug, PartialEq)]
pub struct Grid {
    axes: Vec<Vec<f64>>,
    values: Vec<f64>,
    /// The smallest value: the floor of an extrapolation.
    floor: f64,
}

impl Grid {
    /// A grid over `axes` (each strictly increasing, at least two finite points ≥ `lowest`) holding `values`
    /// (finite, > 0, one per point). Errors name `path` and the offending axis or value.
    pub fn new(axes: Vec<Vec<f64>>, values: Vec<f64>, path: &str, names: &[&str], lowest: &[f64]) -> Result<Self> {
        if axes.len() != names.len() || !(2..=3).contains(&axes.len()) {
            return Err(Error::field(
                format!("{path}.axes"),
                format!("expected {} axes ({}), got {}", names.len(), names.join(", "), axes.len()),
            ));
        }
        let mut points: usize = 1;
        for (k, a) in axes.iter().enumerate() {
            let apath = format!("{path}.axes[{k}] ({})", names[k]);
            if a.len() < 2 {
                return Err(Error::field(apath, "needs at least two points"));
            }
            if a.len() > 1 << 16 {
                return Err(Error::field(apath, "at most 65536 points"));
            }
            if !a[0].is_finite() || a[0] < lowest[k] {
                return Err(Error::field(apath, format!("must start at a finite value ≥ {}", lowest[k])));
            }
            if let Some(i) = a
                .windows(2)
                .position(|w| w[1].partial_cmp(&w[0]) != Some(std::cmp::Ordering::Greater) || !w[1].is_finite())
            {
                return Err(Error::field(apath, format!("must be finite and strictly increasing (point {})", i + 1)));
            }
            points = points.saturating_mul(a.len());
        }
        if values.len() != points {
            return Err(Error::field(
                format!("{path}.values_s"),
                format!("expected {points} values (the product of the axes' lengths), got {}", values.len()),
            ));
        }
        if let Some(i) = values.iter().position(|v| !v.is_finite() || *v <= 0.0) {
            return Err(Error::field(
                format!("{path}.values_s[{i}]"),
                format!("a step time must be finite and > 0 s, got {}", values[i]),
            ));
        }
        let floor = values.iter().copied().fold(f64::INFINITY, f64::min);
        Ok(Grid { axes, values, floor })
    }

    /// The value at `x` (one coordinate per axis).
    pub fn at(&self, x: &[f64]) -> f64 {
        self.at_hinted(x, &mut [0; 3])
    }

    /// The segment of axis `k` holding `x` (the first or last one outside the axis) and x's weight along it,
    /// starting from the segment `hint` names (a run's steps move little from one to the next, so the last
    /// segment usually holds the next point and no search is needed; the segment is the same either way).
    #[inline(always)]
    fn segment(&self, k: usize, x: f64, hint: &mut u32) -> (usize, f64) {
        let a = &self.axes[k];
        let n = a.len();
        let h = *hint as usize;
        let i = if h + 1 < n && a[h] <= x && x < a[h + 1] {
            h
        } else {
            a.partition_point(|&v| v <= x).saturating_sub(1).min(n - 2)
        };
        *hint = i as u32;
        (i, (x - a[i]) / (a[i + 1] - a[i]))
    }

    /// [`Self::at`] with a hint per axis ([`Self::segment`]): the same value, written out for two and three
    /// axes (the only grids a table has). Along each axis the two neighbours are blended as
    /// (1 − w)·v₀ + w·v₁, innermost axis first: with w = 0 or 1 that is v₀ or v₁ exactly.
    pub fn at_hinted(&self, x: &[f64], hint: &mut [u32; 3]) -> f64 {
        let lerp = |w: f64, a: f64, b: f64| (1.0 - w) * a + w * b;
        let v = &self.values;
        let t = match x.len() {
            2 => {
                let n1 = self.axes[1].len();
                let (i, wi) = self.segment(0, x[0], &mut hint[0]);
                let (j, wj) = self.segment(1, x[1], &mut hint[1]);
                let at = |i: usize, j: usize| v[i * n1 + j];
                lerp(wi, lerp(wj, at(i, j), at(i, j + 1)), lerp(wj, at(i + 1, j), at(i + 1, j + 1)))
            }
            3 => {
                let (n1, n2) = (self.axes[1].len(), self.axes[2].len());
                let (i, wi) = self.segment(0, x[0], &mut hint[0]);
                let (j, wj) = self.segment(1, x[1], &mut hint[1]);
                let (k, wk) = self.segment(2, x[2], &mut hint[2]);
                let at = |i: usize, j: usize, k: usize| v[(i * n1 + j) * n2 + k];
                let plane = |i: usize| {
                    lerp(wj, lerp(wk, at(i, j, k), at(i, j, k + 1)), lerp(wk, at(i, j + 1, k), at(i, j + 1, k + 1)))
                };
                lerp(wi, plane(i), plane(i + 1))
            }
            // Grid::new takes two or three axes only.
            _ => self.floor,
        };
        t.max(self.floor)
    }

    /// The first value (every axis at its first point).
    pub fn first(&self) -> f64 {
        self.values[0]
    }
}

/// The segments of a timer's last table lookups, per axis ([`Grid::at_hinted`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Hints {
    prefill: [u32; 3],
    decode: [u32; 3],
}

/// One pool's measured step times.
#[derive(Clone, Debug, PartialEq)]
pub struct StepTable {
    /// Prefill step time, s, over (sequences, computed tokens per sequence, cached tokens per sequence).
    pub prefill: Grid,
    /// Decode step time, s, over (sequences, KV tokens per sequence).
    pub decode: Grid,
}

/// The axes of a prefill table.
pub const PREFILL_AXES: [&str; 3] = ["sequences", "tokens per sequence", "cached tokens per sequence"];
/// The axes of a decode table.
pub const DECODE_AXES: [&str; 2] = ["sequences", "context tokens per sequence"];

impl StepTable {
    /// A table from its two grids (validated: both start at one sequence; the decode grid at one token).
    pub fn new(prefill: (Vec<Vec<f64>>, Vec<f64>), decode: (Vec<Vec<f64>>, Vec<f64>), path: &str) -> Result<Arc<Self>> {
        let prefill = Grid::new(prefill.0, prefill.1, &format!("{path}.prefill"), &PREFILL_AXES, &[1.0, 1.0, 0.0])?;
        let decode = Grid::new(decode.0, decode.1, &format!("{path}.decode"), &DECODE_AXES, &[1.0, 0.0])?;
        for (g, p, names) in [(&prefill, "prefill", &PREFILL_AXES[..2]), (&decode, "decode", &DECODE_AXES[..1])] {
            for (k, name) in names.iter().enumerate() {
                if g.axes[k][0] != 1.0 {
                    return Err(Error::field(format!("{path}.{p}.axes[{k}] ({name})"), "must start at 1"));
                }
            }
        }
        Ok(Arc::new(StepTable { prefill, decode }))
    }

    /// The step time of `s`, s. A prefill step: the prefill table at its mean prompt (tokens and cached tokens
    /// per sequence). A decode step: the decode table at its mean context. A mixed step (chunks beside decode
    /// rows): the prefill of its chunks plus what its decode rows add to a one-sequence, one-token decode step
    /// (the weights are read once; what the decode table's first point holds is the step's fixed part).
    pub fn time_s(&self, s: Shape) -> f64 {
        self.time_s_hinted(s, &mut Hints::default())
    }

    /// A decode step of `rows` sequences reading `ctx` KV tokens: [`Self::time_s`] of `Shape::decode`.
    #[inline]
    pub fn decode_s(&self, rows: u64, ctx: u64, h: &mut Hints) -> f64 {
        if rows == 0 {
            return self.decode.first();
        }
        self.decode.at_hinted(&[rows as f64, ctx as f64 / rows as f64], &mut h.decode)
    }

    /// [`Self::time_s`] with the segments of the last lookups as hints ([`Grid::at_hinted`]; same value).
    pub fn time_s_hinted(&self, s: Shape, h: &mut Hints) -> f64 {
        let mut decode =
            |rows: u64, ctx: u64| self.decode.at_hinted(&[rows as f64, ctx as f64 / rows as f64], &mut h.decode);
        if s.prefill_seqs == 0 {
            return if s.decode_rows > 0 { decode(s.decode_rows, s.decode_ctx) } else { self.decode.first() };
        }
        let n = s.prefill_seqs as f64;
        let dt = if s.decode_rows > 0 { decode(s.decode_rows, s.decode_ctx) - self.decode.first() } else { 0.0 };
        let t = self.prefill.at_hinted(&[n, s.prefill_tokens as f64 / n, s.cached_tokens as f64 / n], &mut h.prefill);
        if s.decode_rows == 0 {
            return t;
        }
        t + dt.max(0.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grid2(f: impl Fn(f64, f64) -> f64, a: &[f64], b: &[f64]) -> Grid {
        let values = a.iter().flat_map(|&x| b.iter().map(move |&y| (x, y))).map(|(x, y)| f(x, y)).collect();
        Grid::new(vec![a.to_vec(), b.to_vec()], values, "t", &["a", "b"], &[0.0, 0.0]).unwrap()
    }

    /// At every grid point the stored value comes back to the bit, the last point of each axis included.
    #[test]
    fn grid_points_are_exact() {
        let a = [1.0, 2.0, 4.0, 8.0];
        let b = [1.0, 3.0, 9.0];
        let f = |x: f64, y: f64| 1e-3 * (1.0 + x.sqrt() * y.ln_1p()) + 1e-7 * x * y * y;
        let g = grid2(f, &a, &b);
        for &x in &a {
            for &y in &b {
                assert_eq!(g.at(&[x, y]).to_bits(), f(x, y).to_bits(), "({x}, {y})");
            }
        }
    }

    /// Multilinear interpolation reproduces a + b·x + c·y + d·x·y everywhere (to rounding), beyond the axes too.
    #[test]
    fn bilinear_step_times_are_reproduced_between_and_beyond_points() {
        let f = |x: f64, y: f64| 2e-3 + 1e-4 * x + 3e-6 * y + 5e-8 * x * y;
        let g = grid2(f, &[1.0, 2.0, 4.0, 8.0], &[1.0, 10.0, 100.0]);
        for (x, y) in [(1.5, 5.0), (3.0, 55.0), (7.9, 99.0), (16.0, 400.0), (1.0, 1000.0)] {
            let want = f(x, y);
            assert!((g.at(&[x, y]) - want).abs() <= 1e-12 * want, "({x}, {y}): {} vs {want}", g.at(&[x, y]));
        }
    }

    /// Along an axis, between two points, the value lies between theirs (monotone data stay monotone).
    #[test]
    fn between_points_the_value_is_between_the_neighbours() {
        let g = grid2(|x, y| x * x + y, &[1.0, 2.0, 4.0], &[0.0, 1.0]);
        let mut last = g.at(&[1.0, 0.5]);
        for i in 1..=300 {
            let v = g.at(&[1.0 + i as f64 / 100.0, 0.5]);
            assert!(v >= last, "not monotone at {i}");
            last = v;
        }
        assert_eq!(last, g.at(&[4.0, 0.5]));
    }

    /// Extrapolation of a falling last segment stops at the table's smallest value (never ≤ 0 s).
    #[test]
    fn extrapolation_never_goes_below_the_smallest_value() {
        let g = grid2(|x, _| 10.0 - x, &[1.0, 2.0], &[0.0, 1.0]);
        assert_eq!(g.at(&[1e6, 0.0]), 8.0);
    }

    /// Bad grids are refused naming the field: too few points, unsorted or non-finite axes, a value count
    /// that does not match, non-positive or non-finite values, a first point below the axis's lowest.
    #[test]
    fn bad_grids_are_refused_naming_the_field() {
        let ok = || (vec![vec![1.0, 2.0], vec![0.0, 1.0]], vec![1.0; 4]);
        type Case = (Vec<Vec<f64>>, Vec<f64>, &'static str);
        let cases: Vec<Case> = vec![
            (vec![vec![1.0], vec![0.0, 1.0]], vec![1.0; 2], "t.axes[0] (a)"),
            (vec![vec![1.0, 1.0], vec![0.0, 1.0]], vec![1.0; 4], "t.axes[0] (a)"),
            (vec![vec![1.0, 2.0], vec![0.0, f64::NAN]], vec![1.0; 4], "t.axes[1] (b)"),
            (vec![vec![-1.0, 2.0], vec![0.0, 1.0]], vec![1.0; 4], "t.axes[0] (a)"),
            (ok().0, vec![1.0; 3], "t.values_s"),
            (ok().0, vec![1.0, 0.0, 1.0, 1.0], "t.values_s[1]"),
            (ok().0, vec![1.0, 1.0, f64::INFINITY, 1.0], "t.values_s[2]"),
            (vec![vec![1.0, 2.0]], vec![1.0; 2], "t.axes"),
        ];
        for (axes, values, path) in cases {
            match Grid::new(axes, values, "t", &["a", "b"], &[0.0, 0.0]) {
                Err(Error::Field { path: p, .. }) => assert_eq!(p, path),
                other => panic!("{path}: {other:?}"),
            }
        }
    }

    fn table() -> Arc<StepTable> {
        let pa = vec![vec![1.0, 2.0, 4.0], vec![1.0, 16.0, 256.0], vec![0.0, 64.0]];
        let pv = (0..18).map(|i| 1e-2 + i as f64 * 1e-3).collect();
        let da = vec![vec![1.0, 8.0, 64.0], vec![1.0, 1024.0]];
        let dv = vec![5e-3, 6e-3, 5.5e-3, 8e-3, 7e-3, 2e-2];
        StepTable::new((pa, pv), (da, dv), "cost.timing.tables.prefill").unwrap()
    }

    /// A table step reads the prefill grid at the mean prompt, the decode grid at the mean context, and a
    /// mixed step adds the decode rows' increment over the decode grid's first point.
    #[test]
    fn shapes_read_the_right_grid() {
        let t = table();
        // prefill: 2 sequences of 16 tokens, none cached = point (1, 1, 0) → index 1·6 + 1·2 + 0 = 8.
        assert_eq!(t.time_s(Shape::prefill(2, 32, 0)), 1e-2 + 8.0 * 1e-3);
        // decode: 8 sequences at 1024 tokens each = point (1, 1) → index 3.
        assert_eq!(t.time_s(Shape::decode(8, 8 * 1024)), 8e-3);
        let mixed = Shape { decode_rows: 8, decode_ctx: 8 * 1024, ..Shape::prefill(2, 32, 0) };
        assert_eq!(t.time_s(mixed), 1e-2 + 8.0 * 1e-3 + (8e-3 - 5e-3));
        assert_eq!(t.time_s(Shape::default()), 5e-3);
    }

    /// Lookups with hints left by earlier ones (right, wrong or stale) give the value of a fresh lookup, bit
    /// for bit, at random points inside and beyond the axes; so does the decode-only entry point.
    #[test]
    fn hints_never_change_a_value() {
        let t = table();
        let mut h = Hints::default();
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = |m: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % m
        };
        for _ in 0..5000 {
            let s = Shape {
                prefill_seqs: next(3) * next(9),
                prefill_tokens: next(1 << 16),
                cached_tokens: next(200),
                decode_rows: next(100),
                decode_ctx: next(1 << 18),
            };
            let s = if s.prefill_seqs > 0 && s.prefill_tokens == 0 { Shape { prefill_tokens: 1, ..s } } else { s };
            assert_eq!(t.time_s_hinted(s, &mut h).to_bits(), t.time_s(s).to_bits(), "{s:?}");
            let d = Shape::decode(s.decode_rows, s.decode_ctx);
            assert_eq!(t.decode_s(d.decode_rows, d.decode_ctx, &mut h).to_bits(), t.time_s(d).to_bits(), "{d:?}");
        }
    }

    /// A shape's tokens are its prompt tokens plus one per decoding row; the KV it reads is the decode context
    /// plus the prompts' cached tokens (what a parallel layout's collectives and extra reads are sized by).
    #[test]
    fn a_shapes_tokens_and_context() {
        let s = Shape { prefill_seqs: 3, prefill_tokens: 700, cached_tokens: 50, decode_rows: 9, decode_ctx: 4000 };
        assert_eq!((s.tokens(), s.ctx_tokens()), (709, 4050));
        assert_eq!(
            Shape::prefill(2, 10, 4),
            Shape { prefill_seqs: 2, prefill_tokens: 10, cached_tokens: 4, ..Shape::default() }
        );
        assert_eq!(Shape::decode(5, 60), Shape { decode_rows: 5, decode_ctx: 60, ..Shape::default() });
    }

    /// The prefill and decode grids must start at one sequence (and one token per prefill sequence).
    #[test]
    fn tables_start_at_one_sequence() {
        let pa = vec![vec![2.0, 4.0], vec![1.0, 16.0], vec![0.0, 64.0]];
        let da = vec![vec![1.0, 8.0], vec![1.0, 1024.0]];
        match StepTable::new((pa, vec![1.0; 8]), (da, vec![1.0; 4]), "x") {
            Err(Error::Field { path, .. }) => assert_eq!(path, "x.prefill.axes[0] (sequences)"),
            other => panic!("{other:?}"),
        }
    }
}
