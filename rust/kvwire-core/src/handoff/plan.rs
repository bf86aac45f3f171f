//! The hand-off, resolved once at validation into one [`HandoffPlan`]: what is sent (the prompt's KV in the
//! model's dtype, and its size per token), where it is compressed, decompressed and converted (each an
//! element-wise pass charged where it runs, or a stage on the link), how it streams, and the hops it
//! crosses (each with its transfer cost, its lanes — one shared resource, or one per prefill / decode
//! instance — and its channels per lane).
//!
//! Everything that prices a hand-off reads this one plan: the engine builds its queueing state from
//! [`HandoffPlan::hops`] (`engine/path.rs`) and charges [`HandoffPlan::add_sender_work`] /
//! [`HandoffPlan::add_receiver_work`] in the steps; the closed-form calculator (`handoff/closed_form.rs`),
//! the analytic ceilings (`crate::ceilings`) and the resolved-scenario echo read the same fields. The types
//! here are the hand-off's own (the serde schema reuses them), so nothing in `handoff/` knows the scenario.

use serde::{Deserialize, Serialize};

use crate::cost::model::StepWork;
use crate::cost::presets::LinkSpec;
use crate::handoff::transfer::{endpoint_pass, RankCost, TransferCost};
use crate::layout::Layout;
use crate::quant::formats::Format;

/// Where the hand-off is compressed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CompressAt {
    /// An in-transit stage on the link (the reference): no GPU cost, an ops budget per wire byte.
    #[default]
    Transit,
    /// An element-wise pass on the prefill GPU, added to the prefill step (HBM-bound).
    Sender,
}

/// Where a compressed hand-off is decompressed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DecompressAt {
    /// Not modelled (the reference simulator's assumption), or not needed when the decode pool keeps the
    /// compressed format (`decode.kv_format`).
    #[default]
    None,
    /// An element-wise pass on the decode GPU, added to the first decode step after admission.
    Receiver,
}

/// How the KV leaves the prefill instance.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Streaming {
    /// After the whole prefill step (the reference).
    #[default]
    Whole,
    /// Layer by layer: layer l's slice may leave when layer l's prefill ends.
    Layer,
}

/// Where a layout conversion runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ConvertAt {
    /// On the prefill GPU, an HBM-bound pass after the prefill step (read one layout, write the other).
    Sender,
    /// On the decode GPU, a pass added to the first decode step after admission.
    Receiver,
    /// On the sender's host CPU, between the GPU → host and network hops (needs link.model host_staged).
    Host,
}

/// A layout conversion on the hand-off path.
#[derive(Clone, Debug, PartialEq)]
pub struct Conversion {
    /// The two layouts, instantiated with the model's geometry: with the given dtypes (`explicit_dtypes`), else
    /// bf16 values whose sizes scale to the cache's value size.
    pub from: Layout,
    pub to: Layout,
    /// `handoff.convert.from_dtype` / `to_dtype` were given: the layouts' bytes are exact.
    pub explicit_dtypes: bool,
    pub at: ConvertAt,
    pub host_gb_per_s: f64,
    pub host_threads: u32,
    pub host_w_per_thread: f64,
}

impl Conversion {
    /// HBM traffic of converting a request of `tokens` tokens on a GPU, bytes: read the whole `from` blocks,
    /// write the whole `to` blocks (with their separate or inline scales); without explicit dtypes,
    /// `bytes_per_value` scales from bf16 (2 B) to the cache's value size there.
    pub fn gpu_bytes(&self, tokens: u64, bytes_per_value: f64) -> f64 {
        let bytes = self.from.request_bytes_f64(tokens) + self.to.request_bytes_f64(tokens);
        if self.explicit_dtypes {
            bytes
        } else {
            bytes * bytes_per_value / 2.0
        }
    }
}

/// Which requests a hop's lanes serve.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lanes {
    /// One lane for every transfer (the network).
    Shared,
    /// One lane per prefill instance (the sender's PCIe link, its host converter).
    PerFront,
    /// One lane per decode instance (the receiver's PCIe link).
    PerBack,
}

