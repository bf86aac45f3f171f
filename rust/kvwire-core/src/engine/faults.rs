//! Faults (`faults`): instances and the network link fail and are repaired, and single transfers fail;
//! what fails loses what it held, and the requests concerned try again.
//!
//! What an instance's failure does, in the order the engine does it at the failure's time:
//! 1. The instance's step in flight never ends (its kernel event or calendar slot is dropped; the step was
//!    already counted in the instance's busy time, energy and timeline when it started).
//! 2. Its work is lost: the prompts of its prefill (or chunked) step in flight and its unfinished chunked
//!    prompt, every sequence it was decoding, on a prefill instance the finished prefills waiting for a
//!    decode instance to be up (below), and on a decode instance the hand-offs that had landed and were
//!    waiting for admission (their KV was in its memory). Each such request loses the seconds since its
//!    prefill started (`lost_s`) and starts over: prefilled again on a live front instance, handed off
//!    again, decoded from its first token (`retries`). A request that has already started over
//!    `faults.max_retries` times fails instead (`failed`; it never finishes and misses its SLO).
//! 3. The prompts queued on a failed front instance lose nothing and are routed again.
//! 4. Requests lost or re-routed at one failure go back to the front router together in row (arrival)
//!    order, routed among the live instances only. While no front instance is up, arrivals and re-routed
//!    requests wait and are routed, in the order they came, when one is repaired; while no decode instance
//!    is up, finished prefills wait to hand off (their KV stays on the prefill instance) and start their
//!    transfers, in the order they came, when one is repaired. A hand-off that lands on a decode instance
//!    that failed after it was chosen is lost. A transfer already on the wire completes even if its sender
//!    fails.
//!
//! A request keeps the first token the user saw: its TTFT is that of the attempt that first delivered one;
//! its inter-token gaps are those of the attempts as they ran.
//!
//! The network link (`faults.link`, link events): a channel that fails frees the transfer it carried, which
//! is lost and sent again `faults.retry_s` later (its `HopDone` event is stale: the channel's end time is
//! NaN); no transfer is granted a channel while it is down, and the link's queue is served again when one is
//! repaired. A single transfer (`faults.transfer_failure_p`) fails when it completes on its hop, and is sent
//! again on that hop `faults.retry_s` later. Either counts as a try again (`retries`) and its time on the hop
//! as lost work; past `faults.max_retries` the request fails.
//!
//! Random failures (`faults.instance`, `faults.link`): each instance of the named pools (each channel, or
//! the whole link) is up for a drawn time, then down for a drawn repair time, and so on; the draws are keyed
//! by (seed, instance or link unit, failure number), and a transfer's by (seed, request, its hop transfers
//! so far) (SplitMix64, as the speculative acceptance draws), so they do not depend on what else the run
//! does. Scheduled outages (`faults.events`) overlay them: a unit is down while any outage covers it.

use std::collections::VecDeque;

use super::instance::{Pool, Role, StepKind};
use super::kernel::Priority;
use super::running::mix53;
use super::{Ev, Sim};
use crate::error::Error;
use crate::metrics::stats::FaultStats;
use crate::policy::router::LoadView;
use crate::scenario::faults::{Faults, RandomFaults, RandomLink};
use crate::scenario::spec::FaultDist;

/// The outages of a set of failing units (the instances, or the network link's channels): per unit, how
/// many outages cover it now (a random and a scheduled one may overlap), when its current one began, and its
/// closed ones.
struct Outages {
    covering: Vec<u32>,
    since: Vec<f64>,
    closed: Vec<Vec<(f64, f64)>>,
}

impl Outages {
    fn new(units: usize) -> Self {
        Outages { covering: vec![0; units], since: vec![0.0; units], closed: vec![Vec::new(); units] }
    }

    fn is_down(&self, u: usize) -> bool {
        self.covering[u] > 0
    }

    /// An outage of unit `u` begins now; whether the unit was up (it goes down with this one).
    fn begin(&mut self, u: usize, now: f64) -> bool {
        self.covering[u] += 1;
        if self.covering[u] == 1 {
            self.since[u] = now;
        }
        self.covering[u] == 1
    }

