//! The one error type of the core. Every variant names the offending input (a field path such as
//! `workload.arrivals.rate_per_s`, or a trace column and row) and says why it was refused.
//! The Python bindings map each variant to one Python exception class in a single `match`.

use thiserror::Error;

/// The advice closing a [`Error::DoesNotFit`] message: the fields to change, as `--set` spells them.
fn needed_advice(path: &str, needed: Option<u32>) -> String {
    match needed {
        Some(n) => format!(
            "it needs at least {n} devices per instance: set {path}.devices_per_instance = {n} (--set \
             {path}.devices_per_instance={n}), or a larger device ({path}.device)"
        ),
        None => format!(
            "not even {} devices per instance hold it: use a larger device ({path}.device) or a smaller \
             model (model)",
            crate::limits::MAX_DEVICES_PER_INSTANCE
        ),
    }
}

/// The details of [`Error::DoesNotFit`]: the pool, the model and device, the sizes compared, and the fewest
/// devices per instance that would hold the model.
#[derive(Debug, Clone, PartialEq, Error)]
#[error(
    "{path}: model {model:?} does not fit on {devices}x {device:?}: {weights_gb:.1} GB of weights \
     against {usable_gb:.1} GB usable ({mem_util} of {hbm_gb:.1} GB {memory}); {}",
    needed_advice(path, *devices_needed)
)]
pub struct DoesNotFit {
    pub path: String,
    pub model: String,
    pub device: String,
    pub devices: u32,
    pub weights_gb: f64,
    pub usable_gb: f64,
    pub hbm_gb: f64,
    pub mem_util: f64,
    /// What the device's memory is (`HBM`, `on-chip SRAM (no HBM)`).
    pub memory: &'static str,
    /// The fewest devices per instance that hold the weights and one token of KV (`None`: not even the
    /// largest allowed instance does).
    pub devices_needed: Option<u32>,
}

/// Everything that can go wrong between a scenario arriving and a result leaving the core.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum Error {
    /// A scenario field is missing, of the wrong type, out of range, or unknown.
    #[error("{path}: {reason}")]
    Field { path: String, reason: String },

    /// A preset name that does not exist.
    #[error("{path}: unknown {kind} preset {name:?} (known: {known})")]
    UnknownPreset { path: String, kind: &'static str, name: String, known: String },

    /// The model's weights (plus the smallest useful KV cache) do not fit on an instance (boxed: the details
    /// are the largest error and would otherwise make every `Result` of the core that large).
    #[error("{0}")]
    DoesNotFit(Box<DoesNotFit>),

    /// An explicit request table is malformed (a column is missing, a value is NaN/negative, rows unsorted...).
    #[error("{path}: {reason}")]
    Trace { path: String, reason: String },

    /// A quantisation request that does not fit its input (axis, block size, dtype, buffer sizes).
    #[error("{path}: {reason}")]
    Quant { path: String, reason: String },

    /// A layout conversion that does not fit its input (unknown layout, buffer sizes, block tables, heads).
    #[error("{path}: {reason}")]
    Layout { path: String, reason: String },

    /// A run that would not fit the machine's memory (or an allocation that failed), refused before it
    /// started with the estimate.
    #[error("{path}: {reason}")]
    Resource { path: String, reason: String },

    /// The run was cancelled from outside (Ctrl-C in Python) before it finished.
    #[error("the run was cancelled before it finished")]
    Cancelled,

    /// Code outside the core that a run calls (a request source or a row sink of the bindings) failed; the
    /// caller holds the original error and reports it.
    #[error("{0}")]
    External(String),

    /// A broken internal invariant. Never expected; reported instead of panicking across the FFI boundary.
    #[error("internal error (please report): {0}")]
    Internal(String),
}

impl Error {
    /// Shorthand for [`Error::Field`].
    pub fn field(path: impl Into<String>, reason: impl Into<String>) -> Self {
        Error::Field { path: path.into(), reason: reason.into() }
    }

    /// The same error with a field path under `old` moved under `new` (a draft model checked by the rules of
    /// `model`, reported at `speculative.draft_model`).
    pub fn under(self, new: &str, old: &str) -> Self {
        match self {
            Error::Field { path, reason } if path == old || path.starts_with(&format!("{old}.")) => {
                Error::Field { path: format!("{new}{}", &path[old.len()..]), reason }
            }
            other => other,
        }
    }

    /// An allocation of `n` items of `what` for `path` failed.
    pub fn alloc(path: &str, what: &str, n: usize) -> Self {
        Error::Resource {
            path: path.to_string(),
            reason: format!("not enough memory for {n} {what}; run fewer requests"),
        }
    }

    /// Shorthand for [`Error::Trace`].
    pub fn trace(path: impl Into<String>, reason: impl Into<String>) -> Self {
        Error::Trace { path: path.into(), reason: reason.into() }
    }

    /// The field path (or trace column/row) the error is about; empty for internal errors.
    pub fn path(&self) -> &str {
        match self {
            Error::Field { path, .. }
            | Error::UnknownPreset { path, .. }
            | Error::Trace { path, .. }
            | Error::Quant { path, .. }
            | Error::Layout { path, .. }
            | Error::Resource { path, .. } => path,
            Error::DoesNotFit(d) => &d.path,
            Error::Internal(_) | Error::Cancelled | Error::External(_) => "",
        }
    }
}

/// Result alias used throughout the core.
pub type Result<T> = std::result::Result<T, Error>;
