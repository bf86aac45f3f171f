//! Bounded-memory runs: requests come from a [`RequestSource`] in chunks and leave, once finished, to a
//! [`RowSummary`] (and optionally a [`RowSink`]), so the engine holds only the requests in flight.
//!
//! **Two reads of the source.** The summary's warm-up exclusion drops the first ⌊f·C⌋ completed requests
//! by arrival, where C is the number of requests not rejected; inter-token gaps are counted (or not) while
//! a request decodes. So whether a request is *measured* must be known when it arrives, which needs C, i.e.
//! the whole table. A first pass ([`census`]) reads every chunk — checking it, flagging requests over the
//! context, clipping, judging rejection — and counts; it also gives the analytic ceilings' means. The
//! second pass runs. Holding the table between the two would defeat the purpose; reading it twice costs a
//! second scan of the source (cheap next to the simulation for a file, and nothing for a generator).
//!
//! **Slots.** The engine addresses a request by its row in the [`RequestTable`]; here a row is a *slot*,
//! reused once its request is finished and handed on. Arrivals take a free slot (or a new row); `order`
//! lists the slots in arrival order, and finished rows leave from its front only, so rows go to the sink
//! in request-id order (arrivals are in order, completions are not). The table therefore holds the
//! requests from the oldest unfinished one to the newest arrival. Nothing in the engine's decisions depends
//! on a request's number (ties between requests finishing in the same decode step only change the order
//! of their completion bookkeeping at one instant), so the run is the in-memory run exactly (tested).

use std::collections::VecDeque;

use crate::ceilings::{is_served, Census};
use crate::error::{Error, Result};
use crate::metrics::rows::RowSummary;
use crate::metrics::table::RequestTable;
use crate::policy::batching::ever_fits;
use crate::scenario::{OverContext, Scenario};
use crate::workload::source::{ChunkChecker, RequestSource};
use crate::workload::{clip_to_context, over_context};

/// Receives finished request rows in request-id order, in tables of at most the run's `sink_rows` rows.
pub trait RowSink: Send {
    fn write(&mut self, rows: RequestTable) -> Result<()>;
}

/// A sink that keeps every row (a streamed run small enough to hold: `keep_up_to`).
#[derive(Default)]
pub(super) struct Keep(pub RequestTable);

impl RowSink for Keep {
    fn write(&mut self, rows: RequestTable) -> Result<()> {
        if self.0.is_empty() {
            self.0 = rows;
        } else {
            for i in 0..rows.len() {
                self.0.push_row_from(&rows, i);
            }
        }
        Ok(())
    }
}

/// How a request's lengths are judged at arrival: the model's context, clipping, and rejection.
#[derive(Clone, Copy, Debug)]
pub(super) struct Admission {
    max_context: Option<u32>,
    clip: bool,
    refuse_long: bool,
    capacity: u64,
    /// The longest prompt served (`Scenario::prompt_capacity`).
    prompt_capacity: u64,
}

impl Admission {
    pub(super) fn new(sc: &Scenario, capacity: u64) -> Self {
        let max_context = sc.model.spec.max_context_tokens;
        Admission {
            max_context,
            clip: sc.over_context == OverContext::Clip && max_context.is_some(),
            refuse_long: sc.over_context == OverContext::Reject,
            capacity,
            prompt_capacity: sc.prompt_capacity(),
        }
    }

    /// (prompt, output) after any clipping, whether it was over the context, whether it is rejected.
    #[inline]
    pub(super) fn judge(&self, prompt: u32, output: u32) -> (u32, u32, bool, bool) {
        let long = self.max_context.is_some_and(|m| over_context(m, prompt, output));
        let (p, o) = match self.max_context {
            Some(m) if self.clip => clip_to_context(m, prompt, output),
            _ => (prompt, output),
        };
        let rejected = !ever_fits(p, o, self.capacity) || (self.refuse_long && long) || p as u64 > self.prompt_capacity;
        (p, o, long, rejected)
    }
}

/// The first read of a source: every chunk checked, the requests counted and described.
pub(super) fn census(
    sc: &Scenario,
    source: &mut dyn RequestSource,
    cancel: Option<&std::sync::atomic::AtomicBool>,
) -> Result<Census> {
    let adm = Admission::new(sc, sc.decode_capacity());
    let mut checker = ChunkChecker::new(source.path());
    let mut c = Census::default();
    while let Some(chunk) = source.next_chunk()? {
        if cancel.is_some_and(|f| f.load(std::sync::atomic::Ordering::Relaxed)) {
            return Err(Error::Cancelled);
        }
        let (prompt, output) = checker.check(&chunk)?;
        for ((&a, &p), &o) in chunk.arrival_s.iter().zip(&prompt).zip(&output) {
            let (p, o, long, _) = adm.judge(p, o);
            c.add(a, p, o, is_served(p, o, adm.capacity, (adm.refuse_long && long) || p as u64 > adm.prompt_capacity));
        }
    }
    if c.requests == 0 {
        return Err(checker.empty());
    }
    if c.requests > u32::MAX as u64 {
        return Err(Error::field("workload", format!("at most {} requests per run", u32::MAX)));
    }
    Ok(c)
}

