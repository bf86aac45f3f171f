//! What a step holds on a decode instance ([`Role::Decode`]): continuous batching with KV-capacity admission
//! at step boundaries; a compressed hand-off may be decompressed on admission (charged to the next step).
//! Also the decode step itself ([`start_decode`], [`complete_decode`]), which colocated instances and
//! prefill instances keeping requests local run on their own decode rows.

use super::instance::Pool;
#[cfg(doc)]
use super::instance::Role;
use super::{cols, Decoder, Sim};
use crate::cost::model::{Chunks, ModelCost, StepWork};
use crate::cost::roofline::StepTimer;
use crate::cost::roofline::StepTiming;
use crate::cost::table::Shape;
use crate::metrics::itl::ItlHistogram;
use crate::metrics::stats::InstanceStats;
use crate::metrics::table::RequestTable;
use crate::policy::batching::{decode_admit_len, decode_admit_len_with, Occupancy};

impl Sim<'_> {
    /// The decode instance for a hand-off, chosen now (its index in the decode pool).
    pub(super) fn route_to_back(&mut self, r: u32) -> usize {
        let d = if self.faults.is_some() {
            self.pick_live_back()
        } else {
            self.back_router.pick(&Pool(&self.insts[self.n_front..]))
        };
        self.t.decode_instance[r as usize] = d as i32;
        d
    }

    /// Request `r`'s decode instance (of the decode pool): the one already chosen for it, else one chosen
    /// now.
    pub(super) fn decode_instance_of(&mut self, r: u32) -> usize {
        match self.t.decode_instance[r as usize] {
            d if d >= 0 => d as usize,
            _ => self.route_to_back(r),
        }
    }

    /// A hand-off has landed on decode instance `d` (of the decode pool): queue it.
    pub(super) fn deliver(&mut self, r: u32, d: usize, now: f64) {
        if self.faults.as_deref().is_some_and(|f| f.is_down(self.n_front + d)) {
            // Sent to a failed instance: the KV is lost (`faults.rs`).
            return self.lose(r, now);
        }
        self.enqueue(self.n_front + d, r, now);
    }

    /// Step boundary of decode instance `i`: admit from the queue, then start a step if anything runs.
    ///
    /// Inlined into the macro-step loop of a decode instance (`run_steps`), with the step's end
    /// ([`Self::decode_done`]) and [`start_decode`]: one frame per decode step. What most steps do not need
    /// (KV holding, paged KV, admissions, finished requests) is kept out of line.
    #[inline(always)]
    pub(super) fn decode_boundary(&mut self, i: usize, now: f64) -> Option<f64> {
        // Growth and preemption first (once per step); with KV holding, then the transfers waiting for room.
        super::paged::prepare(&mut self.insts[i].dec, &mut self.t, self.max_batch);
        if self.hold {
            self.start_pulls(i - self.n_front, now);
        }
        let inst = &mut self.insts[i];
        if !inst.queue.is_empty() {
            self.admit_decoding(i, now);
        }
        let t = &mut self.t;
        let inst = &mut self.insts[i];
        inst.stats.kv_peak_tokens = inst.stats.kv_peak_tokens.max(inst.dec.kv_used);
        let end = start_decode(&mut inst.dec, &inst.timer, &mut inst.stats, &inst.model, &t.prompt_tokens, now);
        inst.busy = end.is_some();
        if !self.admitted.is_empty() {
            if let Some(e) = end {
                for &r in &self.admitted {
                    t.first_token_seen_s[r as usize] = e;
                }
            }
            self.admitted.clear();
        }
        end
    }

    /// [`Self::decode_boundary`]'s admissions from decode instance `i`'s (non-empty) queue.
    #[inline(never)]
    fn admit_decoding(&mut self, i: usize, now: f64) {
        let t = &mut self.t;
        let inst = &mut self.insts[i];
        let occ = Occupancy {
            running: inst.dec.running.len() as u64,
            max_batch: self.max_batch,
            kv_used: inst.dec.kv_used,
            kv_capacity: inst.dec.kv_capacity,
            rule: inst.dec.rule,
        };
        // Preempted sequences resume before anything new is admitted. A pulled hand-off (KV holding) has its
        // blocks already: only a batch slot is needed.
        let n = if self.hold {
            inst.queue.len().min(self.max_batch.saturating_sub(occ.running) as usize)
        } else if inst.dec.paged.as_ref().is_some_and(|p| p.has_waiting()) {
            0
        } else if inst.dec.rule.block > 0 && inst.dec.running.spec.is_some() {
            let (p, o, dec) = (&t.prompt_tokens, &t.output_tokens, &inst.dec);
            decode_admit_len_with(&inst.queue, occ, |r| dec.first_decode_take(r, p[r as usize], o[r as usize]))
        } else {
            decode_admit_len(&inst.queue, &t.prompt_tokens, &t.output_tokens, occ)
        };
        // With metrics.first_token "decode", the admitted requests' first token is seen when this step ends.
        let seen_later = !t.first_token_seen_s.is_empty();
        for _ in 0..n {
            let Some(r) = inst.queue.pop_front() else { break };
            if seen_later {
                self.admitted.push(r);
            }
            let ri = r as usize;
            inst.queued_tokens -= t.prompt_tokens[ri] as u64;
            if !self.hold {
                inst.dec.kv_used += inst.dec.first_decode_take(r, t.prompt_tokens[ri], t.output_tokens[ri]);
            }
            t.decode_start_s[ri] = now;
            inst.dec.running.admit(r, cols(t));
            if self.plan.receiver_passes() {
                // Decompression and/or layout conversion on the receiver, in the first decode step after
                // admission.
                let p = t.prompt_tokens[ri];
                self.plan.add_receiver_work(&mut inst.dec.pending_pass, self.plan.handoff_bytes(p), p as u64);
            }
        }
    }

    /// Instance `i`'s decode rows have their next token: finished requests complete.
    #[inline(always)]
    pub(super) fn decode_done(&mut self, i: usize, now: f64) {
        complete_decode(&mut self.insts[i].dec, &self.t, &mut self.itl, &mut self.finished, now);
        if !self.finished.is_empty() {
            // Speculative decoding: the finished requests' accepted totals go to the table first.
            if self.insts[i].dec.running.spec.is_some() {
                self.take_accepted(i);
            }
            self.complete_finished(now);
        }
    }

    /// Speculative decoding: the accepted totals of instance `i`'s finished requests go to the table.
    #[cold]
    #[inline(never)]
    fn take_accepted(&mut self, i: usize) {
        let Some(sp) = self.insts[i].dec.running.spec.as_deref_mut() else { return };
        for (r, a) in sp.done.drain(..) {
            if let Some(x) = self.t.accepted_tokens.get_mut(r as usize) {
                *x = a;
            }
        }
    }

    /// [`Self::decode_done`]: the requests of `self.finished` complete (and it is emptied).
    #[inline(never)]
    ///
    /// They complete in ascending request row (the completion-order rule of [`super::kernel`]): the fast
    /// running set yields a step's finishers in its heap's order and the plain one in its vector's, and what
    /// a completion schedules (a session's next turn) must not depend on which representation ran.
    fn complete_finished(&mut self, now: f64) {
        let mut finished = std::mem::take(&mut self.finished);
        if finished.len() > 1 {
            finished.sort_unstable();
        }
        for &r in &finished {
            self.complete(r, now);
        }
        finished.clear();
        self.finished = finished;
    }
}

