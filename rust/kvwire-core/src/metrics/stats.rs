//! Run-level accumulators: per-instance busy time and energy, link totals, the in-system population
//! integral (Little's law), and the ITL histogram.

use serde::Serialize;

use super::itl::{ItlHistogram, Quantiles};
use super::timeline::{StepSpans, TransferSpans};
use crate::cost::model::StepWork;
use crate::cost::roofline::{Bound, StepTiming};

/// Totals of one instance over the run.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct InstanceStats {
    /// `prefill-i`, `decode-i` or `colocated-i`.
    pub name: String,
    /// Device preset key.
    pub device: String,
    pub devices: u32,
    /// The format the instance's matmuls run in (`"bf16"`, `"fp8"`, `"nvfp4"`, `"mxfp4"`).
    pub compute_format: String,
    /// The format asked for when the device lacks it and runs a wider one (`None`: no fallback).
    pub compute_wanted: Option<String>,
    /// Σ step times including the per-step overhead, s.
    pub busy_s: f64,
    pub steps: u64,
    pub prefill_steps: u64,
    pub decode_steps: u64,
    /// Σ batch sizes (prompts in prefill steps, sequences in decode steps).
    pub batch_sum: u64,
    /// Σ sequences over decode steps only (mean decode batch = decode_batch_sum / decode_steps).
    pub decode_batch_sum: u64,
    /// Σ prompt tokens over prefill steps (mean prefill batch in tokens = prefill_tokens_sum / prefill_steps).
    pub prefill_tokens_sum: u64,
    /// ∫ KV tokens reserved dt over the run, token·s (mean KV occupancy = kv_token_s / (horizon · capacity)).
    /// Reservations change only at step boundaries, so one product per step gives it exactly.
    pub kv_token_s: f64,
    /// Busy time of steps stretched by the power roof, s.
    pub power_bound_s: f64,
    /// Busy time of compute-bound steps, s.
    pub compute_bound_s: f64,
    /// Collective time the steps could not hide under compute, s (0 without `parallel`).
    pub comm_s: f64,
    /// Speculative decoding: time of the draft passes (in `busy_s`), s; draft tokens accepted and sequences
    /// verified, over all steps.
    pub draft_s: f64,
    pub spec_accepted: u64,
    pub spec_rows: u64,
    pub flops: f64,
    pub bytes: f64,
    pub compute_j: f64,
    pub memory_j: f64,
    /// Highest instantaneous power of a step: idle + dynamic energy / step time, W.
    pub peak_step_power_w: f64,
    /// Static power of the instance (all its devices), W.
    pub idle_w: f64,
    /// Un-derated peaks of the instance, for MFU / MBU.
    pub peak_flops_per_s: f64,
    pub peak_bytes_per_s: f64,
    /// KV capacity in tokens (admission units); `None` where the instance holds no KV reservation.
    pub kv_capacity_tokens: Option<u64>,
    pub kv_peak_tokens: u64,
    /// Tokens still reserved at the end (0 when every reservation was returned).
    pub kv_end_tokens: u64,
    /// The step spans of `engine.timeline` (`None`: not recorded); moved to the run's timeline at its end.
    #[serde(skip)]
    pub spans: Option<Box<StepSpans>>,
}

impl InstanceStats {
    /// Finish the totals at the end of a run: `decode_batch_sum` held the prefill steps' batches until now.
    pub fn finish(&mut self) {
        self.decode_batch_sum = self.batch_sum - self.decode_batch_sum;
    }

    /// Account one step starting at `now_s` of `batch` prompts holding `tokens` prompt tokens (`is_prefill`)
    /// or of `batch` sequences (decode), with `kv_tokens` of KV reserved on the instance while it runs; with
    /// `engine.timeline`, also its span (the one place every batch step is recorded).
    #[inline]
    #[allow(clippy::too_many_arguments)] // one step's figures
    pub fn add_step(
        &mut self,
        now_s: f64,
        w: StepWork,
        t: StepTiming,
        batch: u64,
        tokens: u64,
        is_prefill: bool,
        kv_tokens: u64,
    ) {
        if let Some(spans) = self.spans.as_deref_mut() {
            spans.push(now_s, now_s + t.time_s, is_prefill, batch, tokens, t.comm_s);
        }
        self.busy_s += t.time_s;
        self.steps += 1;
        if is_prefill {
            self.prefill_steps += 1;
            self.prefill_tokens_sum += tokens;
            // Decode steps are the many: their batch sum is batch_sum − this, in `finish`.
            self.decode_batch_sum += batch;
        } else {
            self.decode_steps += 1;
        }
        self.batch_sum += batch;
        // Through i64: one instruction (a KV reservation is far below 2⁶³ tokens), where u64 → f64 takes several.
        self.kv_token_s += kv_tokens as i64 as f64 * t.time_s;
        match t.bound {
            Bound::Power => self.power_bound_s += t.time_s,
            Bound::Compute => self.compute_bound_s += t.time_s,
            Bound::Memory => {}
        }
        self.flops += w.flops;
        self.bytes += w.bytes;
        self.compute_j += t.compute_j;
        self.memory_j += t.memory_j;
        // idle + dynamic / time > peak, tested without dividing (the division runs only on a new peak).
        let dynamic_j = t.compute_j + t.memory_j;
        if dynamic_j > (self.peak_step_power_w - self.idle_w) * t.time_s {
            self.peak_step_power_w = self.idle_w + dynamic_j / t.time_s;
        }
    }
}

