//! Small floating-point element formats: FP8 E4M3FN and E5M2 (OCP OFP8), their AMD "fnuz" variants
//! E4M3FNUZ and E5M2FNUZ, FP6 E2M3 and E3M2 and FP4 E2M1 (OCP MX elements), encoded from `f32` with one round-to-nearest-even step and decoded exactly.
//!
//! Every encoder works on the `f32` bit pattern with integer arithmetic and selects, so the slice kernels
//! auto-vectorise (`quant/simd.rs` instantiates them for wider instruction sets). Behaviour, format by
//! format (matches `ml_dtypes` 0.6 bit for bit where `ml_dtypes` defines it):
//!
//! | format | max | overflow, non-saturating | overflow, `saturate` | ±Inf | NaN |
//! |---|---|---|---|---|---|
//! | E4M3FN | 448 (S.1111.110) | NaN (S.1111.111); 464 ties to 448 | ±448 | like overflow | S.1111.111 |
//! | E5M2 | 57344 | ±Inf; 61440 ties up to Inf | ±57344 | ±Inf (sat: ±57344) | S.11111.10 |
//! | E2M1, E2M3, E3M2 | 6, 7.5, 28 | always saturates (no Inf/NaN) | same | ±max | ±max (sign of the NaN kept) |
//! | E4M3FNUZ | 240 (S.1111.111); 248 ties up to NaN | NaN (0x80) | ±240 | like overflow | 0x80 (any sign) |
//! | E5M2FNUZ | 57344 (S.11111.11); 61440 ties up to NaN | NaN (0x80) | ±57344 | like overflow | 0x80 (any sign) |
//!
//! The fnuz formats (AMD MI300, gfx942) have bias + 1, no Inf, no −0 (a negative value that rounds to zero
//! encodes as +0) and one NaN, the negative-zero pattern 0x80. Elsewhere signed zeros are kept; `f32` subnormal inputs flush to ±0 in every format (they are far below each
//! format's smallest subnormal). Codes occupy the low bits of a byte, sign in the top bit of the code.

/// Parameters of a sign-exponent-mantissa element format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MiniFloat {
    pub name: &'static str,
    pub ebits: u32,
    pub mbits: u32,
    pub bias: i32,
    /// Magnitude code of the largest finite value.
    pub max_code: u8,
    /// Magnitude code of NaN, if the format has one.
    pub nan_code: Option<u8>,
    /// Magnitude code of infinity, if the format has one.
    pub inf_code: Option<u8>,
    /// AMD's "fnuz" convention (`e4m3fnuz`, `e5m2fnuz`): finite, NaN is the negative-zero pattern (sign bit
    /// alone, 0x80), there is no −0 (negative values that round to zero give +0) and no Inf.
    pub nuz: bool,
}

impl MiniFloat {
    /// The sign bit of a code.
    pub const fn sign_bit(&self) -> u8 {
        1 << (self.ebits + self.mbits)
    }

    /// Bits of one code (sign included).
    pub const fn bits(&self) -> u32 {
        1 + self.ebits + self.mbits
    }

    /// Largest finite value.
    pub fn max_value(&self) -> f32 {
        decode(self, self.max_code)
    }

    /// Exponent of the largest normal binade (`emax` of the OCP MX spec).
    pub fn emax(&self) -> i32 {
        (self.max_code >> self.mbits) as i32 - self.bias
    }

    /// The value a scaled format maps a block's (or tensor's) amax to: the largest finite value, except
    /// E4M3FNUZ, where vLLM divides by [`E4M3FNUZ_SCALE_MAX`] (224) instead of 240.
    pub fn scale_max(&self) -> f32 {
        if *self == E4M3FNUZ {
            E4M3FNUZ_SCALE_MAX
        } else {
            self.max_value()
        }
    }

    /// The code a NaN-scaled block stores for every element: 0x80 in the fnuz formats (their only NaN), else
    /// the all-ones magnitude (NaN in E4M3FN and E5M2, ±max in the formats without NaN).
    pub const fn nan_block_code(&self) -> u8 {
        if self.nuz {
            self.sign_bit()
        } else {
            self.sign_bit() - 1
        }
    }
}