/// One hop of the hand-off path.
#[derive(Clone, Debug, PartialEq)]
pub struct Hop {
    /// Resource name prefix: `kv-link`, `pcie-prefill`, `host-convert`, `pcie-decode`.
    pub resource: &'static str,
    /// Preset key reported in the hop's statistics.
    pub preset: String,
    pub cost: TransferCost,
    pub lanes: Lanes,
    /// Channels per lane.
    pub channels: u32,
    /// Processor sharing of the lane's channels (the network of a `shared` link); FCFS otherwise.
    pub processor_sharing: bool,
    /// Host power per busy channel, W (a layout-conversion hop; 0 for links, whose energy is per bit).
    pub convert_w: f64,
}

impl Hop {
    /// Number of lanes given the pool sizes.
    pub fn lane_count(&self, fronts: u32, backs: u32) -> u32 {
        match self.lanes {
            Lanes::Shared => 1,
            Lanes::PerFront => fronts,
            Lanes::PerBack => backs,
        }
    }

    /// Channel-seconds one transfer of `bytes` holds on this hop: latency + data on an FCFS channel (the
    /// channel is held until the data has landed); the data time alone under processor sharing (latency is
    /// added after the data without holding bandwidth).
    pub fn service_s(&self, bytes: f64) -> f64 {
        let x = self.cost.transfer(bytes);
        if self.processor_sharing {
            x.data_s
        } else {
            x.duration_s
        }
    }
}

/// The network between the pools, as the plan needs it.
#[derive(Clone, Debug)]
pub struct NetworkLink<'a> {
    /// Preset key (`custom` for an inline link).
    pub key: &'a str,
    pub spec: &'a LinkSpec,
    pub channels: u32,
    /// Processor sharing of the channels' bandwidth (`link.model` `"shared"`); FCFS channels otherwise.
    pub processor_sharing: bool,
    /// The host link of a host-staged path (`link.model` `"host_staged"`): its key and spec.
    pub host: Option<(&'a str, &'a LinkSpec)>,
}

/// The resolved hand-off (see the module documentation).
#[derive(Clone, Debug, PartialEq)]
pub struct HandoffPlan {
    /// KV bytes per prompt token handed off, before compression.
    pub bytes_per_token: f64,
    /// Bytes per KV value of the model's cache (2 for BF16).
    pub kv_bytes_per_value: f64,
    /// The format the decode pool keeps its KV cache in (`decode.kv_format`; `None`: the model's dtype).
    pub receiver_format: Option<&'static Format>,
    pub layers: u32,
    /// The hand-off format (`None`: sent in the model's dtype).
    pub compression: Option<&'static Format>,
    pub compress_at: CompressAt,
    pub decompress_at: DecompressAt,
    pub streaming: Streaming,
    pub convert: Option<Conversion>,
    /// The hops in order (empty when colocated, or before [`Self::with_path`]) and the index of the network
    /// hop among them.
    pub hops: Vec<Hop>,
    pub network: usize,
    /// The rank pairs and descriptor cost of the network hop (`None`: one transfer per hand-off and no
    /// descriptor cost, the reference's link).
    pub ranks: Option<RankCost>,
    /// (prefill rank, decode rank) pairs of a hand-off between two parallel layouts (1 without them).
    pub rank_pairs: u32,
}

impl HandoffPlan {
    /// Resolve the path: the hops in order over `network` (`None`: no hand-off, colocated), each with its
    /// transfer cost for this plan's compression and its placement.
    pub fn with_path(mut self, network: Option<NetworkLink>) -> Self {
        (self.hops, self.network) = match &network {
            Some(n) => hops(n, &self),
            None => (Vec::new(), 0),
        };
        self
    }

    /// Bytes per KV value of the cache on the receiver (after any decompression; the decode pool's
    /// `kv_format` when it keeps the compressed cache).
    #[inline]
    pub fn receiver_value_bytes(&self) -> f64 {
        self.kv_bytes_per_value / self.receiver_format.map_or(1.0, |f| f.ratio_vs_bf16())
    }

    /// KV bytes a hand-off of `prompt_tokens` carries before compression.
    #[inline]
    pub fn handoff_bytes(&self, prompt_tokens: u32) -> f64 {
        prompt_tokens as f64 * self.bytes_per_token
    }

    /// Whether the KV streams layer by layer.
    pub fn layer_streaming(&self) -> bool {
        self.streaming == Streaming::Layer
    }

