//! Convert one request's KV from a layout A to a layout B: gather through A's block table or slot mapping,
//! scatter through B's, change block size, slice or merge heads (tensor-parallel resharding) and quantise or
//! dequantise on the way. Everything is validated first; the copy then runs on raw byte offsets that the
//! validation proved in range, split by token chunks across threads (the output does not depend on the
//! thread count: every destination byte is written by exactly one chunk).

use super::catalog::Axis;
use super::descriptor::{Layout, Strides};
use super::dtype::Codec;
use super::strided::{copy_row, plan, stream_fence, walk, walk_rows, Dim, STREAM_MIN_BYTES};
use crate::error::{Error, Result};

/// How a side addresses its tokens.
#[derive(Clone, Copy, Debug)]
pub enum Tokens<'a> {
    /// Contiguous layouts: token t is row t. Paged layouts: logical block j is physical block j.
    InOrder,
    /// `table[j]` is the physical block holding tokens `j·block_size ..`.
    BlockTable(&'a [i32]),
    /// `slots[i]` is `block·block_size + offset` of the i-th entry; −1 marks padding, which is skipped.
    SlotMapping(&'a [i64]),
}

/// One side of a conversion.
pub struct Side<'a, B> {
    pub layout: &'a Layout,
    /// One byte buffer per plane (`layout.planes()`).
    pub planes: Vec<B>,
    pub tokens: Tokens<'a>,
    /// The heads this side reads or writes, `start..stop` (default: all).
    pub heads: Option<(usize, usize)>,
}

/// Options of a conversion.
#[derive(Clone, Debug, Default)]
pub struct ConvertOptions<'a> {
    /// Tokens to convert; default: every token the source addresses (required with a source block table).
    pub tokens: Option<usize>,
    /// fp8 per-tensor scales, indexed `layer · components + kv` (`k_scale`/`v_scale`); empty = 1.0.
    pub scales: &'a [f32],
    pub threads: Option<usize>,
}

fn lerr(path: &str, reason: impl Into<String>) -> Error {
    Error::Layout { path: path.into(), reason: reason.into() }
}

/// A validated side: per-plane strides and the byte offset of every token.
struct Resolved {
    strides: Vec<Strides>,
    /// Each converted token's (physical block, slot) — or (row, 0) for contiguous layouts.
    token_at: TokenAt,
    head0: usize,
    planar: bool,
}

/// Where the converted tokens are, without a table entry per token where a rule gives it (a table of
/// 16-byte entries per token was megabytes of fresh pages per call for a large cache).
enum TokenAt {
    /// Token t at (t / bs, t % bs), for t < n.
    InOrder { n: usize, bs: usize },
    /// Token t in block `blocks[t / bs]` at slot t % bs, for t < n.
    Blocks { n: usize, bs: usize, blocks: Vec<usize> },
    /// One (block, slot) per token.
    Slots(Vec<(usize, usize)>),
}

impl TokenAt {
    fn len(&self) -> usize {
        match self {
            TokenAt::InOrder { n, .. } | TokenAt::Blocks { n, .. } => *n,
            TokenAt::Slots(v) => v.len(),
        }
    }

    fn at(&self, t: usize) -> (usize, usize) {
        match self {
            TokenAt::InOrder { bs, .. } => (t / bs, t % bs),
            TokenAt::Blocks { bs, blocks, .. } => (blocks[t / bs], t % bs),
            TokenAt::Slots(v) => v[t],
        }
    }
}

