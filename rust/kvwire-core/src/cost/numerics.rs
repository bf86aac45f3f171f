//! Weight and compute formats of a model (`model.weights`, `model.activations`): the bytes a weight takes
//! (for reads and for the memory fit) and the tensor-core rate its matmuls run at on a device
//! (`docs/concepts/formats.md`). The KV cache keeps its own format (`kv_format`).

use super::presets::DeviceSpec;

/// A number format of weights or activations.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NumFormat {
    Bf16,
    Fp8,
    /// NVIDIA's NVFP4: E2M1 values with an FP8 (E4M3) scale per 16.
    Nvfp4,
    /// OCP MXFP4: E2M1 values with an E8M0 scale per 32.
    Mxfp4,
    /// Integer 4-bit weights with an FP16 scale per group of 128 (GPTQ/AWQ's default group size): a weight
    /// format only; its matmuls run at the activations' precision.
    Int4,
}

/// The names `model.weights` / `model.activations` take.
pub const FORMAT_NAMES: &[&str] = &["bf16", "fp8", "fp4", "nvfp4", "mxfp4", "int4"];

impl NumFormat {
    /// The format called `name` (`"fp4"` is NVFP4).
    pub fn parse(name: &str) -> Option<Self> {
        Some(match name {
            "bf16" => NumFormat::Bf16,
            "fp8" => NumFormat::Fp8,
            "fp4" | "nvfp4" => NumFormat::Nvfp4,
            "mxfp4" => NumFormat::Mxfp4,
            "int4" => NumFormat::Int4,
            _ => return None,
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            NumFormat::Bf16 => "bf16",
            NumFormat::Fp8 => "fp8",
            NumFormat::Nvfp4 => "nvfp4",
            NumFormat::Mxfp4 => "mxfp4",
            NumFormat::Int4 => "int4",
        }
    }

    /// Bytes per weight, scales included: BF16 2; FP8 1 (per-tensor or per-channel scales, negligible);
    /// NVFP4 (4 + 8/16) / 8 = 0.5625; MXFP4 (4 + 8/32) / 8 = 0.53125; INT4 (4 + 16/128) / 8 = 0.515625.
    pub fn weight_bytes(self) -> f64 {
        match self {
            NumFormat::Bf16 => 2.0,
            NumFormat::Fp8 => 1.0,
            NumFormat::Nvfp4 => 0.5625,
            NumFormat::Mxfp4 => 0.53125,
            NumFormat::Int4 => 0.515625,
        }
    }

    /// Bits of a value (what "wider" compares).
    fn bits(self) -> u32 {
        match self {
            NumFormat::Bf16 => 16,
            NumFormat::Fp8 => 8,
            NumFormat::Nvfp4 | NumFormat::Mxfp4 | NumFormat::Int4 => 4,
        }
    }

    /// The format a matmul of `weights` × `activations` runs in: the wider of the two (INT4 weights with BF16
    /// activations run BF16 tensor cores after dequantisation; FP8 × FP8 runs FP8 tensor cores); of two as wide,
    /// the activations'.
    pub fn compute(weights: NumFormat, activations: NumFormat) -> NumFormat {
        if weights.bits() > activations.bits() {
            weights
        } else {
            activations
        }
    }
}

/// What a pool's matmuls run at on its device.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ComputeRate {
    /// The format asked for.
    pub wanted: NumFormat,
    /// The format the device runs it in (`wanted`, or the next wider one it has).
    pub used: NumFormat,
    /// Dense peak of `used`, TFLOP/s.
    pub peak_tflops: f64,
}

impl ComputeRate {
    /// The rate of `wanted` on `dev`: its FP8 / FP4 peak where it has one, else the next wider format's.
    pub fn on(dev: &DeviceSpec, wanted: NumFormat) -> Self {
        let (used, peak) = match wanted {
            NumFormat::Bf16 | NumFormat::Int4 => (NumFormat::Bf16, dev.peak_tflops),
            NumFormat::Fp8 => match dev.fp8_peak_tflops {
                Some(p) => (NumFormat::Fp8, p),
                None => (NumFormat::Bf16, dev.peak_tflops),
            },
            NumFormat::Nvfp4 | NumFormat::Mxfp4 => match (dev.fp4_peak_tflops, dev.fp8_peak_tflops) {
                (Some(p), _) => (wanted, p),
                (None, Some(p)) => (NumFormat::Fp8, p),
                (None, None) => (NumFormat::Bf16, dev.peak_tflops),
            },
        };
        ComputeRate { wanted, used, peak_tflops: peak }
    }

