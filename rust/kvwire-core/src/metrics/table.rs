//! The per-request result table: a struct of columns (moved, not copied, into numpy by the bindings).
//! Times are seconds from t = 0; `NaN` marks a stage that did not happen and instance `-1` no instance
//! (the Python layer turns both into nulls).

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
    /// A table for the given inputs with every stage unset.
    pub fn new(arrival_s: Vec<f64>, prompt_tokens: Vec<u32>, output_tokens: Vec<u32>) -> Self {
        let n = arrival_s.len();
        RequestTable {
            id: (0..n as u64).collect(),
            arrival_s,
            prompt_tokens,
            output_tokens,
            rejected: vec![false; n],
            measured: vec![false; n],
            over_context: vec![false; n],
            local_decode: vec![false; n],
            prefill_instance: vec![-1; n],
            decode_instance: vec![-1; n],
            prefill_start_s: vec![f64::NAN; n],
            first_token_s: vec![f64::NAN; n],
            first_token_seen_s: Vec::new(),
            kv_start_s: vec![f64::NAN; n],
            kv_ready_s: vec![f64::NAN; n],
            decode_start_s: vec![f64::NAN; n],
            finish_s: vec![f64::NAN; n],
        }
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
