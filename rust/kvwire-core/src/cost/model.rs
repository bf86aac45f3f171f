//! FLOPs and HBM bytes of one forward pass (`spec/simulator.md` (b)).
//!
//! Parameter and FLOP counts are exact integers (`u128`) rounded once to `f64`, as the reference computes
//! them with Python integers.

use super::presets::ModelSpec;

/// Whether the prefill pass charges the LM head on every prompt token (`All`, the reference simulator) or
/// once per prompt (`Last`, what serving engines do).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LmHead {
    All,
    Last,
}

/// FLOPs and bytes of one step.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct StepWork {
    pub flops: f64,
    pub bytes: f64,
}

/// Round an exact count to the nearest `f64` (the common case, below 2⁶⁴, avoids the slow `u128` path).
#[inline]
fn to_f64(x: u128) -> f64 {
    if x >> 64 == 0 {
        x as u64 as f64
    } else {
        wide_to_f64(x)
    }
}

#[cold]
#[inline(never)]
fn wide_to_f64(x: u128) -> f64 {
    x as f64
}

/// Derived, exact quantities of a model shape.
#[derive(Clone, Debug, PartialEq)]
pub struct ModelCost {
    layers: u128,
    d_model: u128,
    vocab: u128,
    /// Parameters of all transformer layers (P_L).
    pub layer_params: u128,
    /// Layer parameters plus the LM head (P_mm): the weights every pass streams.
    pub matmul_params: u128,
    /// All parameters, embedding and LM head counted separately (untied).
    pub total_params: u128,
    /// Bytes per weight.
    pub weight_bytes_per_param: f64,
    /// KV bytes per token, all layers, K and V.
    pub kv_bytes_per_token: f64,
    lm_head: LmHead,
}

impl ModelCost {
    /// Derive the cost constants of `m`.
    pub fn new(m: &ModelSpec, lm_head: LmHead) -> Self {
        let l = m.layers as u128;
        let d = m.d_model as u128;
        let kv_width = m.kv_heads as u128 * m.head_dim as u128;
        let per_layer = 2 * d * d + 2 * d * kv_width + 3 * d * m.d_ff as u128;
        let vocab = m.vocab as u128;
        let layer_params = l * per_layer;
        ModelCost {
            layers: l,
            d_model: d,
            vocab,
            layer_params,
            matmul_params: layer_params + vocab * d,
            total_params: layer_params + 2 * vocab * d,
            weight_bytes_per_param: m.weight_bytes_per_param,
            kv_bytes_per_token: 2.0 * (l * kv_width) as f64 * m.kv_bytes_per_value,
            lm_head,
        }
    }

    /// Bytes of weights resident in HBM (both embedding tables counted).
    pub fn resident_weight_bytes(&self) -> f64 {
        self.total_params as f64 * self.weight_bytes_per_param
    }

    /// Weight bytes read by a pass over `tokens` tokens: every matmul weight once plus the looked-up embedding rows.
    #[inline]
    fn weights_read(&self, tokens: u128) -> f64 {
        to_f64(self.matmul_params) * self.weight_bytes_per_param
            + to_f64(tokens * self.d_model) * self.weight_bytes_per_param
    }

    /// Causal-attention FLOPs of one prompt of `s` tokens: 2·L·d·s·(s+1).
    pub fn prompt_attention_flops(&self, s: u64) -> u128 {
        let s = s as u128;
        2 * self.layers * self.d_model * s * (s + 1)
    }

    /// Work of a prefill step over whole prompts with `total_tokens` = Σ s_i, `prompts` = k and
    /// `attention_flops` = Σ [`Self::prompt_attention_flops`]`(s_i)`.
    #[inline]
    pub fn prefill(&self, total_tokens: u64, prompts: u64, attention_flops: u128) -> StepWork {
        let t = total_tokens as u128;
        let matmul = match self.lm_head {
            LmHead::All => 2 * self.matmul_params * t,
            LmHead::Last => 2 * self.layer_params * t + 2 * self.vocab * self.d_model * prompts as u128,
        };
        StepWork {
            flops: to_f64(matmul + attention_flops),
            bytes: self.weights_read(t) + total_tokens as f64 * self.kv_bytes_per_token,
        }
    }

