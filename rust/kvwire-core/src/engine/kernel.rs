//! The event kernel: a priority queue of timed events.
//!
//! **Tie-break rule** (as SimPy): events are processed in ascending `(time, priority, seq)`, where
//! `priority` is [`Priority::Urgent`] before [`Priority::Normal`] and `seq` is the insertion order (a counter
//! incremented on every push). So two events at the same time and priority run in the order they were
//! scheduled. Times are `f64` seconds compared with `total_cmp`; NaN times are refused at push (debug) and
//! never produced by the engine, whose step costs are finite by validation.
//!
//! **Completion-order rule** (the engine's, on top of the tie-break): the requests that finish at the end of
//! one decode step complete in ascending request row (the request table's order; a sessions workload's
//! rows are session-major), whichever running-set representation ran the step. So the events a completion
//! schedules — a session's next turn, `think_s` after the finish — are pushed in row order, and turns that
//! become due at the same instant arrive, are routed and are served in row order with `engine.macro_steps`
//! on and off alike. (A prefill step's zero- and one-token outputs complete in the step's batch order, which
//! both paths share.)
//!
//! **Step calendar.** Besides the heap, the queue holds at most one pending *step end* per slot (an
//! instance) in a winner tree over the slots, outside the heap ([`EventQueue::set_step`]). A step end is a
//! `Normal` event whose `seq` comes from the same counter as the heap's, at the moment it is scheduled, and
//! [`EventQueue::pop_next`] returns whichever of the tree's head and the heap's head is first in
//! `(time, priority, seq)`. So the order is exactly the one a single heap holding every event would give:
//! the calendar only makes the many step ends cheaper (an update of log₂(slots) comparisons along a fixed
//! path instead of a heap push and pop among all pending events).

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

/// `time` as an integer ordered like `f64::total_cmp` (the sign-magnitude bits made two's complement).
#[inline(always)]
fn ordered(time: f64) -> i64 {
    let b = time.to_bits() as i64;
    b ^ (((b >> 63) as u64) >> 1) as i64
}

/// A step end's calendar key: `(time, seq)` as one unsigned integer ordered like the pair (the time's
/// total order in the high half, its sign bit flipped so that unsigned order is signed order).
#[inline(always)]
fn step_key(time: f64, seq: u64) -> u128 {
    ((((ordered(time) as u64) ^ (1 << 63)) as u128) << 64) | seq as u128
}

/// The key of an empty slot: after every step end.
const IDLE: u128 = u128::MAX;

/// A winner (tournament) tree over slots: the earliest `(time, seq)` among the slots' pending step ends.
struct StepCalendar {
    /// `tree[node]`: the winning (key, slot) of that subtree (`tree[1]`: the head); leaf `m + s` is slot `s`.
    tree: Vec<(u128, u32)>,
    /// Per slot: the time as scheduled.
    times: Vec<f64>,
    /// Leaves: `m`, a power of two ≥ 2 and ≥ the slots.
    m: usize,
}

impl StepCalendar {
    fn new(slots: usize) -> Self {
        let m = slots.next_power_of_two().max(2);
        let mut tree = vec![(IDLE, 0); 2 * m];
        for s in 0..m {
            tree[m + s].1 = s as u32;
        }
        StepCalendar { tree, times: vec![f64::INFINITY; m], m }
    }

    /// Set slot `s`'s key and replay its path to the root (ties between equal keys cannot occur: seqs
    /// are unique, and empty slots never win against a pending one).
    #[inline]
    fn set(&mut self, s: usize, key: u128, time: f64) {
        self.times[s] = time;
        let mut node = self.m + s;
        self.tree[node].0 = key;
        while node > 1 {
            let parent = node / 2;
            let (l, r) = (self.tree[2 * parent], self.tree[2 * parent + 1]);
            self.tree[parent] = if r.0 < l.0 { r } else { l };
            node = parent;
        }
    }

    /// The key of slot `s`.
    #[inline(always)]
    fn key(&self, s: usize) -> u128 {
        self.tree[self.m + s].0
    }

    /// The earliest pending (key, slot), or `(IDLE, _)`.
    #[inline(always)]
    fn head(&self) -> (u128, u32) {
        self.tree[1]
    }
}

/// What [`EventQueue::pop_next`] returns: a heap event, or the step end of a calendar slot.
#[derive(Debug, PartialEq)]
pub enum Next<E> {
    Event(f64, E),
    Step(f64, u32),
}

