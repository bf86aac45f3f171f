//! Mechanism: the cluster state machines driven by the event kernel.
//!
//! Topology (disaggregated): arrivals → prefill router → prefill pool → KV link (FCFS channels) → decode
//! router → decode pool (continuous batching, KV-capacity admission) → done. Colocated: arrivals → router →
//! instances that run a prefill step whenever a queued prompt is admissible and a decode step otherwise.
//!
//! One kernel event per batch step at most; with `engine.macro_steps` a decode (or colocated) instance
//! processes consecutive step ends inline while they come strictly before the next pending event — exactly
//! the order the kernel would have used, so results are identical (tested). The engine asks `cost` for step
//! times, `policy` for routing/batching decisions and `handoff` for transfer costs.

pub mod kernel;
pub mod running;

use std::collections::VecDeque;
use std::time::Instant;

use kernel::{EventQueue, Priority};
use running::{Cols, RunningSet};

use crate::cost::model::ModelCost;
use crate::cost::roofline::{kv_capacity_tokens, StepTimer};
use crate::error::{Error, Result};
use crate::handoff::link::FcfsLink;
use crate::handoff::transfer::TransferCost;
use crate::metrics::itl::ItlHistogram;
use crate::metrics::stats::{InstanceStats, LinkStats, RunStats};
use crate::metrics::table::RequestTable;
use crate::policy::batching::{
    colocated_prefill_len, decode_admit_len, ever_fits, prefill_batch_len, reservation, Occupancy,
};
use crate::policy::router::{LoadView, Router, Rule};
use crate::scenario::{Pool, Scenario, Topology, Workload};
use crate::workload::{generate, Trace};

/// What a run returns: the per-request table and the run totals.
#[derive(Clone, Debug)]
pub struct SimOutput {
    pub table: RequestTable,
    pub stats: RunStats,
}

#[derive(Clone, Copy, Debug)]
enum Ev {
    /// The next request of the workload arrives.
    Arrival,
    PrefillWake(u32),
    PrefillDone(u32),
    TransferDone(u32),
    DecodeWake(u32),
    DecodeDone(u32),
    ColocatedWake(u32),
    ColocatedDone(u32),
}

struct PrefillInst {
    timer: StepTimer,
    queue: VecDeque<u32>,
    queued_tokens: u64,
    batch: Vec<u32>,
    busy: bool,
    wake_pending: bool,
    stats: InstanceStats,
}

struct DecodeInst {
    timer: StepTimer,
    queue: VecDeque<u32>,
    running: RunningSet,
    kv_used: u64,
    kv_capacity: u64,
    busy: bool,
    wake_pending: bool,
    last_decode_end: f64,
    stats: InstanceStats,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum ColoStep {
    Prefill,
    Decode,
}

struct ColoInst {
    d: DecodeInst,
    batch: Vec<u32>,
    step: ColoStep,
}

struct Pools<'a, T>(&'a [T]);

impl LoadView for Pools<'_, PrefillInst> {
    fn instances(&self) -> usize {
        self.0.len()
    }
    fn queued_tokens(&self, i: usize) -> u64 {
        self.0[i].queued_tokens
    }
    fn queued_requests(&self, i: usize) -> u64 {
        self.0[i].queue.len() as u64
    }
    fn running(&self, _: usize) -> u64 {
        0
    }
}

impl LoadView for Pools<'_, DecodeInst> {
    fn instances(&self) -> usize {
        self.0.len()
    }
    fn queued_tokens(&self, _: usize) -> u64 {
        0
    }
    fn queued_requests(&self, i: usize) -> u64 {
        self.0[i].queue.len() as u64
    }
    fn running(&self, i: usize) -> u64 {
        self.0[i].running.len() as u64
    }
}

struct ColoView<'a>(&'a [ColoInst], &'a [u32]);

impl LoadView for ColoView<'_> {
    fn instances(&self) -> usize {
        self.0.len()
    }
    fn queued_tokens(&self, i: usize) -> u64 {
        self.0[i].d.queue.iter().map(|&r| self.1[r as usize] as u64).sum()
    }
    fn queued_requests(&self, i: usize) -> u64 {
        self.0[i].d.queue.len() as u64
    }
    fn running(&self, i: usize) -> u64 {
        self.0[i].d.running.len() as u64
    }
}

