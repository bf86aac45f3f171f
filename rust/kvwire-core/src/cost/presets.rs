//! Hardware and model presets, each with its source.
//!
//! Shapes come from each model's published `config.json`; device peaks from the vendor datasheets; the
//! derating factors (`flops_eff`, `bw_eff`), idle power and energy coefficients, and the link table are
//! those of the reference simulator (Disaggregated_Inference_Sim `hardware.py`, MIT licence), as
//! transcribed in `spec/simulator.md` (a). Units are decimal SI: GB = 1e9 B, TB/s = 1e12 B/s.

use serde::{Deserialize, Serialize};

/// A decoder-only transformer shape (dense attention + SwiGLU MLP).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelSpec {
    /// Display name.
    pub name: String,
    /// Transformer layers (L).
    pub layers: u32,
    /// Hidden size (d).
    pub d_model: u32,
    /// Attention (query) heads.
    pub heads: u32,
    /// Key/value heads (GQA width).
    pub kv_heads: u32,
    /// Per-head dimension.
    pub head_dim: u32,
    /// MLP intermediate size.
    pub d_ff: u32,
    /// Vocabulary size.
    pub vocab: u32,
    /// Attention variant: `"gqa"` (multi/grouped-query; K and V per KV head) or `"mla"` (multi-head latent
    /// attention: one compressed latent plus a RoPE part per token and layer).
    #[serde(default)]
    pub attention: AttentionKind,
    /// MLA: latent (compressed KV) rank.
    #[serde(default)]
    pub kv_lora_rank: u32,
    /// MLA: RoPE part of the key per token.
    #[serde(default)]
    pub qk_rope_dim: u32,
    /// MLA: non-RoPE part of each query/key head.
    #[serde(default)]
    pub qk_nope_dim: u32,
    /// MLA: value head dimension.
    #[serde(default)]
    pub v_head_dim: u32,
    /// MLA: query low-rank dimension (0: full-rank query projection).
    #[serde(default)]
    pub q_lora_rank: u32,
    /// MoE: routed experts per MoE layer (0: dense model).
    #[serde(default)]
    pub n_experts: u32,
    /// MoE: routed experts per token.
    #[serde(default)]
    pub top_k: u32,
    /// MoE: always-active shared experts per MoE layer.
    #[serde(default)]
    pub n_shared_experts: u32,
    /// MoE: intermediate size of one expert (SwiGLU, 3 matrices).
    #[serde(default)]
    pub moe_d_ff: u32,
    /// MoE: leading layers that use a dense MLP of size `d_ff` instead of experts.
    #[serde(default)]
    pub dense_layers: u32,
    /// Bytes per weight (2.0 = BF16). With `weights` given, the format's bytes (a different value here is
    /// refused).
    #[serde(default = "two")]
    pub weight_bytes_per_param: f64,
    /// Weight format: `"bf16"`, `"fp8"`, `"fp4"`/`"nvfp4"`, `"mxfp4"` or `"int4"` (`None`: as
    /// `weight_bytes_per_param` says, BF16 matmuls).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weights: Option<String>,
    /// Activation format of the matmuls: `"bf16"` (default), `"fp8"`, `"fp4"`/`"nvfp4"` or `"mxfp4"`. A
    /// matmul runs in the wider of the weights' and the activations' formats, at the device's peak for it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub activations: Option<String>,
    /// Bytes per cached K or V element (2.0 = BF16).
    #[serde(default = "two")]
    pub kv_bytes_per_value: f64,
    /// Longest sequence (prompt + output tokens) the model accepts: its `max_position_embeddings`. `None`
    /// (an inline model that does not give it): not checked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_context_tokens: Option<u32>,
    /// Where the preset's numbers come from.
    #[serde(default)]
    pub source: String,
}

/// Attention variant of a model.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AttentionKind {
    /// Multi-head / grouped-query attention (the reference's cost rules).
    #[default]
    Gqa,
    /// Multi-head latent attention (DeepSeek-V2/V3).
    Mla,
}

fn two() -> f64 {
    2.0
}

/// One accelerator (one device; an instance is `devices_per_instance` of them acting as one).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeviceSpec {
    /// Display name.
    pub name: String,
    /// Dense BF16 peak, TFLOP/s (1e12 FLOP/s).
    pub peak_tflops: f64,
    /// Dense FP8 peak, TFLOP/s (`None`: no FP8 tensor cores; FP8 matmuls run at the BF16 peak).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fp8_peak_tflops: Option<f64>,
    /// Dense FP4 (NVFP4 / MXFP4) peak, TFLOP/s (`None`: no FP4 tensor cores; FP4 matmuls run at the FP8 peak,
    /// or BF16's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fp4_peak_tflops: Option<f64>,
    /// HBM bandwidth, TB/s (1e12 B/s).
    pub hbm_tb_per_s: f64,
    /// HBM capacity, GB (1e9 B).
    pub hbm_gb: f64,
    /// Fraction of the FLOP peak reached by real kernels (roofline derating).
    pub flops_eff: f64,
    /// Fraction of the HBM peak reached by real kernels.
    pub bw_eff: f64,
    /// Board power limit, W.
    pub tdp_w: f64,
    /// Static power, W.
    pub idle_w: f64,
    /// Dynamic energy per FLOP, pJ.
    pub pj_per_flop: f64,
    /// Dynamic energy per HBM byte, pJ.
    pub pj_per_byte: f64,
    /// Where the preset's numbers come from.
    #[serde(default)]
    pub source: String,
    /// Whether the device runs a hand-off's layout / fp8-flavour conversion kernel on its own memory
    /// (`handoff.convert.at = "sender"` on a prefill pool of it, `"receiver"` on a decode pool of it). Every
    /// GPU preset does; the illustrative wafer-scale engine does not (see its source).
    #[serde(default = "converts_kv_default")]
    pub converts_kv: bool,
    /// The scale-up fabric the device's collectives run on inside one domain (NVLink within an HGX board or
    /// an NVL72 rack, Infinity Fabric on an MI300X platform). `None`: no scale-up fabric is modelled, and a
    /// pool of the device with `parallel` set is refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scale_up: Option<ScaleUp>,
}

