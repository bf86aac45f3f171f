//! The hand-off path as engine state: one or more hops (stages), each with lanes (one shared resource, or
//! one per prefill / decode instance), each lane FCFS channels or a processor-sharing link.
//!
//! * FCFS (the reference): a transfer holds a channel for latency + data time.
//! * Layer-wise streaming (FCFS, one hop): a transfer may take a channel once the first layer of its
//!   prefill is done; layer l's slice (1/L of the data) leaves at max(previous slice end, layer l done),
//!   so the last slice ends at max(start + L·s, prefill end + s) for slice time s — computed in closed form
//!   (one event per transfer) or, with `engine.per_slice_streaming`, slice by slice (one event per slice).
//!   A streaming transfer keeps its channel from its first slice until it has landed.
//! * Processor sharing: transfers split the link's bandwidth; latency is added after the data.
//! * Host-staged: GPU → host PCIe (per prefill instance), network, host → GPU PCIe (per decode instance),
//!   store and forward; the decode instance is chosen when the data reaches the last hop.

use super::kernel::Priority;
use super::{Ev, Sim};
use crate::error::{Error, Result};
use crate::handoff::link::FcfsLink;
use crate::handoff::plan::Lanes;
use crate::handoff::shared::SharedLink;
use crate::handoff::transfer::TransferCost;
use crate::metrics::stats::LinkStats;
use crate::scenario::Scenario;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Select {
    /// One lane for every transfer.
    Shared,
    /// The lane of the request's prefill instance.
    Front,
    /// The lane of the request's decode instance (chosen on entry).
    Back,
}

/// Per-channel state of a transfer streamed slice by slice.
#[derive(Clone, Copy)]
struct SliceState {
    request: u32,
    /// Slices already sent.
    sent: u32,
    slice_s: f64,
    latency_s: f64,
    /// End of the first slice.
    first_end: f64,
}

enum LaneModel {
    Fcfs { link: FcfsLink, busy_until: Vec<f64>, slices: Vec<Option<SliceState>> },
    Shared(SharedLink),
}

struct Lane {
    model: LaneModel,
    stats: LinkStats,
    /// Estimated channel time of the transfers waiting for a channel, s.
    queued_work_s: f64,
}

struct Stage {
    select: Select,
    cost: TransferCost,
    lanes: Vec<Lane>,
    latency_s: f64,
    /// Host power per busy channel, W (a layout-conversion hop; 0 for links, whose energy is per bit).
    convert_w: f64,
}

pub(super) struct Path {
    stages: Vec<Stage>,
    /// Index of the network hop (the one whose waits feed the conditional router).
    network: usize,
    streaming: bool,
    per_slice: bool,
    layers: u32,
    channels: u32,
    /// `engine.timeline`: transfers started on a hop and not yet through it, `(request, stage)` → start.
    open: Option<std::collections::HashMap<(u32, usize), f64>>,
}

fn lane(processor_sharing: bool, channels: u32, resource: String, preset: &str) -> Lane {
    let model = if processor_sharing {
        LaneModel::Shared(SharedLink::new(channels))
    } else {
        LaneModel::Fcfs {
            link: FcfsLink::new(channels),
            busy_until: vec![0.0; channels as usize],
            slices: vec![None; channels as usize],
        }
    };
    Lane {
        model,
        stats: LinkStats { name: preset.to_string(), resource, channels, ..Default::default() },
        queued_work_s: 0.0,
    }
}

impl Path {
    pub fn new(sc: &Scenario, fronts: u32, backs: u32) -> Result<Path> {
        let plan = &sc.handoff;
        let stages: Vec<Stage> = plan
            .hops
            .iter()
            .map(|h| {
                let name = |i: u32| {
                    if h.lanes == Lanes::Shared {
                        h.resource.to_string()
                    } else {
                        format!("{}-{i}", h.resource)
                    }
                };
                Stage {
                    select: match h.lanes {
                        Lanes::Shared => Select::Shared,
                        Lanes::PerFront => Select::Front,
                        Lanes::PerBack => Select::Back,
                    },
                    latency_s: h.cost.transfer(0.0).latency_s,
                    convert_w: h.convert_w,
                    lanes: (0..h.lane_count(fronts, backs))
                        .map(|i| lane(h.processor_sharing, h.channels, name(i), &h.preset))
                        .collect(),
                    cost: h.cost.clone(),
                }
            })
            .collect();
        let streaming = plan.layer_streaming();
        if streaming && stages.len() != 1 {
            return Err(Error::Internal("streaming needs a single FCFS hop (checked at validation)".into()));
        }
        Ok(Path {
            stages,
            network: plan.network,
            streaming,
            per_slice: sc.per_slice_streaming,
            layers: sc.model.spec.layers,
            channels: sc.link.channels,
            open: None,
        })
    }

