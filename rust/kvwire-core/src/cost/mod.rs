//! Physics: presets (with sources), FLOPs/bytes of a step, and the roofline that turns them into time
//! and energy under the power roof.

pub mod model;
pub mod numerics;
pub mod parallel;
pub mod presets;
pub mod roofline;
pub mod table;
