//! Mechanism: the cluster state machines driven by the event kernel.
//!
//! Every instance is one [`instance::Instance`] with a role (prefill, decode, colocated), driven by one
//! event pair (`Ev::Wake`, `Ev::StepDone`); its role decides what a step holds (`prefill.rs` for prefill
//! and colocated instances, `decode.rs` for decode instances).
//!
//! Topology (disaggregated): arrivals → prefill router → prefill instances → hand-off path (FCFS channels,
//! a processor-sharing link, or a host-staged chain of hops; whole or layer-wise streamed) → decode router
//! → decode instances (continuous batching, KV-capacity admission) → done. Colocated: arrivals → router →
//! colocated instances that run a prefill step whenever a queued prompt is admissible and a decode step
//! otherwise. With conditional disaggregation a prefill instance also decodes the requests the policy keeps
//! local.
//!
//! One kernel event per batch step at most (plus one per transfer, and one per streamed prefill batch);
//! with `engine.macro_steps` the instances' step ends are kept out of the kernel's heap, in its step
//! calendar (one slot per instance, the instance's index), which the kernel merges with the heap in
//! exactly its `(time, priority, seq)` order — so results are identical (tested), and a run with many
//! instances no longer pays a heap push and pop among all pending events for every batch step. The
//! engine asks `cost` for step times, `policy` for routing/batching decisions and `handoff` for transfer
//! costs.

mod decode;
mod faults;
mod instance;
pub mod kernel;
mod paged;
mod path;
mod prefill;
mod prefix;
pub mod running;
mod sessions;
mod stream;

pub use stream::RowSink;

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

/// Work units (kernel events and calendar step ends) between two checks of the cancel flag and of
/// `engine.max_steps`.
pub const CHECK_EVERY: u64 = 1 << 14;

use kernel::{EventQueue, Next, Priority};
use running::{Cols, RunningSet};

use crate::ceilings::Ceilings;
use crate::cost::model::{ModelCost, StepWork};
use crate::cost::roofline::{StepTimer, StepTiming};
use crate::error::{Error, Result};
use crate::handoff::plan::HandoffPlan;
use crate::metrics::itl::ItlHistogram;
use crate::metrics::rows::RowSummary;
use crate::metrics::stats::{InstanceStats, RunStats};
use crate::metrics::table::RequestTable;
use crate::metrics::timeline::Timeline;
use crate::policy::batching::{ever_fits, KvRule};
use crate::policy::router::Router;
use crate::scenario::{Disaggregate, OverContext, Pool, Requests, Scenario, Topology, Workload};
use crate::workload::source::{GeneratedSource, RequestSource, TableSource};

use instance::{Instance, Role};
use path::Path;

/// What a run returns: the per-request table and the run totals.
#[derive(Clone, Debug)]
pub struct SimOutput {
    pub table: RequestTable,
    pub stats: RunStats,
    /// The scenario's analytic ceilings for the requests that ran.
    pub ceilings: Ceilings,
    /// A streamed run ([`simulate_streamed`]): the per-request figures of the summary, accumulated as
    /// requests finished (its `table` is then empty).
    pub rows: Option<RowSummary>,
    /// The run's spans with `engine.timeline` (`None` without).
    pub timeline: Option<Timeline>,
}

#[derive(Clone, Copy, Debug)]
enum Ev {
    /// The next request of the workload arrives.
    Arrival,
    /// Instance `i` has work queued while idle: its next step may start.
    Wake(u32),
    /// Instance `i`'s step ends (without `engine.macro_steps`; with it, step ends live in the kernel's step
    /// calendar, slot `i`).
    StepDone(u32),
    /// The first layer of front instance `i`'s in-flight prefill batch is done: its streamed hand-offs
    /// may start.
    StreamStart(u32),
    /// A transfer on an FCFS channel of a hop finished.
    HopDone { stage: u8, lane: u32, channel: u32 },
    /// The next completion on a processor-sharing link (stale if `generation` moved on).
    SharedDone { stage: u8, lane: u32, generation: u32 },
    /// A transfer on a processor-sharing link has landed (data done + latency).
    Landed { stage: u8, request: u32 },
    /// The next layer slice on a channel finished (per-slice streaming).
    Slice { stage: u8, lane: u32, channel: u32 },
    /// Turn (row) `r` of a session arrives (`workload.sessions`).
    Turn(u32),
    /// Instance `i` fails (`fail`) or an outage of it ends; `random`: an outage of `faults.instance`, which
    /// draws the next event of its instance (`faults.rs`).
    Fault { i: u32, fail: bool, random: bool },
    /// Request `request`'s failed transfer on hop `stage` is sent again (`faults.transfer_failure_p`).
    Resend { stage: u8, request: u32 },
    /// Channel `unit` of the network link (`faults::WHOLE_LINK`: every channel) fails (`fail`) or an outage
    /// of it ends; `random`: an outage of `faults.link`, which draws the next.
    LinkFault { unit: u32, fail: bool, random: bool },
}