    /// An outage of unit `u` ends now; whether the unit is up again (no other outage covers it).
    fn end(&mut self, u: usize, now: f64) -> bool {
        self.covering[u] -= 1;
        if self.covering[u] == 0 {
            self.closed[u].push((self.since[u], now));
        }
        self.covering[u] == 0
    }

    /// Every outage up to `end` as (unit, start, end), by unit then start; one in progress at `end` ends there.
    fn clipped(&self, end: f64) -> Vec<(u32, f64, f64)> {
        let mut out = Vec::new();
        for (u, closed) in self.closed.iter().enumerate() {
            let open = self.is_down(u).then_some((self.since[u], end));
            for (a, b) in closed.iter().copied().chain(open) {
                if a < end {
                    out.push((u as u32, a, b.min(end)));
                }
            }
        }
        out
    }
}

/// The index of a randomly failing unit's next draw, `drawn` its failures drawn so far (counted here): after
/// a failure, its repair (the same index as the up time that ended in it); after a repair, the next up time.
fn next_draw(drawn: &mut u64, fail: bool) -> u64 {
    if fail {
        *drawn
    } else {
        *drawn += 1;
        *drawn
    }
}

/// A run's fault state.
pub(super) struct FaultRun {
    /// The instances' outages.
    instances: Outages,
    /// Step by step (no macro-steps): the end of each instance's step in flight; a `StepDone` at any other
    /// time belongs to a step a failure cut short.
    pub due: Vec<f64>,
    random: Option<RandomFaults>,
    /// The scheduled outages of instances and of the link (`Faults::events`, `Faults::link_events`), until
    /// the run's first events are put in the kernel.
    events: Vec<(usize, f64, f64)>,
    link_events: Vec<(Option<u32>, f64, f64)>,
    /// Per instance: random failures drawn so far.
    drawn: Vec<u64>,
    seed: u64,
    max_retries: u32,
    /// Requests waiting for a live front instance, in the order they came.
    parked: VecDeque<u32>,
    /// Prefilled requests whose hand-off waits for a live decode instance, in the order they came.
    parked_back: VecDeque<u32>,
    /// Per request: the first token the user saw, from an attempt since lost (`NaN`: none), and the same
    /// for `first_token_seen_s` when it is tracked.
    first_seen: Vec<f64>,
    first_seen_later: Vec<f64>,
    /// Live instances of the pool being routed (scratch).
    live: Vec<usize>,
    /// The network link's channels' outages (`faults.link` and link events).
    channels: Outages,
    link_random: Option<RandomLink>,
    /// Per randomly failing unit of the link (each channel, or the whole link): failures drawn so far.
    link_drawn: Vec<u64>,
    /// `faults.transfer_failure_p` and `faults.retry_s`.
    transfer_failure_p: f64,
    retry_s: f64,
    /// Per request (with transfer failures): hop transfers completed or failed so far (the draws' counter),
    /// when its transfer in flight started on its hop, and whether that transfer is one sent again.
    sent: Vec<u32>,
    hop_start: Vec<f64>,
    resent: Vec<bool>,
    pub stats: FaultStats,
}

impl FaultRun {
    pub fn new(f: &Faults, instances: usize, requests: usize, track_seen: bool) -> Self {
        FaultRun {
            instances: Outages::new(instances),
            due: vec![f64::NAN; instances],
            random: f.random.clone(),
            events: f.events.clone(),
            link_events: f.link_events.clone(),
            drawn: vec![0; instances],
            seed: f.seed,
            max_retries: f.max_retries,
            parked: VecDeque::new(),
            parked_back: VecDeque::new(),
            first_seen: vec![f64::NAN; requests],
            first_seen_later: if track_seen { vec![f64::NAN; requests] } else { Vec::new() },
            live: Vec::new(),
            channels: Outages::new(f.channels as usize),
            link_random: f.link.clone(),
            link_drawn: vec![0; f.channels as usize],
            transfer_failure_p: f.transfer_failure_p,
            retry_s: f.retry_s,
            sent: if f.transfer_failure_p > 0.0 { vec![0; requests] } else { Vec::new() },
            hop_start: if transfers_fail(f) { vec![0.0; requests] } else { Vec::new() },
            resent: if transfers_fail(f) { vec![false; requests] } else { Vec::new() },
            stats: FaultStats::default(),
        }
    }

