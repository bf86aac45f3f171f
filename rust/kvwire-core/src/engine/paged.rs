//! Paged KV on a decoding instance (`kv.policy = "paged"`), as vLLM's block manager does it:
//!
//! * a sequence holds ⌈(prompt + tokens generated)/block⌉ whole blocks ([`KvRule::held`]); admission takes
//!   the blocks of prompt + first token and must leave the watermark free (`policy::batching`);
//! * before each step with decode rows, every running sequence whose next token starts a block gets one;
//!   when the free blocks do not cover that, the most recently admitted sequence is **preempted** (its
//!   blocks freed), repeatedly, until they do;
//! * preempted sequences resume first-preempted first, at a later boundary with no preemption, when their
//!   blocks fit, before any new admission: by **swap** (the KV went to host memory over the instance's
//!   PCIe 5 link and comes back: blocks·latency + bytes/bandwidth each way, added to the step that moves
//!   it, which holds the link) or by **recompute** (the KV was dropped; the next step prefills prompt +
//!   generated tokens again as one chunk beside the decode rows, `ModelCost::mixed`, and that prefill
//!   gives the sequence its next token).
//!
//! The growth count of a step comes from the running set (`running.rs`: the fast paged set in O(1), or the
//! plain set's per-sequence pass). In a disaggregated run the module also holds prompts' KV on prefill
//! instances and pulls hand-offs into decode instances when they have room (below).

use std::collections::VecDeque;

use super::{cols, Decoder, Sim};
use crate::cost::model::{Chunks, ModelCost};
use crate::cost::presets::{link_presets, LinkSpec};
use crate::metrics::itl::ItlHistogram;
use crate::metrics::stats::KvHoldStats;
use crate::metrics::table::RequestTable;
use crate::policy::batching::KvRule;
use crate::scenario::{KvPolicy, Preemption, Scenario};

/// The host link a swap uses.
pub(super) const SWAP_LINK: &str = "pcie5";

pub(super) struct Paged {
    block: u64,
    watermark: f64,
    /// The host link of a swap; `None`: preemption by recompute.
    swap: Option<LinkSpec>,
    kv_bytes_per_token: f64,
    /// Preempted sequences waiting to resume, first preempted first: (request, tokens generated, when the
    /// last of them came).
    preempted: VecDeque<(u32, u32, f64)>,
    /// Growth, preemption and resumption are done for the step about to start.
    prepared: bool,
    /// Recompute: sequences prefilled again in the step in flight, as in `preempted`.
    recomputing: Vec<(u32, u32, f64)>,
    /// Swap time charged to the next step, s.
    swap_s: f64,
    pub preemptions: u64,
    pub recompute_tokens: u64,
    pub swap_bytes: f64,
    /// KV holding (a disaggregated run), decode side: finished prefills waiting for room on this instance
    /// before their transfer starts, first come first: (request, since when).
    pulls: VecDeque<(u32, f64)>,
    /// Prefill side: KV tokens held for hand-offs not yet landed, and their peak.
    pub held: u64,
    pub held_peak: u64,
    /// Decode side: hand-offs pulled (transfers started), how many waited for room, and their waits, s.
    pub pulled: u64,
    pub pull_waits: u64,
    pub pull_wait_sum_s: f64,
    pub pull_wait_max_s: f64,
}

impl Paged {
    /// The paged state of a decoder whose pool's KV costs `model`, if the scenario pages its KV.
    pub(super) fn of(sc: &Scenario, model: &ModelCost) -> Option<Paged> {
        if sc.kv.policy != KvPolicy::Paged {
            return None;
        }
        let swap = match sc.kv.preemption {
            Preemption::Swap => link_presets().into_iter().find(|(k, _)| *k == SWAP_LINK).map(|(_, l)| l),
            Preemption::Recompute => None,
        };
        Some(Paged {
            block: sc.kv.block_size as u64,
            watermark: sc.kv.watermark,
            swap,
            kv_bytes_per_token: model.kv_bytes_per_token,
            preempted: VecDeque::new(),
            prepared: false,
            recomputing: Vec::new(),
            swap_s: 0.0,
            preemptions: 0,
            recompute_tokens: 0,
            swap_bytes: 0.0,
            pulls: VecDeque::new(),
            held: 0,
            held_peak: 0,
            pulled: 0,
            pull_waits: 0,
            pull_wait_sum_s: 0.0,
            pull_wait_max_s: 0.0,
        })
    }

