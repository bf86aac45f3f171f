//! Batching and admission rules: how many queued requests join the next step. Pure functions of the queue
//! and the instance's state; the engine applies the result.

use std::collections::VecDeque;

/// KV reservation of a request, in tokens: prompt + output (the reference's "oracle" reservation).
#[inline]
pub fn reservation(prompt: u32, output: u32) -> u64 {
    prompt as u64 + output as u64
}

/// Whether a request can ever be admitted by an instance of `capacity` tokens (equality is admitted).
#[inline]
pub fn ever_fits(prompt: u32, output: u32, capacity: u64) -> bool {
    reservation(prompt, output) <= capacity
}

/// How an instance gives out KV memory, in tokens. `block == 0`: the reference's reservation of prompt +
/// output at admission. Otherwise paged: a sequence holds ⌈(prompt + tokens generated)/block⌉ whole blocks
/// (its first token's slot from admission on), grown one block at a time, and an admission must leave
/// `watermark` tokens free — except on an instance holding no KV, so that every request that fits can start.
/// With `hold` (paged KV on a prefill instance of a disaggregated run) a prompt handed off from the instance
/// takes its ⌈prompt/block⌉ blocks when it joins a prefill batch and keeps them until its hand-off lands.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KvRule {
    pub block: u64,
    pub watermark: u64,
    pub hold: bool,
}

impl KvRule {
    /// Prompt + output reserved at admission.
    pub const RESERVE: KvRule = KvRule { block: 0, watermark: 0, hold: false };

    /// KV tokens a request of `prompt` + `output` tokens holds once it has generated `tokens_out` tokens.
    #[inline]
    pub fn held(self, prompt: u32, output: u32, tokens_out: u32) -> u64 {
        if self.block == 0 {
            reservation(prompt, output)
        } else {
            (prompt as u64 + tokens_out as u64).div_ceil(self.block) * self.block
        }
    }

    /// KV tokens taken when a request is admitted (it then has, or is about to get, its first token).
    #[inline]
    pub fn admit(self, prompt: u32, output: u32) -> u64 {
        self.held(prompt, output, 1)
    }

    /// KV tokens taken when a handed-off request joins a decode step at once: its first decode step's slot
    /// included (the step's growth was given out before admission).
    #[inline]
    pub fn admit_decoding(self, prompt: u32, output: u32) -> u64 {
        self.held(prompt, output, 2)
    }

    /// KV tokens a prompt handed off from a holding instance (`hold`) keeps there until its hand-off lands:
    /// its whole blocks (0 without `hold`).
    #[inline]
    pub fn held_prompt(self, prompt: u32) -> u64 {
        if self.hold {
            (prompt as u64).div_ceil(self.block) * self.block
        } else {
            0
        }
    }

    /// Whether `need` more tokens may be given out with `used` of `capacity` in use.
    #[inline]
    pub fn fits(self, used: u64, need: u64, capacity: u64) -> bool {
        let keep = if used == 0 { 0 } else { self.watermark };
        used + need + keep <= capacity
    }
}

/// State an admission decision depends on.
#[derive(Clone, Copy, Debug)]
pub struct Occupancy {
    pub running: u64,
    pub max_batch: u64,
    pub kv_used: u64,
    pub kv_capacity: u64,
    pub rule: KvRule,
}

/// The local (decoded-here) members of a batch being formed: their batch slots and KV, cumulative.
struct Locals {
    kv: u64,
    count: u64,
}

impl Locals {
    fn new(o: &Occupancy) -> Self {
        Locals { kv: o.kv_used, count: 0 }
    }

    /// Take a local candidate of `prompt` + `output` tokens if running + local members stay < `max_batch`
    /// and its KV fits; `false` stops the batch.
    fn admit(&mut self, o: &Occupancy, prompt: u32, output: u32) -> bool {
        let res = o.rule.admit(prompt, output);
        if o.running + self.count >= o.max_batch || !o.rule.fits(self.kv, res, o.kv_capacity) {
            return false;
        }
        self.kv += res;
        self.count += 1;
        true
    }

