//! Engine KV-cache layouts as data (`catalog`), resolved with a dtype, block size and geometry
//! (`descriptor`), and conversion between any two of them (`convert`): gather through a block table or slot
//! mapping, re-block, slice heads for tensor-parallel resharding, quantise to fp8 (per tensor, per token-head
//! with inline scales, the 656-byte `fp8_ds_mla` record) and back. `strided` is the copy mechanism and
//! `dtype` the per-vector codecs.
//!
//! ```
//! use kvwire_core::layout::{convert, ConvertOptions, Geometry, Layout, Side, Tokens};
//! let g = Geometry { layers: 1, heads: 2, head_dim: 4 };
//! let nhd = Layout::new("src", "vllm_nhd", "bfloat16", 2, g).unwrap();
//! let hnd = Layout::new("dst", "vllm_hnd", "bfloat16", 2, g).unwrap();
//! // One block: 2 slots × 2 heads × (K, V) × 4 values × 2 bytes.
//! let src: Vec<u8> = (0..64).collect();
//! let mut out = vec![0u8; 64];
//! let s = Side { layout: &nhd, planes: vec![&src[..]], tokens: Tokens::InOrder, heads: None };
//! let mut d = Side { layout: &hnd, planes: vec![&mut out[..]], tokens: Tokens::InOrder, heads: None };
//! assert_eq!(convert(&s, &mut d, &ConvertOptions::default()).unwrap(), 2);
//! // Slot 1, head 0 (bytes 32..48 in NHD) is the second vector of head 0 in HND.
//! assert_eq!(&out[16..32], &src[32..48]);
//! ```

pub mod catalog;
pub mod convert;
pub mod descriptor;
pub mod dtype;
pub mod strided;

pub use catalog::{layout_def, Axis, LayoutDef, LAYOUTS};
pub use convert::{convert, ConvertOptions, Side, Tokens};
pub use descriptor::{Geometry, Layout};
pub use dtype::{Codec, Dtype};
