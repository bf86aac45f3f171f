//! The copy mechanism under every conversion: walk a small n-dimensional index space in which each dimension
//! has a byte stride in the source and one in the destination, and hand each innermost contiguous run to a
//! callback. Dimensions are visited in destination order (writes stream) and merged where both sides are
//! contiguous across them, so a permutation of head vectors moves runs of hundreds of bytes, not elements.

/// One dimension of the walk.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Dim {
    pub n: usize,
    /// Byte stride in the source.
    pub src: usize,
    /// Byte stride in the destination.
    pub dst: usize,
}

/// At most this many dimensions after merging (the layouts need 6).
pub const MAX_DIMS: usize = 8;

/// Sort `dims` outermost-first by destination stride, drop unit dimensions and merge neighbours that are
/// contiguous on both sides. If the innermost dimension has stride `unit` on both sides, it is returned
/// folded into the run length (bytes); otherwise the run is one `unit`.
pub fn plan(mut dims: Vec<Dim>, unit: usize) -> (Vec<Dim>, usize) {
    dims.retain(|d| d.n != 1);
    // Stable: equal destination strides (only for size-1 dims, already dropped) keep their order.
    dims.sort_by(|a, b| b.dst.cmp(&a.dst).then(b.src.cmp(&a.src)));
    let mut merged: Vec<Dim> = Vec::with_capacity(dims.len());
    for d in dims {
        match merged.last_mut() {
            Some(outer) if outer.src == d.src * d.n && outer.dst == d.dst * d.n => {
                *outer = Dim { n: outer.n * d.n, src: d.src, dst: d.dst };
            }
            _ => merged.push(d),
        }
    }
    let mut run = unit;
    if let Some(last) = merged.last() {
        if last.src == unit && last.dst == unit {
            run = unit * last.n;
            merged.pop();
        }
    }
    (merged, run)
}

/// Call `f(src_offset, dst_offset)` for every point of `dims` (outermost first), starting at the bases.
#[inline]
pub fn walk(dims: &[Dim], src_base: usize, dst_base: usize, f: &mut impl FnMut(usize, usize)) {
    match dims {
        [] => f(src_base, dst_base),
        [d] => {
            let (mut s, mut t) = (src_base, dst_base);
            for _ in 0..d.n {
                f(s, t);
                s += d.src;
                t += d.dst;
            }
        }
        [outer, rest @ ..] => {
            let (mut s, mut t) = (src_base, dst_base);
            for _ in 0..outer.n {
                walk(rest, s, t, f);
                s += outer.src;
                t += outer.dst;
            }
        }
    }
}

/// Destination bytes from which copies bypass the cache (non-temporal stores): a conversion this large
/// does not fit in cache anyway, and streaming stores save the read-for-ownership of every destination
/// line (a third of the memory traffic of a copy).
pub const STREAM_MIN_BYTES: usize = 8 << 20;

/// Copy `n` bytes from `src` to `dst`; with `stream`, through non-temporal stores where `dst` is 16-byte
/// aligned and `n` a multiple of 16 (x86-64; elsewhere and otherwise a plain copy). After streaming, the
/// caller must issue [`stream_fence`] before the data is read by another thread.
///
/// # Safety
/// `src` and `dst` must be valid for `n` bytes and must not overlap.
#[inline]
pub unsafe fn copy_run(src: *const u8, dst: *mut u8, n: usize, stream: bool) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{__m128i, _mm_loadu_si128, _mm_stream_si128};
        if stream && n % 16 == 0 && (dst as usize) % 16 == 0 {
            let mut i = 0;
            while i < n {
                // SAFETY: SSE2 is part of x86-64; in bounds and aligned as checked above.
                unsafe {
                    let v = _mm_loadu_si128(src.add(i) as *const __m128i);
                    _mm_stream_si128(dst.add(i) as *mut __m128i, v);
                }
                i += 16;
            }
            return;
        }
    }
    let _ = stream;
    // SAFETY: guaranteed by the caller.
    unsafe { std::ptr::copy_nonoverlapping(src, dst, n) };
}

/// Order the non-temporal stores of [`copy_run`] before whatever follows.
#[inline]
pub fn stream_fence() {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: SSE is part of x86-64.
    unsafe {
        std::arch::x86_64::_mm_sfence()
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_transpose_of_vectors_keeps_the_vector_as_the_run() {
        // NHD (4 slots, 2 heads, 8 bytes) → HND.
        let dims = vec![Dim { n: 4, src: 16, dst: 8 }, Dim { n: 2, src: 8, dst: 32 }, Dim { n: 8, src: 1, dst: 1 }];
        let (d, run) = plan(dims, 1);
        assert_eq!(run, 8);
        assert_eq!(d, vec![Dim { n: 2, src: 8, dst: 32 }, Dim { n: 4, src: 16, dst: 8 }]);
    }

    #[test]
    fn identical_layouts_merge_into_one_run() {
        let dims = vec![Dim { n: 3, src: 64, dst: 64 }, Dim { n: 4, src: 16, dst: 16 }, Dim { n: 8, src: 2, dst: 2 }];
        assert_eq!(plan(dims, 2), (vec![], 3 * 64));
    }

    #[test]
    fn streamed_and_plain_copies_agree() {
        let src: Vec<u8> = (0..1024u32).map(|i| (i * 7 % 256) as u8).collect();
        for (off, n) in [(0, 512), (16, 256), (3, 100), (0, 8)] {
            let mut a = vec![0u8; 1100];
            let mut b = vec![0u8; 1100];
            // SAFETY: both buffers hold off + n bytes; distinct allocations.
            unsafe {
                copy_run(src.as_ptr(), a.as_mut_ptr().add(off), n, true);
                copy_run(src.as_ptr(), b.as_mut_ptr().add(off), n, false);
            }
            stream_fence();
            assert_eq!(a, b);
            assert_eq!(&a[off..off + n], &src[..n]);
        }
    }

    #[test]
    fn walk_visits_every_point_once_in_destination_order() {
        let dims = [Dim { n: 2, src: 1, dst: 3 }, Dim { n: 3, src: 2, dst: 1 }];
        let mut seen = Vec::new();
        walk(&dims, 100, 0, &mut |s, t| seen.push((s, t)));
        assert_eq!(seen, vec![(100, 0), (102, 1), (104, 2), (101, 3), (103, 4), (105, 5)]);
    }
}
