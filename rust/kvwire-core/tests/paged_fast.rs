//! The fast paged running set (`engine/running.rs`, `FastPaged`: growth counted per residue, preemption by a
//! stack of records) against the plain per-sequence one, end to end. The engine uses the fast set with
//! `engine.macro_steps` (the default) and the plain one without, so a run with macro-steps off is the
//! reference: tables, preemption counts, ITL histograms and instance totals must agree bit for bit.

mod common;
use common::{run, step_by_step_diff};

use kvwire_core::SimOutput;
use proptest::prelude::*;
use serde_json::{json, Value};

/// Run `v` with the fast set (macro-steps) and compare everything with the plain set (step by step).
fn fast_and_plain(v: &Value) -> (SimOutput, bool) {
    let fast = run(v);
    let same = step_by_step_diff(v, &fast).is_none();
    (fast, same)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]

    /// Random paged runs under memory pressure (colocated, disaggregated or conditional; whole or chunked
    /// prefill; block sizes 1–63; both preemption modes; caches of a few hundred to ~12k tokens, so many runs
    /// preempt): the fast paged running set gives the plain set's results bit for bit.
    #[test]
    fn fast_paged_set_equals_plain_on_random_runs(
        seed in 0u64..1000,
        rate in 1.0f64..60.0,
        mode in 0u8..3,
        chunked in any::<bool>(),
        block in prop_oneof![Just(16u32), 1u32..64],
        swap in any::<bool>(),
        mem_util in 0.2015f64..0.22,
    ) {
        let mut v = json!({
            "workload": {"requests": 50, "seed": seed, "arrivals": {"process": "poisson", "rate_per_s": rate},
                         "prompt_tokens": {"dist": "lognormal", "mean": 300, "cv": 1.0, "max": 4000},
                         "output_tokens": {"dist": "lognormal", "mean": 200, "cv": 1.0, "min": 0, "max": 1500}},
            "cost": {"mem_util": mem_util},
            "metrics": {"warmup_fraction": 0.0},
            "kv": {"policy": "paged", "block_size": block, "preemption": if swap { "swap" } else { "recompute" }},
        });
        match mode {
            0 => {
                v["mode"] = json!("colocated");
                v["colocated"] = json!({"instances": 2});
            }
            1 => {}
            _ => v["router"] = json!({"disaggregate": {"policy": "conditional", "min_prompt_tokens": 600}}),
        }
        if chunked {
            v["scheduler"] = json!({"policy": "chunked", "max_num_batched_tokens": 256});
        }
        let (_, same) = fast_and_plain(&v);
        prop_assert!(same);
    }
}

/// Twelve 200 + 600-token requests on one colocated instance with a ~3.8k-token cache: both preemption modes
/// preempt (so the fast set's preemption, resumption and stale finish entries are exercised) and the fast set
/// equals the plain one bit for bit.
#[test]
fn fast_paged_set_equals_plain_under_preemption() {
    let n = 12;
    for preemption in ["recompute", "swap"] {
        for block in [1, 16, 48] {
            let v = json!({
                "mode": "colocated",
                "colocated": {"instances": 1},
                "cost": {"mem_util": 0.2070},
                "metrics": {"warmup_fraction": 0.0},
                "kv": {"policy": "paged", "preemption": preemption, "block_size": block},
                "workload": {"trace": {
                    "arrival_s": (0..n).map(|i| i as f64 * 0.01).collect::<Vec<_>>(),
                    "prompt_tokens": vec![200; n],
                    "output_tokens": vec![600; n],
                }},
            });
            let (fast, same) = fast_and_plain(&v);
            assert!(fast.stats.preemptions > 0, "{preemption} block {block}: no preemption");
            assert!(same, "{preemption} block {block}: fast and plain paged sets differ");
        }
    }
}