/// Decoding state of an instance (its decode rows and KV memory); every role has one.
struct Decoder {
    running: RunningSet,
    kv_used: u64,
    kv_capacity: u64,
    last_decode_end: f64,
    /// Work added to the next decode step (receiver-side decompression of just-admitted hand-offs).
    pending_pass: StepWork,
    /// How KV is given out (`KvRule::RESERVE`, or paged blocks).
    rule: KvRule,
    /// Paged KV: growth, preemption and resumption state (`None` with reserved KV).
    paged: Option<Box<paged::Paged>>,
    /// Speculative decoding: what drafting costs (`None`: one token per sequence and step).
    draft: Option<Box<decode::Draft>>,
}

impl Decoder {
    /// A decoder of `capacity` KV tokens (rounded down to whole blocks when paged); the fast running-set
    /// representation (reserved or paged) when `fast`.
    fn new(capacity: u64, fast: bool, paged: Option<paged::Paged>) -> Self {
        let rule = paged.as_ref().map_or(KvRule::RESERVE, |p| p.rule(capacity));
        let kv_capacity = capacity.checked_div(rule.block).map_or(capacity, |blocks| blocks * rule.block);
        Decoder {
            running: if rule.block > 0 { RunningSet::paged(rule.block, fast) } else { RunningSet::new(fast) },
            kv_used: 0,
            kv_capacity,
            last_decode_end: 0.0,
            pending_pass: StepWork { flops: 0.0, bytes: 0.0 },
            rule,
            paged: paged.map(Box::new),
            draft: None,
        }
    }

    /// The same decoder verifying `spec`'s drafts on every step (each sequence gets its own number of tokens;
    /// the fast speculative running set when `fast` and KV is reserved, the plain paged set with paged KV),
    /// drafting with `draft` (the draft model or head as this pool runs it).
    fn speculative(mut self, spec: &crate::scenario::speculative::Speculative, draft: ModelCost, fast: bool) -> Self {
        let drafts = running::Speculation::new(spec.acceptance.clone(), spec.seed);
        self.running = if self.rule.block > 0 {
            RunningSet::paged_speculative(self.rule.block, drafts)
        } else {
            RunningSet::speculative(drafts, fast)
        };
        self.draft = Some(Box::new(decode::Draft { gamma: spec.gamma, model: draft }));
        self
    }
}

impl Decoder {
    /// KV tokens a request (`prompt`, `output`) takes when it is admitted to decode with its first token:
    /// what it holds and what its first decode step needs — with reserved KV its reservation, with paged KV its
    /// blocks and the first step's ([`KvRule::admit_decoding`]; with speculative decoding, the blocks of
    /// every token that step gives it).
    fn first_decode_take(&self, r: u32, prompt: u32, output: u32) -> u64 {
        self.running.step_take(self.rule, r, prompt, output, 1)
    }

    /// Add the pending receiver-side pass (decompression / layout conversion of just-admitted hand-offs) to
    /// the step about to start, and clear it.
    #[inline(always)]
    fn take_pending_pass(&mut self, timer: &StepTimer, work: &mut StepWork, timing: &mut StepTiming) {
        if self.pending_pass.bytes > 0.0 {
            timer.add_pass(self.pending_pass, work, timing);
            self.pending_pass = StepWork { flops: 0.0, bytes: 0.0 };
        }
    }
}

