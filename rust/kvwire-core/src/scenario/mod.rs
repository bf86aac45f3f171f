//! The scenario: parsed once at the boundary ([`Scenario::from_json`]), validated with field-path errors,
//! presets resolved. Everything downstream works on the checked [`Scenario`].

mod capacity;
mod echo;
pub mod faults;
pub mod parallel;
pub mod prefix;
pub mod spec;
pub mod speculative;
pub mod tiers;
mod timing;
mod validate;

use crate::cost::model::{LmHead, ModelCost};
use crate::cost::presets::{DeviceSpec, LinkSpec, ModelSpec};
use crate::cost::roofline::RooflineParams;
use crate::error::{Error, Result};
use crate::handoff::closed_form::Handoff;
use crate::quant::formats::Format;
use crate::workload::{Arrivals, LengthDist, Trace};

pub use crate::handoff::plan::{CompressAt, Conversion, ConvertAt, DecompressAt, HandoffPlan, Streaming};
pub use crate::limits::MAX_DEVICES_PER_INSTANCE;
pub use crate::policy::disaggregation::Disaggregate;
pub use crate::policy::router::Rule;
pub use prefix::PrefixConfig;
pub use spec::{BatchPolicy, FirstToken, KvPolicy, KvSpec, OverContext, ParallelSpec, Preemption, ScenarioSpec};

/// A resolved preset: the key it came from (`"custom"` for a fully inline object) and its values.
#[derive(Clone, Debug, PartialEq)]
pub struct Named<T> {
    pub key: String,
    pub spec: T,
}

/// A pool of identical instances.
#[derive(Clone, Debug, PartialEq)]
pub struct Pool {
    pub device: Named<DeviceSpec>,
    pub instances: u32,
    pub devices_per_instance: u32,
    /// Per-device power cap, W.
    pub power_cap_w: Option<f64>,
    /// Format the pool keeps its KV cache in (`None`: BF16).
    pub kv_format: Option<&'static Format>,
    /// The instances' parallel layout (`None`: the devices act as one, no collective charged).
    pub parallel: Option<Box<parallel::PoolParallel>>,
    /// The format the pool's matmuls run in on its device (`model.weights` × `model.activations`).
    pub compute: crate::cost::numerics::ComputeRate,
    /// BF16 peak / the compute format's peak: what a matmul FLOP counts on the roofline.
    pub matmul_scale: f64,
    /// Measured step times (`cost.timing` with a measured source; `None`: the roofline).
    pub table: Option<std::sync::Arc<crate::cost::table::StepTable>>,
}

impl Pool {
    /// `base` as this pool's instances run it: KV at the pool's format's size, matmuls at its compute format.
    pub fn cost(&self, base: &ModelCost) -> ModelCost {
        base.with_kv_ratio(self.kv_format.map_or(1.0, |f| f.ratio_vs_bf16())).with_matmul_scale(self.matmul_scale)
    }

    /// The step timer of one instance of this pool.
    pub fn timer(&self, roofline: RooflineParams) -> crate::cost::roofline::StepTimer {
        crate::cost::roofline::StepTimer::new(&self.device.spec, self.devices_per_instance, self.power_cap_w, roofline)
            .with_parallel(self.parallel.as_ref().map(|p| p.cost.clone()))
            .with_table(self.table.clone())
    }

    /// KV capacity (tokens) of one instance holding `model`'s weights (`Err`: the usable bytes, when nothing
    /// fits; validation has refused such pools).
    pub fn kv_capacity(&self, mem_util: f64, model: &crate::cost::model::ModelCost) -> std::result::Result<u64, f64> {
        if let Some(par) = &self.parallel {
            let m = par.rank_memory(&self.device.spec, mem_util, model);
            return m.capacity_tokens(par.layout().dp).ok_or(m.usable_bytes * self.devices_per_instance as f64);
        }
        crate::cost::roofline::kv_capacity_tokens(
            &self.device.spec,
            self.devices_per_instance,
            mem_util,
            model.resident_weight_bytes(),
            model.kv_bytes_per_token,
        )
    }
}

