//! `prefix_cache`, `handoff.skip_cached_prefix` and `router.prefill = "prefix_affinity"`: resolved and
//! checked together (each needs the others' context).

use super::spec::{PrefillRouterSpec, PrefixCacheSpec};
use crate::error::{Error, Result};

/// The resolved prefix-caching options.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PrefixConfig {
    /// `prefix_cache.enabled`.
    pub enabled: bool,
    /// `prefix_cache.capacity_tokens` (`None`: the instance's free KV memory).
    pub capacity_tokens: Option<u64>,
    /// `handoff.skip_cached_prefix`.
    pub skip_cached_prefix: bool,
}

impl PrefixConfig {
    /// The `prefix_cache` section of the echo.
    pub fn spec(&self) -> PrefixCacheSpec {
        PrefixCacheSpec { enabled: self.enabled, capacity_tokens: self.capacity_tokens }
    }
}

/// Check the options against the mode, the scheduler and the router.
pub(super) fn resolve(
    spec: &PrefixCacheSpec,
    skip_cached_prefix: bool,
    prefill_router: PrefillRouterSpec,
    disaggregated: bool,
) -> Result<PrefixConfig> {
    let c = PrefixConfig { enabled: spec.enabled, capacity_tokens: spec.capacity_tokens, skip_cached_prefix };
    if c.skip_cached_prefix && !disaggregated {
        return Err(Error::field(
            "handoff.skip_cached_prefix",
            "colocated mode has no hand-off: use mode \"disaggregated\" or leave skip_cached_prefix false",
        ));
    }
    if c.skip_cached_prefix && !c.enabled {
        return Err(Error::field(
            "handoff.skip_cached_prefix",
            "needs prefix_cache.enabled = true (the decode instance's prefix cache says what it already holds)",
        ));
    }
    if prefill_router == PrefillRouterSpec::PrefixAffinity && !c.enabled {
        return Err(Error::field("router.prefill", "\"prefix_affinity\" needs prefix_cache.enabled = true"));
    }
    Ok(c)
}
