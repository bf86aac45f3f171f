//! The hand-off path: the link's queueing model and the cost of one transfer (with in-transit compression).

pub mod closed_form;
pub mod link;
pub mod plan;
pub mod shared;
pub mod transfer;
