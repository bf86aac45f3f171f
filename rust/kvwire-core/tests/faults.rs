//! Faults (issue 28 item 1, instance failures): what a failure loses is counted against the same run
//! without it (identical up to the failure, so it says independently what each instance held), faults that
//! never fire change nothing, availability against its definition, macro-steps against step by step, the
//! retry limit, determinism of random failures and their rate, and the refusals.

mod common;

use common::{merged, run, step_by_step_diff, table_diff};
use kvwire_core::metrics::table::RequestTable;
use kvwire_core::{Error, Scenario, SimOutput};
use serde_json::{json, Value};

/// 2 prefill and 3 decode instances under load (busy decode batches and queues at any time).
fn cluster() -> Value {
    json!({
        "prefill": {"device": "h100", "instances": 2},
        "decode": {"device": "h100", "instances": 3},
        "workload": {"requests": 400, "seed": 7, "arrivals": {"process": "poisson", "rate_per_s": 12.0}},
    })
}

fn with_faults(base: &Value, faults: Value) -> Value {
    merged(base, &json!({ "faults": faults }))
}

fn refused(v: &Value) -> Error {
    match Scenario::from_json(&v.to_string(), None) {
        Ok(_) => panic!("accepted: {v}"),
        Err(e) => e,
    }
}

/// The rows that tried again at least once.
fn retried(t: &RequestTable) -> Vec<usize> {
    (0..t.len()).filter(|&r| t.retries[r] > 0).collect()
}

/// Whether no two of `xs` are equal up to the rounding of the times they were measured from (1e-9 relative).
fn all_apart(xs: &[f64]) -> bool {
    let mut v = xs.to_vec();
    v.sort_by(f64::total_cmp);
    v.windows(2).all(|w| w[1] - w[0] > 1e-9 * w[1].abs())
}

/// The run of `v` with its fault columns and totals set aside: what must equal a run without faults.
fn without_fault_columns(mut out: SimOutput) -> SimOutput {
    out.table.retries.clear();
    out.table.lost_s.clear();
    out.table.failed.clear();
    out.stats.faults = None;
    out
}

/// Faults that never fire (no events; failures a billion years apart) leave every figure as without faults:
/// routing among the live instances is the usual routing when all are live, and nothing else changes.
#[test]
fn faults_that_never_fire_change_nothing() {
    let colocated = json!({"mode": "colocated", "colocated": {"device": "h100", "instances": 3},
                           "workload": {"requests": 300, "arrivals": {"process": "poisson", "rate_per_s": 10.0}}});
    let chunked = merged(&cluster(), &json!({"scheduler": {"policy": "chunked"}}));
    let round_robin = merged(&cluster(), &json!({"router": {"prefill": "round_robin", "decode": "round_robin"}}));
    let mtp = merged(&cluster(), &json!({"speculative": {"method": "mtp", "tokens": 3, "acceptance": 0.7}}));
    for base in [cluster(), colocated, chunked, round_robin, mtp] {
        for macro_steps in [true, false] {
            let base = merged(&base, &json!({"engine": {"macro_steps": macro_steps}}));
            let plain = run(&base);
            for faults in [
                json!({}),
                json!({"instance": {"mtbf_s": 3.0e16, "mttr_s": 1.0}}),
                json!({"transfer_failure_p": 0.0, "retry_s": 1.0}),
            ] {
                let out = run(&with_faults(&base, faults.clone()));
                let f = out.stats.faults.expect("fault totals");
                assert_eq!((f.instance_failures, f.retried_requests, f.failed_requests), (0, 0, 0));
                assert_eq!(f.availability, 1.0);
                assert!(out.table.retries.iter().all(|&r| r == 0) && out.table.lost_s.iter().all(|&l| l == 0.0));
                let out = without_fault_columns(out);
                assert_eq!(table_diff(&out.table, &plain.table), None, "{faults} on {base}");
                assert_eq!(out.stats.instances, plain.stats.instances);
                assert_eq!(out.stats.itl_quantiles(), plain.stats.itl_quantiles());
                assert_eq!(out.stats.horizon_s, plain.stats.horizon_s);
            }
        }
    }
}

/// What decode instance `d` (of the decode pool) held at `t` in a run: the requests whose hand-off had
/// landed on it (decoding, or waiting for admission) and that had not finished.
fn held_by_decode(out: &SimOutput, d: i32, t: f64) -> Vec<usize> {
    let x = &out.table;
    (0..x.len()).filter(|&r| x.decode_instance[r] == d && x.kv_ready_s[r] <= t && x.finish_s[r] > t).collect()
}

