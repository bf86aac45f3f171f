//! The one instance model. Every instance of the cluster — a prefill instance, a decode instance or a
//! colocated one — is an [`Instance`] with a [`Role`], and the engine drives them all the same way: a
//! request is queued on an instance ([`Sim::enqueue`]), which wakes it if idle (`Ev::Wake`); at a step
//! boundary the role decides what the next step holds ([`Sim::boundary`]: `prefill.rs` for prefill and
//! colocated instances, `decode.rs` for decode instances), and the step's end (`Ev::StepDone`, or the
//! instance's slot in the kernel's step calendar) finishes it ([`Sim::step_end`]) and starts the next.
//! Routing, admission and batching decisions are pure functions in `policy/`.
//!
//! Instances are numbered in one list: the front pool (prefill or colocated) first, then the decode pool;
//! an instance's index is also its calendar slot. Tables and links number decode instances within their
//! pool (`decode_instance` = index − number of front instances).

use std::collections::VecDeque;

use super::kernel::Priority;
use super::{Decoder, Ev, Sim};
use crate::cost::model::ModelCost;
use crate::cost::roofline::StepTimer;
use crate::metrics::stats::InstanceStats;
use crate::policy::router::LoadView;

/// What an instance does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Role {
    /// Disaggregated prefill: batches prompts and hands their KV off (and, with conditional
    /// disaggregation, decodes the requests kept local).
    Prefill,
    /// Disaggregated decode: admits hand-offs and decodes them (continuous batching).
    Decode,
    /// Prefill and decode on the same instance.
    Colocated,
}

/// What the step in flight holds (it decides what its end does).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum StepKind {
    /// A whole-prompt prefill batch.
    Prefill,
    /// The decode rows only.
    Decode,
    /// A chunked step; `true` when it also ran the instance's decode rows.
    Mixed(bool),
}

pub(super) struct Instance {
    pub role: Role,
    /// The cost constants of this instance's pool (with its KV format).
    pub model: ModelCost,
    pub timer: StepTimer,
    /// Prompts waiting for a prefill step (prefill, colocated) or hand-offs landed and waiting for
    /// admission (decode).
    pub queue: VecDeque<u32>,
    /// Prompt tokens of the queued requests.
    pub queued_tokens: u64,
    /// The prefill batch in flight (chunked: the requests whose last chunk is in the step in flight).
    pub batch: Vec<u32>,
    /// Chunked prefill: the prompt started but not finished (request, tokens prefilled once the step in
    /// flight ends).
    pub partial: Option<(u32, u32)>,
    pub step: StepKind,
    pub busy: bool,
    pub wake_pending: bool,
    pub dec: Decoder,
    pub stats: InstanceStats,
}

impl Instance {
    pub fn new(role: Role, model: ModelCost, timer: StepTimer, dec: Decoder, stats: InstanceStats) -> Self {
        Instance {
            role,
            model,
            timer,
            queue: VecDeque::new(),
            queued_tokens: 0,
            batch: Vec::new(),
            partial: None,
            step: StepKind::Decode,
            busy: false,
            wake_pending: false,
            dec,
            stats,
        }
    }
}

/// A pool of instances as the router sees it.
pub(super) struct Pool<'a>(pub &'a [Instance]);

impl LoadView for Pool<'_> {
    fn instances(&self) -> usize {
        self.0.len()
    }
    fn queued_tokens(&self, i: usize) -> u64 {
        self.0[i].queued_tokens
    }
    fn queued_requests(&self, i: usize) -> u64 {
        self.0[i].queue.len() as u64
    }
    fn running(&self, i: usize) -> u64 {
        self.0[i].dec.running.len() as u64
    }
}

