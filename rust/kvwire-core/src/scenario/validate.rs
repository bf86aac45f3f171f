//! [`ScenarioSpec`] → [`Scenario`]: defaults, preset resolution, range checks. Every error names its field.

use super::tiers::{KvTier, DEFAULT_HOST_TIER_LINK, MAX_KV_TIERS};
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::{Map, Value};

use super::spec::{
    ArrivalSpec, BatchPolicy, ConvertSpec, DisaggregatePolicy, DistSpec, KvPolicy, KvTierKind, KvTierSpec, LengthSpec,
    LmHeadSpec, LoadRouterSpec, ModeSpec, OverContext, PoolSpec, PrefillRouterSpec, ProcessSpec, ScenarioSpec,
    SessionsSpec,
};
use super::{serde_error, Disaggregate, Link, LinkModel, Named, Pool, Rule, Scenario, Topology, Workload};
use super::{DEFAULT_HOST_CONVERT_GB_PER_S, DEFAULT_HOST_W_PER_THREAD};
use crate::cost::model::{LmHead, ModelCost};
use crate::cost::numerics::{ComputeRate, NumFormat, FORMAT_NAMES};
use crate::cost::presets::{
    default_nic_efficiency, device_presets, link_presets, model_presets, AttentionKind, DeviceSpec, LinkSpec, ModelSpec,
};
use crate::cost::roofline::{kv_capacity_tokens, RooflineParams};
use crate::error::{Error, Result};
use crate::handoff::plan::{CompressAt, Conversion, ConvertAt, DecompressAt, HandoffPlan, NetworkLink, Streaming};
use crate::handoff::transfer::RankCost;
use crate::layout::Geometry;
use crate::limits::{MAX_CHANNELS, MAX_DEVICES_PER_INSTANCE, MAX_INSTANCES, MAX_QUANTITY, MAX_REQUESTS, MIN_RATE};
use crate::quant::formats::{format, Format, Scheme, ALIASES, FORMATS};
use crate::workload::sessions::{SessionsParams, SessionsWorkload};
use crate::workload::{Arrivals, LengthDist, Trace};

