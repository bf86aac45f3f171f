//! A run's timeline (`engine.timeline`): one span per batch step of every instance and one per transfer on
//! every hop lane, recorded only when asked for. Step spans are recorded by
//! [`InstanceStats::add_step`](super::stats::InstanceStats::add_step), the one place every step is
//! accounted; transfer spans by the hand-off path when a hop's transfer starts and when it clears the hop.

/// Step kind codes of [`StepSpans::kind`].
pub const KIND_PREFILL: u8 = 0;
pub const KIND_DECODE: u8 = 1;
/// Names of the kind codes, in code order.
pub const KIND_NAMES: [&str; 2] = ["prefill", "decode"];

/// The batch steps of one instance, in start order.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct StepSpans {
    pub start_s: Vec<f64>,
    pub end_s: Vec<f64>,
    /// [`KIND_PREFILL`] or [`KIND_DECODE`].
    pub kind: Vec<u8>,
    /// Prompts (prefill) or sequences (decode) in the step.
    pub batch: Vec<u32>,
    /// Tokens the step processes: prompt tokens (prefill), one per sequence (decode).
    pub tokens: Vec<u64>,
    /// Collective time of the step not hidden under compute, s (0 without a parallel layout).
    pub comm_s: Vec<f64>,
}

impl StepSpans {
    pub fn len(&self) -> usize {
        self.start_s.len()
    }

    pub fn is_empty(&self) -> bool {
        self.start_s.is_empty()
    }

    #[cold]
    #[inline(never)]
    pub fn push(&mut self, start_s: f64, end_s: f64, is_prefill: bool, batch: u64, tokens: u64, comm_s: f64) {
        self.comm_s.push(comm_s);
        self.start_s.push(start_s);
        self.end_s.push(end_s);
        self.kind.push(if is_prefill { KIND_PREFILL } else { KIND_DECODE });
        self.batch.push(batch as u32);
        self.tokens.push(if is_prefill { tokens } else { batch });
    }
}

/// The transfers of one hop lane, in the order they cleared it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TransferSpans {
    /// Request id (the table's `id`).
    pub request: Vec<u64>,
    pub start_s: Vec<f64>,
    pub end_s: Vec<f64>,
    /// KV bytes handed off (before compression) and bytes on this hop's wire (after it).
    pub handoff_bytes: Vec<f64>,
    pub wire_bytes: Vec<f64>,
}

impl TransferSpans {
    pub fn len(&self) -> usize {
        self.start_s.len()
    }

    pub fn is_empty(&self) -> bool {
        self.start_s.is_empty()
    }
}

/// A whole run's timeline: the instances' and the hop lanes' spans, in the order of
/// [`RunStats::instances`](super::stats::RunStats::instances) and [`RunStats::links`](super::stats::RunStats::links).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Timeline {
    pub steps: Vec<StepSpans>,
    pub transfers: Vec<TransferSpans>,
    /// Faults (`faults`): every outage up to the run's end as (instance index, start, end), by instance then
    /// start (empty without faults).
    pub outages: Vec<(u32, f64, f64)>,
    /// Faults: every outage of a channel of the network link (`kv-link`) up to the run's end as (channel,
    /// start, end), by channel then start (empty without link faults).
    pub link_outages: Vec<(u32, f64, f64)>,
}

impl Timeline {
    /// Spans in all.
    pub fn spans(&self) -> usize {
        self.steps.iter().map(StepSpans::len).sum::<usize>()
            + self.transfers.iter().map(TransferSpans::len).sum::<usize>()
    }
}
