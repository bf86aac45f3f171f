//! The format table: one row per KV storage format. Every byte ratio (the simulator's hand-off compression,
//! the reports) is computed from these rows, never typed in twice. `bits_per_value` counts the element
//! code plus its share of the block scales (and zero points); a per-tensor fp32 scale is reported
//! separately (`tensor_scale_bits`), being negligible for a KV cache.

use super::minifloat::{MiniFloat, E2M1, E2M3, E3M2, E4M3FN, E4M3FNUZ, E5M2, E5M2FNUZ};

/// What a format does to a tensor (see `quant/schemes.rs` for the exact rules).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Scheme {
    /// BF16, no compression.
    None,
    /// FP8 with an fp32 scale per tensor (`group: None`) or per `group` values along the axis.
    Fp8 { elem: MiniFloat, group: Option<usize> },
    /// OCP MX: E8M0 scale per 32 values.
    Mx { elem: MiniFloat },
    /// NVIDIA NVFP4: E2M1, E4M3 scale per 16, fp32 tensor scale.
    Nvfp4,
    /// Integer groups with an fp16 scale (and fp16 zero point when asymmetric).
    Int { bits: u32, symmetric: bool, group: usize },
    /// vLLM's `fp8_ds_mla` record for MLA caches: per token and layer, 512 latent values as E4M3 in four
    /// tiles of 128 with an fp32 scale each, plus the 64 RoPE values kept in BF16 — 656 bytes for 576 values.
    DsMla,
}

/// One KV storage format.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Format {
    /// Name used by `kvwire.quant` and in scenarios (`handoff.compression`).
    pub name: &'static str,
    pub scheme: Scheme,
    /// Element-wise operations per BF16 input value to encode (the in-transit stage's compute): the
    /// reference simulator's 1 for fp8 and 2 for 4-bit block formats; other block formats use 2 by the same
    /// rule (scale from the block amax, then scale-and-round).
    pub encode_ops_per_value: f64,
    pub description: &'static str,
}

impl Format {
    /// Bits of one element code.
    pub fn element_bits(&self) -> u32 {
        match self.scheme {
            Scheme::None => 16,
            Scheme::Fp8 { elem, .. } | Scheme::Mx { elem } => elem.bits(),
            Scheme::Nvfp4 => 4,
            Scheme::Int { bits, .. } => bits,
            Scheme::DsMla => 8,
        }
    }

    /// The element format, for floating-point schemes.
    pub fn element(&self) -> Option<MiniFloat> {
        match self.scheme {
            Scheme::Fp8 { elem, .. } | Scheme::Mx { elem } => Some(elem),
            Scheme::DsMla => Some(E4M3FN),
            Scheme::Nvfp4 => Some(E2M1),
            _ => None,
        }
    }

    /// Values sharing one block scale (`None`: none, or one per tensor).
    pub fn block(&self) -> Option<usize> {
        match self.scheme {
            Scheme::None | Scheme::Fp8 { group: None, .. } => None,
            Scheme::Fp8 { group: Some(g), .. } => Some(g),
            Scheme::Mx { .. } => Some(32),
            Scheme::Nvfp4 => Some(16),
            Scheme::Int { group, .. } => Some(group),
            Scheme::DsMla => Some(128),
        }
    }