/// What speculative decoding costs on one instance: each step drafts γ tokens per sequence (γ passes of the
/// draft model or head, element-wise on the roofline: no overhead) and verifies them in one pass of the target
/// over γ + 1 positions per sequence ([`StepTimer::speculative_step`]).
pub(super) struct Draft {
    pub gamma: u32,
    pub model: ModelCost,
}

/// Start a decode step over everything running (plus any pending decompression pass); `None` when nothing
/// runs. (Always inlined: it is most of a decode step's work and the step is one frame.)
#[inline(always)]
pub(super) fn start_decode(
    dec: &mut Decoder,
    timer: &StepTimer,
    stats: &mut InstanceStats,
    model: &ModelCost,
    prompt: &[u32],
    now: f64,
) -> Option<f64> {
    if dec.paged.is_some() {
        return start_paged_decode(dec, timer, stats, model, prompt, now);
    }
    if dec.draft.is_some() {
        return start_speculative_decode(dec, timer, stats, model, prompt, now);
    }
    if dec.running.is_empty() {
        return None;
    }
    let b = dec.running.len() as u64;
    let ctx = dec.running.ctx_tokens(prompt);
    let work = model.decode(ctx, b);
    let timing = timer.decode_step(work, b, ctx);
    account_decode(dec, timer, stats, work, timing, b, now)
}

