//! What a step holds on a front instance — a prefill instance (disaggregated) or a colocated one
//! ([`Role::Prefill`], [`Role::Colocated`]). Prompts are batched whole, FIFO; a front instance that
//! decodes (colocated, or requests kept local by conditional disaggregation) gives a waiting admissible
//! prompt priority over its next decode step, as the reference's colocated instances do. With `scheduler.policy = "chunked"` a step instead holds every decode row, the unfinished
//! prompt's next chunk and new prompts' chunks up to the token budget, in one mixed pass (Sarathi); a
//! prompt's first token comes at the end of the step that runs its last chunk.

#[cfg(doc)]
use super::instance::Role;
use super::instance::{Pool, StepKind};
use super::kernel::Priority;
use super::{cols, Decoder, Ev, Sim};
use crate::cost::model::{Chunks, StepWork};
use crate::cost::table::Shape;
use crate::metrics::table::RequestTable;
use crate::policy::batching::{chunked_batch, front_batch_len, Occupancy};
use crate::policy::disaggregation::keep_local;
use crate::policy::disaggregation::Disaggregate;

impl Sim<'_> {
    /// A request arrives: the router picks its front instance.
    pub(super) fn route_to_front(&mut self, r: u32, now: f64) {
        let i = match self.route_by_prefix(r) {
            Some(i) => i,
            None if self.faults.is_some() => match self.pick_live_front(r) {
                Some(i) => i,
                None => return,
            },
            None => self.front_router.pick(&Pool(&self.insts[..self.n_front])),
        };
        self.enqueue(i, r, now);
    }

    /// Whether request `r` (being admitted to a prefill batch now) decodes on its front instance.
    fn decides_local(&self, r: u32, now: f64) -> bool {
        let (p, o) = (self.t.prompt_tokens[r as usize], self.t.output_tokens[r as usize]);
        match self.disaggregate {
            _ if self.colocated => true,
            Disaggregate::Always => false,
            Disaggregate::Conditional { .. } => {
                keep_local(&self.disaggregate, p, o, self.link_wait_estimate(now), self.insts[0].dec.kv_capacity)
            }
        }
    }

    /// Step boundary of front instance `i`: a prefill step if a queued prompt is admissible, else a decode
    /// step if anything runs locally, else idle. Returns the end of the started step.
    pub(super) fn front_boundary(&mut self, i: usize, now: f64) -> Option<f64> {
        if self.chunked {
            return self.chunked_boundary(i, now);
        }
        let occ = self.front_occupancy(i, 0);
        let mut local = Vec::new();
        let n = {
            let inst = &self.insts[i];
            front_batch_len(
                &inst.queue,
                &self.t.prompt_tokens,
                &self.t.output_tokens,
                self.max_prefill_tokens,
                occ,
                |r| self.decides_local(r, now),
                &mut local,
            )
        };
        if n == 0 {
            return self.start_front_decode(i, now);
        }
        let t = &mut self.t;
        let inst = &mut self.insts[i];
        let model = &inst.model;
        inst.batch.clear();
        let (mut tokens, mut attention) = (0u64, 0u128);
        // Prefix caching: prompt tokens found in this instance's cache (not computed).
        let mut cached = 0u64;
        let mut pass = StepWork { flops: 0.0, bytes: 0.0 };
        let mut streams = false;
        for &is_local in &local {
            let Some(r) = inst.queue.pop_front() else { break };
            let ri = r as usize;
            let s = t.prompt_tokens[ri] as u64;
            tokens += s;
            if let Some(px) = self.prefix.as_deref_mut() {
                let p = px.admit_front(i, ri, s as u32, inst.free_kv_tokens(px.front_kv_tokens));
                t.cached_tokens[ri] = p;
                cached += p as u64;
                attention += model.chunk_attention_flops(s - p as u64, p as u64);
            } else {
                attention += model.prompt_attention_flops(s);
            }
            start_prefill(&mut inst.dec, t, ri, i, now, is_local);
            if !is_local && t.output_tokens[ri] >= 2 {
                streams = true;
                if self.plan.sender_passes() {
                    let p = t.prompt_tokens[ri];
                    self.plan.add_sender_work(&mut pass, self.plan.handoff_bytes(p), p as u64);
                }
            }
            inst.batch.push(r);
        }
        inst.queued_tokens -= tokens;
        inst.stats.kv_peak_tokens = inst.stats.kv_peak_tokens.max(inst.dec.kv_used);
        // A cached prefix: each prompt is a chunk of s − p tokens after p cached ones (`ModelCost::mixed` with
        // no decode rows, which is `prefill` exactly when nothing is cached).
        let computed = tokens - cached;
        let mut work = if cached > 0 {
            let chunks =
                Chunks { tokens: computed, cached_tokens: cached, attention_flops: attention, last_chunks: n as u64 };
            model.mixed(0, 0, chunks)
        } else {
            model.prefill(tokens, n as u64, attention)
        };
        let mut timing = inst.timer.step(work, Shape::prefill(n as u64, computed, cached));
        // `kv_tiers`: the cached prefixes loaded from below GPU memory before the step computes.
        timing.time_s += self.prefix.as_deref_mut().map_or(0.0, |p| p.take_load_s());
        if pass.bytes > 0.0 {
            // Compression and/or layout conversion on the sender: an element-wise pass after the prefill's
            // matmuls (no overhead, no power roof; its energy is charged to this instance).
            inst.timer.add_pass(pass, &mut work, &mut timing);
        }
        inst.stats.add_step(now, work, timing, n as u64, computed, true, inst.dec.kv_used);
        inst.busy = true;
        inst.step = StepKind::Prefill;
        let end = now + timing.time_s;
        for &r in &inst.batch {
            t.first_token_s[r as usize] = end;
        }
        if !t.first_token_seen_s.is_empty() {
            // Seen now unless handed off (then at the end of its first decode step, `decode.rs`).
            for &r in &inst.batch {
                t.first_token_seen_s[r as usize] = end;
            }
        }
        if streams && self.path.streaming() {
            // The first layer's slices may leave after 1/L of the step.
            let layers = self.path.layers() as f64;
            self.q.push(now + timing.time_s / layers, Priority::Normal, Ev::StreamStart(i as u32));
        }
        Some(end)
    }

    /// Step boundary of front instance `i` under chunked prefill: one mixed step of its decode rows, the
    /// unfinished prompt's chunk and new prompts' chunks (`policy::batching::chunked_batch`); a plain decode
    /// step when no chunk fits; idle when there is nothing to do. Returns the end of the started step.
    fn chunked_boundary(&mut self, i: usize, now: f64) -> Option<f64> {
        let partial = self.insts[i].partial;
        if !self.insts[i].dec.running.is_empty() || self.insts[i].dec.paged.as_ref().is_some_and(|p| p.has_waiting()) {
            super::paged::prepare(&mut self.insts[i].dec, &mut self.t, self.max_batch);
        }
        let rows = self.insts[i].dec.running.len() as u64;
        // A decode row takes one token of the step's budget, or γ + 1 when it verifies drafts.
        let row_tokens = rows * self.insts[i].dec.draft.as_deref().map_or(1, |d| d.gamma as u64 + 1);
        let partial_local = partial.is_some_and(|(r, _)| self.t.local_decode[r as usize]);
        let occ = self.front_occupancy(i, partial_local as u64);
        let (mut local, mut chunks) = (Vec::new(), Vec::new());
        // Prefix caching: each new prompt is matched (and its blocks inserted) as it is taken, in queue order.
        let mut prefix = self.prefix.take();
        let mut cached = Vec::new();
        let n = chunked_batch(
            partial,
            &self.insts[i].queue,
            &self.t.prompt_tokens,
            &self.t.output_tokens,
            self.max_num_batched_tokens,
            row_tokens,
            occ,
            |r| self.decides_local(r, now),
            |r| {
                let Some(px) = prefix.as_deref_mut() else { return 0 };
                let free = self.insts[i].free_kv_tokens(px.front_kv_tokens);
                let p = px.admit_front(i, r as usize, self.t.prompt_tokens[r as usize], free);
                cached.push(p);
                p
            },
            &mut local,
            &mut chunks,
        );
        self.prefix = prefix;
        if chunks.is_empty() {
            return self.start_front_decode(i, now);
        }
        let t = &mut self.t;
        let inst = &mut self.insts[i];
        let model = &inst.model;
        inst.batch.clear();
        inst.partial = None;
        let mut work = Chunks::default();
        let mut pass = StepWork { flops: 0.0, bytes: 0.0 };
        // (request, tokens already prefilled) of every chunk, in step order: the partial's first.
        let mut members = Vec::with_capacity(chunks.len());
        if chunks.len() > n {
            members.extend(partial);
        }
        for (k, &is_local) in local.iter().enumerate() {
            let Some(r) = inst.queue.pop_front() else { break };
            let ri = r as usize;
            inst.queued_tokens -= t.prompt_tokens[ri] as u64;
            start_prefill(&mut inst.dec, t, ri, i, now, is_local);
            // A cached prefix: the prompt starts as if its first `p` tokens were prefilled.
            let p = cached.get(k).copied().unwrap_or(0);
            t.cached_tokens[ri] = p;
            members.push((r, p));
        }
        for (&(r, done), &c) in members.iter().zip(&chunks) {
            let ri = r as usize;
            let (p, c) = (done as u64, c as u64);
            work.tokens += c;
            work.cached_tokens += p;
            work.attention_flops += model.chunk_attention_flops(c, p);
            if p + c < t.prompt_tokens[ri] as u64 {
                inst.partial = Some((r, (p + c) as u32));
                continue;
            }
            work.last_chunks += 1;
            inst.batch.push(r);
            if !t.local_decode[ri] && t.output_tokens[ri] >= 2 {
                // The whole prompt's KV leaves from this step: its sender-side pass runs here.
                if self.plan.sender_passes() {
                    let p = t.prompt_tokens[ri];
                    self.plan.add_sender_work(&mut pass, self.plan.handoff_bytes(p), p as u64);
                }
            }
        }
        inst.stats.kv_peak_tokens = inst.stats.kv_peak_tokens.max(inst.dec.kv_used);
        let ctx = if rows > 0 { inst.dec.running.ctx_tokens(&t.prompt_tokens) } else { 0 };
        // Paged KV: preempted sequences prefilled again beside the chunks, and swap time.
        let (again, swap_s) = super::paged::step_extra(&mut inst.dec, model, &t.prompt_tokens);
        let decodes = rows > 0 || again.last_chunks > 0;
        work.tokens += again.tokens;
        work.attention_flops += again.attention_flops;
        work.last_chunks += again.last_chunks;
        let shape = Shape {
            prefill_seqs: members.len() as u64 + again.last_chunks,
            prefill_tokens: work.tokens,
            cached_tokens: work.cached_tokens,
            decode_rows: rows,
            decode_ctx: ctx,
        };
        let (mut step, mut timing) = super::decode::mixed_pass(
            inst.dec.draft.as_deref(),
            &inst.timer,
            &mut inst.stats,
            model,
            ctx,
            rows,
            work,
            shape,
        );
        timing.time_s += swap_s;
        // `kv_tiers`: the new prompts' cached prefixes loaded from below GPU memory.
        timing.time_s += self.prefix.as_deref_mut().map_or(0.0, |p| p.take_load_s());
        if pass.bytes > 0.0 {
            inst.timer.add_pass(pass, &mut step, &mut timing);
        }
        inst.stats.add_step(now, step, timing, members.len() as u64, work.tokens, true, inst.dec.kv_used);
        inst.busy = true;
        inst.step = StepKind::Mixed(decodes);
        let end = now + timing.time_s;
        for &r in &inst.batch {
            t.first_token_s[r as usize] = end;
            if !t.first_token_seen_s.is_empty() {
                t.first_token_seen_s[r as usize] = end;
            }
        }
        Some(end)
    }

    /// What admission on front instance `i` depends on, with `extra` decode slots taken beside its running
    /// sequences. Preempted sequences waiting to resume keep new local requests out (no KV is free for them).
    fn front_occupancy(&self, i: usize, extra: u64) -> Occupancy {
        let d = &self.insts[i].dec;
        let waiting = d.paged.as_ref().is_some_and(|p| p.has_waiting());
        Occupancy {
            running: d.running.len() as u64 + extra,
            max_batch: self.max_batch,
            kv_used: d.kv_used,
            kv_capacity: if waiting { 0 } else { d.kv_capacity },
            rule: d.rule,
        }
    }

    fn start_front_decode(&mut self, i: usize, now: f64) -> Option<f64> {
        super::paged::prepare(&mut self.insts[i].dec, &mut self.t, self.max_batch);
        let inst = &mut self.insts[i];
        inst.step = StepKind::Decode;
        let end = super::decode::start_decode(
            &mut inst.dec,
            &inst.timer,
            &mut inst.stats,
            &inst.model,
            &self.t.prompt_tokens,
            now,
        );
        inst.busy = end.is_some();
        end
    }

    /// The prompts of front instance `i`'s step ending now have their first token: finish, decode locally
    /// or hand off.
    pub(super) fn prefill_done(&mut self, i: usize, now: f64) {
        let batch = std::mem::take(&mut self.insts[i].batch);
        let streaming = self.path.streaming();
        for &r in &batch {
            let ri = r as usize;
            let out = self.t.output_tokens[ri];
            if self.t.local_decode[ri] {
                if out <= 1 {
                    let dec = &mut self.insts[i].dec;
                    dec.kv_used -= dec.rule.admit(self.t.prompt_tokens[ri], out);
                    self.t.local_decode[ri] = false;
                    self.complete(r, now);
                } else {
                    self.t.decode_start_s[ri] = now;
                    if self.colocated {
                        self.t.decode_instance[ri] = i as i32;
                    }
                    let c = cols(&self.t);
                    self.insts[i].dec.running.admit(r, c);
                }
            } else if out <= 1 {
                super::paged::release_prompt(&mut self.insts[i].dec, self.t.prompt_tokens[ri]);
                self.complete(r, now);
            } else if !streaming {
                self.hand_off(r, now);
            }
        }
        self.insts[i].batch = batch;
    }

    /// The first layer of front instance `i`'s batch is done: its hand-offs join the link queue.
    pub(super) fn on_stream_start(&mut self, i: usize, now: f64) {
        let batch = std::mem::take(&mut self.insts[i].batch);
        for &r in &batch {
            if !self.t.local_decode[r as usize] && self.t.output_tokens[r as usize] >= 2 {
                self.hand_off(r, now);
            }
        }
        self.insts[i].batch = batch;
    }
}

/// Request `ri` starts its prefill on front instance `i` (decoder `dec`) now: recorded in the table, and its
/// KV reserved when it decodes here or its prompt's blocks held (paged KV holding) when it is handed off.
#[inline]
fn start_prefill(dec: &mut Decoder, t: &mut RequestTable, ri: usize, i: usize, now: f64, is_local: bool) {
    t.prefill_start_s[ri] = now;
    t.prefill_instance[ri] = i as i32;
    t.local_decode[ri] = is_local;
    if is_local {
        dec.kv_used += dec.rule.admit(t.prompt_tokens[ri], t.output_tokens[ri]);
    } else {
        super::paged::hold_prompt(dec, t.prompt_tokens[ri]);
    }
}