struct Sim {
    t: RequestTable,
    q: EventQueue<Ev>,
    model: ModelCost,
    max_prefill_tokens: u32,
    max_batch: u64,
    macro_steps: bool,
    prefill: Vec<PrefillInst>,
    decode: Vec<DecodeInst>,
    colo: Vec<ColoInst>,
    link: FcfsLink,
    xfer: TransferCost,
    link_stats: LinkStats,
    prefill_router: Router,
    decode_router: Router,
    /// KV capacity that decides rejection (the first decode / colocated instance).
    reject_capacity: u64,
    next_arrival: usize,
    remaining: usize,
    completed: u64,
    rejected: u64,
    population: u64,
    population_t: f64,
    population_area: f64,
    horizon: f64,
    itl: ItlHistogram,
    finished: Vec<u32>,
}

/// Run a validated scenario to completion.
pub fn simulate(scenario: Scenario) -> Result<SimOutput> {
    let start = Instant::now();
    let trace = match &scenario.workload {
        Workload::Generated { requests, seed, arrivals, prompt, output } => {
            let t = generate(*requests, *seed, *arrivals, *prompt, *output);
            if let Some(i) = t.arrival_s().iter().position(|a| !a.is_finite()) {
                return Err(Error::field(
                    "workload.arrivals",
                    format!("the arrival process produced a non-finite time at request {i}"),
                ));
            }
            t
        }
        Workload::Trace(_) => match scenario.workload.clone() {
            Workload::Trace(t) => t,
            Workload::Generated { .. } => return Err(Error::Internal("workload changed kind".into())),
        },
    };
    let mut sim = Sim::new(&scenario, trace)?;
    sim.run()?;
    let mut out = sim.finish(&scenario);
    out.stats.wall_s = start.elapsed().as_secs_f64();
    Ok(out)
}

fn instance_stats(name: String, pool: &Pool) -> InstanceStats {
    let dev = &pool.device.spec;
    let n = pool.devices_per_instance as f64;
    InstanceStats {
        name,
        device: pool.device.key.clone(),
        devices: pool.devices_per_instance,
        idle_w: dev.idle_w * n,
        peak_flops_per_s: dev.peak_tflops * 1e12 * n,
        peak_bytes_per_s: dev.hbm_tb_per_s * 1e12 * n,
        ..Default::default()
    }
}

