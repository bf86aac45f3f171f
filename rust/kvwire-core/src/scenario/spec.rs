//! The scenario as written by users (JSON/TOML/dict): serde types with defaults and `deny_unknown_fields`.
//! Nothing here is trusted; [`super::validate`] turns a [`ScenarioSpec`] into a checked [`super::Scenario`].
//! Field names and defaults are the public contract (`spec/interface.md`).

use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use crate::handoff::plan::{CompressAt, ConvertAt, DecompressAt, Streaming};

/// Top level of a scenario. Every field is optional; `{}` is the built-in default scenario.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScenarioSpec {
    /// Model preset name or inline object (`{"preset": ..., overrides...}` or every field).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mode: Option<ModeSpec>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prefill: Option<PoolSpec>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub decode: Option<PoolSpec>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub colocated: Option<PoolSpec>,
    /// Link preset name or object `{"preset": ..., "channels": ..., overrides...}`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub link: Option<Value>,
    #[serde(default)]
    pub handoff: HandoffSpec,
    #[serde(default)]
    pub workload: WorkloadSpec,
    #[serde(default)]
    pub slo: SloSpec,
    #[serde(default)]
    pub metrics: MetricsSpec,
    #[serde(default)]
    pub cost: CostSpec,
    #[serde(default)]
    pub scheduler: SchedulerSpec,
    #[serde(default)]
    pub kv: KvSpec,
    #[serde(default)]
    pub router: RouterSpec,
    #[serde(default)]
    pub engine: EngineSpec,
    #[serde(default)]
    pub prefix_cache: PrefixCacheSpec,
    /// Speculative decoding on every decoding instance (`None`: one token per sequence and step).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub speculative: Option<SpeculativeSpec>,
    /// Instance failures and repairs (`None`: nothing fails).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub faults: Option<FaultsSpec>,
    /// Tiers below each prefilling instance's GPU memory that its prefix cache spills to, first the nearest
    /// (`None`: the GPU cache only). Needs `prefix_cache.enabled`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kv_tiers: Option<Vec<KvTierSpec>>,
}

/// One tier of `kv_tiers`: host memory behind a link, or a local SSD.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct KvTierSpec {
    pub kind: KvTierKind,
    /// Capacity per instance, GB (10⁹ bytes).
    pub capacity_gb: f64,
    /// `host`: the link between GPU and host memory, a link preset name or object (default `"pcie5"`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link: Option<Value>,
    /// `ssd`: read bandwidth, GB/s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gb_per_s: Option<f64>,
    /// `ssd`: latency of one load, µs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_us: Option<f64>,
}

/// What a KV tier is.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum KvTierKind {
    Host,
    Ssd,
}

impl KvTierKind {
    /// The kind as the scenario writes it.
    pub fn name(self) -> &'static str {
        match self {
            KvTierKind::Host => "host",
            KvTierKind::Ssd => "ssd",
        }
    }
}

/// `faults`: instances that fail and are repaired — at random (`instance`), at given times (`events`), or
/// both. A failed instance loses what it held (docs: concepts/faults).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FaultsSpec {
    /// Random failures of every instance of the pools named.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance: Option<InstanceFaultsSpec>,
    /// Scheduled outages (what-if studies).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub events: Vec<FaultEventSpec>,
    /// Times a request may start over after losing its work; one more loss fails it.
    #[serde(default = "default_max_retries")]
    pub max_retries: u32,
    /// Seed of the random failures (default: the workload's seed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
    /// Random failures of the network link (`kv-link`): its channels one by one, or the whole link.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link: Option<LinkFaultsSpec>,
    /// Probability that a transfer on a hop of the hand-off path fails when it completes (then it is sent
    /// again on that hop), in [0, 1].
    #[serde(default)]
    pub transfer_failure_p: f64,
    /// How long after a failed transfer it is sent again, s.
    #[serde(default)]
    pub retry_s: f64,
}

/// `faults.max_retries`' default.
pub const DEFAULT_MAX_RETRIES: u32 = 3;

