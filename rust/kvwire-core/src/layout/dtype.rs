//! What one head vector is made of in a cache (its dtype and scale placement), and the codecs that turn one
//! vector of one dtype into another: a copy, a quantisation (bf16 → fp8 per tensor, per token-head with the
//! scale inline, the `fp8_ds_mla` record), its inverse, or a change of fp8 flavour (OCP "fn" ↔ AMD "fnuz").
//!
//! All multi-byte values are little-endian, as numpy stores them on the machines kvwire runs on.
//!
//! **fn ↔ fnuz** (`spec/quant.md` §1.1). The fnuz formats have bias + 1, so the same bits mean half the
//! value; vLLM turns an E4M3FN tensor into E4M3FNUZ by keeping the bits and doubling the scale
//! (`normalize_e4m3fn_to_e4m3fnuz`). kvwire's flavour change is one rule for every pair: destination code =
//! RNE-with-saturation(src value / factor) in the destination format, NaN kept NaN, and destination scale =
//! source scale × factor, with the factor ([`scale_factor`]) chosen so that the codes are kept wherever the
//! two formats allow it:
//!
//! | from → to | factor | exact | rounding elsewhere |
//! |---|---|---|---|
//! | e4m3fn → e4m3fnuz | 2 | every finite value (the bits are kept; −0 becomes +0) | NaN → NaN (0x80) |
//! | e4m3fnuz → e4m3fn | 1/2 | every value up to 224·scale (all a vLLM gfx942 cache holds: it scales by amax/224) | ±240 (0x7F/0xFF) saturates to ±224·scale (0x7E/0xFE), error 1/15; NaN → 0xFF (ml_dtypes decodes fnuz NaN as −NaN) |
//! | e5m2 → e5m2fnuz | 1 | every finite value | ±Inf → ±57344·scale (satfinite); NaN → 0x80 |
//! | e5m2fnuz → e5m2 | 1 | every value of magnitude ≥ 2^-14·scale | below it, round to nearest even on e5m2's subnormal grid (multiples of 2^-16·scale); NaN → 0xFE |
//!
//! So fn → fnuz → fn returns every finite fn code (−0 as +0), and the per token-head flavours do the same
//! with their inline scales multiplied by the factor.

use crate::quant::minifloat::{
    bf16_to_f32, decode, encode, f16_to_f32, f32_to_f16_saturating, Element, MiniFloat, E4M3FN, E4M3FNUZ, E5M2,
    E5M2FNUZ,
};
use std::sync::OnceLock;

/// Element type and scale placement of a cache.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dtype {
    Bf16,
    F16,
    F32,
    /// E4M3FN codes; one fp32 scale per (layer, K/V) kept outside the cache (vLLM `fp8`, `k_scale`/`v_scale`).
    Fp8E4m3,
    /// E4M3FNUZ codes (AMD MI300, gfx942) with separate per-(layer, K/V) scales (vLLM `fp8` on ROCm).
    Fp8E4m3Fnuz,
    /// E5M2 codes with separate per-(layer, K/V) scales (vLLM `fp8_e5m2`; scale 1 when none is kept).
    Fp8E5m2,
    /// E5M2FNUZ codes with separate per-(layer, K/V) scales.
    Fp8E5m2Fnuz,
    /// E4M3FN codes with an fp32 scale after every head vector: `head_dim + 4` bytes per vector (vLLM
    /// `fp8_per_token_head`, Triton backend with the scale inline).
    Fp8PerTokenHead,
    /// The same record in E4M3FNUZ, scale = max(amax / 224, 1e-6) (vLLM's gfx942 divisor).
    Fp8PerTokenHeadFnuz,
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

