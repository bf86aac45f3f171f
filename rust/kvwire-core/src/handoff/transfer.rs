//! Time and energy of one KV transfer over the link, with optional in-transit compression
//! (`spec/simulator.md` (a) "KVTransit" and (b) "Compression"), and the transfer layer's costs: the
//! connector's launch overhead, per-transfer memory registration, and the NICs' effective bandwidth
//! (`LinkSpec::effective_bytes_per_s`). The engine's hops and the closed-form calculator both price transfers
//! here, so they cannot disagree.

use crate::cost::model::StepWork;
use crate::cost::presets::{LinkSpec, Registration};
use crate::quant::formats::Format;

/// Operations of budget the in-transit stage has per wire byte.
pub const TRANSIT_OPS_PER_WIRE_BYTE: f64 = 1.6;
/// Energy of the in-transit stage per input bit, J.
pub const TRANSIT_J_PER_INPUT_BIT: f64 = 1e-12;
/// Latency the in-transit stage adds, s.
pub const TRANSIT_LATENCY_S: f64 = 1e-6;

/// One transfer's cost.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Transfer {
    /// Time the channel is held, s: latency + data time.
    pub duration_s: f64,
    /// Time the data occupies the wire (or the in-transit stage), s.
    pub data_s: f64,
    /// Latency (plus the in-transit stage's delay, the launch overhead and the registration), s: the
    /// delays that hold an FCFS channel like the link's latency but use no bandwidth.
    pub latency_s: f64,
    /// The connector's launch overhead (part of `latency_s`), s.
    pub launch_s: f64,
    /// Per-transfer memory registration (part of `latency_s`; 0 with a pre-registered pool), s.
    pub registration_s: f64,
    /// The busiest rank's extra launches and its descriptors (part of `latency_s`; 0 for one pair without a
    /// descriptor cost), s.
    pub descriptors_s: f64,
    pub wire_bytes: f64,
    pub link_j: f64,
    pub transit_j: f64,
    /// The stage's ops budget, not the wire, set the time.
    pub transit_bound: bool,
}

/// Transfer-cost calculator for one link (or hop) and compression setting.
#[derive(Clone, Debug, PartialEq)]
pub struct TransferCost {
    latency_s: f64,
    bytes_per_s: f64,
    j_per_bit: f64,
    launch_s: f64,
    /// Registration time per byte handed to the NIC (0 with a pre-registered pool), s/B.
    registration_s_per_byte: f64,
    /// Hand-off bytes per wire byte (1 when uncompressed on this hop).
    ratio: f64,
    /// The in-transit compression stage, when this hop runs it.
    stage: Option<f64>,
    /// The rank pairs of an unlike-layout hand-off and the descriptor cost (`None`: one transfer, none).
    ranks: Option<RankCost>,
}

/// What the rank pairs of a hand-off add: the busiest rank's `per_rank` transfers each pay the launch
/// overhead (the first is already in the transfer) and one descriptor per KV block.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RankCost {
    pub per_rank: u32,
    /// Cost of one descriptor, s.
    pub descriptor_s: f64,
    /// Hand-off bytes (uncompressed) of one KV block: a transfer of S bytes has ⌈S / this⌉ blocks.
    pub block_bytes: f64,
}

impl TransferCost {
    /// A hop carrying the hand-off uncompressed.
    pub fn plain(link: &LinkSpec) -> Self {
        TransferCost {
            latency_s: link.latency_us * 1e-6,
            bytes_per_s: link.effective_bytes_per_s(),
            j_per_bit: link.pj_per_bit * 1e-12,
            launch_s: link.launch_overhead_us * 1e-6,
            registration_s_per_byte: match link.registration {
                Registration::Pool => 0.0,
                Registration::PerTransfer => link.registration_ms_per_gb * 1e-3 / 1e9,
            },
            ratio: 1.0,
            stage: None,
            ranks: None,
        }
    }

    /// The same hop with the rank pairs and descriptors of a hand-off (`None`: unchanged).
    pub fn with_ranks(self, ranks: Option<RankCost>) -> Self {
        TransferCost { ranks, ..self }
    }

    /// A hop carrying data already compressed to `f` elsewhere (the sender GPU): fewer bytes, no stage.
    pub fn precompressed(link: &LinkSpec, f: &Format) -> Self {
        TransferCost { ratio: f.ratio_vs_bf16(), ..Self::plain(link) }
    }

    /// A hop that compresses to `f` in transit (the reference's `KVTransit` stage). `kv_bytes_per_value`
    /// converts hand-off bytes to values (2 for BF16) for the stage's ops count.
    pub fn in_transit(link: &LinkSpec, f: &Format, kv_bytes_per_value: f64) -> Self {
        TransferCost {
            ratio: f.ratio_vs_bf16(),
            stage: Some(f.encode_ops_per_value / kv_bytes_per_value),
            ..Self::plain(link)
        }
    }