/// Totals of the KV link.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct LinkStats {
    /// Link preset key.
    pub name: String,
    /// Resource name: `kv-link` (the network), `pcie-prefill-i` / `pcie-decode-j` (host-staged hops),
    /// `host-convert-i` (a layout conversion on the sender's host).
    pub resource: String,
    pub channels: u32,
    /// Σ transfer times (channel-seconds).
    pub busy_s: f64,
    pub transfers: u64,
    /// KV bytes handed off (before compression).
    pub handoff_bytes: f64,
    /// Bytes on the wire (after compression).
    pub wire_bytes: f64,
    /// Link energy: wire bits × pJ/bit.
    pub link_j: f64,
    /// In-transit compression stage energy: input bits × 1 pJ.
    pub transit_j: f64,
    /// Host CPU energy of a layout conversion hop (`host-convert-i`): busy time × W per thread.
    pub convert_j: f64,
    /// Σ (kv_start − first_token), s; on the first hop less any wait for room on the decode instance (KV
    /// holding, `kv_hold_wait_s`).
    pub wait_s: f64,
    /// Transfers whose time was set by the stage's ops budget, not the wire.
    pub transit_bound: u64,
    /// The transfer spans of `engine.timeline` (`None`: not recorded); moved to the run's timeline at its end.
    #[serde(skip)]
    pub spans: Option<Box<TransferSpans>>,
}

/// Prefix caching (`prefix_cache`): totals over the requests whose prefill started (all zero when off).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct PrefixStats {
    /// Σ prompt tokens of the requests prefilled.
    pub prompt_tokens: u64,
    /// Σ of their cached tokens (prefill compute skipped).
    pub cached_tokens: u64,
    /// Requests with at least one cached token.
    pub hit_requests: u64,
    /// Σ tokens left out of hand-offs (`handoff.skip_cached_prefix`).
    pub link_tokens_skipped: u64,
    /// Σ bytes those tokens would have put on the network hop (`kv-link`), after compression.
    pub link_bytes_saved: f64,
}

/// One tier of `kv_tiers`, summed over the front instances (each holds its own tier of this capacity).
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct KvTierStats {
    /// `host` or `ssd`.
    pub kind: &'static str,
    /// Capacity per instance, bytes.
    pub capacity_bytes: f64,
    /// Prompt tokens loaded from this tier instead of prefilled, and the requests that loaded any.
    pub hit_tokens: u64,
    pub hit_requests: u64,
    /// Bytes loaded from this tier (hit tokens × KV bytes per token), and bytes spilled into it (whole
    /// blocks it did not hold).
    pub read_bytes: f64,
    pub written_bytes: f64,
    /// Σ load time added to prefill steps, s (the critical path).
    pub load_s: f64,
    /// Most bytes any one instance's tier held after a spill.
    pub peak_bytes: f64,
}

impl Default for KvTierStats {
    fn default() -> Self {
        KvTierStats {
            kind: "host",
            capacity_bytes: 0.0,
            hit_tokens: 0,
            hit_requests: 0,
            read_bytes: 0.0,
            written_bytes: 0.0,
            load_s: 0.0,
            peak_bytes: 0.0,
        }
    }
}

/// Faults (`faults`): what failed and what it cost.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct FaultStats {
    /// Instance failures (outages begun, scheduled and random) up to the run's end.
    pub instance_failures: u64,
    /// Hop transfers that failed and were sent again or failed their request (`faults.transfer_failure_p`).
    pub transfer_failures: u64,
    /// Outages of the network link begun up to the run's end: of one channel, or of the whole link (one
    /// each).
    pub link_failures: u64,
    /// Requests that started over at least once, and requests that failed for good.
    pub retried_requests: u64,
    pub failed_requests: u64,
    /// Σ work thrown away: per lost attempt, the seconds from its prefill start to its loss.
    pub lost_work_s: f64,
    /// Σ instance down time up to the run's end, s, and 1 − that / (instances × the run's length).
    pub downtime_s: f64,
    pub availability: f64,
}

