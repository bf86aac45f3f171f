//! Block-scaled quantisation: a tensor is viewed as `(outer, len, inner)` around its quantisation axis
//! (length `len`), and every run of `block` consecutive elements *along the axis* shares one scale. Blocks
//! therefore hold strided elements when the axis is not the last one (KIVI's per-channel keys: axis =
//! tokens). Scales are laid out as `(outer, len / block, inner)`, codes in the input's element order
//! (packed for sub-byte formats).
//!
//! A *block-row* — `block` consecutive positions along the axis for every `inner` index — is contiguous in
//! memory, owns `inner` scales, and is the unit of work: threads take contiguous ranges of block-rows, so
//! the output does not depend on the thread count.

use super::codec::{pack, pack_unit, packed_len, unpack, Input, CHUNK};
use super::simd::Isa;

/// The view of a tensor around its quantisation axis.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    /// Product of the dimensions before the axis.
    pub outer: usize,
    /// Length of the axis.
    pub len: usize,
    /// Product of the dimensions after the axis.
    pub inner: usize,
}

impl Layout {
    /// The layout of a C-contiguous tensor of `shape` around `axis`.
    pub fn around(shape: &[usize], axis: usize) -> Layout {
        Layout { outer: shape[..axis].iter().product(), len: shape[axis], inner: shape[axis + 1..].iter().product() }
    }

    /// Number of elements.
    pub fn elements(&self) -> usize {
        self.outer * self.len * self.inner
    }
}

/// A block-scaled scheme: how a block's statistics become its scale parameters, and how each element is
/// encoded and decoded with them. All functions are pure, so results do not depend on chunking.
pub trait BlockScheme: Sync {
    /// Running statistics of a block (e.g. the largest magnitude).
    type Stats: Copy + Send;
    /// Parameters derived once per block and used for every element.
    type Params: Copy + Send;
    /// What is stored per block (e.g. an E8M0 byte).
    type Stored: Copy + Send + Sync + Default;

    /// Bits of one element code.
    fn bits(&self) -> u32;
    fn empty(&self) -> Self::Stats;
    fn observe(&self, s: Self::Stats, x: f32) -> Self::Stats;
    fn params(&self, s: Self::Stats) -> Self::Params;
    fn store(&self, p: &Self::Params) -> Self::Stored;
    fn load(&self, s: Self::Stored) -> Self::Params;
    fn encode(&self, p: &Self::Params, x: f32) -> u8;
    fn decode(&self, p: &Self::Params, code: u8) -> f32;
}

/// Threads to use for `elements` values: `requested`, or all cores for inputs of ≥ 1 Mi elements.
pub fn thread_count(requested: Option<usize>, elements: usize) -> usize {
    requested
        .unwrap_or_else(|| {
            if elements >= 1 << 20 {
                std::thread::available_parallelism().map_or(1, |n| n.get())
            } else {
                1
            }
        })
        .max(1)
}

/// Split `units` into at most `threads` contiguous ranges and run `work(first_unit, count)` on each, with
/// the matching sub-slices of the outputs (`a_per` and `b_per` items per unit).
pub fn par_units<A: Send, B: Send>(
    units: usize,
    threads: usize,
    a: &mut [A],
    a_per: usize,
    b: &mut [B],
    b_per: usize,
    work: impl Fn(usize, usize, &mut [A], &mut [B]) + Sync,
) {
    let threads = threads.clamp(1, units.max(1));
    if threads == 1 {
        work(0, units, a, b);
        return;
    }
    let per = units.div_ceil(threads);
    std::thread::scope(|scope| {
        let (mut a, mut b) = (a, b);
        let mut start = 0;
        while start < units {
            let n = per.min(units - start);
            // The last unit may be short: clamp the split points to what is left.
            let a_rest = std::mem::take(&mut a);
            let (a_head, a_tail) = a_rest.split_at_mut((n * a_per).min(a_rest.len()));
            let b_rest = std::mem::take(&mut b);
            let (b_head, b_tail) = b_rest.split_at_mut((n * b_per).min(b_rest.len()));
            a = a_tail;
            b = b_tail;
            let work = &work;
            scope.spawn(move || work(start, n, a_head, b_head));
            start += n;
        }
    });
}