/// A min-queue of events ordered by `(time, priority, insertion order)`, with a step calendar beside the
/// heap (see the module documentation).
pub struct EventQueue<E> {
    heap: BinaryHeap<Entry<E>>,
    next_seq: u64,
    popped: u64,
    cal: StepCalendar,
    /// The slot whose step end [`Self::pop_next`] returned last and which has not been set since: it still
    /// holds its old key in the tree, cleared by the next `pop_next` unless `set_step` replaces it first
    /// (so the common case, a step end followed by the same instance's next one, is one tree update).
    taken: Option<u32>,
    steps_popped: u64,
}

impl<E> Default for EventQueue<E> {
    fn default() -> Self {
        Self::new()
    }
}

impl<E> EventQueue<E> {
    pub fn new() -> Self {
        Self::with_slots(0)
    }

    /// A queue whose step calendar has `slots` slots (`0..slots`).
    pub fn with_slots(slots: usize) -> Self {
        EventQueue {
            heap: BinaryHeap::new(),
            next_seq: 0,
            popped: 0,
            cal: StepCalendar::new(slots),
            taken: None,
            steps_popped: 0,
        }
    }

    /// Schedule slot `slot`'s next step end at `time` (a `Normal` event taking the next `seq`, as
    /// [`Self::push`] would), or leave the slot empty (`None`). A slot holds one step end at a time: set it
    /// only when it is empty or was just returned by [`Self::pop_next`].
    #[inline]
    pub fn set_step(&mut self, slot: u32, time: Option<f64>) {
        let s = slot as usize;
        let was_taken = self.taken == Some(slot);
        if was_taken {
            self.taken = None;
        }
        debug_assert!(was_taken || self.cal.key(s) == IDLE, "slot {slot} already holds a step end");
        match time {
            Some(t) => {
                debug_assert!(!t.is_nan(), "step end scheduled at NaN");
                let seq = self.next_seq;
                self.next_seq += 1;
                self.cal.set(s, step_key(t, seq), t);
            }
            None if was_taken => self.cal.set(s, IDLE, f64::INFINITY),
            None => {}
        }
    }

    /// Drop slot `slot`'s pending step end, if any (its instance failed: the step never ends).
    pub fn cancel_step(&mut self, slot: u32) {
        if self.taken == Some(slot) {
            self.taken = None;
        }
        self.cal.set(slot as usize, IDLE, f64::INFINITY);
    }

    /// Empty the slot returned by the last [`Self::pop_next`] if [`Self::set_step`] did not refill it.
    #[inline(always)]
    fn clear_taken(&mut self) {
        if let Some(s) = self.taken.take() {
            self.cal.set(s as usize, IDLE, f64::INFINITY);
        }
    }

    /// Whether the calendar's head comes before the heap's head in `(time, priority, seq)` (a step end is
    /// `Normal`); false when the calendar is empty.
    #[inline(always)]
    fn step_first(&self) -> bool {
        let (key, _) = self.cal.head();
        if key == IDLE {
            return false;
        }
        match self.heap.peek() {
            None => true,
            // (time, Normal, seq) < (heap time, heap priority, heap seq).
            Some(e) => {
                let (t, heap_t) = ((key >> 64) as u64, (step_key(e.time, 0) >> 64) as u64);
                t < heap_t || (t == heap_t && e.priority == Priority::Normal && (key as u64) < e.seq)
            }
        }
    }

    /// Remove and return whichever comes first: the heap's next event or the calendar's next step end. A
    /// returned step end's slot stays reserved until [`Self::set_step`] (its next step) or the next call.
    #[inline]
    pub fn pop_next(&mut self) -> Option<Next<E>> {
        self.clear_taken();
        if self.step_first() {
            let (_, s) = self.cal.head();
            self.taken = Some(s);
            self.steps_popped += 1;
            return Some(Next::Step(self.cal.times[s as usize], s));
        }
        self.pop().map(|(t, e)| Next::Event(t, e))
    }