    /// The admission rule on an instance of `capacity` KV tokens: whole blocks, and ⌊watermark · blocks⌋
    /// blocks left free.
    pub(super) fn rule(&self, capacity: u64) -> KvRule {
        let blocks = capacity / self.block;
        KvRule { block: self.block, watermark: (blocks as f64 * self.watermark) as u64 * self.block, hold: false }
    }

    /// Whether preempted sequences wait to resume (new admissions wait behind them).
    pub(super) fn has_waiting(&self) -> bool {
        !self.preempted.is_empty()
    }

    /// Whether the step about to start re-prefills preempted sequences.
    pub(super) fn recomputes(&self) -> bool {
        !self.recomputing.is_empty()
    }

    /// Add this instance's KV-holding figures to the run's: a decode instance's pulls and waits and its peak
    /// blocks in use (`peak_tokens`), or a prefill instance's peak blocks held for hand-offs.
    pub(super) fn add_hold_stats(&self, h: &mut KvHoldStats, decode: bool, peak_tokens: u64) {
        if decode {
            h.handoffs += self.pulled;
            h.waited += self.pull_waits;
            h.wait_s_sum += self.pull_wait_sum_s;
            h.wait_s_max = h.wait_s_max.max(self.pull_wait_max_s);
            h.decode_peak_blocks = h.decode_peak_blocks.max(peak_tokens / self.block);
        } else {
            h.prefill_held_peak_blocks = h.prefill_held_peak_blocks.max(self.held_peak / self.block);
        }
    }

    /// Swap `held` KV tokens one way: its time joins the next step, its bytes the totals.
    fn swap(&mut self, held: u64) {
        if let Some(link) = &self.swap {
            let bytes = held as f64 * self.kv_bytes_per_token;
            self.swap_s += link.block_transfer_s(held / self.block, bytes);
            self.swap_bytes += bytes;
        }
    }
}

/// Before a step with decode rows on `dec` (once per step): give every running sequence the block its next
/// token needs, preempting the most recently admitted ones while the free blocks fall short; then, if none
/// was preempted, resume waiting sequences that fit (`max_batch` included). A no-op with reserved KV.
#[inline(always)]
pub(super) fn prepare(dec: &mut Decoder, t: &mut RequestTable, max_batch: u64) {
    if dec.paged.is_some() {
        prepare_paged(dec, t, max_batch);
    }
}

/// [`prepare`] of a paged decoder (kept out of line: reserved KV, the default, never comes here).
#[inline(never)]
fn prepare_paged(dec: &mut Decoder, t: &mut RequestTable, max_batch: u64) {
    let Decoder { running, kv_used, kv_capacity, rule, paged, last_decode_end, .. } = dec;
    let Some(pg) = paged.as_deref_mut() else { return };
    if pg.prepared {
        return;
    }
    pg.prepared = true;
    let block = rule.block;
    let mut need = running.needing_block() * block;
    let mut preempted = false;
    while *kv_used + need > *kv_capacity {
        let Some((r, k, last)) = running.preempt_last(cols(t), *last_decode_end) else { break };
        let ri = r as usize;
        let (p, o) = (t.prompt_tokens[ri], t.output_tokens[ri]);
        need -= running.step_blocks(r, p, o, k) * block;
        let held = rule.held(p, o, k);
        *kv_used -= held;
        t.preemptions[ri] += 1;
        pg.preemptions += 1;
        pg.swap(held);
        pg.preempted.push_back((r, k, last));
        preempted = true;
    }
    *kv_used += need;
    if preempted {
        return;
    }
    while let Some(&(r, k, last)) = pg.preempted.front() {
        let ri = r as usize;
        let (p, o) = (t.prompt_tokens[ri], t.output_tokens[ri]);
        // Its blocks including those this step's tokens may need: one token when recomputed (the re-prefill
        // gives it), a decode step's when swapped back in (with speculative decoding, all it accepts).
        let take = if pg.swap.is_some() { running.step_take(*rule, r, p, o, k) } else { rule.held(p, o, k + 1) };
        if running.len() as u64 + pg.recomputing.len() as u64 >= max_batch || *kv_used + take > *kv_capacity {
            break;
        }
        pg.preempted.pop_front();
        *kv_used += take;
        if pg.swap.is_some() {
            pg.swap(rule.held(p, o, k));
            running.resume(r, k, last, cols(t));
        } else {
            pg.recompute_tokens += p as u64 + k as u64;
            pg.recomputing.push((r, k, last));
        }
    }
}

