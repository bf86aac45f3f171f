//! Prefix caching (mechanism): an LRU cache of prompt blocks per instance, matched by the requests' block
//! hashes ([`crate::workload::BlockHashes`], [`HASH_BLOCK_TOKENS`]-token blocks).
//!
//! * **Match** (prefix semantics): the leading blocks of the request found in the cache, stopping at the
//!   first miss; cached tokens = min(matched blocks × block, prompt − 1) (the last prompt token is always
//!   recomputed, so its logits exist).
//! * **Insert**: when a request's prefill starts, its blocks are inserted or touched, the first block the most
//!   recently used (so a chain is evicted from its end, never its head first), and blocks are evicted
//!   least-recently-used first until the cache holds at most ⌊capacity / block⌋ blocks. A request later in
//!   the same batch may so reuse an earlier one's blocks (as if the batch's shared prefix were computed once).
//!   Chunked prefill matches a new prompt when its step takes it, and the prompt starts `cached` tokens in.
//! * **Capacity**: `prefix_cache.capacity_tokens`, or the instance's free KV memory at that moment
//!   (`free_kv_tokens`: the pool's KV memory after weights less what running requests hold), so the cache
//!   only ever uses memory nothing else holds.
//!
//! A prefill instance (or colocated instance) caches what it prefills; with `handoff.skip_cached_prefix` a
//! decode instance caches what lands on it, and a hand-off carries only the tokens its decode instance does
//! not hold (the decode instance is then chosen when the transfer is queued, not when it lands).

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use super::instance::{Instance, Pool};
use super::Sim;
use crate::metrics::stats::{KvTierStats, PrefixStats};
use crate::policy::router::LoadView;
use crate::scenario::tiers::KvTier;
use crate::scenario::{PrefixConfig, Rule};
use crate::workload::{BlockHashes, HASH_BLOCK_TOKENS};

const NIL: u32 = u32::MAX;