/// Which pools exist.
#[derive(Clone, Debug, PartialEq)]
#[allow(clippy::large_enum_variant)] // one per scenario, read in place: boxing a pool would buy nothing
pub enum Topology {
    Disaggregated { prefill: Pool, decode: Pool },
    Colocated { pool: Pool },
}

/// The KV link.
#[derive(Clone, Debug, PartialEq)]
pub struct Link {
    pub spec: Named<LinkSpec>,
    pub channels: u32,
    pub model: LinkModel,
}

/// How transfers share the link.
#[derive(Clone, Debug, PartialEq)]
pub enum LinkModel {
    /// `channels` FCFS servers at the full per-channel rate (the reference).
    Fcfs,
    /// Processor sharing: concurrent transfers split the link's `channels × bandwidth` equally (each at most
    /// one channel's bandwidth).
    Shared,
    /// No GPUDirect: GPU → host over the sender's PCIe link, the network (`channels` FCFS), host → GPU over
    /// the receiver's PCIe link; each hop is a resource (store and forward).
    HostStaged { host: Named<LinkSpec> },
}

/// Host conversion throughput per thread when a scenario does not give one, GB/s of cache: kvwire's
/// vLLM NHD → HND bf16 permutation kernel on one core of the 2-core AMD EPYC (Zen 4) build machine, 256 MiB
/// cache, best of 5 (`benches/bench_layout.py`, 2026-11-29, recorded in `benches/README.md`).
pub const DEFAULT_HOST_CONVERT_GB_PER_S: f64 = 13.8;
/// Power of one busy host thread, W: AMD EPYC 9654 (360 W TDP, 96 cores) → 3.75 W per core.
pub const DEFAULT_HOST_W_PER_THREAD: f64 = 3.75;

/// Where the requests come from.
#[derive(Clone, Debug, PartialEq)]
pub enum Workload {
    Generated {
        requests: usize,
        seed: u64,
        arrivals: Arrivals,
        prompt: LengthDist,
        output: LengthDist,
    },
    /// A request table given in the scenario (`workload.trace`).
    Trace(Trace),
    /// A request table given beside the scenario (the Python `requests=` argument; `workload.external`).
    Requests(Trace),
    /// Closed-loop multi-turn sessions (`workload.sessions`).
    Sessions(crate::workload::sessions::SessionsWorkload),
    /// A request table given beside the scenario and read in chunks while the run goes
    /// ([`crate::engine::simulate_streamed`] with a [`crate::workload::source::RequestSource`]).
    Stream,
}

impl Workload {
    /// The explicit request table, if the workload is one.
    pub fn table(&self) -> Option<&Trace> {
        match self {
            Workload::Trace(t) | Workload::Requests(t) => Some(t),
            Workload::Generated { .. } | Workload::Sessions(_) | Workload::Stream => None,
        }
    }
}

/// The requests of a run ([`Scenario::requests`]).
#[derive(Clone, Debug, PartialEq)]
pub struct Requests {
    pub trace: Trace,
    /// Whether each request's prompt + output exceeded the model's context (before any clipping).
    pub over_context: Vec<bool>,
    /// A sessions workload: each row's session and turn, and the think time (`None` otherwise).
    pub sessions: Option<Box<crate::workload::sessions::SessionRows>>,
}