impl Sim<'_> {
    /// Queue request `r` on instance `i` and wake the instance if it is idle.
    pub(super) fn enqueue(&mut self, i: usize, r: u32, now: f64) {
        let inst = &mut self.insts[i];
        inst.queue.push_back(r);
        inst.queued_tokens += self.t.prompt_tokens[r as usize] as u64;
        self.wake(i, now);
    }

    /// Wake instance `i` now unless it is busy or already woken.
    pub(super) fn wake(&mut self, i: usize, now: f64) {
        let inst = &mut self.insts[i];
        if !inst.busy && !inst.wake_pending {
            inst.wake_pending = true;
            self.q.push(now, Priority::Normal, Ev::Wake(i as u32));
        }
    }

    pub(super) fn on_wake(&mut self, i: usize, now: f64) {
        self.insts[i].wake_pending = false;
        if !self.insts[i].busy && !self.faults.as_deref().is_some_and(|f| f.is_down(i)) {
            let end = self.boundary(i, now);
            self.schedule(i, end);
        }
    }

    /// Step boundary of instance `i`: its role decides what the next step holds. Returns the step's end
    /// (`None`: the instance went idle).
    #[inline]
    pub(super) fn boundary(&mut self, i: usize, now: f64) -> Option<f64> {
        match self.insts[i].role {
            Role::Decode => self.decode_boundary(i, now),
            Role::Prefill | Role::Colocated => self.front_boundary(i, now),
        }
    }

    /// The step of instance `i` ends now: finish it and start the next one (its end, if any).
    #[inline]
    pub(super) fn step_end(&mut self, i: usize, now: f64) -> Option<f64> {
        match self.insts[i].role {
            Role::Decode => self.decode_step_end(i, now),
            Role::Prefill | Role::Colocated => self.front_step_end(i, now),
        }
    }

    /// [`Self::step_end`] of a decode instance: its steps only decode.
    #[inline]
    fn decode_step_end(&mut self, i: usize, now: f64) -> Option<f64> {
        self.decode_done(i, now);
        self.decode_boundary(i, now)
    }

    /// [`Self::step_end`] of a prefill or colocated instance: what ends depends on what the step held.
    fn front_step_end(&mut self, i: usize, now: f64) -> Option<f64> {
        match self.insts[i].step {
            StepKind::Decode => self.decode_done(i, now),
            StepKind::Prefill => self.prefill_done(i, now),
            StepKind::Mixed(decodes) => {
                // The decode rows gain their token first; the prompts finished in this step join after.
                if decodes {
                    self.decode_done(i, now);
                } else {
                    super::paged::unprepare(&mut self.insts[i].dec);
                }
                self.prefill_done(i, now);
            }
        }
        self.front_boundary(i, now)
    }

    /// Schedule the end of instance `i`'s step (`None`: it went idle): with macro-steps, run at once while
    /// it comes strictly before every pending event ([`EventQueue::step_runs_now`]), then in the kernel's
    /// step calendar; otherwise as a heap event.
    ///
    /// [`EventQueue::step_runs_now`]: super::kernel::EventQueue::step_runs_now
    #[inline]
    pub(super) fn schedule(&mut self, i: usize, end: Option<f64>) {
        if !self.macro_steps {
            if let Some(e) = end {
                if let Some(f) = self.faults.as_deref_mut() {
                    f.due[i] = e;
                }
                self.q.push(e, Priority::Normal, Ev::StepDone(i as u32));
            }
            return;
        }
        // The role is looked at once: each loop runs one role's steps.
        match self.insts[i].role {
            Role::Decode => self.run_steps(i, end, Self::decode_step_end),
            Role::Prefill | Role::Colocated => self.run_steps(i, end, Self::front_step_end),
        }
    }

    /// Macro-steps: run instance `i`'s steps (each ended by `step_end`) while the next one ends strictly
    /// before every pending event, then put its next step end in the calendar.
    #[inline(always)]
    fn run_steps(&mut self, i: usize, mut end: Option<f64>, step_end: fn(&mut Self, usize, f64) -> Option<f64>) {
        while let Some(e) = end {
            if !self.q.step_runs_now(i as u32, e) || self.tick() {
                break;
            }
            end = step_end(self, i, e);
        }
        self.q.set_step(i as u32, end);
    }
}
