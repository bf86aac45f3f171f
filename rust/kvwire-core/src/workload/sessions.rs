//! Closed-loop multi-turn sessions (`workload.sessions`): the generator of every session's turns and each
//! turn's prompt block hashes (Mooncake's layout).
//!
//! **Draws** (one `random.Random(seed)` stream, bit-compatible with CPython): for each session in order, the
//! gap to its start (`t += gap`, the workload's arrival process), then for each of its `turns` turns the new
//! user message's length (`workload.prompt_tokens`) and the turn's output length (`workload.output_tokens`).
//! Every turn's lengths are drawn even when the session ends before it, so a session's lengths never depend
//! on another's, nor on the run. With `turns = 1` and `system_tokens = 0` the draws are exactly those of the
//! open-loop generator ([`super::generate`]).
//!
//! **Prompts**: session `s` uses system prompt `s mod system_prompts` (no draw); turn 1's prompt is
//! `system_tokens + message₁`, turn k's is `prompt_{k−1} + output_{k−1} + message_k` (the whole previous
//! context). A session ends before its first turn whose prompt + output exceed the model's context (or
//! `u32::MAX` tokens): that turn and the later ones are never sent. [`SessionPlan::end_at_first`] ends a
//! session at its first turn refused by KV capacity (that turn is sent and refused; the later ones are not).
//!
//! **Rows**: session-major (session 0's turns 1, 2, …, then session 1's, …); sessions are numbered by start
//! time. A turn 1's arrival is its session's start; a later turn's is not known before the run (NaN in the
//! plan): the engine sends it at the previous turn's finish + `think_s`.

use super::cpython_random::CpythonRandom;
use super::{Arrivals, LengthDist, Trace};
use crate::error::{Error, Result};

/// Tokens per prompt block of the block hashes (Mooncake's layout; the prefix-cache branch's
/// `HASH_BLOCK_TOKENS`).
pub const BLOCK_TOKENS: u32 = 512;

/// `workload.sessions`, validated.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct SessionsParams {
    /// Sessions (≥ 1).
    pub count: u32,
    /// Turns per session at most (≥ 1).
    pub turns: u32,
    /// Think time between a turn's last token and the next turn's arrival, s (≥ 0).
    pub think_s: f64,
    /// Distinct system prompts (≥ 1); session `s` uses number `s mod system_prompts`.
    pub system_prompts: u32,
    /// Tokens of every system prompt (≥ 0).
    pub system_tokens: u32,
}

/// A sessions workload: the session starts follow `arrivals`, the message and output lengths `prompt` and
/// `output`.
#[derive(Clone, Debug, PartialEq)]
pub struct SessionsWorkload {
    pub seed: u64,
    pub arrivals: Arrivals,
    pub prompt: LengthDist,
    pub output: LengthDist,
    pub sessions: SessionsParams,
}

/// The turns a sessions workload may send, in rows (session-major).
#[derive(Clone, Debug, PartialEq)]
pub struct SessionPlan {
    /// Per row: arrival (turn 1: the session's start; later turns NaN), prompt and output tokens.
    pub trace: Trace,
    pub rows: SessionRows,
}

/// What a plan knows of its rows besides the request columns.
#[derive(Clone, Debug, PartialEq)]
pub struct SessionRows {
    /// Per row: the session (0-based, by start time) and the turn (1-based).
    pub session: Vec<u32>,
    pub turn: Vec<u32>,
    /// Per row: the new user message's tokens (the prompt's last `message` tokens).
    pub message_tokens: Vec<u32>,
    /// Think time, s.
    pub think_s: f64,
    /// The parameters the plan was made from.
    pub params: SessionsParams,
    /// Turns never sent because the context would have been exceeded.
    pub turns_over_context: u64,
}

impl SessionRows {
    /// The rows of turn 1 (each session's first row), in session order.
    pub fn first_rows(&self) -> Vec<u32> {
        self.turn.iter().enumerate().filter(|(_, &k)| k == 1).map(|(i, _)| i as u32).collect()
    }