impl Dtype {
    pub const ALL: [Dtype; 10] = [
        Dtype::Bf16,
        Dtype::F16,
        Dtype::F32,
        Dtype::Fp8E4m3,
        Dtype::Fp8E4m3Fnuz,
        Dtype::Fp8E5m2,
        Dtype::Fp8E5m2Fnuz,
        Dtype::Fp8PerTokenHead,
        Dtype::Fp8PerTokenHeadFnuz,
        Dtype::Fp8DsMla,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Dtype::Bf16 => "bfloat16",
            Dtype::F16 => "float16",
            Dtype::F32 => "float32",
            Dtype::Fp8E4m3 => "fp8_e4m3",
            Dtype::Fp8E4m3Fnuz => "fp8_e4m3fnuz",
            Dtype::Fp8E5m2 => "fp8_e5m2",
            Dtype::Fp8E5m2Fnuz => "fp8_e5m2fnuz",
            Dtype::Fp8PerTokenHead => "fp8_per_token_head",
            Dtype::Fp8PerTokenHeadFnuz => "fp8_per_token_head_fnuz",
            Dtype::Fp8DsMla => "fp8_ds_mla",
        }
    }

    pub fn parse(name: &str) -> Option<Dtype> {
        match name {
            "fp8" => Some(Dtype::Fp8E4m3),
            _ => Dtype::ALL.into_iter().find(|d| d.name() == name),
        }
    }

    /// The fp8 element format of the codes (`None` for plain floats).
    pub fn element(self) -> Option<MiniFloat> {
        match self {
            Dtype::Fp8E4m3 | Dtype::Fp8PerTokenHead | Dtype::Fp8DsMla => Some(E4M3FN),
            Dtype::Fp8E4m3Fnuz | Dtype::Fp8PerTokenHeadFnuz => Some(E4M3FNUZ),
            Dtype::Fp8E5m2 => Some(E5M2),
            Dtype::Fp8E5m2Fnuz => Some(E5M2FNUZ),
            Dtype::Bf16 | Dtype::F16 | Dtype::F32 => None,
        }
    }

    /// Whether the scales are one fp32 per (layer, K/V), kept outside the cache.
    pub fn separate_scales(self) -> bool {
        matches!(self, Dtype::Fp8E4m3 | Dtype::Fp8E4m3Fnuz | Dtype::Fp8E5m2 | Dtype::Fp8E5m2Fnuz)
    }

    /// Whether an fp32 scale follows every head vector.
    pub fn per_token_head(self) -> bool {
        matches!(self, Dtype::Fp8PerTokenHead | Dtype::Fp8PerTokenHeadFnuz)
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
            Dtype::Fp8PerTokenHead | Dtype::Fp8PerTokenHeadFnuz => head_dim + 4,
            Dtype::Fp8DsMla => DS_MLA_BYTES,
            _ => head_dim * self.unit_bytes(),
        }
    }

    /// Where the scales live: `"none"`, `"separate"` (outside the cache) or `"inline"` (inside each vector).
    pub fn scale_placement(self) -> &'static str {
        if self.plain() {
            "none"
        } else if self.separate_scales() {
            "separate"
        } else {
            "inline"
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

/// The fp8 flavour pairs kvwire converts between (OCP "fn" and AMD "fnuz"), with their scale factor.
const FLAVOURS: [(Dtype, Dtype, f32); 6] = [
    (Dtype::Fp8E4m3, Dtype::Fp8E4m3Fnuz, 2.0),
    (Dtype::Fp8E4m3Fnuz, Dtype::Fp8E4m3, 0.5),
    (Dtype::Fp8E5m2, Dtype::Fp8E5m2Fnuz, 1.0),
    (Dtype::Fp8E5m2Fnuz, Dtype::Fp8E5m2, 1.0),
    (Dtype::Fp8PerTokenHead, Dtype::Fp8PerTokenHeadFnuz, 2.0),
    (Dtype::Fp8PerTokenHeadFnuz, Dtype::Fp8PerTokenHead, 0.5),
];

/// The factor an fp8 flavour change multiplies the scales by (destination scale = source scale × factor):
/// 2 for E4M3FN → E4M3FNUZ (vLLM's `normalize_e4m3fn_to_e4m3fnuz`), 1/2 back, 1 between E5M2 and E5M2FNUZ;
/// `None` when `a → b` is not a flavour change. See the module documentation for what is exact.
pub fn scale_factor(a: Dtype, b: Dtype) -> Option<f32> {
    FLAVOURS.iter().find(|(x, y, _)| *x == a && *y == b).map(|f| f.2)
}

/// The 256-entry code table of the flavour change `a → b`: code c becomes the destination code of
/// decode(a, c) / factor, rounded to nearest even with saturation (NaN stays NaN). Built once per pair.
pub fn flavour_table(a: Dtype, b: Dtype) -> Option<&'static [u8; 256]> {
    static TABLES: [OnceLock<[u8; 256]>; FLAVOURS.len()] = [const { OnceLock::new() }; FLAVOURS.len()];
    let i = FLAVOURS.iter().position(|(x, y, _)| *x == a && *y == b)?;
    let (src, dst, factor) = FLAVOURS[i];
    let (from, to) = (src.element()?, dst.element()?);
    Some(TABLES[i].get_or_init(|| {
        let mut t = [0u8; 256];
        for (c, out) in t.iter_mut().enumerate() {
            *out = encode(&to, decode(&from, c as u8) / factor, true);
        }
        t
    }))
}

