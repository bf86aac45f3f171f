//! The engine KV-cache layouts kvwire knows, as data: for each one, its physical buffers ("planes") and, for
//! each plane, its dimensions outermost first, each dimension made of one or more logical axes (an engine
//! dimension such as vLLM's `2·head_size` is the logical axes `[Kv, Dim]` merged).
//!
//! Sources (quant.md §3, read 2026): vLLM `v1/attention/backends/*.py` and `csrc/cache_kernels.cu`, SGLang
//! `MHATokenToKVPool`, TensorRT-LLM `KVCacheManager`, LMCache `MemoryFormat`, NVIDIA Dynamo KVBM.
//! Engines that allocate one tensor per layer (vLLM, SGLang) are described with the layers stacked on a
//! leading axis: a single layer's tensor is the same layout with `layers = 1`.

/// A logical axis of a KV cache.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Axis {
    /// Transformer layer.
    Layer,
    /// Component: 0 = K, 1 = V (MLA caches have one component).
    Kv,
    /// Physical block of a paged cache (addressed through a block table or slot mapping).
    Block,
    /// Token position inside a block.
    Slot,
    /// Token position of a contiguous (unpaged) cache.
    Token,
    /// KV head.
    Head,
    /// One head vector: `head_dim` values, or the bytes of a quantised record.
    Dim,
    /// Legacy x-packed K: `head_dim / x` groups ...
    DimHi,
    /// ... of `x` = 16 bytes / element size values each.
    DimLo,
}

/// One physical buffer of a layout.
#[derive(Debug, PartialEq)]
pub struct PlaneDef {
    /// The component this buffer holds (`Some(0)` = K only), or `None` for both.
    pub kv: Option<u8>,
    /// Engine dimensions, outermost first; each is one or more logical axes merged.
    pub dims: &'static [&'static [Axis]],
}

/// A layout of some engine.
#[derive(Debug, PartialEq)]
pub struct LayoutDef {
    pub name: &'static str,
    /// Engine (and version) that uses it.
    pub engine: &'static str,
    /// Version tag: layouts change between engine releases, so conversions name the one they implement.
    pub version: &'static str,
    /// `true` for MLA caches (one component, one head, the latent+RoPE vector).
    pub mla: bool,
    /// How K and V are stored: `"packed"` (one dimension), `"stacked"` (an axis of one buffer),
    /// `"separate"` (two buffers) or `"none"` (MLA).
    pub kv_packing: &'static str,
    pub planes: &'static [PlaneDef],
    pub description: &'static str,
}

impl LayoutDef {
    /// Whether tokens are addressed through blocks (a block table or slot mapping).
    pub fn paged(&self) -> bool {
        self.planes[0].dims.iter().any(|d| d.contains(&Axis::Block))
    }

    /// Whether a plane splits head vectors into groups of x values (the legacy x-packed K).
    pub fn x_packed(&self) -> bool {
        self.planes.iter().any(|p| p.dims.iter().any(|d| d.contains(&Axis::DimHi)))
    }

    /// Whether every plane keeps each head vector contiguous (all but the legacy layout).
    pub fn vector_contiguous(&self) -> bool {
        self.planes.iter().all(|p| p.dims.last().is_some_and(|d| *d.last().unwrap_or(&Axis::Layer) == Axis::Dim))
    }
}

use Axis::*;

const BOTH: Option<u8> = None;