    /// The format compressed on the prefill GPU, if any.
    pub fn sender_compression(&self) -> Option<&'static Format> {
        self.compression.filter(|_| self.compress_at == CompressAt::Sender)
    }

    /// The format decompressed on the decode GPU, if any.
    pub fn receiver_decompression(&self) -> Option<&'static Format> {
        self.compression.filter(|_| self.decompress_at == DecompressAt::Receiver)
    }

    fn conversion_at(&self, at: ConvertAt) -> Option<&Conversion> {
        self.convert.as_ref().filter(|c| c.at == at)
    }

    /// HBM traffic of the layout conversion on the sender (`sender = true`, at the model's cache value size)
    /// or the receiver (at the decode pool's cache value size) for a hand-off of `tokens` prompt tokens;
    /// `None` when no conversion runs there.
    pub fn convert_work(&self, tokens: u64, sender: bool) -> Option<StepWork> {
        let (at, value_bytes) = if sender {
            (ConvertAt::Sender, self.kv_bytes_per_value)
        } else {
            (ConvertAt::Receiver, self.receiver_value_bytes())
        };
        let c = self.conversion_at(at)?;
        Some(StepWork { flops: 0.0, bytes: c.gpu_bytes(tokens, value_bytes) })
    }

    /// Whether the sender (the prefill GPU) runs a pass per hand-off: compression and/or layout conversion.
    pub fn sender_passes(&self) -> bool {
        self.sender_compression().is_some() || self.conversion_at(ConvertAt::Sender).is_some()
    }

    /// Whether the receiver (the decode GPU) runs a pass per hand-off: decompression and/or conversion.
    pub fn receiver_passes(&self) -> bool {
        self.receiver_decompression().is_some() || self.conversion_at(ConvertAt::Receiver).is_some()
    }

    /// Add the sender's pass for one hand-off of `bytes` (= `tokens` prompt tokens) to `w`: the compression
    /// pass ([`endpoint_pass`]), then the layout conversion's HBM traffic (read one layout, write the other).
    #[inline]
    pub fn add_sender_work(&self, w: &mut StepWork, bytes: f64, tokens: u64) {
        self.add_pass(w, self.sender_compression(), bytes, tokens, true);
    }

    /// Add the receiver's pass for one hand-off of `bytes` (= `tokens` prompt tokens) to `w`:
    /// decompression, then the layout conversion (at the receiver's cache value size).
    #[inline]
    pub fn add_receiver_work(&self, w: &mut StepWork, bytes: f64, tokens: u64) {
        self.add_pass(w, self.receiver_decompression(), bytes, tokens, false);
    }

    #[inline]
    fn add_pass(&self, w: &mut StepWork, codec: Option<&Format>, bytes: f64, tokens: u64, sender: bool) {
        if let Some(f) = codec {
            let p = endpoint_pass(f, self.kv_bytes_per_value, bytes);
            w.flops += p.flops;
            w.bytes += p.bytes;
        }
        if let Some(c) = self.convert_work(tokens, sender) {
            w.bytes += c.bytes;
        }
    }

    /// Work of the sender's (`sender = true`) or the receiver's whole pass for one hand-off of `prompt_tokens`
    /// (a mean may be fractional; the conversion counts whole tokens): the compression (or decompression)
    /// there plus the conversion there, charged as one pass, as the engine charges it.
    pub fn endpoint_work(&self, prompt_tokens: f64, sender: bool) -> StepWork {
        let mut w = StepWork { flops: 0.0, bytes: 0.0 };
        let (bytes, tokens) = (prompt_tokens * self.bytes_per_token, prompt_tokens.round() as u64);
        if sender {
            self.add_sender_work(&mut w, bytes, tokens);
        } else {
            self.add_receiver_work(&mut w, bytes, tokens);
        }
        w
    }

    /// The network hop (`kv-link`), if there is a hand-off.
    pub fn network_hop(&self) -> Option<&Hop> {
        self.hops.get(self.network)
    }

    /// Where each step of the hand-off happens, as this plan charges it (what a report names).
    pub fn placement(&self) -> Placement {
        Placement {
            compression: self.compression.map(|f| f.name),
            compressed_at: self.compression.map(|_| self.compress_at),
            decompressed_at: self.compression.map(|f| {
                if self.receiver_decompression().is_some() {
                    Decompression::Receiver
                } else if self.receiver_format.is_some_and(|r| r.name == f.name) {
                    Decompression::KeptByDecode
                } else {
                    Decompression::NotModelled
                }
            }),
            streaming: self.streaming,
            convert: self.convert.as_ref().map(|c| ConvertPlacement {
                from: c.from.def.name,
                to: c.to.def.name,
                at: c.at,
            }),
            hops: self.hops.iter().map(|h| h.resource).collect(),
        }
    }
}