    /// Type of the block scale.
    pub fn scale_type(&self) -> &'static str {
        match self.scheme {
            Scheme::None => "none",
            Scheme::Fp8 { group: None, .. } => "fp32 per tensor",
            Scheme::Fp8 { .. } => "fp32",
            Scheme::Mx { .. } => "e8m0",
            Scheme::Nvfp4 => "e4m3 (+ fp32 per tensor)",
            Scheme::Int { symmetric: true, .. } => "fp16",
            Scheme::Int { symmetric: false, .. } => "fp16 scale + fp16 zero point",
            Scheme::DsMla => "fp32 per 128-value latent tile; RoPE kept in bf16",
        }
    }

    /// Bits of metadata per block.
    pub fn scale_bits_per_block(&self) -> u32 {
        match self.scheme {
            Scheme::None | Scheme::Fp8 { group: None, .. } => 0,
            Scheme::Fp8 { .. } => 32,
            Scheme::Mx { .. } | Scheme::Nvfp4 => 8,
            Scheme::Int { symmetric: true, .. } => 16,
            Scheme::Int { symmetric: false, .. } => 32,
            Scheme::DsMla => 32,
        }
    }

    /// Bits of metadata per tensor.
    pub fn tensor_scale_bits(&self) -> u32 {
        match self.scheme {
            Scheme::Fp8 { group: None, .. } | Scheme::Nvfp4 => 32,
            _ => 0,
        }
    }

    /// Bits per value, block metadata included.
    pub fn bits_per_value(&self) -> f64 {
        match self.scheme {
            // 656 bytes per 576 values (512 fp8 latent + 4 fp32 scales + 64 bf16 RoPE).
            Scheme::DsMla => (656 * 8) as f64 / 576.0,
            _ => {
                self.element_bits() as f64 + self.block().map_or(0.0, |b| self.scale_bits_per_block() as f64 / b as f64)
            }
        }
    }

    /// Compression ratio against BF16: input bytes / output bytes.
    pub fn ratio_vs_bf16(&self) -> f64 {
        16.0 / self.bits_per_value()
    }
}

const fn fp8(name: &'static str, elem: MiniFloat, group: Option<usize>, ops: f64, d: &'static str) -> Format {
    Format { name, scheme: Scheme::Fp8 { elem, group }, encode_ops_per_value: ops, description: d }
}

const fn mx(name: &'static str, elem: MiniFloat, d: &'static str) -> Format {
    Format { name, scheme: Scheme::Mx { elem }, encode_ops_per_value: 2.0, description: d }
}

const fn int(name: &'static str, bits: u32, symmetric: bool, group: usize, d: &'static str) -> Format {
    Format { name, scheme: Scheme::Int { bits, symmetric, group }, encode_ops_per_value: 2.0, description: d }
}

/// Every format.
pub const FORMATS: &[Format] = &[
    Format {
        name: "none",
        scheme: Scheme::None,
        encode_ops_per_value: 0.0,
        description: "BF16, uncompressed (no compression stage at all)",
    },
    fp8("fp8_e4m3", E4M3FN, None, 1.0, "FP8 E4M3FN, one fp32 scale per tensor (vLLM fp8 KV cache)"),
    fp8("fp8_e5m2", E5M2, None, 1.0, "FP8 E5M2, one fp32 scale per tensor"),
    fp8(
        "fp8_e4m3_g128",
        E4M3FN,
        Some(128),
        1.0,
        "FP8 E4M3FN, fp32 scale per 128 values (per token-head at head_dim 128)",
    ),
    fp8(
        "fp8_e4m3fnuz",
        E4M3FNUZ,
        None,
        1.0,
        "FP8 E4M3FNUZ (AMD MI300), one fp32 scale per tensor, amax/224 as vLLM on gfx942",
    ),
    fp8("fp8_e5m2fnuz", E5M2FNUZ, None, 1.0, "FP8 E5M2FNUZ (AMD MI300), one fp32 scale per tensor"),
    fp8(
        "fp8_e4m3fnuz_g128",
        E4M3FNUZ,
        Some(128),
        1.0,
        "FP8 E4M3FNUZ, fp32 scale (amax/224) per 128 values (per token-head at head_dim 128)",
    ),
    mx("mxfp8_e4m3", E4M3FN, "OCP MXFP8, E4M3 elements, E8M0 scale per 32"),
    mx("mxfp8_e5m2", E5M2, "OCP MXFP8, E5M2 elements, E8M0 scale per 32"),
    mx("mxfp6_e2m3", E2M3, "OCP MXFP6, E2M3 elements, E8M0 scale per 32"),
    mx("mxfp6_e3m2", E3M2, "OCP MXFP6, E3M2 elements, E8M0 scale per 32"),
    mx("mxfp4", E2M1, "OCP MXFP4, E2M1 elements, E8M0 scale per 32 (the reference's fp4-block)"),
    Format {
        name: "nvfp4",
        scheme: Scheme::Nvfp4,
        encode_ops_per_value: 2.0,
        description: "NVIDIA NVFP4, E2M1 elements, E4M3 scale per 16, fp32 scale per tensor",
    },
    int("int8_sym_g32", 8, true, 32, "INT8 symmetric, fp16 scale per 32"),
    int("int8_asym_g32", 8, false, 32, "INT8 asymmetric, fp16 scale and zero point per 32"),
    int("int4_sym_g32", 4, true, 32, "INT4 symmetric, fp16 scale per 32"),
    int("int4_asym_g32", 4, false, 32, "INT4 asymmetric (KIVI), fp16 scale and zero point per 32"),
    int("int4_sym_g128", 4, true, 128, "INT4 symmetric, fp16 scale per 128"),
    Format {
        name: "fp8_ds_mla",
        scheme: Scheme::DsMla,
        encode_ops_per_value: 2.0,
        description: "vLLM fp8_ds_mla record (MLA only): 512 E4M3 latent in 4 tiles with fp32 scales + 64 BF16 RoPE",
    },
];