fn converts_kv_default() -> bool {
    true
}

/// A device's scale-up domain: how many devices share the fabric, and one device's bandwidth into it.
///
/// Either `link` names a link preset (its `bandwidth_gb_per_s` and `latency_us` are used), or the two
/// figures are given; validation resolves `bandwidth_gb_per_s` and `latency_us` and checks them.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScaleUp {
    /// Devices in one domain (8 on an HGX H100/H200/B200 board or an MI300X platform, 72 on GB200 NVL72).
    pub domain: u32,
    /// A link preset key whose figures describe one device's port into the fabric.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link: Option<String>,
    /// One direction, per device, GB/s (1e9 B/s).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bandwidth_gb_per_s: Option<f64>,
    /// Per-message latency α of the collectives, µs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_us: Option<f64>,
}

impl ScaleUp {
    fn nvlink(key: &str) -> Option<ScaleUp> {
        Some(ScaleUp { domain: 8, link: Some(key.into()), bandwidth_gb_per_s: None, latency_us: None })
    }
}

/// A point-to-point link carrying the KV hand-off (one direction), with its transfer layer: the NICs a
/// transfer is striped over, how many GPUs share them, the connector's per-transfer launch overhead and
/// memory registration. The transfer-layer fields default to the reference simulator's ideal transport (no
/// overhead, a pre-registered pool, one dedicated NIC at line rate); the presets built on measurements set
/// them (see [`link_presets`] and [`default_nic_efficiency`]).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LinkSpec {
    /// Display name.
    pub name: String,
    /// Line rate of one NIC (of the link, with `nics` 1) per channel, GB/s (1e9 B/s).
    pub bandwidth_gb_per_s: f64,
    /// One-way latency per transfer, µs.
    pub latency_us: f64,
    /// Energy per bit moved, pJ.
    pub pj_per_bit: f64,
    /// NICs one transfer is striped over (a transfer engine's multi-NIC aggregation).
    #[serde(default = "one_u32")]
    pub nics: u32,
    /// Fraction of the NICs' aggregate line rate a transfer reaches. `None` (not given): resolved at
    /// validation from [`default_nic_efficiency`] of `nics`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nic_efficiency: Option<f64>,
    /// GPUs whose hand-offs share each NIC: a transfer gets 1/`gpus_per_nic` of its NICs (the GPUs of an
    /// instance send their shards at the same time).
    #[serde(default = "one_u32")]
    pub gpus_per_nic: u32,
    /// Per-transfer launch overhead of the connector (building and posting descriptors), µs.
    #[serde(default)]
    pub launch_overhead_us: f64,
    /// Memory registration: once for a pre-registered pool (not per transfer), or per transfer for ad-hoc
    /// buffers.
    #[serde(default)]
    pub registration: Registration,
    /// Cost of registering (pinning) a buffer, ms per GB registered (used with `registration`
    /// `"per_transfer"`).
    #[serde(default = "default_registration_ms_per_gb")]
    pub registration_ms_per_gb: f64,
    /// Cost of posting one transfer descriptor (one per KV block of a rank pair), µs; 0 (the default): not
    /// charged.
    #[serde(default)]
    pub descriptor_us: f64,
    /// Where the preset's numbers come from.
    #[serde(default)]
    pub source: String,
}

impl Default for LinkSpec {
    /// An unnamed link of zero bandwidth with the reference's ideal transfer layer (fill in the rest).
    fn default() -> Self {
        LinkSpec {
            name: String::new(),
            bandwidth_gb_per_s: 0.0,
            latency_us: 0.0,
            pj_per_bit: 0.0,
            nics: 1,
            nic_efficiency: None,
            gpus_per_nic: 1,
            launch_overhead_us: 0.0,
            registration: Registration::Pool,
            registration_ms_per_gb: REGISTRATION_MS_PER_GB,
            descriptor_us: 0.0,
            source: String::new(),
        }
    }
}

impl LinkSpec {
    /// Time to move `blocks` KV blocks holding `bytes` over this link one channel wide (a swap to or from
    /// host memory): one latency per block plus the bytes at the line rate, s.
    pub fn block_transfer_s(&self, blocks: u64, bytes: f64) -> f64 {
        blocks as f64 * self.latency_us * 1e-6 + bytes / (self.bandwidth_gb_per_s * 1e9)
    }

    /// Bytes per second one transfer gets: line rate × NICs × NIC efficiency / GPUs per NIC.
    pub fn effective_bytes_per_s(&self) -> f64 {
        let efficiency = self.nic_efficiency.unwrap_or_else(|| default_nic_efficiency(self.nics));
        self.bandwidth_gb_per_s * 1e9 * self.nics as f64 * efficiency / self.gpus_per_nic as f64
    }
}

/// When a link's buffers are registered with the NIC.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Registration {
    /// Once, for a pool registered when the engine starts (vLLM's and SGLang's connectors register the KV
    /// cache at start-up): nothing per transfer. Default.
    #[default]
    Pool,
    /// For every transfer (ad-hoc buffers): `registration_ms_per_gb` × the bytes the transfer hands to the
    /// NIC, before the data moves.
    PerTransfer,
}

fn one_u32() -> u32 {
    1
}