    /// Every row's block hashes as a CSR pair (`ids[offsets[r]..offsets[r + 1]]` are row r's), by
    /// [`block_hashes`], for rows of `prompt_tokens` (the plan's, or the trace of the scenario's request table).
    pub fn block_hashes_csr(&self, prompt_tokens: &[u32]) -> (Vec<u64>, Vec<u64>) {
        let mut offsets = Vec::with_capacity(self.session.len() + 1);
        let mut ids = Vec::new();
        offsets.push(0);
        for ((&s, &k), &p) in self.session.iter().zip(&self.turn).zip(prompt_tokens) {
            ids.extend(block_hashes(s % self.params.system_prompts, self.params.system_tokens, s, k, p));
            offsets.push(ids.len() as u64);
        }
        (offsets, ids)
    }
}

/// Whether a turn of `prompt` + `output` tokens is past `max_context` (or past `u32::MAX` tokens).
fn too_long(prompt: u64, output: u64, max_context: Option<u32>) -> bool {
    prompt + output > max_context.map_or(u32::MAX as u64, |m| m as u64)
}

impl SessionsWorkload {
    /// Draw every session's turns from the seed (see the module notes), ending each session before its first
    /// turn over `max_context`. Error when not a single turn fits, or when the memory is not there.
    pub fn plan(&self, max_context: Option<u32>) -> Result<SessionPlan> {
        let p = self.sessions;
        let n = p.count as usize * p.turns as usize;
        let oom = |_| Error::alloc("workload.sessions", "session turns", n);
        let mut arrival_s = Vec::new();
        let mut prompt_tokens = Vec::new();
        let mut output_tokens = Vec::new();
        let mut session = Vec::new();
        let mut turn = Vec::new();
        let mut message_tokens = Vec::new();
        for v in [&mut prompt_tokens, &mut output_tokens, &mut session, &mut turn, &mut message_tokens] {
            v.try_reserve_exact(n).map_err(oom)?;
        }
        arrival_s.try_reserve_exact(n).map_err(oom)?;
        let mut rng = CpythonRandom::new(self.seed);
        let mut t = 0.0;
        let mut lengths = Vec::with_capacity(p.turns as usize);
        let mut over = 0u64;
        for s in 0..p.count {
            t += self.arrivals.gap(&mut rng);
            let start = t;
            if !start.is_finite() {
                return Err(Error::field(
                    "workload.arrivals",
                    format!("the arrival process produced a non-finite time at session {s}"),
                ));
            }
            lengths.clear();
            for _ in 0..p.turns {
                let m = self.prompt.draw(&mut rng);
                lengths.push((m, self.output.draw(&mut rng)));
            }
            let mut prompt = p.system_tokens as u64;
            let mut prev_output = 0u64;
            for (k, &(m, o)) in lengths.iter().enumerate() {
                prompt += prev_output + m as u64;
                if too_long(prompt, o as u64, max_context) {
                    over += (p.turns as usize - k) as u64;
                    break;
                }
                arrival_s.push(if k == 0 { start } else { f64::NAN });
                prompt_tokens.push(prompt as u32);
                output_tokens.push(o);
                session.push(s);
                turn.push(k as u32 + 1);
                message_tokens.push(m);
                prev_output = o as u64;
            }
        }
        if arrival_s.is_empty() {
            return Err(Error::field(
                "workload.sessions",
                "no session's first turn fits the model's context (system_tokens + message + output > \
                 model.max_context_tokens): shorten the system prompt or the lengths",
            ));
        }
        Ok(SessionPlan {
            trace: Trace::from_parts_unchecked(arrival_s, prompt_tokens, output_tokens),
            rows: SessionRows {
                session,
                turn,
                message_tokens,
                think_s: p.think_s,
                params: p,
                turns_over_context: over,
            },
        })
    }
}

impl SessionPlan {
    /// End every session at its first turn for which `refused(prompt, output)` holds: that turn stays (it is
    /// sent and refused), the session's later turns are removed.
    pub fn end_at_first(&mut self, refused: impl Fn(u32, u32) -> bool) {
        let n = self.rows.session.len();
        let mut keep = vec![true; n];
        let mut cut: Option<u32> = None;
        for (i, k) in keep.iter_mut().enumerate() {
            if cut == Some(self.rows.session[i]) {
                *k = false;
            } else if refused(self.trace.prompt_tokens()[i], self.trace.output_tokens()[i]) {
                cut = Some(self.rows.session[i]);
            }
        }
        if keep.iter().all(|&k| k) {
            return;
        }
        fn filter<T: Copy>(v: &[T], keep: &[bool]) -> Vec<T> {
            v.iter().zip(keep).filter(|(_, &k)| k).map(|(&x, _)| x).collect()
        }
        self.trace = Trace::from_parts_unchecked(
            filter(self.trace.arrival_s(), &keep),
            filter(self.trace.prompt_tokens(), &keep),
            filter(self.trace.output_tokens(), &keep),
        );
        self.rows.session = filter(&self.rows.session, &keep);
        self.rows.turn = filter(&self.rows.turn, &keep);
        self.rows.message_tokens = filter(&self.rows.message_tokens, &keep);
    }
}

