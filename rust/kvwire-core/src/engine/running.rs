//! The running set of a continuous-batching decoder, in two interchangeable representations:
//!
//! * **plain**: one record per sequence, every sequence advanced on every step (the obvious reference);
//! * **fast**: lazy bookkeeping — the total context is a running sum and each sequence is keyed by the step
//!   index at which it finishes (a min-heap), so a step costs O(finishes), not O(batch).
//!
//! Both produce bit-identical results (tested here and end-to-end); the engine picks one per scenario.
//! Paged KV (growth block by block, preemption) has both too: the plain one keeps the context and the
//! block-growth count up to date in its per-step pass; the fast one (**fast paged**, [`FastPaged`]) knows
//! that a sequence admitted at step s₀ with k₀ tokens needs a new block at step i exactly when
//! (prompt + k₀ − s₀ + i) is a multiple of the block size, so it counts the running sequences per residue
//! (prompt + k₀ − s₀) mod block and reads the growth count of a step in O(1); it keeps the admission order
//! (for preempting the most recent) as a stack of records whose liveness follows from the step index, and
//! drops preempted sequences' finish entries lazily.
//! Speculative decoding has both too: the plain set draws each sequence's accepted drafts on every step; the
//! fast one (**fast speculative**, [`FastSpec`]) draws a sequence's whole run at admission (the draws are
//! keyed by request and tokens, not by step, so they are the same draws), which gives its finishing step,
//! and adds what it gains on each of its steps into a per-step schedule, so a step costs O(finishes).

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, VecDeque};

use crate::metrics::itl::ItlHistogram;
use crate::policy::batching::KvRule;

/// Read-only per-request columns a step needs.
#[derive(Clone, Copy)]
pub struct Cols<'a> {
    pub prompt: &'a [u32],
    pub output: &'a [u32],
    pub first_token_s: &'a [f64],
    pub measured: &'a [bool],
}

#[derive(Clone, Debug)]
struct Seq {
    req: u32,
    tokens_out: u32,
    /// Draft tokens accepted so far (speculative decoding; 0 otherwise).
    accepted: u32,
    newly: bool,
    /// A resumed sequence (swapped back in): when it got its last token (`NaN` otherwise).
    since: f64,
    /// Its prompt and output lengths and whether it is measured, copied at admission so that a step reads
    /// only this record (not three columns of the table at random rows).
    prompt: u32,
    output: u32,
    measured: bool,
}

impl Seq {
    fn new(r: u32, tokens_out: u32, newly: bool, since: f64, c: Cols) -> Self {
        let i = r as usize;
        Seq {
            req: r,
            tokens_out,
            accepted: 0,
            newly,
            since,
            prompt: c.prompt[i],
            output: c.output[i],
            measured: c.measured[i],
        }
    }
}

/// (`repr(u8)`: an explicit one-byte tag, so telling the representations apart on every step is one compare
/// rather than decoding a niche in a vector's capacity.)
#[derive(Clone, Debug)]
#[repr(u8)]
enum Repr {
    /// With `block` > 0 (paged KV), `ctx` = Σ (prompt + tokens generated) and `needing` = the sequences
    /// whose next token starts a new block of `block` tokens are kept up to date (0 and unused otherwise).
    Plain {
        seqs: Vec<Seq>,
        block: u64,
        ctx: u64,
        needing: u64,
    },
    Fast {
        /// (finishing step index, request), smallest first.
        finish_at: BinaryHeap<Reverse<(u64, u32)>>,
        ctx_tokens: u64,
        step_index: u64,
        /// Admitted since the last step, in admission order.
        newly: Vec<u32>,
        measured_running: u64,
        measured_newly: u64,
    },
    FastPaged(Box<FastPaged>),
    FastSpec(Box<FastSpec>),
}

/// A sequence of the fast paged set, as it was when it joined (admitted or resumed).
#[derive(Clone, Debug)]
struct Rec {
    req: u32,
    /// Tokens generated when it joined, and the step index it joined at.
    k0: u32,
    s0: u64,
    /// Admitted (not resumed) at `s0`.
    newly: bool,
    /// A resumed sequence: when it got its last token (`NaN`: at the instance's last step end).
    since: f64,
    /// Its growth residue (prompt + k₀ − s₀) mod block.
    key: u32,
}

/// The fast representation of a paged running set (see the module's notes).
#[derive(Clone, Debug)]
pub struct FastPaged {
    block: u64,
    /// (finishing step index, request, growth residue), smallest first; entries of preempted sequences stay
    /// until reached and are skipped (`cancelled`: how many entries of each are stale — a sequence preempted,
    /// resumed and preempted again before a step leaves two).
    finish_at: BinaryHeap<Reverse<(u64, u32, u32)>>,
    cancelled: HashMap<(u64, u32), u32>,
    ctx: u64,
    step_index: u64,
    /// Running sequences per growth residue.
    by_key: Vec<u32>,
    /// Every sequence that joined, in joining order; finished ones (tokens reached output) are dead and are
    /// dropped when found at the top or by a compaction.
    order: Vec<Rec>,
    /// Joined since the last step, in joining order: admitted ones, and measured resumed ones' `since`.
    newly: Vec<u32>,
    resumed: Vec<f64>,
    measured_running: u64,
    measured_newly: u64,
    measured_resumed: u64,
}

impl FastPaged {
    /// The growth residue of a sequence of `prompt` tokens joining with `k0` tokens generated now.
    #[inline]
    fn key(&self, prompt: u32, k0: u32) -> u32 {
        let b = self.block;
        ((prompt as u64 % b + k0 as u64 % b + b - self.step_index % b) % b) as u32
    }