struct Sim<'c> {
    /// Set from outside to stop the run ([`simulate_with`]).
    cancel: Option<&'c AtomicBool>,
    /// Work units done (heap events + calendar step ends), for the periodic checks.
    work: u64,
    max_steps: u64,
    /// `engine.timeline_max_spans` when the timeline is recorded.
    timeline_max_spans: Option<u64>,
    /// Why the run must stop (set by a check; the event loop returns it).
    stop: Option<Error>,
    t: RequestTable,
    q: EventQueue<Ev>,
    /// The hand-off plan (bytes per token, the sender's and receiver's passes, the hops).
    plan: HandoffPlan,
    max_prefill_tokens: u32,
    /// `scheduler.policy = "chunked"`, and its token budget per step.
    chunked: bool,
    max_num_batched_tokens: u32,
    max_batch: u64,
    macro_steps: bool,
    colocated: bool,
    /// Paged KV in a disaggregated run: prefill instances hold hand-offs' KV, decode instances pull
    /// (`paged.rs`).
    hold: bool,
    disaggregate: Disaggregate,
    /// Every instance ([`instance`]): the front pool (prefill or colocated) first, then the decode pool.
    insts: Vec<Instance>,
    /// The number of front instances (the index of the first decode instance).
    n_front: usize,
    path: Path,
    front_router: Router,
    back_router: Router,
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
    /// Requests admitted at the current decode boundary (scratch; used with metrics.first_token "decode").
    admitted: Vec<u32>,
    /// A streamed run: the source of requests and where finished rows go (`None`: the whole table is held).
    stream: Option<stream::Stream<'c>>,
    /// Prefix caching (`prefix_cache.enabled`; `None` when off).
    prefix: Option<Box<prefix::Prefix>>,
    /// A sessions workload: the turns still to start (`None` otherwise).
    sessions: Option<Box<sessions::SessionRun>>,
    /// Faults (`faults`; `None`: nothing fails).
    faults: Option<Box<faults::FaultRun>>,
}

/// Run a validated scenario to completion.
pub fn simulate(scenario: Scenario) -> Result<SimOutput> {
    simulate_with(scenario, None)
}

/// [`simulate`], stopping with [`Error::Cancelled`] soon after `cancel` is set (it is read every
/// [`CHECK_EVERY`] events or calendar step ends, a few milliseconds of work).
pub fn simulate_with(scenario: Scenario, cancel: Option<&AtomicBool>) -> Result<SimOutput> {
    let start = Instant::now();
    let requests = scenario.requests()?;
    let ceilings = crate::ceilings::ceilings(&scenario, &requests);
    let (mut sim, _) = Sim::new(&scenario, Some(requests))?;
    sim.cancel = cancel;
    sim.run()?;
    let mut out = sim.finish(ceilings);
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
        compute_format: pool.compute.used.name().to_string(),
        compute_wanted: pool.compute.falls_back().then(|| pool.compute.wanted.name().to_string()),
        idle_w: dev.idle_w * n,
        peak_flops_per_s: dev.peak_tflops * 1e12 * n,
        peak_bytes_per_s: dev.hbm_tb_per_s * 1e12 * n,
        ..Default::default()
    }
}

fn timer(sc: &Scenario, p: &Pool) -> StepTimer {
    p.timer(sc.roofline)
}

fn capacity(sc: &Scenario, p: &Pool, model: &ModelCost) -> Result<u64> {
    p.kv_capacity(sc.mem_util, model).map_err(|_| Error::Internal("KV capacity checked at validation".into()))
}

/// Default rows per chunk of a source the core builds itself (a generated workload or a table in memory).
pub const SOURCE_CHUNK_ROWS: usize = 1 << 16;

/// The source a streamed run of `scenario` reads when no other is given: its generator, or its table.
pub fn own_source(scenario: &Scenario, chunk_rows: usize) -> Result<Box<dyn RequestSource>> {
    Ok(match &scenario.workload {
        Workload::Generated { requests, seed, arrivals, prompt, output } => {
            Box::new(GeneratedSource::new(*requests, *seed, *arrivals, *prompt, *output, chunk_rows))
        }
        Workload::Trace(t) => Box::new(TableSource::new(t.clone(), chunk_rows).named("workload.trace")),
        Workload::Requests(t) => Box::new(TableSource::new(t.clone(), chunk_rows)),
        Workload::Stream => {
            return Err(Error::Internal("a streamed workload needs its source passed to the run".into()))
        }
        Workload::Sessions(_) => return Err(sessions::not_streamed()),
    })
}

