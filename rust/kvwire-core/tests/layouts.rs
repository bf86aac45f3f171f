//! Property tests of layout conversion: every conversion is an exact permutation of the values.
//! Oracle: round trips through the neutral form (neutral → A → B → neutral is the identity for every pair of
//! layouts, block sizes, block tables, slot mappings with padding and head slices), and the count of bytes
//! that moved. Engine shapes themselves are checked against numpy re-implementations in
//! `tests/test_layout.py`.

use kvwire_core::layout::{convert, ConvertOptions, Geometry, Layout, Side, Tokens, LAYOUTS};
use proptest::prelude::*;

/// A deterministic permutation of 0..n from a seed (Fisher–Yates on an LCG).
fn permutation(n: usize, seed: u64) -> Vec<i32> {
    let mut v: Vec<i32> = (0..n as i32).collect();
    let mut s = seed | 1;
    for i in (1..n).rev() {
        s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        v.swap(i, (s >> 33) as usize % (i + 1));
    }
    v
}

fn buffers(l: &Layout, tokens: usize, spare: usize) -> (Vec<Vec<u8>>, usize) {
    let count = tokens.div_ceil(l.tokens_per_count()) + spare;
    ((0..l.planes()).map(|p| vec![0u8; count * l.plane_bytes_per_count(p)]).collect(), count)
}

fn run(a: &Layout, src: &[Vec<u8>], ta: Tokens, b: &Layout, dst: &mut [Vec<u8>], tb: Tokens, tokens: usize) -> usize {
    let s = Side { layout: a, planes: src.iter().map(|v| &v[..]).collect(), tokens: ta, heads: None };
    let mut d = Side { layout: b, planes: dst.iter_mut().map(|v| &mut v[..]).collect(), tokens: tb, heads: None };
    let opts = ConvertOptions { tokens: Some(tokens), threads: Some(1 + tokens % 2), ..Default::default() };
    convert(&s, &mut d, &opts).unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// neutral → A (scattered through a random block table) → B (another table, another block size, or a slot
    /// mapping with padding) → neutral gives back the bytes, for every pair of non-MLA layouts.
    #[test]
    fn any_layout_pair_round_trips(
        layers in 1usize..3, heads in 1usize..4, wide in any::<bool>(), tokens in 1usize..40,
        bs_a in prop::sample::select(vec![1usize, 2, 4, 16]), bs_b in prop::sample::select(vec![1usize, 3, 8, 16]),
        seed in any::<u64>(), fp8 in any::<bool>(), use_slots in any::<bool>(),
    ) {
        let g = Geometry { layers, heads, head_dim: if wide { 32 } else { 16 } };
        let dtype = if fp8 { "fp8_e4m3" } else { "bfloat16" };
        let neutral = Layout::new("n", "neutral", dtype, 1, g).unwrap();
        let (mut src, _) = buffers(&neutral, tokens, 0);
        let mut s = seed;
        for b in src[0].iter_mut() {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1);
            *b = (s >> 56) as u8;
        }
        for la in LAYOUTS.iter().filter(|l| !l.mla) {
            for lb in LAYOUTS.iter().filter(|l| !l.mla) {
                let a = Layout::new("a", la.name, dtype, bs_a, g).unwrap();
                let b = Layout::new("b", lb.name, dtype, bs_b, g).unwrap();
                let (mut mid, ca) = buffers(&a, tokens, 2);
                let table_a = permutation(ca, seed);
                let ta = if a.def.paged() { Tokens::BlockTable(&table_a) } else { Tokens::InOrder };
                prop_assert_eq!(run(&neutral, &src, Tokens::InOrder, &a, &mut mid, ta, tokens), tokens);
                let (mut mid2, cb) = buffers(&b, tokens, 1);
                let table_b = permutation(cb, seed ^ 7);
                // A slot mapping with one padding entry after every third token.
                let mut slots = Vec::new();
                for t in 0..tokens {
                    let bs = b.tokens_per_count();
                    slots.push(table_b[t / bs] as i64 * bs as i64 + (t % bs) as i64);
                    if t % 3 == 2 {
                        slots.push(-1);
                    }
                }
                let tb = match (b.def.paged(), use_slots) {
                    (false, _) => Tokens::InOrder,
                    (true, false) => Tokens::BlockTable(&table_b),
                    (true, true) => Tokens::SlotMapping(&slots),
                };
                run(&a, &mid, ta, &b, &mut mid2, tb, tokens);
                let (mut back, _) = buffers(&neutral, tokens, 0);
                run(&b, &mid2, tb, &neutral, &mut back, Tokens::InOrder, tokens);
                prop_assert!(back == src, "{} → {} (bs {} → {}) lost data", la.name, lb.name, bs_a, bs_b);
            }
        }
    }

    /// TP resharding: splitting 4 heads into two 2-head caches and merging them back is the identity, and each
    /// half holds exactly its heads.
    #[test]
    fn head_slices_split_and_merge(tokens in 1usize..30, seed in any::<u64>()) {
        let g4 = Geometry { layers: 2, heads: 4, head_dim: 16 };
        let g2 = Geometry { heads: 2, ..g4 };
        let full = Layout::new("a", "neutral", "bfloat16", 1, g4).unwrap();
        let half = Layout::new("b", "sglang", "bfloat16", 1, g2).unwrap();
        let (mut src, _) = buffers(&full, tokens, 0);
        let mut s = seed;
        for b in src[0].iter_mut() {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1);
            *b = (s >> 56) as u8;
        }
        let mut merged = buffers(&full, tokens, 0).0;
        for r in 0..2 {
            let (mut shard, _) = buffers(&half, tokens, 0);
            let opts = ConvertOptions { tokens: Some(tokens), ..Default::default() };
            let sside = Side { layout: &full, planes: vec![&src[0][..]], tokens: Tokens::InOrder, heads: Some((2 * r, 2 * r + 2)) };
            let mut d = Side { layout: &half, planes: shard.iter_mut().map(|v| &mut v[..]).collect(), tokens: Tokens::InOrder, heads: None };
            convert(&sside, &mut d, &opts).unwrap();
            let back = Side { layout: &half, planes: shard.iter().map(|v| &v[..]).collect(), tokens: Tokens::InOrder, heads: None };
            let mut m = Side { layout: &full, planes: vec![&mut merged[0][..]], tokens: Tokens::InOrder, heads: Some((2 * r, 2 * r + 2)) };
            convert(&back, &mut m, &opts).unwrap();
        }
        prop_assert!(merged == src);
    }
}

