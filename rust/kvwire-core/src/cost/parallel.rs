//! Parallelism inside an instance: the collectives of tensor, pipeline and expert parallelism and the
//! costs of attention data parallelism, priced per step on the roofline (`docs/concepts/parallelism.md`).
//!
//! An instance of `tp × pp × dp` devices runs every layer's matmuls split over its TP ranks, its layers split
//! over PP stages, its sequences split over DP ranks and its routed experts spread over EP ranks. The
//! roofline already divides a step's FLOPs and bytes over all the instance's devices; what parallelism adds,
//! and this module prices, is:
//!
//! * **collectives** (closed forms below, each on the link of the group it spans): two TP all-reduces per
//!   layer (after attention and after the MLP, Megatron-LM's layout), EP dispatch and combine all-to-alls per
//!   MoE layer, one PP hand-over of the activations between consecutive stages;
//! * **the pipeline**: one batch passes the stages in turn, so a step takes `pp` stage times (the roofline
//!   time of the whole instance × pp). With `micro_batches` = m > 1 the step's sequences are split into
//!   m' = min(m, rows) groups kept in flight together (vLLM's virtual engines, SGLang's PP micro-batches):
//!   each stage passes each group in turn, so every sequence gets its token once per
//!   max(pp, m') × (τ + c/pp), where τ is one stage's roofline time for one group (its share of the FLOPs, KV
//!   and activations, and the stage's non-expert weights read again for every group) and c one group's
//!   collectives ([`ParallelCost::groups`], `docs/concepts/parallelism.md`);
//! * **replication**: under attention DP every DP rank holds and reads its own copy of the non-expert weights;
//!   with fewer KV heads than TP ranks the KV cache is replicated (each rank holds at least one head);
//! * **expert imbalance**: the busiest expert sets the MoE layers' time: the routed experts' FLOPs are
//!   charged `expert_imbalance` times.
//!
//! Collective energy is not charged (the links' pJ/bit apply to the KV hand-off only).

use super::model::{ModelCost, StepWork};

/// One device's bandwidth and message latency on a network.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Fabric {
    /// One direction, per device, B/s.
    pub bytes_per_s: f64,
    /// Per-message latency α, s.
    pub alpha_s: f64,
}

/// Ring all-reduce of `bytes` per rank over `n` ranks: 2(n−1)/n · S/B + 2(n−1)·α (a reduce-scatter then an
/// all-gather, each n−1 steps of S/n; Patarasuk & Yuan, "Bandwidth optimal all-reduce algorithms for
/// clusters of workstations", JPDC 69(2), 2009; NCCL's ring algorithm).
pub fn ring_all_reduce_s(bytes: f64, n: u32, f: Fabric) -> f64 {
    if n <= 1 {
        return 0.0;
    }
    let k = (n - 1) as f64;
    2.0 * k / n as f64 * bytes / f.bytes_per_s + 2.0 * k * f.alpha_s
}

/// All-to-all of `bytes` per rank over `n` ranks by pairwise exchange: each rank keeps 1/n of its data and
/// sends (n−1)/n of it in n−1 messages: (n−1)/n · S/B + (n−1)·α (Thakur, Rabenseifner & Gropp,
/// "Optimization of collective communication operations in MPICH", IJHPCA 19(1), 2005).
pub fn all_to_all_s(bytes: f64, n: u32, f: Fabric) -> f64 {
    if n <= 1 {
        return 0.0;
    }
    let k = (n - 1) as f64;
    k / n as f64 * bytes / f.bytes_per_s + k * f.alpha_s
}

/// One point-to-point message of `bytes`: S/B + α.
pub fn send_s(bytes: f64, f: Fabric) -> f64 {
    bytes / f.bytes_per_s + f.alpha_s
}

/// The parallel layout of an instance.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    pub tp: u32,
    pub pp: u32,
    pub ep: u32,
    pub dp: u32,
}

impl Layout {
    /// Devices of one instance: tp × pp × dp (EP spreads experts over ranks that already exist).
    pub fn devices(&self) -> u32 {
        self.tp * self.pp * self.dp
    }
}

/// Bytes per activation value a collective moves (BF16).
pub const ACTIVATION_BYTES: f64 = 2.0;

/// The per-step costs of one instance's parallel layout, resolved once at validation.
#[derive(Clone, Debug, PartialEq)]
pub struct ParallelCost {
    pub layout: Layout,
    /// Link of the TP group, the EP group and the PP hand-over (scale-up when the group fits one domain).
    pub tp_fabric: Fabric,
    pub ep_fabric: Fabric,
    pub pp_fabric: Fabric,
    /// Busiest expert's load over the mean, ≥ 1.
    pub expert_imbalance: f64,
    /// Groups of sequences a step keeps in flight in the pipeline (1: one batch passes the stages in turn).
    pub micro_batches: u32,
    /// Non-expert weight bytes one pass reads over all DP ranks (read again by every micro-batch).
    pub weight_read_bytes: f64,
    /// Layers, MoE layers and activation bytes per token (hidden × [`ACTIVATION_BYTES`]).
    layers: f64,
    moe_layers: f64,
    act_bytes_per_token: f64,
    /// Extra bytes every step reads: the (dp − 1) extra copies of the non-expert weights.
    replicated_read_bytes: f64,
    /// Extra bytes per KV token read: (ρ − 1) · KV bytes per token, ρ the KV replication factor.
    kv_extra_bytes_per_token: f64,
    /// Extra FLOPs per token of the busiest expert: (imbalance − 1) · routed FLOPs per token.
    imbalance_flops_per_token: f64,
}

