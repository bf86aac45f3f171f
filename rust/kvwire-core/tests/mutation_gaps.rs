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
/// and for a colocated instance (every role has the same `Wake` / `StepDone` events).
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

/// A transfer that lands while the decode instance is mid-step schedules no wake-up. Prefill on B200
/// (≈2 ms per 100-token prompt), decode on A100 (≈10 ms per step), `macro_steps` off, two requests of
/// output 2 arriving together. By hand: arrival A, prefill wake, arrival B (prefill busy), prefill done A,
/// transfer done A, decode wake, prefill done B, transfer done B (decode busy: no wake), decode done A
/// (B admitted at that boundary), decode done B — 10 events.
#[test]
fn a_transfer_landing_at_a_busy_decoder_schedules_no_wake_up() {
    let sc = json!({
        "prefill": {"device": "b200"},
        "decode": {"device": "a100"},
        "engine": {"macro_steps": false},
        "workload": {"trace": {"arrival_s": [0.0, 0.0], "prompt_tokens": [100, 100], "output_tokens": [2, 2]}},
    });
    let out = run(&sc);
    let t = &out.table;
    // The premise: B's KV became ready while A's decode step was running, and B started at its end.
    assert!(t.kv_ready_s[1] > t.decode_start_s[0] && t.kv_ready_s[1] < t.finish_s[0]);
    assert_eq!(t.decode_start_s[1], t.finish_s[0]);
    assert_eq!(out.stats.events, 10);
}

/// In-transit compression totals (spec (b) "Compression", Clarifications): the stage's energy is input
/// bits × 1 pJ, booked in `transit_j` apart from the link's wire bits × pJ/bit; wire bytes are hand-off /
/// ratio; with mxfp4 (fp4-block, 3.76 ops per wire byte > 1.6) every transfer is transit-bound, with fp8
/// none is; without compression there is no stage at all.
#[test]
fn link_totals_with_in_transit_compression() {
    for (compression, ratio, all_bound) in [("mxfp4", 64.0 / 17.0, true), ("fp8", 2.0, false), ("none", 1.0, false)] {
        let sc = json!({
            "link": "eth-25g",
            "handoff": {"compression": compression},
            "workload": {"requests": 40, "seed": 5},
        });
        let out = run(&sc);
        let t = &out.table;
        let handed: Vec<usize> = (0..t.len()).filter(|&i| !t.rejected[i] && t.output_tokens[i] >= 2).collect();
        let handoff: f64 = handed.iter().map(|&i| t.prompt_tokens[i] as f64 * 131_072.0).sum();
        let l = out.stats.network().unwrap();
        assert_eq!(l.transfers, handed.len() as u64, "{compression}");
        assert!(close(l.handoff_bytes, handoff), "{compression}");
        assert!(close(l.wire_bytes, handoff / ratio), "{compression}: {} vs {}", l.wire_bytes, handoff / ratio);
        assert!(close(l.link_j, handoff / ratio * 8.0 * 15e-12), "{compression}");
        let stage_j = if compression == "none" { 0.0 } else { handoff * 8.0 * 1e-12 };
        assert!((l.transit_j - stage_j).abs() <= 1e-12 * stage_j, "{compression}: {}", l.transit_j);
        assert_eq!(l.transit_bound, if all_bound { l.transfers } else { 0 }, "{compression}");
    }
}