    /// The reference's link: compression in transit when a format is given.
    pub fn new(link: &LinkSpec, compression: Option<&Format>, kv_bytes_per_value: f64) -> Self {
        match compression {
            None => Self::plain(link),
            Some(f) => Self::in_transit(link, f, kv_bytes_per_value),
        }
    }

    /// Cost of handing off `bytes` of KV, with B the effective bandwidth (line rate × NICs × efficiency /
    /// GPUs per NIC) and ℓ' = ℓ + launch overhead + registration (the registration of the bytes handed to the
    /// NIC: the wire bytes, or the uncompressed bytes when an in-transit stage compresses them).
    /// Uncompressed: ℓ' + S/B. Precompressed: ℓ' + S/ρ/B. In transit: ℓ' + 1 µs + max(S/ρ/B, ops/(1.6·B)).
    pub fn transfer(&self, bytes: f64) -> Transfer {
        let wire = bytes / self.ratio;
        let t_wire = wire / self.bytes_per_s;
        let registered = if self.stage.is_some() { bytes } else { wire };
        let registration_s = registered * self.registration_s_per_byte;
        let descriptors_s = match self.ranks {
            None => 0.0,
            Some(r) => {
                let blocks = (bytes / r.block_bytes).ceil();
                (r.per_rank - 1) as f64 * self.launch_s + r.per_rank as f64 * blocks * r.descriptor_s
            }
        };
        let setup_s = self.latency_s + self.launch_s + registration_s + descriptors_s;
        let (data_s, latency_s, transit_j, transit_bound) = match self.stage {
            None => (t_wire, setup_s, 0.0, false),
            Some(ops_per_input_byte) => {
                let t_ops = ops_per_input_byte * bytes / (TRANSIT_OPS_PER_WIRE_BYTE * self.bytes_per_s);
                (t_wire.max(t_ops), setup_s + TRANSIT_LATENCY_S, bytes * 8.0 * TRANSIT_J_PER_INPUT_BIT, t_ops > t_wire)
            }
        };
        Transfer {
            duration_s: latency_s + data_s,
            data_s,
            latency_s,
            launch_s: self.launch_s,
            registration_s,
            descriptors_s,
            wire_bytes: wire,
            link_j: wire * 8.0 * self.j_per_bit,
            transit_j,
            transit_bound,
        }
    }
}

