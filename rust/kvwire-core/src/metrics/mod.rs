//! Measurement: the per-request table (struct of columns), run totals, and inter-token-latency statistics.

pub mod exact;
pub mod itl;
pub mod rows;
pub mod sketch;
pub mod stats;
pub mod table;
pub mod timeline;