/// What the step about to start adds for paged KV: the re-prefills of recomputed sequences (one whole chunk
/// each of prompt + generated tokens) and the swap time, s.
#[inline]
pub(super) fn step_extra(dec: &mut Decoder, model: &ModelCost, prompt: &[u32]) -> (Chunks, f64) {
    let mut chunks = Chunks::default();
    let Some(pg) = dec.paged.as_deref_mut() else { return (chunks, 0.0) };
    for &(r, k, _) in &pg.recomputing {
        let s = prompt[r as usize] as u64 + k as u64;
        chunks.tokens += s;
        chunks.attention_flops += model.prompt_attention_flops(s);
        chunks.last_chunks += 1;
    }
    (chunks, std::mem::take(&mut pg.swap_s))
}

/// A step with no decode rows is starting (or none is): the next step's boundary work is still to do.
pub(super) fn unprepare(dec: &mut Decoder) {
    if let Some(pg) = dec.paged.as_deref_mut() {
        pg.prepared = false;
    }
}

/// After a step ending `now`: recomputed sequences got their next token (the gap since their last one is an
/// inter-token gap); they finish (appended to `finished`, blocks released) or rejoin the decode rows.
pub(super) fn step_done(
    dec: &mut Decoder,
    t: &RequestTable,
    itl: &mut ItlHistogram,
    finished: &mut Vec<u32>,
    now: f64,
) {
    let Decoder { running, kv_used, rule, paged, .. } = dec;
    let Some(pg) = paged.as_deref_mut() else { return };
    pg.prepared = false;
    for (r, k, last) in pg.recomputing.drain(..) {
        let ri = r as usize;
        if t.measured[ri] {
            itl.record(now - last, 1);
        }
        let (p, o) = (t.prompt_tokens[ri], t.output_tokens[ri]);
        if k + 1 >= o {
            *kv_used -= rule.held(p, o, k + 1);
            finished.push(r);
            if let Some(sp) = running.spec.as_deref_mut() {
                let accepted = sp.parked.remove(&r).unwrap_or(0);
                sp.done.push((r, accepted));
            }
        } else {
            running.resume(r, k + 1, f64::NAN, cols(t));
        }
    }
}

// ------------------------------------------------------------------------------------------------
// KV holding in a disaggregated run (paged KV): a prefill instance keeps each handed-off prompt's blocks
// from its prefill batch until its hand-off has landed; a decode instance pulls a hand-off (its transfer
// starts) only when it can allocate the request's blocks, reserved from then on.

/// A prompt of `prompt` tokens handed off from `dec`'s instance joins a prefill batch: its blocks are held
/// (a no-op unless the instance holds hand-offs, [`KvRule::hold`]).
#[inline]
pub(super) fn hold_prompt(dec: &mut Decoder, prompt: u32) {
    if dec.rule.hold {
        take_hold(dec, prompt);
    }
}

#[inline(never)]
fn take_hold(dec: &mut Decoder, prompt: u32) {
    let h = dec.rule.held_prompt(prompt);
    dec.kv_used += h;
    if let Some(pg) = dec.paged.as_deref_mut() {
        pg.held += h;
        pg.held_peak = pg.held_peak.max(pg.held);
    }
}

/// The blocks a prompt of `prompt` tokens held on `dec`'s instance are freed (its hand-off landed, or it
/// needed none).
pub(super) fn release_prompt(dec: &mut Decoder, prompt: u32) {
    let h = dec.rule.held_prompt(prompt);
    dec.kv_used -= h;
    if let Some(pg) = dec.paged.as_deref_mut() {
        pg.held -= h;
    }
}

