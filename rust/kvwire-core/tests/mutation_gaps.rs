//! Tests written to close gaps that mutation testing (`cargo mutants`) found in the core's test suite.
//!
//! Every expectation here is independent of the code under test: preset values and formulas from
//! `spec/simulator.md`, event sequences counted by hand for tiny explicit traces, or differential
//! comparisons between two runs that must (or must not) agree.

use kvwire_core::{simulate, Scenario, SimOutput};
use serde_json::{json, Value};

fn run(v: &Value) -> SimOutput {
    let sc = Scenario::from_json(&v.to_string(), None).expect("valid scenario");
    simulate(sc).expect("run")
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-12 * b.abs().max(1e-300)
}

/// Per-instance constants come from the pool's preset times its devices per instance (spec (a) device
/// table): names `prefill-i` / `decode-i` / `colocated-i`, the device key, idle W·n and the un-derated
/// peaks·n that MFU and MBU divide by; static energy is Σ idle W·n × horizon.
#[test]
fn instance_stats_scale_the_device_preset_by_devices_per_instance() {
    let sc = json!({
        "prefill": {"device": "a100", "instances": 2, "devices_per_instance": 2},
        "decode": {"device": "h100", "instances": 1, "devices_per_instance": 4},
        "workload": {"requests": 20, "seed": 3},
    });
    let out = run(&sc);
    let inst = &out.stats.instances;
    let names: Vec<&str> = inst.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["prefill-0", "prefill-1", "decode-0"]);
    // (device, n, idle W, peak TFLOP/s, HBM TB/s) from the spec's device table.
    for (s, (dev, n, idle, tflops, tbs)) in inst.iter().zip([
        ("a100", 2.0, 60.0, 312.0, 2.039),
        ("a100", 2.0, 60.0, 312.0, 2.039),
        ("h100", 4.0, 100.0, 989.0, 3.35),
    ]) {
        assert_eq!(s.device, dev, "{}", s.name);
        assert_eq!(s.devices as f64, n, "{}", s.name);
        assert!(close(s.idle_w, idle * n), "{}: idle {}", s.name, s.idle_w);
        assert!(close(s.peak_flops_per_s, tflops * 1e12 * n), "{}", s.name);
        assert!(close(s.peak_bytes_per_s, tbs * 1e12 * n), "{}", s.name);
    }
    let static_w = 2.0 * 60.0 * 2.0 + 100.0 * 4.0;
    assert!(close(out.stats.static_j, static_w * out.stats.horizon_s));

    let colo = run(&json!({
        "mode": "colocated",
        "colocated": {"device": "h200", "instances": 2, "devices_per_instance": 1},
        "workload": {"requests": 10, "seed": 3},
    }));
    let names: Vec<&str> = colo.stats.instances.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["colocated-0", "colocated-1"]);
    assert!(colo.stats.instances.iter().all(|s| s.device == "h200"));
}

/// Two requests with output 1 (they finish at the end of prefill: no hand-off, no decode), the second
/// arriving while the first's prefill step runs, `macro_steps` off. Counted by hand, the kernel processes
/// exactly 5 events: arrival A, wake, arrival B (the instance is busy: no wake-up is scheduled), prefill
/// done A (which starts B's batch at once), prefill done B. Holds for the disaggregated prefill instance
/// and for a colocated instance (there the step ends are `ColocatedDone` events).
#[test]
fn an_arrival_at_a_busy_instance_schedules_no_wake_up() {
    let trace = json!({"arrival_s": [0.0, 1e-6], "prompt_tokens": [100, 100], "output_tokens": [1, 1]});
    for mode in [json!({}), json!({"mode": "colocated", "colocated": {"instances": 1}})] {
        let mut sc = json!({"engine": {"macro_steps": false}, "workload": {"trace": trace}});
        for (k, v) in mode.as_object().unwrap() {
            sc[k] = v.clone();
        }
        let out = run(&sc);
        assert_eq!(out.stats.completed, 2);
        assert_eq!(out.stats.events, 5, "{sc}");
        // B waited for A's step: its prefill started exactly when A's first token was stamped.
        assert_eq!(out.table.prefill_start_s[1], out.table.first_token_s[0]);
    }
}
