//! Python adapters of a streamed run: a request source over a Python iterator of numpy chunks and a row
//! sink calling a Python function. Each holds the GIL only while it talks to Python (once per chunk); an
//! exception raised there is kept in a [`Failure`] and raised again by the binding, unchanged (a
//! `TraceFileError` naming the file, line and column stays that).

use std::sync::{Arc, Mutex};

use kvwire_core::metrics::table::RequestTable;
use kvwire_core::metrics::timeline::{StepSpans, Timeline, TransferSpans, KIND_NAMES};
use kvwire_core::workload::source::{Chunk, RequestSource};
use kvwire_core::{Error, RowSink};
use numpy::{IntoPyArray, PyReadonlyArray1};
use pyo3::prelude::*;
use pyo3::types::PyDict;

/// The first Python exception a source or sink raised during a run.
#[derive(Clone, Default)]
pub struct Failure(Arc<Mutex<Option<PyErr>>>);

impl Failure {
    fn keep(&self, e: PyErr) -> Error {
        let msg = e.to_string();
        let mut slot = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if slot.is_none() {
            *slot = Some(e);
        }
        Error::External(msg)
    }

    /// The kept exception, if any.
    pub fn take(&self) -> Option<PyErr> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).take()
    }
}

/// Requests from `factory()`, an iterator of `(arrival_s, prompt_tokens, output_tokens)` numpy arrays;
/// rewinding calls `factory` again.
pub struct PySource {
    factory: Py<PyAny>,
    iter: Option<Py<PyAny>>,
    failure: Failure,
}

impl PySource {
    pub fn new(factory: Py<PyAny>, failure: Failure) -> Self {
        PySource { factory, iter: None, failure }
    }

    fn next_py(&mut self, py: Python<'_>) -> PyResult<Option<Chunk>> {
        let it = match &self.iter {
            Some(it) => it.bind(py).clone(),
            None => {
                let it = self.factory.bind(py).call0()?.try_iter()?.into_any();
                self.iter = Some(it.clone().unbind());
                it
            }
        };
        let Some(item) = it.try_iter()?.next() else { return Ok(None) };
        let (a, p, o): (PyReadonlyArray1<'_, f64>, PyReadonlyArray1<'_, i64>, PyReadonlyArray1<'_, i64>) =
            item?.extract()?;
        let slice = |name: &str, v: Result<&[f64], numpy::AsSliceError>| {
            v.map(<[f64]>::to_vec).map_err(|_| not_contiguous(name))
        };
        let ints = |name: &str, v: Result<&[i64], numpy::AsSliceError>| {
            v.map(<[i64]>::to_vec).map_err(|_| not_contiguous(name))
        };
        Ok(Some(Chunk {
            arrival_s: slice("arrival_s", a.as_slice())?,
            prompt_tokens: ints("prompt_tokens", p.as_slice())?,
            output_tokens: ints("output_tokens", o.as_slice())?,
        }))
    }
}

fn not_contiguous(name: &str) -> PyErr {
    crate::errors::to_py(Error::trace(format!("requests.{name}"), "must be a C-contiguous 1-D array"))
}

impl RequestSource for PySource {
    fn next_chunk(&mut self) -> kvwire_core::Result<Option<Chunk>> {
        Python::attach(|py| self.next_py(py)).map_err(|e| self.failure.keep(e))
    }