/// Work of an element-wise compression (or decompression) pass to or from `f` on an endpoint GPU over
/// `bytes` of hand-off: the format's ops on each value, and HBM traffic reading one form and writing the
/// other (S + S/ρ). Charged with [`StepTimer::pass`](crate::cost::roofline::StepTimer::pass); the same
/// pass the engine charges on the sender and receiver ([`crate::handoff::plan::HandoffPlan::add_sender_work`]).
pub fn endpoint_pass(f: &Format, kv_bytes_per_value: f64, bytes: f64) -> StepWork {
    let values_per_byte = 1.0 / kv_bytes_per_value;
    let ops_per_byte = f.encode_ops_per_value * values_per_byte;
    let hbm_per_byte = 1.0 + 1.0 / f.ratio_vs_bf16();
    StepWork { flops: ops_per_byte * bytes, bytes: hbm_per_byte * bytes }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cost::presets::{link_presets, LinkSpec, Registration};
    use crate::quant::formats::format;

    fn link(key: &str) -> LinkSpec {
        link_presets().into_iter().find(|(k, _)| *k == key).unwrap().1
    }

    /// An endpoint pass is its formula: the format's ops per value on each value of the hand-off (bytes ÷
    /// bytes per value), and HBM traffic reading one form and writing the other (S + S/ρ); written out here
    /// for fp8 (ρ = 2) and mxfp4 (ρ = 64/17) over a BF16 cache and for fp8 over a 4-byte one.
    #[test]
    fn endpoint_pass_is_its_formula() {
        let bytes = 3.0e6;
        for (name, kvb, ratio) in [("fp8", 2.0, 2.0), ("mxfp4", 2.0, 64.0 / 17.0), ("fp8", 4.0, 2.0)] {
            let f = format(name).unwrap();
            let w = endpoint_pass(f, kvb, bytes);
            let values = bytes / kvb;
            assert!((w.flops - f.encode_ops_per_value * values).abs() <= 1e-9 * w.flops.abs().max(1.0), "{name}");
            assert!((w.bytes - (bytes + bytes / ratio)).abs() <= 1e-9 * bytes, "{name} {kvb}");
        }
        assert!(format("mxfp4").unwrap().encode_ops_per_value != 1.0, "the flops check needs ops per value ≠ 1");
    }

    /// The link table of spec/handoff.md: 268.4 MB (2,048 tokens of Llama-3-8B) on each link, to 0.1 ms.
    #[test]
    fn link_table_times() {
        let bytes = 2048.0 * 131_072.0;
        for (key, ms) in
            [("nvlink4", 0.6), ("cpo-optical", 1.3), ("ib-ndr", 5.4), ("eth-100g", 21.5), ("eth-25g", 85.9)]
        {
            let t = TransferCost::new(&link(key), None, 2.0).transfer(bytes);
            assert_eq!((t.duration_s * 1e4).round() / 10.0, ms, "{key}");
            assert_eq!(t.wire_bytes, bytes);
            assert_eq!(t.transit_j, 0.0);
        }
    }

    /// Each transfer-layer cost is its formula, computed here from the link's fields: the launch overhead adds
    /// launch_overhead_us·1e-6 to the latency; per-transfer registration adds registration_ms_per_gb·1e-3 per
    /// GB handed to the NIC (the wire bytes; the input bytes when an in-transit stage compresses them), a pool
    /// nothing; the data time is S / (line rate · nics · efficiency / gpus_per_nic).
    #[test]
    fn transfer_layer_costs_are_their_formulas() {
        let bytes = 1.13e9;
        let base = link("ib-ndr");
        let plain = TransferCost::plain(&base).transfer(bytes);
        assert_eq!((plain.launch_s, plain.registration_s), (0.0, 0.0));
        let launched = TransferCost::plain(&LinkSpec { launch_overhead_us: 3000.0, ..base.clone() }).transfer(bytes);
        assert_eq!(launched.launch_s, 3e-3);
        assert_eq!(launched.latency_s, 10e-6 + 3e-3);
        assert_eq!(launched.data_s, plain.data_s);
        assert_eq!(launched.duration_s, 10e-6 + 3e-3 + bytes / 50e9);
        let per = LinkSpec { registration: Registration::PerTransfer, ..base.clone() };
        let reg = TransferCost::plain(&per).transfer(bytes);
        assert_eq!(reg.registration_s, 78.125e-3 * 1e-9 * bytes);
        assert!((reg.duration_s - plain.duration_s - reg.registration_s).abs() < 1e-15);
        // Precompressed: the sender's compressed buffer is registered; in transit: the uncompressed one.
        let fp8 = format("fp8").unwrap();
        let pre = TransferCost::precompressed(&per, fp8).transfer(bytes);
        assert_eq!(pre.registration_s, 78.125e-3 * 1e-9 * (bytes / 2.0));
        let transit = TransferCost::in_transit(&per, fp8, 2.0).transfer(bytes);
        assert_eq!(transit.registration_s, 78.125e-3 * 1e-9 * bytes);
        // NICs: 4 x 25 GB/s at 0.87, shared by 2 GPUs.
        let nics = LinkSpec { bandwidth_gb_per_s: 25.0, nics: 4, nic_efficiency: Some(0.87), gpus_per_nic: 2, ..base };
        let x = TransferCost::plain(&nics).transfer(bytes);
        assert_eq!(x.data_s, bytes / (25e9 * 4.0 * 0.87 / 2.0));
        // Without a given efficiency the NIC count's measured curve applies.
        let curve = LinkSpec { nic_efficiency: None, gpus_per_nic: 1, nics: 8, bandwidth_gb_per_s: 50.0, ..nics };
        assert_eq!(TransferCost::plain(&curve).transfer(bytes).data_s, bytes / (50e9 * 8.0 * 0.475));
    }

    /// 25 GbE saturates at 11.6 hand-offs/s of 268.4 MB (spec/handoff.md).
    #[test]
    fn link_full_rate() {
        let bytes = 2048.0 * 131_072.0;
        let t = TransferCost::new(&link("eth-25g"), None, 2.0).transfer(bytes);
        assert_eq!((10.0 / (t.duration_s - 20e-6)).round() / 10.0, 11.6);
    }

    /// fp8 halves the wire bytes and is within the ops budget; mxfp4 (the reference's fp4-block) is
    /// transit-bound: its time falls only 1.6× (spec/simulator.md (b)).
    #[test]
    fn in_transit_compression() {
        let bytes = 1e9;
        let l = link("eth-25g");
        let none = TransferCost::new(&l, None, 2.0).transfer(bytes);
        let fp8 = TransferCost::new(&l, format("fp8"), 2.0).transfer(bytes);
        assert_eq!(fp8.wire_bytes, bytes / 2.0);
        assert!(!fp8.transit_bound);
        assert_eq!(fp8.duration_s, 20e-6 + 1e-6 + bytes / 2.0 / 3.125e9);
        assert_eq!(fp8.transit_j, bytes * 8.0 * 1e-12);
        assert_eq!(fp8.link_j, none.link_j / 2.0);
        let fp4 = TransferCost::new(&l, format("mxfp4"), 2.0).transfer(bytes);
        assert!(fp4.transit_bound);
        let wire_only = none.duration_s - 20e-6;
        assert!(((fp4.duration_s - 21e-6) * 1.6 - wire_only).abs() < 1e-12);
    }
}
