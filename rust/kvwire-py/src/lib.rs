//! Thin PyO3 bindings of `kvwire-core`: convert inputs, release the GIL around every run, move result
//! columns into numpy without copying, and map every core error to its Python exception class (owned by
//! `kvwire.errors`) in one place.

mod errors;
mod layout;
mod quant;

use pyo3::prelude::*;

#[pymodule(gil_used = false)]
mod _core {
    use super::errors::{to_py, Cancelled};
    use kvwire_core::workload::Trace;
    use kvwire_core::Scenario;
    use numpy::{IntoPyArray, PyReadonlyArray1};
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
        use kvwire_core::handoff::closed_form::{handoff, StreamingMode};
        let mode = match streaming {
            "whole" => StreamingMode::Whole,
            "layer" => StreamingMode::Layer,
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
        serde_json::to_string(&handoff(&sc, prompt_tokens, mode))
            .map_err(|e| to_py(kvwire_core::Error::Internal(e.to_string())))
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

    /// Run one scenario. `arrival_s`, `prompt_tokens`, `output_tokens` (all or none) are an explicit request
    /// table. Returns `{"columns": {name: 1-D ndarray}, "stats_json": str, "scenario_json": str}` (the
    /// resolved scenario); the columns are the core's
    /// vectors handed to numpy without a copy. The GIL is released while the core validates and runs.
    /// `cancel` (a `threading.Event`) stops the run within milliseconds once set (`Cancelled`).
    #[pyfunction]
    #[pyo3(signature = (scenario_json, arrival_s=None, prompt_tokens=None, output_tokens=None, cancel=None))]
    fn simulate<'py>(
        py: Python<'py>,
        scenario_json: &str,
        arrival_s: Option<PyReadonlyArray1<'py, f64>>,
        prompt_tokens: Option<PyReadonlyArray1<'py, i64>>,
        output_tokens: Option<PyReadonlyArray1<'py, i64>>,
        cancel: Option<Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let trace = request_table(arrival_s, prompt_tokens, output_tokens)?;
        let json = scenario_json.to_owned();
        let (echo, out) = run_interruptible(py, cancel.as_ref(), move |cancel| {
            let sc = Scenario::from_json(&json, trace)?;
            let echo = sc.echo_json().to_string();
            kvwire_core::simulate_with(sc, Some(cancel)).map(|out| (echo, out))
        })?;
        let ceilings =
            serde_json::to_string(&out.ceilings).map_err(|e| to_py(kvwire_core::Error::Internal(e.to_string())))?;
        let t = out.table;
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
        let res = PyDict::new(py);
        res.set_item("columns", cols)?;
        res.set_item("stats_json", out.stats.to_json().to_string())?;
        res.set_item("scenario_json", echo)?;
        res.set_item("ceilings_json", ceilings)?;
        Ok(res)
    }
}