/// Quantise `src` (laid out as `layout`) with `block` elements per scale along the axis. `codes` receives
/// the packed codes, `stored` one entry per block. Sizes are validated by the caller.
#[allow(clippy::too_many_arguments)]
pub fn quantize<I: Input, S: BlockScheme>(
    scheme: &S,
    src: &[I],
    layout: Layout,
    block: usize,
    codes: &mut [u8],
    stored: &mut [S::Stored],
    threads: usize,
    isa: Isa,
) {
    let row = block * layout.inner;
    let units = layout.outer * (layout.len / block);
    let bits = scheme.bits();
    par_units(units, threads, codes, packed_len(row, bits), stored, layout.inner, |first, n, codes, stored| {
        let src = &src[first * row..(first + n) * row];
        crate::kernel!(isa, <I: Input, S: BlockScheme> {
            scheme: &'k S = scheme, src: &'k [I] = src, block: usize = block, inner: usize = layout.inner,
            codes: &'k mut [u8] = codes, stored: &'k mut [S::Stored] = stored,
        } -> () => if inner == 1 {
            // Common block sizes as constants: the per-block loops then compile to whole vectors.
            match block {
                16 => quantize_contiguous::<I, S, 16>(scheme, src, codes, stored),
                32 => quantize_contiguous::<I, S, 32>(scheme, src, codes, stored),
                64 => quantize_contiguous::<I, S, 64>(scheme, src, codes, stored),
                128 => quantize_contiguous::<I, S, 128>(scheme, src, codes, stored),
                _ => quantize_strided(scheme, src, block, 1, codes, stored),
            }
        } else {
            quantize_strided(scheme, src, block, inner, codes, stored)
        })
    });
}

/// Blocks of `B` consecutive elements (the axis is the last dimension).
#[inline(always)]
fn quantize_contiguous<I: Input, S: BlockScheme, const B: usize>(
    scheme: &S,
    src: &[I],
    codes: &mut [u8],
    stored: &mut [S::Stored],
) {
    let bits = scheme.bits();
    let unit = pack_unit(bits).0;
    // Process several whole blocks per scratch chunk so that packing runs on long slices.
    let per_chunk = (CHUNK / B).max(1);
    let mut scratch = vec![0u8; per_chunk * B];
    for ((blocks, out), st) in src
        .chunks(per_chunk * B)
        .zip(codes.chunks_mut(packed_len(per_chunk * B, bits)))
        .zip(stored.chunks_mut(per_chunk))
    {
        let scratch = &mut scratch[..blocks.len()];
        for ((xs, cs), s) in blocks.chunks_exact(B).zip(scratch.chunks_exact_mut(B)).zip(st.iter_mut()) {
            let xs: &[I; B] = xs.try_into().expect("chunks_exact(B) yields B values");
            let cs: &mut [u8; B] = cs.try_into().expect("chunks_exact_mut(B) yields B codes");
            let mut v = [0f32; B];
            for (d, &x) in v.iter_mut().zip(xs) {
                *d = x.to_f32();
            }
            let stats = v.iter().fold(scheme.empty(), |a, &x| scheme.observe(a, x));
            let p = scheme.params(stats);
            *s = scheme.store(&p);
            for (c, &x) in cs.iter_mut().zip(&v) {
                *c = scheme.encode(&p, x);
            }
        }
        if unit == 1 {
            out.copy_from_slice(scratch);
        } else {
            pack(scratch, bits, out);
        }
    }
}

/// Blocks of strided elements: per block-row, statistics for every inner index, then a pass per row.
#[inline(always)]
fn quantize_strided<I: Input, S: BlockScheme>(
    scheme: &S,
    src: &[I],
    block: usize,
    inner: usize,
    codes: &mut [u8],
    stored: &mut [S::Stored],
) {
    let bits = scheme.bits();
    let mut stats = vec![scheme.empty(); inner];
    let mut params: Vec<S::Params> = Vec::with_capacity(inner);
    // Codes of a whole block-row, packed at once (a row alone may hold less than a packing unit).
    let mut scratch = vec![0u8; block * inner];
    for ((rows, out), st) in src
        .chunks_exact(block * inner)
        .zip(codes.chunks_exact_mut(packed_len(block * inner, bits)))
        .zip(stored.chunks_exact_mut(inner))
    {
        stats.iter_mut().for_each(|s| *s = scheme.empty());
        for r in rows.chunks_exact(inner) {
            for (s, &x) in stats.iter_mut().zip(r) {
                *s = scheme.observe(*s, x.to_f32());
            }
        }
        params.clear();
        params.extend(stats.iter().map(|&s| scheme.params(s)));
        for (s, p) in st.iter_mut().zip(&params) {
            *s = scheme.store(p);
        }
        for (r, cr) in rows.chunks_exact(inner).zip(scratch.chunks_exact_mut(inner)) {
            for ((c, &x), p) in cr.iter_mut().zip(r).zip(&params) {
                *c = scheme.encode(p, x.to_f32());
            }
        }
        pack(&scratch, bits, out);
    }
}

