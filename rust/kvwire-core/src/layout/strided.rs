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
    fn walk_visits_every_point_once_in_destination_order() {
        let dims = [Dim { n: 2, src: 1, dst: 3 }, Dim { n: 3, src: 2, dst: 1 }];
        let mut seen = Vec::new();
        walk(&dims, 100, 0, &mut |s, t| seen.push((s, t)));
        assert_eq!(seen, vec![(100, 0), (102, 1), (104, 2), (101, 3), (103, 4), (105, 5)]);
    }
}
