//! [`ScenarioSpec`] → [`Scenario`]: defaults, preset resolution, range checks. Every error names its field.

use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::{Map, Value};

use super::spec::{
    ArrivalSpec, DistSpec, LengthSpec, LmHeadSpec, LoadRouterSpec, ModeSpec, PoolSpec, PrefillRouterSpec, ProcessSpec,
    ScenarioSpec,
};
use super::{serde_error, Link, LoadRouting, Named, Pool, PrefillRouting, Scenario, Topology, Workload};
use crate::cost::model::{LmHead, ModelCost};
use crate::cost::presets::{device_presets, link_presets, model_presets, DeviceSpec, LinkSpec, ModelSpec};
use crate::cost::roofline::{kv_capacity_tokens, RooflineParams};
use crate::error::{Error, Result};
use crate::quant::formats::{format, FORMATS};
use crate::workload::{Arrivals, LengthDist, Trace};

/// Upper bounds that keep every allocation sane. They are far beyond any real system.
pub const MAX_REQUESTS: u64 = 100_000_000;
pub const MAX_INSTANCES: u32 = 4096;
pub const MAX_DEVICES_PER_INSTANCE: u32 = 1024;
pub const MAX_CHANNELS: u32 = 4096;
/// Largest value any positive physical quantity may take (keeps every derived quantity finite).
pub const MAX_QUANTITY: f64 = 1e9;

pub(super) fn validate(s: ScenarioSpec, requests: Option<Trace>) -> Result<Scenario> {
    let model_value = s.model.unwrap_or_else(|| Value::String("llama3-8b".into()));
    let model = resolve_preset::<ModelSpec>(&model_value, "model", "model", &model_presets())?;
    check_model(&model.spec)?;

    let mem_util = s.cost.mem_util;
    in_range("cost.mem_util", mem_util, 0.0, 1.0, false, true)?;
    positive("cost.step_overhead_s", s.cost.step_overhead_s, true)?;
    in_range("cost.s_min", s.cost.s_min, 0.0, 1.0, false, true)?;
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
            let prefill = pool(s.prefill, "prefill", 1, &model, &cost, mem_util)?;
            let decode = pool(s.decode, "decode", 1, &model, &cost, mem_util)?;
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
            Topology::Colocated { pool: pool(s.colocated, "colocated", 2, &model, &cost, mem_util)? }
        }
    };

    if mode == ModeSpec::Colocated && s.link.is_some() {
        return Err(Error::field("link", "not used when mode is \"colocated\" (there is no hand-off); remove it"));
    }
    let link = link(s.link)?;
    let compression = match format(&s.handoff.compression) {
        Some(f) if f.name == "none" => None,
        Some(f) => Some(f),
        None => {
            let known: Vec<_> = FORMATS.iter().map(|f| f.name).collect();
            return Err(Error::field(
                "handoff.compression",
                format!("unknown format {:?} (known: {})", s.handoff.compression, known.join(", ")),
            ));
        }
    };
    if compression.is_some() && mode == ModeSpec::Colocated {
        return Err(Error::field(
            "handoff.compression",
            "a colocated scenario has no hand-off to compress; use \"none\" or mode \"disaggregated\"",
        ));
    }

    let workload = workload(s.workload, requests)?;

    positive("slo.ttft_s", s.slo.ttft_s, false)?;
    positive("slo.tpot_s", s.slo.tpot_s, false)?;
    in_range("metrics.warmup_fraction", s.metrics.warmup_fraction, 0.0, 1.0, true, false)?;
    if s.scheduler.max_prefill_tokens == 0 {
        return Err(Error::field("scheduler.max_prefill_tokens", "must be ≥ 1"));
    }
    if s.scheduler.max_decode_batch == 0 {
        return Err(Error::field("scheduler.max_decode_batch", "must be ≥ 1"));
    }
    Ok(Scenario {
        model,
        topology,
        link,
        compression,
        workload,
        ttft_slo_s: s.slo.ttft_s,
        tpot_slo_s: s.slo.tpot_s,
        warmup_fraction: s.metrics.warmup_fraction,
        lm_head,
        roofline: RooflineParams {
            step_overhead_s: s.cost.step_overhead_s,
            enforce_tdp: s.cost.enforce_tdp,
            dvfs: s.cost.dvfs,
            s_min: s.cost.s_min,
        },
        mem_util,
        max_prefill_tokens: s.scheduler.max_prefill_tokens,
        max_decode_batch: s.scheduler.max_decode_batch,
        prefill_routing: match s.router.prefill {
            PrefillRouterSpec::LeastQueuedTokens => PrefillRouting::LeastQueuedTokens,
            PrefillRouterSpec::RoundRobin => PrefillRouting::RoundRobin,
        },
        decode_routing: load_routing(s.router.decode),
        colocated_routing: load_routing(s.router.colocated),
        macro_steps: s.engine.macro_steps,
    })
}