/// Decode `codes` (with `stored` per block) into `out`.
#[allow(clippy::too_many_arguments)]
pub fn dequantize<S: BlockScheme>(
    scheme: &S,
    codes: &[u8],
    stored: &[S::Stored],
    layout: Layout,
    block: usize,
    out: &mut [f32],
    threads: usize,
    isa: Isa,
) {
    let row = block * layout.inner;
    let units = layout.outer * (layout.len / block);
    let bits = scheme.bits();
    let row_bytes = packed_len(row, bits);
    let mut none: [u8; 0] = [];
    par_units(units, threads, out, row, &mut none, 0, |first, n, out, _| {
        let codes = &codes[first * row_bytes..(first + n) * row_bytes];
        let stored = &stored[first * layout.inner..(first + n) * layout.inner];
        crate::kernel!(isa, <S: BlockScheme> {
            scheme: &'k S = scheme, codes: &'k [u8] = codes, stored: &'k [S::Stored] = stored,
            block: usize = block, inner: usize = layout.inner, out: &'k mut [f32] = out,
        } -> () => if inner == 1 {
            match block {
                16 => dequantize_contiguous::<S, 16>(scheme, codes, stored, out),
                32 => dequantize_contiguous::<S, 32>(scheme, codes, stored, out),
                64 => dequantize_contiguous::<S, 64>(scheme, codes, stored, out),
                128 => dequantize_contiguous::<S, 128>(scheme, codes, stored, out),
                _ => dequantize_rows(scheme, codes, stored, block, inner, out),
            }
        } else {
            dequantize_rows(scheme, codes, stored, block, inner, out)
        })
    });
}

/// Decode blocks of `B` consecutive elements, a scratch chunk of blocks at a time.
#[inline(always)]
fn dequantize_contiguous<S: BlockScheme, const B: usize>(
    scheme: &S,
    codes: &[u8],
    stored: &[S::Stored],
    out: &mut [f32],
) {
    let bits = scheme.bits();
    let per_chunk = (CHUNK / B).max(1);
    let mut scratch = vec![0u8; per_chunk * B];
    for ((vals, packed), st) in
        out.chunks_mut(per_chunk * B).zip(codes.chunks(packed_len(per_chunk * B, bits))).zip(stored.chunks(per_chunk))
    {
        let scratch = &mut scratch[..vals.len()];
        unpack(packed, bits, scratch);
        for ((vs, cs), &s) in vals.chunks_exact_mut(B).zip(scratch.chunks_exact(B)).zip(st) {
            let vs: &mut [f32; B] = vs.try_into().expect("chunks_exact_mut(B) yields B values");
            let cs: &[u8; B] = cs.try_into().expect("chunks_exact(B) yields B codes");
            let p = scheme.load(s);
            for (v, &c) in vs.iter_mut().zip(cs) {
                *v = scheme.decode(&p, c);
            }
        }
    }
}