impl Sim {
    fn new(sc: &Scenario, trace: Trace) -> Result<Self> {
        let model = ModelCost::new(&sc.model.spec, sc.lm_head);
        let timer = |p: &Pool| StepTimer::new(&p.device.spec, p.devices_per_instance, p.power_cap_w, sc.roofline);
        let capacity = |p: &Pool| -> Result<u64> {
            kv_capacity_tokens(
                &p.device.spec,
                p.devices_per_instance,
                sc.mem_util,
                model.resident_weight_bytes(),
                model.kv_bytes_per_token,
            )
            .map_err(|_| Error::Internal("KV capacity checked at validation".into()))
        };
        let decode_inst = |name: String, p: &Pool| -> Result<DecodeInst> {
            let cap = capacity(p)?;
            let mut stats = instance_stats(name, p);
            stats.kv_capacity_tokens = Some(cap);
            Ok(DecodeInst {
                timer: timer(p),
                queue: VecDeque::new(),
                running: RunningSet::new(sc.macro_steps),
                kv_used: 0,
                kv_capacity: cap,
                busy: false,
                wake_pending: false,
                last_decode_end: 0.0,
                stats,
            })
        };
        let (mut prefill, mut decode, mut colo) = (Vec::new(), Vec::new(), Vec::new());
        match &sc.topology {
            Topology::Disaggregated { prefill: pp, decode: dp } => {
                for i in 0..pp.instances {
                    prefill.push(PrefillInst {
                        timer: timer(pp),
                        queue: VecDeque::new(),
                        queued_tokens: 0,
                        batch: Vec::new(),
                        busy: false,
                        wake_pending: false,
                        stats: instance_stats(format!("prefill-{i}"), pp),
                    });
                }
                for i in 0..dp.instances {
                    decode.push(decode_inst(format!("decode-{i}"), dp)?);
                }
            }
            Topology::Colocated { pool } => {
                for i in 0..pool.instances {
                    colo.push(ColoInst {
                        d: decode_inst(format!("colocated-{i}"), pool)?,
                        batch: Vec::new(),
                        step: ColoStep::Decode,
                    });
                }
            }
        }
        let reject_capacity = decode.first().or(colo.first().map(|c| &c.d)).map(|d| d.kv_capacity);
        let reject_capacity = reject_capacity.ok_or_else(|| Error::Internal("no KV-holding pool".into()))?;
        let (arrival, prompt, output) = trace.into_parts();
        let n = arrival.len();
        if n > u32::MAX as usize {
            return Err(Error::field("workload", format!("at most {} requests per run", u32::MAX)));
        }
        let mut t = RequestTable::new(arrival, prompt, output);
        // Rejection depends only on sizes, so the measured set (completed requests after the warm-up
        // fraction, in arrival order) is known before the run.
        let mut completed = 0u64;
        for i in 0..n {
            t.rejected[i] = !ever_fits(t.prompt_tokens[i], t.output_tokens[i], reject_capacity);
            completed += !t.rejected[i] as u64;
        }
        let warmup = (sc.warmup_fraction * completed as f64).floor() as u64;
        let mut seen = 0u64;
        for i in 0..n {
            if !t.rejected[i] {
                t.measured[i] = seen >= warmup;
                seen += 1;
            }
        }
        let link_spec = &sc.link.spec.spec;
        Ok(Sim {
            t,
            q: EventQueue::new(),
            xfer: TransferCost::new(link_spec, sc.compression, sc.model.spec.kv_bytes_per_value),
            link: FcfsLink::new(sc.link.channels),
            link_stats: LinkStats { name: sc.link.spec.key.clone(), channels: sc.link.channels, ..Default::default() },
            model,
            max_prefill_tokens: sc.max_prefill_tokens,
            max_batch: sc.max_decode_batch as u64,
            macro_steps: sc.macro_steps,
            prefill,
            decode,
            colo,
            prefill_router: Router::new(Rule::from(sc.prefill_routing)),
            decode_router: Router::new(Rule::from(match sc.topology {
                Topology::Disaggregated { .. } => sc.decode_routing,
                Topology::Colocated { .. } => sc.colocated_routing,
            })),
            reject_capacity,
            next_arrival: 0,
            remaining: n,
            completed: 0,
            rejected: 0,
            population: 0,
            population_t: 0.0,
            population_area: 0.0,
            horizon: 0.0,
            itl: ItlHistogram::default(),
            finished: Vec::new(),
        })
    }

    fn run(&mut self) -> Result<()> {
        if let Some(&a) = self.t.arrival_s.first() {
            self.q.push(a, Priority::Normal, Ev::Arrival);
        }
        while self.remaining > 0 {
            let Some((now, ev)) = self.q.pop() else {
                return Err(Error::Internal(format!(
                    "event queue ran dry with {} requests unfinished",
                    self.remaining
                )));
            };
            match ev {
                Ev::Arrival => self.on_arrival(now),
                Ev::PrefillWake(p) => {
                    let p = p as usize;
                    self.prefill[p].wake_pending = false;
                    if !self.prefill[p].busy {
                        self.start_prefill(p, now);
                    }
                }
                Ev::PrefillDone(p) => self.on_prefill_done(p as usize, now),
                Ev::TransferDone(ch) => self.on_transfer_done(ch as usize, now)?,
                Ev::DecodeWake(d) => {
                    let d = d as usize;
                    self.decode[d].wake_pending = false;
                    if !self.decode[d].busy {
                        let end = self.decode_boundary(d, now);
                        self.schedule_decode(d, end);
                    }
                }
                Ev::DecodeDone(d) => {
                    let end = self.decode_step_end(d as usize, now);
                    self.schedule_decode(d as usize, end);
                }
                Ev::ColocatedWake(i) => {
                    let i = i as usize;
                    self.colo[i].d.wake_pending = false;
                    if !self.colo[i].d.busy {
                        let end = self.colo_boundary(i, now);
                        self.schedule_colo(i, end);
                    }
                }
                Ev::ColocatedDone(i) => {
                    let end = self.colo_step_end(i as usize, now);
                    self.schedule_colo(i as usize, end);
                }
            }
        }
        Ok(())
    }