/// Macro-steps move every batch-step end from the kernel's heap to its step calendar and nothing else:
/// the heap events plus the calendar's step ends with macro-steps on equal the heap events step by step.
/// Two identical requests arrive together and go to two prefill instances (round robin), two link
/// channels and two decode instances, so both decoders' steps end at the same instants (ties inside the
/// calendar, broken by scheduling order as the heap would). Counted by hand: 2 arrivals, 2 prefill wakes,
/// 2 transfer dones and 2 decode wakes are 8 heap events; the 2 prefill dones and 2 decode dones per decode
/// step are 4 step ends for output 2 (one decode step), 6 for output 3; step by step all of them are heap
/// events (12 and 14).
#[test]
fn macro_steps_move_step_ends_to_the_calendar_also_on_ties() {
    for (output, steps) in [(2, 4), (3, 6)] {
        for macro_steps in [false, true] {
            let sc = json!({
                "prefill": {"instances": 2},
                "decode": {"instances": 2},
                "link": {"preset": "ib-ndr", "channels": 2},
                "router": {"prefill": "round_robin"},
                "engine": {"macro_steps": macro_steps},
                "workload": {"trace": {"arrival_s": [0.0, 0.0], "prompt_tokens": [100, 100],
                    "output_tokens": [output, output]}},
            });
            let out = run(&sc);
            let t = &out.table;
            assert_eq!(t.decode_instance, [0, 1]);
            assert_eq!(t.finish_s[0], t.finish_s[1], "the premise: both decoders end together");
            let want = if macro_steps { (8, steps) } else { (8 + steps, 0) };
            assert_eq!((out.stats.events, out.stats.calendar_steps), want, "output {output}, macro {macro_steps}");
        }
    }
}

/// A lone request: 4 heap events with macro-steps (arrival, prefill wake, transfer done, decode wake) and
/// its 1 prefill + (output − 1) decode step ends from the calendar, for any output length; step by step
/// the 4 + output step ends are all heap events.
#[test]
fn macro_steps_take_a_lone_requests_steps_from_the_calendar() {
    for output in [2u64, 7, 30] {
        for (macro_steps, want) in [(true, (4, output)), (false, (4 + output, 0))] {
            let sc = json!({
                "engine": {"macro_steps": macro_steps},
                "workload": {"trace": {"arrival_s": [0.5], "prompt_tokens": [300], "output_tokens": [output]}},
            });
            let out = run(&sc);
            assert_eq!((out.stats.events, out.stats.calendar_steps), want, "output {output}, macro {macro_steps}");
            assert_eq!(out.stats.instances[1].decode_steps, output - 1);
        }
    }
}

/// Step times of a colocated instance follow the cost model exactly as the reference step-cost table of
/// spec (b) gives them (8B on 1×H100, LM head on every prompt token, overhead included): a lone 2,048-token
/// prefill takes 59.0332 ms; four 2,048-token prompts that queued during it form one 8,192-token batch of
/// 234.6328 ms (the prompt tokens and the per-prompt attention FLOPs of the batch are summed); and a
/// lone request of prompt 2,047 decodes its second token in one b = 1, ctx = 2,048 step of 6.2007 ms.
#[test]
fn colocated_step_times_match_the_reference_step_costs() {
    let ms = |x: f64| (x * 1e7).round() / 1e4;
    let base = json!({"mode": "colocated", "colocated": {"instances": 1}, "cost": {"prefill_lm_head": "all"}});
    let mut sc = base.clone();
    sc["workload"] = json!({"trace": {"arrival_s": [0.0, 0.001, 0.001, 0.001, 0.001],
        "prompt_tokens": [2048, 2048, 2048, 2048, 2048], "output_tokens": [1, 1, 1, 1, 1]}});
    let t = run(&sc).table;
    assert_eq!(ms(t.first_token_s[0]), 59.0332);
    for i in 1..5 {
        assert_eq!(t.prefill_start_s[i], t.first_token_s[0]);
        assert_eq!(ms(t.first_token_s[i] - t.first_token_s[0]), 234.6328, "request {i}");
    }
    let mut sc = base;
    sc["workload"] = json!({"trace": {"arrival_s": [0.0], "prompt_tokens": [2047], "output_tokens": [2]}});
    let t = run(&sc).table;
    assert_eq!(ms(t.finish_s[0] - t.first_token_s[0]), 6.2007);
}

// ------------------------------------------------------------------------------------------------
// Scenario validation: boundaries and field paths

