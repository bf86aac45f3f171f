//! The hand-off in closed form (`spec/handoff.md`): size of the cargo, time on the wire, the prefill that
//! produced it, the part left exposed after the prefill (whole or layer-wise streamed), the request rate at
//! which hand-offs alone fill the link, the transfer layer's share (launch overhead, registration, host
//! staging) and a layout conversion at its placement. No queueing: one request on an otherwise idle path,
//! priced with the same hops (`plan::hops`), transfer costs and endpoint passes as the simulation.

use serde::Serialize;

use crate::cost::model::ModelCost;
use crate::cost::roofline::StepTimer;
use crate::handoff::plan::{ConvertAt, HandoffPlan, Streaming};

/// Everything `kvwire.handoff(...)` reports.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Handoff {
    pub prompt_tokens: u64,
    pub layers: u32,
    /// KV bytes per token (all layers).
    pub bytes_per_token: f64,
    /// Bytes handed off (uncompressed).
    pub handoff_bytes: f64,
    /// Bytes on the wire after compression.
    pub wire_bytes: f64,
    /// Link latency + launch overhead + registration + data time, s, over every hop of the path in turn
    /// (host-staged: PCIe out, a host conversion, the network, PCIe in). Compressing in transit adds the
    /// stage's 1 µs, and the data time is max(S/ρ/B, ops/(1.6·B)): the stage's ops budget, not the wire, sets
    /// it for transit-bound formats.
    pub transfer_s: f64,
    /// The network hop's connector launch overhead (`link.launch_overhead_us`; in `transfer_s`), s.
    pub launch_s: f64,
    /// The network hop's per-transfer memory registration (`link.registration` `"per_transfer"`:
    /// registration_ms_per_gb × the bytes handed to the NIC; 0 with a pool; in `transfer_s`), s.
    pub registration_s: f64,
    /// The hops other than the network (host-staged PCIe hops and a host conversion; in `transfer_s`), s.
    pub staging_s: f64,
    /// The layout conversion alone (`handoff.convert`) at its placement, s: an HBM pass on the prefill
    /// instance (in `prefill_s`) or the decode instance (added to its first decode step), or the host
    /// conversion hop (in `staging_s`). 0 without a conversion.
    pub convert_s: f64,
    /// Where the conversion runs (`None`: no conversion).
    pub convert_at: Option<ConvertAt>,
    /// Prefill step time of the prompt alone on one prefill instance (with the sender's compression and/or
    /// conversion pass), s.
    pub prefill_s: f64,
    /// Time from the end of prefill until the KV has landed, s.
    pub exposed_s: f64,
    /// Requests per second of this size at which hand-offs alone fill one channel of the link: 1 / data
    /// time (B·ρ/S unless the in-transit stage's ops budget binds).
    pub link_full_rate_per_s: f64,
    pub streaming: Streaming,
}

/// Closed form for a prompt of `prompt_tokens` of `model`, prefilled on an instance timed by `sender` and
/// decoded on one timed by `receiver`, handed off as `plan` says: its hops (whose costs are the simulation's
/// own [`TransferCost`](crate::handoff::transfer::TransferCost)s), its endpoint passes
/// ([`HandoffPlan::endpoint_work`]) and its conversion placement. `None` when the plan has no hops
/// (colocated). Whole: the hops one after the other (store and forward). Streaming (one FCFS hop):
/// T_exposed = ℓ' + max(T_x'/L, T_x' − (L−1)/L·T_p) with T_x' the data time (S/(ρB), or the in-transit stage's
/// ops time when that is longer) and ℓ' the latency (+ the stage's 1 µs, the launch overhead and the
/// registration).
pub fn handoff(
    plan: &HandoffPlan,
    model: &ModelCost,
    sender: &StepTimer,
    receiver: &StepTimer,
    prompt_tokens: u64,
    streaming: Streaming,
) -> Option<Handoff> {
    let network = plan.network_hop()?;
    let handoff_bytes = prompt_tokens as f64 * plan.bytes_per_token;
    let tokens = prompt_tokens as f64;
    let mut prefill_s =
        sender.time(model.prefill(prompt_tokens, 1, model.prompt_attention_flops(prompt_tokens))).time_s;
    let pass = plan.endpoint_work(tokens, true);
    if pass.bytes > 0.0 {
        // Compression and/or conversion on the sender: one pass after the prefill, as the engine charges it.
        prefill_s += sender.pass(pass).time_s;
    }
    let xs: Vec<_> = plan.hops.iter().map(|h| h.cost.transfer(handoff_bytes)).collect();
    let x = network.cost.transfer(handoff_bytes);
    let transfer_s: f64 = xs.iter().map(|t| t.duration_s).sum();
    // A fold from +0.0: an empty f64 sum is -0.0, which would print as "-0.0" for a GPUDirect path.
    let staging_s = xs.iter().enumerate().filter(|(i, _)| *i != plan.network).fold(0.0, |a, (_, t)| a + t.duration_s);
    let layers = plan.layers;
    let l = layers as f64;
    let exposed_s = match streaming {
        Streaming::Whole => transfer_s,
        Streaming::Layer => x.latency_s + (x.data_s / l).max(x.data_s - (l - 1.0) / l * prefill_s),
    };
    let convert_at = plan.convert.as_ref().map(|c| c.at);
    let convert_s = match convert_at {
        None => 0.0,
        Some(ConvertAt::Sender) => plan.convert_work(prompt_tokens, true).map_or(0.0, |w| sender.pass(w).time_s),
        Some(ConvertAt::Receiver) => plan.convert_work(prompt_tokens, false).map_or(0.0, |w| receiver.pass(w).time_s),
        Some(ConvertAt::Host) => {
            plan.hops.iter().zip(&xs).filter(|(h, _)| h.resource == "host-convert").map(|(_, t)| t.duration_s).sum()
        }
    };
    Some(Handoff {
        prompt_tokens,
        layers,
        bytes_per_token: plan.bytes_per_token,
        handoff_bytes,
        wire_bytes: x.wire_bytes,
        transfer_s,
        launch_s: x.launch_s,
        registration_s: x.registration_s,
        staging_s,
        convert_s,
        convert_at,
        prefill_s,
        exposed_s,
        link_full_rate_per_s: 1.0 / x.data_s,
        streaming,
    })
}

#[cfg(test)]
mod tests {
    use super::{Handoff, Streaming};
    use crate::scenario::Scenario;

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
        use crate::quant::formats::FORMATS;
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
                    let out = crate::simulate(sc).unwrap();
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
                crate::cost::presets::Registration::Pool => 0.0,
                crate::cost::presets::Registration::PerTransfer => l.registration_ms_per_gb * 1e-3 * h.wire_bytes / 1e9,
            };
            assert_eq!(h.launch_s, l.launch_overhead_us * 1e-6, "{link}");
            assert!((h.registration_s - reg).abs() <= 1e-15, "{link}");
            let network = l.latency_us * 1e-6 + h.launch_s + reg + h.wire_bytes / b;
            assert!((h.transfer_s - h.staging_s - network).abs() <= 1e-12 * network, "{link}");
            let out = crate::simulate(sc).unwrap();
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
            let out = crate::simulate(sc).unwrap();
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