/// A validated scenario.
#[derive(Clone, Debug, PartialEq)]
pub struct Scenario {
    pub model: Named<ModelSpec>,
    pub topology: Topology,
    pub link: Link,
    /// The hand-off, resolved once (what is sent, where it is compressed, decompressed and converted, how
    /// it streams, the hops it crosses); the engine, the calculator, the ceilings and the echo read it.
    pub handoff: HandoffPlan,
    pub disaggregate: Disaggregate,
    pub per_slice_streaming: bool,
    pub workload: Workload,
    /// Requests longer than the model's context (`model.spec.max_context_tokens`).
    pub over_context: OverContext,
    pub ttft_slo_s: f64,
    pub tpot_slo_s: f64,
    pub warmup_fraction: f64,
    /// When the user sees a handed-off request's first token.
    pub first_token: FirstToken,
    pub lm_head: LmHead,
    pub roofline: RooflineParams,
    pub mem_util: f64,
    pub max_prefill_tokens: u32,
    pub max_decode_batch: u32,
    /// Routing rules of the prefill, decode and colocated pools.
    pub prefill_routing: Rule,
    pub decode_routing: Rule,
    pub colocated_routing: Rule,
    /// `scheduler.policy` and the chunked step's token budget.
    pub batch_policy: BatchPolicy,
    pub max_num_batched_tokens: u32,
    /// `kv`: reserve (prompt + output at admission) or paged blocks with preemption.
    pub kv: KvSpec,
    pub macro_steps: bool,
    /// `engine.max_steps`: the most batch steps a run may take.
    pub max_steps: u64,
    /// `engine.timeline`: record spans, at most this many (`engine.timeline_max_spans`); `None`: off.
    pub timeline_max_spans: Option<u64>,
    /// `prefix_cache` and `handoff.skip_cached_prefix`.
    pub prefix_cache: PrefixConfig,
    /// `speculative` (`None`: one token per sequence and decode step).
    pub speculative: Option<speculative::Speculative>,
    /// `faults` (`None`: nothing fails).
    pub faults: Option<faults::Faults>,
    /// `kv_tiers`: the prefix cache's tiers below GPU memory, nearest first (empty: none).
    pub kv_tiers: Vec<tiers::KvTier>,
    /// `cost.timing` as the echo shows it (without its tables, which the pools hold); `None`: the roofline.
    pub timing: Option<spec::TimingSpec>,
}

impl Scenario {
    /// Parse and validate a JSON scenario. `requests`, when given, is an explicit request table supplied
    /// beside the scenario (the Python `requests=` argument); the scenario must then not describe a workload.
    pub fn from_json(json: &str, requests: Option<Trace>) -> Result<Self> {
        let spec = parse_spec(json)?;
        validate::validate(spec, requests)
    }

    /// Parse and validate a JSON scenario whose requests are a table passed beside it and read in chunks
    /// while the run goes ([`crate::engine::simulate_streamed`]); as [`Self::from_json`] with a table.
    pub fn from_json_streamed(json: &str) -> Result<Self> {
        let mut sc = Self::from_json(json, Some(Trace::placeholder()))?;
        sc.workload = Workload::Stream;
        Ok(sc)
    }

    /// The requests this scenario runs — generated from its seed, or its table — with requests longer than the
    /// model's context clipped when `workload.over_context` is `"clip"`, and which requests were over it.
    pub fn requests(&self) -> Result<Requests> {
        let mut trace = match &self.workload {
            Workload::Generated { requests, seed, arrivals, prompt, output } => {
                let t = crate::workload::generate(*requests, *seed, *arrivals, *prompt, *output)?;
                if let Some(i) = t.arrival_s().iter().position(|a| !a.is_finite()) {
                    return Err(Error::field(
                        "workload.arrivals",
                        format!("the arrival process produced a non-finite time at request {i}"),
                    ));
                }
                t
            }
            Workload::Trace(t) | Workload::Requests(t) => t.clone(),
            Workload::Sessions(w) => return self.session_requests(w),
            Workload::Stream => return Err(Error::Internal("a streamed workload has no request table to hold".into())),
        };
        let over_context = match self.model.spec.max_context_tokens {
            Some(max) => trace.over_context(max)?,
            None => crate::metrics::table::try_filled(trace.len(), false)?,
        };
        if let (OverContext::Clip, Some(max)) = (self.over_context, self.model.spec.max_context_tokens) {
            trace.clip_to_context(max);
        }
        Ok(Requests { trace, over_context, sessions: None })
    }

    /// A sessions workload's turns: no turn over the context (a session ends before it), and each session
    /// ended at its first turn the decoding pool's KV can never hold (that turn is sent and refused).
    fn session_requests(&self, w: &crate::workload::sessions::SessionsWorkload) -> Result<Requests> {
        let mut plan = w.plan(self.model.spec.max_context_tokens)?;
        let capacity = self.decode_capacity();
        plan.end_at_first(|p, o| !crate::policy::batching::ever_fits(p, o, capacity));
        let over_context = crate::metrics::table::try_filled(plan.trace.len(), false)?;
        Ok(Requests { trace: plan.trace, over_context, sessions: Some(Box::new(plan.rows)) })
    }

