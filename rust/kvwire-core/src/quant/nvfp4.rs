//! NVFP4 blocks along the last axis, fused: the block statistics, the E4M3 block scales and the packed E2M1
//! codes come out of one walk over the input, a chunk of [`CHUNK_BLOCKS`] blocks at a time, each step a loop
//! the compiler vectorises — the block maxima, the scales of the chunk's blocks side by side (the scale's
//! E4M3 rounding runs as vector code across blocks rather than once per block), then every element's code.
//!
//! The generic path ([`super::block::quantize`] with [`Nvfp4`]) stays for blocks of strided elements and is
//! the oracle: the tests require identical codes and scales on random tensors and special values.
//!
//! E2M1 rounding in three affine pieces: the eight magnitudes {0, 0.5, 1, 1.5, 2, 3, 4, 6} are evenly
//! spaced by 1/2 on [0, 2], by 1 on [2, 4] and by 2 on [4, 8] (8 standing for the saturation), so the code
//! of |y| is RNE(2|y|), 4 + RNE(|y| − 2) or 6 + RNE((|y| − 4)/2) on those pieces (ties go to even codes
//! since the pieces start on even codes), each computed as one `f32` addition to 2^23 of an exact product —
//! whose single rounding is that RNE — then capped at 7. The sign bit is y's. This equals one
//! round-to-nearest-even step of [`super::minifloat::encode`] with saturation for every non-NaN `f32`
//! (tested on every midpoint's neighbours and a stride of all bit patterns); NaN cannot reach it — a
//! block holding NaN or ±Inf has the NaN scale and all codes 0x7.

use super::block::{par_units, BlockScheme};
use super::codec::Input;
use super::schemes::Nvfp4;
use super::simd::{prefetch, Isa};

/// Blocks per chunk: 1024 values, 4 KiB of `f32`, stay in L1 between the steps.
pub const CHUNK_BLOCKS: usize = 64;

const B: usize = Nvfp4::BLOCK;

/// The E2M1 code of `y` (round to nearest even, saturating), for any `y` that is not NaN.
#[inline(always)]
pub fn e2m1_code(y: f32) -> u8 {
    // The magnitudes step by 1/2 up to 2, by 1 up to 4 and by 2 up to 8 (6, and the saturation): map |y|
    // onto code units with the exact products 2|y|, |y| and |y|/2 plus 0, 2 or 4 (so that 2, 4 and 8 land
    // on codes 4, 6 and 8), shifted by 2^23 so that the one rounding of the addition is the
    // round-to-nearest-even (ties: M is even).
    const M: f32 = 8_388_608.0;
    let a = y.abs().min(8.0);
    let (mul, add) = if a > 4.0 {
        (0.5, M + 4.0)
    } else if a > 2.0 {
        (1.0, M + 2.0)
    } else {
        (2.0, M)
    };
    let m = ((a * mul + add).to_bits() - M.to_bits()).min(7) as u8;
    ((y.to_bits() >> 28) as u8 & 0x8) | m
}

/// Quantise `src` (a whole number of 16-value blocks along the last axis) with tensor scale `scheme.global`:
/// `codes` gets 8 bytes a block, `scales` one E4M3 byte a block. Output does not depend on `threads`.
pub fn quantize_rows<I: Input>(
    scheme: &Nvfp4,
    src: &[I],
    codes: &mut [u8],
    scales: &mut [u8],
    threads: usize,
    isa: Isa,
) {
    let blocks = src.len() / B;
    par_units(blocks, threads, codes, B / 2, scales, 1, |first, n, codes, scales| {
        let src = &src[first * B..(first + n) * B];
        crate::kernel!(isa, <I: Input> {
            scheme: &'k Nvfp4 = scheme, src: &'k [I] = src, codes: &'k mut [u8] = codes, scales: &'k mut [u8] = scales,
        } -> () => rows(scheme, src, codes, scales))
    });
}

