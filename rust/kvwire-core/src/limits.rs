//! The bounds a scenario may ask for: far beyond any real system, they keep every allocation sane and every
//! derived time and energy finite. The validator enforces them and the errors quote them, so they sit at the
//! ground floor beside `error.rs`, below the scenario that checks them.

/// Most requests a generated workload or a table may hold.
pub const MAX_REQUESTS: u64 = 100_000_000;
/// Most instances a pool may have.
pub const MAX_INSTANCES: u32 = 4096;
/// Most devices one instance may span.
pub const MAX_DEVICES_PER_INSTANCE: u32 = 1024;
/// Most channels a link may have.
pub const MAX_CHANNELS: u32 = 4096;
/// Largest value any positive physical quantity may take (keeps every derived quantity finite).
pub const MAX_QUANTITY: f64 = 1e9;
/// Smallest rate (requests/s, GB/s, TFLOP/s, TB/s, derating factor) the simulation divides by: with it and
/// [`MAX_QUANTITY`] every simulated time stays below ~1e20 s and every energy finite.
pub const MIN_RATE: f64 = 1e-6;