impl Sim<'_> {
    /// Request `r`'s KV is ready to leave its prefill instance at `now` (its prefill ended, or its first layer
    /// with layer-wise streaming): without KV holding its transfer starts; with it, the decode instance is
    /// chosen now and the transfer starts once that instance has room ([`Self::start_pulls`]).
    pub(super) fn hand_off(&mut self, r: u32, now: f64) {
        if !self.hold {
            if self.faults.is_some() && self.park_for_decode(r) {
                return;
            }
            return self.enqueue_transfer(r, now);
        }
        let d = self.decode_instance_of(r);
        if let Some(pg) = self.insts[self.n_front + d].dec.paged.as_deref_mut() {
            pg.pulls.push_back((r, now));
        }
        self.start_pulls(d, now);
    }

    /// Start the transfers waiting for room on decode instance `d` (of the decode pool), first come first,
    /// while its free blocks take each one's (prompt + its first decode step's slot, with the admission
    /// watermark) and no preempted sequence waits to resume. The blocks are reserved from now on.
    pub(super) fn start_pulls(&mut self, d: usize, now: f64) {
        loop {
            let inst = &mut self.insts[self.n_front + d];
            let dec = &mut inst.dec;
            let Some(pg) = dec.paged.as_deref_mut() else { return };
            let Some(&(r, since)) = pg.pulls.front() else { return };
            let ri = r as usize;
            let need = dec.first_decode_take(r, self.t.prompt_tokens[ri], self.t.output_tokens[ri]);
            let Some(pg) = dec.paged.as_deref_mut() else { return };
            if pg.has_waiting() || !dec.rule.fits(dec.kv_used, need, dec.kv_capacity) {
                return;
            }
            pg.pulls.pop_front();
            pg.pulled += 1;
            let wait = now - since;
            if wait > 0.0 {
                pg.pull_waits += 1;
                pg.pull_wait_sum_s += wait;
                pg.pull_wait_max_s = pg.pull_wait_max_s.max(wait);
            }
            dec.kv_used += need;
            inst.stats.kv_peak_tokens = inst.stats.kv_peak_tokens.max(dec.kv_used);
            self.t.kv_hold_wait_s[ri] = wait;
            self.enqueue_transfer(r, now);
        }
    }

    /// Request `r`'s hand-off has landed: the blocks its prefill instance held are freed, and that instance,
    /// if idle with prompts waiting, looks at its queue again.
    pub(super) fn release_hold(&mut self, r: u32, now: f64) {
        let ri = r as usize;
        let i = self.t.prefill_instance[ri] as usize;
        let inst = &mut self.insts[i];
        release_prompt(&mut inst.dec, self.t.prompt_tokens[ri]);
        if !inst.queue.is_empty() {
            self.wake(i, now);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::decode::complete_decode;

    /// Two requests of prompt 30 on a 64-token (4-block) paged instance with no watermark, both admitted
    /// (2 blocks each: prompt + first token = 31 tokens) and decoded once.
    fn two_running(preemption: &str, output0: u32) -> (Decoder, RequestTable, ModelCost) {
        let json = format!(
            r#"{{"kv": {{"policy": "paged", "block_size": 16, "watermark": 0, "preemption": "{preemption}"}}}}"#
        );
        let sc = Scenario::from_json(&json, None).unwrap();
        let model = ModelCost::new(&sc.model.spec, sc.lm_head);
        let mut dec = Decoder::new(64, false, Paged::of(&sc, &model));
        assert_eq!(dec.rule, KvRule { block: 16, watermark: 0, hold: false });
        let mut t = RequestTable::new(vec![0.0, 0.0], vec![30, 30], vec![output0, 100]).unwrap();
        t.measured = vec![true, true];
        t.first_token_s = vec![1.0, 1.0];
        for r in 0..2 {
            dec.kv_used += dec.rule.admit(30, t.output_tokens[r as usize]);
            dec.running.admit(r, cols(&t));
        }
        assert_eq!(dec.kv_used, 64);
        prepare(&mut dec, &mut t, 256); // 31 and 31 tokens: no sequence needs a block yet
        assert_eq!(dec.kv_used, 64);
        let (mut itl, mut fin) = (ItlHistogram::default(), Vec::new());
        complete_decode(&mut dec, &t, &mut itl, &mut fin, 1.5);
        assert!(fin.is_empty());
        (dec, t, model)
    }

    /// With 32 tokens each (2 full blocks), both sequences' next token needs a block and none is free: the
    /// most recently admitted (request 1) is preempted and swapped out over PCIe 5 (64 GB/s, 5 µs per
    /// block): 2·5 µs + 32·131,072 B / 64 GB/s. Its 2 blocks are freed and request 0 grows by one.
    /// When request 0 finishes, request 1 comes back at the same cost and takes 3 blocks (33 tokens).
    #[test]
    fn a_swap_costs_blocks_times_latency_plus_bytes_over_bandwidth() {
        let (mut dec, mut t, model) = two_running("swap", 3);
        prepare(&mut dec, &mut t, 256);
        let bytes = 32.0 * 131_072.0;
        let want = 2.0 * 5e-6 + bytes / 64e9;
        let pg = dec.paged.as_deref().unwrap();
        assert_eq!((pg.swap_s, pg.swap_bytes, pg.preemptions), (want, bytes, 1));
        assert_eq!(t.preemptions, vec![0, 1]);
        assert_eq!((dec.kv_used, dec.running.len()), (48, 1));
        let (_, swap_s) = step_extra(&mut dec, &model, &t.prompt_tokens);
        assert_eq!(swap_s, want);
        let (mut itl, mut fin) = (ItlHistogram::default(), Vec::new());
        complete_decode(&mut dec, &t, &mut itl, &mut fin, 2.0);
        assert_eq!((fin, dec.kv_used), (vec![0], 0)); // request 0 done: 33 tokens, 3 blocks released
        prepare(&mut dec, &mut t, 256);
        let pg = dec.paged.as_deref().unwrap();
        assert_eq!((pg.swap_s, pg.swap_bytes), (want, 2.0 * bytes));
        assert_eq!((dec.kv_used, dec.running.len()), (48, 1));
        // Its next gap counts from its last token (the step ending at 1.5).
        let (mut itl, mut fin) = (ItlHistogram::default(), Vec::new());
        complete_decode(&mut dec, &t, &mut itl, &mut fin, 3.0);
        assert_eq!(itl.quantiles().max, Some(1.5));
    }

    /// Recompute: the victim's KV is dropped (no bytes move); on resumption the step prefills its prompt +
    /// generated tokens (30 + 2 = 32) as one whole chunk, and that prefill gives its third token: it rejoins
    /// the decode rows holding ⌈33/16⌉ = 3 blocks, with one inter-token gap since its last token.
    #[test]
    fn recompute_prefills_prompt_plus_generated_tokens_again() {
        let (mut dec, mut t, model) = two_running("recompute", 3);
        prepare(&mut dec, &mut t, 256);
        let (chunks, swap_s) = step_extra(&mut dec, &model, &t.prompt_tokens);
        assert_eq!((chunks, swap_s), (Chunks::default(), 0.0));
        let (mut itl, mut fin) = (ItlHistogram::default(), Vec::new());
        complete_decode(&mut dec, &t, &mut itl, &mut fin, 2.0);
        assert_eq!(fin, vec![0]);
        prepare(&mut dec, &mut t, 256);
        let pg = dec.paged.as_deref().unwrap();
        assert_eq!((pg.recompute_tokens, pg.swap_bytes, pg.preemptions), (32, 0.0, 1));
        assert_eq!((dec.kv_used, dec.running.len()), (48, 0));
        let (chunks, _) = step_extra(&mut dec, &model, &t.prompt_tokens);
        let want =
            Chunks { tokens: 32, cached_tokens: 0, attention_flops: model.prompt_attention_flops(32), last_chunks: 1 };
        assert_eq!(chunks, want);
        let (mut itl, mut fin) = (ItlHistogram::default(), Vec::new());
        complete_decode(&mut dec, &t, &mut itl, &mut fin, 3.0);
        assert!(fin.is_empty());
        assert_eq!((dec.running.len(), dec.kv_used, itl.count()), (1, 48, 1));
        assert_eq!(itl.quantiles().max, Some(1.5)); // 3.0 − its last token at 1.5
                                                    // Decoding on from 3 tokens: 33 is not a block boundary, so no growth for its next step.
        prepare(&mut dec, &mut t, 256);
        assert_eq!(dec.kv_used, 48);
    }
}
