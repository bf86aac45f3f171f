//! A resolved layout: an engine layout (`catalog`) with a dtype, a block size and the model geometry. It knows
//! its buffers' shapes, the byte stride of every logical axis, and its exact byte size for a request.

use super::catalog::{known_layouts, layout_def, Axis, LayoutDef};
use super::dtype::{Dtype, DS_MLA_LATENT, DS_MLA_ROPE};
use crate::error::{Error, Result};

/// Model dimensions a layout is instantiated with (per tensor-parallel rank: `heads` is the KV heads this
/// cache holds).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Geometry {
    pub layers: usize,
    /// KV heads (1 for MLA).
    pub heads: usize,
    /// Values per head vector (576 for DeepSeek MLA: 512 latent + 64 RoPE).
    pub head_dim: usize,
}

/// A layout ready to describe buffers.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Layout {
    pub def: &'static LayoutDef,
    pub dtype: Dtype,
    /// Tokens per block (paged layouts; SGLang's page size). Ignored by contiguous layouts.
    pub block_size: usize,
    pub geometry: Geometry,
}

/// Byte stride of every logical axis in one buffer (0 for axes the buffer does not have).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Strides([usize; 9]);

impl Strides {
    pub fn of(&self, a: Axis) -> usize {
        self.0[a as usize]
    }
}

fn lerr(path: &str, reason: impl Into<String>) -> Error {
    Error::Layout { path: path.into(), reason: reason.into() }
}

/// Largest bytes per block (or per token of a contiguous layout) a layout may have: 2^40, a terabyte.
pub const MAX_BLOCK_BYTES: u64 = 1 << 40;

impl Layout {
    /// Resolve `name` with `dtype`; `path` prefixes error messages (e.g. `"src_layout"`).
    pub fn new(path: &str, name: &str, dtype: &str, block_size: usize, geometry: Geometry) -> Result<Layout> {
        let def = layout_def(name).ok_or_else(|| {
            lerr(&format!("{path}.name"), format!("unknown layout {name:?} (known: {})", known_layouts()))
        })?;
        let dt = Dtype::parse(dtype).ok_or_else(|| {
            let known: Vec<_> = Dtype::ALL.iter().map(|d| d.name()).collect();
            lerr(&format!("{path}.dtype"), format!("unknown dtype {dtype:?} (known: {})", known.join(", ")))
        })?;
        let Geometry { layers, heads, head_dim } = geometry;
        for (field, v) in [("layers", layers), ("heads", heads), ("head_dim", head_dim), ("block_size", block_size)] {
            if v == 0 {
                return Err(lerr(&format!("{path}.{field}"), "must be ≥ 1"));
            }
            if v > 1 << 20 {
                return Err(lerr(&format!("{path}.{field}"), format!("{v} is implausibly large (limit 2^20)")));
            }
        }
        if def.mla && heads != 1 {
            return Err(lerr(&format!("{path}.heads"), format!("an MLA cache has one latent head, got {heads}")));
        }
        if dt == Dtype::Fp8DsMla && (!def.mla || head_dim != DS_MLA_LATENT + DS_MLA_ROPE) {
            return Err(lerr(
                &format!("{path}.dtype"),
                format!(
                    "fp8_ds_mla is the DeepSeek MLA record: it needs an MLA layout (mla, mla_neutral) with \
                     head_dim 576, got {name} with head_dim {head_dim}"
                ),
            ));
        }
        if def.x_packed() {
            let x = 16 / dt.unit_bytes();
            if !(dt.plain() || dt.separate_scales()) {
                return Err(lerr(
                    &format!("{path}.dtype"),
                    format!("{name} stores plain or fp8 values, not {}", dt.name()),
                ));
            }
            if head_dim % x != 0 {
                return Err(lerr(
                    &format!("{path}.head_dim"),
                    format!("{name} packs K in groups of x = {x} values; head_dim {head_dim} is not a multiple"),
                ));
            }
        }
        // Bytes per block (or token) in checked arithmetic: every byte count, stride and index of the kernels
        // is then far from overflowing (a block of 2^40 bytes, a terabyte, is the ceiling).
        let paged_block = if def.paged() { block_size } else { 1 };
        let components = if def.mla { 1 } else { 2 };
        let mut bytes = 1u128;
        for (field, factor) in [
            ("head_dim", dt.vector_bytes(head_dim) * components),
            ("heads", heads),
            ("block_size", paged_block),
            ("layers", layers),
        ] {
            bytes *= factor as u128;
            if bytes > MAX_BLOCK_BYTES as u128 {
                return Err(lerr(
                    &format!("{path}.{field}"),
                    format!(
                        "the cache geometry (layers {layers} × heads {heads} × head_dim {head_dim} × block_size \
                         {block_size}, {}) needs more than {MAX_BLOCK_BYTES} bytes per block",
                        dt.name()
                    ),
                ));
            }
        }
        Ok(Layout { def, dtype: dt, block_size: paged_block, geometry })
    }