fn load_routing(r: LoadRouterSpec) -> LoadRouting {
    match r {
        LoadRouterSpec::LeastLoaded => LoadRouting::LeastLoaded,
        LoadRouterSpec::RoundRobin => LoadRouting::RoundRobin,
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
    positive("model.weight_bytes_per_param", m.weight_bytes_per_param, false)?;
    positive("model.kv_bytes_per_value", m.kv_bytes_per_value, false)
}

fn check_device(d: &DeviceSpec, path: &str) -> Result<()> {
    for (name, v) in
        [("peak_tflops", d.peak_tflops), ("hbm_tb_per_s", d.hbm_tb_per_s), ("hbm_gb", d.hbm_gb), ("tdp_w", d.tdp_w)]
    {
        positive(&format!("{path}.{name}"), v, false)?;
    }
    in_range(&format!("{path}.flops_eff"), d.flops_eff, 0.0, 1.0, false, true)?;
    in_range(&format!("{path}.bw_eff"), d.bw_eff, 0.0, 1.0, false, true)?;
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
) -> Result<Pool> {
    let p = p.unwrap_or(PoolSpec {
        device: Value::String("h100".into()),
        instances: None,
        devices_per_instance: 1,
        power_cap_w: None,
    });
    let dpath = format!("{path}.device");
    let device = resolve_preset::<DeviceSpec>(&p.device, &dpath, "device", &device_presets())?;
    check_device(&device.spec, &dpath)?;
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
    if let Err(usable) = kv_capacity_tokens(
        &device.spec,
        p.devices_per_instance,
        mem_util,
        cost.resident_weight_bytes(),
        cost.kv_bytes_per_token,
    ) {
        return Err(Error::DoesNotFit {
            path: path.to_string(),
            model: model.spec.name.clone(),
            device: device.spec.name.clone(),
            devices: p.devices_per_instance,
            weights_gb: cost.resident_weight_bytes() / 1e9,
            usable_gb: usable / 1e9,
            hbm_gb: device.spec.hbm_gb * p.devices_per_instance as f64,
            mem_util,
        });
    }
    Ok(Pool { device, instances, devices_per_instance: p.devices_per_instance, power_cap_w: p.power_cap_w })
}

fn link(v: Option<Value>) -> Result<Link> {
    let v = v.unwrap_or_else(|| Value::String("ib-ndr".into()));
    let (preset_value, channels) = match v {
        Value::Object(mut obj) => {
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
    let spec = resolve_preset::<LinkSpec>(&preset_value, "link", "link", &link_presets())?;
    positive("link.bandwidth_gb_per_s", spec.spec.bandwidth_gb_per_s, false)?;
    positive("link.latency_us", spec.spec.latency_us, true)?;
    positive("link.pj_per_bit", spec.spec.pj_per_bit, true)?;
    Ok(Link { spec, channels })
}

fn workload(w: super::spec::WorkloadSpec, requests: Option<Trace>) -> Result<Workload> {
    let generator_fields = [
        ("workload.requests", w.requests.is_some()),
        ("workload.seed", w.seed.is_some()),
        ("workload.arrivals", w.arrivals.is_some()),
        ("workload.prompt_tokens", w.prompt_tokens.is_some()),
        ("workload.output_tokens", w.output_tokens.is_some()),
    ];
    let explicit = match (requests, w.trace) {
        (Some(_), Some(_)) => {
            return Err(Error::field("workload.trace", "a request table was passed as well: give the requests once"))
        }
        (Some(t), None) => Some((t, "requests")),
        (None, Some(ts)) => Some((
            Trace::from_columns(
                "workload.trace",
                &ts.arrival_s,
                &ts.prompt_tokens.iter().map(|&x| x as i64).collect::<Vec<_>>(),
                &ts.output_tokens.iter().map(|&x| x as i64).collect::<Vec<_>>(),
            )?,
            "workload.trace",
        )),
        (None, None) => None,
    };
    if let Some((trace, source)) = explicit {
        if let Some((field, _)) = generator_fields.iter().find(|(_, given)| *given) {
            return Err(Error::field(
                *field,
                format!("not used with explicit requests ({source}); remove it or drop the request table"),
            ));
        }
        return Ok(Workload::Trace(trace));
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
    Ok(Workload::Generated { requests: requests as usize, seed: w.seed.unwrap_or(1), arrivals, prompt, output })
}

fn arrivals(a: ArrivalSpec) -> Result<Arrivals> {
    positive("workload.arrivals.rate_per_s", a.rate_per_s, false)?;
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