/// Run a validated scenario holding only the requests in flight: requests are read from `source` in
/// chunks (twice: once to count them, see `stream.rs`), and each finished request goes — in request-id
/// order — to the summary's accumulator ([`SimOutput::rows`]) and, when given, to `sink` in tables of
/// `sink_rows` rows. The returned `table` is empty; every other figure equals [`simulate`]'s.
///
/// With `keep_up_to = Some(k)` and at most `k` requests (counted by the first read), the rows are kept
/// instead: `table` is the whole table, as [`simulate`] returns it, and `sink` is not used.
pub fn simulate_streamed<'a>(
    scenario: Scenario,
    source: &'a mut dyn RequestSource,
    sink: Option<&'a mut dyn RowSink>,
    sink_rows: usize,
    keep_up_to: Option<u64>,
    cancel: Option<&'a AtomicBool>,
) -> Result<SimOutput> {
    let start = Instant::now();
    if scenario.faults.is_some() {
        return Err(Error::field(
            "faults",
            "not modelled in streamed runs yet: run the requests in memory (from Python: keep_requests=None or \
             True)",
        ));
    }
    let census = stream::census(&scenario, source, cancel)?;
    let ceilings = crate::ceilings::ceilings_of(&scenario, &census);
    source.rewind()?;
    let keep = keep_up_to.is_some_and(|k| census.requests <= k);
    let mut out = if keep {
        let mut kept = stream::Keep::default();
        let mut out = run_streamed(&scenario, source, Some(&mut kept), usize::MAX, &census, ceilings, cancel)?;
        out.table = kept.0;
        if out.table.first_token_seen_s.len() != out.table.len() {
            out.table.first_token_seen_s.clear();
        }
        out
    } else {
        run_streamed(&scenario, source, sink, sink_rows, &census, ceilings, cancel)?
    };
    out.stats.wall_s = start.elapsed().as_secs_f64();
    Ok(out)
}

/// The second read of a streamed run: the run itself.
fn run_streamed<'b>(
    scenario: &Scenario,
    source: &'b mut dyn RequestSource,
    sink: Option<&'b mut dyn RowSink>,
    sink_rows: usize,
    census: &crate::ceilings::Census,
    ceilings: Ceilings,
    cancel: Option<&'b AtomicBool>,
) -> Result<SimOutput> {
    let (mut sim, reject_capacity) = Sim::new(scenario, None)?;
    sim.cancel = cancel;
    sim.remaining = census.requests as usize;
    sim.stream = Some(stream::Stream::new(scenario, source, census, reject_capacity, sink, sink_rows));
    sim.run()?;
    let Some(st) = sim.stream.as_mut() else { return Err(Error::Internal("stream state lost".into())) };
    st.flush()?;
    if st.held() != 0 {
        return Err(Error::Internal(format!("{} finished requests were never handed on", st.held())));
    }
    Ok(sim.finish(ceilings))
}