/// A multiplicative hash of a block id (ids are already hashes; SipHash would cost more than the lookup).
#[derive(Default)]
struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ b as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }
    fn write_u64(&mut self, x: u64) {
        self.0 = (x ^ (x >> 32)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

struct Node {
    hash: u64,
    /// Towards the most recently used end.
    prev: u32,
    /// Towards the least recently used end.
    next: u32,
}

/// An LRU set of block hashes (see the module documentation).
pub struct PrefixCache {
    map: HashMap<u64, u32, BuildHasherDefault<IdHasher>>,
    nodes: Vec<Node>,
    free: Vec<u32>,
    /// Most recently used.
    head: u32,
    /// Least recently used.
    tail: u32,
}

impl Default for PrefixCache {
    fn default() -> Self {
        PrefixCache { map: HashMap::default(), nodes: Vec::new(), free: Vec::new(), head: NIL, tail: NIL }
    }
}

impl PrefixCache {
    /// Blocks held.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.map.len()
    }

    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// Whether the cache holds block `h` (nothing is touched).
    #[inline]
    pub fn contains(&self, h: u64) -> bool {
        self.map.contains_key(&h)
    }

    /// How many leading blocks of `blocks` the cache holds (stops at the first miss; nothing is touched).
    #[inline]
    pub fn matched(&self, blocks: &[u64]) -> usize {
        blocks.iter().take_while(|h| self.map.contains_key(h)).count()
    }

    /// Insert or touch `blocks` (the first the most recently used), then evict least recently used blocks
    /// until at most `capacity_blocks` remain.
    #[inline]
    pub fn insert(&mut self, blocks: &[u64], capacity_blocks: u64) {
        self.insert_with(blocks, capacity_blocks, |_| {});
    }

    /// [`Self::insert`], handing each evicted block to `evicted` (least recently used first). Returns how many
    /// of `blocks` were not held before.
    pub fn insert_with(&mut self, blocks: &[u64], capacity_blocks: u64, evicted: impl FnMut(u64)) -> u64 {
        let mut new = 0;
        for &h in blocks.iter().rev() {
            match self.map.get(&h) {
                Some(&k) => {
                    self.unlink(k);
                    self.push_front(k);
                }
                None => {
                    let node = Node { hash: h, prev: NIL, next: NIL };
                    let k = match self.free.pop() {
                        Some(k) => {
                            self.nodes[k as usize] = node;
                            k
                        }
                        None => {
                            self.nodes.push(node);
                            (self.nodes.len() - 1) as u32
                        }
                    };
                    self.map.insert(h, k);
                    self.push_front(k);
                    new += 1;
                }
            }
        }
        self.shrink_with(capacity_blocks, evicted);
        new
    }

    /// Evict least recently used blocks until at most `capacity_blocks` remain.
    #[cfg(test)]
    pub fn shrink_to(&mut self, capacity_blocks: u64) {
        self.shrink_with(capacity_blocks, |_| {});
    }

    #[inline]
    fn shrink_with(&mut self, capacity_blocks: u64, mut evicted: impl FnMut(u64)) {
        while self.map.len() as u64 > capacity_blocks && self.tail != NIL {
            let k = self.tail;
            self.unlink(k);
            let h = self.nodes[k as usize].hash;
            self.map.remove(&h);
            self.free.push(k);
            evicted(h);
        }
    }

    /// Blocks held.
    #[inline]
    fn held(&self) -> u64 {
        self.map.len() as u64
    }

    /// The held blocks from the most to the least recently used (tests).
    #[cfg(test)]
    pub fn lru_order(&self) -> Vec<u64> {
        let mut out = Vec::with_capacity(self.len());
        let mut k = self.head;
        while k != NIL {
            out.push(self.nodes[k as usize].hash);
            k = self.nodes[k as usize].next;
        }
        out
    }

    fn unlink(&mut self, k: u32) {
        let (p, n) = (self.nodes[k as usize].prev, self.nodes[k as usize].next);
        if p == NIL {
            self.head = n;
        } else {
            self.nodes[p as usize].next = n;
        }
        if n == NIL {
            self.tail = p;
        } else {
            self.nodes[n as usize].prev = p;
        }
    }

    fn push_front(&mut self, k: u32) {
        self.nodes[k as usize].prev = NIL;
        self.nodes[k as usize].next = self.head;
        if self.head != NIL {
            self.nodes[self.head as usize].prev = k;
        }
        self.head = k;
        if self.tail == NIL {
            self.tail = k;
        }
    }
}

/// Tokens of a `prompt`-token prompt covered by its first `blocks` blocks, less the last prompt token (always
/// recomputed): min(blocks × [`HASH_BLOCK_TOKENS`], prompt − 1).
#[inline]
pub fn cached_tokens(blocks: usize, prompt: u32) -> u32 {
    (blocks as u64 * HASH_BLOCK_TOKENS as u64).min(prompt.saturating_sub(1) as u64) as u32
}

/// Whole blocks that fit in `tokens`.
#[inline]
fn blocks_in(tokens: u64) -> u64 {
    tokens / HASH_BLOCK_TOKENS as u64
}

impl Instance {
    /// KV tokens free on this instance: `kv_tokens` (its KV memory: after weights for a front instance,
    /// its KV capacity for a decode instance) less what its requests hold. The prefix cache's capacity when
    /// `prefix_cache.capacity_tokens` is null.
    pub(super) fn free_kv_tokens(&self, kv_tokens: u64) -> u64 {
        kv_tokens.saturating_sub(self.dec.kv_used)
    }
}

/// The engine's prefix-caching state (present when `prefix_cache.enabled`).
pub(super) struct Prefix {
    hashes: BlockHashes,
    capacity_tokens: Option<u64>,
    /// KV tokens of a front instance's memory after weights.
    pub(super) front_kv_tokens: u64,
    fronts: Vec<PrefixCache>,
    /// Decode instances' caches (`handoff.skip_cached_prefix`; empty otherwise).
    backs: Vec<PrefixCache>,
    pub(super) skip: bool,
    affinity: bool,
    /// Tokens of each request its hand-off does not carry (grown on demand; in-memory runs only, the only
    /// ones with hashes).
    wire_skip: Vec<u32>,
    /// Scratch: cached prefix tokens per front instance for the request being routed.
    matched: Vec<u64>,
    pub(super) stats: PrefixStats,
    /// `kv_tiers` (`None`: the GPU cache only).
    tiers: Option<Box<Tiers>>,
}

/// The prefix cache's tiers below GPU memory (`kv_tiers`), on every front instance.
///
/// * **Spill**: a block the GPU cache evicts enters the first tier (the most recently used of the evicted
///   the most recent there); what a tier evicts enters the next; the last tier's evictions are dropped.
///   Each tier is an LRU of ⌊capacity / block bytes⌋ blocks, so no tier ever holds more than its capacity;
///   a tier of less than one block passes what reaches it on.
///   A tier keeps its copy when a block is loaded back (inclusive): writing a block it already holds costs
///   nothing.
/// * **Hit**: after the GPU cache's matched prefix, the request's next blocks are looked up tier by tier
///   (nearest first); the match stops at the first block no tier holds. A hit's tokens are prefilled no
///   more, but loaded: per request and tier, one load of latency + tokens × KV bytes per token / rate.
/// * **Critical path**: the loads of a step's requests are added to that step's time one after another
///   (one instance's tiers serve one load at a time; the spills are written off the critical path).
pub(super) struct Tiers {
    tiers: Vec<KvTier>,
    capacity_blocks: Vec<u64>,
    /// Per front instance, one cache per tier.
    caches: Vec<Vec<PrefixCache>>,
    /// KV bytes of one hash block and of one token.
    block_bytes: f64,
    token_bytes: f64,
    /// Load time of the requests admitted since the last [`Prefix::take_load_s`], s.
    pending_load_s: f64,
    stats: Vec<KvTierStats>,
    /// Scratch: blocks spilled from one level to the next.
    spill: Vec<u64>,
    next: Vec<u64>,
}

impl Tiers {
    #[cfg(test)]
    fn take_pending(&mut self) -> f64 {
        std::mem::take(&mut self.pending_load_s)
    }

    fn new(tiers: &[KvTier], fronts: usize, token_bytes: f64) -> Tiers {
        let block_bytes = HASH_BLOCK_TOKENS as f64 * token_bytes;
        Tiers {
            capacity_blocks: tiers.iter().map(|t| (t.capacity_bytes / block_bytes) as u64).collect(),
            caches: (0..fronts).map(|_| tiers.iter().map(|_| PrefixCache::default()).collect()).collect(),
            stats: tiers
                .iter()
                .map(|t| KvTierStats {
                    kind: t.kind.name(),
                    capacity_bytes: t.capacity_bytes,
                    ..KvTierStats::default()
                })
                .collect(),
            tiers: tiers.to_vec(),
            block_bytes,
            token_bytes,
            pending_load_s: 0.0,
            spill: Vec::new(),
            next: Vec::new(),
        }
    }

    /// Request blocks `blocks` of a `prompt`-token prompt, whose first `gpu` blocks the GPU cache holds, on
    /// front instance `i`: extend the match through the tiers, price the loads, count. Returns the cached
    /// tokens of the whole match.
    fn admit(&mut self, i: usize, blocks: &[u64], gpu: usize, prompt: u32) -> u32 {
        let caches = &self.caches[i];
        let mut tokens = [0u64; crate::scenario::tiers::MAX_KV_TIERS];
        let mut k = gpu;
        while let Some(&h) = blocks.get(k) {
            let Some(t) = caches.iter().position(|c| c.contains(h)) else { break };
            tokens[t] += (cached_tokens(k + 1, prompt) - cached_tokens(k, prompt)) as u64;
            k += 1;
        }
        for (t, &n) in tokens.iter().enumerate().take(self.tiers.len()) {
            if n == 0 {
                continue;
            }
            let bytes = n as f64 * self.token_bytes;
            let load_s = self.tiers[t].load_s(bytes);
            self.pending_load_s += load_s;
            let s = &mut self.stats[t];
            s.hit_tokens += n;
            s.hit_requests += 1;
            s.read_bytes += bytes;
            s.load_s += load_s;
        }
        cached_tokens(k, prompt)
    }

    /// Insert `blocks` into front instance `i`'s GPU cache `gpu` (at most `capacity` blocks), spilling what
    /// it evicts down the tiers.
    fn insert(&mut self, i: usize, gpu: &mut PrefixCache, blocks: &[u64], capacity: u64) {
        let Tiers { capacity_blocks, caches, block_bytes, stats, spill, next, .. } = self;
        spill.clear();
        gpu.insert_with(blocks, capacity, |h| spill.push(h));
        for (t, cache) in caches[i].iter_mut().enumerate() {
            if spill.is_empty() {
                break;
            }
            if capacity_blocks[t] == 0 {
                // Holds not one block: what reaches it passes on, nothing written.
                continue;
            }
            // Evicted least recently used first: the last evicted enters as the most recent.
            spill.reverse();
            next.clear();
            let new = cache.insert_with(spill, capacity_blocks[t], |h| next.push(h));
            let s = &mut stats[t];
            s.written_bytes += new as f64 * *block_bytes;
            s.peak_bytes = s.peak_bytes.max(cache.held() as f64 * *block_bytes);
            std::mem::swap(spill, next);
        }
    }
}

impl Prefix {
    pub(super) fn new(c: PrefixConfig, hashes: BlockHashes, front_kv_tokens: u64, fronts: usize, backs: usize) -> Self {
        Prefix {
            hashes,
            capacity_tokens: c.capacity_tokens,
            front_kv_tokens,
            fronts: (0..fronts).map(|_| PrefixCache::default()).collect(),
            backs: if c.skip_cached_prefix { (0..backs).map(|_| PrefixCache::default()).collect() } else { Vec::new() },
            skip: c.skip_cached_prefix,
            affinity: false,
            wire_skip: Vec::new(),
            matched: Vec::new(),
            stats: PrefixStats::default(),
            tiers: None,
        }
    }

    /// The tiers' totals (empty without `kv_tiers`).
    pub(super) fn tier_stats(&self) -> Vec<KvTierStats> {
        self.tiers.as_ref().map_or_else(Vec::new, |t| t.stats.clone())
    }

    /// The tier load time of the requests admitted since the last call (0 without `kv_tiers`), s: the step
    /// that prefills them takes this much longer.
    #[inline]
    pub(super) fn take_load_s(&mut self) -> f64 {
        self.tiers.as_deref_mut().map_or(0.0, |t| std::mem::take(&mut t.pending_load_s))
    }

    /// Request `r` (of `prompt` tokens) starts its prefill on front instance `i` with `free_kv` KV tokens
    /// free: match, insert, count. Returns its cached tokens.
    #[inline]
    pub(super) fn admit_front(&mut self, i: usize, r: usize, prompt: u32, free_kv: u64) -> u32 {
        let blocks = self.hashes.blocks(r, prompt);
        let cache = &mut self.fronts[i];
        let gpu = cache.matched(blocks);
        let capacity = blocks_in(self.capacity_tokens.unwrap_or(free_kv));
        let cached = match self.tiers.as_deref_mut() {
            None => {
                if !blocks.is_empty() {
                    cache.insert(blocks, capacity);
                }
                cached_tokens(gpu, prompt)
            }
            Some(tiers) => {
                let cached = tiers.admit(i, blocks, gpu, prompt);
                if !blocks.is_empty() {
                    tiers.insert(i, cache, blocks, capacity);
                }
                cached
            }
        };
        self.stats.prompt_tokens += prompt as u64;
        self.stats.cached_tokens += cached as u64;
        self.stats.hit_requests += (cached > 0) as u64;
        cached
    }

    /// Tokens of request `r`'s hand-off that are not sent.
    #[inline]
    pub(super) fn wire_skip(&self, r: u32) -> u32 {
        self.wire_skip.get(r as usize).copied().unwrap_or(0)
    }
}

/// A front pool seen by the router with the cached prefix of the request being routed.
struct WithPrefix<'a> {
    fronts: Pool<'a>,
    matched: &'a [u64],
}

