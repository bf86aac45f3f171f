//! Workloads: seeded arrival processes and length distributions (bit-compatible with CPython's `random`, so
//! a seed reproduces the reference simulator's workloads), and explicit request tables.

pub mod cpython_random;
pub mod hashes;
pub mod sessions;
pub mod source;
mod trace;

pub use hashes::{BlockHashes, HASH_BLOCK_TOKENS};

pub use trace::Trace;
pub(crate) use trace::{clip_to_context, over_context};

use cpython_random::CpythonRandom;

/// Inter-arrival process.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
#[serde(tag = "process", rename_all = "lowercase")]
pub enum Arrivals {
    /// Exponential gaps (`random.expovariate(rate)`).
    Poisson { rate_per_s: f64 },
    /// Gamma gaps with mean 1/rate and coefficient of variation `cv` (`random.gammavariate(1/cv², cv²/rate)`).
    Gamma { rate_per_s: f64, cv: f64 },
}

/// Token-length distribution; every draw is clipped to `[min, max]`.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
#[serde(tag = "dist", rename_all = "lowercase")]
pub enum LengthDist {
    /// Always `value` (no random draw).
    Fixed { value: u32 },
    /// Uniform integer in `[min, max]` (`random.randint`).
    Uniform { min: u32, max: u32 },
    /// Lognormal in the mean/cv parametrisation: σ² = ln(1 + cv²), μ = ln(mean) − σ²/2, rounded half to
    /// even, clipped. `cv == 0` always gives round(mean) clipped, with no draw (as the reference).
    Lognormal { mean: f64, cv: f64, min: u32, max: u32 },
}

impl LengthDist {
    fn draw(&self, rng: &mut CpythonRandom) -> u32 {
        match *self {
            LengthDist::Fixed { value } => value,
            LengthDist::Uniform { min, max } => rng.randint(min as i64, max as i64) as u32,
            LengthDist::Lognormal { mean, cv, min, max } => {
                let x = if cv <= 0.0 {
                    mean
                } else {
                    let sigma2 = (1.0 + cv * cv).ln();
                    rng.lognormvariate(mean.ln() - sigma2 / 2.0, sigma2.sqrt())
                };
                let r = x.round_ties_even();
                // Clip in f64 first: a huge draw must not wrap when converted.
                r.clamp(min as f64, max as f64) as u32
            }
        }
    }
}

impl Arrivals {
    fn gap(&self, rng: &mut CpythonRandom) -> f64 {
        match *self {
            Arrivals::Poisson { rate_per_s } => rng.expovariate(rate_per_s),
            Arrivals::Gamma { rate_per_s, cv } => {
                let shape = 1.0 / (cv * cv);
                rng.gammavariate(shape, cv * cv / rate_per_s)
            }
        }
    }
}

/// The next generated request: the gap (`t += gap`), then the prompt length, then the output length.
#[inline]
pub(crate) fn draw_one(
    rng: &mut CpythonRandom,
    t: &mut f64,
    arrivals: Arrivals,
    prompt: LengthDist,
    output: LengthDist,
) -> (f64, u32, u32) {
    *t += arrivals.gap(rng);
    let p = prompt.draw(rng);
    (*t, p, output.draw(rng))
}

/// Generate `n` requests. For each request in order: the gap (t += gap, so the first arrival is > 0), then
/// the prompt length, then the output length — the reference simulator's draw order.
/// Allocation failure is an error ([`crate::error::Error::Resource`]), not an abort.
pub fn generate(
    n: usize,
    seed: u64,
    arrivals: Arrivals,
    prompt: LengthDist,
    output: LengthDist,
) -> crate::error::Result<Trace> {
    let mut rng = CpythonRandom::new(seed);
    let oom = |_| crate::error::Error::alloc("workload.requests", "generated requests", n);
    let mut arrival_s = Vec::new();
    arrival_s.try_reserve_exact(n).map_err(oom)?;
    let mut prompt_tokens = Vec::new();
    prompt_tokens.try_reserve_exact(n).map_err(oom)?;
    let mut output_tokens = Vec::new();
    output_tokens.try_reserve_exact(n).map_err(oom)?;
    let mut t = 0.0;
    for _ in 0..n {
        let (a, p, o) = draw_one(&mut rng, &mut t, arrivals, prompt, output);
        arrival_s.push(a);
        prompt_tokens.push(p);
        output_tokens.push(o);
    }
    Ok(Trace::from_parts_unchecked(arrival_s, prompt_tokens, output_tokens))
}

#[cfg(test)]
mod tests {
    use super::*;