/// One scheduled failure of a decode instance: exactly the requests it held (taken from the run without
/// the failure, which is the same run up to it) start over, once each, losing the time since their prefill
/// started; no other request is retried and none is lost.
#[test]
fn a_decode_failure_re_prefills_exactly_what_it_held() {
    let base = cluster();
    let plain = run(&base);
    for (d, at) in [(0, 9.37), (2, 20.11)] {
        let held = held_by_decode(&plain, d, at);
        assert!(held.len() >= 5, "the failure should hit a busy instance: {}", held.len());
        let out = run(&with_faults(
            &base,
            json!({"events": [{"instance": format!("decode-{d}"), "at_s": at, "for_s": 15.0}]}),
        ));
        let x = &out.table;
        let retried = retried(x);
        assert_eq!(retried, held, "decode-{d} at {at}");
        assert!(retried.iter().all(|&r| x.retries[r] == 1));
        for &r in &held {
            let want = at - plain.table.prefill_start_s[r];
            assert!((x.lost_s[r] - want).abs() <= 1e-9 * at, "row {r}: lost {} vs {want}", x.lost_s[r]);
            // Prefilled again after the failure, decoded elsewhere (the instance is down for 15 s).
            assert!(x.prefill_start_s[r] >= at && x.decode_instance[r] != d || x.decode_start_s[r] >= at + 15.0);
        }
        // Nothing lost: every request finishes.
        assert_eq!(out.stats.completed, plain.stats.completed);
        assert!(x.finish_s.iter().all(|f| f.is_finite()) && x.failed.iter().all(|&f| !f));
        let f = out.stats.faults.unwrap();
        assert_eq!((f.instance_failures, f.retried_requests, f.failed_requests), (1, held.len() as u64, 0));
        let lost: f64 = held.iter().map(|&r| at - plain.table.prefill_start_s[r]).sum();
        assert!((f.lost_work_s - lost).abs() <= 1e-9 * lost);
        // The first token was generated before the failure and stays; the user sees it (metrics.first_token
        // "decode": at the end of the first decode step) as without the failure if that step ended before
        // it, else after the retry's.
        let mut seen_later = 0;
        for &r in &held {
            assert_eq!(x.first_token_s[r], plain.table.first_token_s[r]);
            let seen = plain.table.first_token_seen_s[r];
            if seen <= at {
                assert_eq!(x.first_token_seen_s[r], seen);
            } else {
                assert!(x.first_token_seen_s[r] > at, "row {r}: {} vs {seen}", x.first_token_seen_s[r]);
                seen_later += 1;
            }
        }
        assert!(seen_later < held.len());
        // No hand-off lands on the instance while it is down.
        assert!((0..x.len())
            .all(|r| !(x.decode_instance[r] == d && x.decode_start_s[r] > at && x.decode_start_s[r] < at + 15.0)));
    }
}

/// The only decode instance down: what it held and what was on the wire to it start over; the prompts
/// prefilled meanwhile wait to hand off (none is lost) and their transfers start when it is back.
#[test]
fn with_no_decode_instance_up_hand_offs_wait() {
    let base = json!({"workload": {"requests": 300, "arrivals": {"process": "poisson", "rate_per_s": 6.0}}});
    let plain = run(&base);
    let (at, down) = (10.0, 5.0);
    let p = &plain.table;
    let lost: Vec<usize> =
        (0..p.len()).filter(|&r| p.kv_start_s[r] <= at && p.finish_s[r] > at && p.output_tokens[r] >= 2).collect();
    assert!(lost.len() >= 3);
    let out = run(&with_faults(&base, json!({"events": [{"instance": "decode-0", "at_s": at, "for_s": down}]})));
    let x = &out.table;
    let retried = retried(x);
    assert_eq!(retried, lost);
    assert!(x.failed.iter().all(|&f| !f));
    assert_eq!(out.stats.completed, plain.stats.completed);
    // Every hand-off that starts during the outage starts when it ends (the waiting ones, in order).
    let waited: Vec<usize> = (0..x.len())
        .filter(|&r| x.first_token_s[r] > at && x.first_token_s[r] < at + down && x.output_tokens[r] >= 2)
        .collect();
    assert!(!waited.is_empty());
    for &r in &waited {
        assert!(x.kv_start_s[r] >= at + down, "row {r}: transfer started at {}", x.kv_start_s[r]);
    }
}

