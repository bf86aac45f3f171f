//! The hand-off pipeline at the core level (issue 4): layer-wise streaming against its closed form on an
//! idle link and per-slice against the fast representation under contention, processor-sharing closed
//! forms, byte conservation through every link model, FCFS monotonicity in bandwidth, and conditional
//! disaggregation that keeps nothing local equalling plain disaggregation.
//!
//! Expected values are arithmetic on the presets of `spec/simulator.md` (a) and the formulas of
//! `spec/handoff.md`, not outputs of the code under test.

use kvwire_core::handoff::plan::Streaming;
use kvwire_core::metrics::table::RequestTable;
use kvwire_core::{simulate, Scenario, SimOutput};

/// KV bytes per token of Llama-3-8B: 2 · 32 layers · 8 KV heads · 128 · 2 B.
const KVPT: f64 = 2.0 * 32.0 * 8.0 * 128.0 * 2.0;
const LAYERS: f64 = 32.0;
/// 25 GbE: 3.125 GB/s, 20 µs; 100 GbE: 12.5 GB/s, 20 µs; PCIe 5: 64 GB/s, 5 µs (simulator.md (a)).
const ETH25_B: f64 = 3.125e9;
const ETH25_L: f64 = 20e-6;
const PCIE5_B: f64 = 64e9;
const PCIE5_L: f64 = 5e-6;

fn run(json: &str) -> SimOutput {
    simulate(Scenario::from_json(json, None).unwrap_or_else(|e| panic!("{e}: {json}"))).expect("run")
}

/// A scenario over explicit requests (arrival, prompt, output) with extra top-level fields.
fn traced(rows: &[(f64, u32, u32)], extra: &str) -> String {
    let a: Vec<String> = rows.iter().map(|r| format!("{:?}", r.0)).collect();
    let p: Vec<String> = rows.iter().map(|r| r.1.to_string()).collect();
    let o: Vec<String> = rows.iter().map(|r| r.2.to_string()).collect();
    format!(
        r#"{{"workload": {{"trace": {{"arrival_s": [{}], "prompt_tokens": [{}], "output_tokens": [{}]}}}} {extra}}}"#,
        a.join(","),
        p.join(","),
        o.join(",")
    )
}

/// Hand-off times (kv_ready − first_token) of the transferred requests, in table order.
fn handoffs(t: &RequestTable) -> Vec<f64> {
    (0..t.len()).filter(|&i| !t.kv_ready_s[i].is_nan()).map(|i| t.kv_ready_s[i] - t.first_token_s[i]).collect()
}

fn close(a: f64, b: f64, rel: f64) -> bool {
    (a - b).abs() <= rel * a.abs().max(b.abs())
}

/// Bit-for-bit equal tables (NaN stamps included, which `==` would call unequal).
fn assert_same_table(a: &RequestTable, b: &RequestTable) {
    let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    assert_eq!(a.id, b.id);
    assert_eq!(a.rejected, b.rejected);
    assert_eq!(a.measured, b.measured);
    assert_eq!(a.local_decode, b.local_decode);
    assert_eq!(a.prefill_instance, b.prefill_instance);
    assert_eq!(a.decode_instance, b.decode_instance);
    for (x, y) in [
        (&a.prefill_start_s, &b.prefill_start_s),
        (&a.first_token_s, &b.first_token_s),
        (&a.kv_start_s, &b.kv_start_s),
        (&a.kv_ready_s, &b.kv_ready_s),
        (&a.decode_start_s, &b.decode_start_s),
        (&a.finish_s, &b.finish_s),
    ] {
        assert_eq!(bits(x), bits(y));
    }
}

/// Same value, or both NaN (a stage that did not happen).
fn same_stamp(a: f64, b: f64, tol: f64) -> bool {
    (a.is_nan() && b.is_nan()) || (a - b).abs() <= tol
}

/// One 2,048-token request over an idle 25 GbE link, streamed layer by layer: the simulation lands the KV
/// at the closed form's exposed time after the prefill (28.7 ms, handoff.md), and that closed form is
/// ℓ + max(T_x'/L, T_x' − (L−1)/L·T_p) on the simulated prefill time.
#[test]
fn streaming_on_an_idle_link_matches_the_closed_form() {
    let extra = r#", "cost": {"prefill_lm_head": "all"}, "link": "eth-25g", "handoff": {"streaming": "layer"}"#;
    let json = traced(&[(0.5, 2048, 4)], extra);
    let sc = Scenario::from_json(&json, None).unwrap();
    let closed = sc.handoff_figures(2048, Streaming::Layer).expect("disaggregated");
    let out = simulate(sc).unwrap();
    let t = &out.table;
    let tp = t.first_token_s[0] - t.prefill_start_s[0];
    let wire = 2048.0 * KVPT / ETH25_B;
    let want = ETH25_L + (wire / LAYERS).max(wire - (LAYERS - 1.0) / LAYERS * tp);
    let got = t.kv_ready_s[0] - t.first_token_s[0];
    assert!((got - want).abs() < 1e-12, "{got} vs {want}");
    assert!((got - closed.exposed_s).abs() < 1e-12, "{got} vs {}", closed.exposed_s);
    assert_eq!((got * 1e4).round() / 10.0, 28.7);
    // The first slice leaves when the first layer is done.
    assert!((t.kv_start_s[0] - (t.prefill_start_s[0] + tp / LAYERS)).abs() < 1e-12);
}

