//! The one place where core errors become Python exceptions. The classes are defined in Python
//! (`python/kvwire/errors.py`, which documents them) and imported here; every variant has its own arm.

use kvwire_core::Error;
use pyo3::PyErr;

pyo3::import_exception!(kvwire.errors, ScenarioError);
pyo3::import_exception!(kvwire.errors, UnknownPresetError);
pyo3::import_exception!(kvwire.errors, DoesNotFitError);
pyo3::import_exception!(kvwire.errors, TraceError);
pyo3::import_exception!(kvwire.errors, QuantError);
pyo3::import_exception!(kvwire.errors, LayoutError);
pyo3::import_exception!(kvwire.errors, InternalError);
pyo3::import_exception!(kvwire.errors, ResourceError);
pyo3::import_exception!(kvwire.errors, Cancelled);

/// Map a core error to its Python exception: `Class(message, path)` (`DoesNotFitError` also gets
/// `devices_needed`).
pub fn to_py(e: Error) -> PyErr {
    let msg = e.to_string();
    let path = e.path().to_string();
    match e {
        Error::Field { .. } => ScenarioError::new_err((msg, path)),
        Error::UnknownPreset { .. } => UnknownPresetError::new_err((msg, path)),
        Error::DoesNotFit(d) => DoesNotFitError::new_err((msg, path, d.devices_needed)),
        Error::Trace { .. } => TraceError::new_err((msg, path)),
        Error::Quant { .. } => QuantError::new_err((msg, path)),
        Error::Layout { .. } => LayoutError::new_err((msg, path)),
        Error::Resource { .. } => ResourceError::new_err((msg, path)),
        Error::Cancelled => pyo3::exceptions::PyKeyboardInterrupt::new_err(msg),
        Error::Internal(_) => InternalError::new_err((msg, path)),
        // A source or sink's own exception is raised instead when the binding holds it (`stream.rs`).
        Error::External(_) => InternalError::new_err((msg, path)),
    }
}
