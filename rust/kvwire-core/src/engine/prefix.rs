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
use crate::metrics::stats::PrefixStats;
use crate::policy::router::LoadView;
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

    /// How many leading blocks of `blocks` the cache holds (stops at the first miss; nothing is touched).
    #[inline]
    pub fn matched(&self, blocks: &[u64]) -> usize {
        blocks.iter().take_while(|h| self.map.contains_key(h)).count()
    }

    /// Insert or touch `blocks` (the first the most recently used), then evict least recently used blocks
    /// until at most `capacity_blocks` remain.
    pub fn insert(&mut self, blocks: &[u64], capacity_blocks: u64) {
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
                }
            }
        }
        self.shrink_to(capacity_blocks);
    }

    /// Evict least recently used blocks until at most `capacity_blocks` remain.
    pub fn shrink_to(&mut self, capacity_blocks: u64) {
        while self.map.len() as u64 > capacity_blocks && self.tail != NIL {
            let k = self.tail;
            self.unlink(k);
            self.map.remove(&self.nodes[k as usize].hash);
            self.free.push(k);
        }
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
        }
    }

    /// Request `r` (of `prompt` tokens) starts its prefill on front instance `i` with `free_kv` KV tokens
    /// free: match, insert, count. Returns its cached tokens.
    #[inline]
    pub(super) fn admit_front(&mut self, i: usize, r: usize, prompt: u32, free_kv: u64) -> u32 {
        let blocks = self.hashes.blocks(r, prompt);
        let cache = &mut self.fronts[i];
        let cached = cached_tokens(cache.matched(blocks), prompt);
        if !blocks.is_empty() {
            cache.insert(blocks, blocks_in(self.capacity_tokens.unwrap_or(free_kv)));
        }
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
    pub(super) fn init_prefix(&mut self, c: PrefixConfig, hashes: BlockHashes, front_kv_tokens: u64, rule: Rule) {
        if !c.enabled {
            return;
        }
        let mut p = Prefix::new(c, hashes, front_kv_tokens, self.n_front, self.insts.len() - self.n_front);
        p.affinity = matches!(rule, Rule::PrefixAffinity { .. });
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
