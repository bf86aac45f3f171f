//! `engine.timeline`: the spans a run records, checked against the request table and the run totals (not
//! against the recorder itself), the span bound, and that recording changes nothing else.

use kvwire_core::{simulate, Error, Scenario, SimOutput};
use serde_json::{json, Value};

fn try_run(v: &Value) -> kvwire_core::Result<SimOutput> {
    simulate(Scenario::from_json(&v.to_string(), None).expect("valid scenario"))
}

fn run(v: &Value) -> SimOutput {
    try_run(v).expect("run")
}

fn with_timeline(v: &Value, max_spans: Option<u64>) -> Value {
    let mut v = v.clone();
    v["engine"]["timeline"] = json!(true);
    if let Some(m) = max_spans {
        v["engine"]["timeline_max_spans"] = json!(m);
    }
    v
}

/// 2P3D, two link channels, bursty arrivals: overlapping transfers and several busy decoders.
fn scenario() -> Value {
    json!({
        "prefill": {"instances": 2},
        "decode": {"instances": 3},
        "link": {"preset": "eth-100g", "channels": 2},
        "workload": {"requests": 120, "seed": 3, "arrivals": {"process": "gamma", "rate_per_s": 20, "cv": 2}},
    })
}

/// Recording changes nothing: the table and every total are equal with the timeline on and off (and the
/// returned stats hold no spans); off, no timeline is returned.
#[test]
fn recording_changes_nothing() {
    let off = run(&scenario());
    let on = run(&with_timeline(&scenario(), None));
    assert!(off.timeline.is_none() && on.timeline.is_some());
    assert_eq!(format!("{:?}", off.table), format!("{:?}", on.table));
    assert_eq!(off.stats.instances, on.stats.instances);
    assert_eq!(off.stats.links, on.stats.links);
    assert_eq!((off.stats.events, off.stats.calendar_steps), (on.stats.events, on.stats.calendar_steps));
    assert_eq!(off.stats.horizon_s.to_bits(), on.stats.horizon_s.to_bits());
}

/// One span per batch step of each instance (as many as its `steps`, prefill ones as many as its
/// `prefill_steps`, their batch sizes summing to its `batch_sum`), back to back or apart but never
/// overlapping; one span per transfer on each hop lane (as many as its `transfers`, bytes summing to its
/// totals), each from the request's `kv_start_s` to its `kv_ready_s` on this one-hop path.
#[test]
fn spans_match_the_totals_and_the_table() {
    let out = run(&with_timeline(&scenario(), None));
    let tl = out.timeline.as_ref().expect("timeline");
    assert_eq!(tl.steps.len(), out.stats.instances.len());
    for (s, inst) in tl.steps.iter().zip(&out.stats.instances) {
        assert_eq!(s.len() as u64, inst.steps, "{}", inst.name);
        assert_eq!(s.kind.iter().filter(|&&k| k == 0).count() as u64, inst.prefill_steps, "{}", inst.name);
        assert_eq!(s.batch.iter().map(|&b| b as u64).sum::<u64>(), inst.batch_sum, "{}", inst.name);
        let busy: f64 = s.start_s.iter().zip(&s.end_s).map(|(a, b)| b - a).sum();
        assert!((busy - inst.busy_s).abs() <= 1e-9 * inst.busy_s.max(1.0), "{}", inst.name);
        for k in 1..s.len() {
            assert!(s.start_s[k] >= s.end_s[k - 1], "{}: steps overlap", inst.name);
        }
    }
    let t = &out.table;
    assert_eq!(tl.transfers.len(), out.stats.links.len());
    for (x, link) in tl.transfers.iter().zip(&out.stats.links) {
        assert_eq!(x.len() as u64, link.transfers);
        assert_eq!(x.handoff_bytes.iter().sum::<f64>(), link.handoff_bytes);
        for k in 0..x.len() {
            let i = x.request[k] as usize;
            assert_eq!(t.id[i], x.request[k]);
            assert_eq!((x.start_s[k], x.end_s[k]), (t.kv_start_s[i], t.kv_ready_s[i]), "request {i}");
        }
    }
}

/// The bound is exact: a run recording N spans passes with `timeline_max_spans` N and stops with an error
/// naming the field at N − 1.
#[test]
fn the_span_bound_is_exact_and_named() {
    let n = run(&with_timeline(&scenario(), None)).timeline.expect("timeline").spans() as u64;
    assert!(n > 500, "{n}");
    assert!(try_run(&with_timeline(&scenario(), Some(n))).is_ok());
    match try_run(&with_timeline(&scenario(), Some(n - 1))) {
        Err(Error::Field { path, reason }) => {
            assert_eq!(path, "engine.timeline_max_spans");
            assert!(reason.contains(&format!("more than {}", n - 1)), "{reason}");
        }
        other => panic!("expected the bound's error, got {:?}", other.map(|o| o.stats.events)),
    }
}

/// A long run far over the bound (it would record ~10⁶ spans) stops with the same error, never silently
/// truncating its timeline.
#[test]
fn a_run_far_over_the_bound_stops_early() {
    let sc = json!({"workload": {"requests": 20000}, "engine": {"timeline": true, "timeline_max_spans": 1000}});
    let e = try_run(&sc).expect_err("over the bound");
    assert!(e.to_string().contains("engine.timeline_max_spans"), "{e}");
}
