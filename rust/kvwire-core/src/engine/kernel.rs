//! The event kernel: a priority queue of timed events.
//!
//! **Tie-break rule** (as SimPy): events are processed in ascending `(time, priority, seq)`, where
//! `priority` is [`Priority::Urgent`] before [`Priority::Normal`] and `seq` is the insertion order (a counter
//! incremented on every push). So two events at the same time and priority run in the order they were
//! scheduled. Times are `f64` seconds compared with `total_cmp`; NaN times are refused at push (debug) and
//! never produced by the engine, whose step costs are finite by validation.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

/// Same-time ordering class. `Urgent` events at time t run before `Normal` events at time t.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Priority {
    Urgent = 0,
    Normal = 1,
}

struct Entry<E> {
    time: f64,
    priority: Priority,
    seq: u64,
    event: E,
}

impl<E> Entry<E> {
    fn key(&self) -> (f64, Priority, u64) {
        (self.time, self.priority, self.seq)
    }
}

impl<E> PartialEq for Entry<E> {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl<E> Eq for Entry<E> {}
impl<E> PartialOrd for Entry<E> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl<E> Ord for Entry<E> {
    /// Reversed so that `BinaryHeap` (a max-heap) pops the smallest `(time, priority, seq)` first.
    fn cmp(&self, other: &Self) -> Ordering {
        let (ta, pa, sa) = self.key();
        let (tb, pb, sb) = other.key();
        tb.total_cmp(&ta).then(pb.cmp(&pa)).then(sb.cmp(&sa))
    }
}

/// A min-queue of events ordered by `(time, priority, insertion order)`.
pub struct EventQueue<E> {
    heap: BinaryHeap<Entry<E>>,
    next_seq: u64,
    popped: u64,
}

impl<E> Default for EventQueue<E> {
    fn default() -> Self {
        Self::new()
    }
}

impl<E> EventQueue<E> {
    pub fn new() -> Self {
        EventQueue { heap: BinaryHeap::new(), next_seq: 0, popped: 0 }
    }

    /// Schedule `event` at `time`.
    pub fn push(&mut self, time: f64, priority: Priority, event: E) {
        debug_assert!(!time.is_nan(), "event scheduled at NaN");
        let seq = self.next_seq;
        self.next_seq += 1;
        self.heap.push(Entry { time, priority, seq, event });
    }

    /// Remove and return the next event.
    pub fn pop(&mut self) -> Option<(f64, E)> {
        self.heap.pop().map(|e| {
            self.popped += 1;
            (e.time, e.event)
        })
    }

    /// Time of the next event (`+∞` when empty).
    pub fn next_time(&self) -> f64 {
        self.heap.peek().map_or(f64::INFINITY, |e| e.time)
    }

    /// Number of events processed so far.
    pub fn processed(&self) -> u64 {
        self.popped
    }

    pub fn is_empty(&self) -> bool {
        self.heap.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn drain(q: &mut EventQueue<u32>) -> Vec<u32> {
        std::iter::from_fn(|| q.pop().map(|(_, e)| e)).collect()
    }

    #[test]
    fn earlier_time_first() {
        let mut q = EventQueue::new();
        q.push(2.0, Priority::Normal, 1);
        q.push(1.0, Priority::Normal, 2);
        q.push(1.5, Priority::Urgent, 3);
        assert_eq!(drain(&mut q), [2, 3, 1]);
    }

    #[test]
    fn same_time_urgent_before_normal() {
        let mut q = EventQueue::new();
        q.push(1.0, Priority::Normal, 1);
        q.push(1.0, Priority::Urgent, 2);
        q.push(1.0, Priority::Normal, 3);
        q.push(1.0, Priority::Urgent, 4);
        assert_eq!(drain(&mut q), [2, 4, 1, 3]);
    }

    #[test]
    fn same_time_same_priority_in_insertion_order() {
        let mut q = EventQueue::new();
        for i in 0..100 {
            q.push(0.25, Priority::Normal, i);
        }
        assert_eq!(drain(&mut q), (0..100).collect::<Vec<_>>());
        assert_eq!(q.processed(), 100);
    }

    #[test]
    fn insertion_order_survives_interleaved_pops() {
        let mut q = EventQueue::new();
        q.push(1.0, Priority::Normal, 1);
        q.push(0.5, Priority::Normal, 0);
        assert_eq!(q.pop(), Some((0.5, 0)));
        q.push(1.0, Priority::Normal, 2); // scheduled later, same time: after 1
        assert_eq!(drain(&mut q), [1, 2]);
        assert_eq!(q.next_time(), f64::INFINITY);
    }

    /// `is_empty` tracks the queue's contents: true when new, false after a push, true again once the
    /// last event is popped (and `next_time` agrees: +∞ exactly when empty).
    #[test]
    fn is_empty_tracks_pushes_and_pops() {
        let mut q = EventQueue::new();
        assert!(q.is_empty());
        q.push(3.0, Priority::Normal, 7u32);
        assert!(!q.is_empty());
        assert_eq!(q.next_time(), 3.0);
        q.push(1.0, Priority::Urgent, 8);
        assert_eq!(q.pop(), Some((1.0, 8)));
        assert!(!q.is_empty());
        assert_eq!(q.pop(), Some((3.0, 7)));
        assert!(q.is_empty());
        assert_eq!(q.next_time(), f64::INFINITY);
    }

    /// `Entry`'s `PartialEq` agrees with its `Ord`, as `Eq + Ord` require: equal exactly when the whole
    /// `(time, priority, seq)` key is equal; the payload plays no part.
    #[test]
    fn entry_equality_agrees_with_ordering() {
        let e = |time, priority, seq, event: u32| Entry { time, priority, seq, event };
        let a = e(1.0, Priority::Normal, 4, 10);
        assert!(a == e(1.0, Priority::Normal, 4, 99));
        assert!(a != e(1.0, Priority::Normal, 5, 10));
        assert!(a != e(1.0, Priority::Urgent, 4, 10));
        assert!(a != e(2.0, Priority::Normal, 4, 10));
        for b in [e(1.0, Priority::Normal, 4, 0), e(0.5, Priority::Normal, 9, 0), e(1.0, Priority::Urgent, 9, 0)] {
            assert_eq!(a == b, a.cmp(&b) == Ordering::Equal);
        }
    }

    proptest! {
        /// Popping yields exactly the sort by (time, priority, insertion index).
        #[test]
        fn pops_in_lexicographic_order(items in prop::collection::vec((0u8..5, any::<bool>()), 0..200)) {
            let mut q = EventQueue::new();
            for (i, &(t, urgent)) in items.iter().enumerate() {
                let p = if urgent { Priority::Urgent } else { Priority::Normal };
                q.push(t as f64 * 0.5, p, i);
            }
            let mut want: Vec<usize> = (0..items.len()).collect();
            want.sort_by_key(|&i| (items[i].0, if items[i].1 { 0 } else { 1 }, i));
            let got: Vec<usize> = std::iter::from_fn(|| q.pop().map(|(_, e)| e)).collect();
            prop_assert_eq!(got, want);
        }
    }
}
