//! Thin PyO3 bindings of `kvwire-core`: convert inputs, release the GIL around every run, move result
//! columns into numpy without copying, and map every core error to its Python exception class (owned by
//! `kvwire.errors`) in one place.

mod errors;
mod layout;
mod quant;
mod stream;

use pyo3::prelude::*;

#[pymodule(gil_used = false)]
mod _core {
    use super::errors::{to_py, Cancelled};
    use kvwire_core::workload::Trace;
    use kvwire_core::Scenario;
    use numpy::PyReadonlyArray1;
    use pyo3::prelude::*;
    use pyo3::types::PyDict;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::{Condvar, Mutex};
    use std::time::Duration;

    fn not_contiguous(name: &str) -> PyErr {
        to_py(kvwire_core::Error::trace(format!("requests.{name}"), "must be a C-contiguous 1-D array"))
    }

    #[pymodule_export]
    use super::quant::{cast, decode, dequantize, error, isa, quantize};

    #[pymodule_export]
    use super::layout::{layout_catalog, layout_convert, layout_describe, layout_request_bytes, layout_scale_factor};

    #[pymodule_export]
    #[allow(non_upper_case_globals)]
    const __version__: &str = env!("CARGO_PKG_VERSION");

    /// The built-in default scenario, written out in full (what an empty scenario means), as JSON text.
    #[pyfunction]
    fn default_scenario_json() -> &'static str {
        kvwire_core::scenario::DEFAULT_SCENARIO_JSON
    }

    /// Every preset and hand-off format, as JSON text.
    #[pyfunction]
    fn catalog_json() -> String {
        kvwire_core::catalog::catalog_json().to_string()
    }

    /// Closed-form hand-off figures for one prompt (`kvwire.handoff`), as JSON text. `streaming` is
    /// `"whole"` or `"layer"`.
    #[pyfunction]
    fn handoff_json(scenario_json: &str, prompt_tokens: u64, streaming: &str) -> PyResult<String> {
        use kvwire_core::handoff::plan::Streaming;
        let mode = match streaming {
            "whole" => Streaming::Whole,
            "layer" => Streaming::Layer,
            other => {
                return Err(to_py(kvwire_core::Error::field(
                    "streaming",
                    format!("expected \"whole\" or \"layer\", got {other:?}"),
                )))
            }
        };
        if prompt_tokens == 0 {
            return Err(to_py(kvwire_core::Error::field("prompt_tokens", "must be ≥ 1")));
        }
        let sc = Scenario::from_json(scenario_json, None).map_err(to_py)?;
        let figures = sc.handoff_figures(prompt_tokens, mode).ok_or_else(|| {
            to_py(kvwire_core::Error::field("mode", "a colocated scenario has no hand-off; use mode \"disaggregated\""))
        })?;
        serde_json::to_string(&figures).map_err(|e| to_py(kvwire_core::Error::Internal(e.to_string())))
    }

    /// Where each step of a scenario's hand-off happens, as the core resolved and charges it
    /// (`HandoffPlan::placement`), as JSON text. Raises the same exceptions as `validate`.
    #[pyfunction]
    fn placement_json(py: Python<'_>, scenario_json: &str) -> PyResult<String> {
        let sc = py.detach(|| Scenario::from_json(scenario_json, None)).map_err(to_py)?;
        serde_json::to_string(&sc.handoff.placement()).map_err(|e| to_py(kvwire_core::Error::Internal(e.to_string())))
    }

    /// The scenario as the core resolved it (every default filled in, presets by name), as JSON text: the
    /// `scenario` a run returns. Raises the same exceptions as `validate`.
    #[pyfunction]
    fn echo_json(py: Python<'_>, scenario_json: &str) -> PyResult<String> {
        py.detach(|| Scenario::from_json(scenario_json, None).map(|sc| sc.echo_json().to_string())).map_err(to_py)
    }

    /// Validate a scenario without running it. Raises the same exceptions as `simulate`.
    #[pyfunction]
    fn validate(py: Python<'_>, scenario_json: &str) -> PyResult<()> {
        py.detach(|| Scenario::from_json(scenario_json, None).map(|_| ())).map_err(to_py)
    }

    /// How often a waiting call checks for Python signals (Ctrl-C).
    const SIGNAL_POLL: Duration = Duration::from_millis(50);

    /// `Cancelled` once `stop` (an object with `is_set()`, a `threading.Event`) is set.
    fn check_stop(stop: Option<&Bound<'_, PyAny>>) -> PyResult<()> {
        match stop {
            Some(event) if event.call_method0("is_set")?.is_truthy()? => {
                Err(Cancelled::new_err(("the run was cancelled: its cancel event was set", "cancel")))
            }
            _ => Ok(()),
        }
    }

    /// Run `work` on a worker thread with the GIL released, checking for Python signals every
    /// [`SIGNAL_POLL`] on the calling thread: a pending signal (Ctrl-C: `KeyboardInterrupt`) sets the cancel
    /// flag `work` receives, waits for it to stop (the core checks the flag every few milliseconds of work)
    /// and raises the signal's exception, so the process stays usable. `stop`, when given, is an object
    /// with `is_set()` (a `threading.Event`) checked at the same pace: once set, the run is stopped the same
    /// way and `kvwire.errors.Cancelled` is raised. A panic in `work` becomes an `InternalError`, never an
    /// abort.
    fn run_interruptible<T, F>(py: Python<'_>, stop: Option<&Bound<'_, PyAny>>, work: F) -> PyResult<T>
    where
        T: Send,
        F: FnOnce(&AtomicBool) -> kvwire_core::Result<T> + Send,
    {
        check_stop(stop)?;
        let cancel = AtomicBool::new(false);
        let slot: (Mutex<Option<kvwire_core::Result<T>>>, Condvar) = (Mutex::new(None), Condvar::new());
        std::thread::scope(|s| {
            s.spawn(|| {
                let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| work(&cancel))).unwrap_or_else(|p| {
                    let what =
                        p.downcast_ref::<&str>().map(|s| s.to_string()).or_else(|| p.downcast_ref::<String>().cloned());
                    Err(kvwire_core::Error::Internal(format!("the run panicked: {}", what.unwrap_or_default())))
                });
                let (lock, cv) = &slot;
                *lock.lock().unwrap_or_else(|e| e.into_inner()) = Some(r);
                cv.notify_all();
            });
            let wait = |timeout: Option<Duration>| {
                let (lock, cv) = &slot;
                let mut g = lock.lock().unwrap_or_else(|e| e.into_inner());
                while g.is_none() {
                    match timeout {
                        Some(t) => {
                            let (g2, res) = cv.wait_timeout(g, t).unwrap_or_else(|e| e.into_inner());
                            g = g2;
                            if res.timed_out() {
                                break;
                            }
                        }
                        None => g = cv.wait(g).unwrap_or_else(|e| e.into_inner()),
                    }
                }
                g.take()
            };
            loop {
                if let Some(r) = py.detach(|| wait(Some(SIGNAL_POLL))) {
                    return r.map_err(to_py);
                }
                if let Err(e) = py.check_signals().and_then(|()| check_stop(stop)) {
                    cancel.store(true, Ordering::Relaxed);
                    py.detach(|| wait(None));
                    return Err(e);
                }
            }
        })
    }

    /// The explicit request table given as three arrays (all or none), validated.
    fn request_table(
        arrival_s: Option<PyReadonlyArray1<'_, f64>>,
        prompt_tokens: Option<PyReadonlyArray1<'_, i64>>,
        output_tokens: Option<PyReadonlyArray1<'_, i64>>,
    ) -> PyResult<Option<Trace>> {
        match (arrival_s, prompt_tokens, output_tokens) {
            (None, None, None) => Ok(None),
            (Some(a), Some(p), Some(o)) => {
                // Copied (and validated) while the GIL is held: no other thread can mutate the arrays.
                let a = a.as_slice().map_err(|_| not_contiguous("arrival_s"))?;
                let p = p.as_slice().map_err(|_| not_contiguous("prompt_tokens"))?;
                let o = o.as_slice().map_err(|_| not_contiguous("output_tokens"))?;
                Ok(Some(Trace::from_columns("requests", a, p, o).map_err(to_py)?))
            }
            _ => Err(to_py(kvwire_core::Error::trace(
                "requests",
                "give all three columns (arrival_s, prompt_tokens, output_tokens) or none",
            ))),
        }
    }

    /// Attach the per-request block hashes (`hash_offsets`, `hash_ids`: both or none, int64, the CSR pair of
    /// `kvwire_core::workload::BlockHashes`) to the request table, validated (copied while the GIL is held).
    fn block_hashes(
        trace: Option<Trace>,
        hash_offsets: Option<PyReadonlyArray1<'_, i64>>,
        hash_ids: Option<PyReadonlyArray1<'_, i64>>,
    ) -> PyResult<Option<Trace>> {
        match (trace, hash_offsets, hash_ids) {
            (t, None, None) => Ok(t),
            (Some(t), Some(o), Some(i)) => {
                let o = o.as_slice().map_err(|_| not_contiguous("hash_offsets"))?;
                let i = i.as_slice().map_err(|_| not_contiguous("hash_ids"))?;
                Ok(Some(t.with_hashes("requests", o, i).map_err(to_py)?))
            }
            (None, _, _) => Err(to_py(kvwire_core::Error::trace(
                "requests.hash_ids",
                "block hashes need the request table they describe (arrival_s, prompt_tokens, output_tokens)",
            ))),
            _ => Err(to_py(kvwire_core::Error::trace("requests.hash_ids", "give hash_offsets and hash_ids together"))),
        }
    }

    /// The analytic ceilings of a scenario (`kvwire.ceilings`), as JSON text; the request table, when
    /// given, is the workload. The GIL is released while the core validates and computes.
    #[pyfunction]
    #[pyo3(signature = (scenario_json, arrival_s=None, prompt_tokens=None, output_tokens=None))]
    fn ceilings_json<'py>(
        py: Python<'py>,
        scenario_json: &str,
        arrival_s: Option<PyReadonlyArray1<'py, f64>>,
        prompt_tokens: Option<PyReadonlyArray1<'py, i64>>,
        output_tokens: Option<PyReadonlyArray1<'py, i64>>,
    ) -> PyResult<String> {
        let trace = request_table(arrival_s, prompt_tokens, output_tokens)?;
        py.detach(|| {
            let sc = Scenario::from_json(scenario_json, trace)?;
            serde_json::to_string(&kvwire_core::ceilings::scenario_ceilings(&sc)?)
                .map_err(|e| kvwire_core::Error::Internal(e.to_string()))
        })
        .map_err(to_py)
    }

    /// The time of single steps on one pool of a scenario (`kvwire.timing.step_times`), as JSON text: a list of
    /// `{time_s, flops, bytes, comm_s, bound}`, one per row. `phases` holds `"prefill"` or `"decode"` per row.
    /// The GIL is released while the core validates and computes.
    #[pyfunction]
    fn step_times_json(
        py: Python<'_>,
        scenario_json: &str,
        pool: &str,
        phases: Vec<String>,
        batch: Vec<u64>,
        prompt_tokens: Vec<u64>,
        context_tokens: Vec<u64>,
    ) -> PyResult<String> {
        use kvwire_core::steps::{Phase, StepQuery};
        let n = phases.len();
        if batch.len() != n || prompt_tokens.len() != n || context_tokens.len() != n {
            return Err(to_py(kvwire_core::Error::field(
                "rows",
                "phases, batch, prompt_tokens and context_tokens must be as long",
            )));
        }
        let mut rows = Vec::with_capacity(n);
        for (i, ph) in phases.iter().enumerate() {
            let phase = match ph.as_str() {
                "prefill" => Phase::Prefill,
                "decode" => Phase::Decode,
                other => {
                    return Err(to_py(kvwire_core::Error::field(
                        format!("rows[{i}].phase"),
                        format!("expected \"prefill\" or \"decode\", got {other:?}"),
                    )))
                }
            };
            rows.push(StepQuery {
                phase,
                batch: batch[i],
                prompt_tokens: prompt_tokens[i],
                context_tokens: context_tokens[i],
            });
        }
        py.detach(|| {
            let sc = Scenario::from_json(scenario_json, None)?;
            serde_json::to_string(&sc.step_times(pool, &rows)?).map_err(|e| kvwire_core::Error::Internal(e.to_string()))
        })
        .map_err(to_py)
    }

    /// Run one scenario. `arrival_s`, `prompt_tokens`, `output_tokens` (all or none) are an explicit request
    /// table. Returns `{"columns": {name: 1-D ndarray}, "stats_json": str, "scenario_json": str}` (the
    /// resolved scenario); the columns are the core's
    /// vectors handed to numpy without a copy. The GIL is released while the core validates and runs.
    /// `cancel` (a `threading.Event`) stops the run within milliseconds once set (`Cancelled`).
    #[pyfunction]
    #[allow(clippy::too_many_arguments)] // the Python keyword arguments
    #[pyo3(signature = (scenario_json, arrival_s=None, prompt_tokens=None, output_tokens=None, cancel=None, hash_offsets=None, hash_ids=None))]
    fn simulate<'py>(
        py: Python<'py>,
        scenario_json: &str,
        arrival_s: Option<PyReadonlyArray1<'py, f64>>,
        prompt_tokens: Option<PyReadonlyArray1<'py, i64>>,
        output_tokens: Option<PyReadonlyArray1<'py, i64>>,
        cancel: Option<Bound<'py, PyAny>>,
        hash_offsets: Option<PyReadonlyArray1<'py, i64>>,
        hash_ids: Option<PyReadonlyArray1<'py, i64>>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let trace = request_table(arrival_s, prompt_tokens, output_tokens)?;
        let trace = block_hashes(trace, hash_offsets, hash_ids)?;
        let json = scenario_json.to_owned();
        let (echo, mut out) = run_interruptible(py, cancel.as_ref(), move |cancel| {
            let sc = Scenario::from_json(&json, trace)?;
            let echo = sc.echo_json().to_string();
            kvwire_core::simulate_with(sc, Some(cancel)).map(|out| (echo, out))
        })?;
        let ceilings =
            serde_json::to_string(&out.ceilings).map_err(|e| to_py(kvwire_core::Error::Internal(e.to_string())))?;
        let cols = super::stream::table_columns(py, out.table)?;
        let res = PyDict::new(py);
        res.set_item("columns", cols)?;
        res.set_item("stats_json", out.stats.to_json().to_string())?;
        res.set_item("timeline", super::stream::timeline_columns(py, out.timeline.take())?)?;
        res.set_item("scenario_json", echo)?;
        res.set_item("ceilings_json", ceilings)?;
        Ok(res)
    }

    /// Run one scenario holding only the requests in flight (`kvwire.simulate(keep_requests=False)`).
    ///
    /// `source` is `None` (the scenario's own generator or inline table) or a callable returning an
    /// iterator of `(arrival_s, prompt_tokens, output_tokens)` numpy chunks (float64, int64, int64); it is
    /// called twice (the core reads the requests twice) and its iterator advanced with the GIL held, one
    /// chunk at a time. `sink`, when given, is called with each table of finished rows (`{name: ndarray}`,
    /// request-id order, at most `sink_rows` rows). With `keep_up_to` and at most that many requests the
    /// whole table comes back in `columns` instead (and `sink` is not called); otherwise `columns` is
    /// `None` and `rows_json` holds the summary's per-request figures. An exception raised by `source` or
    /// `sink` is raised again, unchanged. `cancel` (a `threading.Event`) stops the run as in `simulate`.
    #[pyfunction]
    #[allow(clippy::too_many_arguments)] // the Python keyword arguments
    #[pyo3(signature = (scenario_json, source=None, sink=None, chunk_rows=65536, sink_rows=65536, keep_up_to=None, cancel=None))]
    fn simulate_stream<'py>(
        py: Python<'py>,
        scenario_json: &str,
        source: Option<Py<PyAny>>,
        sink: Option<Py<PyAny>>,
        chunk_rows: usize,
        sink_rows: usize,
        keep_up_to: Option<u64>,
        cancel: Option<Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let json = scenario_json.to_owned();
        let failure = super::stream::Failure::default();
        let external = source.is_some();
        let mut py_source = source.map(|f| super::stream::PySource::new(f, failure.clone()));
        let mut py_sink = sink.map(|f| super::stream::PySink::new(f, failure.clone()));
        let result = run_interruptible(py, cancel.as_ref(), move |cancel| {
            let sc = if external { Scenario::from_json_streamed(&json)? } else { Scenario::from_json(&json, None)? };
            let echo = sc.echo_json().to_string();
            let mut own;
            let src: &mut dyn kvwire_core::workload::source::RequestSource = match py_source.as_mut() {
                Some(s) => s,
                None => {
                    own = kvwire_core::engine::own_source(&sc, chunk_rows)?;
                    own.as_mut()
                }
            };
            let snk = py_sink.as_mut().map(|s| s as &mut dyn kvwire_core::RowSink);
            kvwire_core::simulate_streamed(sc, src, snk, sink_rows, keep_up_to, Some(cancel)).map(|out| (echo, out))
        });
        let (echo, mut out) = match result {
            Ok(v) => v,
            Err(e) => return Err(failure.take().unwrap_or(e)),
        };
        let ceilings =
            serde_json::to_string(&out.ceilings).map_err(|e| to_py(kvwire_core::Error::Internal(e.to_string())))?;
        let res = PyDict::new(py);
        let kept = out.rows.is_none() || !out.table.is_empty();
        if kept {
            res.set_item("columns", super::stream::table_columns(py, out.table)?)?;
            res.set_item("rows_json", py.None())?;
        } else {
            res.set_item("columns", py.None())?;
            let rows = out.rows.as_ref().map(|r| r.to_json().to_string());
            res.set_item("rows_json", rows)?;
        }
        res.set_item("stats_json", out.stats.to_json().to_string())?;
        res.set_item("timeline", super::stream::timeline_columns(py, out.timeline.take())?)?;
        res.set_item("scenario_json", echo)?;
        res.set_item("ceilings_json", ceilings)?;
        Ok(res)
    }
}