    /// 2 (K and V), or 1 for MLA.
    pub fn components(&self) -> usize {
        if self.def.mla {
            1
        } else {
            2
        }
    }

    /// Units (numpy elements) per head vector: `head_dim` for float and fp8 dtypes, the record's bytes otherwise.
    pub fn vector_units(&self) -> usize {
        self.dtype.vector_bytes(self.geometry.head_dim) / self.dtype.unit_bytes()
    }

    /// The legacy layout's K packing factor x (16 bytes of values).
    pub fn legacy_x(&self) -> usize {
        16 / self.dtype.unit_bytes()
    }

    /// Size of axis `a` in a buffer with `count` blocks (paged) or tokens (contiguous).
    fn axis_size(&self, a: Axis, count: usize) -> usize {
        let g = &self.geometry;
        match a {
            Axis::Layer => g.layers,
            Axis::Kv => self.components(),
            Axis::Block | Axis::Token => count,
            Axis::Slot => self.block_size,
            Axis::Head => g.heads,
            Axis::Dim => self.vector_units(),
            Axis::DimHi => self.vector_units() / self.legacy_x(),
            Axis::DimLo => self.legacy_x(),
        }
    }

    /// Number of buffers (2 for layouts with separate K and V tensors).
    pub fn planes(&self) -> usize {
        self.def.planes.len()
    }

    /// The engine shape of buffer `plane` holding `count` blocks (paged) or tokens (contiguous), in numpy
    /// elements of [`Dtype::numpy`].
    pub fn shape(&self, plane: usize, count: usize) -> Vec<usize> {
        self.def.planes[plane].dims.iter().map(|d| d.iter().map(|&a| self.axis_size(a, count)).product()).collect()
    }

    /// Index of the engine dimension of buffer `plane` that grows with the block (or token) count.
    pub fn count_dim(&self, plane: usize) -> usize {
        self.def.planes[plane]
            .dims
            .iter()
            .position(|d| d.contains(&Axis::Block) || d.contains(&Axis::Token))
            .unwrap_or(0)
    }

    /// Bytes of buffer `plane` per block (paged) or per token (contiguous).
    pub fn plane_bytes_per_count(&self, plane: usize) -> usize {
        self.shape(plane, 1).iter().product::<usize>() * self.dtype.unit_bytes()
    }

    /// Bytes of all buffers per block (paged) or per token (contiguous).
    pub fn bytes_per_count(&self) -> usize {
        (0..self.planes()).map(|p| self.plane_bytes_per_count(p)).sum()
    }

    /// Tokens a block holds (1 for contiguous layouts, whose count is tokens).
    pub fn tokens_per_count(&self) -> usize {
        if self.def.paged() {
            self.block_size
        } else {
            1
        }
    }

    /// Bytes of the per-(layer, K/V) fp32 scales kept outside the cache (`fp8_e4m3` and the other
    /// separate-scale fp8 dtypes), else 0.
    pub fn separate_scale_bytes(&self) -> usize {
        if self.dtype.separate_scales() {
            4 * self.geometry.layers * self.components()
        } else {
            0
        }
    }