/// Thread count never changes the output (each destination byte belongs to one chunk).
#[test]
fn threads_do_not_change_the_result() {
    let g = Geometry { layers: 3, heads: 8, head_dim: 128 };
    let a = Layout::new("a", "vllm_nhd", "bfloat16", 16, g).unwrap();
    let b = Layout::new("b", "dynamo_universal", "bfloat16", 64, g).unwrap();
    let tokens = 1000;
    let (mut src, ca) = buffers(&a, tokens, 0);
    for (i, x) in src[0].iter_mut().enumerate() {
        *x = (i * 31 % 251) as u8;
    }
    let table = permutation(ca, 3);
    let mut outs = Vec::new();
    for threads in [1, 2, 3] {
        let (mut dst, _) = buffers(&b, tokens, 0);
        let s = Side { layout: &a, planes: vec![&src[0][..]], tokens: Tokens::BlockTable(&table), heads: None };
        let mut d = Side { layout: &b, planes: vec![&mut dst[0][..]], tokens: Tokens::InOrder, heads: None };
        let opts = ConvertOptions { tokens: Some(tokens), threads: Some(threads), ..Default::default() };
        convert(&s, &mut d, &opts).unwrap();
        outs.push(dst);
    }
    assert!(outs[0] == outs[1] && outs[1] == outs[2]);
}