pub(super) fn validate(s: ScenarioSpec, requests: Option<Trace>) -> Result<Scenario> {
    let model_value = s.model.unwrap_or_else(|| Value::String("llama3-8b".into()));
    let mut model = resolve_preset::<ModelSpec>(&model_value, "model", "model", &model_presets())?;
    check_model(&model.spec)?;
    let compute_format = formats(&mut model.spec)?;

    let mem_util = s.cost.mem_util;
    in_range("cost.mem_util", mem_util, 0.0, 1.0, false, true)?;
    positive("cost.step_overhead_s", s.cost.step_overhead_s, true)?;
    // The clock floor divides compute time: a floor near 0 would stretch a step without bound.
    in_range("cost.s_min", s.cost.s_min, 0.01, 1.0, true, true)?;
    in_range("cost.comm_overlap", s.cost.comm_overlap, 0.0, 1.0, true, true)?;
    let lm_head = match s.cost.prefill_lm_head {
        LmHeadSpec::Last => LmHead::Last,
        LmHeadSpec::All => LmHead::All,
    };
    let cost = ModelCost::new(&model.spec, lm_head);

    let mode = s.mode.unwrap_or(ModeSpec::Disaggregated);
    let topology = match mode {
        ModeSpec::Disaggregated => {
            if s.colocated.is_some() {
                return Err(Error::field(
                    "colocated",
                    "only used when mode is \"colocated\"; a disaggregated scenario takes \"prefill\" and \"decode\"",
                ));
            }
            let prefill = pool(s.prefill, "prefill", 1, &model, &cost, mem_util, compute_format)?;
            let decode = pool(s.decode, "decode", 1, &model, &cost, mem_util, compute_format)?;
            Topology::Disaggregated { prefill, decode }
        }
        ModeSpec::Colocated => {
            for (name, given) in [("prefill", s.prefill.is_some()), ("decode", s.decode.is_some())] {
                if given {
                    return Err(Error::field(
                        name,
                        "not used when mode is \"colocated\"; describe the instances under \"colocated\"",
                    ));
                }
            }
            Topology::Colocated { pool: pool(s.colocated, "colocated", 2, &model, &cost, mem_util, compute_format)? }
        }
    };

    if mode == ModeSpec::Colocated && s.link.is_some() {
        return Err(Error::field("link", "not used when mode is \"colocated\" (there is no hand-off); remove it"));
    }
    let link = link(s.link)?;
    let h = &s.handoff;
    let back_format = match &topology {
        Topology::Disaggregated { decode, .. } => decode.kv_format,
        Topology::Colocated { .. } => None,
    };
    let compression = match h.compression.as_deref() {
        Some(name) => known_format(name, "handoff.compression")?,
        None => back_format,
    };
    if compression.is_some() && mode == ModeSpec::Colocated {
        return Err(Error::field(
            "handoff.compression",
            "a colocated scenario has no hand-off to compress; use \"none\" or mode \"disaggregated\"",
        ));
    }
    if let Some(kv) = back_format {
        if compression.map(|f| f.name) != Some(kv.name) {
            return Err(Error::field(
                "handoff.compression",
                format!(
                    "the decode pool keeps its cache in {}; hand it off in that format (or omit handoff.compression)",
                    kv.name
                ),
            ));
        }
        if h.decompress_at == DecompressAt::Receiver {
            return Err(Error::field(
                "handoff.decompress_at",
                "the decode pool keeps the compressed cache (decode.kv_format), so nothing is decompressed",
            ));
        }
    }
    if compression.is_none() && (h.compress_at != CompressAt::Transit || h.decompress_at != DecompressAt::None) {
        let field = if h.compress_at != CompressAt::Transit { "compress_at" } else { "decompress_at" };
        return Err(Error::field(format!("handoff.{field}"), "needs a compression format (handoff.compression)"));
    }
    if let Some(f) = compression {
        if f.scheme == Scheme::DsMla && model.spec.attention != AttentionKind::Mla {
            return Err(Error::field("handoff.compression", "fp8_ds_mla is an MLA cache record; the model is not MLA"));
        }
    }
    if h.streaming == Streaming::Layer && link.model != LinkModel::Fcfs {
        return Err(Error::field(
            "handoff.streaming",
            "layer-wise streaming is modelled on FCFS links (link.model \"fcfs\"); a shared or host-staged link \
             carries whole transfers",
        ));
    }
    if mode == ModeSpec::Colocated && h.streaming == Streaming::Layer {
        return Err(Error::field("handoff.streaming", "a colocated scenario has no hand-off to stream"));
    }
    if let Topology::Disaggregated { prefill, .. } = &topology {
        if prefill.kv_format.is_some() && s.router.disaggregate.policy != DisaggregatePolicy::Conditional {
            return Err(Error::field(
                "prefill.kv_format",
                "a prefill pool keeps KV only for requests it decodes itself (router.disaggregate.policy \
                 \"conditional\"); the hand-off format is handoff.compression",
            ));
        }
    }
    let convert = match &h.convert {
        None => None,
        Some(c) => Some(conversion(c, &model.spec, mode == ModeSpec::Colocated, &link)?),
    };
    if let (Some(c), Topology::Disaggregated { prefill, decode }) = (&convert, &topology) {
        let (pool, side, other) = match c.at {
            ConvertAt::Sender => (Some(prefill), "prefill", "\"receiver\""),
            ConvertAt::Receiver => (Some(decode), "decode", "\"sender\""),
            ConvertAt::Host => (None, "", ""),
        };
        if let Some(p) = pool.filter(|p| !p.device.spec.converts_kv) {
            return Err(Error::field(
                "handoff.convert.at",
                format!(
                    "the {side} pool's device {:?} does not run a KV conversion (converts_kv = false): convert at \
                     {other} or \"host\" (with link.model \"host_staged\")",
                    p.device.spec.name
                ),
            ));
        }
    }
    if convert.as_ref().is_some_and(|c| c.explicit_dtypes) && compression.is_some() {
        return Err(Error::field(
            "handoff.convert.from_dtype",
            "with explicit dtypes the conversion moves the cache as stored (its dtype is the hand-off's): \
             handoff.compression must be \"none\" (and decode.kv_format unset)",
        ));
    }
    let d = &s.router.disaggregate;
    let disaggregate = match d.policy {
        DisaggregatePolicy::Always => {
            if d.min_prompt_tokens != 0 || d.min_output_tokens != 0 || d.max_link_wait_s.is_some() {
                return Err(Error::field(
                    "router.disaggregate.policy",
                    "thresholds are only used with policy \"conditional\"",
                ));
            }
            Disaggregate::Always
        }
        DisaggregatePolicy::Conditional => {
            if mode == ModeSpec::Colocated {
                return Err(Error::field(
                    "router.disaggregate.policy",
                    "conditional disaggregation needs mode \"disaggregated\"",
                ));
            }
            if let Some(w) = d.max_link_wait_s {
                positive("router.disaggregate.max_link_wait_s", w, true)?;
            }
            Disaggregate::Conditional {
                min_prompt_tokens: d.min_prompt_tokens,
                min_output_tokens: d.min_output_tokens,
                max_link_wait_s: d.max_link_wait_s.unwrap_or(f64::INFINITY),
            }
        }
    };

    let over_context = s.workload.over_context.unwrap_or_default();
    if over_context != OverContext::Warn && model.spec.max_context_tokens.is_none() {
        return Err(Error::field(
            "workload.over_context",
            "needs the model's context length: give model.max_context_tokens (the model presets have it)",
        ));
    }
    let workload = workload(s.workload, requests)?;

    let network = match (&topology, &link.model) {
        (Topology::Colocated { .. }, _) => None,
        (Topology::Disaggregated { .. }, m) => Some(NetworkLink {
            key: &link.spec.key,
            spec: &link.spec.spec,
            channels: link.channels,
            processor_sharing: *m == LinkModel::Shared,
            host: match m {
                LinkModel::HostStaged { host } => Some((host.key.as_str(), &host.spec)),
                _ => None,
            },
        }),
    };
    let handoff = HandoffPlan {
        bytes_per_token: cost.kv_bytes_per_token,
        kv_bytes_per_value: model.spec.kv_bytes_per_value,
        receiver_format: back_format,
        layers: model.spec.layers,
        compression,
        compress_at: h.compress_at,
        decompress_at: h.decompress_at,
        streaming: h.streaming,
        convert,
        hops: Vec::new(),
        network: 0,
        ranks: None,
        rank_pairs: 1,
    };
    let handoff =
        with_rank_pairs(handoff, &topology, &model.spec, &link.spec.spec, s.kv.block_size, cost.kv_bytes_per_token)
            .with_path(network);

    positive("slo.ttft_s", s.slo.ttft_s, false)?;
    positive("slo.tpot_s", s.slo.tpot_s, false)?;
    in_range("metrics.warmup_fraction", s.metrics.warmup_fraction, 0.0, 1.0, true, false)?;
    if s.scheduler.max_prefill_tokens == 0 {
        return Err(Error::field("scheduler.max_prefill_tokens", "must be ≥ 1"));
    }
    if s.engine.max_steps == 0 {
        return Err(Error::field("engine.max_steps", "must be ≥ 1"));
    }
    if s.engine.timeline_max_spans == 0 {
        return Err(Error::field("engine.timeline_max_spans", "must be ≥ 1"));
    }
    if s.scheduler.max_decode_batch == 0 {
        return Err(Error::field("scheduler.max_decode_batch", "must be ≥ 1"));
    }
    if s.scheduler.max_num_batched_tokens == 0 {
        return Err(Error::field("scheduler.max_num_batched_tokens", "must be ≥ 1"));
    }
    if s.kv.block_size == 0 || s.kv.block_size > 1 << 16 {
        return Err(Error::field("kv.block_size", "must be a whole number of tokens in 1..=65536"));
    }
    in_range("kv.watermark", s.kv.watermark, 0.0, 1.0, true, false)?;
    if s.scheduler.policy == BatchPolicy::Chunked && s.handoff.streaming == Streaming::Layer {
        return Err(Error::field(
            "scheduler.policy",
            "chunked prefill cannot be combined with handoff.streaming \"layer\" (a prompt's layers are done only \
             when its last chunk is): use streaming \"whole\" or policy \"whole\"",
        ));
    }
    let speculative = match &s.speculative {
        None => None,
        Some(sp) => {
            let draft_model = |v: &Value| -> Result<Named<ModelSpec>> {
                let path = "speculative.draft_model";
                let mut m = resolve_preset::<ModelSpec>(v, path, "model", &model_presets())?;
                check_model(&m.spec).map_err(|e| e.under(path, "model"))?;
                formats(&mut m.spec).map_err(|e| e.under(path, "model"))?;
                Ok(m)
            };
            let seed = match &workload {
                Workload::Generated { seed, .. } => *seed,
                Workload::Sessions(w) => w.seed,
                _ => 1,
            };
            Some(super::speculative::resolve(sp, &model, seed, draft_model)?)
        }
    };
    let prefix_cache = super::prefix::resolve(
        &s.prefix_cache,
        s.handoff.skip_cached_prefix,
        s.router.prefill,
        matches!(topology, Topology::Disaggregated { .. }),
    )?;
    let faults = match &s.faults {
        None => None,
        Some(f) => {
            let refused = [
                (
                    "kv.policy",
                    s.kv.policy == KvPolicy::Paged,
                    "a failure's paged KV state is not modelled; use \"reserve\"",
                ),
                ("prefix_cache.enabled", prefix_cache.enabled, "a failed instance's cache is not modelled"),
                (
                    "workload.sessions",
                    matches!(workload, Workload::Sessions(_)),
                    "a lost turn's session is not modelled",
                ),
                ("handoff.streaming", s.handoff.streaming == Streaming::Layer, "use streaming \"whole\""),
                (
                    "router.disaggregate.policy",
                    matches!(disaggregate, Disaggregate::Conditional { .. }),
                    "conditional disaggregation's local decodes are not modelled",
                ),
            ];
            Some(super::faults::resolve(f, &topology, &link, &workload, &refused)?)
        }
    };
    let kv_tiers = match &s.kv_tiers {
        None => Vec::new(),
        Some(t) => kv_tiers(t, prefix_cache.enabled)?,
    };
    let mut topology = topology;
    let timing = super::timing::resolve(s.cost.timing, &mut topology, speculative.is_some())?;
    Ok(Scenario {
        model,
        topology,
        link,
        handoff,
        disaggregate,
        per_slice_streaming: s.engine.per_slice_streaming,
        workload,
        over_context,
        ttft_slo_s: s.slo.ttft_s,
        tpot_slo_s: s.slo.tpot_s,
        warmup_fraction: s.metrics.warmup_fraction,
        first_token: s.metrics.first_token,
        lm_head,
        roofline: RooflineParams {
            step_overhead_s: s.cost.step_overhead_s,
            enforce_tdp: s.cost.enforce_tdp,
            dvfs: s.cost.dvfs,
            s_min: s.cost.s_min,
            comm_overlap: s.cost.comm_overlap,
        },
        mem_util,
        max_prefill_tokens: s.scheduler.max_prefill_tokens,
        max_decode_batch: s.scheduler.max_decode_batch,
        batch_policy: s.scheduler.policy,
        max_num_batched_tokens: s.scheduler.max_num_batched_tokens,
        kv: s.kv,
        prefill_routing: match s.router.prefill {
            PrefillRouterSpec::LeastQueuedTokens => Rule::LeastQueuedTokens,
            PrefillRouterSpec::RoundRobin => Rule::RoundRobin,
            PrefillRouterSpec::PrefixAffinity => {
                Rule::PrefixAffinity { max_imbalance_tokens: s.scheduler.max_prefill_tokens as u64 }
            }
        },
        decode_routing: load_routing(s.router.decode),
        colocated_routing: load_routing(s.router.colocated),
        macro_steps: s.engine.macro_steps,
        max_steps: s.engine.max_steps,
        timeline_max_spans: s.engine.timeline.then_some(s.engine.timeline_max_spans),
        prefix_cache,
        speculative,
        faults,
        kv_tiers,
        timing,
    })
}

