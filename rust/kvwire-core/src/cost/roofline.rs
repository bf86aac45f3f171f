//! From FLOPs and bytes to step time and energy: the roofline with derated rates, optional DVFS, the power
//! roof (TDP or a pool power cap) and the fixed per-step overhead (`spec/simulator.md` (b)).

use super::model::{Chunks, ModelCost, StepWork};
use super::parallel::ParallelCost;
use super::presets::DeviceSpec;
use super::table::{Hints, Shape, StepTable};

/// What set a step's duration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bound {
    Compute,
    Memory,
    /// The power budget stretched the step.
    Power,
}

/// Duration and dynamic energy of one step.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct StepTiming {
    /// Step time including the fixed overhead, s.
    pub time_s: f64,
    /// Compute energy (after any clock scaling), J.
    pub compute_j: f64,
    /// HBM energy, J.
    pub memory_j: f64,
    pub bound: Bound,
    /// Collective time in `time_s` not hidden under compute, s (0 without a parallel layout; the timeline's
    /// collective spans).
    pub comm_s: f64,
}

/// Cost-model switches shared by every pool.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RooflineParams {
    /// Fixed time added to every step, s.
    pub step_overhead_s: f64,
    /// Enforce the board TDP as a power roof.
    pub enforce_tdp: bool,
    /// Scale the compute clock down on memory-bound steps.
    pub dvfs: bool,
    /// Lowest clock fraction.
    pub s_min: f64,
    /// Share of collective time hidden under compute, in [0, 1] (instances with a parallel layout).
    pub comm_overlap: f64,
}

/// The step timer of one instance: `n` devices of one kind acting as one.
#[derive(Clone, Debug, PartialEq)]
pub struct StepTimer {
    rate_flops: f64,
    rate_bytes: f64,
    /// 1 / rate: a step's times are products (a division per step was ~10% of a million-request run).
    inv_rate_flops: f64,
    inv_rate_bytes: f64,
    j_per_flop: f64,
    j_per_byte: f64,
    /// Dynamic power budget of the instance, W (`None`: no power roof).
    budget_w: Option<f64>,
    p: RooflineParams,
    /// A parallel layout and/or a measured table (`None`: the plain roofline, its devices acting as one; one
    /// test on the hot path, as before either existed).
    special: Option<Box<Special>>,
    /// Σ collective time the steps timed here could not hide under compute, s (0 without a layout): kept
    /// here, not in each [`StepTiming`], so that the default path carries nothing for it.
    comm_s: std::cell::Cell<f64>,
}

/// What a timer adds to the plain roofline: a parallel layout's collectives, a measured table (with the
/// segments of its last lookups).
#[derive(Clone, Debug, Default, PartialEq)]
struct Special {
    par: Option<ParallelCost>,
    table: Option<std::sync::Arc<StepTable>>,
    hints: std::cell::Cell<Hints>,
}

impl StepTimer {
    /// Timer for an instance of `devices` × `dev`, with an optional per-device power cap (W).
    pub fn new(dev: &DeviceSpec, devices: u32, power_cap_w: Option<f64>, p: RooflineParams) -> Self {
        let n = devices as f64;
        let limit = match (power_cap_w, p.enforce_tdp) {
            (Some(cap), true) => Some(cap.min(dev.tdp_w)),
            (Some(cap), false) => Some(cap),
            (None, true) => Some(dev.tdp_w),
            (None, false) => None,
        };
        let rate_flops = dev.peak_tflops * 1e12 * dev.flops_eff * n;
        let rate_bytes = dev.hbm_tb_per_s * 1e12 * dev.bw_eff * n;
        StepTimer {
            rate_flops,
            rate_bytes,
            inv_rate_flops: 1.0 / rate_flops,
            inv_rate_bytes: 1.0 / rate_bytes,
            j_per_flop: dev.pj_per_flop * 1e-12,
            j_per_byte: dev.pj_per_byte * 1e-12,
            budget_w: limit.map(|w| (w - dev.idle_w) * n),
            p,
            special: None,
            comm_s: std::cell::Cell::new(0.0),
        }
    }

    /// Σ collective time not hidden under compute over the steps timed with [`Self::step`], s.
    pub fn comm_s(&self) -> f64 {
        self.comm_s.get()
    }