/// Finished prefills waiting for a decode instance keep their KV on their prefill instance: when that one
/// fails too, they start over (those of the other prefill instance keep waiting).
#[test]
fn waiting_hand_offs_are_lost_with_their_prefill_instance() {
    let base = json!({"prefill": {"instances": 2},
                      "workload": {"requests": 300, "arrivals": {"process": "poisson", "rate_per_s": 6.0}}});
    let decode_down = json!({"instance": "decode-0", "at_s": 10.0, "for_s": 5.0});
    let a = run(&with_faults(&base, json!({"events": [decode_down.clone()]})));
    let t = &a.table;
    // Waiting at 12 s in the run without the prefill failure: prefilled since the decode failure, not sent.
    let waiting = |p: i32| -> Vec<usize> {
        (0..t.len())
            .filter(|&r| t.prefill_instance[r] == p && t.first_token_s[r] > 10.0 && t.first_token_s[r] <= 12.0)
            .filter(|&r| t.output_tokens[r] >= 2 && t.kv_start_s[r] >= 15.0)
            .collect()
    };
    let (on_0, on_1) = (waiting(0), waiting(1));
    assert!(!on_0.is_empty() && !on_1.is_empty(), "{on_0:?} {on_1:?}");
    let prefill_down = json!({"instance": "prefill-0", "at_s": 12.0, "for_s": 1.0});
    let b = run(&with_faults(&base, json!({"events": [decode_down, prefill_down]})));
    for &r in &on_0 {
        assert_eq!(b.table.retries[r], a.table.retries[r] + 1, "row {r}");
        assert!((b.table.lost_s[r] - a.table.lost_s[r] - (12.0 - t.prefill_start_s[r])).abs() < 1e-9, "row {r}");
    }
    for &r in &on_1 {
        assert_eq!(b.table.retries[r], a.table.retries[r], "row {r}");
    }
}

/// A host-staged path chooses the decode instance when a hand-off enters the last hop (that instance's PCIe
/// lane): a hand-off on that hop when its instance fails lands on a failed instance and starts over, with
/// what the instance held; nothing is decoded there while it is down.
#[test]
fn a_hand_off_landing_on_a_failed_instance_starts_over() {
    let base = merged(
        &cluster(),
        &json!({"link": {"preset": "eth-100g", "model": "host_staged", "host_link": "pcie4"},
                "workload": {"prompt_tokens": {"dist": "fixed", "value": 8000}}}),
    );
    let plain = run(&merged(&base, &json!({"engine": {"timeline": true}})));
    let (d, down) = (1, 6.0);
    // A time when a hand-off is on decode-1's PCIe hop (routed to it, not landed), from the timeline.
    let lane = plain.stats.links.iter().position(|l| l.resource == "pcie-decode-1").expect("the lane");
    let spans = &plain.timeline.as_ref().expect("a timeline").transfers[lane];
    let k = (0..spans.len()).find(|&k| spans.start_s[k] > 5.0).expect("a transfer on it");
    let (r0, at) = (spans.request[k] as usize, 0.5 * (spans.start_s[k] + spans.end_s[k]));
    let on_hop: Vec<usize> = (0..spans.len())
        .filter(|&k| spans.start_s[k] <= at && spans.end_s[k] > at)
        .map(|k| spans.request[k] as usize)
        .collect();
    let mut expected = held_by_decode(&plain, d, at);
    expected.extend(on_hop);
    expected.sort_unstable();
    let out = run(&with_faults(&base, json!({"events": [{"instance": "decode-1", "at_s": at, "for_s": down}]})));
    let x = &out.table;
    let retried = retried(x);
    assert_eq!(retried, expected);
    assert!(retried.contains(&r0));
    for r in 0..x.len() {
        let s = x.decode_start_s[r];
        assert!(!(x.decode_instance[r] == d && s > at && s < at + down), "row {r} decoded on decode-1 at {s}");
    }
    assert_eq!(out.stats.completed, plain.stats.completed);
}

/// A prefill failure: the prompts of its step in flight start over (their first token not yet seen); the
/// prompts queued on it lose nothing and are prefilled elsewhere or later; nothing else is retried.
#[test]
fn a_prefill_failure_restarts_its_batch_and_re_routes_its_queue() {
    let base = merged(&cluster(), &json!({"workload": {"arrivals": {"process": "poisson", "rate_per_s": 30.0}}}));
    let plain = run(&base);
    let at = 6.203;
    let p = &plain.table;
    let in_flight: Vec<usize> = (0..p.len())
        .filter(|&r| p.prefill_instance[r] == 1 && p.prefill_start_s[r] <= at && p.first_token_s[r] > at)
        .collect();
    let queued: Vec<usize> = (0..p.len())
        .filter(|&r| p.prefill_instance[r] == 1 && p.arrival_s[r] <= at && p.prefill_start_s[r] > at)
        .collect();
    assert!(!in_flight.is_empty() && !queued.is_empty(), "{} in flight, {} queued", in_flight.len(), queued.len());
    let out = run(&with_faults(&base, json!({"events": [{"instance": "prefill-1", "at_s": at, "for_s": 5.0}]})));
    let x = &out.table;
    let retried = retried(x);
    assert_eq!(retried, in_flight);
    for &r in &queued {
        assert_eq!((x.retries[r], x.lost_s[r]), (0, 0.0));
        assert!(x.prefill_instance[r] == 0 || x.prefill_start_s[r] >= at + 5.0, "row {r}");
    }
    for &r in &in_flight {
        assert!(x.first_token_s[r] > at && x.prefill_start_s[r] >= at, "row {r}: prefilled again");
    }
    assert_eq!(out.stats.completed, plain.stats.completed);
}