impl<'c> Sim<'c> {
    /// The engine for `sc`, with the whole request table (`Some`) or an empty table for a streamed run;
    /// also the KV capacity that rejection is judged against.
    fn new(sc: &Scenario, requests: Option<Requests>) -> Result<(Self, u64)> {
        let base = ModelCost::new(&sc.model.spec, sc.lm_head);
        let (front_pool, back_pool, colocated) = match &sc.topology {
            Topology::Disaggregated { prefill, decode } => (prefill, Some(decode), false),
            Topology::Colocated { pool } => (pool, None, true),
        };
        let front_model = front_pool.cost(&base);
        let back_model = back_pool.map_or_else(|| front_model.clone(), |p| p.cost(&base));
        let front_decodes = colocated || matches!(sc.disaggregate, Disaggregate::Conditional { .. });
        let hold = !colocated && sc.kv.policy == crate::scenario::KvPolicy::Paged;
        let front_capacity = if front_decodes || hold { capacity(sc, front_pool, &front_model)? } else { 0 };
        let (role, name) = if colocated { (Role::Colocated, "colocated") } else { (Role::Prefill, "prefill") };
        let mut insts: Vec<Instance> = (0..front_pool.instances)
            .map(|i| {
                let mut stats = instance_stats(format!("{name}-{i}"), front_pool);
                let mut dec = Decoder::new(front_capacity, sc.macro_steps, paged::Paged::of(sc, &front_model));
                if let Some(sp) = &sc.speculative {
                    dec = dec.speculative(sp, front_pool.cost(&sp.draft_cost(sc.lm_head)), sc.macro_steps);
                }
                dec.rule.hold = hold;
                stats.kv_capacity_tokens = (front_decodes || hold).then_some(dec.kv_capacity);
                Instance::new(role, front_model.clone(), timer(sc, front_pool), dec, stats)
            })
            .collect();
        let n_front = insts.len();
        if let Some(bp) = back_pool {
            let cap = capacity(sc, bp, &back_model)?;
            for i in 0..bp.instances {
                let mut stats = instance_stats(format!("decode-{i}"), bp);
                let mut dec = Decoder::new(cap, sc.macro_steps, paged::Paged::of(sc, &back_model));
                if let Some(sp) = &sc.speculative {
                    dec = dec.speculative(sp, bp.cost(&sp.draft_cost(sc.lm_head)), sc.macro_steps);
                }
                stats.kv_capacity_tokens = Some(dec.kv_capacity);
                insts.push(Instance::new(Role::Decode, back_model.clone(), timer(sc, bp), dec, stats));
            }
        }
        // Rejection: a request whose reservation can never fit the KV cache of the pool that decodes it (the
        // last instance is of that pool).
        let reject_capacity = insts.last().map_or(0, |x| x.dec.kv_capacity);
        let track_seen = sc.first_token == crate::scenario::FirstToken::Decode && !colocated;
        let mut hashes = crate::workload::BlockHashes::default();
        let mut session_rows = None;
        let (t, n) = match requests {
            None => (RequestTable { track_seen, ..RequestTable::default() }, 0),
            Some(Requests { mut trace, over_context, sessions }) => {
                hashes = trace.take_hashes();
                if let (Some(rows), true) = (&sessions, sc.prefix_cache.enabled) {
                    // A sessions workload's turns carry their block hashes (Mooncake's layout).
                    let (offsets, ids) = rows.block_hashes_csr(trace.prompt_tokens());
                    hashes = crate::workload::BlockHashes::from_parts_unchecked(offsets, ids);
                }
                session_rows = sessions;
                let (arrival, prompt, output) = trace.into_parts();
                let n = arrival.len();
                if n > u32::MAX as usize {
                    return Err(Error::field("workload", format!("at most {} requests per run", u32::MAX)));
                }
                let mut t = RequestTable::new(arrival, prompt, output)?;
                if track_seen {
                    t.first_token_seen_s = crate::metrics::table::try_filled(n, f64::NAN)?;
                }
                if sc.speculative.is_some() {
                    t.accepted_tokens = crate::metrics::table::try_filled(n, 0)?;
                }
                if sc.faults.is_some() {
                    t.retries = crate::metrics::table::try_filled(n, 0)?;
                    t.lost_s = crate::metrics::table::try_filled(n, 0.0)?;
                    t.failed = crate::metrics::table::try_filled(n, false)?;
                }
                // Rejection depends only on sizes, so the measured set (completed requests after the warm-up
                // fraction, in arrival order) is known before the run.
                let mut completed = 0u64;
                let refuse_long = sc.over_context == OverContext::Reject;
                let prompt_capacity = sc.prompt_capacity();
                for (i, &long) in over_context.iter().enumerate() {
                    t.rejected[i] = !ever_fits(t.prompt_tokens[i], t.output_tokens[i], reject_capacity)
                        || (refuse_long && long)
                        || t.prompt_tokens[i] as u64 > prompt_capacity;
                    completed += !t.rejected[i] as u64;
                }
                t.over_context = over_context;
                let warmup = (sc.warmup_fraction * completed as f64).floor() as u64;
                let mut seen = 0u64;
                for i in 0..n {
                    if !t.rejected[i] {
                        t.measured[i] = seen >= warmup;
                        seen += 1;
                    }
                }
                (t, n)
            }
        };
        let mut sim = Sim {
            cancel: None,
            work: 0,
            max_steps: sc.max_steps,
            timeline_max_spans: sc.timeline_max_spans,
            stop: None,
            t,
            q: EventQueue::with_slots(insts.len()),
            path: Path::new(sc, front_pool.instances, back_pool.map_or(0, |p| p.instances))?,
            plan: sc.handoff.clone(),
            max_prefill_tokens: sc.max_prefill_tokens,
            chunked: sc.batch_policy == crate::scenario::BatchPolicy::Chunked,
            max_num_batched_tokens: sc.max_num_batched_tokens,
            max_batch: sc.max_decode_batch as u64,
            macro_steps: sc.macro_steps,
            colocated,
            hold,
            disaggregate: sc.disaggregate,
            insts,
            n_front,
            front_router: Router::new(if colocated { sc.colocated_routing } else { sc.prefill_routing }),
            back_router: Router::new(sc.decode_routing),
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
            admitted: Vec::new(),
            stream: None,
            prefix: None,
            sessions: None,
            faults: None,
        };
        if let Some(f) = &sc.faults {
            let track = !sim.t.first_token_seen_s.is_empty();
            sim.faults = Some(Box::new(faults::FaultRun::new(f, sim.insts.len(), sim.t.len(), track)));
        }
        if let Some(rows) = session_rows {
            sim.sessions = Some(sessions::SessionRun::new(&mut sim.t, *rows)?);
        }
        if sc.prefix_cache.enabled {
            let front_kv = capacity(sc, front_pool, &front_model)?;
            let rule = if colocated { sc.colocated_routing } else { sc.prefill_routing };
            sim.init_prefix(sc.prefix_cache, hashes, front_kv, rule, &sc.kv_tiers);
        }
        if sim.timeline_max_spans.is_some() {
            for inst in &mut sim.insts {
                inst.stats.spans = Some(Box::default());
            }
            sim.path.record_spans();
        }
        Ok((sim, reject_capacity))
    }