    /// The same timer charging the collectives, pipeline and replication of a parallel layout.
    pub fn with_parallel(mut self, par: Option<ParallelCost>) -> Self {
        if let Some(par) = par {
            self.special.get_or_insert_with(Box::default).par = Some(par);
        }
        self
    }

    /// The same timer reading step times from `table` (a measured source): it replaces the roofline's time
    /// and any layout's collectives and pipeline (the provider measured the layout), and keeps the roofline's
    /// dynamic energy for the step's FLOPs and bytes ([`Self::table_step`]).
    pub fn with_table(mut self, table: Option<std::sync::Arc<StepTable>>) -> Self {
        if let Some(table) = table {
            self.special.get_or_insert_with(Box::default).table = Some(table);
        }
        self
    }

    /// Time and energy of a step doing `w` in the shape `s`. Without a parallel layout or a table this is
    /// [`Self::time`]; with a layout, the step's extra work (replicated reads, the busiest expert) is added over
    /// its tokens (prompt tokens computed plus one per decoding sequence) and KV read, the roofline time is
    /// stretched over the `pp` stages a batch passes in turn, and the collectives not hidden under compute
    /// (`1 − comm_overlap` of them) are added; with a table, [`Self::table_step`].
    /// (Always inlined, as [`Self::time`]: it is most of a decode step's arithmetic, and without a layout it must
    /// cost what `time` alone did.)
    #[inline(always)]
    pub fn step(&self, w: StepWork, s: Shape) -> StepTiming {
        match self.special.as_deref() {
            None => self.time(w),
            Some(sp) => self.special_step(sp, w, s),
        }
    }

    /// [`Self::step`] of a decode step of `rows` sequences reading `ctx` KV tokens (`Shape::decode`), its
    /// shape passed as two numbers: the plain path then builds no shape at all (a decode step's shape written
    /// to the stack for a call that never happens was 0.8% of a default run's instructions).
    #[inline(always)]
    pub fn decode_step(&self, w: StepWork, rows: u64, ctx: u64) -> StepTiming {
        match self.special.as_deref() {
            None => self.time(w),
            Some(sp) => self.special_decode(sp, w, rows, ctx),
        }
    }

    #[cold]
    #[inline(never)]
    fn special_decode(&self, sp: &Special, w: StepWork, rows: u64, ctx: u64) -> StepTiming {
        if let Some(table) = sp.table.as_deref() {
            let mut hints = sp.hints.get();
            let time_s = table.decode_s(rows, ctx, &mut hints);
            sp.hints.set(hints);
            return self.measured(time_s, w);
        }
        self.special_step(sp, w, Shape::decode(rows, ctx))
    }

    #[cold]
    #[inline(never)]
    fn special_step(&self, sp: &Special, w: StepWork, s: Shape) -> StepTiming {
        if let Some(table) = sp.table.as_deref() {
            let mut hints = sp.hints.get();
            let t = self.table_step(table, &mut hints, w, s);
            sp.hints.set(hints);
            return t;
        }
        match sp.par.as_ref() {
            Some(par) if par.micro_batches > 1 => {
                self.micro_batched_step(par, w, s.tokens(), s.ctx_tokens(), s.prefill_seqs + s.decode_rows)
            }
            Some(par) => self.parallel_step(par, w, s.tokens(), s.ctx_tokens()),
            None => self.time(w),
        }
    }

    /// A measured step: its time from the table (no step overhead added: the measurement holds the engine's),
    /// its dynamic energy the roofline's for its FLOPs and bytes at full clock (pJ/FLOP and pJ/byte of the
    /// device), so a step's mean power is that energy over the measured time; no power roof stretches it (the
    /// measurement ran at the clocks the device chose). `bound` says which roof the roofline would have hit.
    pub fn table_step(&self, table: &StepTable, hints: &mut Hints, w: StepWork, s: Shape) -> StepTiming {
        self.measured(table.time_s_hinted(s, hints), w)
    }

    /// A step of `w` that took `time_s` by measurement ([`Self::table_step`]).
    fn measured(&self, time_s: f64, w: StepWork) -> StepTiming {
        let t_c = w.flops * self.inv_rate_flops;
        let t_m = w.bytes * self.inv_rate_bytes;
        StepTiming {
            time_s,
            compute_j: w.flops * self.j_per_flop,
            memory_j: w.bytes * self.j_per_byte,
            bound: if t_c >= t_m { Bound::Compute } else { Bound::Memory },
            comm_s: 0.0,
        }
    }