/// With `max_retries` 0 the first loss fails a request: exactly the held ones fail, never finish, and are
/// not completions; the rest complete.
#[test]
fn past_max_retries_requests_fail_and_are_counted() {
    let base = cluster();
    let plain = run(&base);
    let at = 12.5;
    let held = held_by_decode(&plain, 1, at);
    let out = run(&with_faults(
        &base,
        json!({"max_retries": 0, "events": [{"instance": "decode-1", "at_s": at, "for_s": 1.0}]}),
    ));
    let x = &out.table;
    let failed: Vec<usize> = (0..x.len()).filter(|&r| x.failed[r]).collect();
    assert_eq!(failed, held);
    assert!(failed.iter().all(|&r| x.finish_s[r].is_nan() && x.retries[r] == 0));
    assert_eq!(out.stats.completed + held.len() as u64, plain.stats.completed);
    assert_eq!(out.stats.faults.unwrap().failed_requests, held.len() as u64);
}

/// Availability is 1 − Σ downtime / (instances × the run's length) for scheduled outages (those reaching
/// past the run's end count up to it).
#[test]
fn availability_is_uptime_over_capacity() {
    let events = json!([
        {"instance": "decode-0", "at_s": 3.0, "for_s": 4.0},
        {"instance": "prefill-0", "at_s": 10.0, "for_s": 2.5},
        {"instance": "decode-2", "at_s": 20.0, "for_s": 1.25},
        {"instance": "decode-2", "at_s": 21.0, "for_s": 1.0},
    ]);
    let out = run(&with_faults(&cluster(), json!({"events": events})));
    let f = out.stats.faults.unwrap();
    let h = out.stats.horizon_s;
    assert!(h > 30.0);
    // decode-2's two outages overlap: down from 20 to 22.
    let down = 4.0 + 2.5 + 2.0;
    assert_eq!(f.instance_failures, 4);
    assert!((f.downtime_s - down).abs() < 1e-12);
    assert!((f.availability - (1.0 - down / (5.0 * h))).abs() < 1e-12, "{}", f.availability);
    // An outage running past the end counts to the end.
    let late =
        run(&with_faults(&cluster(), json!({"events": [{"instance": "decode-0", "at_s": h - 1.0, "for_s": 1e6}]})));
    let f = late.stats.faults.unwrap();
    let h2 = late.stats.horizon_s;
    assert!((f.downtime_s - (h2 - (h - 1.0))).abs() < 1e-9, "{} vs {}", f.downtime_s, h2 - h + 1.0);
}

/// Macro-steps with faults equal step by step (the failed step's calendar slot and its stale heap event are
/// the two ways a cut-short step is dropped), for scheduled and random failures, disaggregated and colocated.
#[test]
fn macro_steps_equal_step_by_step_under_faults() {
    let colocated = json!({"mode": "colocated", "colocated": {"device": "h100", "instances": 2},
                           "workload": {"requests": 300, "arrivals": {"process": "poisson", "rate_per_s": 9.0}}});
    let chunked = merged(&cluster(), &json!({"scheduler": {"policy": "chunked"}}));
    let mtp = merged(&cluster(), &json!({"speculative": {"method": "mtp", "tokens": 3, "acceptance": 0.7}}));
    let mtp_chunked = merged(&mtp, &json!({"scheduler": {"policy": "chunked"}}));
    for base in [cluster(), colocated, chunked, mtp, mtp_chunked] {
        for faults in [
            json!({"instance": {"mtbf_s": 8.0, "mttr_s": 2.0}, "seed": 3}),
            json!({"instance": {"mtbf_s": 5.0, "mttr_s": 0.5, "dist": "fixed"}}),
        ] {
            let v = with_faults(&base, faults);
            let out = run(&v);
            assert!(out.stats.faults.unwrap().instance_failures > 3);
            assert_eq!(step_by_step_diff(&v, &out), None, "{v}");
        }
    }
}