    fn population_change(&mut self, now: f64, up: bool) {
        debug_assert!(now >= self.population_t, "population updates out of time order");
        self.population_area += self.population as f64 * (now - self.population_t);
        self.population_t = now;
        if up {
            self.population += 1;
        } else {
            self.population -= 1;
        }
    }

    fn complete(&mut self, r: u32, now: f64) {
        self.t.finish_s[r as usize] = now;
        self.population_change(now, false);
        self.remaining -= 1;
        self.completed += 1;
        self.horizon = self.horizon.max(now);
    }

    fn on_arrival(&mut self, now: f64) {
        let r = self.next_arrival;
        self.next_arrival += 1;
        if self.t.rejected[r] {
            self.remaining -= 1;
            self.rejected += 1;
        } else {
            self.population_change(now, true);
            let r = r as u32;
            let prompt = self.t.prompt_tokens[r as usize] as u64;
            if self.colo.is_empty() {
                let p = self.prefill_router.pick(&Pools(&self.prefill));
                let inst = &mut self.prefill[p];
                inst.queue.push_back(r);
                inst.queued_tokens += prompt;
                if !inst.busy && !inst.wake_pending {
                    inst.wake_pending = true;
                    self.q.push(now, Priority::Normal, Ev::PrefillWake(p as u32));
                }
            } else {
                let i = self.decode_router.pick(&ColoView(&self.colo, &self.t.prompt_tokens));
                let inst = &mut self.colo[i].d;
                inst.queue.push_back(r);
                if !inst.busy && !inst.wake_pending {
                    inst.wake_pending = true;
                    self.q.push(now, Priority::Normal, Ev::ColocatedWake(i as u32));
                }
            }
        }
        if let Some(&next) = self.t.arrival_s.get(self.next_arrival) {
            self.q.push(next, Priority::Normal, Ev::Arrival);
        }
    }

    fn start_prefill(&mut self, p: usize, now: f64) {
        let inst = &mut self.prefill[p];
        let n = prefill_batch_len(&inst.queue, &self.t.prompt_tokens, self.max_prefill_tokens);
        if n == 0 {
            inst.busy = false;
            return;
        }
        inst.batch.clear();
        let (mut tokens, mut attention) = (0u64, 0u128);
        for _ in 0..n {
            let Some(r) = inst.queue.pop_front() else {
                break;
            };
            let s = self.t.prompt_tokens[r as usize] as u64;
            tokens += s;
            attention += self.model.prompt_attention_flops(s);
            self.t.prefill_start_s[r as usize] = now;
            self.t.prefill_instance[r as usize] = p as i32;
            inst.batch.push(r);
        }
        inst.queued_tokens -= tokens;
        let work = self.model.prefill(tokens, n as u64, attention);
        let timing = inst.timer.time(work);
        inst.stats.add_step(work, timing, n as u64, true);
        inst.busy = true;
        self.q.push(now + timing.time_s, Priority::Normal, Ev::PrefillDone(p as u32));
    }

    fn on_prefill_done(&mut self, p: usize, now: f64) {
        let batch = std::mem::take(&mut self.prefill[p].batch);
        for &r in &batch {
            self.t.first_token_s[r as usize] = now;
            if self.t.output_tokens[r as usize] <= 1 {
                self.complete(r, now);
            } else {
                self.link.request(r);
            }
        }
        self.prefill[p].batch = batch;
        self.grant_transfers(now);
        self.start_prefill(p, now);
    }

    fn grant_transfers(&mut self, now: f64) {
        while let Some((ch, r)) = self.link.grant() {
            let i = r as usize;
            self.t.kv_start_s[i] = now;
            let x = self.xfer.transfer(self.model.handoff_bytes(self.t.prompt_tokens[i]));
            let s = &mut self.link_stats;
            s.busy_s += x.duration_s;
            s.transfers += 1;
            s.handoff_bytes += self.model.handoff_bytes(self.t.prompt_tokens[i]);
            s.wire_bytes += x.wire_bytes;
            s.link_j += x.link_j;
            s.transit_j += x.transit_j;
            s.wait_s += now - self.t.first_token_s[i];
            s.transit_bound += x.transit_bound as u64;
            self.q.push(now + x.duration_s, Priority::Normal, Ev::TransferDone(ch as u32));
        }
    }

