//! `parallel` of a pool: checked against the model and the device, resolved once into the pool's
//! [`ParallelCost`] (collectives on the device's scale-up fabric or the scale-out network) and the per-rank
//! memory fit.

use super::spec::ParallelSpec;
use crate::cost::model::ModelCost;
use crate::cost::parallel::{kv_replication, Fabric, Layout, ParallelCost, RankMemory};
use crate::cost::presets::{link_presets, AttentionKind, DeviceSpec, ModelSpec};
use crate::error::{Error, Result};
use crate::limits::MAX_DEVICES_PER_INSTANCE;

/// A pool's resolved parallel layout: the spec as given (for the echo) and what it costs.
#[derive(Clone, Debug, PartialEq)]
pub struct PoolParallel {
    pub spec: ParallelSpec,
    pub cost: ParallelCost,
    /// KV replication factor ρ of the TP split.
    pub kv_replication: f64,
}

impl PoolParallel {
    pub fn layout(&self) -> Layout {
        self.cost.layout
    }

    /// One rank's memory on `dev` with `mem_util` of its HBM.
    pub fn rank_memory(&self, dev: &DeviceSpec, mem_util: f64, model: &ModelCost) -> RankMemory {
        RankMemory::new(dev.hbm_gb * 1e9, mem_util, self.layout(), model, self.kv_replication)
    }
}

/// The KV heads tensor parallelism splits: the model's KV heads, or MLA's one latent per token.
pub(super) fn split_kv_heads(model: &ModelSpec) -> u32 {
    if model.attention == AttentionKind::Mla {
        1
    } else {
        model.kv_heads
    }
}

fn link_fabric(key: &str, path: &str) -> Result<Fabric> {
    let presets = link_presets();
    match presets.iter().find(|(k, _)| *k == key) {
        Some((_, l)) => Ok(Fabric { bytes_per_s: l.bandwidth_gb_per_s * 1e9, alpha_s: l.latency_us * 1e-6 }),
        None => {
            let known: Vec<_> = presets.iter().map(|(k, _)| *k).collect();
            Err(Error::field(path, format!("unknown link preset {key:?} (known: {})", known.join(", "))))
        }
    }
}

/// The device's scale-up fabric and domain size.
fn scale_up(dev: &DeviceSpec, dpath: &str) -> Result<(Fabric, u32)> {
    let Some(su) = &dev.scale_up else {
        return Err(Error::field(
            format!("{dpath}.scale_up"),
            format!(
                "device {:?} has no scale-up fabric, so its collectives cannot be priced: give {dpath}.scale_up = \
                 {{\"domain\": 8, \"link\": \"nvlink4\"}} (or bandwidth_gb_per_s and latency_us), or drop parallel",
                dev.name
            ),
        ));
    };
    let spath = format!("{dpath}.scale_up");
    if su.domain == 0 || su.domain > MAX_DEVICES_PER_INSTANCE {
        return Err(Error::field(
            format!("{spath}.domain"),
            format!("must be in [1, {MAX_DEVICES_PER_INSTANCE}], got {}", su.domain),
        ));
    }
    let mut f = match &su.link {
        Some(key) => link_fabric(key, &format!("{spath}.link"))?,
        None => Fabric { bytes_per_s: f64::NAN, alpha_s: f64::NAN },
    };
    if let Some(bw) = su.bandwidth_gb_per_s {
        f.bytes_per_s = bw * 1e9;
    }
    if let Some(us) = su.latency_us {
        f.alpha_s = us * 1e-6;
    }
    if !(f.bytes_per_s.is_finite() && f.bytes_per_s >= 1e6) {
        return Err(Error::field(
            format!("{spath}.bandwidth_gb_per_s"),
            "give a link preset (link) or a finite bandwidth_gb_per_s of at least 0.001 GB/s",
        ));
    }
    if !(f.alpha_s.is_finite() && f.alpha_s >= 0.0) {
        return Err(Error::field(
            format!("{spath}.latency_us"),
            "give a link preset (link) or a finite latency_us ≥ 0",
        ));
    }
    Ok((f, su.domain))
}

/// The most micro-batches a pipeline may keep in flight.
pub const MAX_MICRO_BATCHES: u32 = 1024;

fn count(path: &str, v: u32) -> Result<()> {
    if v == 0 || v > MAX_DEVICES_PER_INSTANCE {
        return Err(Error::field(path, format!("must be an integer in [1, {MAX_DEVICES_PER_INSTANCE}], got {v}")));
    }
    Ok(())
}

