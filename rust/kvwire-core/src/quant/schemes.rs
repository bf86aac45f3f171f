//! The block-scaled formats as [`BlockScheme`]s: OCP MX (E8M0 scale per 32), NVIDIA NVFP4 (E4M3 scale per
//! 16 and an fp32 tensor scale), FP8 with fp32 scales per group or per tensor, and integer groups
//! (symmetric or asymmetric, fp16 scale and zero point).
//!
//! Non-finite inputs (`spec/quant.md` §7): a block holding NaN or ±Inf gets a NaN scale (E8M0 0xFF, E4M3
//! 0x7F, fp32/fp16 NaN), its codes are all-ones magnitudes (0 for integers), and it decodes as NaN; other
//! blocks are unaffected. Per-tensor statistics use finite elements only.

use std::marker::PhantomData;

use super::block::BlockScheme;
use super::minifloat::{
    decode as mf_decode, encode as mf_encode, f16_to_f32, f32_to_f16_saturating, Element, E2M1, E4M3FN,
};

/// Largest magnitude as `f32` bits (NaN bit patterns sort above Inf, so one integer max also detects
/// non-finite values).
#[inline(always)]
fn abs_bits(x: f32) -> u32 {
    x.to_bits() & 0x7FFF_FFFF
}

const INF_BITS: u32 = 0x7F80_0000;

/// `2^k` for k in [−127, 127] (2^−127 is an `f32` subnormal, still exact).
#[inline(always)]
fn pow2(k: i32) -> f32 {
    if k >= -126 {
        f32::from_bits(((k + 127) as u32) << 23)
    } else {
        f32::from_bits(1 << (k + 149))
    }
}

/// floor(log2(x)) of a positive finite `f32` given by its bits, from the exponent field (subnormals
/// normalised) — never from a floating-point log2 (`spec/quant.md` §7.5).
#[inline(always)]
fn floor_log2_bits(a: u32) -> i32 {
    if a >= 0x0080_0000 {
        (a >> 23) as i32 - 127
    } else {
        (31 - a.leading_zeros() as i32) - 149
    }
}

/// How an MX block's shared exponent is chosen.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScaleRule {
    /// OCP MX v1.0 §6.3 / torchao FLOOR / microxcaling: 2^(floor(log2 amax) − emax); values in
    /// [max·2^k, 2^(emax+1)·2^k) saturate.
    Floor,
    /// NVIDIA RCEIL: 2^ceil(log2(amax / max_elem)), so no element saturates.
    Rceil,
}

/// OCP MX: blocks of 32 with an E8M0 scale.
#[derive(Clone, Copy, Debug)]
pub struct Mx<E: Element> {
    pub rule: ScaleRule,
    elem: PhantomData<E>,
}

/// Parameters of an MX block: the scale byte and the multiplier that maps values to element units.
#[derive(Clone, Copy, Debug)]
pub struct MxParams {
    byte: u8,
    to_units: f32,
}

/// E8M0 byte of a scale 2^e: e + 127, with 0xFF = NaN.
impl<E: Element> Mx<E> {
    pub const BLOCK: usize = 32;

    pub fn new(rule: ScaleRule) -> Self {
        Mx { rule, elem: PhantomData }
    }

    /// The scale byte for a block whose largest magnitude has bits `amax` (finite).
    #[inline(always)]
    pub fn scale_byte(&self, amax: u32) -> u8 {
        match self.rule {
            ScaleRule::Floor => {
                // amax = 0 is treated as FP32_MIN_NORMAL (2^-126), as microxcaling does.
                let e = if amax == 0 { -126 } else { floor_log2_bits(amax) };
                let shared = (e - E::F.emax()).max(-127);
                if shared > 127 {
                    0xFF
                } else {
                    (shared + 127) as u8
                }
            }
            ScaleRule::Rceil => {
                let d = (f32::from_bits(amax) / E::F.max_value()).to_bits();
                if d >= 0x0080_0000 {
                    let e = (d >> 23) + u32::from(d & 0x7F_FFFF != 0);
                    if e > 254 {
                        0xFF
                    } else {
                        e as u8
                    }
                } else {
                    // An f32-subnormal descale: only values above 2^-127 round up to byte 1.
                    u8::from(d > 0x0040_0000)
                }
            }
        }
    }
}

impl<E: Element> BlockScheme for Mx<E> {
    type Stats = u32;
    type Params = MxParams;
    type Stored = u8;