/// `out[i] = max(a[2i], a[2i+1])`: one level of the block maxima (adjacent pairs stay within a block, and a
/// stride-2 pattern vectorises as loads and shuffles, where a per-block reduction would run across lanes).
#[inline(always)]
fn halve(a: &[u32], out: &mut [u32]) {
    for (o, p) in out.iter_mut().zip(a.chunks_exact(2)) {
        *o = p[0].max(p[1]);
    }
}

#[inline(always)]
fn rows<I: Input>(scheme: &Nvfp4, src: &[I], codes: &mut [u8], scales: &mut [u8]) {
    const CHUNK: usize = CHUNK_BLOCKS * B;
    let mut half = [0u32; CHUNK / 2];
    let mut quarter = [0u32; CHUNK / 4];
    let mut amax = [0u32; CHUNK_BLOCKS];
    let mut sg = [0f32; CHUNK_BLOCKS];
    for (c, ((xs, out), st)) in
        src.chunks(CHUNK).zip(codes.chunks_mut(CHUNK / 2)).zip(scales.chunks_mut(CHUNK_BLOCKS)).enumerate()
    {
        let k = st.len();
        // A chunk further on, asked for a block at a time in the loop that codes this one (the hardware
        // prefetcher stops at page boundaries; a burst of requests would fill the line buffers). A prefetch
        // never faults, so the addresses need no bounds: `wrapping_add` may point past the end.
        let ahead = src.as_ptr().wrapping_add((c + 4) * CHUNK);
        // Each block's largest magnitude as f32 bits (NaN patterns sort above Inf: one max finds both), in
        // four halvings 16 → 8 → 4 → 2 → 1.
        for (o, p) in half[..k * B / 2].iter_mut().zip(xs.chunks_exact(2)) {
            *o = (p[0].to_f32().to_bits() & 0x7FFF_FFFF).max(p[1].to_f32().to_bits() & 0x7FFF_FFFF);
        }
        halve(&half[..k * B / 2], &mut quarter[..k * B / 4]);
        halve(&quarter[..k * B / 4], &mut half[..k * B / 8]);
        halve(&half[..k * B / 8], &mut amax[..k]);
        // The chunk's scales side by side: the scheme's own rule, element-wise over the blocks.
        for ((s, g), &m) in st.iter_mut().zip(sg[..k].iter_mut()).zip(&amax[..k]) {
            let (byte, scale) = scheme.scale_of(scheme.params(m));
            *s = byte;
            *g = scale;
        }
        let xs = &xs[..k * B];
        let out = &mut out[..k * B / 2];
        for (j, &g) in sg[..k].iter().enumerate() {
            prefetch(ahead.wrapping_add(j * B));
            let blk: &[I; B] = xs[j * B..(j + 1) * B].try_into().expect("a block is B values");
            let mut c = [0u8; B];
            for (c, x) in c.iter_mut().zip(blk) {
                *c = e2m1_code(x.to_f32() / g);
            }
            let pairs: &mut [u8; B / 2] =
                (&mut out[j * B / 2..(j + 1) * B / 2]).try_into().expect("a block is B/2 bytes");
            for (p, two) in pairs.iter_mut().zip(c.chunks_exact(2)) {
                *p = two[0] | (two[1] << 4);
            }
        }
        // Blocks holding NaN or ±Inf (rare): all codes 0x7.
        for (pairs, &s) in out.chunks_exact_mut(B / 2).zip(st.iter()) {
            if s == Nvfp4::NAN_SCALE {
                pairs.fill(0x77);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::block::{quantize, Layout};
    use super::super::codec::Bf16;
    use super::super::minifloat::{encode, E2M1};
    use super::super::simd::available;
    use super::*;

    /// The comparison form equals the minifloat encoder's RNE with saturation: every midpoint and its
    /// neighbours (±4 ulps, both signs), zeros, subnormals, ±Inf and a stride through all bit patterns.
    #[test]
    fn comparisons_round_like_the_encoder() {
        let mut ys = vec![0.0f32, -0.0, f32::INFINITY, f32::NEG_INFINITY, f32::MIN_POSITIVE, 1e-45, f32::MAX];
        for t in [0.25f32, 0.5, 0.75, 1.0, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 5.0, 6.0, 7.0] {
            for d in -4i32..=4 {
                let y = f32::from_bits((t.to_bits() as i32 + d) as u32);
                ys.extend([y, -y]);
            }
        }
        for bits in (0..=u32::MAX).step_by(4099) {
            let y = f32::from_bits(bits);
            if !y.is_nan() {
                ys.push(y);
            }
        }
        for y in ys {
            assert_eq!(e2m1_code(y), encode(&E2M1, y, true), "{y:e} ({:#010x})", y.to_bits());
        }
    }

    fn generic(scheme: &Nvfp4, x: &[f32]) -> (Vec<u8>, Vec<u8>) {
        let mut codes = vec![0u8; x.len() / 2];
        let mut scales = vec![0u8; x.len() / B];
        quantize(scheme, x, Layout::around(&[x.len() / 64, 64], 1), B, &mut codes, &mut scales, 1, Isa::Baseline);
        (codes, scales)
    }

    fn fused<I: Input>(scheme: &Nvfp4, x: &[I], threads: usize, isa: Isa) -> (Vec<u8>, Vec<u8>) {
        let mut codes = vec![0u8; x.len() / 2];
        let mut scales = vec![0u8; x.len() / B];
        quantize_rows(scheme, x, &mut codes, &mut scales, threads, isa);
        (codes, scales)
    }

    /// A xorshift stream of values over many binades, with zeros, subnormals, ties and non-finite values.
    fn values(n: usize, seed: u64) -> Vec<f32> {
        let mut s = seed | 1;
        (0..n)
            .map(|i| {
                s ^= s << 13;
                s ^= s >> 7;
                s ^= s << 17;
                match s % 97 {
                    0 => f32::NAN,
                    1 => f32::INFINITY,
                    2 => -0.0,
                    3 => f32::from_bits((s >> 40) as u32 & 0x007F_FFFF),
                    4 => 0.75 * (1 + i % 3) as f32,
                    _ => {
                        let m = (s >> 11) as f64 / (1u64 << 53) as f64 - 0.5;
                        (m * 2f64.powi((s >> 5) as i32 % 40 - 20)) as f32
                    }
                }
            })
            .collect()
    }

    /// Fused = generic, bit for bit, at every instruction-set level and thread count, with chunks that
    /// end short (a block count that is not a multiple of [`CHUNK_BLOCKS`]); tensor scales from the data,
    /// one of 1 (tiny tensors) and a huge one that clamps block scales at 2⁻⁶.
    #[test]
    fn fused_equals_the_generic_blocks() {
        for (seed, n) in [(1u64, 64 * 37), (2, 64 * 64 * 3), (3, 64)] {
            let x = values(n, seed);
            let amax = x.iter().filter(|v| v.is_finite()).fold(0f32, |a, v| a.max(v.abs()));
            for global in [Nvfp4::global_from_amax(amax), 1.0, 1e30] {
                let scheme = Nvfp4 { global };
                let want = generic(&scheme, &x);
                for isa in available() {
                    for threads in [1, 3] {
                        assert_eq!(
                            fused(&scheme, &x, threads, isa),
                            want,
                            "seed {seed} g {global} {isa:?} t {threads}"
                        );
                    }
                }
            }
        }
    }

    /// bfloat16 inputs widen exactly: the fused codes of bf16 values equal those of the same values as f32.
    #[test]
    fn bf16_inputs_match_their_f32_values() {
        let x: Vec<Bf16> = values(64 * 10, 9).into_iter().map(|v| Bf16((v.to_bits() >> 16) as u16)).collect();
        let wide: Vec<f32> = x.iter().map(|b| b.to_f32()).collect();
        let scheme = Nvfp4 { global: 0.01 };
        assert_eq!(fused(&scheme, &x, 1, Isa::Baseline), generic(&scheme, &wide));
    }
}