    #[cold]
    #[inline(never)]
    fn parallel_step(&self, par: &ParallelCost, w: StepWork, tokens: u64, ctx_tokens: u64) -> StepTiming {
        let c = par.step(tokens, ctx_tokens);
        let work = StepWork { flops: w.flops + c.extra_flops, bytes: w.bytes + c.extra_bytes };
        let mut t = self.time(work);
        let pp = par.layout.pp as f64;
        let exposed = c.collective_s * (1.0 - self.p.comm_overlap);
        t.time_s = (t.time_s - self.p.step_overhead_s) * pp + self.p.step_overhead_s + exposed;
        self.comm_s.set(self.comm_s.get() + exposed);
        t.comm_s = exposed;
        t
    }

    /// [`Self::parallel_step`] with micro-batches in flight in the pipeline: the step's `rows` sequences run
    /// as g = [`ParallelCost::groups`] groups; one group's stage pass takes τ, the stage time of its share of
    /// the work (1/g of the FLOPs and of the bytes other than the non-expert weights, which every group reads
    /// again), and its collectives c are those of a pass over 1/g of the tokens. Each stage passes each group
    /// in turn and each group passes the stages in turn, so every sequence gets its token after
    /// max(pp, g) × (τ + (1 − comm_overlap) · c / pp), plus the step overhead once. With g = 1 this is
    /// `parallel_step` (pp × τ + exposed c). The energy is that of the whole step's work, the weights read g
    /// times.
    #[cold]
    #[inline(never)]
    fn micro_batched_step(
        &self,
        par: &ParallelCost,
        w: StepWork,
        tokens: u64,
        ctx_tokens: u64,
        rows: u64,
    ) -> StepTiming {
        let groups = par.groups(rows);
        if groups == 1 {
            return self.parallel_step(par, w, tokens, ctx_tokens);
        }
        let g = groups as f64;
        let extra = par.extra_work(tokens, ctx_tokens);
        let total = StepWork { flops: w.flops + extra.flops, bytes: w.bytes + extra.bytes };
        let weights = par.weight_read_bytes.min(total.bytes);
        let group = StepWork { flops: total.flops / g, bytes: weights + (total.bytes - weights) / g };
        let tau = self.time(group).time_s - self.p.step_overhead_s;
        let pp = par.layout.pp as f64;
        let slots = pp.max(g);
        let exposed = slots * par.collective_s(tokens as f64 / g) * (1.0 - self.p.comm_overlap) / pp;
        let mut t = self.time(StepWork { flops: total.flops, bytes: total.bytes + (g - 1.0) * weights });
        t.time_s = slots * tau + exposed + self.p.step_overhead_s;
        self.comm_s.set(self.comm_s.get() + exposed);
        t.comm_s = exposed;
        t
    }

    /// Dynamic power budget, W, if a power roof applies.
    pub fn budget_w(&self) -> Option<f64> {
        self.budget_w
    }

    /// Time and energy of a step doing `w`.
    #[inline(always)]
    pub fn time(&self, w: StepWork) -> StepTiming {
        let t_c = w.flops * self.inv_rate_flops;
        let t_m = w.bytes * self.inv_rate_bytes;
        let mut e_c = w.flops * self.j_per_flop;
        let e_m = w.bytes * self.j_per_byte;
        let mut bound = if t_c >= t_m { Bound::Compute } else { Bound::Memory };
        // Common case, full clock: no DVFS slow-down and under the power budget. Identical to the general
        // path below with s = 1 (t_c / 1 = t_c and E_c · 1² = E_c exactly), without its divisions.
        let t_full = t_c.max(t_m);
        let slow_clock = self.p.dvfs && t_m > t_c;
        if !slow_clock && self.budget_w.is_none_or(|budget| e_c + e_m <= budget * t_full) {
            return StepTiming {
                time_s: t_full + self.p.step_overhead_s,
                compute_j: e_c,
                memory_j: e_m,
                bound,
                comm_s: 0.0,
            };
        }
        let mut s = 1.0_f64;
        if slow_clock {
            s = self.p.s_min.max(t_c / t_m);
        }
        if let Some(budget) = self.budget_w {
            // power > budget, written without a division on the common (unthrottled) path.
            if e_c * s * s + e_m > budget * (t_c / s).max(t_m) {
                bound = Bound::Power;
                let x = (budget * t_m - e_m) / e_c;
                s = if x > 0.0 && x.sqrt() * t_m >= t_c {
                    // Slow the clock while memory still sets the time.
                    x.sqrt()
                } else {
                    // Compute-bound under the cap: E_c·s³ + E_m·s = budget·t_c (one real root, Cardano).
                    cubic_root_depressed(e_m / e_c, -budget * t_c / e_c)
                };
                s = s.max(self.p.s_min);
            }
        }
        let mut t = (t_c / s).max(t_m);
        e_c *= s * s;
        if let Some(budget) = self.budget_w {
            if e_c + e_m > budget * t {
                t = (e_c + e_m) / budget;
            }
        }
        StepTiming { time_s: t + self.p.step_overhead_s, compute_j: e_c, memory_j: e_m, bound, comm_s: 0.0 }
    }
}