    /// A sequence joins: request `r` with `k0` tokens generated, admitted (`newly`) or resumed.
    #[inline(never)]
    fn join(&mut self, r: u32, k0: u32, newly: bool, since: f64, c: Cols) {
        let i = r as usize;
        let (p, o, m) = (c.prompt[i], c.output[i], c.measured[i]);
        let key = self.key(p, k0);
        self.finish_at.push(Reverse((self.step_index + (o - k0) as u64 - 1, r, key)));
        self.by_key[key as usize] += 1;
        self.ctx += p as u64 + k0 as u64;
        self.measured_running += m as u64;
        if newly {
            self.newly.push(r);
            self.measured_newly += m as u64;
        } else if m && !since.is_nan() {
            self.resumed.push(since);
            self.measured_resumed += 1;
        }
        if self.order.len() >= 64 && self.order.len() > 4 * self.finish_at.len() {
            let (step, out) = (self.step_index, c.output);
            self.order.retain(|x| (x.k0 as u64 + step - x.s0) < out[x.req as usize] as u64);
        }
        self.order.push(Rec { req: r, k0, s0: self.step_index, newly, since, key });
    }

    /// Sequences whose next token starts a new block.
    #[inline]
    fn needing(&self) -> u64 {
        let b = self.block;
        self.by_key[((b - self.step_index % b) % b) as usize] as u64
    }

    /// Remove the most recently joined running sequence: its request, tokens generated and when it got its
    /// last token.
    fn pop_last(&mut self, c: Cols, last_step_end: f64) -> Option<(u32, u32, f64)> {
        let step = self.step_index;
        while let Some(x) = self.order.pop() {
            let i = x.req as usize;
            let tokens = x.k0 as u64 + step - x.s0;
            if tokens >= c.output[i] as u64 {
                continue; // finished
            }
            let (p, m) = (c.prompt[i], c.measured[i]);
            *self.cancelled.entry((x.s0 + (c.output[i] - x.k0) as u64 - 1, x.req)).or_insert(0) += 1;
            self.by_key[x.key as usize] -= 1;
            self.ctx -= p as u64 + tokens;
            self.measured_running -= m as u64;
            let joined_now = x.s0 == step;
            let last = if joined_now && x.newly {
                self.newly.pop();
                self.measured_newly -= m as u64;
                c.first_token_s[i]
            } else if joined_now && !x.since.is_nan() {
                if m {
                    self.resumed.pop();
                    self.measured_resumed -= 1;
                }
                x.since
            } else {
                last_step_end
            };
            return Some((x.req, tokens as u32, last));
        }
        None
    }

    /// Whether the finish entry (`step`, `r`) is stale (and forget one such).
    fn cancel(&mut self, step: u64, r: u32) -> bool {
        let Some(n) = self.cancelled.get_mut(&(step, r)) else { return false };
        *n -= 1;
        if *n == 0 {
            self.cancelled.remove(&(step, r));
        }
        true
    }

    /// One decode step ending at `end` (see [`RunningSet::complete_step`]); returns the sequences left.
    /// (Out of line: the reserved-KV paths that share `complete_step` stay as small as before.)
    #[inline(never)]
    fn step(
        &mut self,
        len: usize,
        end: f64,
        gap: f64,
        c: Cols,
        itl: &mut ItlHistogram,
        finished: &mut Vec<u32>,
    ) -> usize {
        itl.record(gap, self.measured_running - self.measured_newly - self.measured_resumed);
        for &r in &self.newly {
            if c.measured[r as usize] {
                itl.record(end - c.first_token_s[r as usize], 1);
            }
        }
        for &since in &self.resumed {
            itl.record(end - since, 1);
        }
        self.newly.clear();
        self.resumed.clear();
        self.measured_newly = 0;
        self.measured_resumed = 0;
        self.ctx += len as u64;
        let mut left = len;
        while let Some(&Reverse((step, r, key))) = self.finish_at.peek() {
            if step != self.step_index {
                break;
            }
            self.finish_at.pop();
            if !self.cancelled.is_empty() && self.cancel(step, r) {
                continue;
            }
            let i = r as usize;
            finished.push(r);
            self.ctx -= c.prompt[i] as u64 + c.output[i] as u64;
            self.measured_running -= c.measured[i] as u64;
            self.by_key[key as usize] -= 1;
            left -= 1;
        }
        self.step_index += 1;
        left
    }
}

/// Speculative decoding on a running set (plain, plain paged or fast speculative): every step verifies γ
/// drafted tokens per sequence and the sequence keeps the leading accepted ones plus one token of its own.
///
/// Draft position i is accepted with probability `acceptance[i]` given that the ones before it were, so a step
/// keeps at least i drafts with probability c_i = Π_{j<i} acceptance[j]. One uniform draw u per sequence and
/// step gives the count: the number of i in 1..=γ with u < c_i (inverse transform; the c_i decrease). With
/// u = m · 2⁻⁵³ for a 53-bit integer m, u < c_i exactly when m < ⌈c_i · 2⁵³⌉, so the comparison is made on
/// integers (the same counts as in floating point, with fewer instructions on the draw's path). The draw
/// comes from a counter-based generator keyed by (seed, request, tokens the request has): the same draws
/// whatever instance, step or order the request runs in, so a run is deterministic and independent of the
/// representation and of the other requests.
#[derive(Clone, Debug)]
pub struct Speculation {
    /// ⌈c_i · 2⁵³⌉ for c_1..c_γ, the probability of keeping at least i drafts.
    at_least: Vec<u64>,
    pub seed: u64,
    /// Σ over verify steps and sequences of the draft tokens accepted, and of the sequences verified.
    pub accepted_sum: u64,
    pub verified_rows: u64,
    /// Requests finished since the engine last took them, with their accepted totals.
    pub done: Vec<(u32, u32)>,
    /// Paged KV: the accepted totals of preempted sequences, kept until they resume or finish.
    pub parked: HashMap<u32, u32>,
}