    /// Bytes on the wire of the network hop for a hand-off of `bytes` bytes (after any compression).
    pub fn network_wire_bytes(&self, bytes: f64) -> f64 {
        self.stages[self.network].cost.transfer(bytes).wire_bytes
    }

    pub fn streaming(&self) -> bool {
        self.streaming
    }

    pub fn layers(&self) -> u32 {
        self.layers
    }

    /// Record every transfer's span on its hop lane (`engine.timeline`).
    pub fn record_spans(&mut self) {
        self.open = Some(Default::default());
        for lane in self.stages.iter_mut().flat_map(|s| s.lanes.iter_mut()) {
            lane.stats.spans = Some(Box::default());
        }
    }

    /// Transfer spans recorded so far (`engine.timeline`).
    pub fn span_count(&self) -> usize {
        let lanes = self.stages.iter().flat_map(|s| s.lanes.iter());
        lanes.map(|l| l.stats.spans.as_ref().map_or(0, |s| s.len())).sum()
    }

    /// Every lane's totals, network first.
    pub fn into_stats(self) -> Vec<LinkStats> {
        let network = self.network;
        let mut out: Vec<LinkStats> = Vec::new();
        for (i, st) in self.stages.into_iter().enumerate() {
            let stats = st.lanes.into_iter().map(|l| l.stats);
            if i == network {
                let mut v: Vec<LinkStats> = stats.collect();
                v.append(&mut out);
                out = v;
            } else {
                out.extend(stats);
            }
        }
        out
    }
}