    /// BF16 peak / this peak: the factor a matmul FLOP counts at on the roofline's BF16 rate.
    pub fn matmul_scale(&self, dev: &DeviceSpec) -> f64 {
        dev.peak_tflops / self.peak_tflops
    }

    /// Whether the device lacks the wanted format.
    pub fn falls_back(&self) -> bool {
        self.used != self.wanted && !(self.wanted == NumFormat::Int4 && self.used == NumFormat::Bf16)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cost::presets::device_presets;

    fn dev(key: &str) -> DeviceSpec {
        device_presets().into_iter().find(|(k, _)| *k == key).unwrap().1
    }

    /// H100: FP8 is twice BF16 (1,979 vs 989 TFLOP/s dense, the datasheet); FP4 falls back to FP8 there, and
    /// runs at B200's FP4 peak (9,000 dense).
    #[test]
    fn per_format_peaks_and_fallbacks() {
        let h = dev("h100");
        let fp8 = ComputeRate::on(&h, NumFormat::Fp8);
        assert_eq!((fp8.used, fp8.peak_tflops), (NumFormat::Fp8, 1979.0));
        assert_eq!(fp8.matmul_scale(&h), 989.0 / 1979.0);
        let fp4 = ComputeRate::on(&h, NumFormat::Nvfp4);
        assert_eq!(fp4.used, NumFormat::Fp8);
        assert!(fp4.falls_back());
        let b = ComputeRate::on(&dev("b200"), NumFormat::Nvfp4);
        assert_eq!((b.used, b.peak_tflops), (NumFormat::Nvfp4, 9000.0));
        let a = ComputeRate::on(&dev("a100"), NumFormat::Fp8);
        assert_eq!((a.used, a.peak_tflops), (NumFormat::Bf16, 312.0));
        assert!(a.falls_back()); // FP8 on an A100: run in BF16, said in the report
        assert!(!ComputeRate::on(&h, NumFormat::Int4).falls_back());
    }

    /// Every name parses to its format (and `fp4` to NVFP4), each format's name parses back, an unknown
    /// name is `None`, and the bytes per weight are the ones the module documents: 2, 1, (4 + 8/16)/8,
    /// (4 + 8/32)/8, (4 + 16/128)/8.
    #[test]
    fn names_and_bytes() {
        use NumFormat::*;
        let want = [("bf16", Bf16, 2.0), ("fp8", Fp8, 1.0), ("nvfp4", Nvfp4, 0.5625), ("mxfp4", Mxfp4, 0.53125)];
        for (name, f, bytes) in want.into_iter().chain([("int4", Int4, 0.515625)]) {
            assert_eq!(NumFormat::parse(name), Some(f), "{name}");
            assert_eq!(NumFormat::parse(f.name()), Some(f));
            assert_eq!(f.weight_bytes(), bytes, "{name}");
        }
        assert_eq!(NumFormat::parse("fp4"), Some(Nvfp4));
        assert_eq!(NumFormat::parse("fp6"), None);
        assert_eq!(FORMAT_NAMES.iter().filter_map(|n| NumFormat::parse(n)).count(), FORMAT_NAMES.len());
    }

    /// W4A16 runs BF16, W8A8 FP8, W4A8 FP8, W16A8 BF16 (the wider format sets the matmul); of two 4-bit
    /// formats the activations' is the one the tensor cores take (INT4 weights with NVFP4 activations run NVFP4,
    /// NVFP4 weights with MXFP4 activations MXFP4).
    #[test]
    fn the_wider_format_computes() {
        use NumFormat::*;
        assert_eq!(NumFormat::compute(Int4, Nvfp4), Nvfp4);
        assert_eq!(NumFormat::compute(Nvfp4, Mxfp4), Mxfp4);
        assert_eq!(NumFormat::compute(Int4, Bf16), Bf16);
        assert_eq!(NumFormat::compute(Fp8, Fp8), Fp8);
        assert_eq!(NumFormat::compute(Int4, Fp8), Fp8);
        assert_eq!(NumFormat::compute(Bf16, Fp8), Bf16);
        assert_eq!(NumFormat::compute(Nvfp4, Nvfp4), Nvfp4);
    }
}