impl Speculation {
    pub fn new(acceptance: Vec<f64>, seed: u64) -> Self {
        let mut p = 1.0;
        let at_least = acceptance
            .iter()
            .map(|&a| {
                p *= a;
                // c · 2⁵³ is exact (a power-of-two scale of c ∈ [0, 1]), so its ceiling is too.
                (p * TWO_53).ceil() as u64
            })
            .collect();
        Speculation { at_least, seed, accepted_sum: 0, verified_rows: 0, done: Vec::new(), parked: HashMap::new() }
    }

    /// Tokens request `req` (`output` tokens in all) gets on the step after its `tokens_out`-th token (< output):
    /// one of its own and the drafts it accepts, at most what is left.
    #[inline]
    pub fn gets(&self, req: u32, output: u32, tokens_out: u32) -> u32 {
        1 + self.kept(req, output, tokens_out)
    }

    /// The drafts request `req` keeps on the step after its `tokens_out`-th token (< output): those it
    /// accepts, at most what its output has left after the step's own token.
    #[inline]
    pub fn kept(&self, req: u32, output: u32, tokens_out: u32) -> u32 {
        self.accepted(req, tokens_out).min(output - tokens_out - 1)
    }

    /// Draft tokens request `req` accepts on the step after its `tokens_out`-th token.
    #[inline]
    pub fn accepted(&self, req: u32, tokens_out: u32) -> u32 {
        let m = draw(self.seed, req, tokens_out);
        // The c_i do not increase, so the i with u < c_i are the leading ones: counted without a branch (the
        // count is data-dependent, and a loop that stops at the first miss mispredicts on every draw).
        self.at_least.iter().map(|&c| (m < c) as u32).sum()
    }
}

/// 2⁵³, the draws' resolution.
const TWO_53: f64 = (1u64 << 53) as f64;

/// The draw for (seed, request, tokens) as a 53-bit integer m, the uniform draw in [0, 1) being m · 2⁻⁵³:
/// SplitMix64's finaliser over a mix of the three ([`mix53`]).
#[inline]
fn draw(seed: u64, req: u32, tokens_out: u32) -> u64 {
    mix53(
        (seed ^ 0xD1B5_4A32_D192_ED03) ^ (((req as u64) << 32) | tokens_out as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15),
    )
}

/// SplitMix64's finaliser (Steele, Lea & Flood, "Fast splittable pseudorandom number generators", OOPSLA
/// 2014) of `z`, its top 53 bits: the engine's keyed draws (speculative acceptance, faults) mix their keys
/// into `z` and take this.
#[inline]
pub(super) fn mix53(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    z >> 11
}

/// The fast representation of a speculative running set (see the module's notes): a sequence's accepted
/// drafts on each of its steps are drawn when it is admitted, with the same keyed draws the plain set makes
/// step by step, so both give the same tokens, finishes and gaps.
#[derive(Clone, Debug)]
pub struct FastSpec {
    /// (finishing step index, request, draft tokens it accepts in all), smallest first.
    finish_at: BinaryHeap<Reverse<(u64, u32, u32)>>,
    ctx: u64,
    step_index: u64,
    /// Admitted since the last step, in admission order.
    newly: Vec<u32>,
    measured_running: u64,
    measured_newly: u64,
    /// From the step `step_index` on, per step: the tokens the running sequences gain in it, and the tokens
    /// measured sequences gain beyond their first (which arrive with it: a gap of 0).
    ahead: VecDeque<[u64; 2]>,
}

impl FastSpec {
    /// Admit request `r` (its first token generated): draw its run, schedule its gains and its finish.
    #[inline(never)]
    fn admit(&mut self, r: u32, c: Cols, spec: &Speculation) {
        let i = r as usize;
        let (out, measured) = (c.output[i], c.measured[i]);
        let (mut k, mut j, mut acc) = (1u32, 0usize, 0u32);
        loop {
            let a = spec.kept(r, out, k);
            if j == self.ahead.len() {
                self.ahead.push_back([0, 0]);
            }
            let slot = &mut self.ahead[j];
            slot[0] += 1 + a as u64;
            if measured {
                slot[1] += a as u64;
            }
            acc += a;
            k += 1 + a;
            if k >= out {
                break;
            }
            j += 1;
        }
        self.finish_at.push(Reverse((self.step_index + j as u64, r, acc)));
        self.ctx += c.prompt[i] as u64 + 1;
        self.newly.push(r);
        if measured {
            self.measured_running += 1;
            self.measured_newly += 1;
        }
    }

    /// One decode step ending at `end` (see [`RunningSet::complete_step`]); returns the sequences left.
    #[inline(never)]
    #[allow(clippy::too_many_arguments)]
    fn step(
        &mut self,
        len: usize,
        end: f64,
        gap: f64,
        c: Cols,
        itl: &mut ItlHistogram,
        finished: &mut Vec<u32>,
        spec: &mut Speculation,
    ) -> usize {
        // The plain set's order: continuing gaps, then each newly admitted one, then the zero gaps.
        itl.record(gap, self.measured_running - self.measured_newly);
        for &r in &self.newly {
            if c.measured[r as usize] {
                itl.record(end - c.first_token_s[r as usize], 1);
            }
        }
        self.newly.clear();
        self.measured_newly = 0;
        let [gained, together] = self.ahead.pop_front().unwrap_or([0, 0]);
        if together > 0 {
            itl.record(0.0, together);
        }
        spec.accepted_sum += gained - len as u64;
        spec.verified_rows += len as u64;
        self.ctx += gained;
        let mut left = len;
        while let Some(&Reverse((step, r, acc))) = self.finish_at.peek() {
            if step != self.step_index {
                break;
            }
            self.finish_at.pop();
            finished.push(r);
            spec.done.push((r, acc));
            let i = r as usize;
            self.ctx -= c.prompt[i] as u64 + c.output[i] as u64;
            self.measured_running -= c.measured[i] as u64;
            left -= 1;
        }
        self.step_index += 1;
        left
    }
}

