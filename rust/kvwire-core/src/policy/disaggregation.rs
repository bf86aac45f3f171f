//! Conditional disaggregation: whether a request is decoded where it was prefilled instead of being handed
//! off (the seed's question: keep prefill and decode together when the prompt is small, the output short,
//! or the network congested).

use crate::policy::batching::ever_fits;

/// Which requests are handed off.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Disaggregate {
    /// Every request with output ≥ 2 (the reference).
    Always,
    /// Keep a request on its prefill instance when its prompt < `min_prompt_tokens`, its output <
    /// `min_output_tokens`, or the estimated link wait > `max_link_wait_s`.
    Conditional { min_prompt_tokens: u32, min_output_tokens: u32, max_link_wait_s: f64 },
}

/// Keep request (prompt, output) on its prefill instance? Only with the conditional policy, only for
/// requests with a decode phase (output ≥ 2) that fit the prefill instance's KV cache (`local_capacity`
/// tokens), and when the prompt or output is below its threshold or the estimated link wait exceeds its
/// limit.
pub fn keep_local(policy: &Disaggregate, prompt: u32, output: u32, link_wait_s: f64, local_capacity: u64) -> bool {
    match *policy {
        Disaggregate::Always => false,
        Disaggregate::Conditional { min_prompt_tokens, min_output_tokens, max_link_wait_s } => {
            output >= 2
                && ever_fits(prompt, output, local_capacity)
                && (prompt < min_prompt_tokens || output < min_output_tokens || link_wait_s > max_link_wait_s)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const P: Disaggregate =
        Disaggregate::Conditional { min_prompt_tokens: 512, min_output_tokens: 16, max_link_wait_s: 0.05 };

    #[test]
    fn thresholds() {
        assert!(keep_local(&P, 100, 100, 0.0, 1_000_000)); // short prompt
        assert!(keep_local(&P, 4000, 8, 0.0, 1_000_000)); // short output
        assert!(keep_local(&P, 4000, 100, 0.06, 1_000_000)); // congested link
        assert!(!keep_local(&P, 4000, 100, 0.05, 1_000_000)); // at the limit: hand off
        assert!(!keep_local(&P, 512, 16, 0.0, 1_000_000)); // thresholds are strict
    }

    #[test]
    fn never_without_a_decode_phase_or_room() {
        assert!(!keep_local(&P, 100, 1, 0.0, 1_000_000));
        assert!(!keep_local(&P, 100, 100, 0.0, 150));
        assert!(!keep_local(&Disaggregate::Always, 1, 100, 1e9, 1_000_000));
    }
}