/// What one step's shape adds to its work, and its collectives.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct StepComm {
    pub extra_flops: f64,
    pub extra_bytes: f64,
    /// Σ collective times of the step (before overlap), s.
    pub collective_s: f64,
}

impl ParallelCost {
    /// The costs of `layout` for `model` (`kv_replication` = ρ ≥ 1, see [`kv_replication`]).
    pub fn new(
        layout: Layout,
        model: &ModelCost,
        kv_replication: f64,
        fabrics: (Fabric, Fabric, Fabric),
        expert_imbalance: f64,
    ) -> Self {
        let (layers, width) = model.layers_and_width();
        let moe = model.moe_layers() as f64;
        ParallelCost {
            layout,
            tp_fabric: fabrics.0,
            ep_fabric: fabrics.1,
            pp_fabric: fabrics.2,
            expert_imbalance,
            micro_batches: 1,
            weight_read_bytes: layout.dp as f64 * model.fixed_read_bytes(),
            layers: layers as f64,
            moe_layers: moe,
            act_bytes_per_token: width as f64 * ACTIVATION_BYTES,
            replicated_read_bytes: (layout.dp - 1) as f64 * model.fixed_read_bytes(),
            kv_extra_bytes_per_token: (kv_replication - 1.0) * model.kv_bytes_per_token,
            imbalance_flops_per_token: if moe > 0.0 {
                (expert_imbalance - 1.0) * model.routed_flops_per_token()
            } else {
                0.0
            },
        }
    }

    /// TP all-reduce time of one layer's activations over `tokens` tokens (the tokens of one DP rank).
    pub fn tp_all_reduce_s(&self, tokens: f64) -> f64 {
        ring_all_reduce_s(tokens * self.act_bytes_per_token, self.layout.tp, self.tp_fabric)
    }

    /// One EP all-to-all (dispatch or combine) of one MoE layer: each of the ep ranks sends its 1/ep share of
    /// the `tokens`' activations.
    pub fn ep_all_to_all_s(&self, tokens: f64) -> f64 {
        let per_rank = tokens / self.layout.ep as f64 * self.act_bytes_per_token;
        all_to_all_s(per_rank, self.layout.ep, self.ep_fabric)
    }

    /// The same costs with `m` micro-batches in flight in the pipeline (m ≥ 1).
    pub fn with_micro_batches(mut self, m: u32) -> Self {
        self.micro_batches = m.max(1);
        self
    }

    /// Groups a step of `rows` sequences runs as in the pipeline: min(micro_batches, rows), at least 1.
    pub fn groups(&self, rows: u64) -> u32 {
        (self.micro_batches as u64).min(rows).max(1) as u32
    }

    /// A step over `tokens` tokens (prompt tokens computed, plus one per decoding sequence) reading
    /// `ctx_tokens` tokens of KV.
    pub fn step(&self, tokens: u64, ctx_tokens: u64) -> StepComm {
        let extra = self.extra_work(tokens, ctx_tokens);
        StepComm { extra_flops: extra.flops, extra_bytes: extra.bytes, collective_s: self.collective_s(tokens as f64) }
    }

    /// What a step over `tokens` tokens reading `ctx_tokens` of KV adds to its work (the busiest expert's
    /// FLOPs, the replicated reads), without its collectives.
    pub fn extra_work(&self, tokens: u64, ctx_tokens: u64) -> StepWork {
        StepWork {
            flops: tokens as f64 * self.imbalance_flops_per_token,
            bytes: self.replicated_read_bytes + ctx_tokens as f64 * self.kv_extra_bytes_per_token,
        }
    }

    /// Σ collective times of one pass over `t` tokens through every layer and stage (before overlap), s.
    pub fn collective_s(&self, t: f64) -> f64 {
        let lay = self.layout;
        let mut collective_s = 0.0;
        if lay.tp > 1 {
            // Each DP rank's TP group all-reduces its own tokens; the DP ranks run side by side.
            collective_s += 2.0 * self.layers * self.tp_all_reduce_s(t / lay.dp as f64);
        }
        if lay.ep > 1 && self.moe_layers > 0.0 {
            collective_s += 2.0 * self.moe_layers * self.ep_all_to_all_s(t);
        }
        if lay.pp > 1 {
            // One DP rank's activations cross each of the pp − 1 stage boundaries in turn.
            collective_s += (lay.pp - 1) as f64 * send_s(t / lay.dp as f64 * self.act_bytes_per_token, self.pp_fabric);
        }
        collective_s
    }
}

