//! FLOPs and HBM bytes of one forward pass (`spec/simulator.md` (b)).
//!
//! Parameter and FLOP counts are exact integers (`u128`) rounded once to `f64`, as the reference computes
//! them with Python integers.

use super::presets::{AttentionKind, ModelSpec};

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

/// The prompt chunks of one mixed (chunked-prefill) step, summed over its chunks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Chunks {
    /// Σ c: prompt tokens computed in this step.
    pub tokens: u64,
    /// Σ p: tokens of those prompts already in the KV cache from earlier chunks (read by the attention).
    pub cached_tokens: u64,
    /// Σ [`ModelCost::chunk_attention_flops`]`(c, p)`.
    pub attention_flops: u128,
    /// Chunks that end their prompt (each charges the LM head once under [`LmHead::Last`]).
    pub last_chunks: u64,
}

/// Round an exact count to the nearest `f64` (the common case, below 2⁶³, converts through `i64`: one
/// instruction, where `u64` and `u128` conversions take several or a library call; same rounding).
#[inline]
fn to_f64(x: u128) -> f64 {
    if x >> 63 == 0 {
        x as i64 as f64
    } else {
        wide_to_f64(x)
    }
}

#[cold]
#[inline(never)]
fn wide_to_f64(x: u128) -> f64 {
    x as f64
}

/// FLOPs with the matmuls counted `scale` times (a compute format other than BF16; out of the default path).
#[cold]
#[inline(never)]
fn scaled_flops(matmul: u128, attention: u128, scale: f64) -> f64 {
    to_f64(matmul) * scale + to_f64(attention)
}

/// Derived, exact quantities of a model shape.
///
/// Dense GQA models follow the reference simulator exactly (`spec/simulator.md` (b)). Extensions:
/// * **MLA** (DeepSeek): the KV cache holds `kv_lora_rank + qk_rope_dim` values per token and layer; the
///   attention projections are counted from their shapes; a (query, key) pair costs
///   2·heads·(kv_lora + rope) FLOPs for the scores and 2·heads·kv_lora for the values (the absorbed form
///   engines run), where GQA keeps the reference's 2·d + 2·d.
/// * **MoE**: FLOPs use the active parameters (top-k + shared experts and the router per MoE layer); a pass
///   over T tokens reads the weights of E·(1 − (1 − k/E)^T) distinct routed experts per MoE layer (the
///   expected number touched by T tokens picking k of E uniformly), plus everything dense.
#[derive(Clone, Debug, PartialEq)]
pub struct ModelCost {
    layers: u128,
    d_model: u128,
    vocab: u128,
    /// Active parameters of all transformer layers (P_L).
    pub layer_params: u128,
    /// Active layer parameters plus the LM head (P_mm): the matmul weights a token goes through.
    pub matmul_params: u128,
    /// All parameters, embedding and LM head counted separately (untied).
    pub total_params: u128,
    /// Bytes per weight.
    pub weight_bytes_per_param: f64,
    /// KV bytes per token, all layers.
    pub kv_bytes_per_token: f64,
    /// Attention FLOPs per (query, key) pair per layer.
    attn_pair_flops: u128,
    /// Parameters every pass reads in full (attention, dense MLPs, shared experts, routers, LM head).
    fixed_read_params: u128,
    /// Parameters of one routed expert, the routed experts per MoE layer, top-k, and MoE layer count.
    expert_params: u128,
    experts: u32,
    top_k: u32,
    moe_layers: u128,
    lm_head: LmHead,
    /// What one matmul FLOP counts on the roofline's BF16 rate: BF16 peak / the compute format's peak (1 for
    /// BF16; 989/1979 for FP8 on an H100). Attention FLOPs stay at 1 (BF16).
    matmul_scale: f64,
    /// `matmul_scale != 1` (one flag tested per step, where a float comparison would take several).
    scaled: bool,
    /// MoE: the distinct experts of the last pass's token count ([`Self::weights_read`]).
    touched: TouchedMemo,
}