/// `faults.instance.pools` names the pools whose instances fail: the timeline's outages are on those only.
#[test]
fn only_the_named_pools_fail() {
    let base = merged(&cluster(), &json!({"engine": {"timeline": true}}));
    for (pools, front) in [(json!(["prefill"]), true), (json!(["decode"]), false)] {
        let v =
            with_faults(&base, json!({"instance": {"mtbf_s": 8.0, "mttr_s": 1.0, "pools": pools}, "max_retries": 20}));
        let out = run(&v);
        let outages = &out.timeline.as_ref().unwrap().outages;
        assert!(outages.len() > 5);
        // The front pool is instances 0 and 1 (prefill-0, prefill-1), then decode-0..2.
        assert!(outages.iter().all(|&(i, _, _)| (i < 2) == front), "{pools}: {outages:?}");
        let hit: std::collections::HashSet<u32> = outages.iter().map(|o| o.0).collect();
        assert_eq!(hit.len(), if front { 2 } else { 3 }, "every instance of the pool fails over the run");
        assert_eq!(out.stats.faults.unwrap().instance_failures, outages.len() as u64);
        // Each instance's up times (to its first failure, then from each repair to the next failure) are
        // draws of their own: no two equal.
        for i in hit {
            let mine: Vec<(f64, f64)> = outages.iter().filter(|o| o.0 == i).map(|o| (o.1, o.2)).collect();
            let ups: Vec<f64> =
                mine.iter().enumerate().map(|(k, o)| o.0 - if k == 0 { 0.0 } else { mine[k - 1].1 }).collect();
            assert!(all_apart(&ups), "instance {i}: an up time drawn twice: {ups:?}");
        }
    }
}

/// A request lost twice keeps the first token of its first attempt (the one the user saw), not its second's.
#[test]
fn a_request_lost_twice_keeps_its_first_token() {
    let base = json!({"workload": {"requests": 40, "arrivals": {"process": "poisson", "rate_per_s": 4.0},
                                   "output_tokens": {"dist": "fixed", "value": 3000}}});
    let plain = run(&base);
    let events = json!([{"instance": "decode-0", "at_s": 5.0, "for_s": 1.0},
                        {"instance": "decode-0", "at_s": 15.0, "for_s": 1.0}]);
    let out = run(&with_faults(&base, json!({"events": events})));
    let (p, x) = (&plain.table, &out.table);
    let twice: Vec<usize> = (0..x.len()).filter(|&r| x.retries[r] == 2).collect();
    assert!(twice.len() >= 3, "{twice:?}");
    for &r in &twice {
        assert_eq!(x.first_token_s[r], p.first_token_s[r], "row {r}");
        if p.first_token_seen_s[r] <= 5.0 {
            assert_eq!(x.first_token_seen_s[r], p.first_token_seen_s[r], "row {r}");
        }
    }
}

/// Random failures: the same seed gives the same run, another seed another; over a long run each instance
/// fails about horizon / (MTBF + MTTR) times (a renewal process: the count within 5 standard deviations).
#[test]
fn random_failures_are_deterministic_and_at_the_given_rate() {
    let base = merged(&cluster(), &json!({"workload": {"requests": 2000}}));
    let v = with_faults(&base, json!({"instance": {"mtbf_s": 20.0, "mttr_s": 2.0}, "max_retries": 100}));
    let (a, b) = (run(&v), run(&v));
    assert_eq!(table_diff(&a.table, &b.table), None);
    assert_eq!(a.stats.faults, b.stats.faults);
    let other = run(&merged(
        &v,
        &json!({"faults": {"instance": {"mtbf_s": 20.0, "mttr_s": 2.0}, "max_retries": 100, "seed": 99}}),
    ));
    assert_ne!(a.stats.faults, other.stats.faults);
    let f = a.stats.faults.unwrap();
    let h = a.stats.horizon_s;
    // Exponential up (mean 20) and down (mean 2) times: cycle mean 22, variance 400 + 4.
    let cycles = 5.0 * h / 22.0;
    let sd = (5.0 * h * 404.0 / 22f64.powi(3)).sqrt();
    assert!(
        (f.instance_failures as f64 - cycles).abs() < 5.0 * sd + 5.0,
        "{} failures vs {cycles} ± {sd}",
        f.instance_failures
    );
    assert!((f.availability - 20.0 / 22.0).abs() < 0.05, "{}", f.availability);
    assert!(f.retried_requests > 0 && a.stats.completed + f.failed_requests == 2000 - a.stats.rejected);
}

/// Every loss of a request is one retry or its failure; lost work sums over the table; nothing runs twice at
/// once (a request finishes once, after its last prefill).
#[test]
fn the_table_accounts_for_every_loss() {
    let v = with_faults(&cluster(), json!({"instance": {"mtbf_s": 6.0, "mttr_s": 1.5}, "max_retries": 2}));
    let out = run(&v);
    let x = &out.table;
    let f = out.stats.faults.unwrap();
    assert_eq!(x.retries.iter().filter(|&&r| r > 0).count() as u64, f.retried_requests);
    assert_eq!(x.failed.iter().filter(|&&b| b).count() as u64, f.failed_requests);
    assert!(f.failed_requests > 0, "some requests should exhaust two retries");
    let lost: f64 = x.lost_s.iter().sum();
    assert!((lost - f.lost_work_s).abs() <= 1e-9 * lost);
    for r in 0..x.len() {
        assert!(x.retries[r] <= 2);
        assert!(x.failed[r] || x.rejected[r] || x.finish_s[r] >= x.prefill_start_s[r].max(x.first_token_s[r]));
        assert!(x.lost_s[r] >= 0.0 && (x.retries[r] > 0 || x.failed[r] || x.lost_s[r] == 0.0));
    }
}