impl StepTimer {
    /// Add an element-wise pass (compression, decompression, layout conversion, a draft pass) to a step doing
    /// `work` in `timing`: it runs after the step's matmuls, with no overhead and no power roof ([`Self::pass`]),
    /// its energy charged to the instance.
    #[inline]
    pub fn add_pass(&self, pass: StepWork, work: &mut StepWork, timing: &mut StepTiming) {
        let p = self.pass(pass);
        timing.time_s += p.time_s;
        timing.compute_j += p.compute_j;
        timing.memory_j += p.memory_j;
        work.flops += pass.flops;
        work.bytes += pass.bytes;
    }

    /// A speculative-decoding step over `b` sequences holding `ctx` tokens of context: the verify pass of
    /// `target` over γ + 1 positions per sequence ([`Self::step`]) and γ decode passes of `draft` at the growing
    /// context ([`Self::add_pass`]: no overhead). Returns the step's work and timing, and the draft passes'
    /// time, s. (The engine's step and the ceilings' both, so that the two cannot differ.)
    pub fn speculative_step(
        &self,
        target: &ModelCost,
        draft: &ModelCost,
        gamma: u32,
        ctx: u64,
        b: u64,
    ) -> (StepWork, StepTiming, f64) {
        self.speculative_pass(target, draft, gamma, ctx, b, Chunks::default(), Shape::decode(b, ctx))
    }

    /// [`Self::speculative_step`] beside prompt chunks (a mixed step of chunked prefill or of a re-prefill):
    /// the `rows` decode rows verify γ + 1 positions each in the pass with the chunks
    /// ([`ModelCost::mixed_verify`], timed as `shape` with γ + 1 rows per decode row), then the γ draft passes.
    #[allow(clippy::too_many_arguments)]
    pub fn speculative_pass(
        &self,
        target: &ModelCost,
        draft: &ModelCost,
        gamma: u32,
        ctx: u64,
        rows: u64,
        chunks: Chunks,
        shape: Shape,
    ) -> (StepWork, StepTiming, f64) {
        let mut work = target.mixed_verify(ctx, rows, gamma, chunks);
        let mut timing = self.step(work, Shape { decode_rows: rows * (gamma as u64 + 1), ..shape });
        let draft_s = self.add_drafts(draft, gamma, ctx, rows, &mut work, &mut timing);
        (work, timing, draft_s)
    }

    /// Add the γ draft passes of a speculative step over `b` sequences holding `ctx` tokens (decode passes of
    /// `draft` at the growing context, [`Self::add_pass`]) to a step doing `work` in `timing`; returns their
    /// time, s.
    pub fn add_drafts(
        &self,
        draft: &ModelCost,
        gamma: u32,
        ctx: u64,
        b: u64,
        work: &mut StepWork,
        timing: &mut StepTiming,
    ) -> f64 {
        let before = timing.time_s;
        for j in 0..gamma as u64 {
            self.add_pass(draft.decode(ctx + j * b, b), work, timing);
        }
        timing.time_s - before
    }

    /// An extra element-wise pass inside a step (compression or decompression of KV): max(F/rate_F,
    /// B/rate_B), with no per-step overhead and no power roof (the reference's endpoint-compression rule);
    /// its energy is E_c + E_m at full clock.
    pub fn pass(&self, w: StepWork) -> StepTiming {
        let t_c = w.flops / self.rate_flops;
        let t_m = w.bytes / self.rate_bytes;
        StepTiming {
            time_s: t_c.max(t_m),
            compute_j: w.flops * self.j_per_flop,
            memory_j: w.bytes * self.j_per_byte,
            bound: if t_c >= t_m { Bound::Compute } else { Bound::Memory },
            comm_s: 0.0,
        }
    }
}

