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

/// The closed-form calculator (`handoff/closed_form.rs`) against spec/handoff.md and one-request simulations.
mod closed_form {
    use kvwire_core::handoff::closed_form::Handoff;
    use kvwire_core::handoff::plan::Streaming;
    use kvwire_core::Scenario;

    /// The calculator on a scenario's plan, model and pools.
    fn handoff(sc: &Scenario, prompt_tokens: u64, streaming: Streaming) -> Handoff {
        sc.handoff_figures(prompt_tokens, streaming).expect("a disaggregated scenario")
    }

    fn sc(link: &str, compression: &str) -> Scenario {
        let json = format!(
            r#"{{"cost": {{"prefill_lm_head": "all"}}, "link": "{link}", "handoff": {{"compression": "{compression}"}}}}"#
        );
        Scenario::from_json(&json, None).unwrap()
    }

    fn r1(x: f64) -> f64 {
        (x * 10.0).round() / 10.0
    }

    /// The figures of spec/handoff.md for Llama-3-8B, 2,048 tokens.
    #[test]
    fn handoff_md_figures() {
        let h = handoff(&sc("eth-25g", "none"), 2048, Streaming::Whole);
        assert_eq!(h.bytes_per_token, 131_072.0);
        assert_eq!(r1(h.handoff_bytes / 1e6), 268.4);
        assert_eq!(r1(h.prefill_s * 1e3), 59.0);
        assert_eq!(r1(h.transfer_s * 1e3), 85.9);
        assert_eq!(r1(h.link_full_rate_per_s), 11.6);
        let s = handoff(&sc("eth-25g", "none"), 2048, Streaming::Layer);
        assert_eq!(r1(s.exposed_s * 1e3), 28.7);
        let f = handoff(&sc("eth-25g", "fp8"), 2048, Streaming::Layer);
        assert_eq!((f.exposed_s * 1e5).round() / 100.0, 1.36);
        assert_eq!(f.wire_bytes, f.handoff_bytes / 2.0);
        for (link, ms) in [("nvlink4", 0.6), ("cpo-optical", 1.3), ("ib-ndr", 5.4), ("eth-100g", 21.5)] {
            assert_eq!(r1(handoff(&sc(link, "none"), 2048, Streaming::Whole).transfer_s * 1e3), ms, "{link}");
        }
    }

    /// mxfp4 in transit is transit-bound (2 ops per value against 1.6 per wire byte, spec/simulator.md (b)):
    /// the data time is ops/(1.6·B) = 2·S/2/(1.6·B), not S/ρ/B, and it also sets the link-full rate.
    #[test]
    fn transit_bound_format_uses_the_ops_budget() {
        let h = handoff(&sc("eth-25g", "mxfp4"), 2048, Streaming::Whole);
        let s = 2048.0 * 131_072.0;
        let data = 2.0 * s / 2.0 / (1.6 * 3.125e9);
        assert!(data > s / (64.0 / 17.0) / 3.125e9);
        assert_eq!(h.wire_bytes, s / (64.0 / 17.0));
        assert!((h.transfer_s - (20e-6 + 1e-6 + data)).abs() < 1e-15);
        assert_eq!(r1(h.transfer_s * 1e3), 53.7);
        assert!((h.link_full_rate_per_s - 1.0 / data).abs() < 1e-12);
    }