    const REF_PROMPT: LengthDist = LengthDist::Lognormal { mean: 2048.0, cv: 0.5, min: 1, max: 32768 };
    const REF_OUTPUT: LengthDist = LengthDist::Lognormal { mean: 256.0, cv: 0.5, min: 1, max: 32768 };

    /// The published fingerprint of the seed-1 reference workload at 8 req/s × 800 (spec/simulator.md (e)).
    #[test]
    fn reference_workload_fingerprint() {
        let t = generate(800, 1, Arrivals::Poisson { rate_per_s: 8.0 }, REF_PROMPT, REF_OUTPUT).unwrap();
        assert_eq!((t.arrival_s()[0] * 1e9).round() / 1e9, 0.018036383);
        assert_eq!((t.prompt_tokens()[0], t.output_tokens()[0]), (1236, 204));
        assert_eq!(t.prompt_tokens().iter().map(|&x| x as u64).sum::<u64>(), 1_642_027);
        assert_eq!(t.output_tokens().iter().map(|&x| x as u64).sum::<u64>(), 206_235);
    }

    #[test]
    fn same_seed_same_workload_other_seed_differs() {
        let a = generate(500, 7, Arrivals::Gamma { rate_per_s: 3.0, cv: 2.0 }, REF_PROMPT, REF_OUTPUT).unwrap();
        let b = generate(500, 7, Arrivals::Gamma { rate_per_s: 3.0, cv: 2.0 }, REF_PROMPT, REF_OUTPUT).unwrap();
        let c = generate(500, 8, Arrivals::Gamma { rate_per_s: 3.0, cv: 2.0 }, REF_PROMPT, REF_OUTPUT).unwrap();
        assert_eq!(a, b);
        assert_ne!(a, c);
    }

    /// Sample moments of the generators against their parameters (large-sample statistical check).
    #[test]
    fn arrival_and_length_moments() {
        let n = 200_000;
        for (arr, cv_want) in [
            (Arrivals::Poisson { rate_per_s: 4.0 }, 1.0),
            (Arrivals::Gamma { rate_per_s: 4.0, cv: 3.0 }, 3.0),
            (Arrivals::Gamma { rate_per_s: 4.0, cv: 0.5 }, 0.5),
        ] {
            let t = generate(n, 3, arr, LengthDist::Fixed { value: 5 }, LengthDist::Fixed { value: 1 }).unwrap();
            let a = t.arrival_s();
            let gaps: Vec<f64> = (0..n).map(|i| a[i] - if i == 0 { 0.0 } else { a[i - 1] }).collect();
            let mean = gaps.iter().sum::<f64>() / n as f64;
            let var = gaps.iter().map(|g| (g - mean).powi(2)).sum::<f64>() / n as f64;
            assert!((mean - 0.25).abs() < 0.25 * 0.03, "{arr:?}: mean gap {mean}");
            assert!((var.sqrt() / mean - cv_want).abs() < cv_want * 0.05, "{arr:?}: cv {}", var.sqrt() / mean);
            assert!(t.prompt_tokens().iter().all(|&p| p == 5));
        }
        let t = generate(
            n,
            4,
            Arrivals::Poisson { rate_per_s: 1.0 },
            LengthDist::Uniform { min: 10, max: 20 },
            LengthDist::Lognormal { mean: 300.0, cv: 0.8, min: 1, max: 1_000_000 },
        )
        .unwrap();
        assert!(t.prompt_tokens().iter().all(|&p| (10..=20).contains(&p)));
        let hits20 = t.prompt_tokens().iter().filter(|&&p| p == 20).count() as f64 / n as f64;
        assert!((hits20 - 1.0 / 11.0).abs() < 0.005, "{hits20}");
        let out_mean = t.output_tokens().iter().map(|&x| x as f64).sum::<f64>() / n as f64;
        assert!((out_mean - 300.0).abs() < 3.0, "{out_mean}");
    }

    #[test]
    fn lognormal_clips_and_cv_zero_is_fixed() {
        let t = generate(
            2000,
            1,
            Arrivals::Poisson { rate_per_s: 1.0 },
            LengthDist::Lognormal { mean: 100.0, cv: 2.0, min: 50, max: 120 },
            LengthDist::Lognormal { mean: 7.5, cv: 0.0, min: 1, max: 100 },
        )
        .unwrap();
        assert!(t.prompt_tokens().iter().all(|&p| (50..=120).contains(&p)));
        assert!(t.prompt_tokens().contains(&50) && t.prompt_tokens().contains(&120));
        // round(7.5) half to even = 8.
        assert!(t.output_tokens().iter().all(|&o| o == 8));
    }
}