/// Bad tables and buffers are refused with the argument named, before anything is written.
#[test]
fn bad_addressing_is_refused() {
    let g = Geometry { layers: 1, heads: 2, head_dim: 16 };
    let a = Layout::new("a", "vllm_hnd", "bfloat16", 4, g).unwrap();
    let n = Layout::new("b", "neutral", "bfloat16", 1, g).unwrap();
    let (src, _) = buffers(&a, 8, 0);
    let (mut dst, _) = buffers(&n, 8, 0);
    let table = [0, 5];
    let s = Side { layout: &a, planes: vec![&src[0][..]], tokens: Tokens::BlockTable(&table), heads: None };
    let mut d = Side { layout: &n, planes: vec![&mut dst[0][..]], tokens: Tokens::InOrder, heads: None };
    let opts = ConvertOptions { tokens: Some(8), ..Default::default() };
    let e = convert(&s, &mut d, &opts).unwrap_err();
    assert_eq!(e.path(), "src_block_table[1]", "{e}");
    let none = ConvertOptions::default();
    assert_eq!(convert(&s, &mut d, &none).unwrap_err().path(), "tokens");
    let slots = [0i64, -1, 7, -2];
    let s = Side { layout: &a, planes: vec![&src[0][..]], tokens: Tokens::SlotMapping(&slots), heads: None };
    assert_eq!(convert(&s, &mut d, &none).unwrap_err().path(), "src_slot_mapping[3]");
    let short = &src[0][..100];
    let s = Side { layout: &a, planes: vec![short], tokens: Tokens::InOrder, heads: None };
    assert_eq!(convert(&s, &mut d, &none).unwrap_err().path(), "src[0]");
    let dup = [1, 1];
    let (mut pd, _) = buffers(&a, 8, 0);
    let s = Side { layout: &n, planes: vec![&dst[0][..]], tokens: Tokens::InOrder, heads: None };
    let mut d = Side { layout: &a, planes: vec![&mut pd[0][..]], tokens: Tokens::BlockTable(&dup), heads: None };
    assert_eq!(convert(&s, &mut d, &none).unwrap_err().path(), "dst_block_table[1]");
}

/// Without a token count, a paged source in block order gives every slot of every block; a separate-K/V
/// layout handed one buffer is refused with the number it takes.
#[test]
fn defaults_and_buffer_counts() {
    let g = Geometry { layers: 1, heads: 2, head_dim: 16 };
    let a = Layout::new("a", "vllm_hnd", "bfloat16", 4, g).unwrap();
    let n = Layout::new("b", "neutral", "bfloat16", 1, g).unwrap();
    let (src, _) = buffers(&a, 12, 0);
    let (mut dst, _) = buffers(&n, 12, 0);
    let s = Side { layout: &a, planes: vec![&src[0][..]], tokens: Tokens::InOrder, heads: None };
    let mut d = Side { layout: &n, planes: vec![&mut dst[0][..]], tokens: Tokens::InOrder, heads: None };
    assert_eq!(convert(&s, &mut d, &ConvertOptions::default()).unwrap(), 12);
    let sg = Layout::new("s", "sglang", "bfloat16", 1, g).unwrap();
    let s = Side { layout: &sg, planes: vec![&src[0][..]], tokens: Tokens::InOrder, heads: None };
    let e = convert(&s, &mut d, &ConvertOptions::default()).unwrap_err();
    assert!(e.to_string().contains("takes 2 buffers (K, V), got 1"), "{e}");
    let s = Side { layout: &a, planes: vec![&src[0][..], &src[0][..]], tokens: Tokens::InOrder, heads: None };
    let e = convert(&s, &mut d, &ConvertOptions::default()).unwrap_err();
    assert!(e.to_string().contains("takes 1 buffer, got 2"), "{e}");
}

/// A head range of one side (`None`: all).
type Heads = Option<(usize, usize)>;

fn refused(a: &Layout, src: &[u8], ta: Tokens, b: &Layout, heads: (Heads, Heads), opts: &ConvertOptions) -> String {
    let (mut dst, _) = buffers(b, 16, 4);
    let s = Side { layout: a, planes: vec![src], tokens: ta, heads: heads.0 };
    let mut d = Side {
        layout: b,
        planes: dst.iter_mut().map(|v| &mut v[..]).collect(),
        tokens: Tokens::InOrder,
        heads: heads.1,
    };
    convert(&s, &mut d, opts).unwrap_err().path().to_string()
}

fn with(scales: &[f32]) -> ConvertOptions<'_> {
    ConvertOptions { scales, ..Default::default() }
}