/// The streamed side of a run: the source being read, the slots, and where finished rows go.
pub(super) struct Stream<'s> {
    source: &'s mut dyn RequestSource,
    checker: ChunkChecker,
    adm: Admission,
    /// The current chunk (checked), and the next request in it.
    arrival_s: Vec<f64>,
    prompt: Vec<u32>,
    output: Vec<u32>,
    pos: usize,
    /// Requests the census counted (the second read must give the same).
    expected: u64,
    next_id: u64,
    /// Served requests seen so far, and how many of the first ones are warm-up.
    served_seen: u64,
    warmup: u64,
    free: Vec<u32>,
    order: VecDeque<u32>,
    pub(super) summary: RowSummary,
    sink: Option<&'s mut dyn RowSink>,
    sink_rows: usize,
    out: RequestTable,
}

impl<'s> Stream<'s> {
    pub(super) fn new(
        sc: &Scenario,
        source: &'s mut dyn RequestSource,
        census: &Census,
        capacity: u64,
        sink: Option<&'s mut dyn RowSink>,
        sink_rows: usize,
    ) -> Self {
        let path = source.path().to_string();
        Stream {
            source,
            checker: ChunkChecker::new(&path),
            adm: Admission::new(sc, capacity),
            arrival_s: Vec::new(),
            prompt: Vec::new(),
            output: Vec::new(),
            pos: 0,
            expected: census.requests,
            next_id: 0,
            served_seen: 0,
            warmup: (sc.warmup_fraction * census.served() as f64).floor() as u64,
            free: Vec::new(),
            order: VecDeque::new(),
            summary: RowSummary::new(sc.ttft_slo_s, sc.tpot_slo_s),
            sink,
            sink_rows: sink_rows.max(1),
            out: RequestTable::default(),
        }
    }

    /// The arrival time of the next request, reading the next chunk when this one is used up; `None` after
    /// the last request.
    pub(super) fn peek(&mut self) -> Result<Option<f64>> {
        while self.pos == self.arrival_s.len() {
            let Some(chunk) = self.source.next_chunk()? else {
                if self.checker.rows != self.expected {
                    return Err(changed(self.source.path(), self.expected, self.checker.rows));
                }
                return Ok(None);
            };
            let (p, o) = self.checker.check(&chunk)?;
            if self.checker.rows > self.expected {
                return Err(changed(self.source.path(), self.expected, self.checker.rows));
            }
            self.arrival_s = chunk.arrival_s;
            self.prompt = p;
            self.output = o;
            self.pos = 0;
        }
        Ok(Some(self.arrival_s[self.pos]))
    }

    /// Take the next request (after [`Self::peek`] returned it) into a slot of `t`: its row set as at
    /// arrival. Returns the slot and whether the request is rejected.
    pub(super) fn admit(&mut self, t: &mut RequestTable) -> (u32, bool) {
        let i = self.pos;
        self.pos += 1;
        let (p, o, long, rejected) = self.adm.judge(self.prompt[i], self.output[i]);
        let measured = !rejected && {
            self.served_seen += 1;
            self.served_seen > self.warmup
        };
        let id = self.next_id;
        self.next_id += 1;
        let slot = match self.free.pop() {
            Some(s) => s,
            None => t.len() as u32,
        };
        t.set_row(slot as usize, id, self.arrival_s[i], p, o, rejected, measured, long);
        self.order.push_back(slot);
        (slot, rejected)
    }

    /// Hand on every finished row at the front of the arrival order (its slot becomes free).
    pub(super) fn emit_ready(&mut self, t: &RequestTable) -> Result<()> {
        while let Some(&s) = self.order.front() {
            let i = s as usize;
            if !t.rejected[i] && t.finish_s[i].is_nan() {
                break;
            }
            self.order.pop_front();
            self.summary.add(t, i);
            if self.sink.is_some() {
                self.out.push_row_from(t, i);
                if self.out.len() >= self.sink_rows {
                    self.flush()?;
                }
            }
            self.free.push(s);
        }
        Ok(())
    }

    /// Write the rows waiting for the sink.
    pub(super) fn flush(&mut self) -> Result<()> {
        if let Some(sink) = self.sink.as_deref_mut() {
            if !self.out.is_empty() {
                let mut rows = std::mem::take(&mut self.out);
                if rows.first_token_seen_s.len() != rows.len() {
                    rows.first_token_seen_s.clear();
                }
                sink.write(rows)?;
            }
        }
        Ok(())
    }

    /// Requests still held (for the final check: none once the run is over).
    pub(super) fn held(&self) -> usize {
        self.order.len()
    }
}

fn changed(path: &str, expected: u64, got: u64) -> Error {
    Error::trace(
        path,
        format!(
            "the request source gave {got}{} requests on its second read but {expected} on its first: a streamed \
             table is read twice and must give the same requests both times",
            if got > expected { "+" } else { "" }
        ),
    )
}