/// Measured cost of registering memory for RDMA, ms per GB: 256 GB took more than 20 s with libfabric's
/// verbs provider (`fi_mr_reg` over `ibv_reg_mr`), i.e. 78.125 ms/GB (ofiwg/libfabric issue #4738, 2019).
pub const REGISTRATION_MS_PER_GB: f64 = 20_000.0 / 256.0;

fn default_registration_ms_per_gb() -> f64 {
    REGISTRATION_MS_PER_GB
}

/// Fraction of the aggregate line rate a transfer striped over `nics` NICs reaches, when a link does not
/// give it: piecewise linear in the NIC count through one NIC at line rate (the reference simulator's link)
/// and Mooncake's Transfer Engine measurements, 87 GB/s on 4×200 Gb/s RoCE (0.87) and 190 GB/s on 8×400 Gb/s
/// (0.475) (kvcache-ai/Mooncake `doc/en/transfer-engine.md`), and flat at 0.475 beyond 8 NICs (no
/// measurement there). The two measurements also differ in per-NIC speed; kvwire attributes the drop to the
/// NIC count, as the issue that asked for it does.
pub fn default_nic_efficiency(nics: u32) -> f64 {
    const POINTS: [(f64, f64); 3] = [(1.0, 1.0), (4.0, 0.87), (8.0, 0.475)];
    let n = nics.max(1) as f64;
    for w in POINTS.windows(2) {
        let ((x0, y0), (x1, y1)) = (w[0], w[1]);
        if n <= x1 {
            return y0 + (y1 - y0) * (n - x0) / (x1 - x0);
        }
    }
    POINTS[POINTS.len() - 1].1
}

const DEEPSEEK_V3_SRC: &str = "deepseek-ai/DeepSeek-V3 (MLA: 512-rank latent + 64 RoPE per token and layer; 256 \
     routed experts top-8 + 1 shared, first 3 layers dense; the multi-token-prediction module is not counted)";

const SHAPE_SRC: &str =
    "shape from the model's config.json; weights and KV in BF16 as in the reference simulator (spec/simulator.md (a))";
/// Where every preset's `max_context_tokens` comes from.
const CONTEXT_SRC: &str = "max_context_tokens is config.json's max_position_embeddings";
/// DeepSeek-V3's precision note, in place of [`SHAPE_SRC`]: its weights are not BF16.
const SHAPE_SRC_FP8_WEIGHTS: &str = "shape from the model's config.json; weights FP8 as released (1 byte per \
     parameter), KV in BF16 as in the reference simulator (spec/simulator.md (a))";

#[allow(clippy::too_many_arguments)]
fn model(
    name: &str,
    layers: u32,
    d_model: u32,
    heads: u32,
    kv_heads: u32,
    head_dim: u32,
    d_ff: u32,
    vocab: u32,
    max_context_tokens: u32,
    source: &str,
) -> ModelSpec {
    ModelSpec {
        name: name.into(),
        layers,
        d_model,
        heads,
        kv_heads,
        head_dim,
        d_ff,
        vocab,
        attention: AttentionKind::Gqa,
        kv_lora_rank: 0,
        qk_rope_dim: 0,
        qk_nope_dim: 0,
        v_head_dim: 0,
        q_lora_rank: 0,
        n_experts: 0,
        top_k: 0,
        n_shared_experts: 0,
        moe_d_ff: 0,
        dense_layers: 0,
        weight_bytes_per_param: 2.0,
        weights: None,
        activations: None,
        kv_bytes_per_value: 2.0,
        max_context_tokens: Some(max_context_tokens),
        source: format!("{source}; {SHAPE_SRC}; {CONTEXT_SRC}"),
    }
}

