//! Number formats for the KV cache. For now: the format table the hand-off uses for byte ratios.

pub mod formats;
