//! Routing decisions: which instance of a pool receives a request. The engine exposes the pool's state
//! through [`LoadView`]; the router decides. Ties always go to the lowest instance index.

/// What a router may look at: per-instance queue and running counts at the moment of the decision.
pub trait LoadView {
    fn instances(&self) -> usize;
    /// Prompt tokens waiting in the instance's queue (a batch in flight is not counted).
    fn queued_tokens(&self, i: usize) -> u64;
    /// Requests waiting in the instance's queue.
    fn queued_requests(&self, i: usize) -> u64;
    /// Sequences in the instance's running (decode) set.
    fn running(&self, i: usize) -> u64;
}

/// A routing rule.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rule {
    /// Fewest queued prompt tokens (the reference's prefill router).
    LeastQueuedTokens,
    /// Fewest queued + running requests (the reference's decode and colocated router).
    LeastLoaded,
    /// Instances in turn, 0, 1, …, n−1, 0, …
    RoundRobin,
}

/// A router with its (round-robin) state.
#[derive(Clone, Debug)]
pub struct Router {
    rule: Rule,
    next: usize,
}

impl Router {
    pub fn new(rule: Rule) -> Self {
        Router { rule, next: 0 }
    }

    /// The instance that receives the next request.
    pub fn pick<V: LoadView + ?Sized>(&mut self, v: &V) -> usize {
        let n = v.instances();
        match self.rule {
            Rule::LeastQueuedTokens => argmin(n, |i| v.queued_tokens(i)),
            Rule::LeastLoaded => argmin(n, |i| v.queued_requests(i) + v.running(i)),
            Rule::RoundRobin => {
                let i = self.next % n;
                self.next = (i + 1) % n;
                i
            }
        }
    }
}

/// Index of the smallest key; the lowest index among equals.
fn argmin(n: usize, key: impl Fn(usize) -> u64) -> usize {
    let mut best = 0;
    let mut best_key = key(0);
    for i in 1..n {
        let k = key(i);
        if k < best_key {
            best = i;
            best_key = k;
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    struct View(Vec<(u64, u64, u64)>);
    impl LoadView for View {
        fn instances(&self) -> usize {
            self.0.len()
        }
        fn queued_tokens(&self, i: usize) -> u64 {
            self.0[i].0
        }
        fn queued_requests(&self, i: usize) -> u64 {
            self.0[i].1
        }
        fn running(&self, i: usize) -> u64 {
            self.0[i].2
        }
    }

    #[test]
    fn least_queued_tokens_ignores_running_and_breaks_ties_low() {
        let mut r = Router::new(Rule::LeastQueuedTokens);
        assert_eq!(r.pick(&View(vec![(5, 1, 0), (3, 9, 9), (3, 0, 0)])), 1);
        assert_eq!(r.pick(&View(vec![(0, 0, 0), (0, 0, 0)])), 0);
    }

    #[test]
    fn least_loaded_counts_queued_plus_running() {
        let mut r = Router::new(Rule::LeastLoaded);
        assert_eq!(r.pick(&View(vec![(0, 2, 3), (900, 4, 0), (0, 1, 4)])), 1);
        assert_eq!(r.pick(&View(vec![(0, 2, 3), (0, 1, 4)])), 0);
    }

    #[test]
    fn round_robin_cycles() {
        let mut r = Router::new(Rule::RoundRobin);
        let v = View(vec![(0, 0, 0); 3]);
        let picks: Vec<_> = (0..7).map(|_| r.pick(&v)).collect();
        assert_eq!(picks, [0, 1, 2, 0, 1, 2, 0]);
    }
}
