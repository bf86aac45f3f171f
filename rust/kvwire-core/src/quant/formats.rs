//! The format table: one row per KV storage format, from which every byte ratio is computed (never typed in
//! twice). `bits_per_value` includes the amortised block scales; the ratio is against BF16 (16 bits).

/// One KV storage format.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct Format {
    /// Name used in scenarios (`handoff.compression`).
    pub name: &'static str,
    /// Bits of one element code.
    pub element_bits: u32,
    /// Values sharing one scale (`None`: no per-block scale; a per-tensor scale is negligible).
    pub block: Option<u32>,
    /// Bits of metadata per block (scale, plus zero point for asymmetric integer formats).
    pub scale_bits_per_block: u32,
    /// Element-wise operations per BF16 input value to encode (the in-transit stage's compute): the
    /// reference simulator's 1 for fp8 and 2 for 4-bit block formats; other block formats use 2 by the same
    /// rule (scale from the block amax, then scale-and-round).
    pub encode_ops_per_value: f64,
    /// What the format is.
    pub description: &'static str,
}

impl Format {
    /// Bits per value, block metadata included.
    pub fn bits_per_value(&self) -> f64 {
        match self.block {
            Some(b) => self.element_bits as f64 + self.scale_bits_per_block as f64 / b as f64,
            None => self.element_bits as f64,
        }
    }

    /// Compression ratio against BF16: input bytes / output bytes.
    pub fn ratio_vs_bf16(&self) -> f64 {
        16.0 / self.bits_per_value()
    }
}

/// Every format the hand-off can use.
pub const FORMATS: &[Format] = &[
    Format {
        name: "none",
        element_bits: 16,
        block: None,
        scale_bits_per_block: 0,
        encode_ops_per_value: 0.0,
        description: "BF16, uncompressed (no compression stage at all)",
    },
    Format {
        name: "fp8",
        element_bits: 8,
        block: None,
        scale_bits_per_block: 0,
        encode_ops_per_value: 1.0,
        description: "FP8 E4M3 with one fp32 scale per tensor",
    },
    Format {
        name: "mxfp8",
        element_bits: 8,
        block: Some(32),
        scale_bits_per_block: 8,
        encode_ops_per_value: 2.0,
        description: "OCP MXFP8 (E4M3 elements, one E8M0 scale per 32)",
    },
    Format {
        name: "mxfp4",
        element_bits: 4,
        block: Some(32),
        scale_bits_per_block: 8,
        encode_ops_per_value: 2.0,
        description: "OCP MXFP4 (E2M1 elements, one E8M0 scale per 32); the reference's fp4-block",
    },
    Format {
        name: "nvfp4",
        element_bits: 4,
        block: Some(16),
        scale_bits_per_block: 8,
        encode_ops_per_value: 2.0,
        description: "NVFP4 (E2M1 elements, one E4M3 scale per 16, one fp32 scale per tensor)",
    },
    Format {
        name: "int4-g32",
        element_bits: 4,
        block: Some(32),
        scale_bits_per_block: 32,
        encode_ops_per_value: 2.0,
        description: "INT4 asymmetric groups of 32 with an fp16 scale and an fp16 zero point",
    },
];

/// Look a format up by name.
pub fn format(name: &str) -> Option<&'static Format> {
    FORMATS.iter().find(|f| f.name == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Ratios stated in spec/handoff.md, as exact fractions.
    #[test]
    fn ratios_follow_from_the_bit_layouts() {
        let r = |n: &str| format(n).unwrap().ratio_vs_bf16();
        assert_eq!(r("none"), 1.0);
        assert_eq!(r("fp8"), 2.0);
        assert_eq!(r("mxfp8"), 64.0 / 33.0);
        assert_eq!(r("mxfp4"), 64.0 / 17.0);
        assert_eq!(r("nvfp4"), 32.0 / 9.0);
        assert_eq!(r("int4-g32"), 3.2);
        assert!(format("fp3").is_none());
    }
}