    /// Work of a decode step for `batch` sequences whose cached context sums to `ctx` tokens.
    #[inline]
    pub fn decode(&self, ctx: u64, batch: u64) -> StepWork {
        let b = batch as u128;
        let positions = ctx as u128 + b;
        StepWork {
            flops: to_f64(2 * self.matmul_params * b + 4 * self.layers * self.d_model * positions),
            bytes: self.weights_read(b) + to_f64(positions) * self.kv_bytes_per_token,
        }
    }

    /// KV hand-off size of a prompt, bytes.
    pub fn handoff_bytes(&self, prompt_tokens: u32) -> f64 {
        prompt_tokens as f64 * self.kv_bytes_per_token
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cost::presets::model_presets;

    fn preset(key: &str) -> ModelSpec {
        model_presets().into_iter().find(|(k, _)| *k == key).unwrap().1
    }

    /// Parameter counts against the table in spec/simulator.md (a) (printed to 4 decimals in billions).
    #[test]
    fn parameter_counts_match_reference_table() {
        let rows = [
            ("llama3-8b", 8.0300, 7.5047, 131_072.0),
            ("llama3-70b", 70.5524, 69.5017, 327_680.0),
            ("mistral-7b", 7.2415, 7.1104, 131_072.0),
            ("yi-34b", 34.3880, 33.9293, 245_760.0),
            ("opt-13b", 13.0975, 12.8401, 819_200.0),
            ("llama3.2-1b", 1.4984, 1.2357, 32_768.0),
        ];
        for (key, params_b, mm_b, kvpt) in rows {
            let c = ModelCost::new(&preset(key), LmHead::All);
            assert_eq!((c.total_params as f64 / 1e5).round() / 1e4, params_b, "{key} params");
            assert_eq!((c.matmul_params as f64 / 1e5).round() / 1e4, mm_b, "{key} matmul params");
            assert_eq!(c.kv_bytes_per_token, kvpt, "{key} kv bytes/token");
        }
    }

    /// Hand-off sizes quoted in spec/handoff.md: 268.4 MB (8B) and 671.1 MB (70B) for 2,048 tokens.
    #[test]
    fn handoff_sizes() {
        let c8 = ModelCost::new(&preset("llama3-8b"), LmHead::All);
        let c70 = ModelCost::new(&preset("llama3-70b"), LmHead::All);
        assert_eq!((c8.handoff_bytes(2048) / 1e5).round() / 10.0, 268.4);
        assert_eq!((c70.handoff_bytes(2048) / 1e5).round() / 10.0, 671.1);
    }

    fn rel(a: f64, b: f64) -> f64 {
        ((a - b) / b).abs()
    }

    /// FLOPs and bytes of the step-cost table in spec/simulator.md (b) (7 significant digits printed).
    #[test]
    fn step_work_matches_reference_table() {
        let c8 = ModelCost::new(&preset("llama3-8b"), LmHead::All);
        let c70 = ModelCost::new(&preset("llama3-70b"), LmHead::All);
        let p = c8.prefill(2048, 1, c8.prompt_attention_flops(2048));
        assert!(rel(p.flops, 3.183913e13) < 5e-7 && rel(p.bytes, 1.529453e10) < 5e-7, "{p:?}");
        let a4 = 4 * c8.prompt_attention_flops(2048);
        let p4 = c8.prefill(4 * 2048, 4, a4);
        assert!(rel(p4.flops, 1.273565e14) < 5e-7 && rel(p4.bytes, 1.615017e10) < 5e-7, "{p4:?}");
        let d1 = c8.decode(2048, 1);
        assert!(rel(d1.flops, 1.608358e10) < 5e-7 && rel(d1.bytes, 1.527789e10) < 5e-7, "{d1:?}");
        let d64 = c8.decode(131_072, 64);
        assert!(rel(d64.flops, 1.029349e12) < 5e-7 && rel(d64.bytes, 3.219810e10) < 5e-7, "{d64:?}");
        let p70 = c70.prefill(2048, 1, c70.prompt_attention_flops(2048));
        assert!(rel(p70.flops, 2.901793e14) < 5e-7 && rel(p70.bytes, 1.397081e11) < 5e-7, "{p70:?}");
        let d70 = c70.decode(2048, 1);
        assert!(rel(d70.flops, 1.443748e11) < 5e-7 && rel(d70.bytes, 1.396749e11) < 5e-7, "{d70:?}");
        let d70b = c70.decode(36_800, 16);
        assert!(rel(d70b.bytes, 1.51068e11) < 5e-6, "{d70b:?}");
    }

    /// "last" charges the LM head once per prompt: the difference from "all" is exactly 2·V·d·(T − k).
    #[test]
    fn lm_head_last_removes_the_head_on_all_but_one_token_per_prompt() {
        let m = preset("llama3-8b");
        let all = ModelCost::new(&m, LmHead::All);
        let last = ModelCost::new(&m, LmHead::Last);
        let att = 2 * all.prompt_attention_flops(1000);
        let diff = all.prefill(2000, 2, att).flops - last.prefill(2000, 2, att).flops;
        assert_eq!(diff, (2 * 128_256u128 * 4096 * (2000 - 2)) as f64);
        assert_eq!(all.prefill(2000, 2, att).bytes, last.prefill(2000, 2, att).bytes);
    }

    /// `to_f64` rounds an exact count to the nearest `f64` on both of its paths: below 2⁶⁴ (the fast
    /// `u64` path) and at or above it (the `u128` path). Expected values are exact powers of two and
    /// their multiples, and Rust's correctly rounded `u128 as f64`.
    #[test]
    fn to_f64_is_exact_rounding_on_both_sides_of_2_pow_64() {
        let two64 = 18_446_744_073_709_551_616.0_f64;
        assert_eq!(to_f64(0), 0.0);
        assert_eq!(to_f64(1 << 53), 9_007_199_254_740_992.0);
        assert_eq!(to_f64(u64::MAX as u128), two64); // rounds up to 2⁶⁴
        assert_eq!(to_f64(1 << 64), two64);
        assert_eq!(to_f64(3 << 64), 3.0 * two64);
        assert_eq!(to_f64((1 << 64) + 1000), two64); // within half an ulp (2048) of 2⁶⁴
        assert_eq!(to_f64(1 << 100), 2f64.powi(100));
        for x in [7u128 << 70, u128::MAX, 10u128.pow(21) + 7, (1 << 64) - 1] {
            assert_eq!(to_f64(x), x as f64, "{x}");
        }
    }

    /// A prompt long enough that the attention FLOPs pass 2⁶⁴: 4,000,000 tokens of Llama-3-70B (such a
    /// prompt fits the KV cache of a 64×H100 instance, 13.6 M tokens). The prefill FLOPs are still
    /// 2·P_mm·T + 2·L·d·s·(s+1) (spec (b)), exact in integers and rounded once.
    #[test]
    fn prefill_flops_beyond_2_pow_64_stay_exact() {
        let c = ModelCost::new(&preset("llama3-70b"), LmHead::All);
        let s: u128 = 4_000_000;
        let attention = 2 * 80 * 8192 * s * (s + 1);
        assert!(attention > 1 << 64);
        assert_eq!(c.prompt_attention_flops(4_000_000), attention);
        let p_mm: u128 = 80 * (2 * 8192 * 8192 + 2 * 8192 * 1024 + 3 * 8192 * 28672) + 128_256 * 8192;
        let want = (2 * p_mm * s + attention) as f64;
        assert_eq!(c.prefill(4_000_000, 1, attention).flops, want);
    }
}
