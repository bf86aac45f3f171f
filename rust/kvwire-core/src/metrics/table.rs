//! The per-request result table: a struct of columns (moved, not copied, into numpy by the bindings).
//! Times are seconds from t = 0; `NaN` marks a stage that did not happen and instance `-1` no instance
//! (the Python layer turns both into nulls).

use crate::error::{Error, Result};

/// `n` copies of `v`, or [`Error::Resource`] when the memory is not there (instead of aborting). The
/// allocation is probed first and then made by `vec!`, which takes zeroed pages from the OS for zero values
/// instead of writing every byte (a million-request table is ~80 MB).
pub fn try_filled<T: Clone>(n: usize, v: T) -> Result<Vec<T>> {
    let mut probe: Vec<T> = Vec::new();
    probe.try_reserve_exact(n).map_err(|_| Error::alloc("workload.requests", "request rows", n))?;
    drop(probe);
    Ok(vec![v; n])
}

/// One row per request, in input (arrival) order.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RequestTable {
    pub id: Vec<u64>,
    pub arrival_s: Vec<f64>,
    pub prompt_tokens: Vec<u32>,
    pub output_tokens: Vec<u32>,
    /// Refused at arrival: its prompt + output can never fit in a decode instance's KV cache.
    pub rejected: Vec<bool>,
    /// Counted in latency/SLO figures (completed and past the warm-up fraction).
    pub measured: Vec<bool>,
    /// Prompt + output exceeded the model's context (before any clipping; `workload.over_context`).
    pub over_context: Vec<bool>,
    /// Decoded on its prefill instance, without a hand-off (colocated, or kept local by conditional
    /// disaggregation).
    pub local_decode: Vec<bool>,
    pub prefill_instance: Vec<i32>,
    pub decode_instance: Vec<i32>,
    pub prefill_start_s: Vec<f64>,
    /// End of the prefill step: the first token is generated.
    pub first_token_s: Vec<f64>,
    /// When the user sees the first token (`metrics.first_token = "decode"`: the end of the first decode
    /// step for handed-off requests). Empty when it is always `first_token_s` (the default).
    pub first_token_seen_s: Vec<f64>,
    pub kv_start_s: Vec<f64>,
    pub kv_ready_s: Vec<f64>,
    pub decode_start_s: Vec<f64>,
    pub finish_s: Vec<f64>,
}

impl RequestTable {
    /// A table for the given inputs with every stage unset. Allocation failure is an error
    /// ([`Error::Resource`]), not an abort.
    pub fn new(arrival_s: Vec<f64>, prompt_tokens: Vec<u32>, output_tokens: Vec<u32>) -> Result<Self> {
        let n = arrival_s.len();
        Ok(RequestTable {
            id: {
                let mut v = Vec::new();
                v.try_reserve_exact(n).map_err(|_| Error::alloc("workload.requests", "request rows", n))?;
                v.extend(0..n as u64);
                v
            },
            arrival_s,
            prompt_tokens,
            output_tokens,
            rejected: try_filled(n, false)?,
            measured: try_filled(n, false)?,
            over_context: try_filled(n, false)?,
            local_decode: try_filled(n, false)?,
            prefill_instance: try_filled(n, -1)?,
            decode_instance: try_filled(n, -1)?,
            prefill_start_s: try_filled(n, f64::NAN)?,
            first_token_s: try_filled(n, f64::NAN)?,
            first_token_seen_s: Vec::new(),
            kv_start_s: try_filled(n, f64::NAN)?,
            kv_ready_s: try_filled(n, f64::NAN)?,
            decode_start_s: try_filled(n, f64::NAN)?,
            finish_s: try_filled(n, f64::NAN)?,
        })
    }

    pub fn len(&self) -> usize {
        self.id.len()
    }

    pub fn is_empty(&self) -> bool {
        self.id.is_empty()
    }

    /// Bytes held by the columns (for the memory benchmark).
    pub fn heap_bytes(&self) -> usize {
        let n = self.len();
        n * (8 + 8 + 4 + 4 + 1 + 1 + 1 + 1 + 4 + 4 + 6 * 8) + self.first_token_seen_s.len() * 8
    }
}