/// Sequences currently decoding on one instance.
#[derive(Clone, Debug)]
pub struct RunningSet {
    repr: Repr,
    len: usize,
    /// Speculative decoding (`None`: one token per sequence and step).
    pub spec: Option<Box<Speculation>>,
}

impl RunningSet {
    /// A set keeping the block-growth counts of paged KV with `block`-token blocks: the fast paged
    /// representation when `fast`, else the plain one.
    pub fn paged(block: u64, fast: bool) -> Self {
        let repr = if fast {
            Repr::FastPaged(Box::new(FastPaged {
                block,
                finish_at: BinaryHeap::new(),
                cancelled: HashMap::new(),
                ctx: 0,
                step_index: 0,
                by_key: vec![0; block as usize],
                order: Vec::new(),
                newly: Vec::new(),
                resumed: Vec::new(),
                measured_running: 0,
                measured_newly: 0,
                measured_resumed: 0,
            }))
        } else {
            Repr::Plain { seqs: Vec::new(), block, ctx: 0, needing: 0 }
        };
        RunningSet { repr, len: 0, spec: None }
    }

    /// A plain paged set ([`Self::paged`]) whose steps verify drafted tokens ([`Speculation`]).
    pub fn paged_speculative(block: u64, spec: Speculation) -> Self {
        let mut set = Self::paged(block, false);
        set.spec = Some(Box::new(spec));
        set
    }

    /// A set whose steps verify drafted tokens ([`Speculation`]): the fast speculative representation when
    /// `fast`, else the plain one.
    pub fn speculative(spec: Speculation, fast: bool) -> Self {
        let mut set = Self::new(false);
        if fast {
            set.repr = Repr::FastSpec(Box::new(FastSpec {
                finish_at: BinaryHeap::new(),
                ctx: 0,
                step_index: 0,
                newly: Vec::new(),
                measured_running: 0,
                measured_newly: 0,
                ahead: VecDeque::new(),
            }));
        }
        set.spec = Some(Box::new(spec));
        set
    }