    fn run(&mut self) -> Result<()> {
        if self.sessions.is_some() {
            self.start_sessions();
        }
        let first = match self.stream.as_mut() {
            Some(st) => st.peek()?,
            None if self.sessions.is_some() => None,
            None => self.t.arrival_s.first().copied(),
        };
        if let Some(a) = first {
            self.q.push(a, Priority::Normal, Ev::Arrival);
        }
        if self.faults.is_some() {
            self.start_faults();
        }
        while self.remaining > 0 {
            if let Some(e) = self.stop.take() {
                return Err(e);
            }
            self.tick();
            let (now, ev) = match self.q.pop_next() {
                Some(Next::Event(now, ev)) => (now, ev),
                Some(Next::Step(now, slot)) => {
                    self.on_step_end(slot as usize, now);
                    continue;
                }
                None => {
                    return Err(Error::Internal(format!(
                        "event queue ran dry with {} requests unfinished",
                        self.remaining
                    )))
                }
            };
            match ev {
                Ev::Arrival => self.on_arrival(now),
                Ev::Wake(i) => self.on_wake(i as usize, now),
                Ev::StepDone(i) => {
                    // With faults, a step a failure cut short never ends (`faults.rs`).
                    if self.faults.as_deref().is_none_or(|f| f.due[i as usize] == now) {
                        self.on_step_end(i as usize, now)
                    }
                }
                Ev::StreamStart(i) => self.on_stream_start(i as usize, now),
                Ev::HopDone { stage, lane, channel } => {
                    self.on_hop_done(stage as usize, lane as usize, channel as usize, now)?
                }
                Ev::SharedDone { stage, lane, generation } => {
                    self.on_shared_done(stage as usize, lane as usize, generation, now)
                }
                Ev::Landed { stage, request } => self.after_hop(stage as usize, request, now),
                Ev::Slice { stage, lane, channel } => {
                    self.on_slice(stage as usize, lane as usize, channel as usize, now)?
                }
                Ev::Turn(r) => self.on_turn(r, now),
                Ev::Fault { i, fail, random } => self.on_fault(i as usize, fail, random, now),
                Ev::Resend { stage, request } => self.enter_stage(stage as usize, request, now),
                Ev::LinkFault { unit, fail, random } => self.on_link_fault(unit, fail, random, now),
            }
        }
        // Checked during the run every CHECK_EVERY units of work, and here exactly.
        match self.over_max_steps().or_else(|| self.over_timeline()) {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// The step of instance `i` (its calendar slot) ends: finish it and start the instance's next one.
    #[inline]
    fn on_step_end(&mut self, i: usize, now: f64) {
        let end = self.step_end(i, now);
        self.schedule(i, end);
    }

    /// Count one unit of work; every [`CHECK_EVERY`] units, stop on cancellation or past `engine.max_steps`.
    /// Returns whether the run must stop (the event loop returns).
    #[inline(always)]
    fn tick(&mut self) -> bool {
        self.work += 1;
        self.work % CHECK_EVERY == 0 && self.check()
    }

    /// The periodic check of [`Self::tick`]: records why the run must stop, if it must.
    #[cold]
    #[inline(never)]
    fn check(&mut self) -> bool {
        if self.stop.is_none() {
            if self.cancel.is_some_and(|c| c.load(Ordering::Relaxed)) {
                self.stop = Some(Error::Cancelled);
            } else {
                self.stop = self.over_max_steps().or_else(|| self.over_timeline());
            }
        }
        self.stop.is_some()
    }

    /// The `engine.max_steps` error, if the instances have taken more batch steps than that.
    fn over_max_steps(&self) -> Option<Error> {
        let steps: u64 = self.insts.iter().map(|x| x.stats.steps).sum();
        (steps > self.max_steps).then(|| {
            Error::field(
                "engine.max_steps",
                format!(
                    "the run took more than {} batch steps; raise engine.max_steps or simulate fewer or shorter \
                     requests",
                    self.max_steps
                ),
            )
        })
    }

    /// The `engine.timeline_max_spans` error, if the timeline holds more spans than that (checked with
    /// `engine.max_steps`, so at most [`CHECK_EVERY`] units of work of spans beyond the bound are ever held).
    fn over_timeline(&self) -> Option<Error> {
        let max = self.timeline_max_spans?;
        let steps: usize = self.insts.iter().map(|x| x.stats.spans.as_ref().map_or(0, |s| s.len())).sum();
        let spans = (steps + self.path.span_count()) as u64;
        (spans > max).then(|| {
            Error::field(
                "engine.timeline_max_spans",
                format!(
                    "the timeline holds more than {max} spans (one per batch step and per transfer); raise \
                     engine.timeline_max_spans, turn engine.timeline off or simulate fewer requests"
                ),
            )
        })
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
        if self.faults.is_some() {
            self.keep_first_seen(r);
        }
        self.t.finish_s[r as usize] = now;
        self.population_change(now, false);
        self.remaining -= 1;
        self.completed += 1;
        self.horizon = self.horizon.max(now);
        if self.stream.is_some() {
            self.emit_ready();
        }
        if self.sessions.is_some() {
            self.next_turn(r, now);
        }
    }

    /// A streamed run: hand on the finished rows at the front of the arrival order.
    #[cold]
    fn emit_ready(&mut self) {
        if let Some(st) = self.stream.as_mut() {
            if let Err(e) = st.emit_ready(&self.t) {
                self.stop.get_or_insert(e);
            }
        }
    }

    /// A streamed run's arrival: the next request from the source takes a slot.
    #[cold]
    fn on_stream_arrival(&mut self, now: f64) {
        let Some(st) = self.stream.as_mut() else { return };
        let (slot, rejected) = st.admit(&mut self.t);
        if rejected {
            self.remaining -= 1;
            self.rejected += 1;
            self.emit_ready();
        } else {
            self.population_change(now, true);
            self.route_to_front(slot, now);
        }
        let Some(st) = self.stream.as_mut() else { return };
        match st.peek() {
            Ok(Some(next)) => self.q.push(next, Priority::Normal, Ev::Arrival),
            Ok(None) => {}
            Err(e) => {
                self.stop.get_or_insert(e);
            }
        }
    }

    fn on_arrival(&mut self, now: f64) {
        if self.stream.is_some() {
            return self.on_stream_arrival(now);
        }
        let r = self.next_arrival;
        self.next_arrival += 1;
        if self.t.rejected[r] {
            self.remaining -= 1;
            self.rejected += 1;
        } else {
            self.population_change(now, true);
            self.route_to_front(r as u32, now);
        }
        if let Some(&next) = self.t.arrival_s.get(self.next_arrival) {
            self.q.push(next, Priority::Normal, Ev::Arrival);
        }
    }

    fn finish(self, ceilings: Ceilings) -> SimOutput {
        let faults = self.fault_stats();
        let recorded = self.timeline_max_spans.is_some();
        let (outages, link_outages) =
            if recorded { (self.outages(false), self.outages(true)) } else { (Vec::new(), Vec::new()) };
        let mut instances = Vec::new();
        let (mut preemptions, mut recompute_tokens, mut swap_bytes) = (0, 0, 0.0);
        let mut kv_hold = crate::metrics::stats::KvHoldStats::default();
        for Instance { role, stats: mut s, dec, timer, .. } in self.insts {
            s.kv_end_tokens = dec.kv_used;
            s.comm_s = timer.comm_s();
            if let Some(sp) = &dec.running.spec {
                (s.spec_accepted, s.spec_rows) = (sp.accepted_sum, sp.verified_rows);
            }
            if let Some(p) = dec.paged {
                preemptions += p.preemptions;
                recompute_tokens += p.recompute_tokens;
                swap_bytes += p.swap_bytes;
                if self.hold {
                    p.add_hold_stats(&mut kv_hold, role == Role::Decode, s.kv_peak_tokens);
                }
            }
            s.finish();
            instances.push(s);
        }
        let prefix = self.prefix.as_ref().map_or_else(Default::default, |p| p.stats);
        let kv_tiers = self.prefix.as_ref().map_or_else(Vec::new, |p| p.tier_stats());
        let mut links = self.path.into_stats();
        let timeline = recorded.then(|| Timeline {
            steps: instances.iter_mut().map(|s| s.spans.take().map(|b| *b).unwrap_or_default()).collect(),
            transfers: links.iter_mut().map(|l| l.spans.take().map(|b| *b).unwrap_or_default()).collect(),
            outages,
            link_outages,
        });
        let static_j = instances.iter().map(|s| s.idle_w * self.horizon).sum();
        let table_rows_peak = self.t.len() as u64;
        let rows = self.stream.map(|st| st.summary);
        let (table, measured) = match &rows {
            Some(r) => (RequestTable::default(), r.measured),
            None => {
                let measured = self.t.measured.iter().filter(|&&m| m).count() as u64;
                (self.t, measured)
            }
        };
        SimOutput {
            ceilings,
            timeline,
            rows,
            table,
            stats: RunStats {
                instances,
                links,
                horizon_s: self.horizon,
                events: self.q.processed(),
                calendar_steps: self.q.steps_processed(),
                population_area: self.population_area,
                completed: self.completed,
                rejected: self.rejected,
                measured,
                static_j,
                itl: self.itl,
                wall_s: 0.0,
                table_rows_peak,
                preemptions,
                recompute_tokens,
                swap_bytes,
                kv_hold,
                prefix,
                faults,
                kv_tiers,
            },
        }
    }
}

impl Sim<'_> {
    /// KV bytes a hand-off of request `r` carries before compression.
    fn handoff_bytes(&self, r: u32) -> f64 {
        let p = self.t.prompt_tokens[r as usize];
        match self.prefix.as_deref() {
            Some(x) if x.skip => self.plan.handoff_bytes(p - x.wire_skip(r)),
            _ => self.plan.handoff_bytes(p),
        }
    }
}

/// The columns a decode step reads; inter-token gaps start from when the user saw the first token.
fn cols(t: &RequestTable) -> Cols<'_> {
    let seen = if t.first_token_seen_s.is_empty() { &t.first_token_s } else { &t.first_token_seen_s };
    Cols { prompt: &t.prompt_tokens, output: &t.output_tokens, first_token_s: seen, measured: &t.measured }
}