fn default_max_retries() -> u32 {
    DEFAULT_MAX_RETRIES
}

/// `faults.instance`: each instance of `pools` alternates up times and repairs, drawn from `dist`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InstanceFaultsSpec {
    /// Mean up time from a start or a repair to the next failure, s (MTBF as it is commonly used; strictly
    /// the mean time to failure).
    pub mtbf_s: f64,
    /// Mean time to repair, s: how long a failed instance stays down.
    pub mttr_s: f64,
    #[serde(default)]
    pub dist: FaultDist,
    /// The pools whose instances fail (`"prefill"`, `"decode"`, `"colocated"`); default: every pool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pools: Option<Vec<String>>,
}

/// `faults.link`: the network link's channels (`scope = "channel"`, each on its own) or the whole link
/// (`"link"`) alternate up times and repairs, drawn from `dist`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LinkFaultsSpec {
    pub mtbf_s: f64,
    pub mttr_s: f64,
    #[serde(default)]
    pub dist: FaultDist,
    #[serde(default)]
    pub scope: LinkFaultScope,
}

/// What fails in `faults.link`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LinkFaultScope {
    /// The whole link: every channel at once.
    #[default]
    Link,
    /// Each channel on its own.
    Channel,
}

/// How up times and repairs are drawn.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FaultDist {
    /// Exponential with the given means (failures as a Poisson process).
    #[default]
    Exponential,
    /// Exactly the given times.
    Fixed,
}

/// One scheduled outage: `instance` (`"decode-0"`, `"prefill-1"`, `"colocated-0"`) or `link` (`"kv-link"`,
/// one `channel` of it or the whole link) fails at `at_s` and is back `for_s` later.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FaultEventSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub channel: Option<u32>,
    pub at_s: f64,
    pub for_s: f64,
}

/// `speculative`: each decode step drafts `tokens` tokens per sequence and verifies them in one pass.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SpeculativeSpec {
    /// `"draft"` (a separate draft model, `draft_model`), `"mtp"` (multi-token-prediction heads: one MoE-
    /// or dense layer of the target plus its LM head per drafted token) or `"eagle"` (a one-layer dense
    /// draft head plus the LM head).
    pub method: SpeculativeMethod,
    /// Draft tokens per sequence and step (γ), 1 to 16.
    pub tokens: u32,
    /// Acceptance: one probability for every draft position (i.i.d.), or one per position (the probability
    /// that position i is accepted given that the ones before it were).
    pub acceptance: Value,
    /// The draft model (`"draft"` only): a model preset name or inline object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub draft_model: Option<Value>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SpeculativeMethod {
    Draft,
    Mtp,
    Eagle,
}

/// `prefix_cache`: an LRU cache of prompt blocks per instance, matched by the requests' block hashes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PrefixCacheSpec {
    /// Off by default.
    pub enabled: bool,
    /// Cache capacity per instance, tokens; `null` / absent (default): the instance's free KV memory.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub capacity_tokens: Option<u64>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ModeSpec {
    Disaggregated,
    Colocated,
}

/// A pool of identical instances.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PoolSpec {
    /// Device preset name or inline object.
    #[serde(default = "default_device")]
    pub device: Value,
    /// Number of instances (default 1; 2 for a colocated pool given without `instances`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub instances: Option<u32>,
    #[serde(default = "one")]
    pub devices_per_instance: u32,
    /// Per-device power cap, W (applies to this pool only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub power_cap_w: Option<f64>,
    /// Format the pool keeps its KV cache in (decode and colocated pools; default `"none"` = BF16). A
    /// compressed cache raises KV capacity and lowers the KV bytes each decode step reads.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kv_format: Option<String>,
    /// Tensor, pipeline, expert and attention-data parallelism inside one instance (`None`: the
    /// instance's devices act as one, with no collective charged — the reference's model).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parallel: Option<ParallelSpec>,
}

