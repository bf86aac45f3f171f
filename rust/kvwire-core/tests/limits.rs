//! Run limits (issue 9 item 7): cancellation through `simulate_with`, `engine.max_steps`, and allocation
//! failures reported as errors instead of aborts.

use std::sync::atomic::AtomicBool;

use kvwire_core::metrics::table::try_filled;
use kvwire_core::{simulate, simulate_with, Error, Scenario};

fn long_run(extra: &str) -> Scenario {
    let n = 200;
    let col = |v: &str| vec![v; n].join(",");
    let json = format!(
        r#"{{"scheduler": {{"max_decode_batch": 1}}, {extra} "workload": {{"trace": {{"arrival_s": [{}],
            "prompt_tokens": [{}], "output_tokens": [{}]}}}}}}"#,
        col("0"),
        col("1"),
        col("400000")
    );
    Scenario::from_json(&json, None).unwrap()
}

/// A set cancel flag stops a run of 80 million decode steps (calendar step ends or kernel events) with
/// `Error::Cancelled`; an unset one changes nothing (a short run is identical to `simulate`).
#[test]
fn cancel_flag_stops_the_run() {
    let stop = AtomicBool::new(true);
    for macro_steps in [true, false] {
        let sc = long_run(&format!(r#""engine": {{"macro_steps": {macro_steps}}},"#));
        assert_eq!(simulate_with(sc, Some(&stop)).unwrap_err(), Error::Cancelled);
    }
    let go = AtomicBool::new(false);
    let short = || Scenario::from_json(r#"{"workload": {"requests": 300}}"#, None).unwrap();
    let a = simulate_with(short(), Some(&go)).unwrap();
    let b = simulate(short()).unwrap();
    assert_eq!(a.table, b.table);
    assert_eq!(a.stats.events, b.stats.events);
}

/// `engine.max_steps`: a run needing more batch steps than the limit fails naming the field, whether the
/// periodic check (long run) or the final one (short run) catches it; exactly enough steps is fine.
#[test]
fn max_steps_bounds_the_work() {
    let e = simulate(long_run(r#""engine": {"max_steps": 1000000},"#)).unwrap_err();
    assert_eq!(e.path(), "engine.max_steps");
    let sc = |limit: u64| {
        Scenario::from_json(&format!(r#"{{"workload": {{"requests": 50}}, "engine": {{"max_steps": {limit}}}}}"#), None)
            .unwrap()
    };
    let steps: u64 = simulate(sc(u64::MAX)).unwrap().stats.instances.iter().map(|i| i.steps).sum();
    assert!(simulate(sc(steps)).is_ok());
    assert_eq!(simulate(sc(steps - 1)).unwrap_err().path(), "engine.max_steps");
}

/// An allocation that cannot be made is `Error::Resource` naming what set its size, not an abort.
#[test]
fn impossible_allocation_is_an_error() {
    let e = try_filled(usize::MAX / 2, 0u64).unwrap_err();
    assert!(matches!(e, Error::Resource { .. }), "{e:?}");
    assert_eq!(e.path(), "workload.requests");
    assert_eq!(try_filled(3, 7u8).unwrap(), vec![7, 7, 7]);
}
