//! Thin PyO3 bindings of `kvwire-core`: convert inputs, release the GIL around every run, move result
//! columns into numpy without copying, and map every core error to its Python exception class (owned by
//! `kvwire.errors`) in one place.

mod errors;
mod layout;
mod quant;

use pyo3::prelude::*;

#[pymodule(gil_used = false)]
mod _core {
    use super::errors::to_py;
    use kvwire_core::workload::Trace;
    use kvwire_core::{simulate as run, Scenario};
    use numpy::{IntoPyArray, PyReadonlyArray1};
    use pyo3::prelude::*;
    use pyo3::types::PyDict;

    fn not_contiguous(name: &str) -> PyErr {
        to_py(kvwire_core::Error::trace(format!("requests.{name}"), "must be a C-contiguous 1-D array"))
    }

    #[pymodule_export]
    use super::quant::{cast, decode, dequantize, error, isa, quantize};

    #[pymodule_export]
    use super::layout::{layout_catalog, layout_convert, layout_describe, layout_request_bytes};

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
            serde_json::to_string(&kvwire_core::ceilings::scenario_ceilings(&sc))
                .map_err(|e| kvwire_core::Error::Internal(e.to_string()))
        })
        .map_err(to_py)
    }

    /// Run one scenario. `arrival_s`, `prompt_tokens`, `output_tokens` (all or none) are an explicit request
    /// table. Returns `{"columns": {name: 1-D ndarray}, "stats_json": str, "scenario_json": str}` (the
    /// resolved scenario); the columns are the core's
    /// vectors handed to numpy without a copy. The GIL is released while the core validates and runs.
    #[pyfunction]
    #[pyo3(signature = (scenario_json, arrival_s=None, prompt_tokens=None, output_tokens=None))]
    fn simulate<'py>(
        py: Python<'py>,
        scenario_json: &str,
        arrival_s: Option<PyReadonlyArray1<'py, f64>>,
        prompt_tokens: Option<PyReadonlyArray1<'py, i64>>,
        output_tokens: Option<PyReadonlyArray1<'py, i64>>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let trace = request_table(arrival_s, prompt_tokens, output_tokens)?;
        let json = scenario_json.to_owned();
        let (echo, out) = py
            .detach(move || {
                let sc = Scenario::from_json(&json, trace)?;
                let echo = sc.echo_json().to_string();
                run(sc).map(|out| (echo, out))
            })
            .map_err(to_py)?;
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
        cols.set_item("local_decode", t.local_decode.into_pyarray(py))?;
        cols.set_item("prefill_instance", t.prefill_instance.into_pyarray(py))?;
        cols.set_item("decode_instance", t.decode_instance.into_pyarray(py))?;
        cols.set_item("prefill_start_s", t.prefill_start_s.into_pyarray(py))?;
        cols.set_item("first_token_s", t.first_token_s.into_pyarray(py))?;
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