/// A colocated instance's failure loses its prefill in flight, its decode rows and nothing queued.
#[test]
fn a_colocated_failure_loses_what_it_ran() {
    let base = json!({"mode": "colocated", "colocated": {"device": "h100", "instances": 2},
                      "workload": {"requests": 300, "arrivals": {"process": "poisson", "rate_per_s": 9.0}}});
    let plain = run(&base);
    let at = 11.7;
    let p = &plain.table;
    let held: Vec<usize> = (0..p.len())
        .filter(|&r| p.prefill_instance[r] == 0 && p.prefill_start_s[r] <= at && p.finish_s[r] > at)
        .collect();
    assert!(held.len() > 3);
    let out = run(&with_faults(&base, json!({"events": [{"instance": "colocated-0", "at_s": at, "for_s": 3.0}]})));
    let retried = retried(&out.table);
    assert_eq!(retried, held);
    assert_eq!(out.stats.completed, plain.stats.completed);
}

/// Requests far apart (no queueing on the link): a request whose hand-off failed k times lands after
/// (k + 1) transfer times and k retry delays from its first start, and lost k transfer times; the transfer
/// time is the run without failures' own.
#[test]
fn a_failed_transfer_is_sent_again_after_retry_s() {
    let rows: Vec<(f64, u32, u32)> = (0..60).map(|i| (5.0 * i as f64, 4000 + 10 * i, 50)).collect();
    let base = json!({"workload": common::trace(&rows), "link": "eth-25g"});
    let plain = run(&base);
    let retry_s = 0.25;
    let out = run(&with_faults(&base, json!({"transfer_failure_p": 0.5, "retry_s": retry_s, "max_retries": 50})));
    let (p, x) = (&plain.table, &out.table);
    let mut failed_some = 0;
    for r in 0..x.len() {
        let d = p.kv_ready_s[r] - p.kv_start_s[r];
        let k = x.retries[r] as f64;
        let took = x.kv_ready_s[r] - x.kv_start_s[r];
        assert!((took - ((k + 1.0) * d + k * retry_s)).abs() < 1e-9, "row {r}: {took} vs k {k}, d {d}");
        assert!((x.lost_s[r] - k * d).abs() < 1e-9, "row {r}: lost {}", x.lost_s[r]);
        assert_eq!(x.kv_start_s[r], p.kv_start_s[r]);
        failed_some += (k > 0.0) as u32;
    }
    assert!(failed_some > 10 && failed_some < 50, "{failed_some}");
    let f = out.stats.faults.unwrap();
    assert_eq!(f.transfer_failures, x.retries.iter().map(|&k| k as u64).sum::<u64>());
    // Every attempt is a transfer on the link.
    assert_eq!(out.stats.network().unwrap().transfers, 60 + f.transfer_failures);
}

/// Each transfer fails with the given probability: over ~8,000 attempts the share that failed is within 5
/// standard deviations of p; with p = 1 every handed-off request fails after max_retries + 1 attempts.
#[test]
fn transfers_fail_at_the_given_rate() {
    let base = merged(&cluster(), &json!({"workload": {"requests": 4000}}));
    for p in [0.05, 0.3] {
        let out = run(&with_faults(&base, json!({"transfer_failure_p": p, "max_retries": 100})));
        let f = out.stats.faults.unwrap();
        let n = out.stats.network().unwrap().transfers as f64;
        let share = f.transfer_failures as f64 / n;
        assert!((share - p).abs() < 5.0 * (p * (1.0 - p) / n).sqrt(), "p {p}: {share} of {n}");
        assert_eq!(f.failed_requests, 0);
    }
    let out = run(&with_faults(&cluster(), json!({"transfer_failure_p": 1.0, "max_retries": 2})));
    let x = &out.table;
    let handed: Vec<usize> = (0..x.len()).filter(|&r| x.output_tokens[r] >= 2 && !x.rejected[r]).collect();
    assert!(handed.iter().all(|&r| x.failed[r] && x.retries[r] == 2 && x.finish_s[r].is_nan()));
    assert_eq!(out.stats.faults.unwrap().failed_requests, handed.len() as u64);
    assert_eq!(out.stats.faults.unwrap().transfer_failures, 3 * handed.len() as u64);
}

#[test]
fn macro_steps_equal_step_by_step_with_transfer_failures() {
    let v = with_faults(
        &cluster(),
        json!({"transfer_failure_p": 0.2, "retry_s": 0.05,
                                           "instance": {"mtbf_s": 10.0, "mttr_s": 1.0}}),
    );
    let out = run(&v);
    assert!(out.stats.faults.unwrap().transfer_failures > 10);
    assert_eq!(step_by_step_diff(&v, &out), None);
}