impl LoadView for WithPrefix<'_> {
    fn instances(&self) -> usize {
        self.fronts.instances()
    }
    fn queued_tokens(&self, i: usize) -> u64 {
        self.fronts.queued_tokens(i)
    }
    fn queued_requests(&self, i: usize) -> u64 {
        self.fronts.queued_requests(i)
    }
    fn running(&self, i: usize) -> u64 {
        self.fronts.running(i)
    }
    fn cached_prefix_tokens(&self, i: usize) -> u64 {
        self.matched[i]
    }
}

impl Sim<'_> {
    /// The prefix state for a scenario (`None` unless `prefix_cache.enabled`).
    pub(super) fn init_prefix(
        &mut self,
        c: PrefixConfig,
        hashes: BlockHashes,
        front_kv_tokens: u64,
        rule: Rule,
        tiers: &[KvTier],
    ) {
        if !c.enabled {
            return;
        }
        let mut p = Prefix::new(c, hashes, front_kv_tokens, self.n_front, self.insts.len() - self.n_front);
        p.affinity = matches!(rule, Rule::PrefixAffinity { .. });
        if !tiers.is_empty() {
            p.tiers = Some(Box::new(Tiers::new(tiers, self.n_front, self.insts[0].model.kv_bytes_per_token)));
        }
        self.prefix = Some(Box::new(p));
    }

    /// The front instance for request `r` under `router.prefill = "prefix_affinity"` (`None`: another rule
    /// routes).
    pub(super) fn route_by_prefix(&mut self, r: u32) -> Option<usize> {
        let p = self.prefix.as_deref_mut().filter(|p| p.affinity)?;
        let prompt = self.t.prompt_tokens[r as usize];
        let blocks = p.hashes.blocks(r as usize, prompt);
        p.matched.clear();
        p.matched.extend(p.fronts.iter().map(|c| cached_tokens(c.matched(blocks), prompt) as u64));
        let fronts = Pool(&self.insts[..self.n_front]);
        Some(self.front_router.pick(&WithPrefix { fronts, matched: &p.matched }))
    }

    /// `handoff.skip_cached_prefix`: request `r`'s hand-off is about to be queued: choose its decode instance
    /// now and leave out the tokens that instance's cache holds.
    pub(super) fn skip_cached_on_wire(&mut self, r: u32) {
        let d = self.decode_instance_of(r);
        let prompt = self.t.prompt_tokens[r as usize];
        let Some(p) = self.prefix.as_deref_mut() else { return };
        let blocks = p.hashes.blocks(r as usize, prompt);
        let skip = cached_tokens(p.backs[d].matched(blocks), prompt);
        if skip == 0 {
            return;
        }
        if p.wire_skip.len() <= r as usize {
            p.wire_skip.resize(r as usize + 1, 0);
        }
        p.wire_skip[r as usize] = skip;
        p.stats.link_tokens_skipped += skip as u64;
        let full = self.plan.handoff_bytes(prompt);
        let sent = self.plan.handoff_bytes(prompt - skip);
        p.stats.link_bytes_saved += self.path.network_wire_bytes(full) - self.path.network_wire_bytes(sent);
    }

    /// `handoff.skip_cached_prefix`: request `r`'s hand-off has landed on decode instance `d`: its blocks
    /// enter that instance's cache.
    pub(super) fn cache_landed(&mut self, r: u32, d: usize) {
        let prompt = self.t.prompt_tokens[r as usize];
        let inst = &self.insts[self.n_front + d];
        let free = inst.free_kv_tokens(inst.dec.kv_capacity);
        let Some(p) = self.prefix.as_deref_mut() else { return };
        let blocks = p.hashes.blocks(r as usize, prompt);
        if !blocks.is_empty() {
            let cap = blocks_in(p.capacity_tokens.unwrap_or(free));
            p.backs[d].insert(blocks, cap);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Inserting touches blocks with the first the most recent; a full cache evicts the least recently used.
    #[test]
    fn lru_eviction_order_and_capacity() {
        let mut c = PrefixCache::default();
        c.insert(&[1, 2, 3], 10);
        assert_eq!(c.lru_order(), [1, 2, 3]);
        c.insert(&[4, 5], 10);
        assert_eq!(c.lru_order(), [4, 5, 1, 2, 3]);
        // Touching a chain again moves it to the front, its first block the most recent.
        c.insert(&[1, 2], 10);
        assert_eq!(c.lru_order(), [1, 2, 4, 5, 3]);
        // Capacity 4: the least recently used (3) goes.
        c.insert(&[6], 4);
        assert_eq!(c.lru_order(), [6, 1, 2, 4]);
        assert_eq!(c.len(), 4);
        // Shrinking evicts from the LRU end; freed slots are reused.
        c.shrink_to(2);
        assert_eq!(c.lru_order(), [6, 1]);
        c.insert(&[7, 8, 9], 3);
        assert_eq!(c.lru_order(), [7, 8, 9]);
        c.shrink_to(0);
        assert!(c.is_empty());
        assert!(c.lru_order().is_empty());
        c.insert(&[1], 1);
        assert_eq!(c.lru_order(), [1]);
    }

    /// A cache of capacity 0 never holds anything; one smaller than a request keeps its leading blocks.
    #[test]
    fn capacity_zero_and_short_capacity_keep_the_head_of_the_chain() {
        let mut c = PrefixCache::default();
        c.insert(&[1, 2, 3], 0);
        assert!(c.is_empty());
        assert_eq!(c.matched(&[1, 2, 3]), 0);
        c.insert(&[1, 2, 3, 4, 5], 2);
        assert_eq!(c.lru_order(), [1, 2]);
        assert_eq!(c.matched(&[1, 2, 3, 4, 5]), 2);
    }

    /// Matching stops at the first miss even if later blocks are held (prefix semantics).
    #[test]
    fn prefix_semantics_stop_at_first_miss() {
        let mut c = PrefixCache::default();
        c.insert(&[10, 11, 12], 100);
        c.insert(&[20, 11, 12], 100);
        assert_eq!(c.matched(&[10, 11, 12, 13]), 3);
        assert_eq!(c.matched(&[10, 99, 12]), 1);
        assert_eq!(c.matched(&[99, 11, 12]), 0);
        assert_eq!(c.matched(&[]), 0);
    }

    /// Cached tokens: whole blocks, capped at prompt − 1 (the last token is always recomputed).
    #[test]
    fn cached_tokens_leave_the_last_token() {
        assert_eq!(cached_tokens(0, 1000), 0);
        assert_eq!(cached_tokens(1, 1000), 512);
        assert_eq!(cached_tokens(2, 1000), 999);
        assert_eq!(cached_tokens(2, 1024), 1023);
        assert_eq!(cached_tokens(2, 1025), 1024);
        assert_eq!(cached_tokens(1, 1), 0);
        assert_eq!(blocks_in(1023), 1);
        assert_eq!(blocks_in(1024), 2);
    }

    use crate::scenario::spec::{KvTierKind, KvTierSpec};
    use proptest::prelude::*;

    /// A tier of `blocks` hash blocks at 1 byte per token, loading at 1 GB/s after `latency_us`.
    fn tier(blocks: u64, latency_us: f64) -> KvTier {
        let spec =
            KvTierSpec { kind: KvTierKind::Host, capacity_gb: 0.0, link: None, gb_per_s: None, latency_us: None };
        KvTier {
            kind: KvTierKind::Host,
            capacity_bytes: (blocks * HASH_BLOCK_TOKENS as u64) as f64,
            bytes_per_s: 1e9,
            latency_s: latency_us * 1e-6,
            spec,
        }
    }

    /// What the GPU cache evicts enters the first tier, the last evicted the most recent; what that tier
    /// evicts enters the second; the second's evictions are gone. Writing a block a tier holds is free.
    #[test]
    fn evictions_spill_down_the_tiers_in_lru_order() {
        let mut t = Tiers::new(&[tier(2, 0.0), tier(3, 0.0)], 1, 1.0);
        let mut gpu = PrefixCache::default();
        t.insert(0, &mut gpu, &[1, 2, 3], 3);
        assert!(t.caches[0][0].is_empty());
        // GPU capacity 1: [4] enters, 1, 2, 3 leave (3 first: least recently used), 1 the last.
        t.insert(0, &mut gpu, &[4], 1);
        assert_eq!(gpu.lru_order(), [4]);
        // Host (2 blocks) gets 1 (most recent), 2, 3 then keeps 1, 2; 3 goes to the SSD tier.
        assert_eq!(t.caches[0][0].lru_order(), [1, 2]);
        assert_eq!(t.caches[0][1].lru_order(), [3]);
        let block = HASH_BLOCK_TOKENS as f64;
        assert_eq!(t.stats[0].written_bytes, 3.0 * block);
        assert_eq!(t.stats[1].written_bytes, 1.0 * block);
        assert_eq!(t.stats[0].peak_bytes, 2.0 * block);
        // 4 leaves the GPU for the host, which pushes 2 to the SSD tier; 1 was held already.
        t.insert(0, &mut gpu, &[5], 1);
        assert_eq!(t.caches[0][0].lru_order(), [4, 1]);
        assert_eq!(t.caches[0][1].lru_order(), [2, 3]);
        assert_eq!(t.stats[0].written_bytes, 4.0 * block);
    }

    /// A match runs through the GPU's blocks, then the tiers' (any tier, nearest first), and stops at the
    /// first block none holds; each tier's tokens are one load of latency + bytes / rate.
    #[test]
    fn a_match_continues_through_the_tiers_and_prices_one_load_per_tier() {
        let mut t = Tiers::new(&[tier(8, 10.0), tier(8, 100.0)], 2, 2.0);
        t.caches[0][0].insert(&[2, 4], 8);
        t.caches[0][1].insert(&[3, 9], 8);
        // GPU holds block 1; 2 from host, 3 from SSD, 4 from host; 5 is nowhere, so 9 (SSD) is not reached.
        let blocks = [1, 2, 3, 4, 5, 9];
        let prompt = 6 * HASH_BLOCK_TOKENS;
        let cached = t.admit(0, &blocks, 1, prompt);
        let b = HASH_BLOCK_TOKENS as u64;
        assert_eq!(cached as u64, 4 * b);
        assert_eq!((t.stats[0].hit_tokens, t.stats[1].hit_tokens), (2 * b, b));
        assert_eq!((t.stats[0].hit_requests, t.stats[1].hit_requests), (1, 1));
        let want = (10e-6 + 2.0 * (2 * b) as f64 / 1e9) + (100e-6 + 2.0 * b as f64 / 1e9);
        assert!((t.take_pending() - want).abs() < 1e-15);
        assert_eq!(t.take_pending(), 0.0);
        // The other instance's tiers are its own: nothing there.
        assert_eq!(t.admit(1, &blocks, 0, prompt), 0);
        // A prompt ending inside the last matched block: its last token is recomputed, not loaded.
        let short = 2 * HASH_BLOCK_TOKENS + 1;
        let before = t.stats[0].hit_tokens;
        assert_eq!(t.admit(0, &[1, 2, 3], 1, short), 2 * HASH_BLOCK_TOKENS);
        assert_eq!(t.stats[0].hit_tokens - before, b);
        assert_eq!(t.stats[1].hit_tokens, b);
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

        /// Whatever is inserted, no tier ever holds more blocks than its capacity, its peak says so, every
        /// block ever inserted is held by the GPU cache or a tier while nothing is dropped (an unbounded
        /// last tier), and bytes written = blocks each tier newly took.
        #[test]
        fn tiers_never_exceed_their_capacity_and_an_unbounded_tier_keeps_everything(
            inserts in proptest::collection::vec(
                (proptest::collection::vec(0u64..40, 0..8), 0u64..6), 1..60),
            host in 0u64..6,
        ) {
            let mut t = Tiers::new(&[tier(host, 0.0), tier(u64::MAX / 1024, 0.0)], 1, 1.0);
            let mut gpu = PrefixCache::default();
            let mut seen = std::collections::HashSet::new();
            for (blocks, cap) in &inserts {
                t.insert(0, &mut gpu, blocks, *cap);
                seen.extend(blocks.iter().copied());
                prop_assert!(gpu.held() <= *cap);
                prop_assert!(t.caches[0][0].held() <= host);
                prop_assert!(t.stats[0].peak_bytes <= t.tiers[0].capacity_bytes);
                for h in &seen {
                    prop_assert!(gpu.contains(*h) || t.caches[0].iter().any(|c| c.contains(*h)));
                }
            }
        }
    }

    fn id_hash(x: u64) -> u64 {
        let mut s = IdHasher::default();
        s.write_u64(x);
        s.finish()
    }

    /// The block-id hasher keeps ids apart: `write_u64` is injective on a sample of ids with low, high and
    /// both halves set (an xorshift and an odd multiplier are bijections of u64), and ids differing only
    /// above bit 32 still differ in the low 16 bits the map indexes by (the `x >> 32` fold: without it
    /// `i << 40` would hash to low bits 0 for every i). The byte path is injective on all 65 536 two-byte
    /// inputs. (A bad hash would not change simulation results, only turn lookups into long probes.)
    #[test]
    fn id_hasher_is_injective_and_folds_high_bits_into_low() {
        use std::collections::HashSet;
        let ids: HashSet<u64> =
            (0..4096u64).flat_map(|i| [i, i << 32, i | (i << 32), i.wrapping_mul(u64::MAX / 4095)]).collect();
        let hashed: HashSet<u64> = ids.iter().map(|&x| id_hash(x)).collect();
        assert_eq!(hashed.len(), ids.len());
        let low: HashSet<u64> = (1..=64u64).map(|i| id_hash(i << 40) & 0xFFFF).collect();
        assert_eq!(low.len(), 64);
        let bytes: HashSet<u64> = (0..=u16::MAX)
            .map(|v| {
                let mut s = IdHasher::default();
                s.write(&v.to_le_bytes());
                s.finish()
            })
            .collect();
        assert_eq!(bytes.len(), 1 << 16);
    }
}