/// Every layout, in the order `kvwire.layout.layouts()` lists them.
pub const LAYOUTS: &[LayoutDef] = &[
    LayoutDef {
        name: "neutral",
        engine: "kvwire",
        version: "kvwire-1",
        mla: false,
        kv_packing: "stacked",
        planes: &[PlaneDef { kv: BOTH, dims: &[&[Layer], &[Kv], &[Token], &[Head], &[Dim]] }],
        description: "kvwire's interchange form for one request: (layers, 2, tokens, heads, head_dim), contiguous",
    },
    LayoutDef {
        name: "vllm_nhd",
        engine: "vLLM (FlashAttention, FlashInfer, Triton, FlexAttention, CPU) since PR #44455",
        version: "vllm-2026.06",
        mla: false,
        kv_packing: "packed",
        planes: &[PlaneDef { kv: BOTH, dims: &[&[Layer], &[Block], &[Slot], &[Head], &[Kv, Dim]] }],
        description: "per layer (blocks, block_size, heads, 2·head_dim): K then V in the last dim, NHD stride",
    },
    LayoutDef {
        name: "vllm_hnd",
        engine: "vLLM since PR #44455, HND stride (VLLM_KV_CACHE_LAYOUT=HND, NIXL heterogeneous TP)",
        version: "vllm-2026.06",
        mla: false,
        kv_packing: "packed",
        planes: &[PlaneDef { kv: BOTH, dims: &[&[Layer], &[Block], &[Head], &[Slot], &[Kv, Dim]] }],
        description: "per layer (blocks, heads, block_size, 2·head_dim): K then V in the last dim, HND stride",
    },
    LayoutDef {
        name: "vllm_flash_attn",
        engine: "vLLM v1 FlashAttention backend (2025), ROCm-attn",
        version: "vllm-2025",
        mla: false,
        kv_packing: "stacked",
        planes: &[PlaneDef { kv: BOTH, dims: &[&[Layer], &[Kv], &[Block], &[Slot], &[Head], &[Dim]] }],
        description: "per layer (2, blocks, block_size, heads, head_dim), NHD stride",
    },
    LayoutDef {
        name: "vllm_flash_attn_hnd",
        engine: "vLLM v1 FlashAttention backend (2025), HND stride order (0,1,3,2,4)",
        version: "vllm-2025",
        mla: false,
        kv_packing: "stacked",
        planes: &[PlaneDef { kv: BOTH, dims: &[&[Layer], &[Kv], &[Block], &[Head], &[Slot], &[Dim]] }],
        description: "per layer (2, blocks, heads, block_size, head_dim) physical",
    },
    LayoutDef {
        name: "vllm_flashinfer",
        engine: "vLLM v1 FlashInfer and Triton backends (2025)",
        version: "vllm-2025",
        mla: false,
        kv_packing: "stacked",
        planes: &[PlaneDef { kv: BOTH, dims: &[&[Layer], &[Block], &[Kv], &[Slot], &[Head], &[Dim]] }],
        description: "per layer (blocks, 2, block_size, heads, head_dim), NHD stride",
    },
    LayoutDef {
        name: "vllm_flashinfer_hnd",
        engine: "vLLM v1 FlashInfer and Triton backends (2025), HND stride",
        version: "vllm-2025",
        mla: false,
        kv_packing: "stacked",
        planes: &[PlaneDef { kv: BOTH, dims: &[&[Layer], &[Block], &[Kv], &[Head], &[Slot], &[Dim]] }],
        description: "per layer (blocks, 2, heads, block_size, head_dim) physical",
    },
    LayoutDef {
        name: "vllm_legacy",
        engine: "vLLM PagedAttention v1/v2 (reshape_and_cache)",
        version: "vllm-legacy",
        mla: false,
        kv_packing: "separate",
        planes: &[
            PlaneDef { kv: Some(0), dims: &[&[Layer], &[Block], &[Head], &[DimHi], &[Slot], &[DimLo]] },
            PlaneDef { kv: Some(1), dims: &[&[Layer], &[Block], &[Head], &[Dim], &[Slot]] },
        ],
        description: "per layer K (blocks, heads, head_dim/x, block_size, x) with x = 16 B / element size, \
                      and V (blocks, heads, head_dim, block_size)",
    },
    LayoutDef {
        name: "sglang",
        engine: "SGLang MHATokenToKVPool",
        version: "sglang-2026",
        mla: false,
        kv_packing: "separate",
        planes: &[
            PlaneDef { kv: Some(0), dims: &[&[Layer], &[Block, Slot], &[Head], &[Dim]] },
            PlaneDef { kv: Some(1), dims: &[&[Layer], &[Block, Slot], &[Head], &[Dim]] },
        ],
        description: "per layer k_buffer and v_buffer (slots, heads, head_dim), token-major; slot = page·page_size \
                      + offset (page_size = block_size)",
    },
    LayoutDef {
        name: "trtllm",
        engine: "TensorRT-LLM KV cache pool",
        version: "trtllm-2026",
        mla: false,
        kv_packing: "stacked",
        planes: &[PlaneDef { kv: BOTH, dims: &[&[Block], &[Layer], &[Kv], &[Head, Slot, Dim]] }],
        description: "(blocks, layers, 2, heads·tokens_per_block·head_dim): all layers share a block, \
                      head-major inside",
    },
    LayoutDef {
        name: "lmcache_kv_2ltd",
        engine: "LMCache MemoryFormat.KV_2LTD",
        version: "lmcache-2026",
        mla: false,
        kv_packing: "stacked",
        planes: &[PlaneDef { kv: BOTH, dims: &[&[Kv], &[Layer], &[Token], &[Head, Dim]] }],
        description: "a chunk (2, layers, tokens, heads·head_dim), contiguous",
    },
    LayoutDef {
        name: "lmcache_kv_t2d",
        engine: "LMCache MemoryFormat.KV_T2D",
        version: "lmcache-2026",
        mla: false,
        kv_packing: "stacked",
        planes: &[PlaneDef { kv: BOTH, dims: &[&[Layer], &[Token], &[Kv], &[Head, Dim]] }],
        description: "per layer a chunk (tokens, 2, heads·head_dim), contiguous",
    },
    LayoutDef {
        name: "dynamo_universal",
        engine: "NVIDIA Dynamo KVBM universal block",
        version: "dynamo-2026",
        mla: false,
        kv_packing: "stacked",
        planes: &[PlaneDef { kv: BOTH, dims: &[&[Block], &[Head], &[Layer], &[Kv], &[Slot], &[Dim]] }],
        description: "(blocks, heads, layers, 2, block_size, head_dim): heads outermost, so a TP reshard is a \
                      contiguous slice",
    },
    LayoutDef {
        name: "mla",
        engine: "vLLM / SGLang MLA (DeepSeek)",
        version: "vllm-2026.06",
        mla: true,
        kv_packing: "none",
        planes: &[PlaneDef { kv: BOTH, dims: &[&[Layer], &[Block], &[Slot], &[Dim]] }],
        description: "per layer (blocks, block_size, kv_lora_rank + rope_dim), e.g. 576 = 512 + 64; with dtype \
                      fp8_ds_mla the last dim is the 656-byte record",
    },
    LayoutDef {
        name: "mla_neutral",
        engine: "kvwire",
        version: "kvwire-1",
        mla: true,
        kv_packing: "none",
        planes: &[PlaneDef { kv: BOTH, dims: &[&[Layer], &[Token], &[Dim]] }],
        description: "kvwire's interchange form of an MLA cache for one request: (layers, tokens, 576)",
    },
];