    fn bits(&self) -> u32 {
        E::F.bits()
    }
    #[inline(always)]
    fn empty(&self) -> u32 {
        0
    }
    #[inline(always)]
    fn observe(&self, s: u32, x: f32) -> u32 {
        s.max(abs_bits(x))
    }
    #[inline(always)]
    fn params(&self, amax: u32) -> MxParams {
        let byte = if amax >= INF_BITS { 0xFF } else { self.scale_byte(amax) };
        self.load(byte)
    }
    #[inline(always)]
    fn store(&self, p: &MxParams) -> u8 {
        p.byte
    }
    #[inline(always)]
    fn load(&self, byte: u8) -> MxParams {
        let to_units = if byte == 0xFF { f32::NAN } else { pow2(127 - byte as i32) };
        MxParams { byte, to_units }
    }
    #[inline(always)]
    fn encode(&self, p: &MxParams, x: f32) -> u8 {
        let c = mf_encode(&E::F, x * p.to_units, true);
        if p.byte == 0xFF {
            E::F.nan_block_code()
        } else {
            c
        }
    }
    #[inline(always)]
    fn decode(&self, p: &MxParams, code: u8) -> f32 {
        let scale = if p.byte == 0xFF { f32::NAN } else { pow2(p.byte as i32 - 127) };
        mf_decode(&E::F, code) * scale
    }
}

/// NVFP4: E2M1 elements, an E4M3 scale per 16, and the tensor scale g = amax/(448·6) (g = 1 when that is
/// below the smallest normal `f32`). Block scale s = e4m3(clamp(amax_b/6/g, 2^-6, 448)); element
/// q = e2m1(x / (s·g)); x̂ = q·(s·g) — the division form of the torchao reference.
#[derive(Clone, Copy, Debug)]
pub struct Nvfp4 {
    pub global: f32,
}

/// Parameters of an NVFP4 block: the E4M3 scale byte and s·g.
#[derive(Clone, Copy, Debug)]
pub struct Nvfp4Params {
    byte: u8,
    sg: f32,
}

impl Nvfp4 {
    pub const BLOCK: usize = 16;
    /// The E4M3 NaN byte: the scale of a block holding NaN or ±Inf.
    pub const NAN_SCALE: u8 = 0x7F;

    /// A block's stored scale byte and the multiplier s·g its elements are divided by.
    #[inline(always)]
    pub fn scale_of(&self, p: Nvfp4Params) -> (u8, f32) {
        (p.byte, p.sg)
    }

    /// The tensor scale from the tensor's largest finite magnitude.
    pub fn global_from_amax(amax: f32) -> f32 {
        let g = amax / (448.0 * 6.0);
        if g < f32::MIN_POSITIVE {
            1.0
        } else {
            g
        }
    }
}

impl BlockScheme for Nvfp4 {
    type Stats = u32;
    type Params = Nvfp4Params;
    type Stored = u8;

    fn bits(&self) -> u32 {
        4
    }
    #[inline(always)]
    fn empty(&self) -> u32 {
        0
    }
    #[inline(always)]
    fn observe(&self, s: u32, x: f32) -> u32 {
        s.max(abs_bits(x))
    }
    #[inline(always)]
    fn params(&self, amax: u32) -> Nvfp4Params {
        if amax >= INF_BITS {
            return self.load(Self::NAN_SCALE);
        }
        let s = (f32::from_bits(amax) / 6.0 / self.global).clamp(2f32.powi(-6), 448.0);
        self.load(mf_encode(&E4M3FN, s, true))
    }
    #[inline(always)]
    fn store(&self, p: &Nvfp4Params) -> u8 {
        p.byte
    }
    #[inline(always)]
    fn load(&self, byte: u8) -> Nvfp4Params {
        Nvfp4Params { byte, sg: mf_decode(&E4M3FN, byte) * self.global }
    }
    #[inline(always)]
    fn encode(&self, p: &Nvfp4Params, x: f32) -> u8 {
        let c = mf_encode(&E2M1, x / p.sg, true);
        if p.byte == Self::NAN_SCALE {
            0x7
        } else {
            c
        }
    }
    #[inline(always)]
    fn decode(&self, p: &Nvfp4Params, code: u8) -> f32 {
        mf_decode(&E2M1, code) * p.sg
    }
}