/// Validate `v`; the error's field path, or `None` when the scenario is accepted.
fn refused_at(v: &Value) -> Option<String> {
    Scenario::from_json(&v.to_string(), None).err().map(|e| e.path().to_string())
}

fn accepted(v: &Value) -> bool {
    refused_at(v).is_none()
}

/// Errors inside an inline preset object carry the full path: a wrongly typed field of a model override
/// is reported at `model.layers`, a device override at `prefill.device.peak_tflops`, and a field missing
/// from a complete inline object at the object itself (`model`), never with a stray dot.
#[test]
fn inline_preset_errors_name_the_full_path() {
    let at = |v: Value| refused_at(&v).expect("refused");
    assert_eq!(at(json!({"model": {"preset": "llama3-8b", "layers": "many"}})), "model.layers");
    assert_eq!(
        at(json!({"prefill": {"device": {"preset": "h100", "peak_tflops": "fast"}}})),
        "prefill.device.peak_tflops"
    );
    assert_eq!(at(json!({"model": {"name": "tiny", "layers": 2}})), "model");
}

/// Model shape fields must lie in [1, 2²⁴] (both ends inclusive), and KV heads may equal but not exceed
/// the attention heads (multi-head attention, as OPT-13B's 40/40).
#[test]
fn model_shape_bounds() {
    let m = |fields: Value| {
        let mut o = json!({"preset": "llama3-8b"});
        for (k, v) in fields.as_object().unwrap() {
            o[k] = v.clone();
        }
        json!({ "model": o })
    };
    assert_eq!(refused_at(&m(json!({"layers": 0}))).as_deref(), Some("model.layers"));
    assert!(accepted(&m(json!({"heads": 1 << 24}))));
    assert_eq!(refused_at(&m(json!({"heads": (1 << 24) + 1}))).as_deref(), Some("model.heads"));
    assert!(accepted(&m(json!({"kv_heads": 32}))));
    assert_eq!(refused_at(&m(json!({"kv_heads": 33}))).as_deref(), Some("model.kv_heads"));
    assert!(accepted(&json!({"model": "opt-13b", "prefill": {"devices_per_instance": 1}})));
}

/// Device presets are checked: an idle draw at or above the TDP, a zero peak or an efficiency outside
/// (0, 1] is refused at the device's path.
#[test]
fn device_checks() {
    let d = |k: &str, v: Value| json!({"decode": {"device": {"preset": "h100", k: v}}});
    assert_eq!(refused_at(&d("idle_w", json!(700.0))).as_deref(), Some("decode.device.idle_w"));
    assert!(accepted(&d("idle_w", json!(699.0))));
    assert_eq!(refused_at(&d("peak_tflops", json!(0.0))).as_deref(), Some("decode.device.peak_tflops"));
    assert_eq!(refused_at(&d("flops_eff", json!(1.5))).as_deref(), Some("decode.device.flops_eff"));
    assert!(accepted(&d("flops_eff", json!(1.0))));
}

/// Pool sizes: instances in [1, 4096] and devices per instance in [1, 1024], both ends inclusive.
#[test]
fn pool_size_bounds() {
    let p = |k: &str, v: u64| json!({"prefill": {k: v}});
    for (k, max) in [("instances", 4096), ("devices_per_instance", 1024)] {
        assert_eq!(refused_at(&p(k, 0)).as_deref(), Some(format!("prefill.{k}").as_str()));
        assert!(accepted(&p(k, max)), "{k} = {max}");
        assert_eq!(refused_at(&p(k, max + 1)).as_deref(), Some(format!("prefill.{k}").as_str()));
    }
}

