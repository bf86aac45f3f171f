//! What one head vector is made of in a cache (its dtype and scale placement), and the codecs that turn one
//! vector of one dtype into another: a copy, a quantisation (bf16 → fp8 per tensor, per token-head with the
//! scale inline, the `fp8_ds_mla` record) or its inverse.
//!
//! All multi-byte values are little-endian, as numpy stores them on the machines kvwire runs on.

use crate::quant::minifloat::{bf16_to_f32, decode, encode, f16_to_f32, f32_to_f16_saturating, E4M3FN};

/// Element type and scale placement of a cache.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dtype {
    Bf16,
    F16,
    F32,
    /// E4M3FN codes; one fp32 scale per (layer, K/V) kept outside the cache (vLLM `fp8`, `k_scale`/`v_scale`).
    Fp8E4m3,
    /// E4M3FN codes with an fp32 scale after every head vector: `head_dim + 4` bytes per vector (vLLM
    /// `fp8_per_token_head`, Triton backend with the scale inline).
    Fp8PerTokenHead,
    /// DeepSeek sparse-MLA record, 656 bytes per token per layer: 512 E4M3 latent codes (4 tiles of 128), 4
    /// fp32 tile scales, 64 bf16 RoPE values copied verbatim (vLLM `fp8_ds_mla`).
    Fp8DsMla,
}

/// Latent elements of an `fp8_ds_mla` record.
pub const DS_MLA_LATENT: usize = 512;
/// RoPE elements of an `fp8_ds_mla` record.
pub const DS_MLA_ROPE: usize = 64;
/// Latent elements per tile scale.
pub const DS_MLA_TILE: usize = 128;
/// Bytes of an `fp8_ds_mla` record.
pub const DS_MLA_BYTES: usize = DS_MLA_LATENT + 4 * (DS_MLA_LATENT / DS_MLA_TILE) + 2 * DS_MLA_ROPE;

/// Largest finite E4M3FN value.
const E4M3_MAX: f32 = 448.0;

impl Dtype {
    pub const ALL: [Dtype; 6] =
        [Dtype::Bf16, Dtype::F16, Dtype::F32, Dtype::Fp8E4m3, Dtype::Fp8PerTokenHead, Dtype::Fp8DsMla];

    pub fn name(self) -> &'static str {
        match self {
            Dtype::Bf16 => "bfloat16",
            Dtype::F16 => "float16",
            Dtype::F32 => "float32",
            Dtype::Fp8E4m3 => "fp8_e4m3",
            Dtype::Fp8PerTokenHead => "fp8_per_token_head",
            Dtype::Fp8DsMla => "fp8_ds_mla",
        }
    }

    pub fn parse(name: &str) -> Option<Dtype> {
        match name {
            "fp8" => Some(Dtype::Fp8E4m3),
            _ => Dtype::ALL.into_iter().find(|d| d.name() == name),
        }
    }

    /// Bytes of one stored unit along the head vector: the element size of plain dtypes, 1 for byte records.
    pub fn unit_bytes(self) -> usize {
        match self {
            Dtype::Bf16 | Dtype::F16 => 2,
            Dtype::F32 => 4,
            _ => 1,
        }
    }

    /// Whether values are stored as floats (no scales).
    pub fn plain(self) -> bool {
        matches!(self, Dtype::Bf16 | Dtype::F16 | Dtype::F32)
    }

    /// Bytes of one head vector of `head_dim` values.
    pub fn vector_bytes(self, head_dim: usize) -> usize {
        match self {
            Dtype::Bf16 | Dtype::F16 | Dtype::F32 | Dtype::Fp8E4m3 => head_dim * self.unit_bytes(),
            Dtype::Fp8PerTokenHead => head_dim + 4,
            Dtype::Fp8DsMla => DS_MLA_BYTES,
        }
    }

    /// Where the scales live: `"none"`, `"separate"` (outside the cache) or `"inline"` (inside each vector).
    pub fn scale_placement(self) -> &'static str {
        match self {
            Dtype::Bf16 | Dtype::F16 | Dtype::F32 => "none",
            Dtype::Fp8E4m3 => "separate",
            Dtype::Fp8PerTokenHead | Dtype::Fp8DsMla => "inline",
        }
    }

    /// The numpy dtype of the cache buffer.
    pub fn numpy(self) -> &'static str {
        match self {
            Dtype::Bf16 => "bfloat16",
            Dtype::F16 => "float16",
            Dtype::F32 => "float32",
            _ => "uint8",
        }
    }
}