/// What happens to a compressed hand-off on the receiver.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Decompression {
    /// An element-wise pass on the decode GPU (`handoff.decompress_at = "receiver"`).
    Receiver,
    /// None needed: the decode pool keeps its cache in the hand-off format (`decode.kv_format`).
    KeptByDecode,
    /// Not modelled (`handoff.decompress_at = "none"`, the reference simulator's assumption).
    NotModelled,
}

/// A layout conversion's placement.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct ConvertPlacement {
    pub from: &'static str,
    pub to: &'static str,
    pub at: ConvertAt,
}

/// Where each step of a hand-off happens ([`HandoffPlan::placement`]); `None` where a step does not happen.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Placement {
    /// The hand-off format (`None`: sent in the model's dtype).
    pub compression: Option<&'static str>,
    /// `transit` (a stage on the network hop) or `sender` (a pass on the prefill GPU).
    pub compressed_at: Option<CompressAt>,
    pub decompressed_at: Option<Decompression>,
    pub streaming: Streaming,
    pub convert: Option<ConvertPlacement>,
    /// The hops the hand-off crosses, in order (empty when colocated).
    pub hops: Vec<&'static str>,
}

/// The hops of the path in order, and the index of the network hop.
fn hops(n: &NetworkLink, p: &HandoffPlan) -> (Vec<Hop>, usize) {
    let network = Hop {
        resource: "kv-link",
        preset: n.key.to_string(),
        cost: match (p.compression, p.compress_at) {
            (None, _) => TransferCost::plain(n.spec),
            (Some(f), CompressAt::Transit) => TransferCost::in_transit(n.spec, f, p.kv_bytes_per_value),
            (Some(f), CompressAt::Sender) => TransferCost::precompressed(n.spec, f),
        },
        lanes: Lanes::Shared,
        channels: n.channels,
        processor_sharing: n.processor_sharing,
        convert_w: 0.0,
    };
    let network = Hop { cost: network.cost.clone().with_ranks(p.ranks), ..network };
    let Some((host_key, host)) = n.host else { return (vec![network], 0) };
    // A hop before the network carries the hand-off as it left the GPU: compressed only if the sender did.
    let leaving_gpu = |hop: &LinkSpec| match (p.compression, p.compress_at) {
        (Some(f), CompressAt::Sender) => TransferCost::precompressed(hop, f),
        _ => TransferCost::plain(hop),
    };
    let pcie = |resource, cost, lanes| Hop {
        resource,
        preset: host_key.to_string(),
        cost,
        lanes,
        channels: 1,
        processor_sharing: false,
        convert_w: 0.0,
    };
    let mut out = vec![pcie("pcie-prefill", leaving_gpu(host), Lanes::PerFront)];
    if let Some(c) = p.convert.as_ref().filter(|c| c.at == ConvertAt::Host) {
        // The sender's host converts the staged cache: `host_threads` FCFS channels per prefill instance, at
        // host_gb_per_s each, drawing host_w_per_thread while busy.
        let spec = LinkSpec {
            name: "host conversion".into(),
            bandwidth_gb_per_s: c.host_gb_per_s,
            latency_us: 0.0,
            pj_per_bit: 0.0,
            source: String::new(),
            ..LinkSpec::default()
        };
        out.push(Hop {
            resource: "host-convert",
            preset: "host-convert".into(),
            cost: leaving_gpu(&spec),
            lanes: Lanes::PerFront,
            channels: c.host_threads,
            processor_sharing: false,
            convert_w: c.host_w_per_thread,
        });
    }
    let network_index = out.len();
    out.push(network);
    let pcie_in = match p.compression {
        Some(f) => TransferCost::precompressed(host, f),
        None => TransferCost::plain(host),
    };
    out.push(pcie("pcie-decode", pcie_in, Lanes::PerBack));
    (out, network_index)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quant::formats::format;

    fn link() -> LinkSpec {
        LinkSpec {
            name: "test".into(),
            bandwidth_gb_per_s: 3.125,
            latency_us: 20.0,
            pj_per_bit: 0.0,
            source: String::new(),
            ..LinkSpec::default()
        }
    }

    /// A plan for Llama-3-8B's hand-off (128 KiB per token, bf16) over a 3.125 GB/s, 20 µs link.
    fn plan(compression: Option<&str>, at: CompressAt, decompress: DecompressAt, keeps: bool) -> HandoffPlan {
        let spec = link();
        let compression = compression.map(|n| format(n).unwrap());
        let network = NetworkLink { key: "test", spec: &spec, channels: 1, processor_sharing: false, host: None };
        HandoffPlan {
            bytes_per_token: 131_072.0,
            kv_bytes_per_value: 2.0,
            receiver_format: compression.filter(|_| keeps),
            layers: 32,
            compression,
            compress_at: at,
            decompress_at: decompress,
            streaming: Streaming::Whole,
            convert: None,
            hops: Vec::new(),
            network: 0,
            ranks: None,
            rank_pairs: 1,
        }
        .with_path(Some(network))
    }

    /// Every placement combination: the placement names where the work is, and the plan charges exactly
    /// there. The sender's pass is the format's ops per value and S + S/ρ of HBM traffic (spec/simulator.md
    /// (b)); the network hop runs the in-transit stage (20 µs + 1 µs + S/ρ/B) only when compressing in
    /// transit, else carries the precompressed S/ρ bytes in 20 µs + S/ρ/B.
    #[test]
    fn placement_matches_the_charged_work() {
        let s = 2048.0 * 131_072.0;
        let (ops, rho) = (format("fp8").unwrap().encode_ops_per_value, 2.0);
        for at in [CompressAt::Transit, CompressAt::Sender] {
            for decompress in [DecompressAt::None, DecompressAt::Receiver] {
                for keeps in [false, true] {
                    let p = plan(Some("fp8"), at, decompress, keeps);
                    let case = format!("{at:?} {decompress:?} keeps={keeps}");
                    let pl = p.placement();
                    assert_eq!(pl.compression, Some("fp8_e4m3"), "{case}");
                    assert_eq!(pl.compressed_at, Some(at), "{case}");
                    let want = match (decompress, keeps) {
                        (DecompressAt::Receiver, _) => Decompression::Receiver,
                        (DecompressAt::None, true) => Decompression::KeptByDecode,
                        (DecompressAt::None, false) => Decompression::NotModelled,
                    };
                    assert_eq!(pl.decompressed_at, Some(want), "{case}");
                    assert_eq!(pl.hops, vec!["kv-link"], "{case}");
                    let pass = StepWork { flops: s / 2.0 * ops, bytes: s + s / rho };
                    let zero = StepWork { flops: 0.0, bytes: 0.0 };
                    let sender = p.endpoint_work(2048.0, true);
                    let receiver = p.endpoint_work(2048.0, false);
                    let on_sender = at == CompressAt::Sender;
                    let on_receiver = decompress == DecompressAt::Receiver;
                    assert_eq!(
                        (sender.flops, sender.bytes),
                        if on_sender { (pass.flops, pass.bytes) } else { (zero.flops, zero.bytes) },
                        "{case}"
                    );
                    assert_eq!(
                        (receiver.flops, receiver.bytes),
                        if on_receiver { (pass.flops, pass.bytes) } else { (zero.flops, zero.bytes) },
                        "{case}"
                    );
                    let x = p.network_hop().unwrap().cost.transfer(s);
                    let stage = if on_sender { 0.0 } else { 1e-6 };
                    assert_eq!(x.wire_bytes, s / rho, "{case}");
                    assert!((x.duration_s - (20e-6 + stage + s / rho / 3.125e9)).abs() < 1e-15, "{case}");
                }
            }
        }
    }

    /// No compression: nothing to place, no passes, the bytes as they are; no network: no hops (colocated).
    #[test]
    fn uncompressed_and_colocated() {
        let p = plan(None, CompressAt::Transit, DecompressAt::None, false);
        let pl = p.placement();
        assert_eq!((pl.compression, pl.compressed_at, pl.decompressed_at), (None, None, None));
        assert!(!p.sender_passes() && !p.receiver_passes());
        assert_eq!(p.network_hop().unwrap().cost.transfer(1e6).wire_bytes, 1e6);
        let colocated = p.with_path(None);
        assert!(colocated.hops.is_empty() && colocated.network_hop().is_none());
    }
}
