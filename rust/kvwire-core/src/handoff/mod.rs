//! The hand-off path: the link's queueing model, the cost of one transfer (with in-transit compression and the
//! transfer layer), the work the two ends do to a hand-off, and the
//! plan that resolves all of it once at validation.

pub mod closed_form;
pub mod link;
pub mod plan;
pub mod ranks;
pub mod shared;
pub mod transfer;