/// Under contention (25 GbE well over half busy, several prefill instances and channels) the per-slice
/// mode and the closed-form representation agree on every request: same instances, every stamp within
/// 1e-9 s (they differ only by float rounding), and the per-slice run used one event per slice.
#[test]
fn per_slice_agrees_with_closed_form_under_contention() {
    for (channels, prefills, rate) in [(1, 1, 14.0), (2, 3, 30.0), (1, 2, 20.0)] {
        let base = format!(
            r#"{{"link": {{"preset": "eth-25g", "channels": {channels}}}, "prefill": {{"instances": {prefills}}},
                "decode": {{"instances": 2}}, "handoff": {{"streaming": "layer"}},
                "workload": {{"requests": 600, "seed": 5, "arrivals": {{"rate_per_s": {rate:?}}}}}"#
        );
        let fast = run(&format!("{base}}}"));
        let slow = run(&format!(r#"{base}, "engine": {{"per_slice_streaming": true}}}}"#));
        let (a, b) = (&fast.table, &slow.table);
        let link = fast.stats.network().unwrap();
        assert!(link.busy_s / (channels as f64 * fast.stats.horizon_s) > 0.5, "contended");
        assert_eq!(a.prefill_instance, b.prefill_instance);
        assert_eq!(a.decode_instance, b.decode_instance);
        for i in 0..a.len() {
            for (x, y) in [
                (a.prefill_start_s[i], b.prefill_start_s[i]),
                (a.first_token_s[i], b.first_token_s[i]),
                (a.kv_start_s[i], b.kv_start_s[i]),
                (a.kv_ready_s[i], b.kv_ready_s[i]),
                (a.decode_start_s[i], b.decode_start_s[i]),
                (a.finish_s[i], b.finish_s[i]),
            ] {
                assert!(same_stamp(x, y, 1e-9), "request {i}: {x} vs {y} ({channels} ch, {prefills} prefill)");
            }
        }
        assert!(slow.stats.events >= fast.stats.events + (LAYERS as u64 - 1) * link.transfers);
    }
}

/// Processor sharing: a transfer alone takes ℓ + S/B; two equal transfers starting together both land at
/// ℓ + 2S/B; sizes s < b starting together land at ℓ + 2s/B and ℓ + (s + b)/B. (A blocker prompt with
/// output 1 takes the idle prefill instance alone, so the others share the next batch.)
#[test]
fn processor_sharing_closed_forms() {
    let shared = r#", "link": {"preset": "eth-25g", "model": "shared"}"#;
    let s = |tokens: f64| tokens * KVPT / ETH25_B;
    let alone = handoffs(&run(&traced(&[(0.5, 2048, 4)], shared)).table);
    assert!(close(alone[0], ETH25_L + s(2048.0), 1e-12), "{alone:?}");
    let equal = handoffs(&run(&traced(&[(0.5, 16, 1), (0.5, 2048, 4), (0.5, 2048, 4)], shared)).table);
    assert_eq!(equal.len(), 2);
    for h in &equal {
        assert!(close(*h, ETH25_L + 2.0 * s(2048.0), 1e-12), "{equal:?}");
    }
    let unequal = handoffs(&run(&traced(&[(0.5, 16, 1), (0.5, 1024, 4), (0.5, 3072, 4)], shared)).table);
    assert!(close(unequal[0], ETH25_L + 2.0 * s(1024.0), 1e-12), "{unequal:?}");
    assert!(close(unequal[1], ETH25_L + s(1024.0 + 3072.0), 1e-12), "{unequal:?}");
}

/// Every hop of every link model carries each handed-off request once: per lane, the transfer count and
/// hand-off bytes equal those of the requests the table routes through it, each hop's lanes add up to
/// Σ prompt × kvpt, and wire bytes are that over the hop's compression ratio (fp8: 2; the sender's PCIe is
/// compressed only by a sender pass). A lone host-staged hand-off takes the sum of its hops (store and
/// forward).
#[test]
fn bytes_are_conserved_through_every_link_model() {
    for model in ["fcfs", "shared", "host_staged"] {
        for (handoff_json, rho, sender) in [
            ("{}", 1.0, false),
            (r#"{"compression": "fp8"}"#, 2.0, false),
            (r#"{"compression": "fp8", "compress_at": "sender"}"#, 2.0, true),
        ] {
            let json = format!(
                r#"{{"link": {{"preset": "eth-100g", "model": "{model}"}}, "handoff": {handoff_json},
                    "prefill": {{"instances": 2}}, "decode": {{"instances": 2}},
                    "workload": {{"requests": 300, "seed": 9, "arrivals": {{"rate_per_s": 12.0}},
                                  "output_tokens": {{"dist": "uniform", "min": 0, "max": 200}}}}}}"#
            );
            let out = run(&json);
            let t = &out.table;
            let moved: Vec<usize> = (0..t.len()).filter(|&i| !t.kv_ready_s[i].is_nan()).collect();
            let expect_moved = (0..t.len()).filter(|&i| !t.rejected[i] && t.output_tokens[i] >= 2).count();
            assert_eq!(moved.len(), expect_moved, "{model} {handoff_json}");
            let bytes_of = |pick: &dyn Fn(usize) -> bool| -> (u64, f64) {
                let rows: Vec<usize> = moved.iter().copied().filter(|&i| pick(i)).collect();
                (rows.len() as u64, rows.iter().map(|&i| t.prompt_tokens[i] as f64).sum::<f64>() * KVPT)
            };
            let total = bytes_of(&|_| true).1;
            let mut lanes = vec![("kv-link".to_string(), bytes_of(&|_| true), rho)];
            if model == "host_staged" {
                for k in 0..2 {
                    let pre = bytes_of(&|i| t.prefill_instance[i] == k);
                    let dec = bytes_of(&|i| t.decode_instance[i] == k);
                    lanes.push((format!("pcie-prefill-{k}"), pre, if sender { rho } else { 1.0 }));
                    lanes.push((format!("pcie-decode-{k}"), dec, rho));
                }
            }
            assert_eq!(out.stats.links.len(), lanes.len(), "{model}");
            let mut per_hop = std::collections::BTreeMap::<String, f64>::new();
            for (name, (count, bytes), hop_ratio) in &lanes {
                let l = out.stats.links.iter().find(|l| &l.resource == name).unwrap();
                assert_eq!(l.transfers, *count, "{model} {handoff_json} {name}");
                assert_eq!(l.handoff_bytes, *bytes, "{model} {handoff_json} {name}");
                assert!(close(l.wire_bytes, bytes / hop_ratio, 1e-12), "{model} {handoff_json} {name}");
                *per_hop.entry(name.rsplit_once('-').map_or(name.clone(), |x| x.0.to_string())).or_default() +=
                    l.handoff_bytes;
            }
            assert!(per_hop.values().all(|&b| b == total), "{model} {handoff_json}: {per_hop:?} vs {total}");
        }
    }
    // Store and forward: PCIe out, 25 GbE, PCIe in, each latency + bytes / bandwidth.
    let staged = run(&traced(&[(0.5, 2048, 4)], r#", "link": {"preset": "eth-25g", "model": "host_staged"}"#));
    let bytes = 2048.0 * KVPT;
    let want = 2.0 * (PCIE5_L + bytes / PCIE5_B) + ETH25_L + bytes / ETH25_B;
    assert!(close(handoffs(&staged.table)[0], want, 1e-12));
}

/// FCFS (whole or layer-streamed): raising the link's bandwidth never makes any request's hand-off later,
/// so it never raises the hand-off p99.
#[test]
fn fcfs_more_bandwidth_never_raises_a_handoff() {
    for seed in [1, 2, 3] {
        for streaming in ["whole", "layer"] {
            for channels in [1, 2] {
                let mut previous: Option<Vec<f64>> = None;
                for bw in [1.5, 3.125, 5.0, 12.5, 50.0] {
                    let out = run(&format!(
                        r#"{{"link": {{"preset": "eth-25g", "bandwidth_gb_per_s": {bw:?}, "channels": {channels}}},
                            "prefill": {{"instances": 2}}, "handoff": {{"streaming": "{streaming}"}},
                            "workload": {{"requests": 300, "seed": {seed}, "arrivals": {{"rate_per_s": 16.0}}}}}}"#
                    ));
                    let h = handoffs(&out.table);
                    if let Some(p) = &previous {
                        assert_eq!(p.len(), h.len());
                        for (i, (slow, fast)) in p.iter().zip(&h).enumerate() {
                            assert!(fast <= &(slow + 1e-9), "seed {seed} {streaming} {channels} ch {bw} GB/s #{i}");
                        }
                    }
                    previous = Some(h);
                }
            }
        }
    }
}

/// Conditional disaggregation whose thresholds keep nothing local (no thresholds, or ones every request
/// passes) gives exactly the plain disaggregated table and link totals.
#[test]
fn conditional_that_keeps_nothing_local_equals_always() {
    let base = r#""link": "eth-25g", "prefill": {"instances": 2}, "decode": {"instances": 2},
                  "workload": {"requests": 400, "arrivals": {"rate_per_s": 16.0},
                               "output_tokens": {"dist": "uniform", "min": 0, "max": 400}}"#;
    let plain = run(&format!("{{{base}}}"));
    for rule in ["", r#", "min_prompt_tokens": 1, "min_output_tokens": 2, "max_link_wait_s": 1e6"#] {
        let cond = run(&format!(r#"{{{base}, "router": {{"disaggregate": {{"policy": "conditional"{rule}}}}}}}"#));
        assert_same_table(&cond.table, &plain.table);
        assert_eq!(cond.stats.links, plain.stats.links);
        assert!(cond.table.local_decode.iter().all(|&l| !l));
    }
}