/// KV replication factor ρ of TP over `kv_heads` KV heads: every rank holds ⌈kv_heads / tp⌉ heads, so the
/// instance stores tp · ⌈kv_heads / tp⌉ / kv_heads copies of each head (1 when tp divides kv_heads, tp/kv_heads
/// when kv_heads < tp; MLA's one latent per token: tp).
pub fn kv_replication(kv_heads: u32, tp: u32) -> f64 {
    let per_rank = kv_heads.div_ceil(tp).max(1);
    (tp * per_rank) as f64 / kv_heads.max(1) as f64
}

/// Resident bytes and KV bytes per token of one rank, and the instance's KV capacity in tokens.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RankMemory {
    /// Weights resident on one rank, bytes.
    pub weight_bytes: f64,
    /// HBM one rank may use, bytes.
    pub usable_bytes: f64,
    /// KV bytes per token on one rank.
    pub kv_bytes_per_token: f64,
}

impl RankMemory {
    /// One rank's share: non-expert weights split over TP and PP (and replicated over DP), routed experts
    /// spread over all tp × pp × dp ranks, KV split over PP stages and TP heads (with replication ρ).
    pub fn new(hbm_bytes: f64, mem_util: f64, layout: Layout, model: &ModelCost, kv_replication: f64) -> Self {
        let experts = model.routed_expert_bytes();
        let dense = model.resident_weight_bytes() - experts;
        let split = (layout.tp * layout.pp) as f64;
        RankMemory {
            weight_bytes: dense / split + experts / layout.devices() as f64,
            usable_bytes: hbm_bytes * mem_util,
            kv_bytes_per_token: model.kv_bytes_per_token * kv_replication / split,
        }
    }

    /// KV capacity of the instance, tokens: dp × ⌊(usable − weights) / KV per token⌋ (`None`: nothing fits).
    pub fn capacity_tokens(&self, dp: u32) -> Option<u64> {
        let tokens = ((self.usable_bytes - self.weight_bytes) / self.kv_bytes_per_token).floor();
        (tokens >= 1.0).then(|| tokens as u64 * dp as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NV: Fabric = Fabric { bytes_per_s: 450e9, alpha_s: 5e-6 };

    /// An instance of TP 2 × PP 3 × DP 4 holds 24 devices, whatever its EP (the experts spread over ranks that
    /// already exist); TP 8 alone 8.
    #[test]
    fn devices_are_tp_times_pp_times_dp() {
        assert_eq!(Layout { tp: 2, pp: 3, ep: 8, dp: 4 }.devices(), 24);
        assert_eq!(Layout { tp: 8, pp: 1, ep: 1, dp: 1 }.devices(), 8);
    }

    /// The ring all-reduce's closed form at n = 2, 4, 8 (written out by hand, not through the function's own
    /// formula): n = 2 sends S/2 twice, n = 8 sends 7/8 · S twice, each step paying α.
    #[test]
    fn ring_all_reduce_closed_form() {
        let s = 16.0 * 1024.0 * 1024.0;
        assert_eq!(ring_all_reduce_s(s, 1, NV), 0.0);
        let want2 = 2.0 * (s / 2.0) / 450e9 + 2.0 * 5e-6;
        assert!((ring_all_reduce_s(s, 2, NV) - want2).abs() < 1e-15, "{}", ring_all_reduce_s(s, 2, NV));
        let want8 = 14.0 * (s / 8.0) / 450e9 + 14.0 * 5e-6;
        assert!((ring_all_reduce_s(s, 8, NV) - want8).abs() < 1e-15);
        let want4 = 6.0 * (s / 4.0) / 450e9 + 6.0 * 5e-6;
        assert!((ring_all_reduce_s(s, 4, NV) - want4).abs() < 1e-15);
    }

    /// All-to-all: 7 messages of S/8 at n = 8; point-to-point: S/B + α.
    #[test]
    fn all_to_all_and_send_closed_forms() {
        let s = 8e6;
        assert_eq!(all_to_all_s(s, 1, NV), 0.0);
        let want = 7.0 * (s / 8.0) / 450e9 + 7.0 * 5e-6;
        assert!((all_to_all_s(s, 8, NV) - want).abs() < 1e-15);
        assert_eq!(send_s(s, NV), s / 450e9 + 5e-6);
    }

    /// ρ: 8 KV heads over TP 4 → 1; over TP 16 → 2 (one head per rank); 1 latent (MLA) over TP 8 → 8; 8 heads
    /// over TP 3 → 9/8 (three heads per rank).
    #[test]
    fn kv_replication_factor() {
        assert_eq!(kv_replication(8, 1), 1.0);
        assert_eq!(kv_replication(8, 4), 1.0);
        assert_eq!(kv_replication(8, 8), 1.0);
        assert_eq!(kv_replication(8, 16), 2.0);
        assert_eq!(kv_replication(1, 8), 8.0);
        assert_eq!(kv_replication(8, 3), 9.0 / 8.0);
    }
}