/// `parallel` of a pool: the instance runs on tp × pp × dp devices.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct ParallelSpec {
    /// Tensor-parallel ranks (matmuls split; two all-reduces per layer).
    pub tp: u32,
    /// Pipeline stages (layers split; a batch passes the stages in turn).
    pub pp: u32,
    /// Groups of sequences a step keeps in flight in the pipeline (pp > 1 only; 1: one batch at a time).
    pub micro_batches: u32,
    /// Expert-parallel ranks (routed experts spread; dispatch and combine all-to-all per MoE layer). Must
    /// divide tp × dp.
    pub ep: u32,
    /// Attention data-parallel ranks (each attends over its own sequences; non-expert weights replicated).
    pub dp: u32,
    /// Load of the busiest expert over the mean (≥ 1): it sets the MoE layers' time.
    pub expert_imbalance: f64,
    /// Link preset of the network between scale-up domains, for collectives of groups larger than the
    /// device's domain.
    pub scale_out: String,
}

impl Default for ParallelSpec {
    fn default() -> Self {
        ParallelSpec { tp: 1, pp: 1, micro_batches: 1, ep: 1, dp: 1, expert_imbalance: 1.0, scale_out: "ib-ndr".into() }
    }
}

fn default_device() -> Value {
    Value::String("h100".into())
}
fn one() -> u32 {
    1
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct HandoffSpec {
    /// A format from the format table (`"none"`, `"fp8"`, `"mxfp4"`, ...). Default: the decode pool's
    /// `kv_format`, else `"none"`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub compression: Option<String>,
    pub compress_at: CompressAt,
    pub decompress_at: DecompressAt,
    pub streaming: Streaming,
    /// A layout conversion on the hand-off path (the engines on the two sides store KV differently).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub convert: Option<ConvertSpec>,
    /// With `prefix_cache.enabled`: blocks the decode instance's own prefix cache holds are not sent.
    pub skip_cached_prefix: bool,
}

/// `handoff.convert`: convert the cache from one engine layout to another on the way.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConvertSpec {
    /// Layout of the prefill engine's cache (a name from `kvwire.layout.layouts()`).
    pub from: String,
    /// Layout the decode engine needs.
    pub to: String,
    /// Where the conversion runs.
    pub at: ConvertAt,
    /// Tokens per block of `from` (paged layouts; default 16).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub from_block_size: Option<u32>,
    /// Tokens per block of `to` (paged layouts; default 16).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub to_block_size: Option<u32>,
    /// Layout dtype of the prefill engine's cache (`kvwire.layout.dtypes()`, e.g. `"fp8_e4m3fnuz"`: an AMD
    /// producer's fp8 flavour). Default: the model's values as stored (`model.kv_bytes_per_value`), no change.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub from_dtype: Option<String>,
    /// Layout dtype the decode engine needs (default: `from_dtype`). A conversion changes layout and fp8
    /// flavour (fn ↔ fnuz), not precision.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub to_dtype: Option<String>,
    /// Host conversion throughput per thread, GB/s of cache converted (default: kvwire's measured kernel).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host_gb_per_s: Option<f64>,
    /// Host threads converting concurrently, per prefill instance (default 1).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host_threads: Option<u32>,
    /// Power of one busy host thread, W (default 3.75: AMD EPYC 9654, 360 W TDP / 96 cores).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host_w_per_thread: Option<f64>,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkloadSpec {
    /// Number of generated requests (default 800). Not allowed with `trace`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub requests: Option<u64>,
    /// Seed of the generator (default 1). Not allowed with `trace`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub arrivals: Option<ArrivalSpec>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prompt_tokens: Option<LengthSpec>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output_tokens: Option<LengthSpec>,
    /// Explicit requests, as columns.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trace: Option<TraceSpec>,
    /// `true`: the requests are a table passed beside the scenario (Python `requests=`, CLI `--trace`), as the
    /// echo of such a run says; running the scenario without the table is then an error, not a default
    /// workload.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub external: Option<bool>,
    /// What to do with requests whose prompt + output exceed the model's context (`model.max_context_tokens`):
    /// `"warn"` (run them, count them; default), `"reject"` (refuse them at arrival), `"clip"` (cut the prompt
    /// to context − 1 tokens, then the output to what is left).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub over_context: Option<OverContext>,
    /// Closed-loop multi-turn sessions (instead of `requests`): session starts follow `arrivals`, each turn's
    /// new message and output follow `prompt_tokens` and `output_tokens`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sessions: Option<SessionsSpec>,
}

