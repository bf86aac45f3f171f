//! The time of single steps of given shapes on a scenario's pool, as the engine would charge them: what the
//! fidelity table holds up against measurements and what calibration fits (`kvwire.timing.step_times`).

use serde::Serialize;

use crate::cost::model::Chunks;
use crate::cost::roofline::Bound;
use crate::cost::table::Shape;
use crate::error::{Error, Result};
use crate::scenario::{Scenario, Topology};

/// Which kind of step a row asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// `batch` prompts of `prompt_tokens` computed tokens each after `context_tokens` cached ones.
    Prefill,
    /// `batch` sequences decoding one token each with `context_tokens` tokens of KV each.
    Decode,
}

/// One step asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StepQuery {
    pub phase: Phase,
    pub batch: u64,
    pub prompt_tokens: u64,
    pub context_tokens: u64,
}

/// The engine's charge for one step.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct StepAnswer {
    /// Step time, s (the roofline's with its overhead, or the measured table's).
    pub time_s: f64,
    pub flops: f64,
    pub bytes: f64,
    /// Collective time not hidden under compute (a parallel layout on the roofline), s.
    pub comm_s: f64,
    /// `compute`, `memory` or `power`.
    pub bound: &'static str,
}

/// The most tokens per sequence a row may ask for (2²⁴).
pub const MAX_TOKENS: u64 = 1 << 24;

impl Scenario {
    /// The time of each step of `rows` on `pool` (`prefill`, `decode` or `colocated`), each timed alone
    /// (no compression pass, no queue). Errors name `rows[i]` and the field.
    pub fn step_times(&self, pool: &str, rows: &[StepQuery]) -> Result<Vec<StepAnswer>> {
        let p = match (&self.topology, pool) {
            (Topology::Disaggregated { prefill, .. }, "prefill") => prefill,
            (Topology::Disaggregated { decode, .. }, "decode") => decode,
            (Topology::Colocated { pool }, "colocated") => pool,
            (Topology::Disaggregated { .. }, _) => {
                return Err(Error::field("pool", format!("expected \"prefill\" or \"decode\", got {pool:?}")))
            }
            (Topology::Colocated { .. }, _) => {
                return Err(Error::field(
                    "pool",
                    format!("a colocated scenario has one pool, \"colocated\"; got {pool:?}"),
                ))
            }
        };
        let model = self.pool_cost(p);
        let timer = p.timer(self.roofline);
        let mut out = Vec::with_capacity(rows.len());
        for (i, r) in rows.iter().enumerate() {
            let field = |f: &str, why: &str| Error::field(format!("rows[{i}].{f}"), why.to_string());
            if r.batch == 0 || r.batch > 1 << 20 {
                return Err(field("batch", "must be a whole number of sequences in 1..=1048576"));
            }
            for (name, v) in [("prompt_tokens", r.prompt_tokens), ("context_tokens", r.context_tokens)] {
                if v > MAX_TOKENS {
                    return Err(field(name, "at most 16777216 tokens per sequence"));
                }
            }
            let before = timer.comm_s();
            let (work, timing) = match r.phase {
                Phase::Prefill => {
                    if r.prompt_tokens == 0 {
                        return Err(field("prompt_tokens", "a prefill step computes at least one token per sequence"));
                    }
                    let (b, q, c) = (r.batch, r.prompt_tokens, r.context_tokens);
                    let work = if c > 0 {
                        let chunks = Chunks {
                            tokens: b * q,
                            cached_tokens: b * c,
                            attention_flops: b as u128 * model.chunk_attention_flops(q, c),
                            last_chunks: b,
                        };
                        model.mixed(0, 0, chunks)
                    } else {
                        model.prefill(b * q, b, b as u128 * model.prompt_attention_flops(q))
                    };
                    (work, timer.step(work, Shape::prefill(b, b * q, b * c)))
                }
                Phase::Decode => {
                    let ctx = r.batch * r.context_tokens;
                    let work = model.decode(ctx, r.batch);
                    (work, timer.step(work, Shape::decode(r.batch, ctx)))
                }
            };
            out.push(StepAnswer {
                time_s: timing.time_s,
                flops: work.flops,
                bytes: work.bytes,
                comm_s: timer.comm_s() - before,
                bound: match timing.bound {
                    Bound::Compute => "compute",
                    Bound::Memory => "memory",
                    Bound::Power => "power",
                },
            });
        }
        Ok(out)
    }
}