/// The whole link down for a while: the transfer on it is lost and sent again when the link is back (after
/// the transfers already waiting), no transfer runs while it is down, and every request finishes.
#[test]
fn a_link_outage_stops_every_transfer_and_resends_the_one_it_cut() {
    let base = json!({"link": "eth-25g", "engine": {"timeline": true},
                      "workload": {"requests": 300, "arrivals": {"process": "poisson", "rate_per_s": 6.0}}});
    let plain = run(&base);
    let p = &plain.table;
    let at = 10.0;
    let cut: Vec<usize> = (0..p.len()).filter(|&r| p.kv_start_s[r] <= at && p.kv_ready_s[r] > at).collect();
    assert_eq!(cut.len(), 1, "one channel: one transfer on it");
    let down = 3.0;
    let out =
        run(&with_faults(&base, json!({"events": [{"link": "kv-link", "at_s": at, "for_s": down}], "retry_s": 0.5})));
    let x = &out.table;
    let r = cut[0];
    assert_eq!(x.retries[r], 1);
    assert!((x.lost_s[r] - (at - p.kv_start_s[r])).abs() < 1e-9);
    assert_eq!((0..x.len()).filter(|&q| x.retries[q] > 0).count(), 1);
    let spans = &out.timeline.as_ref().unwrap().transfers[0];
    assert!((0..spans.len()).all(|k| !(spans.start_s[k] > at && spans.start_s[k] < at + down)), "a transfer ran");
    assert!((0..spans.len()).any(|k| spans.start_s[k] == at + down), "the link restarts when repaired");
    assert_eq!(out.stats.completed, plain.stats.completed);
    let f = out.stats.faults.unwrap();
    assert_eq!((f.link_failures, f.instance_failures, f.availability), (1, 0, 1.0));
}

/// One channel of two down: transfers go on over the other; the one it carried is sent again there.
#[test]
fn a_channel_outage_moves_transfers_to_the_live_channel() {
    let base = json!({"link": {"preset": "eth-25g", "channels": 2}, "engine": {"timeline": true},
                      "workload": {"requests": 300, "arrivals": {"process": "poisson", "rate_per_s": 12.0}}});
    let (at, down) = (10.0, 5.0);
    let out =
        run(&with_faults(&base, json!({"events": [{"link": "kv-link", "channel": 0, "at_s": at, "for_s": down}]})));
    let spans = &out.timeline.as_ref().unwrap().transfers[0];
    let during = (0..spans.len()).filter(|&k| spans.start_s[k] > at && spans.start_s[k] < at + down).count();
    assert!(during > 10, "transfers continue on channel 1: {during}");
    assert!(out.table.retries.iter().filter(|&&k| k > 0).count() <= 1);
    assert_eq!(out.stats.faults.unwrap().link_failures, 1);
}

/// Random link failures, per channel and whole: deterministic, macro-steps equal step by step, and a link
/// that never fails changes nothing.
#[test]
fn random_link_failures() {
    let base = merged(&cluster(), &json!({"link": {"preset": "eth-25g", "channels": 2}}));
    for scope in ["channel", "link"] {
        let v = with_faults(&base, json!({"link": {"mtbf_s": 2.0, "mttr_s": 0.5, "scope": scope}, "retry_s": 0.1}));
        let out = run(&v);
        let f = out.stats.faults.unwrap();
        assert!(f.link_failures > 5, "{scope}: {}", f.link_failures);
        assert!(out.table.retries.iter().any(|&k| k > 0));
        assert_eq!(step_by_step_diff(&v, &out), None, "{scope}");
        assert_eq!(table_diff(&run(&v).table, &out.table), None);
        // The timeline's link outages: per channel, each channel's own (never the other's times); for the
        // whole link, both channels together. One outage per failure (a run's last may still be open).
        let t = run(&merged(&v, &json!({"engine": {"timeline": true}}))).timeline.unwrap();
        let of =
            |c: u32| -> Vec<(f64, f64)> { t.link_outages.iter().filter(|o| o.0 == c).map(|o| (o.1, o.2)).collect() };
        let (a, b) = (of(0), of(1));
        assert!(!a.is_empty() && !b.is_empty());
        // Each up time (to the first failure, then from each repair to the next) is a draw of its own.
        let ups: Vec<f64> = a.iter().enumerate().map(|(k, o)| o.0 - if k == 0 { 0.0 } else { a[k - 1].1 }).collect();
        assert!(all_apart(&ups), "{scope}: an up time drawn twice: {ups:?}");
        if scope == "channel" {
            assert!(a.iter().all(|x| !b.contains(x)), "channels fail on their own: {a:?} {b:?}");
            assert_eq!(t.link_outages.len() as u64, f.link_failures);
        } else {
            assert_eq!(a, b);
            assert_eq!(a.len() as u64, f.link_failures);
        }
    }
    let plain = run(&base);
    let never = without_fault_columns(run(&with_faults(&base, json!({"link": {"mtbf_s": 3.0e16, "mttr_s": 1.0}}))));
    assert_eq!(table_diff(&never.table, &plain.table), None);
}