/// SplitMix64's finaliser: a bijective mix of 64 bits.
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The id of a block from what determines its content: a kind tag and three numbers.
fn block_id(kind: u64, a: u64, b: u64, c: u64) -> u64 {
    mix(mix(mix(mix(kind) ^ a) ^ b) ^ c)
}

/// Kinds of block content.
const SYSTEM_BLOCK: u64 = 1;
const SESSION_BLOCK: u64 = 2;
const PARTIAL_BLOCK: u64 = 3;

/// The block hashes of a turn's prompt in Mooncake's layout: `ceil(prompt_tokens / 512)` ids, block `i`
/// covering tokens `[512·i, 512·(i+1))`. A full block's id depends only on its content: a block entirely
/// inside the system prompt (`512·(i+1) ≤ system_tokens`) on (system prompt, i), so every session using that
/// system prompt shares it; a later full block on (session, i), the same on every turn of the session (the
/// context only grows). A partial last block gets an id of (session, turn, i), unique to the turn (its
/// content changes next turn).
pub fn block_hashes(system_prompt: u32, system_tokens: u32, session: u32, turn: u32, prompt_tokens: u32) -> Vec<u64> {
    let blocks = prompt_tokens.div_ceil(BLOCK_TOKENS);
    (0..blocks)
        .map(|i| {
            let end = (i as u64 + 1) * BLOCK_TOKENS as u64;
            if end > prompt_tokens as u64 {
                block_id(PARTIAL_BLOCK, session as u64, turn as u64, i as u64)
            } else if end <= system_tokens as u64 {
                block_id(SYSTEM_BLOCK, system_prompt as u64, 0, i as u64)
            } else {
                block_id(SESSION_BLOCK, session as u64, 0, i as u64)
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn workload(
        count: u32,
        turns: u32,
        system_tokens: u32,
        prompt: LengthDist,
        output: LengthDist,
    ) -> SessionsWorkload {
        SessionsWorkload {
            seed: 5,
            arrivals: Arrivals::Poisson { rate_per_s: 2.0 },
            prompt,
            output,
            sessions: SessionsParams { count, turns, think_s: 1.5, system_prompts: 3, system_tokens },
        }
    }

    const P: LengthDist = LengthDist::Lognormal { mean: 300.0, cv: 0.8, min: 1, max: 4000 };
    const O: LengthDist = LengthDist::Uniform { min: 0, max: 400 };

    /// Sessions of one turn with no system prompt are exactly the open-loop generator's requests (same
    /// draw order), with turn 1 arriving at the session start.
    #[test]
    fn one_turn_sessions_are_the_open_loop_workload() {
        let plan = workload(300, 1, 0, P, O).plan(None).unwrap();
        let open = super::super::generate(300, 5, Arrivals::Poisson { rate_per_s: 2.0 }, P, O).unwrap();
        assert_eq!(plan.trace, open);
        assert_eq!(plan.rows.session, (0..300).collect::<Vec<_>>());
        assert!(plan.rows.turn.iter().all(|&k| k == 1));
    }

    /// Prompt growth: turn 1 = system + message, turn k = previous prompt + previous output + message;
    /// rows session-major; only turn 1 has an arrival time.
    #[test]
    fn prompts_grow_by_previous_output_and_message() {
        let plan = workload(50, 6, 700, P, O).plan(None).unwrap();
        assert_eq!(plan.rows.session.len(), 300);
        let (p, o) = (plan.trace.prompt_tokens(), plan.trace.output_tokens());
        for i in 0..300 {
            assert_eq!(plan.rows.session[i], i as u32 / 6);
            assert_eq!(plan.rows.turn[i], i as u32 % 6 + 1);
            if plan.rows.turn[i] == 1 {
                assert_eq!(p[i], 700 + plan.rows.message_tokens[i]);
                assert!(plan.trace.arrival_s()[i].is_finite());
            } else {
                assert_eq!(p[i], p[i - 1] + o[i - 1] + plan.rows.message_tokens[i]);
                assert!(plan.trace.arrival_s()[i].is_nan());
            }
        }
        let starts: Vec<f64> = plan.rows.first_rows().iter().map(|&r| plan.trace.arrival_s()[r as usize]).collect();
        assert!(starts.windows(2).all(|w| w[0] <= w[1]));
    }

    /// The context cut: a session ends before its first turn over the context, and the draws of the other
    /// sessions do not move (the same lengths with and without a context limit).
    #[test]
    fn context_ends_a_session_without_moving_other_draws() {
        let w = workload(40, 8, 100, P, O);
        let free = w.plan(None).unwrap();
        let cut = w.plan(Some(3000)).unwrap();
        assert!(cut.rows.turns_over_context > 0);
        assert_eq!(cut.rows.session.len() as u64 + cut.rows.turns_over_context, 320);
        // Expected: in each session, the turns of the unlimited plan up to the first one over 3000 tokens.
        let mut want = Vec::new();
        let mut ended = u32::MAX;
        for i in 0..free.rows.session.len() {
            let fits = free.trace.prompt_tokens()[i] as u64 + free.trace.output_tokens()[i] as u64 <= 3000;
            if free.rows.turn[i] == 1 {
                ended = u32::MAX;
            }
            if !fits && ended == u32::MAX {
                ended = free.rows.session[i];
            }
            if ended != free.rows.session[i] {
                want.push((free.rows.session[i], free.rows.turn[i], free.trace.prompt_tokens()[i]));
            }
        }
        let got: Vec<_> = (0..cut.rows.session.len())
            .map(|j| (cut.rows.session[j], cut.rows.turn[j], cut.trace.prompt_tokens()[j]))
            .collect();
        assert_eq!(got, want);
        let none = workload(3, 2, 5000, P, O).plan(Some(3000)).unwrap_err();
        assert_eq!(none.path(), "workload.sessions");
    }

    /// A refused turn ends its session: it stays, the later turns of that session go, others are untouched.
    #[test]
    fn refusal_ends_the_session_after_the_refused_turn() {
        let mut plan =
            workload(4, 5, 0, LengthDist::Fixed { value: 100 }, LengthDist::Fixed { value: 10 }).plan(None).unwrap();
        // Prompts 100, 210, 320, 430, 540 in every session: refusing ≥ 320 keeps turns 1..=3 of each.
        let before = plan.rows.session.clone();
        plan.end_at_first(|p, _| p >= 320);
        assert_eq!(plan.rows.session, vec![0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 3]);
        assert_eq!(plan.rows.turn, vec![1, 2, 3, 1, 2, 3, 1, 2, 3, 1, 2, 3]);
        assert_eq!(before.len(), 20);
        let mut all =
            workload(2, 3, 0, LengthDist::Fixed { value: 100 }, LengthDist::Fixed { value: 10 }).plan(None).unwrap();
        all.end_at_first(|_, _| false);
        assert_eq!(all.rows.session.len(), 6);
    }

    /// Block hashes: the count is ceil(prompt / 512); full system-prompt blocks are shared by sessions with
    /// the same system prompt and differ between system prompts; later full blocks are per session and the
    /// same on every turn; a partial last block is unique to its turn.
    #[test]
    fn block_hashes_share_system_blocks_and_keep_full_blocks_across_turns() {
        // System prompt of 1100 tokens: blocks 0 and 1 are system blocks, block 2 (1024..1536) straddles.
        let a1 = block_hashes(0, 1100, 7, 1, 1300);
        let b1 = block_hashes(0, 1100, 8, 1, 1300);
        let c1 = block_hashes(1, 1100, 9, 1, 1300);
        assert_eq!(a1.len(), 3);
        assert_eq!(a1[..2], b1[..2]);
        assert_ne!(a1[0], c1[0]);
        assert_ne!(a1[1], c1[1]);
        assert_ne!(a1[2], b1[2]);
        // Turn 2 of session 7: 2600 tokens → blocks 0..4 full, block 5 partial.
        let a2 = block_hashes(0, 1100, 7, 2, 2600);
        assert_eq!(a2.len(), 6);
        assert_eq!(a2[..2], a1[..2]);
        assert_ne!(a2[2], a1[2], "turn 1's partial block 2 is now full: new content, new id");
        let a3 = block_hashes(0, 1100, 7, 3, 4000);
        assert_eq!(a3[..5], a2[..5], "full blocks stay the same from turn to turn");
        assert_ne!(a3[5], a2[5], "turn 2's partial last block is not turn 3's full block 5");
        // Exact multiples of 512: no partial block; the last block is a full, stable one.
        let e = block_hashes(0, 0, 1, 1, 1024);
        assert_eq!(e.len(), 2);
        assert_eq!(block_hashes(0, 0, 1, 2, 1600)[..2], e[..]);
        assert_eq!(block_hashes(0, 0, 1, 1, 1).len(), 1);
        assert!(block_hashes(0, 0, 1, 1, 0).is_empty());
    }

    /// No two different block contents share an id over a realistic plan; the CSR pair matches
    /// per-row hashes.
    #[test]
    fn block_hash_ids_are_distinct_per_content() {
        let plan = workload(200, 6, 1500, P, O).plan(None).unwrap();
        let (offsets, ids) = plan.rows.block_hashes_csr(plan.trace.prompt_tokens());
        assert_eq!(offsets.len(), plan.rows.session.len() + 1);
        let mut content = std::collections::HashMap::new();
        for r in 0..plan.rows.session.len() {
            let row = &ids[offsets[r] as usize..offsets[r + 1] as usize];
            let p = plan.trace.prompt_tokens()[r];
            assert_eq!(row.len() as u32, p.div_ceil(512));
            for (i, &id) in row.iter().enumerate() {
                let end = (i as u32 + 1) * 512;
                let key = if end > p {
                    (3, plan.rows.session[r], plan.rows.turn[r], i)
                } else if end <= 1500 {
                    (1, plan.rows.session[r] % 3, 0, i)
                } else {
                    (2, plan.rows.session[r], 0, i)
                };
                let prev = content.insert(id, key);
                assert!(prev.is_none() || prev == Some(key), "id {id} for {key:?} and {prev:?}");
            }
        }
        // 200 sessions over 3 system prompts: 2 shared system blocks each.
        assert_eq!(content.values().filter(|k| k.0 == 1).count(), 6);
    }

    /// The context bound is inclusive: a turn with prompt + output exactly `max_context` is sent, one token
    /// more is not. Fixed lengths (message 100, output 10, no system prompt) give prompts 100, 210, 320,
    /// 430, 540 and prompt + output 110, 220, 330, 440, 550 by hand, so a 330-token context keeps turns
    /// 1..=3 of each session and a 325-token one turns 1..=2; `first_rows` are then every 3rd (2nd) row.
    #[test]
    fn context_bound_is_inclusive_and_first_rows_follow_the_cut() {
        let fixed = workload(4, 5, 0, LengthDist::Fixed { value: 100 }, LengthDist::Fixed { value: 10 });
        let at = fixed.plan(Some(330)).unwrap();
        assert_eq!(at.trace.prompt_tokens(), [100u32, 210, 320].repeat(4));
        assert_eq!(at.rows.turns_over_context, 4 * 2);
        assert_eq!(at.rows.first_rows(), [0, 3, 6, 9]);
        let below = fixed.plan(Some(325)).unwrap();
        assert_eq!(below.trace.prompt_tokens(), [100u32, 210].repeat(4));
        assert_eq!(below.rows.turns_over_context, 4 * 3);
        assert_eq!(below.rows.first_rows(), [0, 2, 4, 6]);
        assert_eq!(fixed.plan(None).unwrap().rows.first_rows(), [0, 5, 10, 15]);
    }

    /// `mix` is SplitMix64's finaliser: fed SplitMix64's states from seed 1234567 (state += 0x9E37…7C15) it
    /// gives the published reference outputs 6457827717110365317, 3203168211198807973, 9817491932198370423.
    #[test]
    fn mix_is_splitmix64() {
        const GAMMA: u64 = 0x9E37_79B9_7F4A_7C15;
        let state = |k: u64| 1_234_567u64.wrapping_add(GAMMA.wrapping_mul(k));
        assert_eq!(mix(state(1)), 6_457_827_717_110_365_317);
        assert_eq!(mix(state(2)), 3_203_168_211_198_807_973);
        assert_eq!(mix(state(3)), 9_817_491_932_198_370_423);
    }
}