/// The end of starting a decode step of `b` sequences timed `timing`: any pending receiver-side pass joins
/// it, the instance accounts it, and it ends at the returned time.
#[inline(always)]
fn account_decode(
    dec: &mut Decoder,
    timer: &StepTimer,
    stats: &mut InstanceStats,
    mut work: StepWork,
    mut timing: StepTiming,
    b: u64,
    now: f64,
) -> Option<f64> {
    dec.take_pending_pass(timer, &mut work, &mut timing);
    stats.add_step(now, work, timing, b, 0, false, dec.kv_used);
    Some(now + timing.time_s)
}

/// [`start_decode`] with speculative decoding: the verify pass and the draft passes.
#[cold]
#[inline(never)]
fn start_speculative_decode(
    dec: &mut Decoder,
    timer: &StepTimer,
    stats: &mut InstanceStats,
    model: &ModelCost,
    prompt: &[u32],
    now: f64,
) -> Option<f64> {
    let d = dec.draft.as_deref()?;
    if dec.running.is_empty() {
        return None;
    }
    let b = dec.running.len() as u64;
    let ctx = dec.running.ctx_tokens(prompt);
    let (work, timing, draft_s) = timer.speculative_step(model, &d.model, d.gamma, ctx, b);
    stats.draft_s += draft_s;
    account_decode(dec, timer, stats, work, timing, b, now)
}

/// [`start_decode`] with paged KV: the step also re-prefills recomputed sequences and waits for swaps.
#[inline(never)]
fn start_paged_decode(
    dec: &mut Decoder,
    timer: &StepTimer,
    stats: &mut InstanceStats,
    model: &ModelCost,
    prompt: &[u32],
    now: f64,
) -> Option<f64> {
    if dec.running.is_empty() && !dec.paged.as_ref().is_some_and(|p| p.recomputes()) {
        super::paged::unprepare(dec);
        return None;
    }
    let (chunks, swap_s) = super::paged::step_extra(dec, model, prompt);
    let b = dec.running.len() as u64;
    let ctx = dec.running.ctx_tokens(prompt);
    let shape = Shape {
        prefill_seqs: chunks.last_chunks,
        prefill_tokens: chunks.tokens,
        cached_tokens: chunks.cached_tokens,
        decode_rows: b,
        decode_ctx: ctx,
    };
    let (mut work, mut timing) = mixed_pass(dec.draft.as_deref(), timer, stats, model, ctx, b, chunks, shape);
    dec.take_pending_pass(timer, &mut work, &mut timing);
    // The step waits for the swaps of its boundary (the host link is the instance's own).
    timing.time_s += swap_s;
    stats.kv_peak_tokens = stats.kv_peak_tokens.max(dec.kv_used);
    stats.add_step(now, work, timing, b + chunks.last_chunks, 0, false, dec.kv_used);
    Some(now + timing.time_s)
}

/// A mixed pass of `rows` decode rows (`ctx` tokens of context) beside the prompt chunks `chunks`, timed as
/// `shape`: with speculative decoding (`draft`, and rows to verify) the rows verify their drafts in the pass
/// and the draft passes follow ([`StepTimer::speculative_pass`], their time added to `stats.draft_s`).
#[allow(clippy::too_many_arguments)]
pub(super) fn mixed_pass(
    draft: Option<&Draft>,
    timer: &StepTimer,
    stats: &mut InstanceStats,
    model: &ModelCost,
    ctx: u64,
    rows: u64,
    chunks: Chunks,
    shape: Shape,
) -> (StepWork, StepTiming) {
    match draft {
        Some(d) if rows > 0 => {
            let (work, timing, draft_s) = timer.speculative_pass(model, &d.model, d.gamma, ctx, rows, chunks, shape);
            stats.draft_s += draft_s;
            (work, timing)
        }
        _ => {
            let work = model.mixed(ctx, rows, chunks);
            (work, timer.step(work, shape))
        }
    }
}

/// Finish a decode step at `now`: tokens, inter-token gaps, finished sequences (their KV released).
/// (Always inlined, like [`start_decode`].)
#[inline(always)]
pub(super) fn complete_decode(
    dec: &mut Decoder,
    t: &RequestTable,
    itl: &mut ItlHistogram,
    finished: &mut Vec<u32>,
    now: f64,
) {
    let gap = now - dec.last_decode_end;
    dec.running.complete_step(now, gap, cols(t), itl, finished);
    dec.last_decode_end = now;
    for &r in finished.iter() {
        let (p, o) = (t.prompt_tokens[r as usize], t.output_tokens[r as usize]);
        dec.kv_used -= dec.rule.held(p, o, o);
    }
    if dec.paged.is_some() {
        super::paged::step_done(dec, t, itl, finished, now);
    }
}