/// How one head vector becomes another.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Codec {
    /// Same dtype: the bytes are copied.
    Copy,
    /// A plain float vector to fp8 with the (layer, K/V) scale: `E4M3(x / scale)`, RNE, saturating (vLLM's
    /// `reshape_and_cache_flash`: true division, then `__NV_SATFINITE`).
    ToFp8 {
        from: Dtype,
    },
    /// fp8 with the (layer, K/V) scale back to a float: `code · scale`, rounded to nearest even.
    FromFp8 {
        to: Dtype,
    },
    /// Per token-head (vLLM `tests/quantization/test_per_token_kv_cache.py`): scale = max(amax / 448, 1e-6),
    /// codes = E4M3(x · (1 / scale)), then the fp32 scale.
    ToPerTokenHead {
        from: Dtype,
    },
    FromPerTokenHead {
        to: Dtype,
    },
    /// The `fp8_ds_mla` record from 576 bf16 values (512 latent + 64 RoPE).
    ToDsMla,
    FromDsMla,
}

impl Codec {
    /// The codec from `a` to `b`, or why there is none.
    pub fn between(a: Dtype, b: Dtype) -> std::result::Result<Codec, String> {
        use Dtype::*;
        Ok(match (a, b) {
            _ if a == b => Codec::Copy,
            (Bf16 | F16 | F32, Fp8E4m3) => Codec::ToFp8 { from: a },
            (Fp8E4m3, Bf16 | F16 | F32) => Codec::FromFp8 { to: b },
            (Bf16 | F16 | F32, Fp8PerTokenHead) => Codec::ToPerTokenHead { from: a },
            (Fp8PerTokenHead, Bf16 | F16 | F32) => Codec::FromPerTokenHead { to: b },
            (Bf16, Fp8DsMla) => Codec::ToDsMla,
            (Fp8DsMla, Bf16) => Codec::FromDsMla,
            (_, Fp8DsMla) | (Fp8DsMla, _) => {
                return Err(
                    "fp8_ds_mla converts from and to bfloat16 only (its RoPE part is bf16, copied verbatim)".into()
                )
            }
            (Bf16 | F16 | F32, Bf16 | F16 | F32) => {
                return Err(format!(
                    "{} → {} is a dtype cast, not a layout conversion: cast with numpy first",
                    a.name(),
                    b.name()
                ))
            }
            _ => {
                return Err(format!(
                    "{} → {}: convert through a float dtype (dequantise, then quantise)",
                    a.name(),
                    b.name()
                ))
            }
        })
    }

    /// Whether this codec uses the per-(layer, K/V) scales.
    pub fn uses_tensor_scale(self) -> bool {
        matches!(self, Codec::ToFp8 { .. } | Codec::FromFp8 { .. })
    }