/// OCP FP8 E4M3 "fn" (finite + NaN), bias 7.
pub const E4M3FN: MiniFloat = MiniFloat {
    name: "e4m3fn",
    ebits: 4,
    mbits: 3,
    bias: 7,
    max_code: 0x7E,
    nan_code: Some(0x7F),
    inf_code: None,
    nuz: false,
};
/// OCP FP8 E5M2 (IEEE-like), bias 15.
pub const E5M2: MiniFloat = MiniFloat {
    name: "e5m2",
    ebits: 5,
    mbits: 2,
    bias: 15,
    max_code: 0x7B,
    nan_code: Some(0x7E),
    inf_code: Some(0x7C),
    nuz: false,
};
/// OCP FP6 E2M3, bias 1, max 7.5.
pub const E2M3: MiniFloat =
    MiniFloat { name: "e2m3", ebits: 2, mbits: 3, bias: 1, max_code: 0x1F, nan_code: None, inf_code: None, nuz: false };
/// OCP FP6 E3M2, bias 3, max 28.
pub const E3M2: MiniFloat =
    MiniFloat { name: "e3m2", ebits: 3, mbits: 2, bias: 3, max_code: 0x1F, nan_code: None, inf_code: None, nuz: false };
/// OCP FP4 E2M1, bias 1, values {0, 0.5, 1, 1.5, 2, 3, 4, 6}.
pub const E2M1: MiniFloat =
    MiniFloat { name: "e2m1", ebits: 2, mbits: 1, bias: 1, max_code: 0x7, nan_code: None, inf_code: None, nuz: false };

/// AMD FP8 E4M3FNUZ (MI300 / gfx942): bias 8, max 240 (S.1111.111), NaN 0x80, no −0, no Inf.
pub const E4M3FNUZ: MiniFloat = MiniFloat {
    name: "e4m3fnuz",
    ebits: 4,
    mbits: 3,
    bias: 8,
    max_code: 0x7F,
    nan_code: None,
    inf_code: None,
    nuz: true,
};
/// AMD FP8 E5M2FNUZ: bias 16, max 57344 (S.11111.11), NaN 0x80, no −0, no Inf.
pub const E5M2FNUZ: MiniFloat = MiniFloat {
    name: "e5m2fnuz",
    ebits: 5,
    mbits: 2,
    bias: 16,
    max_code: 0x7F,
    nan_code: None,
    inf_code: None,
    nuz: true,
};

/// The amax divisor vLLM uses for dynamic E4M3FNUZ scales on gfx942 (`FP8_E4M3_MAX = 224.0f` for the fnuz
/// type, instead of the format's 240): values land at most on 224 = 0x7E, whose bits mean 448 in E4M3FN, so an
/// fnuz cache converts to fn exactly by halving the scale (`spec/quant.md` §1.1).
pub const E4M3FNUZ_SCALE_MAX: f32 = 224.0;

/// An element format as a type, so that kernels are compiled with its parameters as constants (the
/// field loads fold away and the loops vectorise).
pub trait Element: Copy + Send + Sync + 'static {
    const F: MiniFloat;
}

