//! The hand-off path: the link's queueing model, the cost of one transfer (with in-transit compression and the
//! transfer layer), and the work the two ends do to a hand-off.

pub mod closed_form;
pub mod endpoint;
pub mod link;
pub mod plan;
pub mod shared;
pub mod transfer;