/// How one head vector becomes another.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Codec {
    /// Same dtype: the bytes are copied.
    Copy,
    /// A plain float vector to fp8 (`elem`) with the (layer, K/V) scale: `elem(x / scale)`, RNE, saturating
    /// (vLLM's `reshape_and_cache_flash`: true division, then `__NV_SATFINITE`).
    ToFp8 {
        from: Dtype,
        elem: MiniFloat,
    },
    /// fp8 with the (layer, K/V) scale back to a float: `code · scale`, rounded to nearest even.
    FromFp8 {
        to: Dtype,
        elem: MiniFloat,
    },
    /// Per token-head (vLLM `tests/quantization/test_per_token_kv_cache.py`): scale = max(amax / max, 1e-6)
    /// (max 448 for E4M3FN, 224 for E4M3FNUZ), codes = elem(x · (1 / scale)), then the fp32 scale.
    ToPerTokenHead {
        from: Dtype,
        elem: MiniFloat,
    },
    FromPerTokenHead {
        to: Dtype,
        elem: MiniFloat,
    },
    /// The `fp8_ds_mla` record from 576 bf16 values (512 latent + 64 RoPE).
    ToDsMla,
    FromDsMla,
    /// fp8 flavour change (fn ↔ fnuz) of codes with separate scales: each code through the table (the
    /// caller multiplies its scales by [`scale_factor`]).
    Flavour {
        table: &'static [u8; 256],
    },
    /// The same for per token-head records: codes through the table, the inline scale × `factor`.
    PerTokenHeadFlavour {
        table: &'static [u8; 256],
        factor: f32,
    },
}