/// The last (tokens, distinct routed experts) a MoE model's weight reads computed: consecutive steps of a batch
/// pass the same token count, and the power it costs is most of a MoE step's arithmetic. A memo of a pure
/// function, so it changes no result; it takes no part in comparing two models.
#[derive(Clone, Debug, Default)]
struct TouchedMemo(std::cell::Cell<(u128, f64)>);

impl PartialEq for TouchedMemo {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl ModelCost {
    /// Derive the cost constants of `m`.
    pub fn new(m: &ModelSpec, lm_head: LmHead) -> Self {
        let l = m.layers as u128;
        let d = m.d_model as u128;
        let h = m.heads as u128;
        let (attn_params, attn_pair_flops, kv_values_per_layer) = match m.attention {
            AttentionKind::Gqa => {
                let kv_width = m.kv_heads as u128 * m.head_dim as u128;
                (2 * d * d + 2 * d * kv_width, 4 * d, 2 * kv_width)
            }
            AttentionKind::Mla => {
                let (lora, rope) = (m.kv_lora_rank as u128, m.qk_rope_dim as u128);
                let (nope, v) = (m.qk_nope_dim as u128, m.v_head_dim as u128);
                let q_head = h * (nope + rope);
                let q = if m.q_lora_rank == 0 {
                    d * q_head
                } else {
                    d * m.q_lora_rank as u128 + m.q_lora_rank as u128 * q_head
                };
                let params = q + d * (lora + rope) + lora * h * (nope + v) + h * v * d;
                (params, 2 * h * (lora + rope) + 2 * h * lora, lora + rope)
            }
        };
        let dense_mlp = 3 * d * m.d_ff as u128;
        let vocab = m.vocab as u128;
        let (dense_layers, moe_layers) = if m.n_experts == 0 {
            (l, 0)
        } else {
            let dl = (m.dense_layers as u128).min(l);
            (dl, l - dl)
        };
        let expert = 3 * d * m.moe_d_ff as u128;
        let router = d * m.n_experts as u128;
        let shared = m.n_shared_experts as u128 * expert;
        let base = l * attn_params + dense_layers * dense_mlp + moe_layers * (shared + router);
        let layer_params = base + moe_layers * m.top_k as u128 * expert;
        ModelCost {
            layers: l,
            d_model: d,
            vocab,
            layer_params,
            matmul_params: layer_params + vocab * d,
            total_params: base + moe_layers * m.n_experts as u128 * expert + 2 * vocab * d,
            weight_bytes_per_param: m.weight_bytes_per_param,
            kv_bytes_per_token: (l * kv_values_per_layer) as f64 * m.kv_bytes_per_value,
            attn_pair_flops,
            fixed_read_params: base + vocab * d,
            expert_params: expert,
            experts: m.n_experts,
            top_k: m.top_k,
            moe_layers,
            lm_head,
            matmul_scale: 1.0,
            scaled: false,
            touched: TouchedMemo::default(),
        }
    }

    /// The same model with its matmuls counted `scale` times (a compute format faster than BF16: `scale` =
    /// BF16 peak / that format's peak).
    pub fn with_matmul_scale(&self, scale: f64) -> Self {
        ModelCost { matmul_scale: scale, scaled: scale != 1.0, ..self.clone() }
    }

    /// FLOPs of a step on the roofline's BF16 rate: matmuls scaled by the compute format, attention as is
    /// (exactly the exact sum rounded once when the scale is 1).
    #[inline(always)]
    fn step_flops(&self, matmul: u128, attention: u128) -> f64 {
        if self.scaled {
            scaled_flops(matmul, attention, self.matmul_scale)
        } else {
            to_f64(matmul + attention)
        }
    }

    /// The same model with its KV cache stored `ratio` times smaller (a compressed cache format).
    pub fn with_kv_ratio(&self, ratio: f64) -> Self {
        ModelCost { kv_bytes_per_token: self.kv_bytes_per_token / ratio, ..self.clone() }
    }

    /// Layers and hidden size (the activation width a collective moves per token).
    pub fn layers_and_width(&self) -> (u32, u32) {
        (self.layers as u32, self.d_model as u32)
    }

    /// MoE layers (0 for a dense model).
    pub fn moe_layers(&self) -> u32 {
        self.moe_layers as u32
    }