/// Every check before the copy refuses its own kind of bad input, naming the argument: slots past the end,
/// empty or too-wide head ranges, a geometry that differs in one dimension only, a dtype change on the
/// legacy layout, and fp8 scales of the wrong count or value.
#[test]
fn each_check_names_its_argument() {
    let g = Geometry { layers: 2, heads: 2, head_dim: 16 };
    let a = Layout::new("a", "vllm_hnd", "bfloat16", 4, g).unwrap();
    let n = Layout::new("n", "neutral", "bfloat16", 1, g).unwrap();
    let (src, _) = buffers(&a, 8, 0);
    let none = ConvertOptions::default();
    let all = (None, None);
    let past_end = [0i64, 8];
    assert_eq!(refused(&a, &src[0], Tokens::SlotMapping(&past_end), &n, all, &none), "src_slot_mapping[1]");
    assert_eq!(refused(&a, &src[0], Tokens::InOrder, &n, (Some((1, 1)), None), &none), "src_heads");
    assert_eq!(refused(&a, &src[0], Tokens::InOrder, &n, (Some((0, 3)), None), &none), "src_heads");
    for g2 in [Geometry { layers: 1, ..g }, Geometry { head_dim: 32, ..g }] {
        let other = Layout::new("n", "neutral", "bfloat16", 1, g2).unwrap();
        assert_eq!(refused(&a, &src[0], Tokens::InOrder, &other, all, &none), "dst_layout");
    }
    let legacy = Layout::new("l", "vllm_legacy", "bfloat16", 4, g).unwrap();
    let (lsrc, _) = buffers(&legacy, 8, 0);
    let fp8 = Layout::new("f", "neutral", "fp8_e4m3", 1, g).unwrap();
    let s =
        Side { layout: &legacy, planes: lsrc.iter().map(|v| &v[..]).collect(), tokens: Tokens::InOrder, heads: None };
    let (mut dst, _) = buffers(&fp8, 8, 0);
    let mut d = Side { layout: &fp8, planes: vec![&mut dst[0][..]], tokens: Tokens::InOrder, heads: None };
    assert_eq!(convert(&s, &mut d, &none).unwrap_err().path(), "dst_layout.dtype");
    let three = [1.0f32; 3];
    let bad = [1.0f32, 0.0, 1.0, 1.0];
    let inf = [1.0f32, 1.0, f32::INFINITY, 1.0];
    let good = [0.5f32, 1.0, 2.0, 4.0];
    assert_eq!(refused(&a, &src[0], Tokens::InOrder, &fp8, all, &with(&three)), "scales");
    assert_eq!(refused(&a, &src[0], Tokens::InOrder, &fp8, all, &with(&bad)), "scales[1]");
    assert_eq!(refused(&a, &src[0], Tokens::InOrder, &fp8, all, &with(&inf)), "scales[2]");
    // One scale per (layer, K/V): 3 layers take 6, not 3 + 2.
    let g3 = Geometry { layers: 3, ..g };
    let (a3, f3) = (
        Layout::new("a", "vllm_hnd", "bfloat16", 4, g3).unwrap(),
        Layout::new("f", "neutral", "fp8_e4m3", 1, g3).unwrap(),
    );
    let (src3, _) = buffers(&a3, 8, 0);
    assert_eq!(refused(&a3, &src3[0], Tokens::InOrder, &f3, all, &with(&[1.0; 5])), "scales");
    // Right count and values: accepted, and each (layer, K/V) uses its own scale.
    let one = Layout::new("o", "neutral", "float32", 1, g).unwrap();
    let (mut ones, _) = buffers(&one, 1, 0);
    // Layer 0 holds 1.0, layer 1 holds 2.0 (neutral float32: 2 · 1 token · 2 heads · 16 · 4 B per layer).
    for (i, c) in ones[0].chunks_mut(4).enumerate() {
        let v = if i < 64 { 1.0f32 } else { 2.0 };
        c.copy_from_slice(&v.to_le_bytes());
    }
    let s = Side { layout: &one, planes: vec![&ones[0][..]], tokens: Tokens::InOrder, heads: None };
    let (mut q, _) = buffers(&fp8, 1, 0);
    let mut d = Side { layout: &fp8, planes: vec![&mut q[0][..]], tokens: Tokens::InOrder, heads: None };
    convert(&s, &mut d, &with(&good)).unwrap();
    // neutral (layer, kv, token, head, d): 32 codes per (layer, kv): 1/0.5 = 2 → 0x40, 1/1 → 0x38, 2/2 = 1 → 0x38,
    // 2/4 = 0.5 → 0x30.
    let firsts: Vec<u8> = q[0].chunks(32).map(|c| c[0]).collect();
    assert_eq!(firsts, vec![0x40, 0x38, 0x38, 0x30]);
}
