//! The hand-off between unlike tensor-parallel layouts: which prefill ranks each decode rank pulls its KV
//! heads from, and what the many transfers cost (`docs/concepts/parallelism.md#the-hand-off-between-layouts`).
//!
//! Heads are split contiguously over TP ranks (rank r of tp holds heads [r·H/tp, (r+1)·H/tp)); with fewer KV
//! heads H than ranks every rank holds one head, head r mod H, so each head sits on tp/H ranks, and the decode
//! ranks that need the same head take it from its holders in turn, spreading the load. Every (prefill rank,
//! decode rank) pair is one transfer of the request's tokens for the heads they share: one descriptor per KV
//! block. The ranks move their pairs side by side; the busiest rank (most pairs) sets the time.

/// The transfers of one hand-off between a prefill instance of TP `p` and a decode instance of TP `d`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RankPairs {
    /// (prefill rank, decode rank) pairs that exchange heads.
    pub pairs: u32,
    /// Pairs of the busiest rank, on either side.
    pub per_rank: u32,
}

/// Heads rank `r` of `tp` holds, over `kv_heads` heads.
fn heads_of(r: u32, tp: u32, kv_heads: u32) -> std::ops::Range<u32> {
    if kv_heads >= tp {
        let per = kv_heads.div_ceil(tp);
        (r * per).min(kv_heads)..((r + 1) * per).min(kv_heads)
    } else {
        let h = r % kv_heads;
        h..h + 1
    }
}

/// The prefill rank (of `p`) decode rank `j` pulls head `h` from.
fn source_of(h: u32, j: u32, p: u32, kv_heads: u32) -> u32 {
    if kv_heads >= p {
        h / kv_heads.div_ceil(p)
    } else {
        // Holders of head h: h, h + H, h + 2H, ...; the decode ranks needing h are h + H·m (m = j / H), and
        // the m-th of them takes holder m mod (holders).
        let holders = (p - h).div_ceil(kv_heads);
        h + kv_heads * ((j / kv_heads) % holders)
    }
}

/// The rank pairs of a hand-off from TP `p` to TP `d` over `kv_heads` KV heads (1 for MLA's latent).
pub fn rank_pairs(kv_heads: u32, p: u32, d: u32) -> RankPairs {
    let h = kv_heads.max(1);
    let mut from_prefill = vec![0u32; p as usize];
    let (mut pairs, mut busiest) = (0u32, 0u32);
    for j in 0..d {
        let mut sources: Vec<u32> = heads_of(j, d, h).map(|head| source_of(head, j, p, h)).collect();
        sources.sort_unstable();
        sources.dedup();
        for &s in &sources {
            from_prefill[s as usize] += 1;
        }
        pairs += sources.len() as u32;
        busiest = busiest.max(sources.len() as u32);
    }
    let busiest_prefill = from_prefill.into_iter().max().unwrap_or(0);
    RankPairs { pairs, per_rank: busiest.max(busiest_prefill) }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The cases, counted by hand: TP 4 → 8 over 8 heads: each decode rank takes its one head from
    /// the prefill rank holding two (8 pairs, each prefill rank in 2); TP 8 → 2: each decode rank gathers 4
    /// heads from 4 prefill ranks (8 pairs, 4 per decode rank); matched TP 8 → 8: 8 pairs, 1 each.
    #[test]
    fn pairs_of_unlike_layouts() {
        assert_eq!(rank_pairs(8, 4, 8), RankPairs { pairs: 8, per_rank: 2 });
        assert_eq!(rank_pairs(8, 8, 2), RankPairs { pairs: 8, per_rank: 4 });
        assert_eq!(rank_pairs(8, 8, 8), RankPairs { pairs: 8, per_rank: 1 });
        assert_eq!(rank_pairs(8, 1, 1), RankPairs { pairs: 1, per_rank: 1 });
        assert_eq!(rank_pairs(8, 1, 4), RankPairs { pairs: 4, per_rank: 4 });
        assert_eq!(rank_pairs(8, 4, 1), RankPairs { pairs: 4, per_rank: 4 });
    }

    /// Fewer KV heads than TP ranks: 8 heads over TP 16 hold each head twice. To TP 8, decode rank j needs
    /// head j, held by prefill ranks j and j + 8, and takes the first (8 pairs, 1 each); to TP 16, decode
    /// rank j takes head j mod 8 from holder j (16 pairs, 1 each). MLA's one latent over TP 8 → 8: every
    /// prefill rank holds it; decode rank j pulls it from rank j.
    #[test]
    fn replicated_heads_spread_over_their_holders() {
        assert_eq!(rank_pairs(8, 16, 8), RankPairs { pairs: 8, per_rank: 1 });
        assert_eq!(rank_pairs(8, 16, 16), RankPairs { pairs: 16, per_rank: 1 });
        assert_eq!(rank_pairs(1, 8, 8), RankPairs { pairs: 8, per_rank: 1 });
        assert_eq!(rank_pairs(1, 8, 2), RankPairs { pairs: 2, per_rank: 1 });
        assert_eq!(rank_pairs(1, 2, 8), RankPairs { pairs: 8, per_rank: 4 });
        // 8 heads, each held by 2 of 16 prefill ranks and needed by 4 of 32 decode ranks: each holder feeds 2.
        assert_eq!(rank_pairs(8, 16, 32), RankPairs { pairs: 32, per_rank: 2 });
    }
}