/// Model presets: `(key, spec)`.
pub fn model_presets() -> Vec<(&'static str, ModelSpec)> {
    vec![
        ("llama3-8b", model("Llama-3-8B", 32, 4096, 32, 8, 128, 14336, 128256, 8192, "meta-llama/Meta-Llama-3-8B")),
        ("llama3-70b", model("Llama-3-70B", 80, 8192, 64, 8, 128, 28672, 128256, 8192, "meta-llama/Meta-Llama-3-70B")),
        (
            "mistral-7b",
            model(
                "Mistral-7B",
                32,
                4096,
                32,
                8,
                128,
                14336,
                32000,
                32768,
                "mistralai/Mistral-7B-v0.1 (sliding window ignored)",
            ),
        ),
        ("yi-34b", model("Yi-34B", 60, 7168, 56, 8, 128, 20480, 64000, 4096, "01-ai/Yi-34B")),
        (
            "opt-13b",
            model(
                "OPT-13B",
                40,
                5120,
                40,
                40,
                128,
                13653,
                50272,
                2048,
                "facebook/opt-13b (GELU MLP of 20480 approximated as a 3-matrix MLP with d_ff 13653, as the reference does)",
            ),
        ),
        (
            "opt-66b",
            model(
                "OPT-66B",
                64,
                9216,
                72,
                72,
                128,
                24576,
                50272,
                2048,
                "facebook/opt-66b (GELU MLP of 36864 approximated as a 3-matrix MLP with d_ff 24576, as for opt-13b); \
                 Splitwise's 1.13 GB hand-off of a 512-token prompt is this model's 2·64·9216·2 B per token",
            ),
        ),
        (
            "mixtral-8x7b",
            ModelSpec {
                n_experts: 8,
                top_k: 2,
                moe_d_ff: 14336,
                ..model(
                    "Mixtral-8x7B",
                    32,
                    4096,
                    32,
                    8,
                    128,
                    14336,
                    32000,
                    32768,
                    "mistralai/Mixtral-8x7B-v0.1 (8 experts, top-2; router weights counted)",
                )
            },
        ),
        (
            "deepseek-v3",
            // The released checkpoint is FP8 (block-scaled E4M3) weights, given as weight_bytes_per_param 1.0
            // (no `weights` field: the preset predates it); the KV cache stays BF16.
            ModelSpec { weights: None, ..mla_fp8("DeepSeek-V3", 128, 256, 3, 129280, 163_840, DEEPSEEK_V3_SRC) },
        ),
        ("llama3.2-1b", model("Llama-3.2-1B", 16, 2048, 32, 8, 64, 8192, 128256, 131_072, "meta-llama/Llama-3.2-1B")),
        ("llama3.1-8b", model("Llama-3.1-8B", 32, 4096, 32, 8, 128, 14336, 128256, 131_072, "meta-llama/Llama-3.1-8B")),
        (
            "llama3.1-70b",
            model("Llama-3.1-70B", 80, 8192, 64, 8, 128, 28672, 128256, 131_072, "meta-llama/Llama-3.1-70B"),
        ),
        (
            "llama3.1-405b",
            model("Llama-3.1-405B", 126, 16384, 128, 8, 128, 53248, 128256, 131_072, "meta-llama/Llama-3.1-405B"),
        ),
        (
            "qwen3-32b",
            model(
                "Qwen3-32B",
                64,
                5120,
                64,
                8,
                128,
                25600,
                151936,
                40_960,
                "Qwen/Qwen3-32B (head_dim 128 as config.json gives it, not hidden/heads; QK-norm ignored)",
            ),
        ),
        (
            "qwen3-235b-a22b",
            ModelSpec {
                n_experts: 128,
                top_k: 8,
                moe_d_ff: 1536,
                ..model(
                    "Qwen3-235B-A22B",
                    94,
                    4096,
                    64,
                    4,
                    128,
                    12288,
                    151936,
                    40_960,
                    "Qwen/Qwen3-235B-A22B (128 experts top-8 of 1536, no shared expert, every layer MoE: \
                     decoder_sparse_step 1, no mlp_only_layers; router weights counted)",
                )
            },
        ),
        ("deepseek-r1", mla_fp8("DeepSeek-R1", 128, 256, 3, 129280, 163_840, DEEPSEEK_R1_SRC)),
        ("kimi-k2", mla_fp8("Kimi-K2", 64, 384, 1, 163840, 131_072, KIMI_K2_SRC)),
        (
            "gpt-oss-120b",
            ModelSpec {
                n_experts: 128,
                top_k: 4,
                moe_d_ff: 2880,
                weight_bytes_per_param: 0.53125,
                weights: Some("mxfp4".into()),
                source: format!("{GPT_OSS_SRC}; {CONTEXT_SRC}"),
                ..model("gpt-oss-120b", 36, 2880, 64, 8, 64, 2880, 201088, 131_072, "")
            },
        ),
        (
            "llama2-70b",
            model("Llama-2-70B", 80, 8192, 64, 8, 128, 28672, 32000, 4096, "meta-llama/Llama-2-70b-hf config.json"),
        ),
        (
            "bloom-176b",
            ModelSpec {
                source: format!(
                    "bigscience/bloom config.json (n_layer 70, hidden 14336, n_head 112; GELU MLP of 57344 \
                     approximated as a 3-matrix MLP with d_ff 38229, as for opt-13b; ALiBi positions cost nothing \
                     here); {SHAPE_SRC}; max_context_tokens is BLOOM's training sequence length, 2048 (with ALiBi \
                     its config.json has no max_position_embeddings)"
                ),
                ..model("BLOOM-176B", 70, 14336, 112, 112, 128, 38229, 250880, 2048, "")
            },
        ),
    ]
}

const DEEPSEEK_R1_SRC: &str = "deepseek-ai/DeepSeek-R1 (DeepSeek-V3's architecture: MLA 512-rank latent + 64 RoPE \
     per token and layer; 256 routed experts top-8 + 1 shared, first 3 layers dense; the multi-token-prediction \
     module is not counted)";
const KIMI_K2_SRC: &str = "moonshotai/Kimi-K2-Instruct (DeepSeek-V3's architecture with 64 heads: MLA 512-rank \
     latent + 64 RoPE per token and layer; 384 routed experts top-8 + 1 shared, first layer dense)";
const GPT_OSS_SRC: &str = "openai/gpt-oss-120b (128 experts top-4 of 2880, every layer MoE; weights MXFP4 as \
     released, applied to every weight: the BF16 attention, router and embeddings, about 2 B of 117 B \
     parameters, are counted at MXFP4's 0.53 bytes, about 3 GB under the checkpoint; KV in BF16; the \
     alternating 128-token sliding-window attention (18 of 36 layers) is modelled as full attention, so the KV \
     cache of a long prompt is overstated up to twice; attention sinks and biases ignored)";

/// A DeepSeek-V3-architecture model (MLA: a 512-rank latent + 64 RoPE, query rank 1536; experts of 2048, 1
/// shared, top-8; 61 layers, hidden 7168, dense MLP 18432) with FP8 weights as released.
fn mla_fp8(
    name: &str,
    heads: u32,
    n_experts: u32,
    dense_layers: u32,
    vocab: u32,
    max_context_tokens: u32,
    src: &str,
) -> ModelSpec {
    ModelSpec {
        attention: AttentionKind::Mla,
        kv_lora_rank: 512,
        qk_rope_dim: 64,
        qk_nope_dim: 128,
        v_head_dim: 128,
        q_lora_rank: 1536,
        n_experts,
        top_k: 8,
        n_shared_experts: 1,
        moe_d_ff: 2048,
        dense_layers,
        weight_bytes_per_param: 1.0,
        weights: Some("fp8".into()),
        source: format!("{src}; {SHAPE_SRC_FP8_WEIGHTS}; {CONTEXT_SRC}"),
        ..model(name, 61, 7168, heads, heads, 128, 18432, vocab, max_context_tokens, src)
    }
}