    /// Take a remote (handed-off) candidate of `prompt` tokens: on a holding instance (`rule.hold`) its
    /// prompt blocks must fit the free KV (no watermark: held blocks never grow); `false` stops the batch.
    fn hold(&mut self, o: &Occupancy, prompt: u32) -> bool {
        let res = o.rule.held_prompt(prompt);
        if res > 0 && self.kv + res > o.kv_capacity {
            return false;
        }
        self.kv += res;
        true
    }
}

/// Decode admission at a step boundary: FIFO while running < `max_batch` and the reservation fits the free
/// KV; the queue head blocks the requests behind it. Returns the number admitted.
#[inline]
pub fn decode_admit_len(queue: &VecDeque<u32>, prompt: &[u32], output: &[u32], o: Occupancy) -> usize {
    decode_admit_len_with(queue, o, |r| o.rule.admit_decoding(prompt[r as usize], output[r as usize]))
}

/// [`decode_admit_len`] with each request's reservation given by `take` (request → KV tokens).
#[inline]
pub fn decode_admit_len_with(queue: &VecDeque<u32>, o: Occupancy, take: impl Fn(u32) -> u64) -> usize {
    let mut kv = o.kv_used;
    for (n, &r) in queue.iter().enumerate() {
        let res = take(r);
        if o.running + n as u64 >= o.max_batch || !o.rule.fits(kv, res, o.kv_capacity) {
            return n;
        }
        kv += res;
    }
    queue.len()
}

/// Prefill batch of a front instance, strict FIFO: the head always (token budget aside), then further
/// prompts while the batch's prompt tokens stay ≤ `max_tokens`. Each candidate is classified by `local`
/// (decoded on this instance) when it is considered; a local candidate must also keep running + local batch
/// members < `max_batch` and its prompt + output reservation must fit the free KV (the reference's
/// colocated rule, head included); a remote candidate on a holding instance ([`KvRule::hold`]) must fit its
/// prompt blocks. Batching stops at the first candidate that fails. The classification of the taken requests
/// is appended to `decided`; returns how many were taken.
///
/// All remote (disaggregated prefill) this is the reference's prefill batch; all local it is the
/// reference's colocated admission.
pub fn front_batch_len(
    queue: &VecDeque<u32>,
    prompt: &[u32],
    output: &[u32],
    max_tokens: u32,
    o: Occupancy,
    mut local: impl FnMut(u32) -> bool,
    decided: &mut Vec<bool>,
) -> usize {
    let mut locals = Locals::new(&o);
    let mut tokens = 0u64;
    for (n, &r) in queue.iter().enumerate() {
        let p = prompt[r as usize] as u64;
        if n > 0 && tokens + p > max_tokens as u64 {
            return n;
        }
        let is_local = local(r);
        if is_local && !locals.admit(&o, prompt[r as usize], output[r as usize]) {
            return n;
        }
        if !is_local && !locals.hold(&o, prompt[r as usize]) {
            return n;
        }
        tokens += p;
        decided.push(is_local);
    }
    queue.len()
}

