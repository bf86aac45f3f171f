//! Closed-loop sessions in the engine (`workload.sessions`): a turn's arrival is known only when the previous
//! turn of its session finishes.
//!
//! The table holds one row per turn that may be sent, session-major (the plan of
//! [`crate::workload::sessions`]). Turn 1 of each session arrives at the session's start; the sessions are
//! started one after the other in start order (one pending start event at a time, as the open-loop
//! arrivals). When a turn finishes (its last token), the next turn of its session arrives `think_s` later
//! ([`super::Ev::Turn`]); turns due at the same instant arrive in row order (the completion-order rule of
//! [`super::kernel`]). A refused turn ends its session: the plan has no row after it. The open-loop
//! arrival path is untouched: these functions run only for a sessions workload.

use super::kernel::Priority;
use super::{Ev, Sim};
use crate::error::{Error, Result};
use crate::metrics::table::RequestTable;
use crate::workload::sessions::SessionRows;

/// The sessions' progress during a run.
pub(super) struct SessionRun {
    /// Each session's first row, in start order.
    starts: Vec<u32>,
    /// The next session to start (an index into `starts`).
    next: usize,
    think_s: f64,
}

/// The error of a streamed run of a sessions workload.
pub(super) fn not_streamed() -> Error {
    Error::field(
        "workload.sessions",
        "a streamed run (keep_requests=False, or more requests than kvwire.run.KEEP_REQUESTS_MAX) cannot run \
         sessions: keep the request table (keep_requests=True)",
    )
}

impl SessionRun {
    /// The run of `rows`, whose session and turn columns go into the table `t` (its `rejected` flags set).
    pub(super) fn new(t: &mut RequestTable, rows: SessionRows) -> Result<Box<Self>> {
        let n = rows.session.len();
        if n != t.len() {
            return Err(Error::Internal(format!("{n} session rows for a table of {} rows", t.len())));
        }
        // The plan ends each session at its first refused turn by the same capacity rule as the engine's.
        if (1..n).any(|i| rows.session[i] == rows.session[i - 1] && t.rejected[i - 1]) {
            return Err(Error::Internal("a session continues after a refused turn".into()));
        }
        let starts = rows.first_rows();
        t.session = rows.session;
        t.turn = rows.turn;
        Ok(Box::new(SessionRun { starts, next: 0, think_s: rows.think_s }))
    }
}

