//! The hand-off in closed form (`spec/handoff.md`): size of the cargo, time on the wire, the prefill that
//! produced it, the part left exposed after the prefill (whole or layer-wise streamed), and the request rate
//! at which hand-offs alone fill the link. No queueing: one request on an otherwise idle link.

use serde::Serialize;

use crate::cost::model::ModelCost;
use crate::cost::roofline::StepTimer;
use crate::handoff::transfer::TRANSIT_LATENCY_S;
use crate::scenario::Scenario;

/// How the KV cache leaves the prefill instance.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum StreamingMode {
    /// After the whole prefill (the reference simulator).
    Whole,
    /// Layer by layer: slice l leaves when layer l's prefill ends.
    Layer,
}

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
    /// Link latency + wire time (+ the in-transit stage when compressing), s.
    pub transfer_s: f64,
    /// Prefill step time of the prompt alone on one prefill instance, s.
    pub prefill_s: f64,
    /// Time from the end of prefill until the KV has landed, s.
    pub exposed_s: f64,
    /// Requests per second of this size at which hand-offs alone fill one channel of the link.
    pub link_full_rate_per_s: f64,
    pub streaming: StreamingMode,
}

/// Closed form for a prompt of `prompt_tokens` with the scenario's model, prefill device, link and
/// compression. Streaming: T_exposed = ℓ + max(T_x'/L, T_x' − (L−1)/L·T_p) with T_x' = S/(ρB).
pub fn handoff(sc: &Scenario, prompt_tokens: u64, streaming: StreamingMode) -> Handoff {
    let model = ModelCost::new(&sc.model.spec, sc.lm_head);
    let prefill_pool = sc.prefill_pool();
    let timer = StepTimer::new(
        &prefill_pool.device.spec,
        prefill_pool.devices_per_instance,
        prefill_pool.power_cap_w,
        sc.roofline,
    );
    let prefill_s = timer.time(model.prefill(prompt_tokens, 1, model.prompt_attention_flops(prompt_tokens))).time_s;
    let handoff_bytes = prompt_tokens as f64 * model.kv_bytes_per_token;
    let ratio = sc.compression.map_or(1.0, |f| f.ratio_vs_bf16());
    let wire_bytes = handoff_bytes / ratio;
    let link = &sc.link.spec.spec;
    let bandwidth = link.bandwidth_gb_per_s * 1e9;
    let stage_s = if sc.compression.is_some() { TRANSIT_LATENCY_S } else { 0.0 };
    let latency = link.latency_us * 1e-6 + stage_s;
    let wire_s = wire_bytes / bandwidth;
    let layers = sc.model.spec.layers;
    let l = layers as f64;
    let exposed_s = match streaming {
        StreamingMode::Whole => latency + wire_s,
        StreamingMode::Layer => latency + (wire_s / l).max(wire_s - (l - 1.0) / l * prefill_s),
    };
    Handoff {
        prompt_tokens,
        layers,
        bytes_per_token: model.kv_bytes_per_token,
        handoff_bytes,
        wire_bytes,
        transfer_s: latency + wire_s,
        prefill_s,
        exposed_s,
        link_full_rate_per_s: bandwidth / wire_bytes,
        streaming,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let h = handoff(&sc("eth-25g", "none"), 2048, StreamingMode::Whole);
        assert_eq!(h.bytes_per_token, 131_072.0);
        assert_eq!(r1(h.handoff_bytes / 1e6), 268.4);
        assert_eq!(r1(h.prefill_s * 1e3), 59.0);
        assert_eq!(r1(h.transfer_s * 1e3), 85.9);
        assert_eq!(r1(h.link_full_rate_per_s), 11.6);
        let s = handoff(&sc("eth-25g", "none"), 2048, StreamingMode::Layer);
        assert_eq!(r1(s.exposed_s * 1e3), 28.7);
        let f = handoff(&sc("eth-25g", "fp8"), 2048, StreamingMode::Layer);
        assert_eq!((f.exposed_s * 1e5).round() / 100.0, 1.36);
        assert_eq!(f.wire_bytes, f.handoff_bytes / 2.0);
        for (link, ms) in [("nvlink4", 0.6), ("cpo-optical", 1.3), ("ib-ndr", 5.4), ("eth-100g", 21.5)] {
            assert_eq!(r1(handoff(&sc(link, "none"), 2048, StreamingMode::Whole).transfer_s * 1e3), ms, "{link}");
        }
    }

    /// When the link keeps up, only the last layer's slice is exposed (plus latency).
    #[test]
    fn fast_link_exposes_one_slice() {
        let h = handoff(&sc("nvlink4", "none"), 2048, StreamingMode::Layer);
        let slice = h.wire_bytes / 450e9 / 32.0;
        assert!((h.exposed_s - (5e-6 + slice)).abs() < 1e-15);
    }
}