/// A chunked (Sarathi-style) step of a front instance with `rows` decoding sequences: every decode row takes
/// one token of the `budget`; then the unfinished prompt `partial` (request, tokens already prefilled) takes
/// what it still needs of what is left; then new prompts from the queue, FIFO, each taking what it needs
/// or the rest of the budget (its first chunk), until the budget is spent. A new prompt is admitted as in
/// [`front_batch_len`] (classified by `local`; a local one must keep running + local members <
/// `max_batch` — `o.running` counting the decode rows and a local `partial` — and its prompt + output
/// reservation must fit the free KV; a remote one on a holding instance its whole prompt's blocks);
/// admission stops at the first that fails. There is no other token
/// limit: `max_prefill_tokens` belongs to whole-prompt batching.
///
/// Appends the chunk sizes to `chunks` (first `partial`'s, when it gets one, then the new prompts') and the
/// new prompts' classification to `decided`; returns how many new prompts were taken.
///
/// `cached(r)` (prefix caching; `|_| 0` without) is called once for each new prompt taken, in queue order,
/// when it is taken: the prompt's leading tokens already in the KV cache, which its chunks do not compute
/// (its first chunk is then at most prompt − cached tokens).
#[allow(clippy::too_many_arguments)]
pub fn chunked_batch(
    partial: Option<(u32, u32)>,
    queue: &VecDeque<u32>,
    prompt: &[u32],
    output: &[u32],
    budget: u32,
    rows: u64,
    o: Occupancy,
    mut local: impl FnMut(u32) -> bool,
    mut cached: impl FnMut(u32) -> u32,
    decided: &mut Vec<bool>,
    chunks: &mut Vec<u32>,
) -> usize {
    let mut left = (budget as u64).saturating_sub(rows);
    if let Some((r, done)) = partial {
        if left == 0 {
            return 0;
        }
        let c = (prompt[r as usize] as u64 - done as u64).min(left);
        chunks.push(c as u32);
        left -= c;
    }
    let mut locals = Locals::new(&o);
    for (n, &r) in queue.iter().enumerate() {
        if left == 0 {
            return n;
        }
        let is_local = local(r);
        if is_local && !locals.admit(&o, prompt[r as usize], output[r as usize]) {
            return n;
        }
        if !is_local && !locals.hold(&o, prompt[r as usize]) {
            return n;
        }
        let c = (prompt[r as usize] as u64 - cached(r) as u64).min(left);
        chunks.push(c as u32);
        left -= c;
        decided.push(is_local);
    }
    queue.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(n: u32) -> VecDeque<u32> {
        (0..n).collect()
    }

    const NO_KV: Occupancy =
        Occupancy { running: 0, max_batch: 256, kv_used: 0, kv_capacity: 0, rule: KvRule::RESERVE };

    fn remote(queue: &VecDeque<u32>, prompt: &[u32], max_tokens: u32) -> usize {
        let out = vec![1; prompt.len()];
        let mut d = Vec::new();
        let n = front_batch_len(queue, prompt, &out, max_tokens, NO_KV, |_| false, &mut d);
        assert_eq!(d, vec![false; n]);
        n
    }

    fn local(queue: &VecDeque<u32>, prompt: &[u32], output: &[u32], max_tokens: u32, o: Occupancy) -> usize {
        let mut d = Vec::new();
        let n = front_batch_len(queue, prompt, output, max_tokens, o, |_| true, &mut d);
        assert_eq!(d, vec![true; n]);
        n
    }

    /// Disaggregated prefill (all remote): strict FIFO under the token budget; no KV or batch limit.
    #[test]
    fn prefill_batch_is_strict_fifo_under_the_budget() {
        let prompt = [3000, 3000, 3000, 10];
        assert_eq!(remote(&q(4), &prompt, 8192), 2); // 9000 > 8192 stops; the 10 is not pulled forward
        assert_eq!(remote(&q(4), &[9000, 1, 1, 1], 8192), 1); // an oversize head runs alone
        assert_eq!(remote(&q(3), &[4096, 4096, 1], 8192), 2); // equality fits
        assert_eq!(remote(&VecDeque::new(), &[], 8192), 0);
        assert_eq!(remote(&q(300), &[1; 300], 8192), 300); // no batch limit for remote requests
    }

    /// Mixed batches: only local candidates count against the batch limit and the KV.
    #[test]
    fn mixed_batches_charge_only_local_requests() {
        let occ = Occupancy { running: 1, max_batch: 2, kv_used: 0, kv_capacity: 100, rule: KvRule::RESERVE };
        let mut d = Vec::new();
        // r0 local (fits: 60), r1 remote, r2 local would make running + locals = 2 + … → stops at r2.
        let n = front_batch_len(&q(4), &[50, 500, 10, 10], &[10, 10, 10, 10], 8192, occ, |r| r % 2 == 0, &mut d);
        assert_eq!((n, d), (2, vec![true, false]));
        let mut d = Vec::new();
        let roomy = Occupancy { max_batch: 10, ..occ };
        // r2 local needs 20 more KV: 60 + 20 ≤ 100 fits; r4 local (prompt 30 + 10) would reach 120.
        let n = front_batch_len(&q(5), &[50, 500, 10, 10, 30], &[10; 5], 8192, roomy, |r| r % 2 == 0, &mut d);
        assert_eq!((n, d), (4, vec![true, false, true, false]));
    }

    #[test]
    fn decode_admission_head_blocks_and_batch_limit() {
        let prompt = [100, 100, 1];
        let output = [10, 10, 1];
        let occ =
            |running, kv_used| Occupancy { running, max_batch: 4, kv_used, kv_capacity: 300, rule: KvRule::RESERVE };
        assert_eq!(decode_admit_len(&q(3), &prompt, &output, occ(0, 0)), 3); // 110 + 110 + 2 = 222 ≤ 300
        assert_eq!(decode_admit_len(&q(3), &prompt, &output, occ(0, 100)), 1); // second 110 would reach 320
        assert_eq!(decode_admit_len(&q(3), &prompt, &output, occ(0, 200)), 0); // head blocks the small third
        assert_eq!(decode_admit_len(&q(3), &prompt, &output, occ(3, 0)), 1); // batch limit 4
        assert_eq!(decode_admit_len(&q(3), &prompt, &output, occ(4, 0)), 0);
        assert_eq!(decode_admit_len(&q(1), &[290], &[10], occ(0, 0)), 1); // equality admitted
    }

    /// Colocated admission (all local): the head is exempt from the token budget only.
    #[test]
    fn colocated_admission_rules() {
        let occ = Occupancy { running: 0, max_batch: 256, kv_used: 0, kv_capacity: 1_000_000, rule: KvRule::RESERVE };
        assert_eq!(local(&q(2), &[9000, 5], &[1, 1], 8192, occ), 1);
        assert_eq!(local(&q(3), &[4000, 4000, 500], &[1, 1, 1], 8192, occ), 2);
        // The KV check applies to the head too.
        let full = Occupancy { kv_capacity: 100, ..occ };
        assert_eq!(local(&q(1), &[90], &[20], 8192, full), 0);
        // running + batch < max_batch.
        let busy = Occupancy { running: 255, ..occ };
        assert_eq!(local(&q(3), &[1, 1, 1], &[1, 1, 1], 8192, busy), 1);
    }

    fn chunked(
        partial: Option<(u32, u32)>,
        queue: &VecDeque<u32>,
        prompt: &[u32],
        budget: u32,
        rows: u64,
        o: Occupancy,
        is_local: bool,
    ) -> (usize, Vec<u32>) {
        let output = vec![10; prompt.len()];
        let (mut d, mut c) = (Vec::new(), Vec::new());
        let n = chunked_batch(partial, queue, prompt, &output, budget, rows, o, |_| is_local, |_| 0, &mut d, &mut c);
        assert_eq!(d, vec![is_local; n]);
        (n, c)
    }

    /// Prefix caching: a new prompt's cached tokens are not in its chunk, and `cached` is asked once per prompt
    /// taken, in queue order (not for the prompt the budget stops before).
    #[test]
    fn chunked_new_prompts_skip_their_cached_tokens() {
        let (q, prompt, output) = (q(3), [1000, 600, 50], [10; 3]);
        let (mut d, mut c, mut asked) = (Vec::new(), Vec::new(), Vec::new());
        let cached = |r: u32| {
            asked.push(r);
            [512, 100, 0][r as usize]
        };
        let n = chunked_batch(None, &q, &prompt, &output, 900, 0, NO_KV, |_| false, cached, &mut d, &mut c);
        assert_eq!((n, c), (2, vec![488, 412]));
        assert_eq!(asked, [0, 1]);
    }

    /// Chunked steps: decode rows take one token each first, then the unfinished prompt, then new prompts
    /// FIFO, the last one cut to what is left of the budget; the budget is never exceeded.
    #[test]
    fn chunked_budget_order_and_split() {
        let prompt = [1000, 300, 50, 7];
        // No rows, no partial: 1000 fills 512 and stops.
        assert_eq!(chunked(None, &q(4), &prompt, 512, 0, NO_KV, false), (1, vec![512]));
        // The partial 0 has 488 left; 10 rows leave 502: 488 for it, 14 for the next prompt.
        let queue: VecDeque<u32> = [1, 2, 3].into_iter().collect();
        assert_eq!(chunked(Some((0, 512)), &queue, &prompt, 512, 10, NO_KV, false), (1, vec![488, 14]));
        // Enough budget for everything: whole prompts, all taken.
        assert_eq!(chunked(Some((0, 999)), &queue, &prompt, 10_000, 3, NO_KV, false), (3, vec![1, 300, 50, 7]));
        // Rows use the whole budget: nothing else runs.
        assert_eq!(chunked(Some((0, 0)), &queue, &prompt, 8, 8, NO_KV, false), (0, vec![]));
        assert_eq!(chunked(None, &queue, &prompt, 8, 9, NO_KV, false), (0, vec![]));
        // Exactly filled by the first new prompt: the next is not started.
        assert_eq!(chunked(None, &queue, &prompt, 300, 0, NO_KV, false), (1, vec![300]));
    }

    /// Local prompts in a chunked step are admitted as in whole-prompt batching: batch slots (rows and a local
    /// partial counted through `o.running`) and the KV reservation, FIFO, stopping at the first refusal.
    #[test]
    fn chunked_admission_checks_kv_and_batch() {
        let prompt = [50, 50, 50];
        let occ = Occupancy { running: 1, max_batch: 3, kv_used: 0, kv_capacity: 125, rule: KvRule::RESERVE };
        // Reservations are 60 each: two fit 125, the third would need 180; the batch limit allows two.
        assert_eq!(chunked(None, &q(3), &prompt, 1000, 1, occ, true), (2, vec![50, 50]));
        let tight = Occupancy { max_batch: 2, ..occ };
        assert_eq!(chunked(None, &q(3), &prompt, 1000, 1, tight, true), (1, vec![50]));
        let full = Occupancy { kv_used: 70, ..occ };
        assert_eq!(chunked(None, &q(3), &prompt, 1000, 1, full, true), (0, vec![]));
    }

    #[test]
    fn rejection_boundary_is_inclusive() {
        assert!(ever_fits(100, 50, 150));
        assert!(!ever_fits(100, 51, 150));
        assert!(!ever_fits(u32::MAX, u32::MAX, u32::MAX as u64)); // no overflow
    }

    /// The colocated token budget is inclusive like the disaggregated one: prompts that fill it exactly
    /// (4,096 + 4,096 = 8,192) batch together, and one more token does not.
    #[test]
    fn colocated_budget_equality_fits() {
        let occ = Occupancy { running: 0, max_batch: 256, kv_used: 0, kv_capacity: 1_000_000, rule: KvRule::RESERVE };
        assert_eq!(local(&q(3), &[4096, 4096, 1], &[1, 1, 1], 8192, occ), 2);
        assert_eq!(local(&q(3), &[4096, 4097, 1], &[1, 1, 1], 8192, occ), 1);
    }

    /// The colocated KV check is cumulative over the batch: two requests whose reservations (60 tokens
    /// each) fit the free KV one at a time but not together are not batched together; equality with the
    /// free space is admitted.
    #[test]
    fn colocated_kv_check_accumulates_over_the_batch() {
        let occ = |kv_used| Occupancy { running: 0, max_batch: 256, kv_used, kv_capacity: 100, rule: KvRule::RESERVE };
        let (prompt, output) = ([50, 50], [10, 10]);
        assert_eq!(local(&q(2), &prompt, &output, 8192, occ(0)), 1);
        assert_eq!(local(&q(2), &prompt, &output, 8192, occ(40)), 1);
        assert_eq!(local(&q(2), &prompt, &output, 8192, occ(41)), 0);
        assert_eq!(local(&q(2), &[20, 20], &[20, 20], 8192, occ(20)), 2);
    }
}