    pub fn new(fast: bool) -> Self {
        let repr = if fast {
            Repr::Fast {
                finish_at: BinaryHeap::new(),
                ctx_tokens: 0,
                step_index: 0,
                newly: Vec::new(),
                measured_running: 0,
                measured_newly: 0,
            }
        } else {
            Repr::Plain { seqs: Vec::new(), block: 0, ctx: 0, needing: 0 }
        };
        RunningSet { repr, len: 0, spec: None }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Σ (prompt + tokens generated so far) over the running sequences: the cached context of a step.
    #[inline]
    pub fn ctx_tokens(&self, prompt: &[u32]) -> u64 {
        match &self.repr {
            Repr::Fast { ctx_tokens, .. } => *ctx_tokens,
            Repr::Plain { ctx, block, .. } if *block > 0 => *ctx,
            Repr::Plain { seqs, .. } => seqs.iter().map(|s| prompt[s.req as usize] as u64 + s.tokens_out as u64).sum(),
            Repr::FastPaged(f) => f.ctx,
            Repr::FastSpec(f) => f.ctx,
        }
    }

    /// Empty the set, as when its instance fails: the requests it held, in ascending row order (the same for
    /// either representation). `None` for the paged sets, which faults do not run with (refused at
    /// validation).
    pub fn drain_requests(&mut self) -> Option<Vec<u32>> {
        let mut out: Vec<u32> = match &mut self.repr {
            Repr::Plain { seqs, block: 0, ctx, needing } => {
                (*ctx, *needing) = (0, 0);
                seqs.drain(..).map(|s| s.req).collect()
            }
            Repr::Fast { finish_at, ctx_tokens, newly, measured_running, measured_newly, .. } => {
                (*ctx_tokens, *measured_running, *measured_newly) = (0, 0, 0);
                newly.clear();
                finish_at.drain().map(|Reverse((_, r))| r).collect()
            }
            Repr::FastSpec(f) => {
                (f.ctx, f.measured_running, f.measured_newly) = (0, 0, 0);
                f.newly.clear();
                // Every gain still ahead belonged to a sequence now gone.
                f.ahead.clear();
                f.finish_at.drain().map(|Reverse((_, r, _))| r).collect()
            }
            _ => return None,
        };
        out.sort_unstable();
        self.len = 0;
        Some(out)
    }

    /// Add request `r`, which already has its first token (output ≥ 2 required).
    pub fn admit(&mut self, r: u32, c: Cols) {
        debug_assert!(c.output[r as usize] >= 2);
        self.len += 1;
        match &mut self.repr {
            Repr::Plain { seqs, block, ctx, needing } => {
                seqs.push(Seq::new(r, 1, true, f64::NAN, c));
                let (p, o) = (c.prompt[r as usize], c.output[r as usize]);
                count_in(*block, ctx, needing, p as u64 + 1, grow_blocks(self.spec.as_deref(), *block, r, p, o, 1));
            }
            Repr::Fast { finish_at, ctx_tokens, step_index, newly, measured_running, measured_newly } => {
                // output − 1 decode steps: the first is `step_index`, the last `step_index + output − 2`.
                finish_at.push(Reverse((*step_index + c.output[r as usize] as u64 - 2, r)));
                *ctx_tokens += c.prompt[r as usize] as u64 + 1;
                newly.push(r);
                if c.measured[r as usize] {
                    *measured_running += 1;
                    *measured_newly += 1;
                }
            }
            Repr::FastPaged(f) => f.join(r, 1, true, f64::NAN, c),
            Repr::FastSpec(f) => match self.spec.as_deref() {
                Some(spec) => f.admit(r, c, spec),
                None => unreachable!("a fast speculative set has its speculation"),
            },
        }
    }

    /// Paged KV ([`Self::paged`]): the new blocks the running sequences' next step needs — one for each
    /// whose next token starts a block (prompt + tokens generated is a whole number of blocks); with
    /// speculative decoding, the blocks of all the tokens the step gives each ([`Self::step_blocks`]).
    pub fn needing_block(&self) -> u64 {
        match &self.repr {
            Repr::Plain { needing, .. } => *needing,
            Repr::Fast { .. } | Repr::FastSpec(_) => 0,
            Repr::FastPaged(f) => f.needing(),
        }
    }

    /// Paged KV: the new blocks the next step of request `r` (`prompt` and `output` tokens, `k` generated)
    /// needs on this set (see [`Self::needing_block`]).
    pub fn step_blocks(&self, r: u32, prompt: u32, output: u32, k: u32) -> u64 {
        let block = match &self.repr {
            Repr::Plain { block, .. } => *block,
            Repr::FastPaged(f) => f.block,
            Repr::Fast { .. } | Repr::FastSpec(_) => 0,
        };
        grow_blocks(self.spec.as_deref(), block, r, prompt, output, k)
    }

    /// KV tokens request `r` (`prompt`, `output`, `k` generated) holds under `rule` together with what its next
    /// decode step needs ([`Self::step_blocks`]): what it must be given to run that step.
    pub fn step_take(&self, rule: KvRule, r: u32, prompt: u32, output: u32, k: u32) -> u64 {
        rule.held(prompt, output, k) + self.step_blocks(r, prompt, output, k) * rule.block
    }

    /// Remove the most recently admitted sequence (plain representation): its request, tokens generated and
    /// when it got its last token (`last_step_end` unless it is new or resumed since the last step).
    pub fn preempt_last(&mut self, c: Cols, last_step_end: f64) -> Option<(u32, u32, f64)> {
        match &mut self.repr {
            Repr::Plain { seqs, block, ctx, needing } => {
                let s = seqs.pop()?;
                self.len -= 1;
                let grow = grow_blocks(self.spec.as_deref(), *block, s.req, s.prompt, s.output, s.tokens_out);
                count_out(*block, ctx, needing, s.prompt as u64 + s.tokens_out as u64, grow);
                if let Some(sp) = self.spec.as_deref_mut() {
                    sp.parked.insert(s.req, s.accepted);
                }
                let last = if s.newly {
                    c.first_token_s[s.req as usize]
                } else if !s.since.is_nan() {
                    s.since
                } else {
                    last_step_end
                };
                Some((s.req, s.tokens_out, last))
            }
            Repr::FastPaged(f) => {
                let out = f.pop_last(c, last_step_end)?;
                self.len -= 1;
                Some(out)
            }
            Repr::Fast { .. } | Repr::FastSpec(_) => unreachable!("paged KV runs on a paged representation"),
        }
    }

    /// Add back a preempted sequence (plain representation) with `tokens_out` tokens generated, the last at
    /// `since` (`NaN`: at the instance's last step end, as a continuing sequence).
    pub fn resume(&mut self, r: u32, tokens_out: u32, since: f64, c: Cols) {
        match &mut self.repr {
            Repr::Plain { seqs, block, ctx, needing } => {
                let mut s = Seq::new(r, tokens_out, false, since, c);
                if let Some(sp) = self.spec.as_deref_mut() {
                    s.accepted = sp.parked.remove(&r).unwrap_or(0);
                }
                let grow = grow_blocks(self.spec.as_deref(), *block, r, s.prompt, s.output, tokens_out);
                count_in(*block, ctx, needing, s.prompt as u64 + tokens_out as u64, grow);
                seqs.push(s);
            }
            Repr::FastPaged(f) => f.join(r, tokens_out, false, since, c),
            Repr::Fast { .. } | Repr::FastSpec(_) => unreachable!("paged KV runs on a paged representation"),
        }
        self.len += 1;
    }

    /// Complete one decode step ending at `end`: every sequence gains a token. Inter-token gaps of measured
    /// sequences go to `itl` (first the continuing ones, which all waited `continuing_gap`, then each newly
    /// admitted one, which waited since its first token, in admission order). Finished requests are
    /// appended to `finished`. (Always inlined: the engine's decode step is one frame.)
    #[inline(always)]
    pub fn complete_step(
        &mut self,
        end: f64,
        continuing_gap: f64,
        c: Cols,
        itl: &mut ItlHistogram,
        finished: &mut Vec<u32>,
    ) {
        match &mut self.repr {
            Repr::Plain { seqs, block, ctx, needing } => {
                let spec = self.spec.as_deref_mut();
                self.len = plain_step(seqs, *block, ctx, needing, end, continuing_gap, c, itl, finished, spec);
            }
            Repr::Fast { finish_at, ctx_tokens, step_index, newly, measured_running, measured_newly } => {
                itl.record(continuing_gap, *measured_running - *measured_newly);
                for &r in newly.iter() {
                    if c.measured[r as usize] {
                        itl.record(end - c.first_token_s[r as usize], 1);
                    }
                }
                newly.clear();
                *measured_newly = 0;
                *ctx_tokens += self.len as u64;
                while let Some(&Reverse((step, r))) = finish_at.peek() {
                    if step != *step_index {
                        break;
                    }
                    finish_at.pop();
                    finished.push(r);
                    *ctx_tokens -= c.prompt[r as usize] as u64 + c.output[r as usize] as u64;
                    if c.measured[r as usize] {
                        *measured_running -= 1;
                    }
                    self.len -= 1;
                }
                *step_index += 1;
            }
            Repr::FastPaged(f) => self.len = f.step(self.len, end, continuing_gap, c, itl, finished),
            Repr::FastSpec(f) => match self.spec.as_deref_mut() {
                Some(spec) => self.len = f.step(self.len, end, continuing_gap, c, itl, finished, spec),
                None => unreachable!("a fast speculative set has its speculation"),
            },
        }
    }
}

/// [`RunningSet::complete_step`] on the plain representation (out of line: the fast sets' steps, which the
/// engine runs by default, stay small where it is inlined); returns the sequences left.
#[allow(clippy::too_many_arguments)]
#[inline(never)]
fn plain_step(
    seqs: &mut Vec<Seq>,
    block: u64,
    ctx: &mut u64,
    needing: &mut u64,
    end: f64,
    continuing_gap: f64,
    c: Cols,
    itl: &mut ItlHistogram,
    finished: &mut Vec<u32>,
    mut spec: Option<&mut Speculation>,
) -> usize {
    // One pass: tokens, gaps, finishes, and (paged) the context and block-growth counts.
    let (mut sum, mut need) = (0u64, 0u64);
    let mut continuing = 0u64;
    // Speculative decoding: tokens beyond a sequence's first of the step arrive with it (a gap of 0).
    let mut together = 0u64;
    let mut newly = Vec::new();
    let mut resumed = Vec::new();
    seqs.retain_mut(|s| {
        if s.measured {
            if s.newly {
                newly.push(s.req);
            } else if !s.since.is_nan() {
                resumed.push(s.since);
            } else {
                continuing += 1;
            }
        }
        s.newly = false;
        s.since = f64::NAN;
        let mut got = 1;
        if let Some(sp) = spec.as_deref_mut() {
            let accepted = sp.kept(s.req, s.output, s.tokens_out);
            sp.accepted_sum += accepted as u64;
            sp.verified_rows += 1;
            s.accepted += accepted;
            got += accepted;
            if s.measured {
                together += accepted as u64;
            }
        }
        s.tokens_out += got;
        let done = s.tokens_out >= s.output;
        if done {
            finished.push(s.req);
            if let Some(sp) = spec.as_deref_mut() {
                sp.done.push((s.req, s.accepted));
            }
        } else if block > 0 {
            let tokens = s.prompt as u64 + s.tokens_out as u64;
            sum += tokens;
            need += match spec.as_deref() {
                None => (tokens % block == 0) as u64,
                Some(sp) => grow_blocks(Some(sp), block, s.req, s.prompt, s.output, s.tokens_out),
            };
        }
        !done
    });
    itl.record(continuing_gap, continuing);
    for r in newly {
        itl.record(end - c.first_token_s[r as usize], 1);
    }
    if together > 0 {
        itl.record(0.0, together);
    }
    for since in resumed {
        itl.record(end - since, 1);
    }
    if block > 0 {
        (*ctx, *needing) = (sum, need);
    }
    seqs.len()
}

/// Paged KV with `block`-token blocks: the new blocks the next step of a sequence of `prompt` tokens with
/// `k` of its `output` generated needs — one when its next token starts a block; with speculative decoding,
/// the blocks of every token the step gives it (its draws are keyed by request and tokens, so they are known
/// before the step). 0 without paging.
#[inline]
fn grow_blocks(spec: Option<&Speculation>, block: u64, req: u32, prompt: u32, output: u32, k: u32) -> u64 {
    if block == 0 {
        return 0;
    }
    let tokens = prompt as u64 + k as u64;
    match spec {
        None => (tokens % block == 0) as u64,
        Some(sp) => (tokens + sp.gets(req, output, k) as u64).div_ceil(block) - tokens.div_ceil(block),
    }
}

/// A sequence holding `tokens` of context, whose next step needs `grow` new blocks, joins the paged counts.
#[inline]
fn count_in(block: u64, ctx: &mut u64, needing: &mut u64, tokens: u64, grow: u64) {
    if block > 0 {
        *ctx += tokens;
        *needing += grow;
    }
}

/// A sequence holding `tokens` of context, whose next step needed `grow` new blocks, leaves the paged counts.
#[inline]
fn count_out(block: u64, ctx: &mut u64, needing: &mut u64, tokens: u64, grow: u64) {
    if block > 0 {
        *ctx -= tokens;
        *needing -= grow;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Drive both representations through the same admissions and steps; everything must agree.
    fn drive(script: &[(Vec<(u32, u32)>, f64)], fast: bool) -> (Vec<(u64, Vec<u32>)>, Vec<u64>) {
        let mut prompt = Vec::new();
        let mut output = Vec::new();
        for (adm, _) in script {
            for &(p, o) in adm {
                prompt.push(p);
                output.push(o);
            }
        }
        let n = prompt.len();
        let first_token: Vec<f64> = (0..n).map(|i| i as f64 * 0.001).collect();
        let measured: Vec<bool> = (0..n).map(|i| i % 3 != 0).collect();
        let c = Cols { prompt: &prompt, output: &output, first_token_s: &first_token, measured: &measured };
        let mut rs = RunningSet::new(fast);
        let mut itl = ItlHistogram::default();
        let mut next = 0u32;
        let mut trace = Vec::new();
        let mut t = 1.0;
        for (adm, dt) in script {
            for _ in adm {
                rs.admit(next, c);
                next += 1;
            }
            if rs.is_empty() {
                continue;
            }
            let ctx = rs.ctx_tokens(&prompt);
            let mut fin = Vec::new();
            t += dt;
            rs.complete_step(t, *dt, c, &mut itl, &mut fin);
            fin.sort_unstable();
            trace.push((ctx, fin));
        }
        let q = itl.quantiles();
        let bits =
            [q.count, q.p50.unwrap_or(0.0).to_bits(), q.max.unwrap_or(0.0).to_bits(), q.mean.unwrap_or(0.0).to_bits()];
        (trace, bits.to_vec())
    }

    /// The integer comparison of a draw m with ⌈c · 2⁵³⌉ decides exactly as the floating-point comparison of the
    /// uniform m · 2⁻⁵³ with c: on random draws against random thresholds, on thresholds at and next to the draw
    /// itself, and at c = 0 and c = 1.
    #[test]
    fn integer_thresholds_decide_as_floats() {
        let mut z = 0x1234_5678_9ABC_DEF0u64;
        let mut next = || {
            z = z.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            z
        };
        for _ in 0..200_000 {
            let (seed, req, k) = (next(), next() as u32, next() as u32);
            let m = draw(seed, req, k);
            let u = m as f64 / TWO_53;
            let candidates = [
                (next() >> 11) as f64 / TWO_53,
                u,
                (m + 1) as f64 / TWO_53,
                m.saturating_sub(1) as f64 / TWO_53,
                0.0,
                1.0,
                f64::from_bits(u.to_bits() + 1).min(1.0),
            ];
            for c in candidates {
                let t = (c * TWO_53).ceil() as u64;
                assert_eq!(m < t, u < c, "m {m} c {c}");
            }
        }
    }

    #[test]
    fn single_sequence_lifecycle() {
        // prompt 10, output 3: two decode steps; contexts 11 then 12; finishes after the second.
        let script = vec![(vec![(10, 3)], 0.01), (vec![], 0.01), (vec![], 0.01)];
        for fast in [false, true] {
            let (trace, _) = drive(&script, fast);
            assert_eq!(trace, vec![(11, vec![]), (12, vec![0])], "fast={fast}");
        }
    }

    /// Brute-force recount of the paged counts of a plain set: with speculative decoding, the new blocks of
    /// each sequence's next step from the tokens that step gives it (the draw, 1 + accepted, at most what is
    /// left), counted as whole blocks after less whole blocks before.
    fn recount(rs: &RunningSet, prompt: &[u32], block: u64) -> (u64, u64) {
        let Repr::Plain { seqs, .. } = &rs.repr else { unreachable!() };
        let ctx = seqs.iter().map(|s| prompt[s.req as usize] as u64 + s.tokens_out as u64).sum();
        let need = match rs.spec.as_deref() {
            None => seqs.iter().filter(|s| (prompt[s.req as usize] as u64 + s.tokens_out as u64) % block == 0).count()
                as u64,
            Some(sp) => seqs
                .iter()
                .map(|s| {
                    let now = prompt[s.req as usize] as u64 + s.tokens_out as u64;
                    let left = (s.output - s.tokens_out) as u64;
                    let next = now + (1 + sp.accepted(s.req, s.tokens_out) as u64).min(left);
                    let blocks = |t: u64| t.div_ceil(block);
                    blocks(next) - blocks(now)
                })
                .sum(),
        };
        (ctx, need)
    }

    proptest! {
        /// The paged set's running context and block-growth count, kept incrementally through admissions,
        /// steps, preemptions and resumptions, equal a recount over its sequences after every operation (with
        /// and without speculative decoding).
        #[test]
        fn paged_counts_equal_a_recount(
            reqs in prop::collection::vec((1u32..300, 2u32..60), 1..60),
            ops in prop::collection::vec(0u8..4, 1..300),
            block in 1u64..40,
            spec in prop::option::of((prop::collection::vec(0.0f64..1.0, 1..6), any::<u64>())),
        ) {
            let prompt: Vec<u32> = reqs.iter().map(|r| r.0).collect();
            let output: Vec<u32> = reqs.iter().map(|r| r.1).collect();
            let n = prompt.len();
            let first: Vec<f64> = vec![0.0; n];
            let measured = vec![true; n];
            let c = Cols { prompt: &prompt, output: &output, first_token_s: &first, measured: &measured };
            let mut rs = match spec {
                None => RunningSet::paged(block, false),
                Some((acceptance, seed)) => RunningSet::paged_speculative(block, Speculation::new(acceptance, seed)),
            };
            let (mut next, mut out) = (0u32, Vec::new());
            let mut itl = ItlHistogram::default();
            for (i, op) in ops.into_iter().enumerate() {
                match op {
                    0 if (next as usize) < n => {
                        rs.admit(next, c);
                        next += 1;
                    }
                    1 => rs.complete_step(i as f64, 1.0, c, &mut itl, &mut Vec::new()),
                    2 => out.extend(rs.preempt_last(c, 0.0)),
                    _ => {
                        if let Some((r, k, last)) = out.pop() {
                            rs.resume(r, k, last, c);
                        }
                    }
                }
                prop_assert_eq!((rs.ctx_tokens(&prompt), rs.needing_block()), recount(&rs, &prompt, block));
            }
        }

        /// The fast paged set equals the plain paged set through random admissions, steps (with random gaps),
        /// preemptions of the most recent sequence and resumptions (with and without a last-token time, as
        /// swap and recompute resume): after every operation the same length, context and block-growth count;
        /// every preemption returns the same (request, tokens, last token time); every step finishes the same
        /// requests; and the inter-token-gap histograms end bit-identical.
        #[test]
        fn fast_paged_equals_plain_paged(
            reqs in prop::collection::vec((1u32..300, 2u32..60, any::<bool>()), 1..60),
            ops in prop::collection::vec((0u8..5, 0.001f64..0.05), 1..400),
            block in prop_oneof![Just(16u64), 1u64..40],
        ) {
            let prompt: Vec<u32> = reqs.iter().map(|r| r.0).collect();
            let output: Vec<u32> = reqs.iter().map(|r| r.1).collect();
            let measured: Vec<bool> = reqs.iter().map(|r| r.2).collect();
            let first: Vec<f64> = (0..prompt.len()).map(|i| i as f64 * 0.01).collect();
            let c = Cols { prompt: &prompt, output: &output, first_token_s: &first, measured: &measured };
            let mut sets = [RunningSet::paged(block, false), RunningSet::paged(block, true)];
            let mut itls = [ItlHistogram::default(), ItlHistogram::default()];
            let (mut next, mut out, mut t) = (0u32, Vec::new(), 1.0);
            for (op, dt) in ops {
                match op {
                    0 | 1 if (next as usize) < prompt.len() => {
                        for s in &mut sets {
                            s.admit(next, c);
                        }
                        next += 1;
                    }
                    0..=2 => {
                        t += dt;
                        let mut fins = [Vec::new(), Vec::new()];
                        for ((s, itl), fin) in sets.iter_mut().zip(&mut itls).zip(&mut fins) {
                            s.complete_step(t, dt, c, itl, fin);
                            fin.sort_unstable();
                        }
                        prop_assert_eq!(&fins[0], &fins[1]);
                    }
                    3 => {
                        let a = sets[0].preempt_last(c, t);
                        let b = sets[1].preempt_last(c, t);
                        prop_assert_eq!(a.map(|x| (x.0, x.1, x.2.to_bits())), b.map(|x| (x.0, x.1, x.2.to_bits())));
                        out.extend(a);
                    }
                    _ => {
                        if let Some((r, k, last)) = out.pop() {
                            let since = if r % 2 == 0 { last } else { f64::NAN };
                            for s in &mut sets {
                                s.resume(r, k, since, c);
                            }
                        }
                    }
                }
                prop_assert_eq!(sets[0].len(), sets[1].len());
                prop_assert_eq!(sets[0].ctx_tokens(&prompt), sets[1].ctx_tokens(&prompt));
                prop_assert_eq!(sets[0].needing_block(), sets[1].needing_block());
            }
            let bits = |h: &ItlHistogram| {
                let q = h.quantiles();
                (q.count, q.p50.map(f64::to_bits), q.max.map(f64::to_bits), q.mean.map(f64::to_bits))
            };
            prop_assert_eq!(bits(&itls[0]), bits(&itls[1]));
        }

        /// The fast speculative set equals the plain one through random admissions and steps with random
        /// gaps and acceptance (γ of 1 to 5, a per-position list): after every step the same length and
        /// context, the same finished requests with the same accepted totals, the same accepted and verified
        /// sums; and the inter-token-gap histograms end bit-identical.
        #[test]
        fn fast_speculative_equals_plain(
            reqs in prop::collection::vec((1u32..3000, 2u32..80, any::<bool>()), 1..60),
            ops in prop::collection::vec((0u8..3, 0.001f64..0.05), 1..400),
            acceptance in prop::collection::vec(0.0f64..1.0, 1..6),
            seed in any::<u64>(),
        ) {
            let prompt: Vec<u32> = reqs.iter().map(|r| r.0).collect();
            let output: Vec<u32> = reqs.iter().map(|r| r.1).collect();
            let measured: Vec<bool> = reqs.iter().map(|r| r.2).collect();
            let first: Vec<f64> = (0..prompt.len()).map(|i| i as f64 * 0.01).collect();
            let c = Cols { prompt: &prompt, output: &output, first_token_s: &first, measured: &measured };
            let mut sets = [false, true].map(|fast| RunningSet::speculative(Speculation::new(acceptance.clone(), seed), fast));
            let mut itls = [ItlHistogram::default(), ItlHistogram::default()];
            let (mut next, mut t) = (0u32, 1.0);
            for (op, dt) in ops {
                if op == 0 && (next as usize) < prompt.len() {
                    for s in &mut sets {
                        s.admit(next, c);
                    }
                    next += 1;
                    continue;
                }
                t += dt;
                let mut fins = [Vec::new(), Vec::new()];
                for ((s, itl), fin) in sets.iter_mut().zip(&mut itls).zip(&mut fins) {
                    s.complete_step(t, dt, c, itl, fin);
                    fin.sort_unstable();
                }
                prop_assert_eq!(&fins[0], &fins[1]);
                prop_assert_eq!(sets[0].len(), sets[1].len());
                prop_assert_eq!(sets[0].ctx_tokens(&prompt), sets[1].ctx_tokens(&prompt));
                let [a, b] = sets.each_mut().map(|s| {
                    let sp = s.spec.as_deref_mut().unwrap();
                    let mut done = std::mem::take(&mut sp.done);
                    done.sort_unstable();
                    (done, sp.accepted_sum, sp.verified_rows)
                });
                prop_assert_eq!(a, b);
            }
            let bits = |h: &ItlHistogram| {
                let q = h.quantiles();
                (q.count, q.p50.map(f64::to_bits), q.max.map(f64::to_bits), q.mean.map(f64::to_bits))
            };
            prop_assert_eq!(bits(&itls[0]), bits(&itls[1]));
        }

        #[test]
        fn fast_equals_plain(script in prop::collection::vec(
            (prop::collection::vec((1u32..5000, 2u32..40), 0..4), 0.001f64..0.05), 1..120)) {
            prop_assert_eq!(drive(&script, true), drive(&script, false));
        }
    }
}