impl Sim<'_> {
    /// Estimated wait for the network hop now: its backlog over its channels, s.
    pub(super) fn link_wait_estimate(&self, now: f64) -> f64 {
        let Some(stage) = self.path.stages.get(self.path.network) else { return 0.0 };
        let lane = &stage.lanes[0];
        let backlog = match &lane.model {
            LaneModel::Fcfs { busy_until, .. } => busy_until.iter().map(|&b| (b - now).max(0.0)).sum::<f64>(),
            LaneModel::Shared(s) => s.backlog_s(),
        };
        (backlog + lane.queued_work_s) / self.path.channels as f64
    }

    fn lane_of(&self, stage: usize, r: u32) -> usize {
        match self.path.stages[stage].select {
            Select::Shared => 0,
            Select::Front => self.t.prefill_instance[r as usize] as usize,
            Select::Back => self.t.decode_instance[r as usize] as usize,
        }
    }

    /// Hand request `r` to the first hop.
    pub(super) fn enqueue_transfer(&mut self, r: u32, now: f64) {
        if self.prefix.as_ref().is_some_and(|p| p.skip) {
            self.skip_cached_on_wire(r);
        }
        self.enter_stage(0, r, now);
    }

    pub(super) fn enter_stage(&mut self, stage: usize, r: u32, now: f64) {
        // (Already routed where KV holding (paged KV) chose the decode instance before the transfer started, or
        // where `handoff.skip_cached_prefix` chose it when the transfer was queued.)
        if self.path.stages[stage].select == Select::Back && self.t.decode_instance[r as usize] < 0 {
            self.route_to_back(r);
        }
        let lane = self.lane_of(stage, r);
        let bytes = self.handoff_bytes(r);
        let st = &mut self.path.stages[stage];
        let x = st.cost.transfer(bytes);
        let l = &mut st.lanes[lane];
        match &mut l.model {
            LaneModel::Fcfs { link, .. } => {
                link.request(r, now);
                l.queued_work_s += x.duration_s;
                self.grant(stage, lane, now);
            }
            LaneModel::Shared(_) => {
                // Busy time of a shared link is its data time at full rate (the work it serves).
                self.record_start(stage, lane, r, now, now, x.data_s);
                if let LaneModel::Shared(s) = &mut self.path.stages[stage].lanes[lane].model {
                    s.add(now, r, x.data_s);
                }
                self.reschedule_shared(stage, lane);
            }
        }
    }

    /// Account the start of `r`'s transfer on a lane (kv_start on the first hop, waits, bytes, energy).
    /// `since` is when it reached this hop; the first hop's wait counts from the end of its prefill.
    fn record_start(&mut self, stage: usize, lane: usize, r: u32, now: f64, since: f64, busy_s: f64) {
        let i = r as usize;
        let bytes = self.handoff_bytes(i as u32);
        let st = &mut self.path.stages[stage];
        let x = st.cost.transfer(bytes);
        let s = &mut st.lanes[lane].stats;
        s.transfers += 1;
        s.handoff_bytes += bytes;
        s.wire_bytes += x.wire_bytes;
        s.link_j += x.link_j;
        s.transit_j += x.transit_j;
        s.transit_bound += x.transit_bound as u64;
        s.busy_s += busy_s;
        s.convert_j += x.data_s * st.convert_w;
        if let Some(open) = self.path.open.as_mut() {
            open.insert((r, stage), now);
        }
        let resent = self.faults.is_some() && self.transfer_started(r, now);
        let s = &mut self.path.stages[stage].lanes[lane].stats;
        if stage == 0 && !resent {
            self.t.kv_start_s[i] = now;
            // A wait for room on the decode instance (KV holding) is not a wait for the link.
            s.wait_s += now - self.t.first_token_s[i] - self.t.kv_hold_wait_s[i];
        } else {
            s.wait_s += now - since;
        }
    }

    /// Start waiting transfers on free channels of an FCFS lane.
    fn grant(&mut self, stage: usize, lane: usize, now: f64) {
        loop {
            let granted = match &mut self.path.stages[stage].lanes[lane].model {
                LaneModel::Fcfs { link, .. } => link.grant(),
                LaneModel::Shared(_) => None,
            };
            let Some((ch, r, since)) = granted else { return };
            let i = r as usize;
            let bytes = self.handoff_bytes(i as u32);
            let x = self.path.stages[stage].cost.transfer(bytes);
            self.path.stages[stage].lanes[lane].queued_work_s -= x.duration_s;
            let (done, slice) = if self.path.streaming {
                // Layer l of the prefill [t0, t0 + T] is done at t0 + l·T/L; slice l leaves at
                // max(previous slice end, layer l done).
                let t0 = self.t.prefill_start_s[i];
                let tp = self.t.first_token_s[i] - t0;
                let layers = self.path.layers as f64;
                let s = x.data_s / layers;
                let landed = (now + layers * s).max(t0 + tp + s) + x.latency_s;
                let slice = self.path.per_slice.then_some(SliceState {
                    request: r,
                    sent: 0,
                    slice_s: s,
                    latency_s: x.latency_s,
                    first_end: now.max(t0 + tp / layers) + s,
                });
                (landed, slice)
            } else {
                (now + x.duration_s, None)
            };
            self.record_start(stage, lane, r, now, since, 0.0);
            let stage8 = stage as u8;
            let l = &mut self.path.stages[stage].lanes[lane];
            let LaneModel::Fcfs { busy_until, slices, .. } = &mut l.model else { return };
            // The closed-form landing time also serves the conditional router's wait estimate.
            busy_until[ch] = done;
            let ev = Ev::HopDone { stage: stage8, lane: lane as u32, channel: ch as u32 };
            match slice {
                Some(state) => {
                    slices[ch] = Some(state);
                    let first = state.first_end;
                    self.q.push(
                        first,
                        Priority::Normal,
                        Ev::Slice { stage: stage8, lane: lane as u32, channel: ch as u32 },
                    );
                }
                None => {
                    l.stats.busy_s += if self.path.streaming { done - now } else { x.duration_s };
                    self.q.push(done, Priority::Normal, ev);
                }
            }
        }
    }

    /// One slice of a per-slice streamed transfer has been sent.
    pub(super) fn on_slice(&mut self, stage: usize, lane: usize, ch: usize, now: f64) -> Result<()> {
        let layers = self.path.layers;
        let LaneModel::Fcfs { slices, .. } = &mut self.path.stages[stage].lanes[lane].model else {
            return Err(Error::Internal("slice event on a shared link".into()));
        };
        let mut st = slices[ch].ok_or_else(|| Error::Internal(format!("slice event on idle channel {ch}")))?;
        st.sent += 1;
        let (stage8, lane32, ch32) = (stage as u8, lane as u32, ch as u32);
        if st.sent == layers {
            slices[ch] = None;
            let landed = now + st.latency_s;
            let i = st.request as usize;
            let start = self.t.kv_start_s[i];
            self.path.stages[stage].lanes[lane].stats.busy_s += landed - start;
            self.q.push(landed, Priority::Normal, Ev::HopDone { stage: stage8, lane: lane32, channel: ch32 });
        } else {
            slices[ch] = Some(st);
            let i = st.request as usize;
            let t0 = self.t.prefill_start_s[i];
            let tp = self.t.first_token_s[i] - t0;
            let ready = t0 + tp * (st.sent + 1) as f64 / layers as f64;
            let next = now.max(ready) + st.slice_s;
            self.q.push(next, Priority::Normal, Ev::Slice { stage: stage8, lane: lane32, channel: ch32 });
        }
        Ok(())
    }

    /// The network hop's index.
    pub(super) fn path_network(&self) -> usize {
        self.path.network
    }

    /// Faults: take channel `ch` of the network link down (returning the request whose transfer it
    /// carried, now lost) or bring it up again.
    pub(super) fn set_network_channel(&mut self, ch: usize, down: bool) -> Option<u32> {
        let network = self.path.network;
        let lane = self.path.stages.get_mut(network)?.lanes.get_mut(0)?;
        let LaneModel::Fcfs { link, busy_until, .. } = &mut lane.model else { return None };
        let r = link.set_down(ch, down);
        if r.is_some() {
            // Its HopDone event is now stale: no end time matches NaN.
            busy_until[ch] = f64::NAN;
        }
        r
    }

    /// Faults: start what waits for the network link on its live channels.
    pub(super) fn grant_network(&mut self, now: f64) {
        self.grant(self.path.network, 0, now);
    }

    pub(super) fn on_hop_done(&mut self, stage: usize, lane: usize, ch: usize, now: f64) -> Result<()> {
        if self.faults.is_some() {
            if let LaneModel::Fcfs { busy_until, .. } = &self.path.stages[stage].lanes[lane].model {
                if busy_until[ch] != now {
                    // The transfer this event would end was lost with its channel (`faults.rs`).
                    return Ok(());
                }
            }
        }
        let r = match &mut self.path.stages[stage].lanes[lane].model {
            LaneModel::Fcfs { link, .. } => link.release(ch),
            LaneModel::Shared(_) => None,
        }
        .ok_or_else(|| Error::Internal(format!("transfer finished on idle channel {ch}")))?;
        self.after_hop(stage, r, now);
        self.grant(stage, lane, now);
        Ok(())
    }

    fn reschedule_shared(&mut self, stage: usize, lane: usize) {
        if let LaneModel::Shared(s) = &self.path.stages[stage].lanes[lane].model {
            if let Some(t) = s.next_completion() {
                let generation = s.generation();
                self.q.push(t, Priority::Normal, Ev::SharedDone { stage: stage as u8, lane: lane as u32, generation });
            }
        }
    }

    pub(super) fn on_shared_done(&mut self, stage: usize, lane: usize, generation: u32, now: f64) {
        let latency = self.path.stages[stage].latency_s;
        let mut done = Vec::new();
        if let LaneModel::Shared(s) = &mut self.path.stages[stage].lanes[lane].model {
            if s.generation() != generation {
                return; // superseded by a later change
            }
            s.complete(now, &mut done);
        }
        for r in done {
            // The stage's fixed delay (priced at 0 bytes) plus this transfer's own per-transfer registration.
            let registration = self.path.stages[stage].cost.transfer(self.handoff_bytes(r)).registration_s;
            self.q.push(now + latency + registration, Priority::Normal, Ev::Landed { stage: stage as u8, request: r });
        }
        self.reschedule_shared(stage, lane);
    }

    /// `engine.timeline`: the span of `r`'s transfer on hop `stage`, from its start there to `now`.
    #[cold]
    fn record_transfer_span(&mut self, stage: usize, r: u32, now: f64) {
        let lane = self.lane_of(stage, r);
        let bytes = self.handoff_bytes(r);
        let id = self.t.id[r as usize];
        let st = &mut self.path.stages[stage];
        let wire = st.cost.transfer(bytes).wire_bytes;
        let start = self.path.open.as_mut().and_then(|o| o.remove(&(r, stage))).unwrap_or(f64::NAN);
        if let Some(s) = st.lanes[lane].stats.spans.as_deref_mut() {
            s.request.push(id);
            s.start_s.push(start);
            s.end_s.push(now);
            s.handoff_bytes.push(bytes);
            s.wire_bytes.push(wire);
        }
    }

    /// `r` has cleared hop `stage`: on to the next hop, or landed on its decode instance.
    pub(super) fn after_hop(&mut self, stage: usize, r: u32, now: f64) {
        if self.path.open.is_some() {
            self.record_transfer_span(stage, r, now);
        }
        if self.faults.is_some() && self.transfer_failed(stage, r, now) {
            return;
        }
        if stage + 1 < self.path.stages.len() {
            self.enter_stage(stage + 1, r, now);
            return;
        }
        self.t.kv_ready_s[r as usize] = now;
        if self.hold {
            self.release_hold(r, now);
        }
        let d = self.decode_instance_of(r);
        if self.prefix.as_ref().is_some_and(|p| p.skip) {
            self.cache_landed(r, d);
        }
        self.deliver(r, d, now);
    }
}