    pub fn is_down(&self, i: usize) -> bool {
        self.instances.is_down(i)
    }

    /// The `k`-th draw of instance `i` (`repair`: its repair time, else its up time), s.
    fn draw(&self, r: &RandomFaults, i: usize, k: u64, repair: bool) -> f64 {
        self.draw_of(if repair { r.mttr_s } else { r.mtbf_s }, r.dist, i as u64, k, repair)
    }

    /// The `k`-th draw of unit `unit` of the link (a channel, or 0 for the whole link), s.
    fn link_draw(&self, r: &RandomLink, unit: usize, k: u64, repair: bool) -> f64 {
        self.draw_of(if repair { r.mttr_s } else { r.mtbf_s }, r.dist, LINK_UNITS | unit as u64, k, repair)
    }

    /// The `k`-th up (or repair) time of mean `mean` of the failing unit keyed `unit`, s.
    fn draw_of(&self, mean: f64, dist: FaultDist, unit: u64, k: u64, repair: bool) -> f64 {
        match dist {
            FaultDist::Fixed => mean,
            FaultDist::Exponential => {
                // u ∈ (0, 1]: 1 − m·2⁻⁵³ for the 53-bit draw m, so ln u is finite.
                let m = splitmix(self.seed ^ 0x6A09_E667_F3BC_C909, unit, 2 * k + repair as u64);
                let u = 1.0 - m as f64 * (1.0 / (1u64 << 53) as f64);
                -mean * u.ln()
            }
        }
    }
}

/// The key space of the link's failing units (instances are keyed by their index, below it).
const LINK_UNITS: u64 = 1 << 40;

/// Whether transfers can fail and be sent again (per-transfer failures, or channels that fail under them).
fn transfers_fail(f: &Faults) -> bool {
    f.transfer_failure_p > 0.0 || f.link.is_some() || !f.link_events.is_empty()
}

/// The unit of a link fault event that takes the whole link down.
pub(super) const WHOLE_LINK: u32 = u32::MAX;

/// A 53-bit draw keyed by (seed, a, b): SplitMix64's finaliser over a mix of the three (as the speculative
/// acceptance draws, [`mix53`]).
fn splitmix(seed: u64, a: u64, b: u64) -> u64 {
    mix53(seed ^ (a.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ b.wrapping_mul(0xC2B2_AE3D_27D4_EB4F)).rotate_left(17))
}

/// The index of a link unit among the link's randomly failing units (the whole link is unit 0).
fn unit_index(unit: u32) -> usize {
    if unit == WHOLE_LINK {
        0
    } else {
        unit as usize
    }
}

/// A pool as the router sees it, its failed instances left out (`ids`: the live ones' indices in the pool).
struct Live<'a> {
    pool: Pool<'a>,
    ids: &'a [usize],
}

impl LoadView for Live<'_> {
    fn instances(&self) -> usize {
        self.ids.len()
    }
    fn queued_tokens(&self, i: usize) -> u64 {
        self.pool.queued_tokens(self.ids[i])
    }
    fn queued_requests(&self, i: usize) -> u64 {
        self.pool.queued_requests(self.ids[i])
    }
    fn running(&self, i: usize) -> u64 {
        self.pool.running(self.ids[i])
    }
}