macro_rules! element_types {
    ($($(#[$m:meta])* $t:ident = $c:ident;)*) => {$(
        $(#[$m])*
        #[derive(Clone, Copy, Debug)]
        pub struct $t;
        impl Element for $t {
            const F: MiniFloat = $c;
        }
    )*};
}

element_types! {
    /// [`E4M3FN`] as a type.
    E4m3fn = E4M3FN;
    /// [`E5M2`] as a type.
    E5m2 = E5M2;
    /// [`E2M3`] as a type.
    E2m3 = E2M3;
    /// [`E3M2`] as a type.
    E3m2 = E3M2;
    /// [`E2M1`] as a type.
    E2m1 = E2M1;
    /// [`E4M3FNUZ`] as a type.
    E4m3fnuz = E4M3FNUZ;
    /// [`E5M2FNUZ`] as a type.
    E5m2fnuz = E5M2FNUZ;
}

/// Evaluate `$body` with `$t` a type alias for the [`Element`] type of the format `$f` (a `MiniFloat`).
#[macro_export]
macro_rules! with_element {
    ($f:expr, $t:ident => $body:expr) => {{
        use $crate::quant::minifloat as mf;
        let f: mf::MiniFloat = $f;
        if f == mf::E4M3FN {
            type $t = mf::E4m3fn;
            $body
        } else if f == mf::E5M2 {
            type $t = mf::E5m2;
            $body
        } else if f == mf::E2M3 {
            type $t = mf::E2m3;
            $body
        } else if f == mf::E3M2 {
            type $t = mf::E3m2;
            $body
        } else if f == mf::E4M3FNUZ {
            type $t = mf::E4m3fnuz;
            $body
        } else if f == mf::E5M2FNUZ {
            type $t = mf::E5m2fnuz;
            $body
        } else {
            type $t = mf::E2m1;
            $body
        }
    }};
}

/// Every element format, for lookups by name.
pub const ELEMENT_FORMATS: [MiniFloat; 7] = [E4M3FN, E5M2, E2M3, E3M2, E2M1, E4M3FNUZ, E5M2FNUZ];

/// Look an element format up by name (`e4m3fn`, `e5m2`, `e2m3`, `e3m2`, `e2m1`, `e4m3fnuz`, `e5m2fnuz`).
pub fn element_format(name: &str) -> Option<MiniFloat> {
    ELEMENT_FORMATS.iter().copied().find(|f| f.name == name)
}

/// `2^k` as an `f32`, for `k` in the normal range [−126, 127].
#[inline(always)]
const fn pow2(k: i32) -> f32 {
    f32::from_bits(((k + 127) as u32) << 23)
}

/// Encode one `f32` (one RNE step). `saturate` sends overflow and ±Inf to ±max (formats without Inf/NaN
/// always saturate).
#[inline(always)]
pub fn encode(f: &MiniFloat, x: f32, saturate: bool) -> u8 {
    let b = x.to_bits();
    let sign = ((b >> 31) as u8) << (f.ebits + f.mbits);
    let a = b & 0x7FFF_FFFF;
    let shift = 23 - f.mbits;
    // Normal range: RNE on the f32 bits, then rebias the exponent.
    let rounded = (a + ((1 << (shift - 1)) - 1) + ((a >> shift) & 1)) >> shift;
    let normal = rounded.wrapping_sub(((127 - f.bias) as u32) << f.mbits);
    // Below the smallest normal: RNE(|x| · 2^(bias − 1 + mbits)) with the 2^23 magic-number trick (exact
    // power-of-two scaling, one rounding in the addition).
    let scaled = f32::from_bits(a) * pow2(f.bias - 1 + f.mbits as i32);
    let sub = (scaled + 8_388_608.0).to_bits().wrapping_sub(0x4B00_0000);
    let min_normal_bits = ((127 + 1 - f.bias) as u32) << 23;
    let mut mag = if a < min_normal_bits { sub } else { normal };
    // Overflow: above the midpoint between max and the next binade step; exactly at it, RNE rounds up
    // when max's mantissa is odd.
    let max_bits = decode(f, f.max_code).to_bits();
    let half_ulp = 1u32 << (22 - f.mbits);
    let threshold = max_bits + half_ulp;
    let max_odd = f.max_code & 1 == 1;
    let overflow = a > threshold || (max_odd && a == threshold);
    let is_nan = a > 0x7F80_0000;
    let is_inf = a == 0x7F80_0000;
    let over_code = match (f.nan_code, f.inf_code) {
        (_, Some(inf)) if !saturate => inf as u32,
        (Some(nan), None) if !saturate => nan as u32,
        _ => f.max_code as u32,
    };
    if f.nuz {
        // One NaN (0x80, whatever the sign), no Inf (non-saturating overflow and ±Inf are NaN, as ml_dtypes
        // casts them; saturating: ±max), and no −0 (a negative value rounding to zero is +0).
        let nan = is_nan || (!saturate && (overflow || is_inf));
        let m = if overflow || is_inf { f.max_code as u32 } else { mag };
        return if nan {
            f.sign_bit()
        } else if m == 0 {
            0
        } else {
            sign | m as u8
        };
    }
    if overflow || is_inf {
        mag = over_code;
    }
    if is_nan {
        mag = f.nan_code.unwrap_or(f.max_code) as u32;
    }
    sign | mag as u8
}

/// Decode one code to `f32` (exact).
#[inline(always)]
pub fn decode(f: &MiniFloat, code: u8) -> f32 {
    let sign_bit = f.sign_bit();
    let neg = code & sign_bit != 0;
    let mag = (code & (sign_bit - 1)) as u32;
    let e = mag >> f.mbits;
    let m = mag & ((1 << f.mbits) - 1);
    let normal = f32::from_bits(((e as i32 + 127 - f.bias) as u32) << 23 | m << (23 - f.mbits));
    let sub = m as f32 * pow2(1 - f.bias - f.mbits as i32);
    let mut v = if e == 0 { sub } else { normal };
    if f.inf_code.is_some() {
        // IEEE-like (E5M2): the top exponent is Inf with a zero mantissa, NaN otherwise.
        if e == (1 << f.ebits) - 1 {
            v = if m == 0 { f32::INFINITY } else { f32::NAN };
        }
    } else if Some(mag as u8) == f.nan_code || (f.nuz && code == sign_bit) {
        v = f32::NAN;
    }
    if neg {
        -v
    } else {
        v
    }
}

/// `bfloat16` bits to `f32` (exact).
#[inline(always)]
pub fn bf16_to_f32(h: u16) -> f32 {
    f32::from_bits((h as u32) << 16)
}

/// IEEE `float16` bits to `f32` (exact; branch-free so that it vectorises).
#[inline(always)]
pub fn f16_to_f32(h: u16) -> f32 {
    let h = h as u32;
    let sign = (h & 0x8000) << 16;
    let e = (h >> 10) & 0x1F;
    let m = h & 0x3FF;
    let normal = ((e + 112) << 23) | (m << 13);
    let special = 0x7F80_0000 | (m << 13);
    let sub = (m as f32 * pow2(-24)).to_bits();
    let bits = if e == 0 {
        sub
    } else if e == 31 {
        special
    } else {
        normal
    };
    f32::from_bits(sign | bits)
}

/// `f32` to `f16` bits with round-to-nearest-even and saturation to ±65504 (storage of integer-group scales).
/// NaN stays NaN.
#[inline]
pub fn f32_to_f16_saturating(x: f32) -> u16 {
    let b = x.to_bits();
    let sign = ((b >> 16) & 0x8000) as u16;
    let a = b & 0x7FFF_FFFF;
    if a > 0x7F80_0000 {
        return sign | 0x7E00;
    }
    // 65504 + half an ulp (16) = 65520: ties round to even (65536 → overflow), so ≥ 65520 saturates.
    if a >= 0x477F_F000 {
        return sign | 0x7BFF;
    }
    if a < 0x3880_0000 {
        // Below 2^-14: subnormal, RNE(|x| · 2^24).
        let scaled = f32::from_bits(a) * pow2(24);
        return sign | (scaled + 8_388_608.0).to_bits().wrapping_sub(0x4B00_0000) as u16;
    }
    let rounded = (a + 0xFFF + ((a >> 13) & 1)) >> 13;
    sign | rounded.wrapping_sub(112 << 10) as u16
}

#[cfg(test)]
mod tests {
    use super::*;

    fn enc(f: &MiniFloat, x: f32) -> u8 {
        encode(f, x, false)
    }
    fn sat(f: &MiniFloat, x: f32) -> u8 {
        encode(f, x, true)
    }
    fn next_up(x: f32) -> f32 {
        f32::from_bits(x.to_bits() + 1)
    }

    /// The edge-case vectors of spec/quant.md §6 for E4M3FN.
    #[test]
    fn e4m3fn_edge_vectors() {
        let f = &E4M3FN;
        for (x, want) in [(448.0, 0x7E), (449.0, 0x7E), (464.0, 0x7E), (-464.0, 0xFE), (240.0, 0x77), (256.0, 0x78)] {
            assert_eq!(enc(f, x), want, "{x}");
        }
        assert_eq!(enc(f, next_up(464.0)), 0x7F);
        assert_eq!(sat(f, next_up(464.0)), 0x7E);
        for x in [480.0, 1e6, f32::INFINITY] {
            assert_eq!(enc(f, x), 0x7F, "{x}");
            assert_eq!(sat(f, x), 0x7E, "{x}");
        }
        assert_eq!(enc(f, -480.0), 0xFF);
        assert_eq!(sat(f, -480.0), 0xFE);
        assert_eq!(enc(f, f32::NAN), 0x7F);
        assert_eq!(enc(f, -f32::NAN), 0xFF);
        assert_eq!(sat(f, f32::NAN), 0x7F);
        assert_eq!(enc(f, -0.0), 0x80);
        let t = 2f32.powi(-9);
        assert_eq!(enc(f, t), 0x01);
        assert_eq!(enc(f, 2f32.powi(-10)), 0x00); // tie to even
        assert_eq!(enc(f, next_up(2f32.powi(-10))), 0x01);
        assert_eq!(enc(f, 1.5 * t), 0x02);
        assert_eq!(enc(f, 2.5 * t), 0x02);
        assert_eq!(enc(f, 3.5 * t), 0x04);
        assert_eq!(enc(f, 7.5 * t), 0x08); // rounds up into the min normal
        assert_eq!(enc(f, 1.0625), 0x38);
        assert_eq!(enc(f, 1.1875), 0x3A);
        assert_eq!(enc(f, f32::from_bits(1)), 0x00);
        assert_eq!(enc(f, -f32::from_bits(0x007F_FFFF)), 0x80);
        assert_eq!(enc(f, 1.0625 + 2f32.powi(-20)), 0x39); // one rounding step from f32
    }

    #[test]
    fn e5m2_edge_vectors() {
        let f = &E5M2;
        assert_eq!(enc(f, 57344.0), 0x7B);
        assert_eq!(enc(f, 61439.0), 0x7B);
        assert_eq!(enc(f, 61440.0), 0x7C);
        assert_eq!(sat(f, 61440.0), 0x7B);
        assert_eq!(enc(f, 65504.0), 0x7C);
        assert_eq!(enc(f, f32::INFINITY), 0x7C);
        assert_eq!(enc(f, f32::NEG_INFINITY), 0xFC);
        assert_eq!(sat(f, f32::INFINITY), 0x7B);
        assert_eq!(enc(f, f32::NAN), 0x7E);
        assert_eq!(enc(f, -f32::NAN), 0xFE);
        assert_eq!(enc(f, 2f32.powi(-16)), 0x01);
        assert_eq!(enc(f, 2f32.powi(-17)), 0x00);
    }

    /// AMD's fnuz formats, hand-computed from their definition (bias 8 / 16, max code 0x7F, NaN 0x80, no −0,
    /// no Inf): the spec/quant.md §6 vectors transposed to them.
    #[test]
    fn fnuz_edge_vectors() {
        let f = &E4M3FNUZ;
        assert_eq!(f.max_value(), 240.0);
        assert_eq!(f.scale_max(), 224.0);
        assert_eq!(E5M2FNUZ.scale_max(), 57344.0);
        for (x, want) in [(240.0, 0x7F), (224.0, 0x7E), (247.0, 0x7F), (1.0, 0x40), (-1.0, 0xC0), (0.0, 0x00)] {
            assert_eq!(enc(f, x), want, "{x}");
        }
        // 248 is the midpoint between 240 (mantissa 111, odd) and 256: it rounds up, out of range.
        assert_eq!(enc(f, 248.0), 0x80);
        assert_eq!(sat(f, 248.0), 0x7F);
        assert_eq!(enc(f, f32::from_bits(248f32.to_bits() - 1)), 0x7F);
        assert_eq!(sat(f, -248.0), 0xFF);
        for x in [1e6, f32::INFINITY, f32::NEG_INFINITY, -1e6, f32::NAN, -f32::NAN] {
            assert_eq!(enc(f, x), 0x80, "{x}");
        }
        assert_eq!(sat(f, f32::INFINITY), 0x7F);
        assert_eq!(sat(f, f32::NEG_INFINITY), 0xFF);
        assert_eq!(sat(f, f32::NAN), 0x80);
        assert_eq!(sat(f, -f32::NAN), 0x80);
        // No negative zero.
        assert_eq!(enc(f, -0.0), 0x00);
        assert_eq!(enc(f, -2f32.powi(-11)), 0x00);
        assert_eq!(enc(f, -f32::from_bits(1)), 0x00);
        let t = 2f32.powi(-10);
        assert_eq!(enc(f, t), 0x01);
        assert_eq!(enc(f, 2f32.powi(-11)), 0x00); // tie to even
        assert_eq!(enc(f, next_up(2f32.powi(-11))), 0x01);
        assert_eq!(enc(f, -next_up(2f32.powi(-11))), 0x81);
        assert_eq!(enc(f, 7.5 * t), 0x08); // rounds up into the min normal 2^-7
        assert!(decode(f, 0x80).is_nan());
        assert_eq!(decode(f, 0x01), t);
        assert_eq!(decode(f, 0xFF), -240.0);

        let f = &E5M2FNUZ;
        assert_eq!(f.max_value(), 57344.0);
        assert_eq!(enc(f, 57344.0), 0x7F);
        assert_eq!(enc(f, 61439.0), 0x7F);
        assert_eq!(enc(f, 61440.0), 0x80);
        assert_eq!(sat(f, 61440.0), 0x7F);
        assert_eq!(enc(f, f32::INFINITY), 0x80);
        assert_eq!(sat(f, f32::NEG_INFINITY), 0xFF);
        assert_eq!(enc(f, -f32::NAN), 0x80);
        assert_eq!(enc(f, 1.0), 0x40);
        assert_eq!(enc(f, 2f32.powi(-17)), 0x01);
        assert_eq!(enc(f, 2f32.powi(-18)), 0x00);
        assert_eq!(enc(f, -2f32.powi(-18)), 0x00);
        assert_eq!(enc(f, -0.0), 0x00);
        assert!(decode(f, 0x80).is_nan());
        assert_eq!(decode(f, 0x01), 2f32.powi(-17));
    }

    /// The fnuz bit patterns mean half the fn value (bias + 1), except fn's −0 and NaN and the top fnuz code:
    /// every finite E4M3FN code c has E4M3FNUZ value decode(fn, c) / 2 under the same bits, and likewise
    /// E5M2 / E5M2FNUZ (what vLLM's `normalize_e4m3fn_to_e4m3fnuz` relies on when it doubles the scale).
    #[test]
    fn fnuz_bits_mean_half_the_fn_value() {
        for (fnf, nuz) in [(E4M3FN, E4M3FNUZ), (E5M2, E5M2FNUZ)] {
            for c in 0..=255u8 {
                let v = decode(&fnf, c);
                if !v.is_finite() || c == 0x80 {
                    continue;
                }
                assert_eq!(decode(&nuz, c), v / 2.0, "{} {c:#x}", nuz.name);
            }
        }
    }

    #[test]
    fn e2m1_edge_vectors() {
        let f = &E2M1;
        for (x, want) in [
            (0.25, 0),
            (next_up(0.25), 1),
            (0.75, 2),
            (1.25, 2),
            (1.75, 4),
            (2.5, 4),
            (3.5, 6),
            (5.0, 6),
            (next_up(5.0), 7),
            (6.5, 7),
            (100.0, 7),
            (f32::INFINITY, 7),
            (-0.0, 8),
            (-6.0, 0xF),
        ] {
            assert_eq!(enc(f, x), want, "{x}");
        }
        assert_eq!(enc(f, f32::NAN), 0x7);
        assert_eq!(enc(f, -f32::NAN), 0xF);
    }

    /// Decoding every code and re-encoding it gives the code back (NaN codes excepted), and decoded values
    /// match the format's definition (max values, min subnormals).
    #[test]
    fn decode_encode_round_trip_and_landmarks() {
        for f in ELEMENT_FORMATS {
            let n = 1u32 << f.bits();
            for c in 0..n {
                let c = c as u8;
                let v = decode(&f, c);
                if v.is_nan() {
                    continue;
                }
                assert_eq!(encode(&f, v, false), c, "{} code {c:#x} = {v}", f.name);
            }
        }
        assert_eq!(E4M3FN.max_value(), 448.0);
        assert_eq!(E5M2.max_value(), 57344.0);
        assert_eq!(E2M3.max_value(), 7.5);
        assert_eq!(E3M2.max_value(), 28.0);
        assert_eq!(E2M1.max_value(), 6.0);
        assert_eq!(decode(&E4M3FN, 0x01), 2f32.powi(-9));
        assert_eq!(decode(&E5M2, 0x01), 2f32.powi(-16));
        assert_eq!(decode(&E2M3, 0x01), 0.125);
        assert_eq!(decode(&E3M2, 0x01), 0.0625);
        assert_eq!(decode(&E2M1, 0x01), 0.5);
        assert!(decode(&E4M3FN, 0xFF).is_nan());
        assert_eq!(decode(&E5M2, 0xFC), f32::NEG_INFINITY);
        assert_eq!([E4M3FN.emax(), E5M2.emax(), E2M3.emax(), E3M2.emax(), E2M1.emax()], [8, 15, 2, 4, 2]);
        assert_eq!([E4M3FNUZ.emax(), E5M2FNUZ.emax()], [7, 15]);
        assert_eq!([E4M3FN.nan_block_code(), E4M3FNUZ.nan_block_code(), E2M1.nan_block_code()], [0x7F, 0x80, 0x7]);
    }

    /// Brute force over a dense f32 sample: the code is the nearest representable value (ties to even
    /// code), against a search over all codes.
    #[test]
    fn encode_is_round_to_nearest_even() {
        for f in ELEMENT_FORMATS {
            let values: Vec<(f32, u8)> = (0..(1u32 << (f.bits() - 1)))
                .map(|c| (decode(&f, c as u8), c as u8))
                .filter(|(v, _)| v.is_finite())
                .collect();
            let max = f.max_value();
            let mut x = 0.0f32;
            while x < max * 1.2 {
                let want = if x >= max {
                    // beyond max: saturating formats clamp; for the others use the saturating mode.
                    f.max_code
                } else {
                    let mut best = (f32::INFINITY, 0u8);
                    for &(v, c) in &values {
                        let d = (v - x).abs();
                        if d < best.0 || (d == best.0 && c & 1 == 0) {
                            best = (d, c);
                        }
                    }
                    best.1
                };
                assert_eq!(encode(&f, x, true), want, "{} {x}", f.name);
                x += max / 997.0;
            }
        }
    }

    #[test]
    fn f16_and_bf16_widening_is_exact() {
        assert_eq!(f16_to_f32(0x3C00), 1.0);
        assert_eq!(f16_to_f32(0x7BFF), 65504.0);
        assert_eq!(f16_to_f32(0x0001), 2f32.powi(-24));
        assert_eq!(f16_to_f32(0x8000).to_bits(), (-0.0f32).to_bits());
        assert_eq!(f16_to_f32(0x7C00), f32::INFINITY);
        assert!(f16_to_f32(0x7E00).is_nan());
        assert_eq!(bf16_to_f32(0x3F80), 1.0);
        // f32 → f16 → f32 round trip is the identity on all finite f16 values.
        for h in 0..=0xFFFFu16 {
            let x = f16_to_f32(h);
            if x.is_finite() {
                assert_eq!(f32_to_f16_saturating(x), h, "{h:#x}");
            }
        }
        assert_eq!(f32_to_f16_saturating(1e9), 0x7BFF);
        assert_eq!(f32_to_f16_saturating(65519.0), 0x7BFF);
        assert_eq!(f32_to_f16_saturating(1.0 + 2f32.powi(-11)), 0x3C00); // tie to even
    }
}