    /// Bytes of the routed experts' weights (all MoE layers, every expert); the rest of the resident weights
    /// (attention, dense MLPs, shared experts, routers, embeddings) is [`Self::resident_weight_bytes`] minus this.
    pub fn routed_expert_bytes(&self) -> f64 {
        to_f64(self.moe_layers * self.experts as u128 * self.expert_params) * self.weight_bytes_per_param
    }

    /// Bytes every pass reads in full (attention, dense MLPs, shared experts, routers, LM head).
    pub fn fixed_read_bytes(&self) -> f64 {
        to_f64(self.fixed_read_params) * self.weight_bytes_per_param
    }

    /// Matmul FLOPs of the routed experts per token (2 · top-k · expert parameters per MoE layer).
    pub fn routed_flops_per_token(&self) -> f64 {
        to_f64(2 * self.moe_layers * self.top_k as u128 * self.expert_params) * self.matmul_scale
    }

    /// Bytes of weights resident in HBM (both embedding tables counted).
    pub fn resident_weight_bytes(&self) -> f64 {
        self.total_params as f64 * self.weight_bytes_per_param
    }

    /// Weight bytes read by a pass over `tokens` tokens: every weight a token can touch once (for MoE, the
    /// expected distinct experts), plus the looked-up embedding rows.
    #[inline]
    fn weights_read(&self, tokens: u128) -> f64 {
        let mut params = to_f64(self.fixed_read_params);
        if self.moe_layers > 0 && tokens > 0 {
            let (last, value) = self.touched.0.get();
            let touched = if last == tokens {
                value
            } else {
                let e = self.experts as f64;
                let v = e * (1.0 - (1.0 - self.top_k as f64 / e).powf(tokens as f64));
                self.touched.0.set((tokens, v));
                v
            };
            params += to_f64(self.moe_layers * self.expert_params) * touched;
        }
        params * self.weight_bytes_per_param + to_f64(tokens * self.d_model) * self.weight_bytes_per_param
    }

    /// Causal-attention FLOPs of one prompt of `s` tokens: L·a·s·(s+1)/2 for a FLOPs per (query, key) pair
    /// (= 2·L·d·s·(s+1) for GQA, the reference).
    pub fn prompt_attention_flops(&self, s: u64) -> u128 {
        let s = s as u128;
        self.layers * self.attn_pair_flops * s * (s + 1) / 2
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
            flops: self.step_flops(matmul, attention_flops),
            bytes: self.weights_read(t) + total_tokens as f64 * self.kv_bytes_per_token,
        }
    }

    /// Causal-attention FLOPs of a chunk of `c` prompt tokens after `p` tokens of the same prompt already
    /// cached: each new token attends to the `p` cached ones and causally to the chunk, c·p + c·(c+1)/2
    /// (query, key) pairs at a FLOPs each per layer. With p = 0 and c = s this is
    /// [`Self::prompt_attention_flops`]`(s)`, and the chunks of a prompt sum to it exactly.
    pub fn chunk_attention_flops(&self, c: u64, p: u64) -> u128 {
        let (c, p) = (c as u128, p as u128);
        self.layers * self.attn_pair_flops * (c * p + c * (c + 1) / 2)
    }

    /// Work of one mixed step (chunked prefill): `rows` decoding sequences with `ctx` cached context tokens
    /// (one token each, as [`Self::decode`]) and the prompt chunks `chunks`, in one pass over the weights
    /// (read once for all `rows + chunks.tokens` tokens). Bytes: the weights, the decode rows' KV read and
    /// written, and each chunk's cached KV read (p tokens) and its own KV written (c tokens).
    ///
    /// With no decode rows and single whole-prompt chunks this is [`Self::prefill`] exactly; with no chunks it
    /// is [`Self::decode`] exactly.
    #[inline]
    pub fn mixed(&self, ctx: u64, rows: u64, chunks: Chunks) -> StepWork {
        self.mixed_verify(ctx, rows, 0, chunks)
    }

