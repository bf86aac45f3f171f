//! A processor-sharing link: every active transfer gets an equal share of the link's `channels` channels
//! (at most one channel's bandwidth each). Work is measured in seconds at one channel's full rate, so a
//! transfer alone finishes after its data time, and n > channels transfers each progress at channels/n.
//!
//! Event-driven use: after every change call [`SharedLink::next_completion`] and schedule one event at that
//! time tagged with [`SharedLink::generation`]; an event whose generation is stale is ignored.

/// Active transfers and their remaining work.
#[derive(Clone, Debug)]
pub struct SharedLink {
    channels: f64,
    active: Vec<(u32, f64)>,
    last: f64,
    generation: u32,
}

/// Transfers within this much work (s at full rate) of the one that is due finish with it: absorbs
/// rounding when several finish together.
const DONE_EPS_S: f64 = 1e-12;

impl SharedLink {
    pub fn new(channels: u32) -> Self {
        SharedLink { channels: channels as f64, active: Vec::new(), last: 0.0, generation: 0 }
    }

    fn rate(&self) -> f64 {
        (self.channels / self.active.len() as f64).min(1.0)
    }

    /// Progress every active transfer to `now`.
    fn advance(&mut self, now: f64) {
        if !self.active.is_empty() && now > self.last {
            let done = (now - self.last) * self.rate();
            for a in &mut self.active {
                a.1 -= done;
            }
        }
        self.last = self.last.max(now);
    }

    /// Start transfer `r` with `work_s` seconds of data at full rate.
    pub fn add(&mut self, now: f64, r: u32, work_s: f64) {
        self.advance(now);
        self.active.push((r, work_s));
        self.generation = self.generation.wrapping_add(1);
    }

    /// Time of the next completion, if any transfer is active.
    pub fn next_completion(&self) -> Option<f64> {
        let min = self.active.iter().map(|a| a.1).fold(f64::INFINITY, f64::min);
        min.is_finite().then(|| self.last + min.max(0.0) / self.rate())
    }

    pub fn generation(&self) -> u32 {
        self.generation
    }

    /// Advance to `now` (the time [`Self::next_completion`] gave) and remove the finished transfers — the
    /// one with the least work left, which is due now, and any within rounding of it — in start order.
    pub fn complete(&mut self, now: f64, out: &mut Vec<u32>) {
        self.advance(now);
        let before = out.len();
        let due = self.active.iter().map(|a| a.1).fold(f64::INFINITY, f64::min).max(0.0);
        self.active.retain(|&(r, left)| {
            let done = left <= due + DONE_EPS_S;
            if done {
                out.push(r);
            }
            !done
        });
        if out.len() > before {
            self.generation = self.generation.wrapping_add(1);
        }
    }

    /// Transfers in progress.
    pub fn len(&self) -> usize {
        self.active.len()
    }

    pub fn is_empty(&self) -> bool {
        self.active.is_empty()
    }

    /// Remaining work of all active transfers, s at full rate.
    pub fn backlog_s(&self) -> f64 {
        self.active.iter().map(|a| a.1).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(channels: u32, jobs: &[(f64, f64)]) -> Vec<(u32, f64)> {
        // jobs: (arrival, work); returns (job, completion) in completion order.
        let mut l = SharedLink::new(channels);
        let mut out = Vec::new();
        let mut next_job = 0;
        let mut done = Vec::new();
        loop {
            let t_arr = jobs.get(next_job).map_or(f64::INFINITY, |j| j.0);
            let t_done = l.next_completion().unwrap_or(f64::INFINITY);
            if t_arr.is_infinite() && t_done.is_infinite() {
                break;
            }
            if t_arr <= t_done {
                l.add(t_arr, next_job as u32, jobs[next_job].1);
                next_job += 1;
            } else {
                l.complete(t_done, &mut done);
                out.extend(done.drain(..).map(|r| (r, t_done)));
            }
        }
        out
    }

    /// Two equal jobs started together on one channel share it and finish together at twice their work.
    #[test]
    fn equal_jobs_share_and_finish_together() {
        let r = run(1, &[(0.0, 1.0), (0.0, 1.0)]);
        assert_eq!(r.len(), 2);
        assert!(r.iter().all(|&(_, t)| (t - 2.0).abs() < 1e-12));
    }

    /// Closed form: job A (work 3) alone from 0; job B (work 1) joins at 1 when A has 2 left; both run at
    /// rate 1/2, so B finishes at 3 with A at 1 left, and A alone finishes at 4.
    #[test]
    fn staggered_jobs() {
        let r = run(1, &[(0.0, 3.0), (1.0, 1.0)]);
        assert_eq!(r[0].0, 1);
        assert!((r[0].1 - 3.0).abs() < 1e-12);
        assert_eq!(r[1].0, 0);
        assert!((r[1].1 - 4.0).abs() < 1e-12);
    }

    /// With more channels than transfers each runs at full rate (no slower than one channel).
    #[test]
    fn spare_channels_do_not_speed_a_transfer_beyond_one_channel() {
        let r = run(4, &[(0.0, 1.0), (0.0, 3.0)]);
        assert!((r[0].1 - 1.0).abs() < 1e-12);
        assert!((r[1].1 - 3.0).abs() < 1e-12);
    }

    /// Work is conserved: a link that never idles completes the total work at rate 1 (one channel).
    #[test]
    fn work_conservation() {
        let jobs: Vec<(f64, f64)> = (0..50).map(|i| (i as f64 * 0.01, 0.3 + (i % 7) as f64 * 0.1)).collect();
        let r = run(1, &jobs);
        let total: f64 = jobs.iter().map(|j| j.1).sum();
        let last = r.iter().map(|x| x.1).fold(0.0, f64::max);
        assert_eq!(r.len(), 50);
        assert!((last - total).abs() < 1e-9, "{last} vs {total}");
    }
}