    /// Whether slot `slot`'s step end at `time` comes strictly before every other pending event — the
    /// heap's head and every other slot's step end (the slot's own key, empty or just taken, is not
    /// looked at) — so that it is next in `(time, priority, seq)` whatever `seq` it would take. Then the
    /// caller runs it at once instead of [`Self::set_step`] (the inline fast path of a busy instance: one
    /// comparison per tree level and none of the calendar's updates), and it counts as a step end taken
    /// from the calendar. Equal times are never run at once: the seq order decides them, in the calendar.
    #[inline(always)]
    pub fn step_runs_now(&mut self, slot: u32, time: f64) -> bool {
        if self.heap.peek().is_some_and(|e| time.total_cmp(&e.time) != Ordering::Less) {
            return false;
        }
        // The other slots are the sibling subtrees along the slot's path to the root.
        let t = (step_key(time, 0) >> 64) as u64;
        let mut node = self.cal.m + slot as usize;
        while node > 1 {
            if (self.cal.tree[node ^ 1].0 >> 64) as u64 <= t {
                return false;
            }
            node /= 2;
        }
        self.steps_popped += 1;
        true
    }

    /// Step ends returned from the calendar (or run at once, [`Self::step_runs_now`]) so far.
    pub fn steps_processed(&self) -> u64 {
        self.steps_popped
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

    /// Pending step ends of the calendar: `(slot, time)` (not the slot just taken by [`Self::pop_next`]).
    fn pending_steps(&self) -> impl Iterator<Item = (usize, f64)> + '_ {
        let taken = self.taken.map(|s| s as usize);
        (0..self.cal.m).filter(move |&s| self.cal.key(s) != IDLE && Some(s) != taken).map(|s| (s, self.cal.times[s]))
    }

    /// Time of the next event of the heap or step end of the calendar (`+∞` when both are empty). A scan of
    /// the slots: for checks, not for the event loop.
    pub fn next_time(&self) -> f64 {
        let heap = self.heap.peek().map_or(f64::INFINITY, |e| e.time);
        self.pending_steps().fold(heap, |t, (_, s)| t.min(s))
    }

    /// Number of events processed so far.
    pub fn processed(&self) -> u64 {
        self.popped
    }