    /// [`Self::mixed`] with speculative decoding: each decode row verifies γ + 1 positions as in
    /// [`Self::verify`] (c = γ + 1 positions' matmuls, c·ctx_i + c(c+1)/2 attention pairs, c positions' KV
    /// written) beside the chunks, the weights read once for all positions and chunk tokens. With γ = 0 this is
    /// `mixed` exactly (the same integers).
    #[inline]
    pub fn mixed_verify(&self, ctx: u64, rows: u64, gamma: u32, chunks: Chunks) -> StepWork {
        let (b, c) = (rows as u128, gamma as u128 + 1);
        let positions = b * c;
        let t = chunks.tokens as u128;
        let chunk_matmul = match self.lm_head {
            LmHead::All => 2 * self.matmul_params * t,
            LmHead::Last => 2 * self.layer_params * t + 2 * self.vocab * self.d_model * chunks.last_chunks as u128,
        };
        let decode_attention = self.layers * self.attn_pair_flops * (c * ctx as u128 + b * c * (c + 1) / 2);
        let kv_tokens = ctx as u128 + positions + chunks.cached_tokens as u128 + t;
        StepWork {
            flops: self.step_flops(
                2 * self.matmul_params * positions + chunk_matmul,
                decode_attention + chunks.attention_flops,
            ),
            bytes: self.weights_read(positions + t) + to_f64(kv_tokens) * self.kv_bytes_per_token,
        }
    }

    /// Work of a decode step for `batch` sequences whose cached context sums to `ctx` tokens.
    #[inline(always)]
    pub fn decode(&self, ctx: u64, batch: u64) -> StepWork {
        let b = batch as u128;
        let positions = ctx as u128 + b;
        StepWork {
            flops: self.step_flops(2 * self.matmul_params * b, self.layers * self.attn_pair_flops * positions),
            bytes: self.weights_read(b) + to_f64(positions) * self.kv_bytes_per_token,
        }
    }

    /// Work of a speculative verify step: `batch` sequences holding `ctx` tokens of context each run γ + 1
    /// positions (the last token and γ drafts) in one pass — matmuls and the LM head on every position,
    /// causal attention over the context and the positions before it (c·ctx_i + c(c+1)/2 pairs per sequence,
    /// c = γ + 1), the context's KV read and the positions' written. With γ = 0 this is [`Self::decode`]
    /// exactly.
    pub fn verify(&self, ctx: u64, batch: u64, gamma: u32) -> StepWork {
        let (b, c) = (batch as u128, gamma as u128 + 1);
        let t = b * c;
        let attention = self.layers * self.attn_pair_flops * (c * ctx as u128 + b * c * (c + 1) / 2);
        StepWork {
            flops: self.step_flops(2 * self.matmul_params * t, attention),
            bytes: self.weights_read(t) + to_f64(ctx as u128 + t) * self.kv_bytes_per_token,
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
            ("mixtral-8x7b", 46.7025, 12.7486, 131_072.0),
        ];
        for (key, params_b, mm_b, kvpt) in rows {
            let c = ModelCost::new(&preset(key), LmHead::All);
            assert_eq!((c.total_params as f64 / 1e5).round() / 1e4, params_b, "{key} params");
            assert_eq!((c.matmul_params as f64 / 1e5).round() / 1e4, mm_b, "{key} matmul params");
            assert_eq!(c.kv_bytes_per_token, kvpt, "{key} kv bytes/token");
        }
    }

    /// DeepSeek-V3 (MLA + MoE): 671 B parameters, 37 B active (the model card's figures, to the billion,
    /// without the multi-token-prediction module); KV per token and layer 576 values = 1,152 B in BF16.
    #[test]
    fn deepseek_v3_shape() {
        let c = ModelCost::new(&preset("deepseek-v3"), LmHead::All);
        assert_eq!((c.total_params as f64 / 1e9).round(), 671.0);
        assert_eq!((c.matmul_params as f64 / 1e9).round(), 37.0);
        assert_eq!(c.kv_bytes_per_token, 61.0 * 1152.0);
        // The absorbed MLA attention: 2·128·(512 + 64) + 2·128·512 FLOPs per (query, key) pair and layer.
        assert_eq!(c.prompt_attention_flops(1), 61 * (2 * 128 * 576 + 2 * 128 * 512));
    }