/// Resolve `handoff.convert` against the model (its geometry instantiates both layouts) and the link.
fn conversion(c: &ConvertSpec, model: &ModelSpec, colocated: bool, link: &Link) -> Result<Conversion> {
    if colocated {
        return Err(Error::field("handoff.convert", "a colocated scenario has no hand-off to convert"));
    }
    let mla = model.attention == AttentionKind::Mla;
    let geometry = if mla {
        Geometry {
            layers: model.layers as usize,
            heads: 1,
            head_dim: (model.kv_lora_rank + model.qk_rope_dim) as usize,
        }
    } else {
        Geometry { layers: model.layers as usize, heads: model.kv_heads as usize, head_dim: model.head_dim as usize }
    };
    let explicit_dtypes = c.from_dtype.is_some() || c.to_dtype.is_some();
    let from_dtype = c.from_dtype.as_deref().or(c.to_dtype.as_deref()).unwrap_or("bfloat16");
    let to_dtype = c.to_dtype.as_deref().unwrap_or(from_dtype);
    let side = |field: &str, name: &str, block: Option<u32>, dtype: &str| -> Result<crate::layout::Layout> {
        let path = format!("handoff.convert.{field}");
        let def = crate::layout::layout_def(name).ok_or_else(|| {
            Error::field(&path, format!("unknown layout {name:?} (known: {})", crate::layout::catalog::known_layouts()))
        })?;
        if def.mla != mla {
            let what = if mla { "an MLA layout (mla, mla_neutral)" } else { "a K/V layout (not mla)" };
            return Err(Error::field(&path, format!("model {} needs {what}, got {name}", model.name)));
        }
        let bs = block.unwrap_or(16);
        if bs == 0 || bs > 1 << 16 {
            return Err(Error::field(format!("handoff.convert.{field}_block_size"), "must be in 1..=65536"));
        }
        let dpath = format!("handoff.convert.{field}_dtype");
        if explicit_dtypes {
            let dt = crate::layout::Dtype::parse(dtype).ok_or_else(|| {
                let known: Vec<_> = crate::layout::Dtype::ALL.iter().map(|d| d.name()).collect();
                Error::field(&dpath, format!("unknown layout dtype {dtype:?} (known: {})", known.join(", ")))
            })?;
            // The cache moves as stored: its dtype must hold the model's KV bytes per value.
            let per_value = if dt.plain() { dt.unit_bytes() as f64 } else { 1.0 };
            if dt == crate::layout::Dtype::Fp8DsMla {
                return Err(Error::field(
                    &dpath,
                    "fp8_ds_mla is a compression of an MLA cache: use handoff.compression \"fp8_ds_mla\"",
                ));
            }
            if per_value != model.kv_bytes_per_value {
                return Err(Error::field(
                    &dpath,
                    format!(
                        "{dtype} holds {per_value} byte(s) per value but the model's KV holds {} \
                         (model.kv_bytes_per_value): set it to {per_value}",
                        model.kv_bytes_per_value
                    ),
                ));
            }
        }
        crate::layout::Layout::new(&path, name, dtype, bs as usize, geometry).map_err(|e| {
            let p = e.path().replace(&format!("{path}.dtype"), &dpath);
            Error::field(p, e.to_string())
        })
    };
    let from = side("from", &c.from, c.from_block_size, from_dtype)?;
    let to = side("to", &c.to, c.to_block_size, to_dtype)?;
    if explicit_dtypes {
        match crate::layout::Codec::between(from.dtype, to.dtype) {
            Ok(crate::layout::Codec::Copy | crate::layout::Codec::Flavour { .. })
            | Ok(crate::layout::Codec::PerTokenHeadFlavour { .. }) => {}
            Ok(_) => {
                return Err(Error::field(
                    "handoff.convert.to_dtype",
                    format!(
                        "{} → {} changes precision; a hand-off conversion changes layout and fp8 flavour (fn ↔ \
                         fnuz) only: compress with handoff.compression (and decode.kv_format)",
                        from.dtype.name(),
                        to.dtype.name()
                    ),
                ))
            }
            Err(reason) => return Err(Error::field("handoff.convert.to_dtype", reason)),
        }
    }
    if c.at != ConvertAt::Host
        && (c.host_gb_per_s.is_some() || c.host_threads.is_some() || c.host_w_per_thread.is_some())
    {
        return Err(Error::field(
            "handoff.convert.at",
            "host_gb_per_s, host_threads and host_w_per_thread need at \"host\"",
        ));
    }
    if c.at == ConvertAt::Host && !matches!(link.model, LinkModel::HostStaged { .. }) {
        return Err(Error::field(
            "handoff.convert.at",
            "a host conversion needs the cache in host memory: use link.model \"host_staged\" (GPUDirect links \
             never stage it), or convert at \"sender\" or \"receiver\"",
        ));
    }
    let host_gb_per_s = c.host_gb_per_s.unwrap_or(DEFAULT_HOST_CONVERT_GB_PER_S);
    rate("handoff.convert.host_gb_per_s", host_gb_per_s)?;
    let host_w_per_thread = c.host_w_per_thread.unwrap_or(DEFAULT_HOST_W_PER_THREAD);
    in_range("handoff.convert.host_w_per_thread", host_w_per_thread, 0.0, 1e4, true, true)?;
    let host_threads = c.host_threads.unwrap_or(1);
    if host_threads == 0 || host_threads > 1024 {
        return Err(Error::field("handoff.convert.host_threads", "must be in 1..=1024"));
    }
    Ok(Conversion { from, to, explicit_dtypes, at: c.at, host_gb_per_s, host_threads, host_w_per_thread })
}

