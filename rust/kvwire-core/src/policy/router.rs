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
    /// Leading prompt tokens of the request being routed that the instance's prefix cache holds (0 where
    /// there is no prefix cache).
    fn cached_prefix_tokens(&self, _i: usize) -> u64 {
        0
    }
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
    /// The instance holding the longest cached prefix of the request, load-bounded ([`prefix_affinity`]).
    PrefixAffinity { max_imbalance_tokens: u64 },
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
            Rule::PrefixAffinity { max_imbalance_tokens } => prefix_affinity(v, max_imbalance_tokens),
        }
    }
}

/// Cache-aware routing with a load bound (SGLang's router, simplified): the instance with the most cached
/// prefix tokens of the request (ties: fewest queued prompt tokens, then the lowest index), unless its queued
/// prompt tokens exceed the least-queued instance's by more than `max_imbalance_tokens` — then the
/// least-queued instance ([`Rule::LeastQueuedTokens`]). With no cached prefix anywhere this is
/// [`Rule::LeastQueuedTokens`].
pub fn prefix_affinity<V: LoadView + ?Sized>(v: &V, max_imbalance_tokens: u64) -> usize {
    let n = v.instances();
    let least = argmin(n, |i| v.queued_tokens(i));
    let mut best = least;
    for i in 0..n {
        let (c, b) = (v.cached_prefix_tokens(i), v.cached_prefix_tokens(best));
        if c > b || (c == b && (v.queued_tokens(i), i) < (v.queued_tokens(best), best)) {
            best = i;
        }
    }
    if v.queued_tokens(best) > v.queued_tokens(least).saturating_add(max_imbalance_tokens) {
        least
    } else {
        best
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

    struct Cached(View, Vec<u64>);
    impl LoadView for Cached {
        fn instances(&self) -> usize {
            self.0.instances()
        }
        fn queued_tokens(&self, i: usize) -> u64 {
            self.0.queued_tokens(i)
        }
        fn queued_requests(&self, i: usize) -> u64 {
            self.0.queued_requests(i)
        }
        fn running(&self, i: usize) -> u64 {
            self.0.running(i)
        }
        fn cached_prefix_tokens(&self, i: usize) -> u64 {
            self.1[i]
        }
    }

    /// Prefix affinity: the longest cached prefix wins; ties go to the least-queued (then lowest) instance;
    /// no cached prefix anywhere is least-queued routing; over the imbalance bound the least-queued instance
    /// takes the request.
    #[test]
    fn prefix_affinity_longest_prefix_then_load_bound() {
        let v = |q: [u64; 3], c: [u64; 3]| Cached(View(q.iter().map(|&t| (t, 0, 0)).collect()), c.to_vec());
        assert_eq!(prefix_affinity(&v([100, 0, 50], [512, 0, 1024]), 1000), 2);
        assert_eq!(prefix_affinity(&v([100, 0, 50], [512, 0, 512]), 1000), 2);
        assert_eq!(prefix_affinity(&v([50, 0, 50], [512, 0, 512]), 1000), 0);
        assert_eq!(prefix_affinity(&v([100, 30, 50], [0, 0, 0]), 1000), 1);
        // Best holds 1024 cached tokens but 2000 queued vs 0: over the bound of 1000.
        assert_eq!(prefix_affinity(&v([0, 2000, 500], [0, 1024, 0]), 1000), 0);
        // Exactly at the bound it stays.
        assert_eq!(prefix_affinity(&v([0, 1000, 500], [0, 1024, 0]), 1000), 1);
        let mut r = Router::new(Rule::PrefixAffinity { max_imbalance_tokens: 1000 });
        assert_eq!(r.pick(&v([0, 1000, 500], [0, 1024, 0])), 1);
    }

    #[test]
    fn round_robin_cycles() {
        let mut r = Router::new(Rule::RoundRobin);
        let v = View(vec![(0, 0, 0); 3]);
        let picks: Vec<_> = (0..7).map(|_| r.pick(&v)).collect();
        assert_eq!(picks, [0, 1, 2, 0, 1, 2, 0]);
    }
}
