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
    walk_rows(dims, src_base, dst_base, &mut |mut s, mut t, row| {
        for _ in 0..row.n {
            f(s, t);
            s += row.src;
            t += row.dst;
        }
    });
}

/// As [`walk`], but the innermost dimension is handed over whole: `f(src_offset, dst_offset, inner)` once
/// per row of `inner.n` runs (a dimension of 1 with no dimensions), so that a row's bounds are checked once
/// and its runs copied in one loop.
#[inline]
pub fn walk_rows(dims: &[Dim], src_base: usize, dst_base: usize, f: &mut impl FnMut(usize, usize, Dim)) {
    match dims {
        [] => f(src_base, dst_base, Dim { n: 1, src: 0, dst: 0 }),
        [d] => f(src_base, dst_base, *d),
        [outer, rest @ ..] => {
            let (mut s, mut t) = (src_base, dst_base);
            for _ in 0..outer.n {
                walk_rows(rest, s, t, f);
                s += outer.src;
                t += outer.dst;
            }
        }
    }
}

/// Copy a row: `row.n` runs of `run` bytes, run i from `src + i·row.src` to `dst + i·row.dst`; with `stream`,
/// as [`copy_run`] (non-temporal stores where aligned), otherwise plain copies, a line at a time inline
/// where the run is whole lines. After streaming, the caller must issue [`stream_fence`] before another
/// thread reads. (64-byte non-temporal stores measured no faster than 16-byte ones here.)
///
/// # Safety
/// Every run must lie inside valid memory on both sides, and no source run may overlap a destination run.
#[inline]
pub unsafe fn copy_row(src: *const u8, dst: *mut u8, row: Dim, run: usize, stream: bool) {
    if run % 64 == 0 && !stream {
        for i in 0..row.n {
            // SAFETY: guaranteed by the caller.
            unsafe { copy_lines(src.add(i * row.src), dst.add(i * row.dst), run) };
        }
        return;
    }
    for i in 0..row.n {
        // SAFETY: guaranteed by the caller.
        unsafe { copy_run(src.add(i * row.src), dst.add(i * row.dst), run, stream) };
    }
}

/// `n` bytes (a multiple of 64) as 64-byte moves the compiler keeps inline (a `memcpy` call of a size known
/// only at run time costs more than a short run's bytes).
///
/// # Safety
/// As [`copy_run`].
#[inline(always)]
unsafe fn copy_lines(src: *const u8, dst: *mut u8, n: usize) {
    let mut i = 0;
    while i < n {
        // SAFETY: guaranteed by the caller; unaligned reads and writes of plain bytes.
        unsafe { dst.add(i).cast::<[u8; 64]>().write_unaligned(src.add(i).cast::<[u8; 64]>().read_unaligned()) };
        i += 64;
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

    /// The innermost dimension folds into the run only when it is unit-stride on both sides: a gather of
    /// elements (unit source stride, strided destination) keeps one-element runs.
    #[test]
    fn an_innermost_dimension_strided_on_one_side_stays_a_dimension() {
        let dims = vec![Dim { n: 4, src: 2, dst: 16 }];
        assert_eq!(plan(dims.clone(), 2), (dims, 2));
        let dims = vec![Dim { n: 4, src: 16, dst: 2 }];
        assert_eq!(plan(dims.clone(), 2), (dims, 2));
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

    /// A row copy equals run-by-run byte copies for every path: streamed aligned runs, streamed unaligned
    /// or odd runs (plain copies), plain whole lines and plain odd runs — and leaves every other
    /// destination byte alone.
    #[test]
    fn row_copies_equal_naive_copies_on_every_path() {
        let src: Vec<u8> = (0..1 << 16).map(|i: u32| (i.wrapping_mul(2654435761) >> 13) as u8).collect();
        // 64-byte aligned destination storage.
        let mut store = vec![0u64; (1 << 17) / 8];
        let cases = [
            (Dim { n: 5, src: 1024, dst: 512 }, 256, 0),
            (Dim { n: 3, src: 700, dst: 320 }, 64, 16),
            (Dim { n: 4, src: 96, dst: 48 }, 48, 0),
            (Dim { n: 7, src: 130, dst: 100 }, 67, 3),
            (Dim { n: 1, src: 0, dst: 0 }, 128, 0),
        ];
        for (row, run, off) in cases {
            for stream in [false, true] {
                store.fill(0);
                let dst = store.as_mut_ptr().cast::<u8>();
                // SAFETY: every run lies inside `src` and inside the 128 KiB store; distinct allocations.
                unsafe { copy_row(src.as_ptr().add(11), dst.add(off), row, run, stream) };
                stream_fence();
                let mut want = vec![0u8; 1 << 17];
                for i in 0..row.n {
                    let (a, b) = (11 + i * row.src, off + i * row.dst);
                    want[b..b + run].copy_from_slice(&src[a..a + run]);
                }
                // SAFETY: the store is 128 KiB of initialised memory.
                let got = unsafe { std::slice::from_raw_parts(dst, 1 << 17) };
                assert!(got == &want[..], "{row:?} run {run} off {off} stream {stream}");
            }
        }
    }

    #[test]
    fn walk_rows_hands_over_the_innermost_dimension() {
        let dims = [Dim { n: 2, src: 1, dst: 3 }, Dim { n: 3, src: 2, dst: 1 }];
        let mut rows = Vec::new();
        walk_rows(&dims, 100, 0, &mut |s, t, r| rows.push((s, t, r)));
        assert_eq!(rows, vec![(100, 0, dims[1]), (101, 3, dims[1])]);
        let mut one = Vec::new();
        walk_rows(&[], 7, 9, &mut |s, t, r| one.push((s, t, r)));
        assert_eq!(one, vec![(7, 9, Dim { n: 1, src: 0, dst: 0 })]);
    }

    #[test]
    fn walk_visits_every_point_once_in_destination_order() {
        let dims = [Dim { n: 2, src: 1, dst: 3 }, Dim { n: 3, src: 2, dst: 1 }];
        let mut seen = Vec::new();
        walk(&dims, 100, 0, &mut |s, t| seen.push((s, t)));
        assert_eq!(seen, vec![(100, 0), (102, 1), (104, 2), (101, 3), (103, 4), (105, 5)]);
    }
}