    /// MoE weight reads: one token reads top-k routed experts' worth in expectation (E·(1−(1−k/E)) = k), many
    /// tokens approach all E experts.
    #[test]
    fn moe_reads_the_experts_a_batch_touches() {
        let c = ModelCost::new(&preset("mixtral-8x7b"), LmHead::All);
        let expert_bytes = 32.0 * 3.0 * 4096.0 * 14336.0 * 2.0;
        let fixed = (c.fixed_read_params as f64) * 2.0;
        let one = c.weights_read(1) - 4096.0 * 2.0;
        assert!((one - (fixed + 2.0 * expert_bytes)).abs() < 1.0, "{one}");
        let many = c.weights_read(10_000) - 10_000.0 * 4096.0 * 2.0;
        assert!((many - (fixed + 8.0 * expert_bytes)).abs() < 1.0, "{many}");
        // Decode FLOPs use the active parameters (2 of 8 experts).
        assert_eq!(c.decode(0, 1).flops, (2 * c.matmul_params + 4 * 32 * 4096) as f64);
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

    /// A chunk of c = 300 tokens after p = 700 cached ones on Llama-3-8B, from the shape alone (L = 32,
    /// d = 4,096, 8 KV heads of 128, d_ff = 14,336, V = 128,256; BF16): attention 4·d FLOPs per (query, key)
    /// pair per layer over c·p + c·(c+1)/2 pairs; matmuls 2·P_L per token (a non-final chunk under "last"
    /// computes no LM head) or 2·P_mm per token ("all"); bytes: every weight once (P_mm, the LM head
    /// included, as the reference's W(T)) plus c embedding rows, the p cached tokens' KV read and the c
    /// new ones' written at 2·L·8·128·2 = 131,072 B per token.
    #[test]
    fn chunk_cost_is_the_formula() {
        let (l, d, kvw, ff, v): (u128, u128, u128, u128, u128) = (32, 4096, 8 * 128, 14336, 128_256);
        let p_l = l * (2 * d * d + 2 * d * kvw + 3 * d * ff);
        let p_mm = p_l + v * d;
        let (c, p) = (300u128, 700u128);
        let attention = l * 4 * d * (c * p + c * (c + 1) / 2);
        let bytes = (2 * p_mm + 2 * d * c) as f64 + ((p + c) * 131_072) as f64;
        let last = ModelCost::new(&preset("llama3-8b"), LmHead::Last);
        let all = ModelCost::new(&preset("llama3-8b"), LmHead::All);
        assert_eq!(last.chunk_attention_flops(300, 700), attention);
        let chunk = Chunks { tokens: 300, cached_tokens: 700, attention_flops: attention, last_chunks: 0 };
        assert_eq!(last.mixed(0, 0, chunk), StepWork { flops: (2 * p_l * c + attention) as f64, bytes });
        assert_eq!(all.mixed(0, 0, chunk), StepWork { flops: (2 * p_mm * c + attention) as f64, bytes });
        // The final chunk charges the LM head once under "last".
        let final_chunk = Chunks { last_chunks: 1, ..chunk };
        assert_eq!(last.mixed(0, 0, final_chunk).flops, (2 * p_l * c + 2 * v * d + attention) as f64);
        // Decode rows add their own terms (2·P_mm + 4·L·d per position, KV of ctx + rows) to the same pass,
        // which reads the weights once for all rows + c tokens.
        let mixed = last.mixed(5000, 4, chunk);
        let want_flops = 2 * p_l * c + attention + 2 * p_mm * 4 + l * 4 * d * (5000 + 4);
        assert_eq!(mixed.flops, want_flops as f64);
        let want_bytes = (2 * p_mm + 2 * d * (c + 4)) as f64 + ((p + c + 5004) * 131_072) as f64;
        assert_eq!(mixed.bytes, want_bytes);
    }

    /// A whole prompt as one chunk with no decode rows costs exactly its whole-prompt prefill; no chunks is
    /// exactly a decode step; and the chunks of a prompt, split anywhere, sum to its whole attention.
    #[test]
    fn verify_with_no_drafts_is_a_decode_step() {
        for key in ["llama3-8b", "mixtral-8x7b", "deepseek-v3"] {
            let m = ModelCost::new(&preset(key), LmHead::Last);
            assert_eq!(m.verify(123_456, 37, 0), m.decode(123_456, 37), "{key}");
            let scaled = m.with_matmul_scale(0.5);
            assert_eq!(scaled.verify(99, 3, 0), scaled.decode(99, 3), "{key}");
        }
    }

    /// A verify pass over c = γ + 1 positions per sequence: c times the matmul FLOPs and tokens, and
    /// attention pairs c·ctx + b·c(c+1)/2 (written out for Llama-3-8B: 2·(P_L + V·d) per position, 4·d per
    /// pair and layer).
    #[test]
    fn verify_pass_counts_every_position() {
        let m = ModelCost::new(&preset("llama3-8b"), LmHead::Last);
        let (ctx, b, g) = (1000u64, 2u64, 3u32);
        let c = (g + 1) as f64;
        let p_mm = 32.0 * (2.0 * 4096.0 * 4096.0 + 2.0 * 4096.0 * 1024.0 + 3.0 * 4096.0 * 14336.0) + 128256.0 * 4096.0;
        let pairs = c * ctx as f64 + b as f64 * c * (c + 1.0) / 2.0;
        let want = 2.0 * p_mm * b as f64 * c + 32.0 * 4.0 * 4096.0 * pairs;
        assert_eq!(m.verify(ctx, b, g).flops, want);
    }

    #[test]
    fn mixed_step_reduces_to_prefill_and_decode() {
        for key in ["llama3-8b", "mixtral-8x7b", "deepseek-v3"] {
            for head in [LmHead::Last, LmHead::All] {
                let m = ModelCost::new(&preset(key), head);
                let (a, b) = (m.prompt_attention_flops(3000), m.prompt_attention_flops(17));
                let two = Chunks { tokens: 3017, cached_tokens: 0, attention_flops: a + b, last_chunks: 2 };
                assert_eq!(m.mixed(0, 0, two), m.prefill(3017, 2, a + b), "{key}");
                assert_eq!(m.mixed(123_456, 37, Chunks::default()), m.decode(123_456, 37), "{key}");
                let mut done = 0u64;
                let mut sum = 0u128;
                for c in [1000u64, 1, 999, 1000] {
                    sum += m.chunk_attention_flops(c, done);
                    done += c;
                }
                assert_eq!(sum, m.prompt_attention_flops(3000), "{key}");
            }
        }
    }

    /// A mixed step whose decode rows verify drafts: with no chunks it is the verify pass exactly (whose
    /// counts `verify_pass_counts_every_position` checks), and with γ = 0 the plain mixed step exactly.
    #[test]
    fn mixed_verify_is_verify_beside_chunks() {
        for key in ["llama3-8b", "mixtral-8x7b", "deepseek-v3"] {
            let m = ModelCost::new(&preset(key), LmHead::Last);
            let a = m.chunk_attention_flops(500, 200);
            let chunk = Chunks { tokens: 500, cached_tokens: 200, attention_flops: a, last_chunks: 1 };
            for g in [1u32, 3, 7] {
                assert_eq!(m.mixed_verify(9_999, 12, g, Chunks::default()), m.verify(9_999, 12, g), "{key}");
            }
            assert_eq!(m.mixed_verify(9_999, 12, 0, chunk), m.mixed(9_999, 12, chunk), "{key}");
        }
    }

    /// `to_f64` rounds an exact count to the nearest `f64` on both of its paths: below 2⁶³ (the fast
    /// `i64` path) and at or above it (the `u128` path). Expected values are exact powers of two and
    /// their multiples, and Rust's correctly rounded `u128 as f64`.
    #[test]
    fn to_f64_is_exact_rounding_on_both_sides_of_2_pow_64() {
        let two64 = 18_446_744_073_709_551_616.0_f64;
        assert_eq!(to_f64(0), 0.0);
        assert_eq!(to_f64(1 << 53), 9_007_199_254_740_992.0);
        assert_eq!(to_f64((1 << 63) - 1), 9_223_372_036_854_775_808.0); // rounds up to 2⁶³
        assert_eq!(to_f64(1 << 63), 9_223_372_036_854_775_808.0);
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
