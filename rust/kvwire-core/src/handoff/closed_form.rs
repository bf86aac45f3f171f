//! The hand-off in closed form (`spec/handoff.md`): size of the cargo, time on the wire, the prefill that
//! produced it, the part left exposed after the prefill (whole or layer-wise streamed), the request rate at
//! which hand-offs alone fill the link, the transfer layer's share (launch overhead, registration, host
//! staging) and a layout conversion at its placement. No queueing: one request on an otherwise idle path,
//! priced with the same hops (`plan::hops`), transfer costs and endpoint passes as the simulation.

use serde::Serialize;

use crate::cost::model::ModelCost;
use crate::cost::roofline::StepTimer;
use crate::cost::table::Shape;
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
    /// The busiest rank's extra transfers (launch overhead each) and descriptors on the network hop, for a
    /// hand-off between two parallel layouts or over a link with `descriptor_us` (in `transfer_s`), s.
    pub descriptors_s: f64,
    /// (prefill rank, decode rank) pairs that exchange KV heads (1 without parallel layouts on both pools).
    pub rank_pairs: u32,
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
    let work = model.prefill(prompt_tokens, 1, model.prompt_attention_flops(prompt_tokens));
    let mut prefill_s = sender.step(work, Shape::prefill(1, prompt_tokens, 0)).time_s;
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
        descriptors_s: x.descriptors_s,
        rank_pairs: plan.rank_pairs,
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