const DEVICE_SRC: &str =
    "flops_eff/bw_eff, idle power and pJ coefficients from the reference simulator (spec/simulator.md (a))";

#[allow(clippy::too_many_arguments)]
fn device(
    name: &str,
    peak_tflops: f64,
    hbm_tb_per_s: f64,
    hbm_gb: f64,
    tdp_w: f64,
    idle_w: f64,
    pj_per_flop: f64,
    pj_per_byte: f64,
    datasheet: &str,
) -> DeviceSpec {
    DeviceSpec {
        name: name.into(),
        peak_tflops,
        fp8_peak_tflops: None,
        fp4_peak_tflops: None,
        hbm_tb_per_s,
        hbm_gb,
        flops_eff: 0.55,
        bw_eff: 0.80,
        tdp_w,
        idle_w,
        pj_per_flop,
        pj_per_byte,
        source: format!("{datasheet}; {DEVICE_SRC}"),
        converts_kv: true,
        scale_up: None,
    }
}

/// Device presets: `(key, spec)`.
pub fn device_presets() -> Vec<(&'static str, DeviceSpec)> {
    vec![
        (
            "h100",
            DeviceSpec {
                fp8_peak_tflops: Some(1979.0),
                scale_up: ScaleUp::nvlink("nvlink4"),
                ..device(
                    "H100-SXM",
                    989.0,
                    3.35,
                    80.0,
                    700.0,
                    100.0,
                    1.0,
                    60.0,
                    "NVIDIA H100 SXM5 datasheet: 989 TFLOP/s dense BF16 (1,979 dense FP8), 3.35 TB/s, 80 GB, 700 W",
                )
            },
        ),
        (
            "h200",
            DeviceSpec {
                fp8_peak_tflops: Some(1979.0),
                scale_up: ScaleUp::nvlink("nvlink4"),
                ..device(
                    "H200-SXM",
                    989.0,
                    4.8,
                    141.0,
                    700.0,
                    100.0,
                    1.0,
                    60.0,
                    "NVIDIA H200 SXM datasheet: 989 TFLOP/s dense BF16 (1,979 dense FP8), 4.8 TB/s, 141 GB, 700 W",
                )
            },
        ),
        (
            "a100",
            DeviceSpec {
                scale_up: ScaleUp::nvlink("nvlink3"),
                ..device(
                    "A100-SXM-80GB",
                    312.0,
                    2.039,
                    80.0,
                    400.0,
                    60.0,
                    1.6,
                    70.0,
                    "NVIDIA A100 80GB SXM datasheet: 312 TFLOP/s BF16, 2.039 TB/s, 80 GB, 400 W",
                )
            },
        ),
        (
            "a100-40g",
            DeviceSpec {
                scale_up: ScaleUp::nvlink("nvlink3"),
                ..device(
                    "A100-SXM-40GB",
                    312.0,
                    1.555,
                    40.0,
                    400.0,
                    60.0,
                    1.6,
                    70.0,
                    "NVIDIA A100 40GB SXM datasheet: 312 TFLOP/s BF16, 1.555 TB/s, 40 GB, 400 W",
                )
            },
        ),
        (
            "b200",
            DeviceSpec {
                fp8_peak_tflops: Some(4500.0),
                fp4_peak_tflops: Some(9000.0),
                scale_up: ScaleUp::nvlink("nvlink5"),
                ..device(
                    "B200",
                    2250.0,
                    8.0,
                    180.0,
                    1000.0,
                    140.0,
                    0.6,
                    45.0,
                    "NVIDIA B200 (HGX) datasheet: 2.25 PFLOP/s dense BF16 (4.5 dense FP8, 9 dense FP4), 8 TB/s, 180 GB, 1000 W",
                )
            },
        ),
        (
            "mi300x",
            DeviceSpec {
                fp8_peak_tflops: Some(2614.9),
                scale_up: Some(ScaleUp {
                    domain: 8,
                    link: None,
                    bandwidth_gb_per_s: Some(448.0),
                    latency_us: Some(5.0),
                }),
                source: format!(
                    "AMD Instinct MI300X datasheet: 1,307.4 TFLOP/s dense BF16 (2,614.9 dense FP8), 5.3 TB/s HBM3, \
                     192 GB, 750 W; {AMD_ASSUMED} H100's (same generation): idle 750/7 W, 1.0 pJ/FLOP, 60 pJ/byte"
                ),
                ..device("MI300X", 1307.4, 5.3, 192.0, 750.0, 750.0 / 7.0, 1.0, 60.0, "")
            },
        ),
        (
            "mi355x",
            DeviceSpec {
                fp8_peak_tflops: Some(5033.2),
                fp4_peak_tflops: Some(10066.4),
                scale_up: Some(ScaleUp {
                    domain: 8,
                    link: None,
                    bandwidth_gb_per_s: Some(537.6),
                    latency_us: Some(5.0),
                }),
                source: format!(
                    "AMD Instinct MI355X datasheet: 2,516.6 TFLOP/s dense BF16 (5,033.2 dense FP8, 10,066.4 dense MXFP4), 8 TB/s HBM3E, \
                     288 GB, 1,400 W; {AMD_ASSUMED} B200's (same generation): idle 1400/7 W, 0.6 pJ/FLOP, \
                     45 pJ/byte"
                ),
                ..device("MI355X", 2516.6, 8.0, 288.0, 1400.0, 200.0, 0.6, 45.0, "")
            },
        ),
        (
            "gb200",
            DeviceSpec {
                fp8_peak_tflops: Some(5000.0),
                fp4_peak_tflops: Some(10000.0),
                scale_up: Some(ScaleUp {
                    domain: 72,
                    link: Some("nvlink5".into()),
                    bandwidth_gb_per_s: None,
                    latency_us: None,
                }),
                source: format!(
                    "NVIDIA GB200 NVL72 (one of its 72 Blackwell GPUs): the rack's 360 PFLOP/s BF16, 720 FP8 and 1,440 \
                     FP4 (with sparsity) over 72 GPUs and halved for dense = 2.5 PFLOP/s BF16 (5 FP8, 10 FP4); \
                     13.4 TB HBM3e and 576 TB/s over 72 = 186 GB and 8 TB/s; 1,200 W per GPU; one NVLink 5 domain of \
                     72 GPUs; {BLACKWELL_ASSUMED}"
                ),
                ..device("GB200", 2500.0, 8.0, 186.0, 1200.0, 1200.0 / 7.0, 0.6, 45.0, "")
            },
        ),
        (
            "gb300",
            DeviceSpec {
                fp8_peak_tflops: Some(5000.0),
                fp4_peak_tflops: Some(15000.0),
                scale_up: Some(ScaleUp {
                    domain: 72,
                    link: Some("nvlink5".into()),
                    bandwidth_gb_per_s: None,
                    latency_us: None,
                }),
                source: format!(
                    "NVIDIA GB300 NVL72 (one of its 72 Blackwell Ultra GPUs): dense 2.5 PFLOP/s BF16, 5 FP8, 15 FP4 \
                     (the rack's 180, 360 and 1,080 PFLOP/s dense over 72); 20 TB HBM3e and 576 TB/s over 72 = 279 GB \
                     and 8 TB/s; 1,400 W per GPU; one NVLink 5 domain of 72 GPUs; {BLACKWELL_ASSUMED}"
                ),
                ..device("GB300", 2500.0, 8.0, 279.0, 1400.0, 200.0, 0.6, 45.0, "")
            },
        ),
        (
            "wafer-scale",
            DeviceSpec {
                name: "Wafer-scale engine (illustrative)".into(),
                peak_tflops: 125_000.0,
                fp8_peak_tflops: None,
                fp4_peak_tflops: None,
                hbm_tb_per_s: 21_000.0,
                hbm_gb: 44.0,
                flops_eff: 0.55,
                bw_eff: 0.80,
                tdp_w: 23_000.0,
                idle_w: 23_000.0 / 7.0,
                pj_per_flop: 0.1,
                pj_per_byte: 1.0,
                source: WAFER_SRC.into(),
                converts_kv: false,
                scale_up: None,
            },
        ),
    ]
}