    /// A lone 2,048-token request on an idle 25 GbE link: the simulated hand-off (kv_ready − first_token)
    /// equals the calculator's transfer time (whole) and exposed time (layer-wise) for every format and both
    /// compression sites, and the link carried the calculator's wire bytes.
    #[test]
    fn agrees_with_a_one_request_simulation() {
        use kvwire_core::quant::formats::FORMATS;
        for f in FORMATS.iter().filter(|f| f.name != "fp8_ds_mla") {
            for at in ["transit", "sender"] {
                if f.name == "none" && at == "sender" {
                    continue;
                }
                for (streaming, mode) in [("whole", Streaming::Whole), ("layer", Streaming::Layer)] {
                    let json = format!(
                        r#"{{"link": "eth-25g", "handoff": {{"compression": "{}", "compress_at": "{at}",
                            "streaming": "{streaming}"}}, "workload": {{"trace": {{"arrival_s": [0.5],
                            "prompt_tokens": [2048], "output_tokens": [2]}}}}}}"#,
                        f.name
                    );
                    let sc = Scenario::from_json(&json, None).unwrap();
                    let h = handoff(&sc, 2048, mode);
                    let out = kvwire_core::simulate(sc).unwrap();
                    let t = &out.table;
                    let got = t.kv_ready_s[0] - t.first_token_s[0];
                    let want = if mode == Streaming::Whole { h.transfer_s } else { h.exposed_s };
                    let case = format!("{} {at} {streaming}: {got} vs {want}", f.name);
                    assert!((got - want).abs() <= 1e-9 * want, "{case}");
                    assert!((t.first_token_s[0] - t.prefill_start_s[0] - h.prefill_s).abs() < 1e-12, "{case}");
                    let wire = out.stats.network().unwrap().wire_bytes;
                    assert!((wire - h.wire_bytes).abs() <= 1e-12 * wire, "{case}");
                }
            }
        }
    }

    /// The transfer layer in a one-request simulation: for a connector's launch overhead, per-transfer and
    /// pooled registration, multi-NIC links at their measured efficiency, NICs shared by GPUs, a host-staged
    /// path, a processor-sharing link, and layer-wise streaming, the simulated hand-off (kv_ready −
    /// first_token) equals the calculator's transfer time (exposed time when streamed), and the network hop's
    /// time equals the formula ℓ + launch + registration + S/(B·n·e/g) written out from the link's fields.
    #[test]
    fn transfer_layer_agrees_with_a_one_request_simulation() {
        let links = [
            (r#"{"preset": "ib-ndr", "launch_overhead_us": 3000}"#, "whole"),
            (r#"{"preset": "ib-ndr", "registration": "per_transfer"}"#, "whole"),
            (r#"{"preset": "ib-ndr", "registration": "per_transfer", "launch_overhead_us": 500}"#, "layer"),
            (r#""ib-ndr-nixl""#, "whole"),
            (r#""roce-4x200g""#, "whole"),
            (r#""roce-8x400g""#, "whole"),
            (r#"{"preset": "eth-100g", "nics": 2, "gpus_per_nic": 2}"#, "whole"),
            (r#"{"preset": "eth-25g", "model": "host_staged", "registration": "per_transfer"}"#, "whole"),
            (
                r#"{"preset": "ib-ndr", "model": "shared", "registration": "per_transfer", "launch_overhead_us": 100}"#,
                "whole",
            ),
        ];
        for (link, streaming) in links {
            let json = format!(
                r#"{{"link": {link}, "handoff": {{"streaming": "{streaming}"}}, "workload": {{"trace": {{
                    "arrival_s": [0.5], "prompt_tokens": [2048], "output_tokens": [2]}}}}}}"#
            );
            let sc = Scenario::from_json(&json, None).unwrap();
            let mode = if streaming == "layer" { Streaming::Layer } else { Streaming::Whole };
            let h = handoff(&sc, 2048, mode);
            let l = &sc.link.spec.spec;
            let b = l.bandwidth_gb_per_s * 1e9 * l.nics as f64 * l.nic_efficiency.unwrap() / l.gpus_per_nic as f64;
            let reg = match l.registration {
                kvwire_core::cost::presets::Registration::Pool => 0.0,
                kvwire_core::cost::presets::Registration::PerTransfer => {
                    l.registration_ms_per_gb * 1e-3 * h.wire_bytes / 1e9
                }
            };
            assert_eq!(h.launch_s, l.launch_overhead_us * 1e-6, "{link}");
            assert!((h.registration_s - reg).abs() <= 1e-15, "{link}");
            let network = l.latency_us * 1e-6 + h.launch_s + reg + h.wire_bytes / b;
            assert!((h.transfer_s - h.staging_s - network).abs() <= 1e-12 * network, "{link}");
            let out = kvwire_core::simulate(sc).unwrap();
            let got = out.table.kv_ready_s[0] - out.table.first_token_s[0];
            let want = if mode == Streaming::Whole { h.transfer_s } else { h.exposed_s };
            assert!((got - want).abs() <= 1e-9 * want, "{link}: {got} vs {want}");
        }
    }

    /// A pre-registered pool and per-transfer registration differ by exactly the registration cost per
    /// transfer, registration_ms_per_gb × GB handed to the NIC, in the calculator and in the simulation.
    #[test]
    fn pool_and_per_transfer_differ_by_the_registration() {
        let run = |reg: &str| {
            let json = format!(
                r#"{{"link": {{"preset": "eth-100g", "registration": "{reg}", "registration_ms_per_gb": 50}},
                    "workload": {{"trace": {{"arrival_s": [0.5], "prompt_tokens": [4096], "output_tokens": [3]}}}}}}"#
            );
            let sc = Scenario::from_json(&json, None).unwrap();
            let h = handoff(&sc, 4096, Streaming::Whole);
            let out = kvwire_core::simulate(sc).unwrap();
            (h, out.table.kv_ready_s[0] - out.table.first_token_s[0])
        };
        let (pool, sim_pool) = run("pool");
        let (per, sim_per) = run("per_transfer");
        let cost = 50e-3 * pool.wire_bytes / 1e9;
        assert_eq!(pool.registration_s, 0.0);
        assert!((per.registration_s - cost).abs() <= 1e-15);
        assert!((per.transfer_s - pool.transfer_s - cost).abs() <= 1e-12);
        assert!((sim_per - sim_pool - cost).abs() <= 1e-9);
    }

    /// Sender compression: no in-transit stage (no added 1 µs, no ops budget), the compressed bytes on the
    /// wire, and the prefill step lengthened by the element-wise pass.
    #[test]
    fn sender_compression_is_precompressed() {
        let json = r#"{"link": "eth-25g", "handoff": {"compression": "mxfp4", "compress_at": "sender"}}"#;
        let h = handoff(&Scenario::from_json(json, None).unwrap(), 2048, Streaming::Whole);
        let plain = r#"{"link": "eth-25g"}"#;
        let t = handoff(&Scenario::from_json(plain, None).unwrap(), 2048, Streaming::Whole);
        let s = 2048.0 * 131_072.0;
        assert_eq!(h.wire_bytes, s / (64.0 / 17.0));
        assert!((h.transfer_s - (20e-6 + s / (64.0 / 17.0) / 3.125e9)).abs() < 1e-15);
        assert!(h.prefill_s > t.prefill_s);
    }

    /// When the link keeps up, only the last layer's slice is exposed (plus latency).
    #[test]
    fn fast_link_exposes_one_slice() {
        let h = handoff(&sc("nvlink4", "none"), 2048, Streaming::Layer);
        let slice = h.wire_bytes / 450e9 / 32.0;
        assert!((h.exposed_s - (5e-6 + slice)).abs() < 1e-15);
    }
}