/// The layout called `name`.
pub fn layout_def(name: &str) -> Option<&'static LayoutDef> {
    LAYOUTS.iter().find(|l| l.name == name)
}

/// Comma-separated layout names, for error messages.
pub fn known_layouts() -> String {
    LAYOUTS.iter().map(|l| l.name).collect::<Vec<_>>().join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_plane_has_each_axis_once_and_one_token_addressing() {
        for l in LAYOUTS {
            for p in l.planes {
                let axes: Vec<Axis> = p.dims.iter().flat_map(|d| d.iter().copied()).collect();
                for a in [Layer, Dim] {
                    let n = axes.iter().filter(|&&x| x == a || (a == Dim && x == DimHi)).count();
                    assert_eq!(n, 1, "{}: {a:?}", l.name);
                }
                let paged = axes.contains(&Block) && axes.contains(&Slot);
                assert!(paged ^ axes.contains(&Token), "{}", l.name);
                assert_eq!(axes.contains(&Kv), p.kv.is_none() && !l.mla, "{}", l.name);
                assert_eq!(axes.contains(&Head), !l.mla, "{}", l.name);
            }
            assert_eq!(l.planes.len(), if l.kv_packing == "separate" { 2 } else { 1 }, "{}", l.name);
        }
    }

    #[test]
    fn names_are_unique_and_found() {
        for l in LAYOUTS {
            assert_eq!(layout_def(l.name).map(|d| d.name), Some(l.name));
        }
        assert!(layout_def("nope").is_none());
        assert!(!layout_def("vllm_legacy").is_some_and(|l| l.vector_contiguous()));
        assert_eq!(LAYOUTS.iter().filter(|l| l.x_packed()).map(|l| l.name).collect::<Vec<_>>(), ["vllm_legacy"]);
        assert!(layout_def("vllm_hnd").is_some_and(|l| l.vector_contiguous() && l.paged()));
        assert!(!layout_def("neutral").is_some_and(|l| l.paged()));
    }
}
