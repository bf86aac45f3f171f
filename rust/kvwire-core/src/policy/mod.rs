//! Decisions: routers (which instance), batching and admission (which requests join a step), rejection.

pub mod batching;
pub mod disaggregation;
pub mod router;