    /// The pool that runs prefill (the colocated pool in colocated mode).
    pub fn prefill_pool(&self) -> &Pool {
        match &self.topology {
            Topology::Disaggregated { prefill, .. } => prefill,
            Topology::Colocated { pool } => pool,
        }
    }

    /// The pool that decodes (the decode pool, or the colocated pool).
    pub fn decode_pool(&self) -> &Pool {
        match &self.topology {
            Topology::Disaggregated { decode, .. } => decode,
            Topology::Colocated { pool } => pool,
        }
    }

    /// The closed-form hand-off of one `prompt_tokens` prompt on this scenario's plan, model, prefill pool
    /// and decoding pool ([`crate::handoff::closed_form::handoff`]); `None` when colocated (no hand-off).
    pub fn handoff_figures(&self, prompt_tokens: u64, streaming: Streaming) -> Option<Handoff> {
        crate::handoff::closed_form::handoff(
            &self.handoff,
            &self.prefill_pool().cost(&ModelCost::new(&self.model.spec, self.lm_head)),
            &self.prefill_pool().timer(self.roofline),
            &self.decode_pool().timer(self.roofline),
            prompt_tokens,
            streaming,
        )
    }

    /// Validate an already-parsed spec.
    pub fn from_spec(spec: ScenarioSpec, requests: Option<Trace>) -> Result<Self> {
        validate::validate(spec, requests)
    }
}

/// The built-in default scenario, written out in full (what `{}` means).
pub const DEFAULT_SCENARIO_JSON: &str = include_str!("default.json");

/// Deserialize with the JSON path of any error (`workload.arrivals.rate_per_s`). Lists are refused everywhere
/// but in the request-table columns: serde would otherwise read `{"slo": [5, 6]}` as `ttft_s` 5, `tpot_s` 6.
pub fn parse_spec(json: &str) -> Result<ScenarioSpec> {
    no_lists(json)?;
    let de = &mut serde_json::Deserializer::from_str(json);
    serde_path_to_error::deserialize(de).map_err(|e| serde_error(e.path().to_string(), e.inner().to_string()))
}

/// The only places a scenario holds lists (and anywhere below `cost.timing.tables`: a measured source's grids).
const LIST_FIELDS: [&str; 5] = [
    "workload.trace.arrival_s",
    "workload.trace.prompt_tokens",
    "workload.trace.output_tokens",
    "speculative.acceptance",
    "faults.instance.pools",
];

/// Lists of objects, whose objects are walked like the rest (no list inside them, and none as an element).
const OBJECT_LIST_FIELDS: [&str; 2] = ["faults.events", "kv_tiers"];

/// Walk the JSON text once and refuse a list anywhere but [`LIST_FIELDS`], naming its path. Other errors
/// (syntax, depth) are left to the typed parse, which reports them with their path.
fn no_lists(json: &str) -> Result<()> {
    let mut path = Vec::new();
    let mut bad = None;
    let mut de = serde_json::Deserializer::from_str(json);
    let _ = serde::de::DeserializeSeed::deserialize(NoLists { path: &mut path, bad: &mut bad }, &mut de);
    match bad {
        Some(p) => Err(Error::field(
            if p.is_empty() { "scenario".to_string() } else { p },
            "expected an object or a value, got a list (lists are only the columns of workload.trace, \
             speculative.acceptance, faults.events, faults.instance.pools, kv_tiers and the grids of cost.timing.tables)",
        )),
        None => Ok(()),
    }
}

struct NoLists<'a> {
    path: &'a mut Vec<String>,
    bad: &'a mut Option<String>,
}