/// `workload.sessions`.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SessionsSpec {
    /// Sessions (≥ 1).
    pub count: u64,
    /// Turns per session at most (≥ 1).
    pub turns: u64,
    /// Think time from a turn's last token to the next turn's arrival, s (default 0).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub think_s: Option<f64>,
    /// Distinct system prompts (default 1); session s uses number s mod system_prompts.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub system_prompts: Option<u32>,
    /// Tokens of each system prompt (default 0).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub system_tokens: Option<u32>,
}

/// Requests longer than the model's context.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OverContext {
    /// Run them as given, counted and reported. Default.
    #[default]
    Warn,
    /// Refuse them at arrival (counted with the rejected requests).
    Reject,
    /// Cut the prompt to context − 1 tokens (the most a prompt can be with one output token), then the
    /// output to context − prompt, as a server capping `max_tokens` does.
    Clip,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ArrivalSpec {
    #[serde(default = "poisson")]
    pub process: ProcessSpec,
    pub rate_per_s: f64,
    /// Coefficient of variation of the gaps (gamma only; 1 = Poisson, > 1 = bursty).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cv: Option<f64>,
}

fn poisson() -> ProcessSpec {
    ProcessSpec::Poisson
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ProcessSpec {
    Poisson,
    Gamma,
}

/// A token-length distribution. Which fields apply depends on `dist`.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LengthSpec {
    pub dist: DistSpec,
    /// fixed: the length.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub value: Option<u32>,
    /// lognormal: mean before rounding and clipping.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mean: Option<f64>,
    /// lognormal: coefficient of variation (0 = always `mean`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cv: Option<f64>,
    /// Smallest length (clipping bound for lognormal, inclusive bound for uniform).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min: Option<u32>,
    /// Largest length.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max: Option<u32>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DistSpec {
    Fixed,
    Uniform,
    Lognormal,
}

/// Explicit requests as three equal-length columns, sorted by arrival.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TraceSpec {
    pub arrival_s: Vec<f64>,
    pub prompt_tokens: Vec<u32>,
    pub output_tokens: Vec<u32>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SloSpec {
    pub ttft_s: f64,
    pub tpot_s: f64,
}

impl Default for SloSpec {
    fn default() -> Self {
        SloSpec { ttft_s: 1.0, tpot_s: 0.025 }
    }
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MetricsSpec {
    /// Fraction of completed requests (first by arrival) left out of latency and SLO figures.
    pub warmup_fraction: f64,
    /// When the user sees the first token of a handed-off request (TTFT's end).
    pub first_token: FirstToken,
}

impl Default for MetricsSpec {
    fn default() -> Self {
        MetricsSpec { warmup_fraction: 0.1, first_token: FirstToken::Decode }
    }
}

/// When the first token of a handed-off request reaches the user.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FirstToken {
    /// At the end of its prefill step, before the hand-off (the reference simulator's and DistServe's
    /// definition; the default until the user's view became it).
    Prefill,
    /// At the end of its first decode step, after the KV has landed (vLLM's P/D proxy, Dynamo): TTFT includes
    /// the hand-off and the decode queue. Default: it is where a user of a disaggregated deployment sees
    /// the first token (in a colocated run, and for requests decoded where they were prefilled, the two
    /// rules coincide).
    #[default]
    Decode,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CostSpec {
    pub step_overhead_s: f64,
    /// Fraction of HBM the engine may use for weights and KV.
    pub mem_util: f64,
    pub prefill_lm_head: LmHeadSpec,
    pub enforce_tdp: bool,
    pub dvfs: bool,
    /// Lowest clock fraction under DVFS or a power roof.
    pub s_min: f64,
    /// Share of collective time hidden under compute (pools with `parallel`), in [0, 1].
    pub comm_overlap: f64,
    /// Where step times come from (`None`: the roofline, [`TimingSpec`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timing: Option<TimingSpec>,
}

/// `cost.timing`: the source of step times. `roofline` (the default) is the cost model; `aiconfigurator`
/// (measured kernels, the `aiconfigurator-core` package) and `calibrated` (a device preset fitted to your
/// measurements, `kvwire calibrate`) are resolved by the Python package before the core sees the scenario:
/// a measured source arrives with one step-time table per pool (`tables`), a calibrated one with the fitted
/// devices already in the pools and what was fitted in `provenance`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TimingSpec {
    pub source: TimingSource,
    /// aiconfigurator: the provider's system (`h100_sxm`, `h200_sxm`, `b200_sxm`, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system: Option<String>,
    /// aiconfigurator: the serving engine whose kernels were measured (`vllm`, `sglang`, `trtllm`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backend: Option<String>,
    /// aiconfigurator: the engine version of the data (`None`: the newest the package has).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// aiconfigurator: the provider's model (a Hugging Face id it knows; `None`: mapped from `model`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// calibrated: the calibration file (`kvwire calibrate -o`), read by the Python package.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    /// Written by the Python package: what the tables or the fit came from (package and data versions,
    /// the layout each pool was measured in, the interpolation bound), echoed as is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provenance: Option<Value>,
    /// Written by the Python package: one step-time table per pool (`prefill`, `decode` or `colocated`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tables: Option<std::collections::BTreeMap<String, TableSpec>>,
}