    /// Whether neither the heap nor the calendar holds anything (a slot just taken by [`Self::pop_next`]
    /// and not set again counts as empty).
    pub fn is_empty(&self) -> bool {
        self.heap.is_empty() && self.pending_steps().next().is_none()
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

    #[derive(Clone, Copy, Debug, PartialEq)]
    enum Lab {
        Ev(u32),
        Step(u32),
    }

    fn next_lab(q: &mut EventQueue<u32>) -> Option<(f64, Lab)> {
        q.pop_next().map(|n| match n {
            Next::Event(t, e) => (t, Lab::Ev(e)),
            Next::Step(t, s) => (t, Lab::Step(s)),
        })
    }

    /// A step end against heap events at the same time: `Urgent` events first, then by scheduling order
    /// (a `Normal` event pushed before the step end runs before it, one pushed after runs after it).
    #[test]
    fn step_ends_tie_break_with_heap_events() {
        let mut q = EventQueue::with_slots(3);
        q.push(1.0, Priority::Normal, 10);
        q.set_step(2, Some(1.0));
        q.push(1.0, Priority::Normal, 11);
        q.push(1.0, Priority::Urgent, 12);
        q.set_step(0, Some(1.0));
        q.set_step(1, Some(0.5));
        let got: Vec<_> = std::iter::from_fn(|| next_lab(&mut q)).collect();
        assert_eq!(
            got,
            [
                (0.5, Lab::Step(1)),
                (1.0, Lab::Ev(12)),
                (1.0, Lab::Ev(10)),
                (1.0, Lab::Step(2)),
                (1.0, Lab::Ev(11)),
                (1.0, Lab::Step(0)),
            ]
        );
        assert_eq!((q.processed(), q.steps_processed()), (3, 3));
        assert!(q.is_empty());
    }

    /// `step_runs_now` says yes exactly when the step end is strictly before the heap's head and every other
    /// slot's pending step end (equal times: no, the calendar's seq order decides them); the slot's own key
    /// (empty, or just taken with its old time) is not looked at; a yes counts as a calendar step.
    #[test]
    fn step_runs_now_only_when_strictly_first() {
        let mut q: EventQueue<u32> = EventQueue::with_slots(5);
        assert!(q.step_runs_now(3, 7.0), "nothing pending");
        q.push(2.0, Priority::Normal, 1);
        q.set_step(4, Some(1.5));
        assert!(q.step_runs_now(0, 1.0));
        assert!(!q.step_runs_now(0, 1.5), "equal to another slot's step end");
        assert!(!q.step_runs_now(0, 1.7), "after another slot's step end");
        assert!(q.step_runs_now(4, 1.9), "its own pending key is not looked at");
        assert!(!q.step_runs_now(4, 2.0), "equal to the heap's head");
        assert!(!q.step_runs_now(2, f64::INFINITY));
        assert_eq!(q.steps_processed(), 3);
        // The slot just taken by pop_next keeps its old key in the tree; its next step may still run at once.
        assert_eq!(q.pop_next(), Some(Next::Step(1.5, 4)));
        assert!(q.step_runs_now(4, 1.8));
        q.set_step(4, Some(2.5));
        assert!(!q.step_runs_now(1, 2.5), "after the heap's head");
        assert_eq!(q.pop_next(), Some(Next::Event(2.0, 1)));
        assert_eq!(q.pop_next(), Some(Next::Step(2.5, 4)));
        assert_eq!(q.steps_processed(), 6);
    }

    /// A popped step end's slot is free again: refilled by `set_step` (one update), emptied by `None`, or
    /// emptied on the next `pop_next` when not set; `next_time` and `is_empty` ignore the taken slot.
    #[test]
    fn taken_slot_is_refilled_or_emptied() {
        let mut q = EventQueue::with_slots(1);
        q.set_step(0, Some(2.0));
        q.push(3.0, Priority::Normal, 7);
        assert_eq!(q.next_time(), 2.0);
        assert_eq!(next_lab(&mut q), Some((2.0, Lab::Step(0))));
        assert_eq!(q.next_time(), 3.0);
        q.set_step(0, Some(2.5));
        assert_eq!(q.next_time(), 2.5);
        assert_eq!(next_lab(&mut q), Some((2.5, Lab::Step(0))));
        q.set_step(0, None);
        assert_eq!(next_lab(&mut q), Some((3.0, Lab::Ev(7))));
        q.set_step(0, Some(4.0));
        assert_eq!(next_lab(&mut q), Some((4.0, Lab::Step(0))));
        assert!(q.is_empty(), "a taken slot not set again is empty");
        assert_eq!(next_lab(&mut q), None);
        assert_eq!(q.next_time(), f64::INFINITY);
        // Negative zero and +0 order as total_cmp does (the heap's rule), also in the calendar.
        q.set_step(0, Some(0.0));
        q.push(-0.0, Priority::Normal, 8);
        assert_eq!(next_lab(&mut q), Some((-0.0, Lab::Ev(8))));
    }

    proptest! {
        /// The calendar is invisible to the order: a random interleaving of heap pushes, step ends set on
        /// idle slots, pops, and step ends re-set right after their slot was popped, gives exactly the
        /// sequence of a plain heap holding every step end as a `Normal` event pushed at the same moment.
        #[test]
        fn calendar_order_equals_one_heap(
            slots in 1usize..7,
            ops in prop::collection::vec((0u8..3, 0u8..6, any::<bool>(), 0usize..7), 0..300),
        ) {
            let mut cal: EventQueue<u32> = EventQueue::with_slots(slots);
            let mut one: EventQueue<Lab> = EventQueue::new();
            let mut busy = vec![false; slots];
            let (mut got, mut want) = (Vec::new(), Vec::new());
            for (id, &(kind, t, flag, slot)) in ops.iter().enumerate() {
                let time = t as f64 * 0.5;
                let slot = slot % slots;
                match kind {
                    0 => {
                        let p = if flag { Priority::Urgent } else { Priority::Normal };
                        cal.push(time, p, id as u32);
                        one.push(time, p, Lab::Ev(id as u32));
                    }
                    1 if !busy[slot] => {
                        busy[slot] = true;
                        cal.set_step(slot as u32, Some(time));
                        one.push(time, Priority::Normal, Lab::Step(slot as u32));
                    }
                    1 => {}
                    _ => {
                        let a = next_lab(&mut cal);
                        let b = one.pop();
                        prop_assert_eq!(a, b);
                        if let Some((now, Lab::Step(s))) = a {
                            // The instance starts its next step (or goes idle).
                            if flag {
                                cal.set_step(s, Some(now + time));
                                one.push(now + time, Priority::Normal, Lab::Step(s));
                            } else {
                                busy[s as usize] = false;
                                cal.set_step(s, None);
                            }
                        }
                        got.extend(a);
                        want.extend(b);
                    }
                }
                prop_assert_eq!(cal.next_time(), one.next_time());
            }
            got.extend(std::iter::from_fn(|| next_lab(&mut cal)));
            want.extend(std::iter::from_fn(|| one.pop()));
            prop_assert_eq!(got, want);
            prop_assert!(cal.is_empty());
        }

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