impl Sim<'_> {
    /// Schedule the first session's start (each start schedules the next).
    #[cold]
    pub(super) fn start_sessions(&mut self) {
        self.push_next_start();
    }

    fn push_next_start(&mut self) {
        let Some(s) = self.sessions.as_mut() else { return };
        if let Some(&r) = s.starts.get(s.next) {
            s.next += 1;
            self.q.push(self.t.arrival_s[r as usize], Priority::Normal, Ev::Turn(r));
        }
    }

    /// Turn (row) `r` arrives: turn 1 starts the next session's clock; a later turn's arrival time is set
    /// now. Then as an open-loop arrival: refused (its session ends), or routed to a prefill instance.
    #[cold]
    pub(super) fn on_turn(&mut self, r: u32, now: f64) {
        let i = r as usize;
        if self.t.turn[i] == 1 {
            self.push_next_start();
        } else {
            self.t.arrival_s[i] = now;
        }
        if self.t.rejected[i] {
            self.remaining -= 1;
            self.rejected += 1;
        } else {
            self.population_change(now, true);
            self.route_to_front(r, now);
        }
    }

    /// Turn (row) `r` finished at `now`: its session's next turn, if any, arrives `think_s` later.
    #[cold]
    pub(super) fn next_turn(&mut self, r: u32, now: f64) {
        let Some(s) = self.sessions.as_ref() else { return };
        let next = r as usize + 1;
        if self.t.session.get(next) == Some(&self.t.session[r as usize]) {
            self.q.push(now + s.think_s, Priority::Normal, Ev::Turn(next as u32));
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::scenario::Scenario;

    fn run(sessions: &str) -> crate::engine::SimOutput {
        let json = format!(
            r#"{{"workload": {{"seed": 3, "arrivals": {{"rate_per_s": 2.0}},
                "prompt_tokens": {{"dist": "uniform", "min": 50, "max": 900}},
                "output_tokens": {{"dist": "uniform", "min": 0, "max": 300}}, "sessions": {sessions}}}}}"#
        );
        crate::engine::simulate(Scenario::from_json(&json, None).unwrap()).unwrap()
    }

    /// Macro-steps on and off agree on a sessions workload, bit for bit. The issue's reproduction: turns of
    /// sessions 1 and 5 finish in one decode step, their next turns are due at the same instant, and the
    /// fast running set (macro-steps on) used to yield the finishers in the opposite order of the plain one,
    /// so the two paths served the turns in opposite order (finish times differed from row 8 on).
    #[test]
    fn macro_steps_on_and_off_agree_with_same_instant_turns() {
        let sim = |macro_steps: bool| {
            let json = format!(
                r#"{{"workload": {{"sessions": {{"count": 7, "turns": 3, "think_s": 1.0}}}},
                    "engine": {{"macro_steps": {macro_steps}}}}}"#
            );
            crate::engine::simulate(Scenario::from_json(&json, None).unwrap()).unwrap()
        };
        let (on, off) = (sim(true), sim(false));
        let (a, b) = (&on.table, &off.table);
        // The premise: two turns arrive at the same instant.
        let mut arrivals: Vec<u64> = a.arrival_s.iter().map(|x| x.to_bits()).collect();
        arrivals.sort_unstable();
        assert!(arrivals.windows(2).any(|w| w[0] == w[1]), "no two turns arrive together");
        let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        for (name, x, y) in [
            ("arrival_s", &a.arrival_s, &b.arrival_s),
            ("prefill_start_s", &a.prefill_start_s, &b.prefill_start_s),
            ("first_token_s", &a.first_token_s, &b.first_token_s),
            ("decode_start_s", &a.decode_start_s, &b.decode_start_s),
            ("finish_s", &a.finish_s, &b.finish_s),
        ] {
            assert_eq!(bits(x), bits(y), "{name}");
        }
        // Of the two same-instant turns, the lower row is routed (starts prefill) no later.
        let mut rows: Vec<usize> = (0..a.len()).collect();
        rows.sort_by(|&i, &j| a.arrival_s[i].total_cmp(&a.arrival_s[j]).then(i.cmp(&j)));
        for w in rows.windows(2) {
            if a.arrival_s[w[0]] == a.arrival_s[w[1]] {
                assert!(a.prefill_start_s[w[0]] <= a.prefill_start_s[w[1]], "rows {w:?}");
            }
        }
    }

    /// The engine's closed loop: turn k + 1 arrives exactly `think_s` after turn k's finish (outputs of 0 and
    /// 1 token finish at the end of prefill, and still chain), every row arrives and finishes, and with one
    /// session no two turns overlap.
    #[test]
    fn turns_chain_at_finish_plus_think() {
        let out = run(r#"{"count": 30, "turns": 7, "think_s": 0.5, "system_prompts": 2, "system_tokens": 300}"#);
        let t = &out.table;
        assert_eq!(t.len(), 210);
        assert_eq!(out.stats.completed, 210);
        for i in 1..t.len() {
            if t.session[i] == t.session[i - 1] {
                assert_eq!(t.turn[i], t.turn[i - 1] + 1);
                assert_eq!(t.arrival_s[i], t.finish_s[i - 1] + 0.5);
            } else {
                assert_eq!(t.turn[i], 1);
            }
        }
        assert!(t.output_tokens.iter().any(|&o| o <= 1));
        let one = run(r#"{"count": 1, "turns": 12}"#);
        let t = &one.table;
        assert!((1..t.len()).all(|i| t.arrival_s[i] == t.finish_s[i - 1]));
        assert!(t.finish_s.iter().zip(&t.arrival_s).all(|(f, a)| f >= a));
    }
}