/// What the Grace-Blackwell presets take from the B200 preset (the same generation; not published).
const BLACKWELL_ASSUMED: &str = "flops_eff 0.55 and bw_eff 0.80 as every preset; idle power TDP/7 (the reference's \
     H100/B200 ratio) and B200's 0.6 pJ/FLOP and 45 pJ/byte are assumed (not published); the Grace CPU's memory \
     and power are not counted";

/// What the AMD presets take from the reference simulator's NVIDIA devices (no public figure exists).
const AMD_ASSUMED: &str = "flops_eff 0.55 and bw_eff 0.80 as every preset; idle power (TDP/7, the \
     reference's H100/B200 ratio) and pJ coefficients are not published and are assumed equal to";

/// The wafer-scale device's source: vendor figures for one wafer, and what is illustrative about it.
const WAFER_SRC: &str = "ILLUSTRATIVE, not a product model: one wafer-scale decode engine as announced by \
     Cerebras for the WSE-3 (44 GB of on-chip SRAM across 900,000 cores, 21 PB/s memory bandwidth, 125 PFLOP/s \
     peak AI compute as stated by the vendor, precision and sparsity unstated; CS-3 system about 23 kW). There is \
     no HBM: hbm_gb and hbm_tb_per_s hold the SRAM, so weights and KV must fit in 44 GB per wafer \
     (devices_per_instance = wafers, acting as one with free communication between them). flops_eff/bw_eff as \
     every preset; idle TDP/7 as the reference; 0.1 pJ/FLOP and 1 pJ/byte (on-chip SRAM) are round guesses; \
     converts_kv false: the cache lands in SRAM spread over the cores, with no flat buffer to re-layout and no \
     published conversion kernel, so a hand-off conversion runs on the sender or a host";

/// Descriptive facts of a device preset that the cost model does not use (listed by `kvwire presets`).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DeviceFacts {
    /// The scale-up link between devices of one instance.
    pub scale_up_fabric: &'static str,
    /// What `hbm_gb` / `hbm_tb_per_s` describe.
    pub memory: &'static str,
    /// A device modelled from announced figures with guessed coefficients, not a product datasheet.
    pub illustrative: bool,
}