/// A model that does not fit reports its sizes (spec (a)/(b)): Llama-3-70B's resident weights are
/// 141.105 GB, against 0.9 × 80 GB = 72 GB usable on one H100.
#[test]
fn does_not_fit_reports_the_sizes() {
    let e = Scenario::from_json(r#"{"model": "llama3-70b"}"#, None).unwrap_err();
    match e {
        kvwire_core::Error::DoesNotFit(d) => {
            let kvwire_core::error::DoesNotFit { path, devices, weights_gb, usable_gb, hbm_gb, mem_util, .. } = *d;
            assert_eq!(path, "prefill");
            assert_eq!(devices, 1);
            assert_eq!((weights_gb * 1e3).round() / 1e3, 141.105);
            assert!((usable_gb - 72.0).abs() < 1e-9, "{usable_gb}");
            assert_eq!(hbm_gb, 80.0);
            assert_eq!(mem_util, 0.9);
        }
        other => panic!("{other:?}"),
    }
    let e = Scenario::from_json(r#"{"model": "llama3-70b", "decode": {"devices_per_instance": 4}}"#, None);
    match e.unwrap_err() {
        kvwire_core::Error::DoesNotFit(d) => {
            let kvwire_core::error::DoesNotFit { path, hbm_gb, .. } = *d;
            assert_eq!(path, "prefill");
            assert_eq!(hbm_gb, 80.0);
        }
        other => panic!("{other:?}"),
    }
    match Scenario::from_json(r#"{"model": "llama3-70b", "prefill": {"devices_per_instance": 2}}"#, None).unwrap_err() {
        kvwire_core::Error::DoesNotFit(d) => {
            let kvwire_core::error::DoesNotFit { path, hbm_gb, usable_gb, .. } = *d;
            assert_eq!(path, "decode");
            assert_eq!(hbm_gb, 80.0);
            assert!((usable_gb - 72.0).abs() < 1e-9);
        }
        other => panic!("{other:?}"),
    }
    match Scenario::from_json(
        r#"{"model": "llama3-70b", "prefill": {"devices_per_instance": 2}, "decode": {"device": "a100-40g", "devices_per_instance": 3}}"#,
        None,
    )
    .unwrap_err()
    {
        kvwire_core::Error::DoesNotFit(d) => {
            let kvwire_core::error::DoesNotFit { path, devices, hbm_gb, usable_gb, .. } = *d;
            assert_eq!((path.as_str(), devices), ("decode", 3));
            assert_eq!(hbm_gb, 120.0);
            assert!((usable_gb - 108.0).abs() < 1e-9);
        }
        other => panic!("{other:?}"),
    }
}

/// Link channels must be an integer in [1, 4096].
#[test]
fn link_channel_bounds() {
    let l = |c: u64| json!({"link": {"preset": "ib-ndr", "channels": c}});
    assert_eq!(refused_at(&l(0)).as_deref(), Some("link.channels"));
    assert!(accepted(&l(1)) && accepted(&l(4096)));
    assert_eq!(refused_at(&l(4097)).as_deref(), Some("link.channels"));
}

/// At most 100,000,000 generated requests (inclusive); validation does not generate them.
#[test]
fn request_count_bound() {
    let w = |n: u64| json!({"workload": {"requests": n}});
    assert!(accepted(&w(100_000_000)));
    assert_eq!(refused_at(&w(100_000_001)).as_deref(), Some("workload.requests"));
    assert_eq!(refused_at(&w(0)).as_deref(), Some("workload.requests"));
}

/// Length distributions: a prompt's minimum defaults to 1 and may not be below 1 (an output's may be 0);
/// `max` may equal `min` but not be below it.
#[test]
fn length_bounds() {
    let pr = |d: Value| json!({"workload": {"prompt_tokens": d}});
    assert!(accepted(&pr(json!({"dist": "lognormal", "mean": 100.0, "cv": 0.5}))));
    assert!(accepted(&pr(json!({"dist": "uniform", "min": 1, "max": 10}))));
    assert_eq!(
        refused_at(&pr(json!({"dist": "uniform", "min": 0, "max": 10}))).as_deref(),
        Some("workload.prompt_tokens.min")
    );
    assert!(accepted(&json!({"workload": {"output_tokens": {"dist": "uniform", "min": 0, "max": 10}}})));
    assert!(accepted(&pr(json!({"dist": "uniform", "min": 5, "max": 5}))));
    assert_eq!(
        refused_at(&pr(json!({"dist": "uniform", "min": 6, "max": 5}))).as_deref(),
        Some("workload.prompt_tokens.max")
    );
}

/// Positive quantities: strictly positive unless zero is meaningful (a step overhead of 0 is), never
/// negative, and at most 1e9.
#[test]
fn positive_quantity_bounds() {
    let rate = |r: f64| json!({"workload": {"arrivals": {"process": "poisson", "rate_per_s": r}}});
    assert_eq!(refused_at(&rate(-1.0)).as_deref(), Some("workload.arrivals.rate_per_s"));
    assert_eq!(refused_at(&rate(0.0)).as_deref(), Some("workload.arrivals.rate_per_s"));
    assert!(accepted(&rate(1e9)));
    assert_eq!(refused_at(&rate(2e9)).as_deref(), Some("workload.arrivals.rate_per_s"));
    assert_eq!(refused_at(&json!({"slo": {"ttft_s": 0.0}})).as_deref(), Some("slo.ttft_s"));
    assert!(accepted(&json!({"cost": {"step_overhead_s": 0.0}})));
    assert_eq!(refused_at(&json!({"cost": {"step_overhead_s": -0.001}})).as_deref(), Some("cost.step_overhead_s"));
}

/// Interval checks honour their closedness: mem_util ∈ (0, 1], warmup_fraction ∈ [0, 1).
#[test]
fn interval_bounds() {
    let mu = |v: f64| json!({"cost": {"mem_util": v}});
    assert_eq!(refused_at(&mu(0.0)).as_deref(), Some("cost.mem_util"));
    assert!(accepted(&mu(1.0)));
    assert_eq!(refused_at(&mu(1.5)).as_deref(), Some("cost.mem_util"));
    let wf = |v: f64| json!({"metrics": {"warmup_fraction": v}});
    assert!(accepted(&wf(0.0)));
    assert_eq!(refused_at(&wf(1.0)).as_deref(), Some("metrics.warmup_fraction"));
    assert_eq!(refused_at(&wf(-0.1)).as_deref(), Some("metrics.warmup_fraction"));
}

/// A device that runs no KV conversion (`converts_kv` false: the wafer-scale preset) refuses a conversion
/// placed on it, on either side, at `handoff.convert.at`; the other side and a host conversion are accepted,
/// and a GPU overridden to `converts_kv: false` is refused the same way.
#[test]
fn conversion_needs_a_device_that_runs_it() {
    let sc = |prefill: &str, decode: Value, at: &str, staged: bool| {
        let link = if staged { json!({"preset": "ib-ndr", "model": "host_staged"}) } else { json!("ib-ndr") };
        json!({"model": "llama3-8b", "prefill": {"device": prefill}, "decode": {"device": decode}, "link": link,
               "handoff": {"convert": {"from": "vllm_hnd", "to": "neutral", "at": at}}})
    };
    let wafer = json!("wafer-scale");
    assert_eq!(refused_at(&sc("h100", wafer.clone(), "receiver", false)).as_deref(), Some("handoff.convert.at"));
    assert!(accepted(&sc("h100", wafer.clone(), "sender", false)));
    assert!(accepted(&sc("h100", wafer, "host", true)));
    assert_eq!(refused_at(&sc("wafer-scale", json!("h100"), "sender", false)).as_deref(), Some("handoff.convert.at"));
    assert!(accepted(&sc("wafer-scale", json!("h100"), "receiver", false)));
    let no_kernel = json!({"preset": "h100", "converts_kv": false});
    assert_eq!(refused_at(&sc("h100", no_kernel, "receiver", false)).as_deref(), Some("handoff.convert.at"));
    let e = Scenario::from_json(&sc("h100", json!("wafer-scale"), "receiver", false).to_string(), None).unwrap_err();
    assert!(e.to_string().contains("decode pool") && e.to_string().contains("converts_kv = false"), "{e}");
}