/// Everything the engine measured besides the per-request table.
#[derive(Clone, Debug, Default)]
pub struct RunStats {
    pub instances: Vec<InstanceStats>,
    /// Every hop lane of the hand-off path, the network (`kv-link`) first; empty when colocated.
    pub links: Vec<LinkStats>,
    /// Last completion time, s from t = 0 (0 when nothing completed).
    pub horizon_s: f64,
    /// Kernel events processed (from its heap; step ends from its step calendar are `calendar_steps`).
    pub events: u64,
    /// Batch-step ends the kernel took from its step calendar (macro-steps; 0 step by step).
    pub calendar_steps: u64,
    /// ∫ N(t) dt of the in-system population, request·s (Little's law: L = area / horizon).
    pub population_area: f64,
    pub completed: u64,
    pub rejected: u64,
    pub measured: u64,
    /// Static energy: Σ idle power × horizon, J.
    pub static_j: f64,
    pub itl: ItlHistogram,
    /// Wall-clock time of the core run, s (not deterministic; everything else is).
    pub wall_s: f64,
    /// Rows the engine's request table held at its largest: every request for an in-memory run; for a
    /// streamed run, the most requests held at once (from the oldest unfinished one to the newest arrival).
    pub table_rows_peak: u64,
    /// Paged KV: preemptions of decoding sequences, prompt + generated tokens prefilled again (recompute),
    /// and KV bytes moved to and from host memory (swap, both directions).
    pub preemptions: u64,
    pub recompute_tokens: u64,
    pub swap_bytes: f64,
    /// Paged KV in a disaggregated run: prefill-side holding and decode-side pulls.
    pub kv_hold: KvHoldStats,
    /// Prefix caching (`prefix_cache`): cached and prompt tokens, hits, tokens left off hand-offs.
    pub prefix: PrefixStats,
    /// Faults (`faults`; `None` without).
    pub faults: Option<FaultStats>,
    /// The prefix cache's tiers (`kv_tiers`; empty without), nearest first.
    pub kv_tiers: Vec<KvTierStats>,
}

/// KV holding (paged KV, disaggregated): a prefill instance holds each handed-off prompt's blocks until its
/// hand-off lands; a decode instance pulls a hand-off (starts its transfer) only when it has room. All 0
/// otherwise.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct KvHoldStats {
    /// Hand-offs pulled (transfers started), and how many of them waited for room first.
    pub handoffs: u64,
    pub waited: u64,
    /// Σ and max of the waits for room, s.
    pub wait_s_sum: f64,
    pub wait_s_max: f64,
    /// The most KV blocks a prefill instance held for hand-offs in flight at once (max over instances).
    pub prefill_held_peak_blocks: u64,
    /// The most KV blocks in use on a decode instance at once, pulled reservations included (max over
    /// instances).
    pub decode_peak_blocks: u64,
}

impl RunStats {
    /// The network hop (`kv-link`) of the hand-off path, if there is one.
    pub fn network(&self) -> Option<&LinkStats> {
        self.links.iter().find(|l| l.resource == "kv-link")
    }

    pub fn itl_quantiles(&self) -> Quantiles {
        self.itl.quantiles()
    }

    /// Everything above as JSON (the Python layer builds its summary from this and the table).
    /// Absent values (no ITL sample, no link) are `null`.
    pub fn to_json(&self) -> serde_json::Value {
        let q = self.itl_quantiles();
        serde_json::json!({
            "instances": self.instances,
            "links": self.links,
            "horizon_s": self.horizon_s,
            "events": self.events,
            "calendar_steps": self.calendar_steps,
            "population_area": self.population_area,
            "completed": self.completed,
            "rejected": self.rejected,
            "measured": self.measured,
            "static_j": self.static_j,
            "itl_s": {
                "count": q.count, "mean": q.mean, "p50": q.p50, "p90": q.p90, "p95": q.p95,
                "p99": q.p99, "p99_9": q.p99_9, "max": q.max,
            },
            "wall_s": self.wall_s,
            "table_rows_peak": self.table_rows_peak,
            "preemptions": {
                "count": self.preemptions,
                "recompute_tokens": self.recompute_tokens,
                "swap_bytes": self.swap_bytes,
            },
            "kv_hold": {
                "handoffs": self.kv_hold.handoffs,
                "waited": self.kv_hold.waited,
                "wait_s_sum": self.kv_hold.wait_s_sum,
                "wait_s_max": self.kv_hold.wait_s_max,
                "prefill_held_peak_blocks": self.kv_hold.prefill_held_peak_blocks,
                "decode_peak_blocks": self.kv_hold.decode_peak_blocks,
            },
            "prefix_cache": self.prefix,
            "faults": self.faults,
            "kv_tiers": self.kv_tiers,
        })
    }
}
