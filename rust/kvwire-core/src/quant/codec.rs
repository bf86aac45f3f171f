//! Element-wise kernels: input widening (`f32`, `bfloat16`, `float16`), casts to element codes, decoding,
//! and sub-byte packing. Portable code written to auto-vectorise; [`super::simd::run`] compiles it for the
//! widest available instruction set.
//!
//! Packing: FP4/INT4 codes go two per byte, element 2i in the low nibble (PyTorch `float4_e2m1fn_x2`,
//! torchao, NVIDIA); FP6 codes go four per three bytes as a little-endian 24-bit word
//! `c0 | c1 << 6 | c2 << 12 | c3 << 18` (kvwire's convention). Wider codes take one byte each.

use super::minifloat::{bf16_to_f32, decode, encode, f16_to_f32, Element};

/// An input element type, widened exactly to `f32`.
pub trait Input: Copy + Send + Sync + 'static {
    fn to_f32(self) -> f32;
}

impl Input for f32 {
    #[inline(always)]
    fn to_f32(self) -> f32 {
        self
    }
}

/// `bfloat16` bits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(transparent)]
pub struct Bf16(pub u16);

impl Input for Bf16 {
    #[inline(always)]
    fn to_f32(self) -> f32 {
        bf16_to_f32(self.0)
    }
}

/// IEEE `float16` bits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(transparent)]
pub struct F16(pub u16);

impl Input for F16 {
    #[inline(always)]
    fn to_f32(self) -> f32 {
        f16_to_f32(self.0)
    }
}

/// How many codes of `bits` bits fit a packed unit, and the unit's byte size: (codes, bytes).
pub const fn pack_unit(bits: u32) -> (usize, usize) {
    match bits {
        4 => (2, 1),
        6 => (4, 3),
        _ => (1, 1),
    }
}

/// Bytes needed for `n` codes of `bits` bits (`n` a multiple of the packing unit).
pub const fn packed_len(n: usize, bits: u32) -> usize {
    let (c, b) = pack_unit(bits);
    n / c * b
}

/// Pack one-per-byte codes (`codes.len()` a multiple of the unit) into `out`.
#[inline(always)]
pub fn pack(codes: &[u8], bits: u32, out: &mut [u8]) {
    match bits {
        4 => {
            for (o, pair) in out.iter_mut().zip(codes.chunks_exact(2)) {
                *o = (pair[0] & 0xF) | (pair[1] << 4);
            }
        }
        6 => {
            for (o, quad) in out.chunks_exact_mut(3).zip(codes.chunks_exact(4)) {
                let w = (quad[0] as u32 & 0x3F)
                    | (quad[1] as u32 & 0x3F) << 6
                    | (quad[2] as u32 & 0x3F) << 12
                    | (quad[3] as u32 & 0x3F) << 18;
                o[0] = w as u8;
                o[1] = (w >> 8) as u8;
                o[2] = (w >> 16) as u8;
            }
        }
        _ => out[..codes.len()].copy_from_slice(codes),
    }
}

/// Unpack `out.len()` codes (a multiple of the unit) from `packed`.
#[inline(always)]
pub fn unpack(packed: &[u8], bits: u32, out: &mut [u8]) {
    match bits {
        4 => {
            for (pair, &p) in out.chunks_exact_mut(2).zip(packed) {
                pair[0] = p & 0xF;
                pair[1] = p >> 4;
            }
        }
        6 => {
            for (quad, b) in out.chunks_exact_mut(4).zip(packed.chunks_exact(3)) {
                let w = b[0] as u32 | (b[1] as u32) << 8 | (b[2] as u32) << 16;
                quad[0] = (w & 0x3F) as u8;
                quad[1] = ((w >> 6) & 0x3F) as u8;
                quad[2] = ((w >> 12) & 0x3F) as u8;
                quad[3] = ((w >> 18) & 0x3F) as u8;
            }
        }
        _ => out.copy_from_slice(&packed[..out.len()]),
    }
}