/// FP8 (E4M3FN, E5M2 or their fnuz variants) with an fp32 scale per block, or one tensor scale (`tensor:
/// Some(scale)`), computed from the largest finite magnitude as `scale = amax/max` exactly (max: the
/// element's [`scale_max`](super::minifloat::MiniFloat::scale_max), 224 for E4M3FNUZ as vLLM on gfx942) — an
/// f32 subnormal too, so a tiny tensor keeps its values (x / scale is still near max) — with 1 for an
/// all-zero block and 2^-149 (the smallest positive f32) when the quotient underflows to 0. Elements are x / scale rounded with saturation (vLLM's
/// `cvt(x / scale, satfinite)`): beyond ±max, ±Inf included, to ±max; a NaN element stays NaN. (A block holding
/// NaN or ±Inf gets a NaN scale instead, and NaN codes.)
#[derive(Clone, Copy, Debug)]
pub struct Fp8Scaled<E: Element> {
    elem: PhantomData<E>,
    /// The per-tensor scale, or `None` for one scale per block.
    pub tensor: Option<f32>,
}

impl<E: Element> Fp8Scaled<E> {
    pub fn new(tensor: Option<f32>) -> Self {
        Fp8Scaled { elem: PhantomData, tensor }
    }

    /// The scale for a largest finite magnitude `amax` (≥ 0): amax/max, subnormal included; 1 when amax is 0;
    /// the smallest positive f32 when the quotient underflows.
    pub fn scale_for(&self, amax: f32) -> f32 {
        let s = amax / E::F.scale_max();
        if amax == 0.0 {
            1.0
        } else if s == 0.0 {
            f32::from_bits(1)
        } else {
            s
        }
    }
}

impl<E: Element> BlockScheme for Fp8Scaled<E> {
    type Stats = u32;
    type Params = f32;
    type Stored = f32;

    fn bits(&self) -> u32 {
        8
    }
    #[inline(always)]
    fn empty(&self) -> u32 {
        0
    }
    #[inline(always)]
    fn observe(&self, s: u32, x: f32) -> u32 {
        s.max(abs_bits(x))
    }
    #[inline(always)]
    fn params(&self, amax: u32) -> f32 {
        match self.tensor {
            Some(s) => s,
            None if amax >= INF_BITS => f32::NAN,
            None => self.scale_for(f32::from_bits(amax)),
        }
    }
    #[inline(always)]
    fn store(&self, p: &f32) -> f32 {
        *p
    }
    #[inline(always)]
    fn load(&self, s: f32) -> f32 {
        s
    }
    #[inline(always)]
    fn encode(&self, scale: &f32, x: f32) -> u8 {
        let v = x / *scale;
        if scale.is_nan() {
            E::F.nan_block_code()
        } else if x.is_nan() {
            mf_encode(&E::F, v, false)
        } else {
            // satfinite: ±Inf (and anything beyond ±max) to ±max.
            mf_encode(&E::F, v, true)
        }
    }
    #[inline(always)]
    fn decode(&self, scale: &f32, code: u8) -> f32 {
        mf_decode(&E::F, code) * *scale
    }
}

/// Integer group quantisation with fp16 scale (and zero point). Symmetric: scale = amax/qmax,
/// q = round(clamp(x/scale, −qmax, qmax)), qmax = 2^(b−1) − 1 (−2^(b−1) is never produced).
/// Asymmetric (KIVI): scale = (max − min)/(2^b − 1), zero = min, q = round(clamp((x − zero)/scale, 0,
/// 2^b − 1)). Scale and zero are rounded to fp16 (saturating at ±65504) *before* quantising, arithmetic is
/// in `f32`, rounding is half to even; a constant group has scale 0 and codes 0 (x̂ = zero point).
/// Codes: two's complement (symmetric) or unsigned, 8 bits per byte or 4 bits per nibble.
#[derive(Clone, Copy, Debug)]
pub struct IntGroup<const BITS: u32, const SYM: bool>;

/// Running statistics of an integer group.
#[derive(Clone, Copy, Debug)]
pub struct MinMax {
    min: f32,
    max: f32,
    amax: u32,
}

/// fp16 bits of the scale and zero point, and their `f32` values.
#[derive(Clone, Copy, Debug)]
pub struct IntParams {
    scale16: u16,
    zero16: u16,
    scale: f32,
    zero: f32,
}

impl<const BITS: u32, const SYM: bool> IntGroup<BITS, SYM> {
    fn qmax(&self) -> f32 {
        if SYM {
            ((1u32 << (BITS - 1)) - 1) as f32
        } else {
            ((1u32 << BITS) - 1) as f32
        }
    }
}

