//! `kv_tiers`: the tiers below a prefilling instance's GPU memory that its prefix cache spills to, as the
//! engine prices a load from them (bytes per second and a latency per load). Checked and resolved in
//! `validate.rs` (`kv_tiers`); what the engine does with them is in `engine/prefix.rs`.

use super::spec::{KvTierKind, KvTierSpec};

/// Most tiers a scenario takes (host and SSD, with room for a second of either).
pub const MAX_KV_TIERS: usize = 4;

/// The link a host tier uses when it names none.
pub const DEFAULT_HOST_TIER_LINK: &str = "pcie5";

/// One resolved tier.
#[derive(Clone, Debug, PartialEq)]
pub struct KvTier {
    pub kind: KvTierKind,
    /// Capacity per instance, bytes.
    pub capacity_bytes: f64,
    /// Rate a load reads at, bytes/s: the host link's line rate (`bandwidth_gb_per_s`), or the SSD's
    /// `gb_per_s`.
    pub bytes_per_s: f64,
    /// Latency of one load, s: the host link's `latency_us`, or the SSD's.
    pub latency_s: f64,
    /// The tier as given with its link expanded (for the echo).
    pub spec: KvTierSpec,
}

impl KvTier {
    /// Seconds one load of `bytes` takes: latency + bytes / rate.
    #[inline]
    pub fn load_s(&self, bytes: f64) -> f64 {
        self.latency_s + bytes / self.bytes_per_s
    }
}