/// The real root of s³ + p·s + q = 0 for p > 0 (exactly one real root).
fn cubic_root_depressed(p: f64, q: f64) -> f64 {
    let disc = (q * q / 4.0 + p * p * p / 27.0).sqrt();
    (-q / 2.0 + disc).cbrt() + (-q / 2.0 - disc).cbrt()
}

/// KV capacity of an instance in tokens: floor((HBM·n·mem_util − resident weights) / KV bytes per token).
/// Returns the usable bytes as the error when nothing fits.
pub fn kv_capacity_tokens(
    dev: &DeviceSpec,
    devices: u32,
    mem_util: f64,
    resident_weight_bytes: f64,
    kv_bytes_per_token: f64,
) -> Result<u64, f64> {
    let usable = dev.hbm_gb * 1e9 * devices as f64 * mem_util;
    let free = usable - resident_weight_bytes;
    let tokens = (free / kv_bytes_per_token).floor();
    if tokens >= 1.0 {
        Ok(tokens as u64)
    } else {
        Err(usable)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cost::model::{LmHead, ModelCost};
    use crate::cost::presets::{device_presets, model_presets};

    fn dev(key: &str) -> DeviceSpec {
        device_presets().into_iter().find(|(k, _)| *k == key).unwrap().1
    }
    fn cost(key: &str) -> ModelCost {
        let m = model_presets().into_iter().find(|(k, _)| *k == key).unwrap().1;
        ModelCost::new(&m, LmHead::All)
    }
    const REF: RooflineParams =
        RooflineParams { step_overhead_s: 0.0005, enforce_tdp: true, dvfs: false, s_min: 0.4, comm_overlap: 0.0 };
    fn ms(t: StepTiming) -> f64 {
        t.time_s * 1e3
    }

    /// Every time row of the step-cost table in spec/simulator.md (b), to the printed 4 decimals (ms).
    #[test]
    fn step_times_match_reference_table() {
        let c8 = cost("llama3-8b");
        let c70 = cost("llama3-70b");
        let h100 = StepTimer::new(&dev("h100"), 1, None, REF);
        let h100x4 = StepTimer::new(&dev("h100"), 4, None, REF);
        let a100 = StepTimer::new(&dev("a100"), 1, None, REF);
        let p8 = c8.prefill(2048, 1, c8.prompt_attention_flops(2048));
        let rows = [
            (h100.time(p8), 59.0332, Bound::Compute),
            (h100.time(c8.prefill(8192, 4, 4 * c8.prompt_attention_flops(2048))), 234.6328, Bound::Compute),
            (h100.time(c8.decode(2048, 1)), 6.2007, Bound::Memory),
            (h100.time(c8.decode(131_072, 64)), 12.5142, Bound::Memory),
            (a100.time(p8), 186.0427, Bound::Compute),
            (a100.time(c8.decode(2048, 1)), 9.8660, Bound::Memory),
            (h100x4.time(c70.prefill(2048, 1, c70.prompt_attention_flops(2048))), 133.8667, Bound::Compute),
            (h100x4.time(c70.decode(2048, 1)), 13.5294, Bound::Memory),
        ];
        for (i, (t, want_ms, want_bound)) in rows.into_iter().enumerate() {
            assert_eq!((ms(t) * 1e4).round() / 1e4, want_ms, "row {i}: {t:?}");
            assert_eq!(t.bound, want_bound, "row {i}");
        }
        let t = h100x4.time(c70.decode(36_800, 16));
        assert_eq!((ms(t) * 1e3).round() / 1e3, 14.592);
    }

    /// Mid-size prefills (≈170–580 tokens for 8B on H100) are power-bound at the TDP; 2,048 and decode are not.
    #[test]
    fn mid_size_prefills_are_power_bound_on_h100() {
        let c8 = cost("llama3-8b");
        let h100 = StepTimer::new(&dev("h100"), 1, None, REF);
        for s in [200u64, 400] {
            let t = h100.time(c8.prefill(s, 1, c8.prompt_attention_flops(s)));
            assert_eq!(t.bound, Bound::Power, "{s} tokens");
            // The roof holds: dynamic power over the stretched time equals the 600 W budget.
            let p = (t.compute_j + t.memory_j) / (t.time_s - REF.step_overhead_s);
            assert!((p - 600.0).abs() < 1e-6 * 600.0 || p < 600.0, "{s}: {p} W");
        }
        for s in [100u64, 2048] {
            let t = h100.time(c8.prefill(s, 1, c8.prompt_attention_flops(s)));
            assert_ne!(t.bound, Bound::Power, "{s} tokens");
        }
    }

    /// Without TDP enforcement and without a cap there is no roof; a per-device cap lowers the budget.
    #[test]
    fn power_cap_and_tdp_switch() {
        let c8 = cost("llama3-8b");
        let w = c8.prefill(400, 1, c8.prompt_attention_flops(400));
        let free = StepTimer::new(&dev("h100"), 1, None, RooflineParams { enforce_tdp: false, ..REF });
        assert_eq!(free.budget_w(), None);
        assert_eq!(free.time(w).bound, Bound::Compute);
        let capped = StepTimer::new(&dev("h100"), 2, Some(400.0), REF);
        assert_eq!(capped.budget_w(), Some(600.0));
        let above_tdp = StepTimer::new(&dev("h100"), 1, Some(900.0), REF);
        assert_eq!(above_tdp.budget_w(), Some(600.0));
        let t_cap = StepTimer::new(&dev("h100"), 1, Some(400.0), REF).time(w);
        assert!(t_cap.time_s > free.time(w).time_s);
        let p = (t_cap.compute_j + t_cap.memory_j) / (t_cap.time_s - REF.step_overhead_s);
        assert!(p <= 300.0 * (1.0 + 1e-9), "{p}");
    }

    /// DVFS slows the clock of memory-bound steps: same time, less compute energy.
    #[test]
    fn dvfs_saves_energy_on_memory_bound_steps() {
        let c8 = cost("llama3-8b");
        let w = c8.decode(2048, 1);
        let base = StepTimer::new(&dev("h100"), 1, None, REF).time(w);
        let dv = StepTimer::new(&dev("h100"), 1, None, RooflineParams { dvfs: true, ..REF }).time(w);
        assert_eq!(dv.time_s, base.time_s);
        assert!(dv.compute_j < base.compute_j * 0.5);
        assert_eq!(dv.memory_j, base.memory_j);
    }

    #[test]
    fn cubic_root_solves_the_cubic() {
        for (p, q) in [(0.1, -2.0), (3.0, -0.5), (1e-3, -1e-3)] {
            let s = cubic_root_depressed(p, q);
            assert!((s * s * s + p * s + q).abs() < 1e-12, "{p} {q} {s}");
        }
    }

    /// KV capacities quoted in spec/simulator.md (b).
    #[test]
    fn kv_capacity_matches_reference() {
        let c8 = cost("llama3-8b");
        let c70 = cost("llama3-70b");
        let cap = |d: &str, n, c: &ModelCost| {
            kv_capacity_tokens(&dev(d), n, 0.9, c.resident_weight_bytes(), c.kv_bytes_per_token)
        };
        assert_eq!(cap("h100", 1, &c8), Ok(426_788));
        assert_eq!(cap("a100", 1, &c8), Ok(426_788));
        assert_eq!(cap("h100", 4, &c70), Ok(448_288));
        assert_eq!(cap("h100", 2, &c70), Ok(8_835));
        assert!(cap("h100", 1, &c70).is_err());
    }

    /// t_c, t_m, E_c, E_m of a step on one H100, from the spec's device row (989 TFLOP/s × 0.55,
    /// 3.35 TB/s × 0.80, 1 pJ/FLOP, 60 pJ/byte).
    fn h100_parts(w: StepWork) -> (f64, f64, f64, f64) {
        (w.flops / (989e12 * 0.55), w.bytes / (3.35e12 * 0.80), w.flops * 1e-12, w.bytes * 60e-12)
    }

    fn rel_close(a: f64, b: f64) -> bool {
        (a - b).abs() <= 1e-12 * b.abs()
    }

    /// A large decode batch at short contexts (8B, b = 200, ctx = 10,000 on 1×H100) is memory-bound but
    /// close to the ridge (t_c/t_m ≈ 0.91) and draws ≈ 654 W at full clock, above the 600 W budget.
    /// Spec (b): with the TDP roof and no DVFS, memory still sets the time, so the clock slows to
    /// s = √x with x = (budget·t_m − E_m)/E_c: the time stays t_m, the step is "power"-bound and the
    /// dynamic power is exactly the budget (E_c·s² = budget·t_m − E_m).
    #[test]
    fn power_roof_slows_the_clock_of_a_memory_bound_step() {
        let c8 = cost("llama3-8b");
        let w = c8.decode(10_000, 200);
        let (t_c, t_m, e_c, e_m) = h100_parts(w);
        assert!(t_c < t_m && (e_c + e_m) / t_m > 600.0, "premise");
        let x = (600.0 * t_m - e_m) / e_c;
        assert!(x > 0.0 && x.sqrt() * t_m >= t_c, "premise: memory still sets the time");
        let t = StepTimer::new(&dev("h100"), 1, None, REF).time(w);
        assert_eq!(t.bound, Bound::Power);
        assert!(rel_close(t.time_s, t_m + 0.0005), "{t:?}");
        assert!(rel_close(t.compute_j, e_c * x), "{t:?}");
        assert!(rel_close(t.compute_j, 600.0 * t_m - e_m), "{t:?}");
        assert_eq!(t.memory_j, e_m);
    }

    /// Spec (b) DVFS: a memory-bound step runs its compute at s = max(0.4, t_c/t_m), so with t_c/t_m ≈ 0.91
    /// (the step above) s = t_c/t_m, the time stays t_m and E_c becomes E_c·s². The slowed clock is what the
    /// power roof sees: at full clock the step would draw ≈ 654 W > 600 W, at s it draws ≈ 566 W, so it is
    /// not power-bound.
    #[test]
    fn dvfs_uses_the_ratio_clock_and_the_power_roof_sees_it() {
        let c8 = cost("llama3-8b");
        let w = c8.decode(10_000, 200);
        let (t_c, t_m, e_c, e_m) = h100_parts(w);
        let s = t_c / t_m;
        assert!(s > 0.4 && s < 1.0, "premise: {s}");
        assert!((e_c + e_m) / t_m > 600.0 && (e_c * s * s + e_m) / t_m < 600.0, "premise");
        let t = StepTimer::new(&dev("h100"), 1, None, RooflineParams { dvfs: true, ..REF }).time(w);
        assert_eq!(t.bound, Bound::Memory);
        assert!(rel_close(t.time_s, t_m + 0.0005), "{t:?}");
        assert!(rel_close(t.compute_j, e_c * s * s), "{t:?}");
        assert_eq!(t.memory_j, e_m);
    }

    /// A compute-bound step over the power budget (8B prefill of 400 tokens on 1×H100, ≈ 625 W at full
    /// clock; spec (b)): memory cannot set the time (√x·t_m < t_c), so the clock s solves
    /// E_c·s³ + E_m·s = budget·t_c. The root is found here by bisection, independently of the closed form;
    /// then t = t_c/s, E_c ← E_c·s², and the dynamic power equals the 600 W budget.
    #[test]
    fn power_roof_on_a_compute_bound_step_solves_the_cubic() {
        let c8 = cost("llama3-8b");
        let w = c8.prefill(400, 1, c8.prompt_attention_flops(400));
        let (t_c, t_m, e_c, e_m) = h100_parts(w);
        let x = (600.0 * t_m - e_m) / e_c;
        assert!(t_c > t_m && (e_c + e_m) / t_c > 600.0 && x.sqrt() * t_m < t_c, "premise");
        let (mut lo, mut hi) = (0.0_f64, 1.0_f64);
        for _ in 0..200 {
            let mid = 0.5 * (lo + hi);
            if e_c * mid * mid * mid + e_m * mid > 600.0 * t_c {
                hi = mid;
            } else {
                lo = mid;
            }
        }
        let s = 0.5 * (lo + hi);
        assert!(s > 0.4, "premise: above the clock floor ({s})");
        let t = StepTimer::new(&dev("h100"), 1, None, REF).time(w);
        assert_eq!(t.bound, Bound::Power);
        let close = |a: f64, b: f64| (a - b).abs() <= 1e-9 * b.abs();
        assert!(close(t.time_s - 0.0005, t_c / s), "{t:?} vs s = {s}");
        assert!(close(t.compute_j, e_c * s * s), "{t:?}");
        assert!(close((t.compute_j + t.memory_j) / (t.time_s - 0.0005), 600.0), "{t:?}");
    }
}