/// Round half to even to an integer for |v| < 2^22 (adding 1.5·2^23 keeps the sum in [2^23, 2^24), where
/// the unit in the last place is 1, for negative values too).
#[inline(always)]
fn rne(v: f32) -> i32 {
    (v + 12_582_912.0).to_bits().wrapping_sub(0x4B40_0000) as i32
}

impl<const BITS: u32, const SYM: bool> BlockScheme for IntGroup<BITS, SYM> {
    type Stats = MinMax;
    type Params = IntParams;
    type Stored = (u16, u16);

    fn bits(&self) -> u32 {
        BITS
    }
    #[inline(always)]
    fn empty(&self) -> MinMax {
        MinMax { min: f32::INFINITY, max: f32::NEG_INFINITY, amax: 0 }
    }
    #[inline(always)]
    fn observe(&self, s: MinMax, x: f32) -> MinMax {
        MinMax { min: s.min.min(x), max: s.max.max(x), amax: s.amax.max(abs_bits(x)) }
    }
    #[inline(always)]
    fn params(&self, s: MinMax) -> IntParams {
        if s.amax >= INF_BITS {
            return self.load((0x7E00, 0x7E00));
        }
        if SYM {
            let scale16 = f32_to_f16_saturating(f32::from_bits(s.amax) / self.qmax());
            self.load((scale16, 0))
        } else {
            let scale16 = f32_to_f16_saturating((s.max - s.min) / self.qmax());
            self.load((scale16, f32_to_f16_saturating(s.min)))
        }
    }
    #[inline(always)]
    fn store(&self, p: &IntParams) -> (u16, u16) {
        (p.scale16, p.zero16)
    }
    #[inline(always)]
    fn load(&self, (scale16, zero16): (u16, u16)) -> IntParams {
        IntParams { scale16, zero16, scale: f16_to_f32(scale16), zero: f16_to_f32(zero16) }
    }
    #[inline(always)]
    fn encode(&self, p: &IntParams, x: f32) -> u8 {
        let q = self.qmax();
        let lo = if SYM { -q } else { 0.0 };
        let v = ((x - p.zero) / p.scale).max(lo).min(q);
        let code = rne(v) as u8;
        let code = if BITS == 4 { code & 0xF } else { code };
        if p.scale == 0.0 || p.scale.is_nan() {
            0
        } else {
            code
        }
    }
    #[inline(always)]
    fn decode(&self, p: &IntParams, code: u8) -> f32 {
        let q = if SYM {
            // Sign-extend the low `bits` bits.
            let shift = 8 - BITS;
            ((code << shift) as i8 >> shift) as f32
        } else {
            code as f32
        };
        q * p.scale + p.zero
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// FP8 scales (issue 9 item 10): amax/max exactly, an f32 subnormal included (it was 1, which zeroed a
    /// tiny tensor); 1 for amax 0; the smallest positive f32 when the quotient underflows.
    #[test]
    fn fp8_scale_keeps_subnormal_quotients() {
        let s = Fp8Scaled::<E4m3fn>::new(None);
        assert_eq!(s.scale_for(3.5), 3.5 / 448.0);
        let tiny = 1e-40_f32;
        let want = tiny / 448.0;
        assert!(want > 0.0 && want < f32::MIN_POSITIVE);
        assert_eq!(s.scale_for(tiny), want);
        assert_eq!(s.scale_for(0.0), 1.0);
        assert_eq!(s.scale_for(f32::from_bits(1)), f32::from_bits(1)); // 2^-149 / 448 underflows to 0
                                                                       // The tiny value's own code is the top of the range, not 0.
        assert_ne!(s.encode(&want, tiny), 0);
    }

    /// Per-tensor FP8 saturates ±Inf to ±max (satfinite), keeps NaN, and a NaN scale (a non-finite block)
    /// gives NaN codes.
    #[test]
    fn fp8_per_tensor_saturates_infinities() {
        let e4 = Fp8Scaled::<E4m3fn>::new(Some(1.0));
        assert_eq!((e4.encode(&1.0, f32::INFINITY), e4.encode(&1.0, f32::NEG_INFINITY)), (0x7E, 0xFE));
        assert_eq!(e4.encode(&1.0, 1e9), 0x7E);
        assert_eq!(e4.encode(&1.0, f32::NAN) & 0x7F, 0x7F);
        assert_eq!(e4.encode(&f32::NAN, 1.0), 0x7F);
        let e5 = Fp8Scaled::<E5m2>::new(Some(1.0));
        assert_eq!((e5.encode(&1.0, f32::INFINITY), e5.encode(&1.0, f32::NEG_INFINITY)), (0x7B, 0xFB));
        assert!(e5.decode(&1.0, e5.encode(&1.0, f32::NAN)).is_nan());
    }
    use crate::quant::minifloat::{E2m1, E4m3fn, E5m2, E5M2};

    fn mx4() -> Mx<E2m1> {
        Mx::<E2m1>::new(ScaleRule::Floor)
    }

    fn quant_block<S: BlockScheme>(s: &S, xs: &[f32]) -> (S::Stored, Vec<u8>, Vec<f32>) {
        let st = xs.iter().fold(s.empty(), |a, &x| s.observe(a, x));
        let p = s.params(st);
        let codes: Vec<u8> = xs.iter().map(|&x| s.encode(&p, x)).collect();
        let q = s.load(s.store(&p));
        let back = codes.iter().map(|&c| s.decode(&q, c)).collect();
        (s.store(&p), codes, back)
    }

    #[test]
    fn floor_log2_from_bits() {
        for x in [1.0f32, 1.5, 2.0, 0.75, 448.0, 1e-40, f32::from_bits(1), f32::MAX] {
            assert_eq!(floor_log2_bits(x.to_bits()), (x as f64).log2().floor() as i32, "{x}");
        }
        // One ulp below a power of two: the float log2 rounds up, the bits do not.
        let below = f32::from_bits(8.0f32.to_bits() - 1);
        assert_eq!(floor_log2_bits(below.to_bits()), 2);
    }

    /// E8M0 scale bytes of the §6 vectors: all-zero block → 0x00; amax 6·2^k → element 6; 7.9 saturates to 6
    /// under FLOOR but gets scale 2 and element 4 (3.95 → 4) under RCEIL; subnormal amax → 0x00;
    /// non-finite → 0xFF and NaN.
    #[test]
    fn mx_scale_vectors() {
        let zero = quant_block(&mx4(), &[0.0; 32]);
        assert_eq!(zero.0, 0x00);
        assert!(zero.1.iter().all(|&c| c == 0) && zero.2.iter().all(|&v| v == 0.0));
        let mut b = [0.5f32; 32];
        b[3] = 6.0 * 8.0;
        let r = quant_block(&mx4(), &b);
        // floor(log2 48) = 5, emax 2 → scale 2^3 (byte 130) and 48/8 = 6.
        assert_eq!(r.0, 130);
        assert_eq!(r.1[3], 0x7); // 48 / 8 = 6
        let mut b = [0.0f32; 32];
        b[0] = 7.9;
        let floor = quant_block(&mx4(), &b);
        assert_eq!((floor.0, floor.1[0], floor.2[0]), (127, 0x7, 6.0));
        let rceil = quant_block(&Mx::<E2m1>::new(ScaleRule::Rceil), &b);
        assert_eq!((rceil.0, rceil.1[0], rceil.2[0]), (128, 0x6, 8.0));
        let mut b = [0.0f32; 32];
        b[5] = 1e-40;
        assert_eq!(quant_block(&mx4(), &b).0, 0x00);
        let mut b = [1.0f32; 32];
        b[9] = f32::NAN;
        let nan = quant_block(&mx4(), &b);
        assert_eq!(nan.0, 0xFF);
        assert!(nan.1.iter().all(|&c| c == 0x7) && nan.2.iter().all(|v| v.is_nan()));
        b[9] = f32::NEG_INFINITY;
        assert_eq!(quant_block(&mx4(), &b).0, 0xFF);
    }

    /// MXFP8 E4M3: amax 500 saturates to 448; one huge outlier flushes the small values of an MXFP4 block.
    #[test]
    fn mx_saturation_and_outliers() {
        let mut b = [1.0f32; 32];
        b[0] = 500.0;
        let r = quant_block(&Mx::<E4m3fn>::new(ScaleRule::Floor), &b);
        assert_eq!((r.0, r.2[0]), (127, 448.0));
        let mut b = [1e-3f32; 32];
        b[7] = 1e4;
        let r = quant_block(&mx4(), &b);
        assert!(r.2.iter().enumerate().all(|(i, &v)| if i == 7 { v > 0.0 } else { v == 0.0 }));
    }

    /// NVFP4: all-zero tensor (g = 1, scale at the E4M3 floor 2^-6, zeros back); the block holding the
    /// tensor amax gets scale 448 and element 6; a tiny block clamps its scale to 2^-6.
    #[test]
    fn nvfp4_vectors() {
        let z = Nvfp4 { global: Nvfp4::global_from_amax(0.0) };
        assert_eq!(z.global, 1.0);
        let r = quant_block(&z, &[0.0; 16]);
        assert_eq!(r.0, 0x08);
        assert!(r.2.iter().all(|&v| v == 0.0));
        let amax = 3.0;
        let s = Nvfp4 { global: Nvfp4::global_from_amax(amax) };
        let mut b = [0.1f32; 16];
        b[2] = -amax;
        let r = quant_block(&s, &b);
        assert_eq!(mf_decode(&E4M3FN, r.0), 448.0);
        assert_eq!(r.1[2], 0xF); // −6
        assert!((r.2[2] + amax).abs() < 1e-6);
        let r = quant_block(&s, &[1e-9; 16]);
        assert_eq!(mf_decode(&E4M3FN, r.0), 2f32.powi(-6));
        let mut b = [1.0f32; 16];
        b[0] = f32::INFINITY;
        let r = quant_block(&s, &b);
        assert_eq!(r.0, 0x7F);
        assert!(r.2.iter().all(|v| v.is_nan()));
    }

    /// Per-block fp8 scales: amax maps to the format max; a NaN block is NaN; per-tensor keeps NaN elements and
    /// saturates +Inf to max (satfinite).
    #[test]
    fn fp8_scaled() {
        let s = Fp8Scaled::<E4m3fn>::new(None);
        let mut b = [0.25f32; 8];
        b[1] = -3.5;
        let r = quant_block(&s, &b);
        assert_eq!(r.0, 3.5 / 448.0);
        assert_eq!(r.1[1], 0xFE);
        assert_eq!(r.2[1], -3.5);
        let r = quant_block(&s, &[0.0; 8]);
        assert_eq!(r.0, 1.0);
        let t = Fp8Scaled::<E5m2>::new(Some(0.5));
        let r = quant_block(&t, &[1.0, f32::NAN, f32::INFINITY, 1e9]);
        assert_eq!(r.1, vec![mf_encode(&E5M2, 2.0, true), 0x7E, 0x7B, 0x7B]);
    }

    /// Integer groups: symmetric int8 never produces −128; asymmetric int4 maps min → 0 and max → 15;
    /// half steps round to even; constant groups give scale 0 and x̂ = zero point; nibble codes.
    #[test]
    fn int_groups() {
        let s8 = IntGroup::<8, true>;
        let mut b = [0.0f32; 32];
        b[0] = -1.0;
        b[1] = 1.0;
        let r = quant_block(&s8, &b);
        assert_eq!(f16_to_f32(r.0 .0), f16_to_f32(f32_to_f16_saturating(1.0 / 127.0)));
        assert_eq!(r.1[0] as i8, -127);
        assert_eq!(r.1[1] as i8, 127);
        let a4 = IntGroup::<4, false>;
        let b: Vec<f32> = (0..32).map(|i| -1.0 + i as f32 * (3.0 / 31.0)).collect();
        let r = quant_block(&a4, &b);
        assert_eq!(r.1[0], 0);
        assert_eq!(r.1[31], 15);
        assert!(r.1.iter().all(|&c| c <= 15));
        let c = quant_block(&a4, &[0.3; 32]);
        assert_eq!(f16_to_f32(c.0 .0), 0.0);
        assert!(c.1.iter().all(|&q| q == 0));
        assert!(c.2.iter().all(|&v| v == f16_to_f32(f32_to_f16_saturating(0.3))));
        // Half steps: scale 1 exactly (range 0..15), 2.5 → 2, 3.5 → 4.
        let mut h: Vec<f32> = vec![0.0; 32];
        h[1] = 15.0;
        h[2] = 2.5;
        h[3] = 3.5;
        let r = quant_block(&a4, &h);
        assert_eq!((r.1[2], r.1[3]), (2, 4));
        let s4 = IntGroup::<4, true>;
        let r = quant_block(&s4, &[-7.0, 7.0, 3.0, 0.0]);
        assert_eq!(r.1, vec![0x9, 0x7, 0x3, 0x0]);
        assert_eq!(r.2, vec![-7.0, 7.0, 3.0, 0.0]);
    }
}