    fn on_transfer_done(&mut self, ch: usize, now: f64) -> Result<()> {
        let r =
            self.link.release(ch).ok_or_else(|| Error::Internal(format!("transfer finished on idle channel {ch}")))?;
        self.t.kv_ready_s[r as usize] = now;
        let d = self.decode_router.pick(&Pools(&self.decode));
        self.t.decode_instance[r as usize] = d as i32;
        let inst = &mut self.decode[d];
        inst.queue.push_back(r);
        if !inst.busy && !inst.wake_pending {
            inst.wake_pending = true;
            self.q.push(now, Priority::Normal, Ev::DecodeWake(d as u32));
        }
        self.grant_transfers(now);
        Ok(())
    }

    /// Continue a decode instance whose next step ends at `end`: inline while that comes strictly before
    /// every pending event (macro-steps), otherwise as a kernel event.
    fn schedule_decode(&mut self, d: usize, mut end: Option<f64>) {
        while let Some(e) = end {
            if self.macro_steps && e < self.q.next_time() {
                end = self.decode_step_end(d, e);
            } else {
                self.q.push(e, Priority::Normal, Ev::DecodeDone(d as u32));
                return;
            }
        }
    }

    fn schedule_colo(&mut self, i: usize, mut end: Option<f64>) {
        while let Some(e) = end {
            if self.macro_steps && e < self.q.next_time() {
                end = self.colo_step_end(i, e);
            } else {
                self.q.push(e, Priority::Normal, Ev::ColocatedDone(i as u32));
                return;
            }
        }
    }

    /// Step boundary of decode instance `d`: admit from the queue, then start a step if anything runs.
    /// Returns the end time of the started step.
    fn decode_boundary(&mut self, d: usize, now: f64) -> Option<f64> {
        let t = &mut self.t;
        let inst = &mut self.decode[d];
        admit_decode(inst, t, self.max_batch, now);
        start_decode_step(inst, &self.model, &t.prompt_tokens, now)
    }

    fn decode_step_end(&mut self, d: usize, now: f64) -> Option<f64> {
        let mut finished = std::mem::take(&mut self.finished);
        complete_decode_step(&mut self.decode[d], &self.t, &mut self.itl, &mut finished, now);
        for &r in &finished {
            self.complete(r, now);
        }
        finished.clear();
        self.finished = finished;
        self.decode_boundary(d, now)
    }

    /// Step boundary of colocated instance `i`: a prefill step if a queued prompt is admissible, else a
    /// decode step if anything runs, else idle.
    fn colo_boundary(&mut self, i: usize, now: f64) -> Option<f64> {
        let inst = &mut self.colo[i];
        let occ = Occupancy {
            running: inst.d.running.len() as u64,
            max_batch: self.max_batch,
            kv_used: inst.d.kv_used,
            kv_capacity: inst.d.kv_capacity,
        };
        let t = &mut self.t;
        let n = colocated_prefill_len(&inst.d.queue, &t.prompt_tokens, &t.output_tokens, self.max_prefill_tokens, occ);
        if n == 0 {
            inst.step = ColoStep::Decode;
            return start_decode_step(&mut inst.d, &self.model, &t.prompt_tokens, now);
        }
        inst.batch.clear();
        let (mut tokens, mut attention) = (0u64, 0u128);
        for _ in 0..n {
            let Some(r) = inst.d.queue.pop_front() else {
                break;
            };
            let i_r = r as usize;
            let s = t.prompt_tokens[i_r] as u64;
            tokens += s;
            attention += self.model.prompt_attention_flops(s);
            inst.d.kv_used += reservation(t.prompt_tokens[i_r], t.output_tokens[i_r]);
            t.prefill_start_s[i_r] = now;
            t.prefill_instance[i_r] = i as i32;
            inst.batch.push(r);
        }
        inst.d.stats.kv_peak_tokens = inst.d.stats.kv_peak_tokens.max(inst.d.kv_used);
        let work = self.model.prefill(tokens, n as u64, attention);
        let timing = inst.d.timer.time(work);
        inst.d.stats.add_step(work, timing, n as u64, true);
        inst.d.busy = true;
        inst.step = ColoStep::Prefill;
        Some(now + timing.time_s)
    }