/// Accepted alternative names.
pub const ALIASES: &[(&str, &str)] = &[("fp8", "fp8_e4m3"), ("mxfp8", "mxfp8_e4m3")];

/// Look a format up by name or alias.
pub fn format(name: &str) -> Option<&'static Format> {
    let name = ALIASES.iter().find(|(a, _)| *a == name).map_or(name, |(_, n)| *n);
    FORMATS.iter().find(|f| f.name == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Ratios stated in spec/handoff.md and spec/quant.md §6, as exact fractions of the bit layouts.
    #[test]
    fn ratios_follow_from_the_bit_layouts() {
        let r = |n: &str| format(n).unwrap().ratio_vs_bf16();
        let bits = |n: &str| format(n).unwrap().bits_per_value();
        assert_eq!(r("none"), 1.0);
        assert_eq!(r("fp8"), 2.0);
        assert_eq!(r("mxfp8"), 64.0 / 33.0);
        assert_eq!(r("mxfp6_e2m3"), 64.0 / 25.0);
        assert_eq!(r("mxfp4"), 64.0 / 17.0);
        assert_eq!(r("nvfp4"), 32.0 / 9.0);
        assert_eq!(r("int4_asym_g32"), 3.2);
        assert_eq!(bits("fp8_e4m3_g128"), 8.25);
        assert_eq!(r("fp8_e4m3fnuz"), 2.0);
        assert_eq!(r("fp8_e5m2fnuz"), 2.0);
        assert_eq!(bits("fp8_e4m3fnuz_g128"), 8.25);
        assert_eq!(bits("int8_sym_g32"), 8.5);
        assert_eq!(bits("int8_asym_g32"), 9.0);
        assert_eq!(bits("int4_sym_g32"), 4.5);
        assert_eq!(bits("int4_sym_g128"), 4.125);
        // spec/handoff.md: 1,152 B of BF16 per token-layer become a 656-byte record.
        assert_eq!(r("fp8_ds_mla"), 1152.0 / 656.0);
        assert!(format("fp3").is_none());
    }

    #[test]
    fn names_are_unique() {
        for (i, a) in FORMATS.iter().enumerate() {
            assert!(FORMATS[i + 1..].iter().all(|b| b.name != a.name), "{}", a.name);
            assert!(ALIASES.iter().all(|(al, _)| *al != a.name));
        }
    }
}
