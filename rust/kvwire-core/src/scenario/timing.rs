//! `cost.timing`: which source times the steps (`spec/simulator.md` (b); `docs/concepts/timing.md`). The
//! roofline needs nothing here; a measured source's tables are checked and handed to the pools.

use super::spec::{TimingSource, TimingSpec};
use super::Topology;
use crate::cost::table::StepTable;
use crate::error::{Error, Result};

/// Check `spec` against the pools, give each pool its table, and return what the echo shows (the spec
/// without its tables; `None` for the roofline, whose echo is the default's).
pub(super) fn resolve(
    spec: Option<TimingSpec>,
    topology: &mut Topology,
    speculative: bool,
) -> Result<Option<TimingSpec>> {
    let Some(mut spec) = spec else { return Ok(None) };
    let only = |field: &str, given: bool, sources: &str| -> Result<()> {
        if given {
            return Err(Error::field(
                format!("cost.timing.{field}"),
                format!(
                    "only used with source {sources}; the source is {:?}",
                    format!("{:?}", spec.source).to_lowercase()
                ),
            ));
        }
        Ok(())
    };
    // The measured source's own fields, refused with any other source.
    let provider_fields_refused = || -> Result<()> {
        for (field, given) in [
            ("system", spec.system.is_some()),
            ("backend", spec.backend.is_some()),
            ("version", spec.version.is_some()),
            ("model", spec.model.is_some()),
        ] {
            only(field, given, "\"aiconfigurator\"")?;
        }
        Ok(())
    };
    match spec.source {
        TimingSource::Roofline => {
            provider_fields_refused()?;
            only("file", spec.file.is_some(), "\"calibrated\"")?;
            only("tables", spec.tables.is_some(), "\"aiconfigurator\"")?;
            only("provenance", spec.provenance.is_some(), "\"aiconfigurator\" or \"calibrated\"")?;
            Ok(None)
        }
        TimingSource::Aiconfigurator => {
            only("file", spec.file.is_some(), "\"calibrated\"")?;
            if speculative {
                return Err(Error::field(
                    "speculative",
                    "not supported with a measured timing source yet (cost.timing.source \"aiconfigurator\"): \
                     use the roofline",
                ));
            }
            let Some(tables) = spec.tables.take() else {
                return Err(Error::field(
                    "cost.timing.tables",
                    "a measured source's step-time tables are built by the kvwire Python package when it reads \
                     the scenario (kvwire.simulate, the CLI, the service); the core got none",
                ));
            };
            let mut pools: Vec<(&str, &mut super::Pool)> = match topology {
                Topology::Disaggregated { prefill, decode } => vec![("prefill", prefill), ("decode", decode)],
                Topology::Colocated { pool } => vec![("colocated", pool)],
            };
            if let Some(extra) = tables.keys().find(|k| !pools.iter().any(|(n, _)| n == k)) {
                let names: Vec<_> = pools.iter().map(|(n, _)| *n).collect();
                return Err(Error::field(
                    format!("cost.timing.tables.{extra}"),
                    format!("not a pool of this scenario ({})", names.join(", ")),
                ));
            }
            for (name, pool) in pools.iter_mut() {
                let path = format!("cost.timing.tables.{name}");
                let Some(t) = tables.get(*name) else {
                    return Err(Error::field(path, "missing: every pool needs its table"));
                };
                let (p, d) = (t.prefill.clone(), t.decode.clone());
                pool.table = Some(StepTable::new((p.axes, p.values_s), (d.axes, d.values_s), &path)?);
            }
            Ok(Some(spec))
        }
        TimingSource::Calibrated => {
            only("tables", spec.tables.is_some(), "\"aiconfigurator\"")?;
            provider_fields_refused()?;
            if spec.provenance.is_none() {
                return Err(Error::field(
                    "cost.timing",
                    "a calibrated source is read by the kvwire Python package (it puts the fitted device in the \
                     pools); the core got it unread",
                ));
            }
            Ok(Some(spec))
        }
    }
}