/// Validate one side. `name` prefixes its tables and heads (`src_block_table`, `dst_heads`), `buffers` names
/// its buffers (`src`, `out`: the destination is the output the caller passes).
fn resolve<B: AsRef<[u8]>>(
    name: &str,
    buffers: &str,
    side: &Side<B>,
    wanted: Option<usize>,
    write: bool,
) -> Result<Resolved> {
    let l = side.layout;
    if side.planes.len() != l.planes() {
        let what = if l.planes() == 2 { "2 buffers (K, V)" } else { "1 buffer" };
        return Err(lerr(buffers, format!("layout {} takes {what}, got {}", l.def.name, side.planes.len())));
    }
    let per = l.plane_bytes_per_count(0);
    let count = side.planes[0].as_ref().len() / per;
    for (p, b) in side.planes.iter().enumerate() {
        let len = b.as_ref().len();
        let per = l.plane_bytes_per_count(p);
        if len == 0 || len % per != 0 || len / per != count {
            let unit = if l.def.paged() { "block" } else { "token" };
            return Err(lerr(
                &format!("{buffers}[{p}]"),
                format!(
                    "{len} bytes is not a whole number of {unit}s of layout {} ({per} bytes per {unit}{})",
                    l.def.name,
                    if p > 0 { format!(", and the same count as buffer 0: {count}") } else { String::new() }
                ),
            ));
        }
    }
    let bs = l.tokens_per_count();
    let strides: Vec<Strides> = (0..l.planes()).map(|p| l.strides(p, count)).collect();
    let token_at = match side.tokens {
        Tokens::InOrder => {
            let n = wanted.unwrap_or(count * bs);
            if n > count * bs {
                // Too many for the source: the token count is wrong; for the destination: the output is small.
                let path = if write { buffers } else { "tokens" };
                return Err(lerr(path, format!("{n} tokens do not fit in {buffers}'s {count}·{bs} slots")));
            }
            TokenAt::InOrder { n, bs }
        }
        Tokens::BlockTable(table) => {
            if !l.def.paged() {
                return Err(lerr(&format!("{name}_block_table"), format!("layout {} is not paged", l.def.name)));
            }
            let Some(n) = wanted else {
                return Err(lerr("tokens", "give the number of tokens with a source block table"));
            };
            let needed = n.div_ceil(bs);
            if table.len() < needed {
                return Err(lerr(
                    &format!("{name}_block_table"),
                    format!("{n} tokens need {needed} blocks of {bs}, the table has {}", table.len()),
                ));
            }
            let mut seen = vec![false; if write { count } else { 0 }];
            for (j, &b) in table[..needed].iter().enumerate() {
                if b < 0 || b as usize >= count {
                    return Err(lerr(
                        &format!("{name}_block_table[{j}]"),
                        format!("block {b} is outside the cache's {count} blocks"),
                    ));
                }
                if write {
                    if seen[b as usize] {
                        return Err(lerr(
                            &format!("{name}_block_table[{j}]"),
                            format!("block {b} appears twice: destination blocks must be distinct"),
                        ));
                    }
                    seen[b as usize] = true;
                }
            }
            TokenAt::Blocks { n, bs, blocks: table[..needed].iter().map(|&b| b as usize).collect() }
        }
        Tokens::SlotMapping(slots) => {
            if !l.def.paged() {
                return Err(lerr(&format!("{name}_slot_mapping"), format!("layout {} is not paged", l.def.name)));
            }
            let mut seen = vec![false; if write { count * bs } else { 0 }];
            let mut out = Vec::with_capacity(slots.len());
            for (i, &s) in slots.iter().enumerate() {
                if s == -1 {
                    continue;
                }
                if s < 0 || s as usize >= count * bs {
                    return Err(lerr(
                        &format!("{name}_slot_mapping[{i}]"),
                        format!("slot {s} is outside the cache's {count}·{bs} slots (−1 marks padding)"),
                    ));
                }
                let s = s as usize;
                if write {
                    if seen[s] {
                        return Err(lerr(
                            &format!("{name}_slot_mapping[{i}]"),
                            format!("slot {s} appears twice: destination slots must be distinct"),
                        ));
                    }
                    seen[s] = true;
                }
                out.push((s / bs, s % bs));
            }
            if let Some(n) = wanted {
                if n != out.len() {
                    return Err(lerr(
                        &format!("{name}_slot_mapping"),
                        format!("has {} slots that are not padding, expected {n} tokens", out.len()),
                    ));
                }
            }
            TokenAt::Slots(out)
        }
    };
    let h = l.geometry.heads;
    let (h0, h1) = side.heads.unwrap_or((0, h));
    if h0 >= h1 || h1 > h {
        return Err(lerr(&format!("{name}_heads"), format!("{h0}..{h1} is not a non-empty range of the {h} heads")));
    }
    Ok(Resolved { strides, token_at, head0: h0, planar: l.planes() == 2 })
}

/// A raw destination pointer shared by the worker threads; each writes a disjoint set of bytes.
#[derive(Clone, Copy)]
struct Out(*mut u8, usize);
// SAFETY: the conversion validates that distinct chunks write distinct bytes (distinct destination blocks
// or slots), so sharing the pointer across threads never creates overlapping writes.
unsafe impl Send for Out {}
unsafe impl Sync for Out {}

/// One (source plane, destination plane) pass: the walk below the token axis, and its fixed offsets.
struct Job {
    src_plane: usize,
    dst_plane: usize,
    src_off: usize,
    dst_off: usize,
    dims: Vec<Dim>,
    /// Byte strides of (block or row, slot) in the source and destination planes.
    src_tok: (usize, usize),
    dst_tok: (usize, usize),
    /// Bytes per callback (copy) or 0 (codec: one vector per callback).
    run: usize,
    scale: f32,
}

