//! The hops of the hand-off path, resolved once from the scenario: what each hop costs per transfer, how
//! many lanes it has (one shared resource, or one per prefill / decode instance) and how many channels per
//! lane. The engine builds its queueing state from this (`engine/path.rs`) and the analytic ceilings price
//! the same hops (`crate::ceilings`), so the two cannot disagree about the path.

use crate::cost::presets::LinkSpec;
use crate::handoff::transfer::TransferCost;
use crate::scenario::{CompressAt, ConvertAt, LinkModel, Scenario, Topology};

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
#[derive(Clone, Debug)]
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

/// The hops of `sc`'s hand-off path in order, and the index of the network hop. Empty when colocated.
pub fn hops(sc: &Scenario) -> (Vec<Hop>, usize) {
    if !matches!(sc.topology, Topology::Disaggregated { .. }) {
        return (Vec::new(), 0);
    }
    let link = &sc.link;
    let kvb = sc.model.spec.kv_bytes_per_value;
    let network = Hop {
        resource: "kv-link",
        preset: link.spec.key.clone(),
        cost: TransferCost::network(&link.spec.spec, sc.compression, sc.compress_at, kvb),
        lanes: Lanes::Shared,
        channels: link.channels,
        processor_sharing: link.model == LinkModel::Shared,
        convert_w: 0.0,
    };
    let LinkModel::HostStaged { host } = &link.model else { return (vec![network], 0) };
    // A hop before the network carries the hand-off as it left the GPU: compressed only if the sender did.
    let leaving_gpu = |hop: &LinkSpec| match (sc.compression, sc.compress_at) {
        (Some(f), CompressAt::Sender) => TransferCost::precompressed(hop, f),
        _ => TransferCost::plain(hop),
    };
    let pcie = |resource, cost, lanes| Hop {
        resource,
        preset: host.key.clone(),
        cost,
        lanes,
        channels: 1,
        processor_sharing: false,
        convert_w: 0.0,
    };
    let mut out = vec![pcie("pcie-prefill", leaving_gpu(&host.spec), Lanes::PerFront)];
    if let Some(c) = sc.convert.as_ref().filter(|c| c.at == ConvertAt::Host) {
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
    let pcie_in = match sc.compression {
        Some(f) => TransferCost::precompressed(&host.spec, f),
        None => TransferCost::plain(&host.spec),
    };
    out.push(pcie("pcie-decode", pcie_in, Lanes::PerBack));
    (out, network_index)
}