    /// Exact bytes a request of `tokens` tokens occupies: whole blocks for paged layouts (the last one
    /// partly filled), plus separate scales; `None` when that does not fit in 64 bits.
    pub fn request_bytes(&self, tokens: u64) -> Option<u64> {
        let counts = tokens.div_ceil(self.tokens_per_count() as u64);
        counts.checked_mul(self.bytes_per_count() as u64)?.checked_add(self.separate_scale_bytes() as u64)
    }

    /// [`Self::request_bytes`] as a float (exact below 2^53 bytes), for the cost model; never overflows.
    pub fn request_bytes_f64(&self, tokens: u64) -> f64 {
        let counts = tokens.div_ceil(self.tokens_per_count() as u64);
        counts as f64 * self.bytes_per_count() as f64 + self.separate_scale_bytes() as f64
    }

    /// Byte strides of every axis in buffer `plane` holding `count` blocks or tokens.
    pub fn strides(&self, plane: usize, count: usize) -> Strides {
        let mut s = Strides::default();
        let mut stride = self.dtype.unit_bytes();
        for dim in self.def.planes[plane].dims.iter().rev() {
            for &a in dim.iter().rev() {
                s.0[a as usize] = stride;
                stride *= self.axis_size(a, count);
            }
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const G: Geometry = Geometry { layers: 2, heads: 4, head_dim: 16 };

    fn l(name: &str, dtype: &str, bs: usize) -> Layout {
        Layout::new("x", name, dtype, bs, G).unwrap()
    }

    /// Geometries whose bytes per block would pass 2^40 are refused naming the factor that crossed it (they
    /// wrapped to 0 bytes before); a request too large for 64 bits has no byte count, not a saturated one.
    #[test]
    fn huge_geometries_are_refused_not_wrapped() {
        let big = Geometry { layers: 1 << 20, heads: 1, head_dim: 1 << 20 };
        let e = Layout::new("layout", "vllm_nhd", "bfloat16", 1 << 20, big).unwrap_err();
        assert_eq!(e.path(), "layout.block_size");
        assert!(e.to_string().contains("more than 1099511627776 bytes per block"), "{e}");
        let wide = Geometry { layers: 1, heads: 1 << 20, head_dim: 1 << 20 };
        assert_eq!(Layout::new("layout", "neutral", "float32", 1, wide).unwrap_err().path(), "layout.heads");
        let ok = Layout::new(
            "layout",
            "vllm_nhd",
            "float32",
            1 << 10,
            Geometry { layers: 1 << 10, heads: 1 << 4, head_dim: 1 << 10 },
        )
        .unwrap();
        assert_eq!(ok.bytes_per_count(), 1 << 37);
        assert_eq!(ok.request_bytes(1 << 10), Some(1 << 37));
        assert_eq!(ok.request_bytes(u64::MAX), None);
        assert_eq!(ok.request_bytes_f64(1 << 10), (1u64 << 37) as f64);
    }

    #[test]
    fn shapes_are_the_engines() {
        assert_eq!(l("vllm_hnd", "bfloat16", 16).shape(0, 10), vec![2, 10, 4, 16, 32]);
        assert_eq!(l("vllm_nhd", "bfloat16", 16).shape(0, 10), vec![2, 10, 16, 4, 32]);
        assert_eq!(l("vllm_flash_attn", "bfloat16", 16).shape(0, 10), vec![2, 2, 10, 16, 4, 16]);
        assert_eq!(l("vllm_flashinfer", "bfloat16", 16).shape(0, 10), vec![2, 10, 2, 16, 4, 16]);
        assert_eq!(l("vllm_legacy", "bfloat16", 16).shape(0, 10), vec![2, 10, 4, 2, 16, 8]);
        assert_eq!(l("vllm_legacy", "bfloat16", 16).shape(1, 10), vec![2, 10, 4, 16, 16]);
        assert_eq!(l("vllm_legacy", "fp8_e4m3", 16).shape(0, 10), vec![2, 10, 4, 1, 16, 16]);
        assert_eq!(l("sglang", "bfloat16", 1).shape(1, 10), vec![2, 10, 4, 16]);
        assert_eq!(l("trtllm", "bfloat16", 8).shape(0, 10), vec![10, 2, 2, 4 * 8 * 16]);
        assert_eq!(l("lmcache_kv_2ltd", "bfloat16", 16).shape(0, 7), vec![2, 2, 7, 64]);
        assert_eq!(l("lmcache_kv_t2d", "bfloat16", 16).shape(0, 7), vec![2, 7, 2, 64]);
        assert_eq!(l("dynamo_universal", "bfloat16", 16).shape(0, 3), vec![3, 4, 2, 2, 16, 16]);
        assert_eq!(l("neutral", "float32", 16).shape(0, 5), vec![2, 2, 5, 4, 16]);
        assert_eq!(l("vllm_hnd", "fp8_per_token_head", 16).shape(0, 1), vec![2, 1, 4, 16, 40]);
    }

    #[test]
    fn request_bytes_count_whole_blocks_and_separate_scales() {
        // 2 layers · 2 · 4 heads · 16 · 2 B = 512 B per token.
        assert_eq!(l("neutral", "bfloat16", 16).request_bytes(17), Some(17 * 512));
        assert_eq!(l("vllm_hnd", "bfloat16", 16).request_bytes(17), Some(32 * 512));
        assert_eq!(l("vllm_hnd", "bfloat16", 16).request_bytes(16), Some(16 * 512));
        assert_eq!(l("sglang", "bfloat16", 1).request_bytes(17), Some(17 * 512));
        assert_eq!(l("vllm_hnd", "fp8_e4m3", 16).request_bytes(16), Some(16 * 256 + 4 * 2 * 2));
        assert_eq!(l("vllm_hnd", "fp8_per_token_head", 16).request_bytes(16), Some(16 * 2 * 2 * 4 * 20));
        let mla = Geometry { layers: 61, heads: 1, head_dim: 576 };
        let ds = Layout::new("x", "mla", "fp8_ds_mla", 64, mla).unwrap();
        assert_eq!(ds.request_bytes(64), Some(64 * 61 * 656));
        assert_eq!(Layout::new("x", "mla", "bfloat16", 64, mla).unwrap().request_bytes(1), Some(64 * 61 * 1152));
    }

    #[test]
    fn strides_follow_the_engine_order() {
        let s = l("vllm_hnd", "bfloat16", 16).strides(0, 10);
        assert_eq!(s.of(Axis::Dim), 2);
        assert_eq!(s.of(Axis::Kv), 32);
        assert_eq!(s.of(Axis::Slot), 64);
        assert_eq!(s.of(Axis::Head), 64 * 16);
        assert_eq!(s.of(Axis::Block), 64 * 16 * 4);
        assert_eq!(s.of(Axis::Layer), 64 * 16 * 4 * 10);
        assert_eq!(s.of(Axis::Token), 0);
    }

    #[test]
    fn bad_descriptors_are_refused_with_the_field() {
        let e = Layout::new("src_layout", "vllm_hnd", "int3", 16, G).unwrap_err();
        assert_eq!(e.path(), "src_layout.dtype");
        let e = Layout::new("src_layout", "vllm_hnx", "bfloat16", 16, G).unwrap_err();
        assert!(e.to_string().contains("vllm_hnd"), "{e}");
        assert_eq!(Layout::new("d", "mla", "bfloat16", 16, G).unwrap_err().path(), "d.heads");
        assert_eq!(Layout::new("d", "vllm_hnd", "fp8_ds_mla", 16, G).unwrap_err().path(), "d.dtype");
        let odd = Geometry { head_dim: 12, ..G };
        assert_eq!(Layout::new("d", "vllm_legacy", "bfloat16", 16, odd).unwrap_err().path(), "d.head_dim");
        assert_eq!(Layout::new("d", "vllm_hnd", "bfloat16", 0, G).unwrap_err().path(), "d.block_size");
    }
}