#[inline(always)]
fn dequantize_rows<S: BlockScheme>(
    scheme: &S,
    codes: &[u8],
    stored: &[S::Stored],
    block: usize,
    inner: usize,
    out: &mut [f32],
) {
    let bits = scheme.bits();
    let mut scratch = vec![0u8; block * inner];
    let mut params: Vec<S::Params> = Vec::with_capacity(inner);
    for ((vals, packed), st) in out
        .chunks_exact_mut(block * inner)
        .zip(codes.chunks_exact(packed_len(block * inner, bits)))
        .zip(stored.chunks_exact(inner))
    {
        unpack(packed, bits, &mut scratch);
        params.clear();
        params.extend(st.iter().map(|&s| scheme.load(s)));
        if inner == 1 {
            let p = params[0];
            for (v, &c) in vals.iter_mut().zip(scratch.iter()) {
                *v = scheme.decode(&p, c);
            }
        } else {
            for (vr, cr) in vals.chunks_exact_mut(inner).zip(scratch.chunks_exact(inner)) {
                for ((v, &c), p) in vr.iter_mut().zip(cr).zip(&params) {
                    *v = scheme.decode(p, c);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A toy scheme: scale = block max, code = round(x / scale · 10).
    struct Toy;
    impl BlockScheme for Toy {
        type Stats = f32;
        type Params = f32;
        type Stored = f32;
        fn bits(&self) -> u32 {
            8
        }
        fn empty(&self) -> f32 {
            0.0
        }
        fn observe(&self, s: f32, x: f32) -> f32 {
            s.max(x.abs())
        }
        fn params(&self, s: f32) -> f32 {
            s.max(1.0)
        }
        fn store(&self, p: &f32) -> f32 {
            *p
        }
        fn load(&self, s: f32) -> f32 {
            s
        }
        fn encode(&self, p: &f32, x: f32) -> u8 {
            (x / p * 10.0).round() as u8
        }
        fn decode(&self, p: &f32, c: u8) -> f32 {
            c as f32 / 10.0 * p
        }
    }

    /// Blocks run along the axis, whatever its position; scales are (outer, len/block, inner).
    #[test]
    fn blocks_follow_the_axis() {
        // shape (2, 4, 3), axis 1, block 2: block (o, g, j) holds x[o, 2g..2g+2, j].
        let shape = [2, 4, 3];
        let x: Vec<f32> = (0..24).map(|i| i as f32).collect();
        let l = Layout::around(&shape, 1);
        assert_eq!(l, Layout { outer: 2, len: 4, inner: 3 });
        let mut codes = vec![0u8; 24];
        let mut scales = vec![0f32; 12];
        quantize(&Toy, &x, l, 2, &mut codes, &mut scales, 1, Isa::Baseline);
        let want: Vec<f32> = (0..2)
            .flat_map(|o| (0..2).flat_map(move |g| (0..3).map(move |j| ((o * 4 + 2 * g + 1) * 3 + j) as f32)))
            .map(|m: f32| m.max(1.0))
            .collect();
        assert_eq!(scales, want);
        let mut back = vec![0f32; 24];
        dequantize(&Toy, &codes, &scales, l, 2, &mut back, 1, Isa::Baseline);
        for (i, (a, b)) in x.iter().zip(&back).enumerate() {
            assert!((a - b).abs() <= 0.05 * want[(i / 6) * 3 + i % 3] + 1e-6, "{i}: {a} {b}");
        }
    }

    /// Groups that are not one of the specialised sizes, along the last axis, with packed 4-bit codes
    /// (a block-row of one value per row must still pack whole bytes).
    #[test]
    fn odd_group_sizes_pack_whole_block_rows() {
        struct Nib;
        impl BlockScheme for Nib {
            type Stats = ();
            type Params = ();
            type Stored = u8;
            fn bits(&self) -> u32 {
                4
            }
            fn empty(&self) {}
            fn observe(&self, _: (), _: f32) {}
            fn params(&self, _: ()) {}
            fn store(&self, _: &()) -> u8 {
                0
            }
            fn load(&self, _: u8) {}
            fn encode(&self, _: &(), x: f32) -> u8 {
                x as u8 & 0xF
            }
            fn decode(&self, _: &(), c: u8) -> f32 {
                c as f32
            }
        }
        for block in [8usize, 48, 96] {
            let x: Vec<f32> = (0..4 * 96).map(|i| (i % 16) as f32).collect();
            let l = Layout::around(&[4, 96], 1);
            let mut codes = vec![0u8; x.len() / 2];
            let mut st = vec![0u8; x.len() / block];
            quantize(&Nib, &x, l, block, &mut codes, &mut st, 1, Isa::Baseline);
            let mut back = vec![0f32; x.len()];
            dequantize(&Nib, &codes, &st, l, block, &mut back, 1, Isa::Baseline);
            assert_eq!(back, x, "block {block}");
        }
    }

    /// Any thread count gives the same output.
    #[test]
    fn threads_do_not_change_the_output() {
        let x: Vec<f32> = (0..4096).map(|i| ((i * 7919) % 1000) as f32 - 500.0).collect();
        for shape in [[8usize, 512], [64, 64], [512, 8]] {
            for axis in [0, 1] {
                let l = Layout::around(&shape, axis);
                let block = 8;
                let run = |threads| {
                    let mut codes = vec![0u8; 4096];
                    let mut scales = vec![0f32; 4096 / block];
                    quantize(&Toy, &x, l, block, &mut codes, &mut scales, threads, Isa::Baseline);
                    (codes, scales)
                };
                let one = run(1);
                for t in [2, 3, 7] {
                    assert_eq!(run(t), one, "{shape:?} axis {axis} threads {t}");
                }
            }
        }
    }
}