/// Convert `src` into `dst`. Returns the number of tokens converted.
pub fn convert<S: AsRef<[u8]> + Sync, D: AsMut<[u8]> + AsRef<[u8]>>(
    src: &Side<S>,
    dst: &mut Side<D>,
    opts: &ConvertOptions,
) -> Result<usize> {
    let (a, b) = (src.layout, dst.layout);
    if a.def.mla != b.def.mla {
        return Err(lerr("dst_layout", "MLA and non-MLA caches hold different objects; they do not convert"));
    }
    let (ga, gb) = (a.geometry, b.geometry);
    if ga.layers != gb.layers || ga.head_dim != gb.head_dim {
        return Err(lerr(
            "dst_layout",
            format!(
                "geometry differs: src has {} layers × head_dim {}, dst {} × {}",
                ga.layers, ga.head_dim, gb.layers, gb.head_dim
            ),
        ));
    }
    let codec = Codec::between(a.dtype, b.dtype).map_err(|r| lerr("dst_layout.dtype", r))?;
    if codec != Codec::Copy && !(a.def.vector_contiguous() && b.def.vector_contiguous()) {
        return Err(lerr(
            "dst_layout.dtype",
            "vllm_legacy keeps head vectors strided: convert it without a dtype change",
        ));
    }
    let components = a.components();
    if codec.uses_tensor_scale() {
        let want = ga.layers * components;
        if !opts.scales.is_empty() && opts.scales.len() != want {
            return Err(lerr("scales", format!("expected {want} (layers × K/V) scales, got {}", opts.scales.len())));
        }
        if let Some(i) = opts.scales.iter().position(|s| !(s.is_finite() && *s > 0.0)) {
            return Err(lerr(&format!("scales[{i}]"), format!("must be a finite number > 0, got {}", opts.scales[i])));
        }
    }
    let rs = resolve("src", "src", src, opts.tokens, false)?;
    let n_tokens = rs.token_at.len();
    let rd = resolve("dst", "out", dst, Some(n_tokens), true)?;
    let heads = src.heads.map_or(ga.heads, |(x, y)| y - x);
    let dst_heads = dst.heads.map_or(gb.heads, |(x, y)| y - x);
    if heads != dst_heads {
        return Err(lerr(
            "dst_heads",
            format!(
                "src gives {heads} heads, dst takes {dst_heads}: select matching ranges with src_heads / dst_heads \
                 (tensor-parallel resharding)"
            ),
        ));
    }
    if n_tokens == 0 {
        return Ok(0);
    }

    // The walk below the token axis. In a copy, layers (and K/V when both sides keep them in one buffer)
    // are part of it so that contiguous stretches merge; a codec runs one (layer, K/V) at a time for its scale.
    let unit = a.dtype.unit_bytes();
    let units = a.vector_units();
    let x = if a.def.x_packed() {
        a.legacy_x()
    } else if b.def.x_packed() {
        b.legacy_x()
    } else {
        units
    };
    let copy = codec == Codec::Copy;
    let mut jobs = Vec::new();
    let kv_inside = copy && !rs.planar && !rd.planar;
    let layers_inside = copy;
    for c in 0..if kv_inside { 1 } else { components } {
        for l in 0..if layers_inside { 1 } else { ga.layers } {
            let (sp, dp) = (if rs.planar { c } else { 0 }, if rd.planar { c } else { 0 });
            let (ss, ds) = (rs.strides[sp], rd.strides[dp]);
            let pair = |axis: Axis, n: usize| Dim { n, src: ss.of(axis), dst: ds.of(axis) };
            let slot = |s: Strides, l: &Layout| if l.def.paged() { s.of(Axis::Slot) } else { s.of(Axis::Token) };
            let hi = |s: Strides| if s.of(Axis::DimHi) > 0 { s.of(Axis::DimHi) } else { x * s.of(Axis::Dim) };
            let lo = |s: Strides| if s.of(Axis::DimLo) > 0 { s.of(Axis::DimLo) } else { s.of(Axis::Dim) };
            // The token dim comes first; its size is set per chunk.
            let mut dims = vec![Dim { n: 0, src: slot(ss, a), dst: slot(ds, b) }, pair(Axis::Head, heads)];
            if layers_inside {
                dims.push(pair(Axis::Layer, ga.layers));
            }
            if kv_inside {
                dims.push(pair(Axis::Kv, components));
            }
            if copy {
                dims.push(Dim { n: units / x, src: hi(ss), dst: hi(ds) });
                dims.push(Dim { n: x, src: lo(ss), dst: lo(ds) });
            }
            let kv_off = |s: Strides, planar: bool| if planar || kv_inside { 0 } else { c * s.of(Axis::Kv) };
            let tok = |s: Strides, l: &Layout| {
                if l.def.paged() {
                    (s.of(Axis::Block), s.of(Axis::Slot))
                } else {
                    (s.of(Axis::Token), 0)
                }
            };
            jobs.push(Job {
                src_tok: tok(ss, a),
                dst_tok: tok(ds, b),
                src_plane: sp,
                dst_plane: dp,
                src_off: l * ss.of(Axis::Layer) + kv_off(ss, rs.planar) + rs.head0 * ss.of(Axis::Head),
                dst_off: l * ds.of(Axis::Layer) + kv_off(ds, rd.planar) + rd.head0 * ds.of(Axis::Head),
                dims,
                run: if copy { unit } else { 0 },
                scale: opts.scales.get(l * components + c).copied().unwrap_or(1.0),
            });
        }
    }

    // Tokens go in chunks that stay inside one block on both sides, so each chunk is affine in the slot.
    let chunk = chunk_tokens(src, dst);
    let chunks = n_tokens.div_ceil(chunk);
    let bytes = n_tokens * a.bytes_per_count() / a.tokens_per_count();
    let threads = crate::quant::block::thread_count(opts.threads, bytes / 2).min(chunks);
    let (sv, dv) = (a.dtype.vector_bytes(ga.head_dim), b.dtype.vector_bytes(gb.head_dim));
    let srcs: Vec<&[u8]> = src.planes.iter().map(|p| p.as_ref()).collect();
    let outs: Vec<Out> = dst.planes.iter_mut().map(|p| p.as_mut()).map(|p| Out(p.as_mut_ptr(), p.len())).collect();
    let head_dim = ga.head_dim;
    let stream = n_tokens * b.bytes_per_count() / b.tokens_per_count() >= STREAM_MIN_BYTES;
    let work = |first: usize, last: usize| {
        // Plans for a full chunk and for a short last one.
        let plans: Vec<[(Vec<Dim>, usize); 2]> = jobs
            .iter()
            .map(|j| {
                let sized = |m: usize| {
                    let mut d = j.dims.clone();
                    d[0].n = m;
                    if j.run > 0 {
                        plan(d, j.run)
                    } else {
                        (plan(d, usize::MAX).0, 0)
                    }
                };
                [sized(chunk), sized(n_tokens - (chunks - 1) * chunk)]
            })
            .collect();
        for k in first..last {
            let t0 = k * chunk;
            let p = usize::from(k == chunks - 1);
            for (j, pl) in jobs.iter().zip(&plans) {
                let (dims, run) = (&pl[p].0, pl[p].1);
                let s = srcs[j.src_plane];
                let out = outs[j.dst_plane];
                let ((sp, so), (dp, dof)) = (rs.token_at.at(t0), rd.token_at.at(t0));
                let sb = sp * j.src_tok.0 + so * j.src_tok.1 + j.src_off;
                let db = dp * j.dst_tok.0 + dof * j.dst_tok.1 + j.dst_off;
                if run > 0 {
                    walk_rows(dims, sb, db, &mut |so, d, row| {
                        let Some(last) = row.n.checked_sub(1) else { return };
                        assert!(
                            so + last * row.src + run <= s.len() && d + last * row.dst + run <= out.1,
                            "layout conversion went past its validated buffers"
                        );
                        // SAFETY: every run is in bounds (the row's last run, the farthest, is checked above;
                        // strides are non-negative); chunks write disjoint bytes (see `Out`), and the
                        // destination is not the source (distinct buffers).
                        unsafe { copy_row(s.as_ptr().add(so), out.0.add(d), row, run, stream) };
                    });
                } else {
                    walk(dims, sb, db, &mut |so, d| {
                        assert!(d + dv <= out.1, "layout conversion wrote past its validated buffer");
                        // SAFETY: as above; this vector's bytes belong to this chunk only.
                        let to = unsafe { std::slice::from_raw_parts_mut(out.0.add(d), dv) };
                        codec.apply(&s[so..so + sv], to, head_dim, j.scale);
                    });
                }
            }
        }
        if stream {
            stream_fence();
        }
    };
    if threads <= 1 {
        work(0, chunks);
    } else {
        let per = chunks.div_ceil(threads);
        std::thread::scope(|scope| {
            for t in 0..threads {
                let work = &work;
                let (first, last) = (t * per, ((t + 1) * per).min(chunks));
                if first < last {
                    scope.spawn(move || work(first, last));
                }
            }
        });
    }
    Ok(n_tokens)
}

/// Tokens per chunk: 1 with a slot mapping, the gcd of the paged block sizes, else 256.
fn chunk_tokens<S, D>(src: &Side<S>, dst: &Side<D>) -> usize {
    let mut g = 0usize;
    for (l, t) in [(src.layout, src.tokens), (dst.layout, dst.tokens)] {
        if matches!(t, Tokens::SlotMapping(_)) {
            return 1;
        }
        if l.def.paged() {
            g = gcd(g, l.block_size);
        }
    }
    if g == 0 {
        256
    } else {
        g
    }
}

fn gcd(a: usize, b: usize) -> usize {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}
