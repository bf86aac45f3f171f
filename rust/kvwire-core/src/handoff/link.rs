//! The KV link as a queueing resource: `channels` FCFS servers, each carrying one transfer at the full
//! per-channel rate (the reference's SimPy `Resource`). Transfers are granted in request order; a free
//! channel with the lowest index takes the head of the queue.

use std::collections::VecDeque;

/// FCFS multi-channel link state.
#[derive(Clone, Debug)]
pub struct FcfsLink {
    busy: Vec<Option<u32>>,
    /// Channels that are down (`faults.link`): never granted while down.
    down: Vec<bool>,
    /// (request, time it joined the queue).
    waiting: VecDeque<(u32, f64)>,
}

impl FcfsLink {
    pub fn new(channels: u32) -> Self {
        FcfsLink { busy: vec![None; channels as usize], down: vec![false; channels as usize], waiting: VecDeque::new() }
    }

    /// Mark `channel` down or up again; a channel taken down is freed, returning the request it carried.
    pub fn set_down(&mut self, channel: usize, down: bool) -> Option<u32> {
        let d = self.down.get_mut(channel)?;
        *d = down;
        if down {
            self.release(channel)
        } else {
            None
        }
    }

    /// Queue request `r` for a channel at time `now`.
    pub fn request(&mut self, r: u32, now: f64) {
        self.waiting.push_back((r, now));
    }

    /// Grant the head of the queue to the lowest free channel, if both exist: `(channel, request, time it
    /// joined the queue)`.
    pub fn grant(&mut self) -> Option<(usize, u32, f64)> {
        if self.waiting.is_empty() {
            return None;
        }
        let ch = self.busy.iter().zip(&self.down).position(|(b, &d)| b.is_none() && !d)?;
        let (r, since) = self.waiting.pop_front()?;
        self.busy[ch] = Some(r);
        Some((ch, r, since))
    }

    /// Free `channel`, returning the request it carried.
    pub fn release(&mut self, channel: usize) -> Option<u32> {
        self.busy.get_mut(channel).and_then(Option::take)
    }

    /// Requests waiting for a channel.
    pub fn queued(&self) -> usize {
        self.waiting.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_down_channel_is_freed_and_never_granted() {
        let mut l = FcfsLink::new(2);
        for r in [1, 2, 3] {
            l.request(r, 0.0);
        }
        assert_eq!(l.grant(), Some((0, 1, 0.0)));
        assert_eq!(l.set_down(0, true), Some(1));
        assert_eq!(l.grant(), Some((1, 2, 0.0)));
        assert_eq!(l.grant(), None, "channel 0 is down, channel 1 busy");
        assert_eq!(l.set_down(0, false), None);
        assert_eq!(l.grant(), Some((0, 3, 0.0)));
        assert_eq!(l.set_down(5, true), None, "no such channel");
    }

    #[test]
    fn fcfs_over_two_channels() {
        let mut l = FcfsLink::new(2);
        for r in [7, 8, 9] {
            l.request(r, r as f64);
        }
        assert_eq!(l.grant(), Some((0, 7, 7.0)));
        assert_eq!(l.grant(), Some((1, 8, 8.0)));
        assert_eq!(l.grant(), None); // both busy
        assert_eq!(l.queued(), 1);
        assert_eq!(l.release(1), Some(8));
        assert_eq!(l.grant(), Some((1, 9, 9.0)));
        assert_eq!(l.grant(), None); // queue empty
        assert_eq!(l.release(1), Some(9));
        assert_eq!(l.release(1), None);
    }

    /// `queued` counts the requests still waiting for a channel: none at first, every request while all
    /// channels are busy, one fewer per grant, and none once the queue drains.
    #[test]
    fn queued_counts_the_waiting_requests() {
        let mut l = FcfsLink::new(1);
        assert_eq!(l.queued(), 0);
        for r in [1, 2, 3] {
            l.request(r, 0.5);
        }
        assert_eq!(l.queued(), 3);
        assert_eq!(l.grant(), Some((0, 1, 0.5)));
        assert_eq!(l.queued(), 2);
        assert_eq!(l.release(0), Some(1));
        assert_eq!(l.grant(), Some((0, 2, 0.5)));
        assert_eq!(l.release(0), Some(2));
        assert_eq!(l.grant(), Some((0, 3, 0.5)));
        assert_eq!(l.queued(), 0);
    }
}