#[test]
fn refusals_name_the_field() {
    let cases = [
        (json!({"link": {"mtbf_s": 0.0, "mttr_s": 1.0}}), "faults.link.mtbf_s"),
        (json!({"events": [{"link": "nvlink", "at_s": 1.0, "for_s": 1.0}]}), "faults.events[0].link"),
        (json!({"events": [{"link": "kv-link", "channel": 1, "at_s": 1.0, "for_s": 1.0}]}), "faults.events[0].channel"),
        (
            json!({"events": [{"instance": "decode-0", "channel": 0, "at_s": 1.0, "for_s": 1.0}]}),
            "faults.events[0].channel",
        ),
        (
            json!({"events": [{"instance": "decode-0", "link": "kv-link", "at_s": 1.0, "for_s": 1.0}]}),
            "faults.events[0]",
        ),
        (json!({"events": [{"at_s": 1.0, "for_s": 1.0}]}), "faults.events[0]"),
        (json!({"transfer_failure_p": 1.5}), "faults.transfer_failure_p"),
        (json!({"transfer_failure_p": -0.1}), "faults.transfer_failure_p"),
        (json!({"retry_s": -1.0}), "faults.retry_s"),
        (json!({"events": [{"instance": "decode-3", "at_s": 1.0, "for_s": 1.0}]}), "faults.events[0].instance"),
        (json!({"events": [{"instance": "decode-01", "at_s": 1.0, "for_s": 1.0}]}), "faults.events[0].instance"),
        (json!({"events": [{"instance": "gpu-0", "at_s": 1.0, "for_s": 1.0}]}), "faults.events[0].instance"),
        (json!({"events": [{"instance": "decode-0", "at_s": -1.0, "for_s": 1.0}]}), "faults.events[0].at_s"),
        (json!({"events": [{"instance": "decode-0", "at_s": 1.0, "for_s": 0.0}]}), "faults.events[0].for_s"),
        (json!({"instance": {"mtbf_s": 0.0, "mttr_s": 1.0}}), "faults.instance.mtbf_s"),
        (json!({"instance": {"mtbf_s": 1.0, "mttr_s": -2.0}}), "faults.instance.mttr_s"),
        (json!({"instance": {"mtbf_s": 1.0, "mttr_s": 1.0, "pools": ["colocated"]}}), "faults.instance.pools[0]"),
        (json!({"instance": {"mtbf_s": 1.0, "mttr_s": 1.0, "pools": []}}), "faults.instance.pools"),
    ];
    for (faults, field) in cases {
        let e = refused(&with_faults(&cluster(), faults.clone()));
        assert!(e.to_string().contains(field), "{faults}: {e}");
    }
    let combos = [
        (json!({"kv": {"policy": "paged"}}), "kv.policy"),
        (json!({"prefix_cache": {"enabled": true}}), "prefix_cache.enabled"),
        (json!({"handoff": {"streaming": "layer"}}), "handoff.streaming"),
    ];
    let colocated = json!({"mode": "colocated", "faults": {"transfer_failure_p": 0.1}});
    assert!(refused(&colocated).to_string().contains("faults.transfer_failure_p"));
    let colocated = json!({"mode": "colocated", "faults": {"link": {"mtbf_s": 1.0, "mttr_s": 1.0}}});
    assert!(refused(&colocated).to_string().contains("faults.link"));
    let shared =
        json!({"link": {"preset": "ib-ndr", "model": "shared"}, "faults": {"link": {"mtbf_s": 1.0, "mttr_s": 1.0}}});
    assert!(refused(&shared).to_string().contains("faults.link"));
    for (extra, field) in combos {
        let e = refused(&with_faults(&merged(&cluster(), &extra), json!({"events": []})));
        assert!(e.to_string().contains(field), "{extra}: {e}");
    }
}

/// The echo carries `faults` with its defaults (the seed) filled in, and validates back to the same run.
#[test]
fn the_echo_round_trips() {
    let v = with_faults(
        &cluster(),
        json!({"instance": {"mtbf_s": 30.0, "mttr_s": 3.0, "pools": ["decode"]},
                                            "events": [{"instance": "prefill-0", "at_s": 2.0, "for_s": 1.0}]}),
    );
    let sc = Scenario::from_json(&v.to_string(), None).unwrap();
    let echo = sc.echo_json();
    assert_eq!(echo["faults"]["seed"], json!(7));
    assert_eq!(echo["faults"]["max_retries"], json!(3));
    assert_eq!(echo["faults"]["instance"]["dist"], json!("exponential"));
    let again = Scenario::from_json(&echo.to_string(), None).unwrap();
    assert_eq!(again.faults, sc.faults);
}