    /// Transform one vector of `head_dim` values: `src` and `dst` hold exactly one vector each.
    #[inline]
    pub fn apply(self, src: &[u8], dst: &mut [u8], head_dim: usize, scale: f32) {
        match self {
            Codec::Copy => dst.copy_from_slice(src),
            Codec::ToFp8 { from } => {
                for (i, d) in dst.iter_mut().enumerate().take(head_dim) {
                    *d = encode(&E4M3FN, load(from, src, i) / scale, true);
                }
            }
            Codec::FromFp8 { to } => {
                for (i, &c) in src.iter().enumerate().take(head_dim) {
                    store(to, dst, i, decode(&E4M3FN, c) * scale);
                }
            }
            Codec::ToPerTokenHead { from } => {
                let s = amax_scale((0..head_dim).map(|i| load(from, src, i)), PER_TOKEN_HEAD_MIN_SCALE);
                let inv = 1.0 / s;
                for (i, d) in dst.iter_mut().enumerate().take(head_dim) {
                    *d = encode(&E4M3FN, load(from, src, i) * inv, true);
                }
                dst[head_dim..head_dim + 4].copy_from_slice(&s.to_le_bytes());
            }
            Codec::FromPerTokenHead { to } => {
                let s = read_f32(src, head_dim);
                for (i, &c) in src.iter().enumerate().take(head_dim) {
                    store(to, dst, i, decode(&E4M3FN, c) * s);
                }
            }
            Codec::ToDsMla => {
                for t in 0..DS_MLA_LATENT / DS_MLA_TILE {
                    let r = t * DS_MLA_TILE..(t + 1) * DS_MLA_TILE;
                    let s = amax_scale(r.clone().map(|i| load(Dtype::Bf16, src, i)), f32::MIN_POSITIVE);
                    for i in r {
                        dst[i] = encode(&E4M3FN, load(Dtype::Bf16, src, i) / s, true);
                    }
                    dst[DS_MLA_LATENT + 4 * t..DS_MLA_LATENT + 4 * t + 4].copy_from_slice(&s.to_le_bytes());
                }
                let rope = 2 * DS_MLA_LATENT..2 * (DS_MLA_LATENT + DS_MLA_ROPE);
                dst[DS_MLA_BYTES - 2 * DS_MLA_ROPE..].copy_from_slice(&src[rope]);
            }
            Codec::FromDsMla => {
                for i in 0..DS_MLA_LATENT {
                    let s = read_f32(src, DS_MLA_LATENT + 4 * (i / DS_MLA_TILE));
                    store(Dtype::Bf16, dst, i, decode(&E4M3FN, src[i]) * s);
                }
                dst[2 * DS_MLA_LATENT..2 * (DS_MLA_LATENT + DS_MLA_ROPE)]
                    .copy_from_slice(&src[DS_MLA_BYTES - 2 * DS_MLA_ROPE..]);
            }
        }
    }
}

/// Smallest per-token-head scale (vLLM's `max(absmax / qmax, 1e-6)`).
pub const PER_TOKEN_HEAD_MIN_SCALE: f32 = 1e-6;

/// max(amax / 448, `floor`) over the finite values: `floor` is FLT_MIN for the `fp8_ds_mla` tiles (vLLM's
/// `concat_and_cache_ds_mla_kernel`) and 1e-6 per token-head. A NaN or Inf element does not poison the
/// scale; it encodes as NaN or saturates on its own.
fn amax_scale(values: impl Iterator<Item = f32>, floor: f32) -> f32 {
    let amax = values.filter(|v| v.is_finite()).fold(0f32, |m, v| m.max(v.abs()));
    (amax / E4M3_MAX).max(floor)
}