    fn rewind(&mut self) -> kvwire_core::Result<()> {
        // Dropping the old iterator (and making the next) needs the GIL: done at the next chunk.
        Python::attach(|_| self.iter = None);
        Ok(())
    }
}

/// Finished rows to `write({name: ndarray})`.
pub struct PySink {
    write: Py<PyAny>,
    failure: Failure,
}

impl PySink {
    pub fn new(write: Py<PyAny>, failure: Failure) -> Self {
        PySink { write, failure }
    }
}

impl RowSink for PySink {
    fn write(&mut self, rows: RequestTable) -> kvwire_core::Result<()> {
        Python::attach(|py| -> PyResult<()> {
            let cols = table_columns(py, rows)?;
            self.write.bind(py).call1((cols,))?;
            Ok(())
        })
        .map_err(|e| self.failure.keep(e))
    }
}

/// The columns of a request table as numpy arrays (moved, not copied).
pub fn table_columns(py: Python<'_>, t: RequestTable) -> PyResult<Bound<'_, PyDict>> {
    let cols = PyDict::new(py);
    cols.set_item("id", t.id.into_pyarray(py))?;
    cols.set_item("arrival_s", t.arrival_s.into_pyarray(py))?;
    cols.set_item("prompt_tokens", t.prompt_tokens.into_pyarray(py))?;
    cols.set_item("output_tokens", t.output_tokens.into_pyarray(py))?;
    cols.set_item("rejected", t.rejected.into_pyarray(py))?;
    cols.set_item("measured", t.measured.into_pyarray(py))?;
    cols.set_item("over_context", t.over_context.into_pyarray(py))?;
    cols.set_item("local_decode", t.local_decode.into_pyarray(py))?;
    cols.set_item("prefill_instance", t.prefill_instance.into_pyarray(py))?;
    cols.set_item("decode_instance", t.decode_instance.into_pyarray(py))?;
    cols.set_item("prefill_start_s", t.prefill_start_s.into_pyarray(py))?;
    cols.set_item("first_token_s", t.first_token_s.into_pyarray(py))?;
    if !t.first_token_seen_s.is_empty() {
        cols.set_item("first_token_seen_s", t.first_token_seen_s.into_pyarray(py))?;
    }
    cols.set_item("kv_start_s", t.kv_start_s.into_pyarray(py))?;
    cols.set_item("kv_ready_s", t.kv_ready_s.into_pyarray(py))?;
    cols.set_item("decode_start_s", t.decode_start_s.into_pyarray(py))?;
    cols.set_item("finish_s", t.finish_s.into_pyarray(py))?;
    cols.set_item("preemptions", t.preemptions.into_pyarray(py))?;
    cols.set_item("cached_tokens", t.cached_tokens.into_pyarray(py))?;
    if !t.session.is_empty() {
        cols.set_item("session", t.session.into_pyarray(py))?;
        cols.set_item("turn", t.turn.into_pyarray(py))?;
    }
    cols.set_item("kv_hold_wait_s", t.kv_hold_wait_s.into_pyarray(py))?;
    if !t.accepted_tokens.is_empty() {
        cols.set_item("accepted_tokens", t.accepted_tokens.into_pyarray(py))?;
    }
    if !t.retries.is_empty() {
        cols.set_item("retries", t.retries.into_pyarray(py))?;
        cols.set_item("lost_s", t.lost_s.into_pyarray(py))?;
        cols.set_item("failed", t.failed.into_pyarray(py))?;
    }
    Ok(cols)
}

/// A run's timeline (`engine.timeline`) as flat numpy columns: `{"steps": {instance, start_s, end_s, kind,
/// batch, tokens, comm_s}, "transfers": {lane, request, start_s, end_s, handoff_bytes, wire_bytes}, "kinds": [...]}`
/// (`instance` and `lane` index the summary's instances and hop lanes in the core's order); `None` without.
pub fn timeline_columns(py: Python<'_>, t: Option<Timeline>) -> PyResult<Option<Bound<'_, PyDict>>> {
    let Some(t) = t else { return Ok(None) };
    let mut s = StepSpans::default();
    let mut instance: Vec<u32> = Vec::new();
    for (i, mut x) in t.steps.into_iter().enumerate() {
        instance.extend(std::iter::repeat_n(i as u32, x.len()));
        s.start_s.append(&mut x.start_s);
        s.end_s.append(&mut x.end_s);
        s.kind.append(&mut x.kind);
        s.batch.append(&mut x.batch);
        s.tokens.append(&mut x.tokens);
        s.comm_s.append(&mut x.comm_s);
    }
    let mut x = TransferSpans::default();
    let mut lane: Vec<u32> = Vec::new();
    for (i, mut l) in t.transfers.into_iter().enumerate() {
        lane.extend(std::iter::repeat_n(i as u32, l.len()));
        x.request.append(&mut l.request);
        x.start_s.append(&mut l.start_s);
        x.end_s.append(&mut l.end_s);
        x.handoff_bytes.append(&mut l.handoff_bytes);
        x.wire_bytes.append(&mut l.wire_bytes);
    }
    let steps = PyDict::new(py);
    steps.set_item("instance", instance.into_pyarray(py))?;
    steps.set_item("start_s", s.start_s.into_pyarray(py))?;
    steps.set_item("end_s", s.end_s.into_pyarray(py))?;
    steps.set_item("kind", s.kind.into_pyarray(py))?;
    steps.set_item("batch", s.batch.into_pyarray(py))?;
    steps.set_item("tokens", s.tokens.into_pyarray(py))?;
    steps.set_item("comm_s", s.comm_s.into_pyarray(py))?;
    let transfers = PyDict::new(py);
    transfers.set_item("lane", lane.into_pyarray(py))?;
    transfers.set_item("request", x.request.into_pyarray(py))?;
    transfers.set_item("start_s", x.start_s.into_pyarray(py))?;
    transfers.set_item("end_s", x.end_s.into_pyarray(py))?;
    transfers.set_item("handoff_bytes", x.handoff_bytes.into_pyarray(py))?;
    transfers.set_item("wire_bytes", x.wire_bytes.into_pyarray(py))?;
    let outages = PyDict::new(py);
    outages.set_item("instance", t.outages.iter().map(|o| o.0).collect::<Vec<u32>>().into_pyarray(py))?;
    outages.set_item("start_s", t.outages.iter().map(|o| o.1).collect::<Vec<f64>>().into_pyarray(py))?;
    outages.set_item("end_s", t.outages.iter().map(|o| o.2).collect::<Vec<f64>>().into_pyarray(py))?;
    let link_outages = PyDict::new(py);
    link_outages.set_item("channel", t.link_outages.iter().map(|o| o.0).collect::<Vec<u32>>().into_pyarray(py))?;
    link_outages.set_item("start_s", t.link_outages.iter().map(|o| o.1).collect::<Vec<f64>>().into_pyarray(py))?;
    link_outages.set_item("end_s", t.link_outages.iter().map(|o| o.2).collect::<Vec<f64>>().into_pyarray(py))?;
    let out = PyDict::new(py);
    out.set_item("steps", steps)?;
    out.set_item("transfers", transfers)?;
    out.set_item("outages", outages)?;
    out.set_item("link_outages", link_outages)?;
    out.set_item("kinds", KIND_NAMES.to_vec())?;
    Ok(Some(out))
}