/// [`DeviceFacts`] of every device preset: `(key, facts)`, in the order of [`device_presets`].
pub fn device_facts() -> Vec<(&'static str, DeviceFacts)> {
    let f = |scale_up_fabric, memory| DeviceFacts { scale_up_fabric, memory, illustrative: false };
    vec![
        ("h100", f("NVLink 4: 900 GB/s bidirectional (nvlink4)", "HBM3")),
        ("h200", f("NVLink 4: 900 GB/s bidirectional (nvlink4)", "HBM3e")),
        ("a100", f("NVLink 3: 600 GB/s bidirectional (nvlink3)", "HBM2e")),
        ("a100-40g", f("NVLink 3: 600 GB/s bidirectional (nvlink3)", "HBM2")),
        ("b200", f("NVLink 5: 1.8 TB/s bidirectional (nvlink5)", "HBM3e")),
        ("mi300x", f("Infinity Fabric: 7 links x 128 GB/s = 896 GB/s", "HBM3")),
        ("mi355x", f("Infinity Fabric: 7 links x 153.6 GB/s = 1,075.2 GB/s", "HBM3E")),
        ("gb200", f("NVLink 5: 1.8 TB/s bidirectional, 72 GPUs in one NVL72 domain (nvlink5)", "HBM3e")),
        ("gb300", f("NVLink 5: 1.8 TB/s bidirectional, 72 GPUs in one NVL72 domain (nvlink5)", "HBM3e")),
        (
            "wafer-scale",
            DeviceFacts {
                scale_up_fabric: "wafers chained layer by layer (illustrative: no fabric modelled, so a pool of it takes no parallel)",
                memory: "on-chip SRAM (no HBM)",
                illustrative: true,
            },
        ),
    ]
}

/// The memory a device preset's `hbm_gb` describes (`"HBM"` for a key without facts, e.g. `"custom"`).
pub fn memory_kind(key: &str) -> &'static str {
    device_facts().into_iter().find(|(k, _)| *k == key).map_or("HBM", |(_, f)| f.memory)
}

const LINK_SRC: &str =
    "bandwidth, latency and pJ/bit from the reference simulator's link table (spec/simulator.md (a))";

/// What the reference presets' transfer layer is.
const IDEAL_TRANSFER: &str = "transfer layer ideal as in the reference simulator: no launch overhead, a \
     pre-registered pool, one dedicated NIC at line rate";

fn link(name: &str, bandwidth_gb_per_s: f64, latency_us: f64, pj_per_bit: f64, note: &str) -> LinkSpec {
    LinkSpec {
        name: name.into(),
        bandwidth_gb_per_s,
        latency_us,
        pj_per_bit,
        source: format!("{note}; {LINK_SRC}; {IDEAL_TRANSFER}"),
        ..LinkSpec::default()
    }
}

/// Launch overhead of a NIXL connector per transfer, µs: vLLM's NixlConnector spends about 7 ms submitting
/// the READ of a ~5k-token request at block size 16 (descriptor posting; vllm-project/vllm issue #50913, 2026),
/// and "subsequent transfers are ~8 ms" after the first (vllm-project/vllm PR #48209, 2026).
pub const NIXL_LAUNCH_OVERHEAD_US: f64 = 7_000.0;

/// The measured transfer layers: a NIXL connector over InfiniBand NDR and Mooncake's Transfer Engine over
/// multi-NIC RoCE.
fn transfer_layer_presets() -> Vec<(&'static str, LinkSpec)> {
    let base = link("", 50.0, 10.0, 15.0, "");
    let mooncake = "kvcache-ai/Mooncake doc/en/transfer-engine.md: Transfer Engine (RDMA, multi-NIC striping) \
         measured";
    let reg = "registration: a pool registered at start (the connector registers the KV cache once); \
         registration_ms_per_gb 78.125 for \"per_transfer\" (ofiwg/libfabric issue #4738: > 20 s for 256 GB)";
    vec![
        (
            "ib-ndr-nixl",
            LinkSpec {
                name: "InfiniBand NDR 400G, NIXL connector".into(),
                launch_overhead_us: NIXL_LAUNCH_OVERHEAD_US,
                source: format!(
                    "InfiniBand NDR 400G as ib-ndr (reference bandwidth, latency, pJ/bit) through vLLM's \
                     NixlConnector: launch_overhead_us 7000 (READ submission ~7 ms for a ~5k-token request at \
                     block size 16, vllm-project/vllm issue #50913; ~8 ms per transfer after the first, PR \
                     #48209); one NIC per GPU (NVIDIA DGX H100: 8 ConnectX-7 400 Gb/s for 8 GPUs); {reg}"
                ),
                ..base.clone()
            },
        ),
        (
            "roce-4x200g",
            LinkSpec {
                name: "RoCE 4x200G, Mooncake Transfer Engine".into(),
                bandwidth_gb_per_s: 25.0,
                nics: 4,
                nic_efficiency: Some(0.87),
                source: format!(
                    "{mooncake} 87 GB/s on 4x200 Gb/s RoCE (0.87 of 100 GB/s); latency and pJ/bit as ib-ndr \
                     (reference); no launch overhead measured; {reg}"
                ),
                ..base.clone()
            },
        ),
        (
            "roce-8x400g",
            LinkSpec {
                name: "RoCE 8x400G, Mooncake Transfer Engine".into(),
                bandwidth_gb_per_s: 50.0,
                nics: 8,
                nic_efficiency: Some(0.475),
                source: format!(
                    "{mooncake} 190 GB/s on 8x400 Gb/s RoCE (0.475 of 400 GB/s); latency and pJ/bit as ib-ndr \
                     (reference); no launch overhead measured; {reg}"
                ),
                ..base
            },
        ),
    ]
}