#[inline(always)]
fn read_f32(b: &[u8], at: usize) -> f32 {
    f32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// Element `i` of a plain-float vector, as f32.
#[inline(always)]
fn load(dt: Dtype, b: &[u8], i: usize) -> f32 {
    match dt {
        Dtype::Bf16 => bf16_to_f32(u16::from_le_bytes([b[2 * i], b[2 * i + 1]])),
        Dtype::F16 => f16_to_f32(u16::from_le_bytes([b[2 * i], b[2 * i + 1]])),
        _ => read_f32(b, 4 * i),
    }
}

/// Store `x` as element `i` of a plain-float vector (RNE; f16 saturates to ±65504).
#[inline(always)]
fn store(dt: Dtype, b: &mut [u8], i: usize, x: f32) {
    match dt {
        Dtype::Bf16 => b[2 * i..2 * i + 2].copy_from_slice(&f32_to_bf16(x).to_le_bytes()),
        Dtype::F16 => b[2 * i..2 * i + 2].copy_from_slice(&f32_to_f16_saturating(x).to_le_bytes()),
        _ => b[4 * i..4 * i + 4].copy_from_slice(&x.to_le_bytes()),
    }
}

/// f32 → bfloat16 bits, round to nearest even; NaN stays a (quiet) NaN.
pub fn f32_to_bf16(x: f32) -> u16 {
    let b = x.to_bits();
    if x.is_nan() {
        return ((b >> 16) | 0x0040) as u16;
    }
    ((b + 0x7FFF + ((b >> 16) & 1)) >> 16) as u16
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bf16_bytes(v: &[f32]) -> Vec<u8> {
        v.iter().flat_map(|&x| f32_to_bf16(x).to_le_bytes()).collect()
    }

    #[test]
    fn ds_mla_record_is_656_bytes() {
        assert_eq!(DS_MLA_BYTES, 656);
        assert_eq!(Dtype::Fp8DsMla.vector_bytes(576), 656);
        assert_eq!(Dtype::Fp8PerTokenHead.vector_bytes(128), 132);
        assert_eq!(Dtype::Bf16.vector_bytes(128), 256);
    }

    #[test]
    fn bf16_rounding_is_nearest_even() {
        assert_eq!(f32_to_bf16(1.0), 0x3F80);
        // 1 + 2^-8 is a tie between 1.0 (even) and 1 + 2^-7: rounds to 1.0.
        assert_eq!(f32_to_bf16(1.0 + 1.0 / 256.0), 0x3F80);
        // 1 + 3·2^-8 is a tie between 1 + 2^-7 (odd) and 1 + 2^-6: rounds up to the even one.
        assert_eq!(f32_to_bf16(1.0 + 3.0 / 256.0), 0x3F82);
        assert!(bf16_to_f32(f32_to_bf16(f32::NAN)).is_nan());
        assert_eq!(f32_to_bf16(f32::INFINITY), 0x7F80);
    }

    #[test]
    fn ds_mla_zero_tile_gets_flt_min_and_rope_is_verbatim() {
        let mut v = vec![0f32; 576];
        for (i, x) in v.iter_mut().enumerate().skip(128) {
            *x = (i as f32 - 300.0) / 7.0;
        }
        let src = bf16_bytes(&v);
        let mut rec = vec![0u8; 656];
        Codec::ToDsMla.apply(&src, &mut rec, 576, 1.0);
        assert_eq!(read_f32(&rec, 512), f32::MIN_POSITIVE);
        assert!(rec[..128].iter().all(|&c| c == 0));
        assert_eq!(&rec[528..], &src[1024..]);
        // Tile 1 holds 128..256: amax is |128 − 300| / 7, rounded to bf16.
        let amax = bf16_to_f32(f32_to_bf16(172.0 / 7.0));
        assert_eq!(read_f32(&rec, 516), amax / 448.0);
        let mut back = vec![0u8; 1152];
        Codec::FromDsMla.apply(&rec, &mut back, 576, 1.0);
        assert_eq!(&back[1024..], &src[1024..]);
        // The amax element of each tile round-trips exactly (code 448 · scale).
        assert_eq!(&back[256..258], &src[256..258]);
    }

    #[test]
    fn per_tensor_fp8_divides_then_saturates() {
        let src = bf16_bytes(&[1.0, 2.0, 1000.0, -0.0]);
        let mut out = [0u8; 4];
        Codec::ToFp8 { from: Dtype::Bf16 }.apply(&src, &mut out, 4, 2.0);
        assert_eq!(out, [0x30, 0x38, 0x7E, 0x80]);
        let mut back = [0u8; 8];
        Codec::FromFp8 { to: Dtype::Bf16 }.apply(&out, &mut back, 4, 2.0);
        assert_eq!(&back[..4], &src[..4]);
    }

    #[test]
    fn codecs_exist_only_where_they_make_sense() {
        assert_eq!(Codec::between(Dtype::Bf16, Dtype::Bf16), Ok(Codec::Copy));
        assert!(Codec::between(Dtype::F16, Dtype::Fp8DsMla).is_err());
        assert!(Codec::between(Dtype::Bf16, Dtype::F32).is_err());
        assert!(Codec::between(Dtype::Fp8E4m3, Dtype::Fp8PerTokenHead).is_err());
        assert_eq!(Dtype::parse("fp8"), Some(Dtype::Fp8E4m3));
        assert_eq!(Dtype::parse("int3"), None);
    }
}