impl Sim<'_> {
    /// Put the run's first fault events in the kernel: every scheduled outage, and each randomly failing
    /// instance's and link unit's first failure.
    pub(super) fn start_faults(&mut self) {
        let Some(fr) = self.faults.as_deref_mut() else { return };
        let (events, link_events) = (std::mem::take(&mut fr.events), std::mem::take(&mut fr.link_events));
        let Some(fr) = self.faults.as_deref() else { return };
        for &(i, at, dur) in &events {
            self.q.push(at, Priority::Normal, Ev::Fault { i: i as u32, fail: true, random: false });
            self.q.push(at + dur, Priority::Normal, Ev::Fault { i: i as u32, fail: false, random: false });
        }
        if let Some(r) = &fr.random {
            for i in 0..self.insts.len() {
                if (i < self.n_front && r.front) || (i >= self.n_front && r.back) {
                    let up = fr.draw(r, i, 0, false);
                    self.q.push(up, Priority::Normal, Ev::Fault { i: i as u32, fail: true, random: true });
                }
            }
        }
        for &(ch, at, dur) in &link_events {
            let unit = ch.unwrap_or(WHOLE_LINK);
            self.q.push(at, Priority::Normal, Ev::LinkFault { unit, fail: true, random: false });
            self.q.push(at + dur, Priority::Normal, Ev::LinkFault { unit, fail: false, random: false });
        }
        if let Some(r) = &fr.link_random {
            let channels = fr.channels.covering.len() as u32;
            let units: Vec<u32> = if r.per_channel { (0..channels).collect() } else { vec![WHOLE_LINK] };
            for unit in units {
                let up = fr.link_draw(r, unit_index(unit), 0, false);
                self.q.push(up, Priority::Normal, Ev::LinkFault { unit, fail: true, random: true });
            }
        }
    }

    /// A fault event of the network link: channel `unit` (or [`WHOLE_LINK`]) fails (`fail`) or an outage of
    /// it ends; `random` outages draw the next. A channel that fails loses the transfer it carried, which is
    /// sent again `faults.retry_s` later (on a live channel, or when one is back); waiting transfers wait.
    pub(super) fn on_link_fault(&mut self, unit: u32, fail: bool, random: bool, now: f64) {
        let Some(f) = self.faults.as_deref_mut() else { return };
        if let (true, Some(r)) = (random, f.link_random.clone()) {
            let u = unit_index(unit);
            let k = next_draw(&mut f.link_drawn[u], fail);
            let dt = f.link_draw(&r, u, k, fail);
            self.q.push(now + dt, Priority::Normal, Ev::LinkFault { unit, fail: !fail, random: true });
        }
        let channels = f.channels.covering.len() as u32;
        let (lo, hi) = if unit == WHOLE_LINK { (0, channels) } else { (unit, unit + 1) };
        if fail {
            f.stats.link_failures += 1;
        }
        let mut cut = Vec::new();
        let mut repaired = false;
        for ch in lo..hi {
            let Some(f) = self.faults.as_deref_mut() else { return };
            let c = ch as usize;
            if fail {
                if f.channels.begin(c, now) {
                    cut.extend(self.set_network_channel(c, true));
                }
            } else if f.channels.end(c, now) {
                self.set_network_channel(c, false);
                repaired = true;
            }
        }
        for r in cut {
            self.transfer_lost(r, self.path_network(), now);
        }
        if repaired {
            self.grant_network(now);
        }
    }

    /// A fault event of instance `i`: it fails (`fail`) or an outage ends; `random` outages draw the next.
    pub(super) fn on_fault(&mut self, i: usize, fail: bool, random: bool, now: f64) {
        let Some(f) = self.faults.as_deref_mut() else { return };
        if let (true, Some(r)) = (random, f.random.clone()) {
            let k = next_draw(&mut f.drawn[i], fail);
            let dt = f.draw(&r, i, k, fail);
            self.q.push(now + dt, Priority::Normal, Ev::Fault { i: i as u32, fail: !fail, random: true });
        }
        if fail {
            f.stats.instance_failures += 1;
            if f.instances.begin(i, now) {
                self.take_down(i, now);
            }
        } else if f.instances.end(i, now) {
            self.bring_up(i, now);
        }
    }

    /// Instance `i` fails now: its step in flight is dropped and what it held is lost or routed again.
    fn take_down(&mut self, i: usize, now: f64) {
        if self.macro_steps {
            self.q.cancel_step(i as u32);
        } else if let Some(f) = self.faults.as_deref_mut() {
            f.due[i] = f64::NAN;
        }
        let inst = &mut self.insts[i];
        let in_flight = inst.busy && matches!(inst.step, StepKind::Prefill | StepKind::Mixed(_));
        inst.busy = false;
        let mut lost: Vec<u32> = if in_flight { std::mem::take(&mut inst.batch) } else { Vec::new() };
        inst.batch.clear();
        lost.extend(inst.partial.take().map(|(r, _)| r));
        match inst.dec.running.drain_requests() {
            Some(rows) => lost.extend(rows),
            None => {
                self.stop.get_or_insert(Error::Internal("faults ran with a running set they cannot drain".into()));
            }
        }
        // Queued prompts on a front instance lose nothing; landed hand-offs on a decode instance lose their KV.
        let queued_lost = inst.role == Role::Decode;
        let mut moved: Vec<(u32, bool)> = lost.into_iter().map(|r| (r, true)).collect();
        moved.extend(inst.queue.drain(..).map(|r| (r, queued_lost)));
        inst.queued_tokens = 0;
        inst.dec.kv_used = 0;
        inst.dec.pending_pass = crate::cost::model::StepWork { flops: 0.0, bytes: 0.0 };
        if let (Some(f), true) = (self.faults.as_deref_mut(), i < self.n_front) {
            // Finished prefills waiting for a decode instance kept their KV here: it is lost too.
            let t = &self.t;
            f.parked_back.retain(|&r| {
                let here = t.prefill_instance[r as usize] == i as i32;
                if here {
                    moved.push((r, true));
                }
                !here
            });
        }
        moved.sort_unstable();
        for (r, was_lost) in moved {
            if was_lost {
                self.lose(r, now);
            } else {
                self.route_to_front(r, now);
            }
        }
    }

    /// Instance `i` is repaired now, empty; a front instance takes the requests waiting for one, a decode
    /// instance starts the hand-offs waiting for one.
    fn bring_up(&mut self, i: usize, now: f64) {
        self.insts[i].dec.last_decode_end = now;
        let Some(f) = self.faults.as_deref_mut() else { return };
        if i < self.n_front {
            for r in std::mem::take(&mut f.parked) {
                self.route_to_front(r, now);
            }
        } else {
            for r in std::mem::take(&mut f.parked_back) {
                self.enqueue_transfer(r, now);
            }
        }
    }

    /// Whether request `r`'s hand-off must wait for a decode instance (every one is down): then it waits,
    /// its KV on its prefill instance, and starts when one is repaired.
    pub(super) fn park_for_decode(&mut self, r: u32) -> bool {
        let Some(f) = self.faults.as_deref_mut() else { return false };
        if (self.n_front..self.insts.len()).any(|i| !f.instances.is_down(i)) {
            return false;
        }
        f.parked_back.push_back(r);
        true
    }

    /// Request `r`'s work is thrown away now: it starts over, or fails past `faults.max_retries`.
    pub(super) fn lose(&mut self, r: u32, now: f64) {
        let Some(f) = self.faults.as_deref_mut() else { return };
        let t = &mut self.t;
        let ri = r as usize;
        // What the user has already seen stays seen (a prefill in flight has not delivered its token).
        if t.first_token_s[ri] <= now && f.first_seen[ri].is_nan() {
            f.first_seen[ri] = t.first_token_s[ri];
        }
        t.first_token_s[ri] = f.first_seen[ri];
        if let (Some(seen), Some(kept)) = (t.first_token_seen_s.get_mut(ri), f.first_seen_later.get_mut(ri)) {
            if *seen <= now && kept.is_nan() {
                *kept = *seen;
            }
            *seen = *kept;
        }
        let lost = (now - t.prefill_start_s[ri]).max(0.0);
        t.lost_s[ri] += lost;
        f.stats.lost_work_s += lost;
        t.decode_instance[ri] = -1;
        t.local_decode[ri] = false;
        if self.retry(r, now) {
            self.route_to_front(r, now);
        }
    }

    /// Request `r` lost its work now: it may try again (counted; `true`), or it has tried
    /// `faults.max_retries` times already and fails for good (`false`).
    fn retry(&mut self, r: u32, now: f64) -> bool {
        let Some(f) = self.faults.as_deref_mut() else { return false };
        let ri = r as usize;
        if self.t.retries[ri] >= f.max_retries {
            self.t.failed[ri] = true;
            f.stats.failed_requests += 1;
            self.remaining -= 1;
            self.horizon = self.horizon.max(now);
            self.population_change(now, false);
            return false;
        }
        if self.t.retries[ri] == 0 {
            f.stats.retried_requests += 1;
        }
        self.t.retries[ri] += 1;
        true
    }

    /// With `faults.transfer_failure_p`: request `r`'s transfer on hop `stage` has just completed, and
    /// whether it failed — then its time on the hop is lost and it is sent again on that hop `faults.retry_s`
    /// later (or the request fails past `faults.max_retries`). The draw is keyed by (seed, request, its hop
    /// transfers so far).
    pub(super) fn transfer_failed(&mut self, stage: usize, r: u32, now: f64) -> bool {
        let Some(f) = self.faults.as_deref_mut() else { return false };
        if f.transfer_failure_p == 0.0 {
            return false;
        }
        let ri = r as usize;
        let k = f.sent[ri];
        f.sent[ri] += 1;
        let m = splitmix(f.seed ^ 0xBB67_AE85_84CA_A73B, r as u64, k as u64);
        if m as f64 * (1.0 / (1u64 << 53) as f64) >= f.transfer_failure_p {
            return false;
        }
        f.stats.transfer_failures += 1;
        self.transfer_lost(r, stage, now);
        true
    }

    /// Request `r`'s transfer on hop `stage` is lost now (it failed, or its channel did): its time on the hop
    /// is lost work, and it is sent again on that hop `faults.retry_s` later (or fails past
    /// `faults.max_retries`).
    fn transfer_lost(&mut self, r: u32, stage: usize, now: f64) {
        let Some(f) = self.faults.as_deref_mut() else { return };
        let ri = r as usize;
        let lost = (now - f.hop_start[ri]).max(0.0);
        f.stats.lost_work_s += lost;
        let retry_s = f.retry_s;
        self.t.lost_s[ri] += lost;
        if self.retry(r, now) {
            if let Some(f) = self.faults.as_deref_mut() {
                f.resent[ri] = true;
            }
            self.q.push(now + retry_s, Priority::Normal, Ev::Resend { stage: stage as u8, request: r });
        }
    }

    /// With transfer failures: request `r`'s transfer starts on a hop now; returns whether it is one sent
    /// again (its wait then counts from when it was sent again, not from its first token).
    pub(super) fn transfer_started(&mut self, r: u32, now: f64) -> bool {
        let Some(f) = self.faults.as_deref_mut() else { return false };
        let ri = r as usize;
        if let Some(h) = f.hop_start.get_mut(ri) {
            *h = now;
        }
        f.resent.get_mut(ri).is_some_and(|x| std::mem::replace(x, false))
    }

    /// Request `r` completes: it keeps the first token the user saw in an attempt since lost.
    #[cold]
    pub(super) fn keep_first_seen(&mut self, r: u32) {
        let Some(f) = self.faults.as_deref() else { return };
        let ri = r as usize;
        if !f.first_seen[ri].is_nan() {
            self.t.first_token_s[ri] = f.first_seen[ri];
        }
        if let (Some(seen), Some(&kept)) = (self.t.first_token_seen_s.get_mut(ri), f.first_seen_later.get(ri)) {
            if !kept.is_nan() {
                *seen = kept;
            }
        }
    }

    /// The live front instance the router picks for the next request (`None`: every one is down — the
    /// request is parked until one is repaired).
    pub(super) fn pick_live_front(&mut self, r: u32) -> Option<usize> {
        let f = self.faults.as_deref_mut()?;
        f.live.clear();
        f.live.extend((0..self.n_front).filter(|&i| !f.instances.is_down(i)));
        if f.live.is_empty() {
            f.parked.push_back(r);
            return None;
        }
        let view = Live { pool: Pool(&self.insts[..self.n_front]), ids: &f.live };
        Some(f.live[self.front_router.pick(&view)])
    }

    /// The live decode instance (index in the decode pool) the router picks; with none up (every one failed
    /// while the hand-off was on the wire), one of all (the hand-off is lost when it lands).
    pub(super) fn pick_live_back(&mut self) -> usize {
        let back = &self.insts[self.n_front..];
        let Some(f) = self.faults.as_deref_mut() else { return self.back_router.pick(&Pool(back)) };
        f.live.clear();
        f.live.extend((0..back.len()).filter(|&d| !f.instances.is_down(self.n_front + d)));
        if f.live.is_empty() {
            return self.back_router.pick(&Pool(back));
        }
        let view = Live { pool: Pool(back), ids: &f.live };
        f.live[self.back_router.pick(&view)]
    }

    /// Every outage up to the run's end (`horizon`) as (instance, start, end), by instance then start; one in
    /// progress at the end ends there. With `link`, the network link's channels' instead (by channel).
    pub(super) fn outages(&self, link: bool) -> Vec<(u32, f64, f64)> {
        let Some(f) = self.faults.as_deref() else { return Vec::new() };
        if link { &f.channels } else { &f.instances }.clipped(self.horizon)
    }

    /// The run's fault totals, outages clipped to its end (`horizon`).
    pub(super) fn fault_stats(&self) -> Option<FaultStats> {
        let f = self.faults.as_deref()?;
        let mut s = f.stats;
        let end = self.horizon;
        let down = f.instances.clipped(end).iter().fold(0.0, |sum, &(_, a, b)| sum + (b - a));
        s.downtime_s = down;
        let capacity = self.insts.len() as f64 * end;
        s.availability = if capacity > 0.0 { 1.0 - down / capacity } else { 1.0 };
        Some(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::spec::FaultsSpec;

    fn run_of(seed: u64, dist: FaultDist) -> FaultRun {
        let random = RandomFaults { mtbf_s: 50.0, mttr_s: 5.0, dist, front: true, back: true };
        let f = Faults {
            random: Some(random),
            events: Vec::new(),
            link: None,
            link_events: Vec::new(),
            channels: 1,
            max_retries: 3,
            seed,
            transfer_failure_p: 0.0,
            retry_s: 0.0,
            spec: FaultsSpec::default(),
        };
        FaultRun::new(&f, 4, 0, false)
    }

    /// Up and repair times are separate draws: no repair time is an up time of the same instance rescaled
    /// (the keys of the k-th repair and of every up time differ), and instances and link channels draw
    /// apart.
    #[test]
    fn up_and_repair_draws_are_distinct() {
        let f = run_of(7, FaultDist::Exponential);
        let r = f.random.clone().unwrap();
        let link = RandomLink { mtbf_s: r.mtbf_s, mttr_s: r.mttr_s, dist: r.dist, per_channel: true };
        let mut seen = std::collections::HashSet::new();
        for i in 0..4 {
            for k in 0..200 {
                for repair in [false, true] {
                    let mean = if repair { r.mttr_s } else { r.mtbf_s };
                    // Instance i and the link's channel i draw apart too.
                    for u in [f.draw(&r, i, k, repair) / mean, f.link_draw(&link, i, k, repair) / mean] {
                        assert!(u.is_finite() && u > 0.0);
                        assert!(seen.insert(u.to_bits()), "unit {i}, draw {k}, repair {repair}: {u} drawn twice");
                    }
                }
            }
        }
    }

    /// Each seed gives its own draws (256 seeds, 256 different first up times).
    #[test]
    fn seeds_draw_apart() {
        let firsts: std::collections::HashSet<u64> = (0..256)
            .map(|seed| {
                let f = run_of(seed, FaultDist::Exponential);
                let r = f.random.clone().unwrap();
                f.draw(&r, 0, 0, false).to_bits()
            })
            .collect();
        assert_eq!(firsts.len(), 256);
    }

    /// Exponential draws have the given means (20,000 draws: within 5 standard errors), fixed ones are them.
    #[test]
    fn draws_have_the_given_means() {
        let f = run_of(3, FaultDist::Exponential);
        let r = f.random.clone().unwrap();
        let n = 20_000u64;
        for (repair, mean) in [(false, 50.0), (true, 5.0)] {
            let avg = (0..n).map(|k| f.draw(&r, 1, k, repair)).sum::<f64>() / n as f64;
            assert!((avg - mean).abs() < 5.0 * mean / (n as f64).sqrt(), "{avg} vs {mean}");
        }
        let g = run_of(3, FaultDist::Fixed);
        let rg = g.random.clone().unwrap();
        assert_eq!((g.draw(&rg, 2, 9, false), g.draw(&rg, 2, 9, true)), (50.0, 5.0));
    }
}
