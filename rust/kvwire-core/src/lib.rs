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
//! Layout, from the ground up (a room imports only rooms below it; `tests/test_rust_circles.py` checks it):
//! `error` (the one error type) and `limits` (the bounds a scenario may ask for); the leaves `cost` (physics:
//! roofline, presets), `quant` (format table), `layout` (engine KV layouts and conversions), `workload`
//! (arrivals, lengths, traces), `metrics` (result columns, totals), `policy` (routers, batching, admission);
//! `handoff` (link model, transfer cost) and `catalog` (the presets listed); `scenario` (validated input and
//! what it derives: its pools' KV capacity, its request table); `ceilings` (analytic capacity); `engine`
//! (mechanism: event kernel and state machines).

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
pub mod steps;
pub mod workload;

pub use engine::{simulate, simulate_streamed, simulate_with, RowSink, SimOutput};
pub use error::{Error, Result};
pub use scenario::Scenario;