impl Codec {
    /// The codec from `a` to `b`, or why there is none.
    pub fn between(a: Dtype, b: Dtype) -> std::result::Result<Codec, String> {
        use Dtype::*;
        if a == b {
            return Ok(Codec::Copy);
        }
        if let (Some(table), Some(factor)) = (flavour_table(a, b), scale_factor(a, b)) {
            return Ok(if a.per_token_head() {
                Codec::PerTokenHeadFlavour { table, factor }
            } else {
                Codec::Flavour { table }
            });
        }
        let elem = |d: Dtype| d.element().unwrap_or(E4M3FN);
        Ok(match (a, b) {
            (Bf16 | F16 | F32, _) if b.separate_scales() => Codec::ToFp8 { from: a, elem: elem(b) },
            (_, Bf16 | F16 | F32) if a.separate_scales() => Codec::FromFp8 { to: b, elem: elem(a) },
            (Bf16 | F16 | F32, _) if b.per_token_head() => Codec::ToPerTokenHead { from: a, elem: elem(b) },
            (_, Bf16 | F16 | F32) if a.per_token_head() => Codec::FromPerTokenHead { to: b, elem: elem(a) },
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
                    "{} → {}: convert through a float dtype (dequantise, then quantise); fp8 flavours convert \
                     directly only between fn and fnuz of the same element and scale placement",
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
            Codec::ToFp8 { from, elem } => crate::with_element!(elem, E => {
                for (i, d) in dst.iter_mut().enumerate().take(head_dim) {
                    *d = encode(&E::F, load(from, src, i) / scale, true);
                }
            }),
            Codec::FromFp8 { to, elem } => crate::with_element!(elem, E => {
                for (i, &c) in src.iter().enumerate().take(head_dim) {
                    store(to, dst, i, decode(&E::F, c) * scale);
                }
            }),
            Codec::ToPerTokenHead { from, elem } => {
                crate::with_element!(elem, E => to_per_token_head::<E>(from, src, dst, head_dim))
            }
            Codec::FromPerTokenHead { to, elem } => crate::with_element!(elem, E => {
                let s = read_f32(src, head_dim);
                for (i, &c) in src.iter().enumerate().take(head_dim) {
                    store(to, dst, i, decode(&E::F, c) * s);
                }
            }),
            Codec::ToDsMla => {
                for t in 0..DS_MLA_LATENT / DS_MLA_TILE {
                    let r = t * DS_MLA_TILE..(t + 1) * DS_MLA_TILE;
                    let s =
                        amax_scale(r.clone().map(|i| load(Dtype::Bf16, src, i)), E4M3FN.scale_max(), f32::MIN_POSITIVE);
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
            Codec::Flavour { table } => {
                for (d, &c) in dst.iter_mut().zip(src).take(head_dim) {
                    *d = table[c as usize];
                }
            }
            Codec::PerTokenHeadFlavour { table, factor } => {
                for (d, &c) in dst.iter_mut().zip(src).take(head_dim) {
                    *d = table[c as usize];
                }
                let s = read_f32(src, head_dim) * factor;
                dst[head_dim..head_dim + 4].copy_from_slice(&s.to_le_bytes());
            }
        }
    }
}

/// One per token-head record in element format `E`: scale = max(amax / scale_max, 1e-6), codes, scale.
#[inline(always)]
fn to_per_token_head<E: Element>(from: Dtype, src: &[u8], dst: &mut [u8], head_dim: usize) {
    let s = amax_scale((0..head_dim).map(|i| load(from, src, i)), E::F.scale_max(), PER_TOKEN_HEAD_MIN_SCALE);
    let inv = 1.0 / s;
    for (i, d) in dst.iter_mut().enumerate().take(head_dim) {
        *d = encode(&E::F, load(from, src, i) * inv, true);
    }
    dst[head_dim..head_dim + 4].copy_from_slice(&s.to_le_bytes());
}

/// Smallest per-token-head scale (vLLM's `max(absmax / qmax, 1e-6)`).
pub const PER_TOKEN_HEAD_MIN_SCALE: f32 = 1e-6;

/// max(amax / `max`, `floor`) over the finite values (`max`: 448 for E4M3FN, 224 for E4M3FNUZ): `floor` is
/// FLT_MIN for the `fp8_ds_mla` tiles (vLLM's `concat_and_cache_ds_mla_kernel`) and 1e-6 per token-head. A
/// NaN or Inf element does not poison the scale; it encodes as NaN or saturates on its own.
fn amax_scale(values: impl Iterator<Item = f32>, max: f32, floor: f32) -> f32 {
    let amax = values.filter(|v| v.is_finite()).fold(0f32, |m, v| m.max(v.abs()));
    (amax / max).max(floor)
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
        Codec::ToFp8 { from: Dtype::Bf16, elem: E4M3FN }.apply(&src, &mut out, 4, 2.0);
        assert_eq!(out, [0x30, 0x38, 0x7E, 0x80]);
        let mut back = [0u8; 8];
        Codec::FromFp8 { to: Dtype::Bf16, elem: E4M3FN }.apply(&out, &mut back, 4, 2.0);
        assert_eq!(&back[..4], &src[..4]);
    }

    /// The flavour tables keep the bits wherever the destination can: every finite E4M3FN code (−0 as +0)
    /// and every E4M3FNUZ code up to 224 (0x7E) maps to itself; ±240 saturates to ±224; NaN is NaN; E5M2's
    /// ±Inf saturates; the round trip fn → fnuz → fn returns every finite code.
    #[test]
    fn flavour_tables_keep_the_bits_where_they_can() {
        let t = flavour_table(Dtype::Fp8E4m3, Dtype::Fp8E4m3Fnuz).unwrap();
        let back = flavour_table(Dtype::Fp8E4m3Fnuz, Dtype::Fp8E4m3).unwrap();
        for c in 0..=255u8 {
            let finite = decode(&E4M3FN, c).is_finite();
            match c {
                0x80 => assert_eq!(t[0x80], 0x00),
                0x7F | 0xFF => assert_eq!(t[c as usize], 0x80),
                _ => assert_eq!(t[c as usize], c),
            }
            if finite {
                assert_eq!(back[t[c as usize] as usize], if c == 0x80 { 0 } else { c }, "{c:#x}");
            }
            if c & 0x7F <= 0x7E && c != 0x80 {
                assert_eq!(back[c as usize], c);
            }
        }
        assert_eq!((back[0x7F], back[0xFF], back[0x80]), (0x7E, 0xFE, 0xFF)); // fnuz NaN decodes as −NaN
        let t = flavour_table(Dtype::Fp8E5m2, Dtype::Fp8E5m2Fnuz).unwrap();
        let back = flavour_table(Dtype::Fp8E5m2Fnuz, Dtype::Fp8E5m2).unwrap();
        assert_eq!((t[0x7C], t[0xFC], t[0x7E], t[0x80]), (0x7F, 0xFF, 0x80, 0x00));
        for c in 0..=255u8 {
            let v = decode(&E5M2, c);
            if v.is_finite() {
                assert_eq!(decode(&E5M2FNUZ, t[c as usize]), v, "{c:#x}");
                assert_eq!(back[t[c as usize] as usize], if c == 0x80 { 0 } else { c }, "{c:#x}");
            }
        }
        // e5m2fnuz's smallest subnormal 2^-17 is half of e5m2's: a tie, rounded to even (0).
        assert_eq!(back[0x01], 0x00);
        assert_eq!(scale_factor(Dtype::Fp8E4m3, Dtype::Fp8E4m3Fnuz), Some(2.0));
        assert_eq!(scale_factor(Dtype::Fp8PerTokenHeadFnuz, Dtype::Fp8PerTokenHead), Some(0.5));
        assert_eq!(scale_factor(Dtype::Fp8E4m3, Dtype::Fp8E5m2Fnuz), None);
    }

    /// Quantising to the fnuz per token-head record (amax/224) gives the bits of the fn record (amax/448),
    /// with the scale doubled and −0 as +0: vLLM's two gfx942 rules agree with its normalisation.
    #[test]
    fn fnuz_per_token_head_is_the_fn_record_with_the_scale_doubled() {
        let v: Vec<f32> = (0..128).map(|i| ((i * 37 % 101) as f32 - 50.0) / 3.0).collect();
        let src = bf16_bytes(&v);
        let (mut a, mut b) = (vec![0u8; 132], vec![0u8; 132]);
        Codec::between(Dtype::Bf16, Dtype::Fp8PerTokenHead).unwrap().apply(&src, &mut a, 128, 1.0);
        Codec::between(Dtype::Bf16, Dtype::Fp8PerTokenHeadFnuz).unwrap().apply(&src, &mut b, 128, 1.0);
        for i in 0..128 {
            assert_eq!(b[i], if a[i] == 0x80 { 0 } else { a[i] }, "{i}");
        }
        assert_eq!(read_f32(&b, 128), 2.0 * read_f32(&a, 128));
        let mut c = vec![0u8; 132];
        Codec::between(Dtype::Fp8PerTokenHead, Dtype::Fp8PerTokenHeadFnuz).unwrap().apply(&a, &mut c, 128, 1.0);
        assert_eq!(c, b);
    }

    #[test]
    fn codecs_exist_only_where_they_make_sense() {
        assert_eq!(Codec::between(Dtype::Bf16, Dtype::Bf16), Ok(Codec::Copy));
        assert!(Codec::between(Dtype::F16, Dtype::Fp8DsMla).is_err());
        assert!(Codec::between(Dtype::Bf16, Dtype::F32).is_err());
        assert!(Codec::between(Dtype::Fp8E4m3, Dtype::Fp8PerTokenHead).is_err());
        assert!(Codec::between(Dtype::Fp8E4m3, Dtype::Fp8E5m2Fnuz).is_err());
        assert!(Codec::between(Dtype::Fp8E4m3Fnuz, Dtype::Fp8PerTokenHeadFnuz).is_err());
        assert!(matches!(Codec::between(Dtype::Fp8E5m2Fnuz, Dtype::Fp8E5m2), Ok(Codec::Flavour { .. })));
        assert!(matches!(Codec::between(Dtype::F16, Dtype::Fp8E4m3Fnuz), Ok(Codec::ToFp8 { elem: E4M3FNUZ, .. })));
        assert_eq!(Dtype::parse("fp8"), Some(Dtype::Fp8E4m3));
        assert_eq!(Dtype::parse("int3"), None);
    }
}