/// Link presets: `(key, spec)`.
pub fn link_presets() -> Vec<(&'static str, LinkSpec)> {
    vec![
        ("nvlink3", link("NVLink 3 (one direction)", 300.0, 5.0, 5.0, "A100 NVLink: 600 GB/s bidirectional")),
        ("nvlink4", link("NVLink 4 (one direction)", 450.0, 5.0, 5.0, "H100 NVLink: 900 GB/s bidirectional")),
        ("nvlink5", link("NVLink 5 (one direction)", 900.0, 5.0, 5.0, "B200 NVLink: 1.8 TB/s bidirectional")),
        ("pcie4", link("PCIe Gen4 x16", 32.0, 5.0, 6.0, "PCIe 4.0 x16: 16 GT/s x 16 lanes")),
        ("pcie5", link("PCIe Gen5 x16", 64.0, 5.0, 6.0, "PCIe 5.0 x16: 32 GT/s x 16 lanes")),
        ("ib-ndr", link("InfiniBand NDR 400G", 50.0, 10.0, 15.0, "NVIDIA ConnectX-7 NDR: 400 Gb/s")),
        ("eth-100g", link("100 GbE", 12.5, 20.0, 15.0, "IEEE 802.3 100 Gb/s Ethernet")),
        ("eth-25g", link("25 GbE", 3.125, 20.0, 15.0, "IEEE 802.3 25 Gb/s Ethernet")),
        (
            "cpo-optical",
            link(
                "Co-packaged optics (illustrative)",
                200.0,
                5.0,
                3.0,
                "illustrative round numbers, not a product (seed article 004)",
            ),
        ),
    ]
    .into_iter()
    .chain(transfer_layer_presets())
    .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn preset_keys_are_the_documented_ones() {
        let m: Vec<_> = model_presets().into_iter().map(|(k, _)| k).collect();
        assert_eq!(
            m,
            [
                "llama3-8b",
                "llama3-70b",
                "mistral-7b",
                "yi-34b",
                "opt-13b",
                "opt-66b",
                "mixtral-8x7b",
                "deepseek-v3",
                "llama3.2-1b",
                "llama3.1-8b",
                "llama3.1-70b",
                "llama3.1-405b",
                "qwen3-32b",
                "qwen3-235b-a22b",
                "deepseek-r1",
                "kimi-k2",
                "gpt-oss-120b",
                "llama2-70b",
                "bloom-176b"
            ]
        );
        let d: Vec<_> = device_presets().into_iter().map(|(k, _)| k).collect();
        assert_eq!(
            d,
            ["h100", "h200", "a100", "a100-40g", "b200", "mi300x", "mi355x", "gb200", "gb300", "wafer-scale"]
        );
        let facts: Vec<_> = device_facts().into_iter().map(|(k, _)| k).collect();
        assert_eq!(facts, d);
        let l: Vec<_> = link_presets().into_iter().map(|(k, _)| k).collect();
        assert_eq!(
            l,
            [
                "nvlink3",
                "nvlink4",
                "nvlink5",
                "pcie4",
                "pcie5",
                "ib-ndr",
                "eth-100g",
                "eth-25g",
                "cpo-optical",
                "ib-ndr-nixl",
                "roce-4x200g",
                "roce-8x400g"
            ]
        );
    }

    /// The NIC efficiency curve passes through its measured points and stays within them.
    #[test]
    fn nic_efficiency_curve() {
        assert_eq!(default_nic_efficiency(1), 1.0);
        assert_eq!(default_nic_efficiency(0), 1.0);
        assert_eq!(default_nic_efficiency(4), 0.87);
        assert_eq!(default_nic_efficiency(8), 0.475);
        assert_eq!(default_nic_efficiency(64), 0.475);
        assert!((default_nic_efficiency(2) - (1.0 - 0.13 / 3.0)).abs() < 1e-15);
        assert!((default_nic_efficiency(6) - (0.87 + 0.5 * (0.475 - 0.87))).abs() < 1e-15);
        for (k, l) in link_presets() {
            let measured = l.nic_efficiency.is_none_or(|e| e == default_nic_efficiency(l.nics));
            assert!(measured, "{k}: its measured efficiency is the curve's point");
        }
        assert_eq!(REGISTRATION_MS_PER_GB, 78.125);
    }

    /// The illustrative device says so in its name, its source and its facts, and nothing else is marked.
    #[test]
    fn the_wafer_scale_device_is_marked_illustrative() {
        for ((k, d), (_, f)) in device_presets().into_iter().zip(device_facts()) {
            let marked = d.name.contains("illustrative") && d.source.starts_with("ILLUSTRATIVE");
            assert_eq!(marked, k == "wafer-scale", "{k}");
            assert_eq!(f.illustrative, k == "wafer-scale", "{k}");
        }
        assert_eq!(memory_kind("wafer-scale"), "on-chip SRAM (no HBM)");
        assert_eq!(memory_kind("custom"), "HBM");
    }

    #[test]
    fn every_preset_names_its_source() {
        assert!(model_presets().iter().all(|(_, s)| !s.source.is_empty()));
        assert!(device_presets().iter().all(|(_, s)| !s.source.is_empty()));
        assert!(link_presets().iter().all(|(_, s)| !s.source.is_empty()));
    }

    /// A source states the precision the preset uses: DeepSeek-V3's, DeepSeek-R1's and Kimi-K2's weights are 1
    /// byte per parameter (FP8 as released), gpt-oss-120b's MXFP4, every other model's 2 (BF16).
    #[test]
    fn sources_state_the_weight_precision() {
        for (key, m) in model_presets() {
            if m.weights.as_deref() == Some("mxfp4") {
                assert_eq!(m.weight_bytes_per_param, 0.53125, "{key}");
                assert!(m.source.contains("weights MXFP4") && m.source.contains("KV in BF16"), "{key}: {}", m.source);
            } else if m.weight_bytes_per_param == 1.0 {
                assert!(m.source.contains("weights FP8") && !m.source.contains("BF16 weights"), "{key}: {}", m.source);
                assert!(!m.source.contains("weights and KV in BF16"), "{key}: {}", m.source);
            } else {
                assert_eq!(m.weight_bytes_per_param, 2.0, "{key}");
                assert!(
                    m.source.contains("weights and KV in BF16") && !m.source.contains("FP8"),
                    "{key}: {}",
                    m.source
                );
            }
        }
    }
}