/// `cost.timing.source`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TimingSource {
    /// The cost model (the default).
    #[default]
    Roofline,
    /// NVIDIA's measured kernel database (`aiconfigurator-core`), as step-time tables.
    Aiconfigurator,
    /// The roofline with a device fitted by `kvwire calibrate`.
    Calibrated,
}

/// One pool's step-time table as it crosses into the core ([`crate::cost::table::StepTable`]).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TableSpec {
    pub prefill: GridSpec,
    pub decode: GridSpec,
}

/// A grid of step times: its axes (each strictly increasing) and one value per point, row-major, s.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GridSpec {
    pub axes: Vec<Vec<f64>>,
    pub values_s: Vec<f64>,
}

impl Default for CostSpec {
    fn default() -> Self {
        CostSpec {
            step_overhead_s: 0.0005,
            mem_util: 0.9,
            prefill_lm_head: LmHeadSpec::Last,
            enforce_tdp: true,
            dvfs: false,
            s_min: 0.4,
            comm_overlap: 0.0,
            timing: None,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LmHeadSpec {
    /// Once per prompt (what serving engines do). Default.
    Last,
    /// On every prompt token (the reference simulator).
    All,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SchedulerSpec {
    /// Whole-prompt batches under `max_prefill_tokens` (default), or Sarathi-style chunked prefill under
    /// `max_num_batched_tokens`.
    pub policy: BatchPolicy,
    pub max_prefill_tokens: u32,
    pub max_decode_batch: u32,
    /// Token budget of one chunked step: its decode rows (one token each) plus its prompt chunks.
    pub max_num_batched_tokens: u32,
}

impl Default for SchedulerSpec {
    fn default() -> Self {
        SchedulerSpec {
            policy: BatchPolicy::Whole,
            max_prefill_tokens: 8192,
            max_decode_batch: 256,
            max_num_batched_tokens: 2048,
        }
    }
}

/// `scheduler.policy`: what a prefill / colocated instance's step holds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BatchPolicy {
    /// Whole prompts, FIFO, under `max_prefill_tokens`; a waiting admissible prompt runs before the next
    /// decode step (the reference).
    #[default]
    Whole,
    /// Every decode row, then the unfinished prompt chunk, then new prompts, up to `max_num_batched_tokens`
    /// tokens in one mixed pass.
    Chunked,
}

/// `kv`: how a decoding instance's KV memory is given out.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct KvSpec {
    pub policy: KvPolicy,
    /// Tokens per block (paged).
    pub block_size: u32,
    /// Fraction of an instance's blocks a new admission must leave free (paged; not applied to an instance
    /// holding no KV, so every request that fits can start).
    pub watermark: f64,
    /// What happens to the most recently admitted sequence when a running one cannot get its next block.
    pub preemption: Preemption,
}

impl Default for KvSpec {
    fn default() -> Self {
        KvSpec { policy: KvPolicy::Reserve, block_size: 16, watermark: 0.01, preemption: Preemption::Recompute }
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum KvPolicy {
    /// Prompt + output reserved at admission (the reference). Default.
    #[default]
    Reserve,
    /// Blocks of `block_size` tokens, grown one block at a time as tokens are generated.
    Paged,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Preemption {
    /// The victim's KV is dropped; it is prefilled again over prompt + generated tokens. Default.
    #[default]
    Recompute,
    /// The victim's KV moves to host memory over PCIe 5 and back when there is room.
    Swap,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RouterSpec {
    pub prefill: PrefillRouterSpec,
    pub decode: LoadRouterSpec,
    pub colocated: LoadRouterSpec,
    /// Whether every request is handed off (disaggregated mode only).
    pub disaggregate: DisaggregateSpec,
}

/// Conditional disaggregation: keep a request on its prefill instance (decode it there) when its prompt or
/// output is short or the link is congested; hand it off otherwise.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DisaggregateSpec {
    pub policy: DisaggregatePolicy,
    /// Keep local when the prompt has fewer tokens than this.
    pub min_prompt_tokens: u32,
    /// Keep local when the output has fewer tokens than this.
    pub min_output_tokens: u32,
    /// Keep local when the estimated wait for the link exceeds this, s.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_link_wait_s: Option<f64>,
}

impl Default for DisaggregateSpec {
    fn default() -> Self {
        DisaggregateSpec {
            policy: DisaggregatePolicy::Always,
            min_prompt_tokens: 0,
            min_output_tokens: 0,
            max_link_wait_s: None,
        }
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DisaggregatePolicy {
    /// Every request with output ≥ 2 is handed off (the reference).
    #[default]
    Always,
    /// Per request, by the thresholds above.
    Conditional,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PrefillRouterSpec {
    /// The instance whose queue holds the fewest prompt tokens (batch in flight not counted). Default.
    #[default]
    LeastQueuedTokens,
    RoundRobin,
    /// The instance holding the longest cached prefix of the request, load-bounded (`prefix_cache`).
    PrefixAffinity,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LoadRouterSpec {
    /// The instance with the fewest queued + running requests. Default.
    #[default]
    LeastLoaded,
    RoundRobin,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct EngineSpec {
    /// Decode fast path: lazy per-sequence bookkeeping and macro-steps (results identical to step-by-step).
    pub macro_steps: bool,
    /// Layer-wise streaming as one event per layer slice (the plain path; the same results as the default
    /// closed-form representation, which costs one event per transfer, up to floating-point rounding: the
    /// slices' end times are sums, the closed form a product, so they may differ by ~1e-12 s).
    pub per_slice_streaming: bool,
    /// The most batch steps (prefill and decode, all instances together) a run may take before it is stopped
    /// with an error: a bound on the work one scenario can ask for (the default is about ten minutes of a
    /// 2-core machine's time).
    pub max_steps: u64,
    /// Record a timeline of the run: one span per batch step and per hop transfer (`res.timeline()`).
    pub timeline: bool,
    /// The most spans a timeline may hold: a run recording more stops with an error naming this field.
    pub timeline_max_spans: u64,
}

/// Default `engine.max_steps`.
pub const DEFAULT_MAX_STEPS: u64 = 10_000_000_000;

/// Default `engine.timeline_max_spans` (about 310 MB of trace JSON).
pub const DEFAULT_TIMELINE_MAX_SPANS: u64 = 2_000_000;

impl Default for EngineSpec {
    fn default() -> Self {
        EngineSpec {
            macro_steps: true,
            per_slice_streaming: false,
            max_steps: DEFAULT_MAX_STEPS,
            timeline: false,
            timeline_max_spans: DEFAULT_TIMELINE_MAX_SPANS,
        }
    }
}