/// Codes per scratch chunk when packing (a multiple of every packing unit).
pub const CHUNK: usize = 1024;

/// Cast `src` element-wise to `E` codes, packed into `dst` (`packed_len(src.len())` bytes).
#[inline(always)]
pub fn cast_slice<E: Element, I: Input>(saturate: bool, src: &[I], dst: &mut [u8]) {
    let f = &E::F;
    let bits = f.bits();
    if pack_unit(bits).0 == 1 {
        for (d, &s) in dst.iter_mut().zip(src) {
            *d = encode(f, s.to_f32(), saturate);
        }
        return;
    }
    let mut scratch = [0u8; CHUNK];
    for (chunk, out) in src.chunks(CHUNK).zip(dst.chunks_mut(packed_len(CHUNK, bits))) {
        let codes = &mut scratch[..chunk.len()];
        for (c, &s) in codes.iter_mut().zip(chunk) {
            *c = encode(f, s.to_f32(), saturate);
        }
        pack(codes, bits, out);
    }
}

/// Decode packed `E` codes into `dst` (`dst.len()` values).
#[inline(always)]
pub fn decode_slice<E: Element>(src: &[u8], dst: &mut [f32]) {
    let f = &E::F;
    let bits = f.bits();
    if pack_unit(bits).0 == 1 {
        for (d, &c) in dst.iter_mut().zip(src) {
            *d = decode(f, c);
        }
        return;
    }
    let mut scratch = [0u8; CHUNK];
    for (out, packed) in dst.chunks_mut(CHUNK).zip(src.chunks(packed_len(CHUNK, bits))) {
        let codes = &mut scratch[..out.len()];
        unpack(packed, bits, codes);
        for (d, &c) in out.iter_mut().zip(codes.iter()) {
            *d = decode(f, c);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quant::minifloat::{E2m1, E2m3, E4m3fn};

    #[test]
    fn fp4_packs_element_2i_in_the_low_nibble() {
        let mut out = [0u8; 2];
        pack(&[0x1, 0x2, 0xF, 0x8], 4, &mut out);
        assert_eq!(out, [0x21, 0x8F]);
        let mut back = [0u8; 4];
        unpack(&out, 4, &mut back);
        assert_eq!(back, [0x1, 0x2, 0xF, 0x8]);
    }

    #[test]
    fn fp6_packs_four_codes_in_three_bytes_little_endian() {
        let codes = [0x01, 0x3F, 0x20, 0x15];
        let mut out = [0u8; 3];
        pack(&codes, 6, &mut out);
        let w = 0x01 | 0x3F << 6 | 0x20 << 12 | 0x15 << 18;
        assert_eq!(out, [w as u8, (w >> 8) as u8, (w >> 16) as u8]);
        let mut back = [0u8; 4];
        unpack(&out, 6, &mut back);
        assert_eq!(back, codes);
    }

    /// Slices longer than the scratch chunk, cast then decoded, equal the per-element codec.
    #[test]
    fn slice_kernels_agree_with_scalar_codec() {
        let xs: Vec<f32> = (0..CHUNK * 3 + 64).map(|i| (i as f32 - 1500.0) * 0.0137).collect();
        fn check<E: Element>(xs: &[f32]) {
            let f = E::F;
            let mut packed = vec![0u8; packed_len(xs.len(), f.bits())];
            cast_slice::<E, f32>(true, xs, &mut packed);
            let mut back = vec![0f32; xs.len()];
            decode_slice::<E>(&packed, &mut back);
            for (x, y) in xs.iter().zip(&back) {
                assert_eq!(y.to_bits(), decode(&f, encode(&f, *x, true)).to_bits(), "{} {x}", f.name);
            }
        }
        check::<E4m3fn>(&xs);
        check::<E2m3>(&xs);
        check::<E2m1>(&xs);
    }
}