fn load_routing(r: LoadRouterSpec) -> Rule {
    match r {
        LoadRouterSpec::LeastLoaded => Rule::LeastLoaded,
        LoadRouterSpec::RoundRobin => Rule::RoundRobin,
    }
}

/// Resolve a preset reference: a name, or an object that is either `{"preset": name, overrides...}` or a
/// complete inline description. Unknown keys and wrong types are reported with their full path.
fn resolve_preset<T: DeserializeOwned + Serialize>(
    v: &Value,
    path: &str,
    kind: &'static str,
    presets: &[(&'static str, T)],
) -> Result<Named<T>> {
    let lookup = |name: &str, at: &str| -> Result<&T> {
        presets.iter().find(|(k, _)| *k == name).map(|(_, s)| s).ok_or_else(|| Error::UnknownPreset {
            path: at.to_string(),
            kind,
            name: name.to_string(),
            known: presets.iter().map(|(k, _)| *k).collect::<Vec<_>>().join(", "),
        })
    };
    match v {
        Value::String(name) => Ok(Named { key: name.clone(), spec: clone_via_json(lookup(name, path)?, path)? }),
        Value::Object(obj) => {
            let (key, mut merged) = match obj.get("preset") {
                Some(Value::String(name)) => {
                    let base = serde_json::to_value(lookup(name, &format!("{path}.preset"))?)
                        .map_err(|e| Error::Internal(e.to_string()))?;
                    match base {
                        Value::Object(m) => (name.clone(), m),
                        _ => return Err(Error::Internal("preset did not serialise to an object".into())),
                    }
                }
                Some(other) => {
                    return Err(Error::field(
                        format!("{path}.preset"),
                        format!("must be a preset name (string), got {other}"),
                    ))
                }
                None => ("custom".to_string(), Map::new()),
            };
            for (k, val) in obj {
                if k != "preset" {
                    merged.insert(k.clone(), val.clone());
                }
            }
            merged.entry("name").or_insert_with(|| Value::String(key.clone()));
            let spec = serde_path_to_error::deserialize(Value::Object(merged))
                .map_err(|e| serde_error(join(path, &e.path().to_string()), e.inner().to_string()))?;
            Ok(Named { key, spec })
        }
        other => Err(Error::field(path, format!("must be a {kind} preset name or an object, got {other}"))),
    }
}

fn clone_via_json<T: DeserializeOwned + Serialize>(t: &T, path: &str) -> Result<T> {
    serde_json::to_value(t).and_then(serde_json::from_value).map_err(|e| Error::Internal(format!("{path}: {e}")))
}

fn join(base: &str, sub: &str) -> String {
    if sub.is_empty() || sub == "." {
        base.to_string()
    } else {
        format!("{base}.{sub}")
    }
}

fn check_model(m: &ModelSpec) -> Result<()> {
    for (name, v) in [
        ("layers", m.layers),
        ("d_model", m.d_model),
        ("heads", m.heads),
        ("kv_heads", m.kv_heads),
        ("head_dim", m.head_dim),
        ("d_ff", m.d_ff),
        ("vocab", m.vocab),
    ] {
        if v == 0 || v > 1 << 24 {
            return Err(Error::field(format!("model.{name}"), format!("must be in [1, {}], got {v}", 1 << 24)));
        }
    }
    if m.kv_heads > m.heads {
        return Err(Error::field(
            "model.kv_heads",
            format!("{} KV heads exceed {} attention heads", m.kv_heads, m.heads),
        ));
    }
    let small = |name: &str, v: u32| -> Result<()> {
        if v > 1 << 24 {
            Err(Error::field(format!("model.{name}"), format!("must be ≤ {}, got {v}", 1 << 24)))
        } else {
            Ok(())
        }
    };
    for (name, v) in [
        ("kv_lora_rank", m.kv_lora_rank),
        ("qk_rope_dim", m.qk_rope_dim),
        ("qk_nope_dim", m.qk_nope_dim),
        ("v_head_dim", m.v_head_dim),
        ("q_lora_rank", m.q_lora_rank),
        ("n_experts", m.n_experts),
        ("top_k", m.top_k),
        ("n_shared_experts", m.n_shared_experts),
        ("moe_d_ff", m.moe_d_ff),
        ("dense_layers", m.dense_layers),
    ] {
        small(name, v)?;
    }
    if m.attention == AttentionKind::Mla {
        for (name, v) in [("kv_lora_rank", m.kv_lora_rank), ("v_head_dim", m.v_head_dim)] {
            if v == 0 {
                return Err(Error::field(format!("model.{name}"), "required (≥ 1) by attention \"mla\""));
            }
        }
    }
    if m.n_experts > 0 {
        if m.top_k == 0 || m.top_k > m.n_experts {
            return Err(Error::field(
                "model.top_k",
                format!("must be in [1, n_experts = {}] for a MoE model, got {}", m.n_experts, m.top_k),
            ));
        }
        if m.moe_d_ff == 0 {
            return Err(Error::field("model.moe_d_ff", "required (≥ 1) by a MoE model (n_experts > 0)"));
        }
        if m.dense_layers > m.layers {
            return Err(Error::field(
                "model.dense_layers",
                format!("{} dense layers exceed the {} layers", m.dense_layers, m.layers),
            ));
        }
    }
    if let Some(c) = m.max_context_tokens {
        if !(2..=1 << 31).contains(&c) {
            return Err(Error::field("model.max_context_tokens", format!("must be in [2, {}], got {c}", 1u32 << 31)));
        }
    }
    positive("model.weight_bytes_per_param", m.weight_bytes_per_param, false)?;
    positive("model.kv_bytes_per_value", m.kv_bytes_per_value, false)
}

/// The rank pairs of a hand-off between the pools' parallel layouts (both pools have `parallel`), and the
/// link's descriptor cost: one descriptor per KV block per layer of each pair, blocks of `block_size` tokens.
fn with_rank_pairs(
    mut plan: HandoffPlan,
    topology: &Topology,
    model: &ModelSpec,
    link: &LinkSpec,
    block_size: u32,
    bytes_per_token: f64,
) -> HandoffPlan {
    let Topology::Disaggregated { prefill, decode } = topology else { return plan };
    let pairs = match (&prefill.parallel, &decode.parallel) {
        (Some(p), Some(d)) => {
            crate::handoff::ranks::rank_pairs(super::parallel::split_kv_heads(model), p.layout().tp, d.layout().tp)
        }
        _ => crate::handoff::ranks::RankPairs { pairs: 1, per_rank: 1 },
    };
    plan.rank_pairs = pairs.pairs;
    if pairs.per_rank > 1 || link.descriptor_us > 0.0 {
        plan.ranks = Some(RankCost {
            per_rank: pairs.per_rank,
            descriptor_s: link.descriptor_us * 1e-6,
            block_bytes: block_size as f64 * bytes_per_token / model.layers as f64,
        });
    }
    plan
}

/// `model.weights` / `model.activations`: the weight bytes they imply (set on `m`) and the format a matmul
/// runs in.
fn formats(m: &mut ModelSpec) -> Result<NumFormat> {
    let parse = |name: &Option<String>, path: &str| -> Result<Option<NumFormat>> {
        match name.as_deref() {
            None => Ok(None),
            Some(n) => NumFormat::parse(n).map(Some).ok_or_else(|| {
                Error::field(path, format!("unknown format {n:?} (known: {})", FORMAT_NAMES.join(", ")))
            }),
        }
    };
    let weights = parse(&m.weights, "model.weights")?;
    let activations = parse(&m.activations, "model.activations")?;
    if activations == Some(NumFormat::Int4) {
        return Err(Error::field(
            "model.activations",
            "int4 is a weight format: its matmuls run at the activations' precision (bf16, fp8 or fp4)",
        ));
    }
    if let Some(w) = weights {
        let given = m.weight_bytes_per_param;
        if given != 2.0 && given != w.weight_bytes() {
            return Err(Error::field(
                "model.weight_bytes_per_param",
                format!(
                    "{given} disagrees with model.weights {:?} ({} bytes per weight): give one of the two",
                    w.name(),
                    w.weight_bytes()
                ),
            ));
        }
        m.weight_bytes_per_param = w.weight_bytes();
    }
    Ok(NumFormat::compute(weights.unwrap_or(NumFormat::Bf16), activations.unwrap_or(NumFormat::Bf16)))
}

fn check_device(d: &DeviceSpec, path: &str) -> Result<()> {
    for (name, v) in [("peak_tflops", d.peak_tflops), ("hbm_tb_per_s", d.hbm_tb_per_s)] {
        rate(&format!("{path}.{name}"), v)?;
    }
    for (name, v) in [("hbm_gb", d.hbm_gb), ("tdp_w", d.tdp_w)] {
        positive(&format!("{path}.{name}"), v, false)?;
    }
    for (name, v) in [("fp8_peak_tflops", d.fp8_peak_tflops), ("fp4_peak_tflops", d.fp4_peak_tflops)] {
        if let Some(v) = v {
            rate(&format!("{path}.{name}"), v)?;
        }
    }
    in_range(&format!("{path}.flops_eff"), d.flops_eff, MIN_RATE, 1.0, true, true)?;
    in_range(&format!("{path}.bw_eff"), d.bw_eff, MIN_RATE, 1.0, true, true)?;
    for (name, v) in [("idle_w", d.idle_w), ("pj_per_flop", d.pj_per_flop), ("pj_per_byte", d.pj_per_byte)] {
        positive(&format!("{path}.{name}"), v, true)?;
    }
    if d.idle_w >= d.tdp_w {
        return Err(Error::field(
            format!("{path}.idle_w"),
            format!("idle power {} W must be below the TDP {} W", d.idle_w, d.tdp_w),
        ));
    }
    Ok(())
}

fn pool(
    p: Option<PoolSpec>,
    path: &str,
    default_instances: u32,
    model: &Named<ModelSpec>,
    cost: &ModelCost,
    mem_util: f64,
    compute_format: NumFormat,
) -> Result<Pool> {
    let p = p.unwrap_or(PoolSpec {
        device: Value::String("h100".into()),
        instances: None,
        devices_per_instance: 1,
        power_cap_w: None,
        kv_format: None,
        parallel: None,
    });
    let kv_format = match p.kv_format.as_deref() {
        None => None,
        Some(name) => {
            let f = known_format(name, &format!("{path}.kv_format"))?;
            if f.is_some_and(|f| f.scheme == Scheme::DsMla) && model.spec.attention != AttentionKind::Mla {
                return Err(Error::field(
                    format!("{path}.kv_format"),
                    "fp8_ds_mla is an MLA cache record; the model is not MLA",
                ));
            }
            f
        }
    };
    let dpath = format!("{path}.device");
    let device = resolve_preset::<DeviceSpec>(&p.device, &dpath, "device", &device_presets())?;
    check_device(&device.spec, &dpath)?;
    let compute = ComputeRate::on(&device.spec, compute_format);
    let matmul_scale = compute.matmul_scale(&device.spec);
    let cost = &cost.with_kv_ratio(kv_format.map_or(1.0, |f| f.ratio_vs_bf16())).with_matmul_scale(matmul_scale);
    let instances = p.instances.unwrap_or(default_instances);
    if instances == 0 || instances > MAX_INSTANCES {
        return Err(Error::field(
            format!("{path}.instances"),
            format!("must be in [1, {MAX_INSTANCES}], got {instances}"),
        ));
    }
    if p.devices_per_instance == 0 || p.devices_per_instance > MAX_DEVICES_PER_INSTANCE {
        return Err(Error::field(
            format!("{path}.devices_per_instance"),
            format!("must be in [1, {MAX_DEVICES_PER_INSTANCE}], got {}", p.devices_per_instance),
        ));
    }
    if let Some(cap) = p.power_cap_w {
        let cpath = format!("{path}.power_cap_w");
        positive(&cpath, cap, false)?;
        if cap <= device.spec.idle_w {
            return Err(Error::field(
                cpath,
                format!(
                    "a cap of {cap} W per device leaves no dynamic power above the {} W idle draw",
                    device.spec.idle_w
                ),
            ));
        }
    }
    let parallel = match &p.parallel {
        None => None,
        Some(spec) => {
            let ppath = format!("{path}.parallel");
            super::parallel::resolve(spec, &ppath, &model.spec, cost, &device.spec, &dpath)?.map(Box::new)
        }
    };
    let mut devices_per_instance = p.devices_per_instance;
    if let Some(spec) = &p.parallel {
        let n = spec.tp * spec.pp * spec.dp;
        if devices_per_instance != 1 && devices_per_instance != n {
            return Err(Error::field(
                format!("{path}.devices_per_instance"),
                format!(
                    "is {devices_per_instance} but {path}.parallel gives tp × pp × dp = {} × {} × {} = {n} devices: \
                     drop devices_per_instance (it is derived from parallel) or make the two agree",
                    spec.tp, spec.pp, spec.dp
                ),
            ));
        }
        devices_per_instance = n;
    }
    if let Some(spec) = &p.parallel {
        // A layout (even every degree 1, which resolves to none) that leaves no room: the advice is about it.
        let fits = match &parallel {
            Some(par) => par.rank_memory(&device.spec, mem_util, cost).capacity_tokens(par.layout().dp).is_some(),
            None => {
                let (w, kv) = (cost.resident_weight_bytes(), cost.kv_bytes_per_token);
                kv_capacity_tokens(&device.spec, devices_per_instance, mem_util, w, kv).is_ok()
            }
        };
        if !fits {
            let lay = crate::cost::parallel::Layout { tp: spec.tp, pp: spec.pp, ep: spec.ep, dp: spec.dp };
            let ppath = format!("{path}.parallel");
            return Err(super::parallel::does_not_fit(lay, &ppath, &model.spec, cost, &device.spec, mem_util));
        }
    } else {
        let fits = |n: u32| {
            kv_capacity_tokens(&device.spec, n, mem_util, cost.resident_weight_bytes(), cost.kv_bytes_per_token)
        };
        if let Err(usable) = fits(p.devices_per_instance) {
            return Err(Error::DoesNotFit(Box::new(crate::error::DoesNotFit {
                path: path.to_string(),
                model: model.spec.name.clone(),
                device: device.spec.name.clone(),
                devices: p.devices_per_instance,
                weights_gb: cost.resident_weight_bytes() / 1e9,
                usable_gb: usable / 1e9,
                hbm_gb: device.spec.hbm_gb * p.devices_per_instance as f64,
                mem_util,
                memory: crate::cost::presets::memory_kind(&device.key),
                devices_needed: (p.devices_per_instance + 1..=MAX_DEVICES_PER_INSTANCE).find(|&n| fits(n).is_ok()),
            })));
        }
    }
    Ok(Pool {
        device,
        instances,
        devices_per_instance,
        power_cap_w: p.power_cap_w,
        kv_format,
        parallel,
        compute,
        matmul_scale,
        table: None,
    })
}

/// A format of the table by name or alias (`None` for `"none"`), or an error listing the known names.
fn known_format(name: &str, path: &str) -> Result<Option<&'static Format>> {
    match format(name) {
        Some(f) if f.scheme == Scheme::None => Ok(None),
        Some(f) => Ok(Some(f)),
        None => {
            let mut known: Vec<_> = FORMATS.iter().map(|f| f.name).collect();
            known.extend(ALIASES.iter().map(|(a, _)| *a));
            Err(Error::field(path, format!("unknown format {name:?} (known: {})", known.join(", "))))
        }
    }
}

fn link(v: Option<Value>) -> Result<Link> {
    let v = v.unwrap_or_else(|| Value::String("ib-ndr".into()));
    let mut model_name: Option<Value> = None;
    let mut host: Option<Value> = None;
    let (preset_value, channels) = match v {
        Value::Object(mut obj) => {
            model_name = obj.remove("model");
            host = obj.remove("host_link");
            let channels = match obj.remove("channels") {
                None => 1,
                Some(c) => match c.as_u64() {
                    Some(n) if n >= 1 && n <= MAX_CHANNELS as u64 => n as u32,
                    _ => {
                        return Err(Error::field(
                            "link.channels",
                            format!("must be an integer in [1, {MAX_CHANNELS}], got {c}"),
                        ))
                    }
                },
            };
            // `{"channels": n}` alone keeps the default link.
            let rest = if obj.is_empty() { Value::String("ib-ndr".into()) } else { Value::Object(obj) };
            (rest, channels)
        }
        other => (other, 1),
    };
    let mut spec = resolve_preset::<LinkSpec>(&preset_value, "link", "link", &link_presets())?;
    check_link(&mut spec.spec, "link")?;
    let model = match model_name.as_ref().map(|m| m.as_str()) {
        None | Some(Some("fcfs")) => LinkModel::Fcfs,
        Some(Some("shared")) => LinkModel::Shared,
        Some(Some("host_staged")) => {
            let h = host.take().unwrap_or_else(|| Value::String("pcie5".into()));
            let mut host = resolve_preset::<LinkSpec>(&h, "link.host_link", "link", &link_presets())?;
            check_link(&mut host.spec, "link.host_link")?;
            LinkModel::HostStaged { host }
        }
        _ => {
            return Err(Error::field(
                "link.model",
                format!(
                    "unknown variant {}, expected one of `fcfs`, `shared`, `host_staged`",
                    model_name.map_or("null".to_string(), |v| v.to_string().replace('"', "`"))
                ),
            ))
        }
    };
    if host.is_some() {
        return Err(Error::field("link.host_link", "only used with link model \"host_staged\""));
    }
    Ok(Link { spec, channels, model })
}

/// Check a link's fields and resolve its NIC efficiency (`None`: the measured curve of its NIC count), so that
/// the echo states the value that ran.
fn check_link(l: &mut LinkSpec, path: &str) -> Result<()> {
    rate(&format!("{path}.bandwidth_gb_per_s"), l.bandwidth_gb_per_s)?;
    positive(&format!("{path}.latency_us"), l.latency_us, true)?;
    positive(&format!("{path}.pj_per_bit"), l.pj_per_bit, true)?;
    for (name, v) in [("nics", l.nics), ("gpus_per_nic", l.gpus_per_nic)] {
        if v == 0 || v > MAX_CHANNELS {
            return Err(Error::field(
                format!("{path}.{name}"),
                format!("must be an integer in [1, {MAX_CHANNELS}], got {v}"),
            ));
        }
    }
    let efficiency = l.nic_efficiency.unwrap_or_else(|| default_nic_efficiency(l.nics));
    in_range(&format!("{path}.nic_efficiency"), efficiency, 1e-3, 1.0, true, true)?;
    l.nic_efficiency = Some(efficiency);
    positive(&format!("{path}.launch_overhead_us"), l.launch_overhead_us, true)?;
    positive(&format!("{path}.descriptor_us"), l.descriptor_us, true)?;
    positive(&format!("{path}.registration_ms_per_gb"), l.registration_ms_per_gb, true)?;
    let effective = l.effective_bytes_per_s() / 1e9;
    if !(MIN_RATE..=MAX_QUANTITY).contains(&effective) {
        return Err(Error::field(
            format!("{path}.gpus_per_nic"),
            format!(
                "the effective bandwidth (bandwidth_gb_per_s × nics × nic_efficiency / gpus_per_nic) must be in \
                 [{MIN_RATE:e}, {MAX_QUANTITY:e}] GB/s, got {effective}"
            ),
        ));
    }
    Ok(())
}

fn workload(w: super::spec::WorkloadSpec, requests: Option<Trace>) -> Result<Workload> {
    let generator_fields = [
        ("workload.requests", w.requests.is_some()),
        ("workload.seed", w.seed.is_some()),
        ("workload.arrivals", w.arrivals.is_some()),
        ("workload.prompt_tokens", w.prompt_tokens.is_some()),
        ("workload.output_tokens", w.output_tokens.is_some()),
        ("workload.sessions", w.sessions.is_some()),
    ];
    let external = w.external == Some(true);
    let explicit = match (requests, w.trace) {
        (Some(_), Some(_)) => {
            return Err(Error::field("workload.trace", "a request table was passed as well: give the requests once"))
        }
        (Some(t), None) => Some((Workload::Requests(t), "requests")),
        (None, Some(ts)) => {
            if external {
                return Err(Error::field(
                    "workload.external",
                    "says the requests are a table passed beside the scenario, but workload.trace gives them: \
                     remove one",
                ));
            }
            Some((
                Workload::Trace(Trace::from_columns(
                    "workload.trace",
                    &ts.arrival_s,
                    &ts.prompt_tokens.iter().map(|&x| x as i64).collect::<Vec<_>>(),
                    &ts.output_tokens.iter().map(|&x| x as i64).collect::<Vec<_>>(),
                )?),
                "workload.trace",
            ))
        }
        (None, None) => {
            if external {
                return Err(Error::field(
                    "workload.external",
                    "this scenario's requests are a table passed beside it (Python requests=, CLI --trace): pass \
                     the table again",
                ));
            }
            None
        }
    };
    if let Some((workload, source)) = explicit {
        if let Some((field, _)) = generator_fields.iter().find(|(_, given)| *given) {
            return Err(Error::field(
                *field,
                format!("not used with explicit requests ({source}); remove it or drop the request table"),
            ));
        }
        return Ok(workload);
    }
    if w.sessions.is_some() && w.requests.is_some() {
        return Err(Error::field(
            "workload.requests",
            "not used with workload.sessions (a sessions workload sends up to count × turns requests); remove it",
        ));
    }
    let requests = w.requests.unwrap_or(800);
    if requests == 0 {
        return Err(Error::field("workload.requests", "must be ≥ 1"));
    }
    if requests > MAX_REQUESTS {
        return Err(Error::field(
            "workload.requests",
            format!("at most {MAX_REQUESTS} requests per run (about 10 GB of results); split larger studies"),
        ));
    }
    let arrivals =
        arrivals(w.arrivals.unwrap_or(ArrivalSpec { process: ProcessSpec::Poisson, rate_per_s: 8.0, cv: None }))?;
    let prompt = length(
        w.prompt_tokens,
        "workload.prompt_tokens",
        LengthDist::Lognormal { mean: 2048.0, cv: 0.5, min: 1, max: 32768 },
        1,
    )?;
    let output = length(
        w.output_tokens,
        "workload.output_tokens",
        LengthDist::Lognormal { mean: 256.0, cv: 0.5, min: 1, max: 32768 },
        0,
    )?;
    if let Some(sessions) = w.sessions {
        let sessions = sessions_params(sessions)?;
        let seed = w.seed.unwrap_or(1);
        return Ok(Workload::Sessions(SessionsWorkload { seed, arrivals, prompt, output, sessions }));
    }
    Ok(Workload::Generated { requests: requests as usize, seed: w.seed.unwrap_or(1), arrivals, prompt, output })
}

/// `workload.sessions`: counts ≥ 1, at most [`MAX_REQUESTS`] turns in all, think time ≥ 0.
fn sessions_params(s: SessionsSpec) -> Result<SessionsParams> {
    let at_least_one = |path: &str, v: u64| {
        if v == 0 {
            Err(Error::field(path, "must be ≥ 1"))
        } else {
            Ok(())
        }
    };
    at_least_one("workload.sessions.count", s.count)?;
    at_least_one("workload.sessions.turns", s.turns)?;
    if s.count.saturating_mul(s.turns) > MAX_REQUESTS {
        return Err(Error::field(
            "workload.sessions",
            format!("count × turns must be at most {MAX_REQUESTS} requests per run; split larger studies"),
        ));
    }
    let system_prompts = s.system_prompts.unwrap_or(1);
    at_least_one("workload.sessions.system_prompts", system_prompts as u64)?;
    let think_s = s.think_s.unwrap_or(0.0);
    positive("workload.sessions.think_s", think_s, true)?;
    Ok(SessionsParams {
        count: s.count as u32,
        turns: s.turns as u32,
        think_s,
        system_prompts,
        system_tokens: s.system_tokens.unwrap_or(0),
    })
}

fn arrivals(a: ArrivalSpec) -> Result<Arrivals> {
    rate("workload.arrivals.rate_per_s", a.rate_per_s)?;
    match a.process {
        ProcessSpec::Poisson => {
            if a.cv.is_some() {
                return Err(Error::field(
                    "workload.arrivals.cv",
                    "not used by process \"poisson\" (its cv is 1); use process \"gamma\" for another cv",
                ));
            }
            Ok(Arrivals::Poisson { rate_per_s: a.rate_per_s })
        }
        ProcessSpec::Gamma => {
            let cv = a.cv.ok_or_else(|| Error::field("workload.arrivals.cv", "required by process \"gamma\""))?;
            // A gamma shape 1/cv² between 1e-4 and 1e6 keeps the sampler finite and terminating.
            in_range("workload.arrivals.cv", cv, 1e-3, 100.0, true, true)?;
            Ok(Arrivals::Gamma { rate_per_s: a.rate_per_s, cv })
        }
    }
}

fn length(l: Option<LengthSpec>, path: &str, default: LengthDist, floor: u32) -> Result<LengthDist> {
    let Some(l) = l else { return Ok(default) };
    let unused = |field: &str, given: bool, dist: &str| -> Result<()> {
        if given {
            Err(Error::field(format!("{path}.{field}"), format!("not used by dist \"{dist}\"")))
        } else {
            Ok(())
        }
    };
    let required =
        |field: &str, dist: &str| Error::field(format!("{path}.{field}"), format!("required by dist \"{dist}\""));
    let min = l.min.unwrap_or(1);
    if min < floor {
        return Err(Error::field(format!("{path}.min"), format!("must be ≥ {floor}")));
    }
    let d = match l.dist {
        DistSpec::Fixed => {
            unused("mean", l.mean.is_some(), "fixed")?;
            unused("cv", l.cv.is_some(), "fixed")?;
            unused("min", l.min.is_some(), "fixed")?;
            unused("max", l.max.is_some(), "fixed")?;
            let value = l.value.ok_or_else(|| required("value", "fixed"))?;
            if value < floor {
                return Err(Error::field(format!("{path}.value"), format!("must be ≥ {floor}")));
            }
            LengthDist::Fixed { value }
        }
        DistSpec::Uniform => {
            unused("mean", l.mean.is_some(), "uniform")?;
            unused("cv", l.cv.is_some(), "uniform")?;
            unused("value", l.value.is_some(), "uniform")?;
            let min = l.min.ok_or_else(|| required("min", "uniform"))?;
            let max = l.max.ok_or_else(|| required("max", "uniform"))?;
            LengthDist::Uniform { min, max }
        }
        DistSpec::Lognormal => {
            unused("value", l.value.is_some(), "lognormal")?;
            let mean = l.mean.ok_or_else(|| required("mean", "lognormal"))?;
            positive(&format!("{path}.mean"), mean, false)?;
            let cv = l.cv.ok_or_else(|| required("cv", "lognormal"))?;
            positive(&format!("{path}.cv"), cv, true)?;
            LengthDist::Lognormal { mean, cv, min, max: l.max.unwrap_or(32768) }
        }
    };
    if let LengthDist::Uniform { min, max } | LengthDist::Lognormal { min, max, .. } = d {
        if max < min {
            return Err(Error::field(format!("{path}.max"), format!("{max} is below min {min}")));
        }
    }
    Ok(d)
}

/// `v` must be > 0 (or ≥ 0 with `zero_ok`) and at most [`MAX_QUANTITY`].
fn positive(path: &str, v: f64, zero_ok: bool) -> Result<()> {
    let ok = v <= MAX_QUANTITY && (v > 0.0 || (zero_ok && v == 0.0));
    if ok {
        Ok(())
    } else {
        let want = if zero_ok { "≥ 0" } else { "> 0" };
        Err(Error::field(path, format!("must be a finite number {want} and ≤ {MAX_QUANTITY:e}, got {v}")))
    }
}

/// A rate the simulation divides by: in [[`MIN_RATE`], [`MAX_QUANTITY`]].
fn rate(path: &str, v: f64) -> Result<()> {
    if (MIN_RATE..=MAX_QUANTITY).contains(&v) {
        return Ok(());
    }
    let why = if v > MAX_QUANTITY {
        // Not "a smaller rate overflows": what is wrong here is a rate above the largest quantity taken.
        format!(
            "{MAX_QUANTITY:e} is the largest quantity a scenario takes, so that every derived time and energy \
             stays finite"
        )
    } else {
        "a smaller rate makes the simulated times overflow".to_string()
    };
    Err(Error::field(
        path,
        format!("must be a finite number > 0, from {MIN_RATE:e} to {MAX_QUANTITY:e} ({why}), got {v}"),
    ))
}

/// `v` in the interval (lo|[lo, hi)|hi] with the given closedness.
fn in_range(path: &str, v: f64, lo: f64, hi: f64, lo_closed: bool, hi_closed: bool) -> Result<()> {
    let ok = v.is_finite() && (if lo_closed { v >= lo } else { v > lo }) && (if hi_closed { v <= hi } else { v < hi });
    if ok {
        Ok(())
    } else {
        let l = if lo_closed { '[' } else { '(' };
        let h = if hi_closed { ']' } else { ')' };
        Err(Error::field(path, format!("must be in {l}{lo}, {hi}{h}, got {v}")))
    }
}

/// Check `kv_tiers` (with `prefix_cache.enabled` known) and resolve each tier.
fn kv_tiers(tiers: &[KvTierSpec], prefix_cache: bool) -> Result<Vec<KvTier>> {
    if !prefix_cache {
        return Err(Error::field(
            "kv_tiers",
            "tiers hold the prefix cache's spilled blocks: needs prefix_cache.enabled = true",
        ));
    }
    if tiers.is_empty() || tiers.len() > MAX_KV_TIERS {
        return Err(Error::field(
            "kv_tiers",
            format!("expected 1 to {MAX_KV_TIERS} tiers, got {} (leave kv_tiers out for none)", tiers.len()),
        ));
    }
    tiers.iter().enumerate().map(|(k, t)| kv_tier(t, &format!("kv_tiers[{k}]"))).collect()
}

fn kv_tier(t: &KvTierSpec, at: &str) -> Result<KvTier> {
    positive(&format!("{at}.capacity_gb"), t.capacity_gb, true)?;
    let mut spec = t.clone();
    let (bytes_per_s, latency_s) = match t.kind {
        KvTierKind::Host => {
            for (name, given) in [("gb_per_s", t.gb_per_s.is_some()), ("latency_us", t.latency_us.is_some())] {
                if given {
                    return Err(Error::field(
                        format!("{at}.{name}"),
                        "a host tier is priced by its link: give link (a preset name or an object with \
                         bandwidth_gb_per_s and latency_us)",
                    ));
                }
            }
            let v = t.link.clone().unwrap_or_else(|| Value::String(DEFAULT_HOST_TIER_LINK.into()));
            let path = format!("{at}.link");
            let mut link = resolve_preset(&v, &path, "link", &link_presets())?;
            check_link(&mut link.spec, &path)?;
            spec.link = Some(super::echo::expanded(&link));
            (link.spec.bandwidth_gb_per_s * 1e9, link.spec.latency_us * 1e-6)
        }
        KvTierKind::Ssd => {
            if t.link.is_some() {
                return Err(Error::field(
                    format!("{at}.link"),
                    "an SSD tier is priced by gb_per_s and latency_us, not by a link",
                ));
            }
            let need = |v: Option<f64>, name: &str| {
                v.ok_or_else(|| {
                    Error::field(
                        format!("{at}.{name}"),
                        "an SSD tier needs gb_per_s (read bandwidth, GB/s) and latency_us (per load); there is \
                         no default (drives differ by an order of magnitude)",
                    )
                })
            };
            let gb_per_s = need(t.gb_per_s, "gb_per_s")?;
            let latency_us = need(t.latency_us, "latency_us")?;
            rate(&format!("{at}.gb_per_s"), gb_per_s)?;
            positive(&format!("{at}.latency_us"), latency_us, true)?;
            (gb_per_s * 1e9, latency_us * 1e-6)
        }
    };
    Ok(KvTier { kind: t.kind, capacity_bytes: t.capacity_gb * 1e9, bytes_per_s, latency_s, spec })
}