    fn colo_step_end(&mut self, i: usize, now: f64) -> Option<f64> {
        match self.colo[i].step {
            ColoStep::Prefill => {
                let batch = std::mem::take(&mut self.colo[i].batch);
                for &r in &batch {
                    let ri = r as usize;
                    self.t.first_token_s[ri] = now;
                    if self.t.output_tokens[ri] <= 1 {
                        self.colo[i].d.kv_used -= reservation(self.t.prompt_tokens[ri], self.t.output_tokens[ri]);
                        self.complete(r, now);
                    } else {
                        self.t.decode_start_s[ri] = now;
                        self.t.decode_instance[ri] = i as i32;
                        let c = cols(&self.t);
                        self.colo[i].d.running.admit(r, c);
                    }
                }
                self.colo[i].batch = batch;
            }
            ColoStep::Decode => {
                let mut finished = std::mem::take(&mut self.finished);
                complete_decode_step(&mut self.colo[i].d, &self.t, &mut self.itl, &mut finished, now);
                for &r in &finished {
                    self.complete(r, now);
                }
                finished.clear();
                self.finished = finished;
            }
        }
        self.colo_boundary(i, now)
    }

    fn finish(self, sc: &Scenario) -> SimOutput {
        let mut instances = Vec::new();
        for p in self.prefill {
            instances.push(p.stats);
        }
        for d in self.decode {
            let mut s = d.stats;
            s.kv_end_tokens = d.kv_used;
            instances.push(s);
        }
        for c in self.colo {
            let mut s = c.d.stats;
            s.kv_end_tokens = c.d.kv_used;
            instances.push(s);
        }
        let static_j = instances.iter().map(|s| s.idle_w * self.horizon).sum();
        let link = matches!(sc.topology, Topology::Disaggregated { .. }).then_some(self.link_stats);
        let measured = self.t.measured.iter().filter(|&&m| m).count() as u64;
        let _ = self.reject_capacity;
        SimOutput {
            table: self.t,
            stats: RunStats {
                instances,
                link,
                horizon_s: self.horizon,
                events: self.q.processed(),
                population_area: self.population_area,
                completed: self.completed,
                rejected: self.rejected,
                measured,
                static_j,
                itl: self.itl,
                wall_s: 0.0,
            },
        }
    }
}

fn cols(t: &RequestTable) -> Cols<'_> {
    Cols { prompt: &t.prompt_tokens, output: &t.output_tokens, first_token_s: &t.first_token_s, measured: &t.measured }
}

/// Admit queued requests of a disaggregated decode instance at a step boundary.
fn admit_decode(inst: &mut DecodeInst, t: &mut RequestTable, max_batch: u64, now: f64) {
    let occ = Occupancy {
        running: inst.running.len() as u64,
        max_batch,
        kv_used: inst.kv_used,
        kv_capacity: inst.kv_capacity,
    };
    let n = decode_admit_len(&inst.queue, &t.prompt_tokens, &t.output_tokens, occ);
    for _ in 0..n {
        let Some(r) = inst.queue.pop_front() else {
            break;
        };
        let i = r as usize;
        inst.kv_used += reservation(t.prompt_tokens[i], t.output_tokens[i]);
        t.decode_start_s[i] = now;
        inst.running.admit(r, cols(t));
    }
    inst.stats.kv_peak_tokens = inst.stats.kv_peak_tokens.max(inst.kv_used);
}

/// Start a decode step over everything running; `None` (and idle) when nothing runs.
fn start_decode_step(inst: &mut DecodeInst, model: &ModelCost, prompt: &[u32], now: f64) -> Option<f64> {
    if inst.running.is_empty() {
        inst.busy = false;
        return None;
    }
    let b = inst.running.len() as u64;
    let work = model.decode(inst.running.ctx_tokens(prompt), b);
    let timing = inst.timer.time(work);
    inst.stats.add_step(work, timing, b, false);
    inst.busy = true;
    Some(now + timing.time_s)
}

/// Finish a decode step at `now`: tokens, inter-token gaps, finished sequences (their KV released).
fn complete_decode_step(
    inst: &mut DecodeInst,
    t: &RequestTable,
    itl: &mut ItlHistogram,
    finished: &mut Vec<u32>,
    now: f64,
) {
    let gap = now - inst.last_decode_end;
    inst.running.complete_step(now, gap, cols(t), itl, finished);
    inst.last_decode_end = now;
    for &r in finished.iter() {
        inst.kv_used -= reservation(t.prompt_tokens[r as usize], t.output_tokens[r as usize]);
    }
}
