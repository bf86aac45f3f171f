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
    /// Times the request was preempted while decoding (paged KV; 0 otherwise).
    pub preemptions: Vec<u32>,
    /// Leading prompt tokens found in the prefill instance's prefix cache (`prefix_cache`; 0 otherwise).
    pub cached_tokens: Vec<u32>,
    /// A sessions workload (`workload.sessions`): each row's session (0-based, by start time) and turn
    /// (1-based); empty otherwise.
    pub session: Vec<u32>,
    pub turn: Vec<u32>,
    /// Paged KV in a disaggregated run: how long the finished prefill waited for room on its decode
    /// instance before its transfer started, s (0 otherwise; part of `kv_start_s − first_token_s`).
    pub kv_hold_wait_s: Vec<f64>,
    /// Speculative decoding (`speculative`): draft tokens accepted over the request's decode steps; empty
    /// otherwise.
    pub accepted_tokens: Vec<u32>,
    /// Faults (`faults`): times the request started over after a failure threw its work away, the seconds of
    /// work thrown away (from each lost attempt's prefill start to its loss), and whether it failed for good
    /// (more losses than `faults.max_retries`: never finished); empty otherwise.
    pub retries: Vec<u32>,
    pub lost_s: Vec<f64>,
    pub failed: Vec<bool>,
    /// Rows added by [`Self::set_row`] get a `first_token_seen_s` entry (a streamed run with
    /// `metrics.first_token = "decode"`).
    pub track_seen: bool,
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
            preemptions: try_filled(n, 0)?,
            cached_tokens: try_filled(n, 0)?,
            session: Vec::new(),
            turn: Vec::new(),
            kv_hold_wait_s: try_filled(n, 0.0)?,
            accepted_tokens: Vec::new(),
            retries: Vec::new(),
            lost_s: Vec::new(),
            failed: Vec::new(),
            track_seen: false,
        })
    }

    /// Set row `i` (or append it when `i` is the length) to request `id` as it arrives: every stage unset.
    #[allow(clippy::too_many_arguments)]
    pub fn set_row(
        &mut self,
        i: usize,
        id: u64,
        arrival_s: f64,
        prompt: u32,
        output: u32,
        rejected: bool,
        measured: bool,
        over_context: bool,
    ) {
        if i == self.len() {
            self.push_unset();
        }
        self.id[i] = id;
        self.arrival_s[i] = arrival_s;
        self.prompt_tokens[i] = prompt;
        self.output_tokens[i] = output;
        self.rejected[i] = rejected;
        self.measured[i] = measured;
        self.over_context[i] = over_context;
        self.local_decode[i] = false;
        self.prefill_instance[i] = -1;
        self.decode_instance[i] = -1;
        for c in [
            &mut self.prefill_start_s,
            &mut self.first_token_s,
            &mut self.kv_start_s,
            &mut self.kv_ready_s,
            &mut self.decode_start_s,
            &mut self.finish_s,
        ] {
            c[i] = f64::NAN;
        }
        self.preemptions[i] = 0;
        self.kv_hold_wait_s[i] = 0.0;
        self.cached_tokens[i] = 0;
        if self.track_seen {
            self.first_token_seen_s[i] = f64::NAN;
        }
    }

    /// Append a row with every column unset (its values are then set by [`Self::set_row`]).
    fn push_unset(&mut self) {
        self.id.push(0);
        self.arrival_s.push(f64::NAN);
        self.prompt_tokens.push(0);
        self.output_tokens.push(0);
        for c in [&mut self.rejected, &mut self.measured, &mut self.over_context, &mut self.local_decode] {
            c.push(false);
        }
        self.prefill_instance.push(-1);
        self.decode_instance.push(-1);
        for c in [
            &mut self.prefill_start_s,
            &mut self.first_token_s,
            &mut self.kv_start_s,
            &mut self.kv_ready_s,
            &mut self.decode_start_s,
            &mut self.finish_s,
        ] {
            c.push(f64::NAN);
        }
        self.preemptions.push(0);
        self.kv_hold_wait_s.push(0.0);
        self.cached_tokens.push(0);
        if self.track_seen {
            self.first_token_seen_s.push(f64::NAN);
        }
    }

    /// Append a copy of row `i` of `t`.
    pub fn push_row_from(&mut self, t: &RequestTable, i: usize) {
        self.id.push(t.id[i]);
        self.arrival_s.push(t.arrival_s[i]);
        self.prompt_tokens.push(t.prompt_tokens[i]);
        self.output_tokens.push(t.output_tokens[i]);
        self.rejected.push(t.rejected[i]);
        self.measured.push(t.measured[i]);
        self.over_context.push(t.over_context[i]);
        self.local_decode.push(t.local_decode[i]);
        self.prefill_instance.push(t.prefill_instance[i]);
        self.decode_instance.push(t.decode_instance[i]);
        self.prefill_start_s.push(t.prefill_start_s[i]);
        self.first_token_s.push(t.first_token_s[i]);
        if !t.first_token_seen_s.is_empty() {
            self.first_token_seen_s.push(t.first_token_seen_s[i]);
        }
        self.kv_start_s.push(t.kv_start_s[i]);
        self.kv_ready_s.push(t.kv_ready_s[i]);
        self.decode_start_s.push(t.decode_start_s[i]);
        self.finish_s.push(t.finish_s[i]);
        self.preemptions.push(t.preemptions[i]);
        self.kv_hold_wait_s.push(t.kv_hold_wait_s[i]);
        self.cached_tokens.push(t.cached_tokens[i]);
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
        n * (8 + 8 + 4 + 4 + 1 + 1 + 1 + 1 + 4 + 4 + 6 * 8 + 4 + 4 + 8) + self.first_token_seen_s.len() * 8
    }
}