impl<'de> serde::de::DeserializeSeed<'de> for NoLists<'_> {
    type Value = ();
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> std::result::Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> serde::de::Visitor<'de> for NoLists<'_> {
    type Value = ();
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a scenario value")
    }
    fn visit_bool<E>(self, _: bool) -> std::result::Result<(), E> {
        Ok(())
    }
    fn visit_i64<E>(self, _: i64) -> std::result::Result<(), E> {
        Ok(())
    }
    fn visit_u64<E>(self, _: u64) -> std::result::Result<(), E> {
        Ok(())
    }
    fn visit_f64<E>(self, _: f64) -> std::result::Result<(), E> {
        Ok(())
    }
    fn visit_str<E>(self, _: &str) -> std::result::Result<(), E> {
        Ok(())
    }
    fn visit_unit<E>(self) -> std::result::Result<(), E> {
        Ok(())
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> std::result::Result<(), A::Error> {
        let NoLists { path, bad } = self;
        while let Some(key) = map.next_key::<String>()? {
            path.push(key);
            map.next_value_seed(NoLists { path: &mut *path, bad: &mut *bad })?;
            path.pop();
        }
        Ok(())
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> std::result::Result<(), A::Error> {
        let here = self.path.join(".").replace(".[", "[");
        if LIST_FIELDS.contains(&here.as_str()) || here.starts_with("cost.timing.tables.") {
            while seq.next_element::<serde::de::IgnoredAny>()?.is_some() {}
            Ok(())
        } else if OBJECT_LIST_FIELDS.contains(&here.as_str()) {
            let NoLists { path, bad } = self;
            let mut k = 0usize;
            loop {
                // Each element at `<list>[k]`: a list there (the element itself, or inside it) is refused.
                path.push(format!("[{k}]"));
                let more = seq.next_element_seed(NoLists { path: &mut *path, bad: &mut *bad })?;
                path.pop();
                if more.is_none() {
                    return Ok(());
                }
                k += 1;
            }
        } else {
            *self.bad = Some(here);
            Err(serde::de::Error::custom("a list"))
        }
    }
}

/// serde's wording with Rust's type names (`expected u32`, ``floating point `1.5` ``) said in words.
fn in_words(msg: &str) -> String {
    const TYPES: [(&str, &str); 9] = [
        ("expected u8", "expected a whole number from 0 to 255"),
        ("expected u16", "expected a whole number from 0 to 65,535"),
        ("expected u32", "expected a whole number from 0 to 4,294,967,295"),
        ("expected u64", "expected a whole number ≥ 0"),
        ("expected usize", "expected a whole number ≥ 0"),
        ("expected i64", "expected a whole number"),
        ("expected i32", "expected a whole number"),
        ("expected f64", "expected a number"),
        ("expected f32", "expected a number"),
    ];
    const VALUES: [(&str, &str); 6] = [
        ("floating point `", "the number `"),
        ("integer `", "the number `"),
        ("invalid type: string ", "invalid type: the text "),
        ("invalid type: sequence", "invalid type: a list"),
        ("invalid type: map", "invalid type: an object"),
        ("invalid type: boolean `", "invalid type: `"),
    ];
    let mut out = msg.to_string();
    for (from, to) in TYPES {
        // Whole words only: "expected u32" must not turn "expected u320..." into nonsense.
        if let Some(i) = out.find(from) {
            let end = i + from.len();
            if !out[end..].starts_with(|c: char| c.is_ascii_alphanumeric()) {
                out.replace_range(i..end, to);
            }
        }
    }
    for (from, to) in VALUES {
        out = out.replace(from, to);
    }
    out
}

/// Turn a serde error into a field error: drop serde_json's "at line L column C" (users pass dicts, not text)
/// and make sure an unknown field's name ends the path.
pub(crate) fn serde_error(path: String, msg: String) -> Error {
    let msg = match msg.rfind(" at line ") {
        Some(i) if msg[i..].contains(" column ") => msg[..i].to_string(),
        _ => msg,
    };
    let msg = in_words(&msg);
    let path = if path == "." { String::new() } else { path };
    if let Some(rest) = msg.strip_prefix("unknown field `") {
        if let Some(end) = rest.find('`') {
            let name = &rest[..end];
            // serde_path_to_error already ends the path with the unknown key.
            let full = if path.is_empty() {
                name.to_string()
            } else if path == name || path.ends_with(&format!(".{name}")) {
                path
            } else {
                format!("{path}.{name}")
            };
            return Error::field(full, format!("unknown field{}", &rest[end + 1..]));
        }
    }
    let path = if path.is_empty() { "scenario".to_string() } else { path };
    Error::field(path, msg)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn path_of(json: &str) -> String {
        Scenario::from_json(json, None).unwrap_err().path().to_string()
    }

    /// serde's Rust type names are said in words (and only whole words are replaced).
    #[test]
    fn serde_messages_in_words() {
        let msg = |json: &str| Scenario::from_json(json, None).unwrap_err().to_string();
        let m = msg(r#"{"scheduler": {"max_decode_batch": -1}}"#);
        assert!(m.contains("the number `-1`, expected a whole number from 0 to 4,294,967,295"), "{m}");
        let m = msg(r#"{"slo": {"ttft_s": "x"}}"#);
        assert!(m.contains(r#"the text "x", expected a number"#), "{m}");
        let m = msg(r#"{"workload": {"seed": 1.5}}"#);
        assert!(m.contains("the number `1.5`, expected a whole number ≥ 0"), "{m}");
        let m = msg(r#"{"engine": {"macro_steps": {}}}"#);
        assert!(m.contains("invalid type: an object, expected a boolean"), "{m}");
        assert_eq!(in_words("expected u320 things"), "expected u320 things");
        assert_eq!(in_words("expected u16"), "expected a whole number from 0 to 65,535");
    }

    /// Lists are refused everywhere but the request-table columns (serde would read a struct from one).
    #[test]
    fn lists_only_in_trace_columns() {
        assert_eq!(path_of(r#"{"slo": [5, 6]}"#), "slo");
        assert_eq!(path_of(r#"[1]"#), "scenario");
        assert_eq!(path_of(r#"{"workload": {"prompt_tokens": [1, 2]}}"#), "workload.prompt_tokens");
        assert_eq!(path_of(r#"{"link": {"preset": "ib-ndr", "channels": [2]}}"#), "link.channels");
        let ok = r#"{"workload": {"trace": {"arrival_s": [0, 1], "prompt_tokens": [1, 2], "output_tokens": [0, 3]}}}"#;
        assert!(Scenario::from_json(ok, None).is_ok());
        // A list inside a column is still a type error of the typed parse, with its path.
        let nested = r#"{"workload": {"trace": {"arrival_s": [[0]], "prompt_tokens": [1], "output_tokens": [0]}}}"#;
        assert!(path_of(nested).starts_with("workload.trace.arrival_s"));
    }

    /// Rates the simulation divides by have a floor of 1e-6 (a smaller one overflows the times); the floor and
    /// the ceiling themselves are accepted.
    #[test]
    fn rates_have_a_floor() {
        for (json, path) in [
            (r#"{"workload": {"arrivals": {"rate_per_s": 1e-306}}}"#, "workload.arrivals.rate_per_s"),
            (r#"{"link": {"preset": "eth-25g", "bandwidth_gb_per_s": 5e-324}}"#, "link.bandwidth_gb_per_s"),
            (r#"{"decode": {"device": {"preset": "h100", "hbm_tb_per_s": 9e-7}}}"#, "decode.device.hbm_tb_per_s"),
            (r#"{"prefill": {"device": {"preset": "h100", "flops_eff": 9e-7}}}"#, "prefill.device.flops_eff"),
            (r#"{"cost": {"s_min": 0.009}}"#, "cost.s_min"),
            (r#"{"workload": {"arrivals": {"rate_per_s": 2e9}}}"#, "workload.arrivals.rate_per_s"),
        ] {
            assert_eq!(path_of(json), path, "{json}");
        }
        for json in [
            r#"{"workload": {"arrivals": {"rate_per_s": 1e-6}}}"#,
            r#"{"workload": {"arrivals": {"rate_per_s": 1e9}}}"#,
            r#"{"link": {"preset": "eth-25g", "bandwidth_gb_per_s": 1e-6}, "cost": {"s_min": 0.01}}"#,
        ] {
            assert!(Scenario::from_json(json, None).is_ok(), "{json}");
        }
        let late = r#"{"workload": {"trace": {"arrival_s": [1e12, 1.0000001e12], "prompt_tokens": [1, 1], "output_tokens": [1, 1]}}}"#;
        assert_eq!(path_of(late), "workload.trace.arrival_s[1]");
    }
}