/// Check `spec` (at `path` = `<pool>.parallel`) and resolve it. `Ok(None)`: every degree is 1, which is the
/// pool without `parallel` exactly.
pub(super) fn resolve(
    spec: &ParallelSpec,
    path: &str,
    model: &ModelSpec,
    cost: &ModelCost,
    dev: &DeviceSpec,
    dpath: &str,
) -> Result<Option<PoolParallel>> {
    for (name, v) in [("tp", spec.tp), ("pp", spec.pp), ("ep", spec.ep), ("dp", spec.dp)] {
        count(&format!("{path}.{name}"), v)?;
    }
    let devices = spec.tp as u64 * spec.pp as u64 * spec.dp as u64;
    if devices > MAX_DEVICES_PER_INSTANCE as u64 {
        return Err(Error::field(
            path,
            format!("tp × pp × dp = {devices} devices per instance, more than the {MAX_DEVICES_PER_INSTANCE} allowed"),
        ));
    }
    let mb = spec.micro_batches;
    if mb == 0 || mb > MAX_MICRO_BATCHES {
        return Err(Error::field(
            format!("{path}.micro_batches"),
            format!("must be an integer in [1, {MAX_MICRO_BATCHES}], got {mb}"),
        ));
    }
    if mb > 1 && spec.pp == 1 {
        return Err(Error::field(
            format!("{path}.micro_batches"),
            format!("micro-batches fill a pipeline: they need pp > 1 (got micro_batches = {mb} with pp = 1)"),
        ));
    }
    let imb = spec.expert_imbalance;
    if !(imb.is_finite() && (1.0..=1e3).contains(&imb)) {
        return Err(Error::field(
            format!("{path}.expert_imbalance"),
            format!("must be a number in [1, 1000] (the busiest expert's load over the mean), got {imb}"),
        ));
    }
    let moe = model.n_experts > 0 && cost.moe_layers() > 0;
    if !moe && (spec.ep > 1 || imb != 1.0) {
        let field = if spec.ep > 1 { "ep" } else { "expert_imbalance" };
        return Err(Error::field(
            format!("{path}.{field}"),
            format!("model {:?} has no routed experts: expert parallelism does not apply", model.name),
        ));
    }
    if model.heads % spec.tp != 0 {
        return Err(Error::field(
            format!("{path}.tp"),
            format!("must divide the model's {} attention heads, got {}", model.heads, spec.tp),
        ));
    }
    if spec.pp > model.layers {
        return Err(Error::field(
            format!("{path}.pp"),
            format!("at most the model's {} layers, got {}", model.layers, spec.pp),
        ));
    }
    if moe && spec.ep > 1 {
        if (spec.tp * spec.dp) % spec.ep != 0 {
            return Err(Error::field(
                format!("{path}.ep"),
                format!(
                    "must divide tp × dp = {} (the ranks of one stage the experts are spread over), got {}",
                    spec.tp * spec.dp,
                    spec.ep
                ),
            ));
        }
        if spec.ep > model.n_experts {
            return Err(Error::field(
                format!("{path}.ep"),
                format!("at most the model's {} routed experts, got {}", model.n_experts, spec.ep),
            ));
        }
    }
    if spec.tp == 1 && spec.pp == 1 && spec.ep == 1 && spec.dp == 1 && imb == 1.0 {
        return Ok(None);
    }
    let (up, domain) = scale_up(dev, dpath)?;
    let out = link_fabric(&spec.scale_out, &format!("{path}.scale_out"))?;
    let on = |group: u32| if group <= domain { up } else { out };
    let rho = kv_replication(split_kv_heads(model), spec.tp);
    let layout = Layout { tp: spec.tp, pp: spec.pp, ep: spec.ep, dp: spec.dp };
    let cost =
        ParallelCost::new(layout, cost, rho, (on(spec.tp), on(spec.ep), on(layout.devices())), spec.expert_imbalance)
            .with_micro_batches(mb);
    Ok(Some(PoolParallel { spec: spec.clone(), cost, kv_replication: rho }))
}

/// The memory-fit error of a parallel layout that leaves no room for KV on a rank, naming the smallest TP
/// (same pp, ep, dp) that fits, if any.
pub(super) fn does_not_fit(
    lay: Layout,
    path: &str,
    model: &ModelSpec,
    cost: &ModelCost,
    dev: &DeviceSpec,
    mem_util: f64,
) -> Error {
    let kv_heads = split_kv_heads(model);
    let memory = |l: Layout| RankMemory::new(dev.hbm_gb * 1e9, mem_util, l, cost, kv_replication(kv_heads, l.tp));
    let m = memory(lay);
    let fits = |tp: u32| {
        let l = Layout { tp, ..lay };
        l.devices() <= MAX_DEVICES_PER_INSTANCE
            && model.heads % tp == 0
            && (tp * lay.dp) % lay.ep == 0
            && memory(l).capacity_tokens(lay.dp).is_some()
    };
    let advice = match (lay.tp + 1..=MAX_DEVICES_PER_INSTANCE).find(|&tp| fits(tp)) {
        Some(tp) => format!("the smallest tp that fits is {tp} (--set {path}.tp={tp})"),
        None => format!(
            "no tp up to {MAX_DEVICES_PER_INSTANCE} devices per instance fits at pp = {}: raise pp, or use a larger \
             device",
            lay.pp
        ),
    };
    Error::field(
        format!("{path}.tp"),
        format!(
            "model {:?} does not fit with tp = {}, pp = {}, ep = {}, dp = {} on {:?}: {:.1} GB of weights per rank \
             against {:.1} GB usable ({mem_util} of {:.1} GB); {advice}",
            model.name,
            lay.tp,
            lay.pp,
            lay.ep,
            lay.dp,
            dev.name,
            m.weight_bytes / 1e9,
            m.usable_bytes / 1e9,
            dev.hbm_gb
        ),
    )
}
