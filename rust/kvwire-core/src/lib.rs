//! # kvwire-core
//!
//! The pure-Rust core of kvwire: a discrete-event simulator of disaggregated (and colocated) LLM serving.
//! A JSON scenario goes in ([`Scenario::from_json`]), a per-request table and run totals come out
//! ([`simulate`]).
//!
//! ```
//! let sc = kvwire_core::Scenario::from_json(r#"{"workload": {"requests": 50}}"#, None).unwrap();
//! let out = kvwire_core::simulate(sc).unwrap();
//! assert_eq!(out.stats.completed, 50);
//! ```
//!
//! Layout: `scenario` (validated input), `engine` (mechanism: event kernel and state machines), `policy`
//! (routers, batching, admission), `cost` (physics: roofline, presets), `handoff` (link model, transfer
//! cost), `quant` (format table), `layout` (engine
//! KV layouts and conversions), `workload` (arrivals, lengths, traces), `metrics` (result columns, totals).

pub mod catalog;
pub mod ceilings;
pub mod cost;
pub mod engine;
pub mod error;
pub mod handoff;
pub mod layout;
pub mod limits;
pub mod metrics;
pub mod policy;
pub mod quant;
pub mod scenario;
pub mod workload;

pub use engine::{simulate, simulate_streamed, simulate_with, RowSink, SimOutput};
pub use error::{Error, Result};
pub use scenario::Scenario;
