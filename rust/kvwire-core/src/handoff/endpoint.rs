//! What the two ends of the hand-off do to one request's cache on their GPUs: the sender's compression pass
//! (`handoff.compress_at = "sender"`) and/or layout conversion (`handoff.convert.at = "sender"`), the
//! receiver's decompression (`handoff.decompress_at = "receiver"`) and/or conversion. The engine charges the
//! same work in the prefill step (`engine/front.rs`) and the first decode step (`engine/back.rs`); the analytic
//! ceilings (`crate::ceilings`) and the closed-form calculator (`closed_form`) price it from here.

use crate::cost::model::{ModelCost, StepWork};
use crate::handoff::transfer::endpoint_pass;
use crate::scenario::{CompressAt, ConvertAt, DecompressAt, Pool, Scenario, Topology};

/// The pool that decodes handed-off requests (the colocated pool when there is no hand-off).
pub fn decoding_pool(sc: &Scenario) -> &Pool {
    match &sc.topology {
        Topology::Disaggregated { decode, .. } => decode,
        Topology::Colocated { pool } => pool,
    }
}

/// HBM traffic of the layout conversion at the sender (`sender = true`) or the receiver, for a prompt of
/// `prompt_tokens` (rounded to whole tokens); `None` when no conversion runs there. The receiver converts the
/// cache in the decode pool's format (its `kv_format` divides the bytes per value).
pub fn convert_work(sc: &Scenario, prompt_tokens: f64, sender: bool) -> Option<StepWork> {
    let at = if sender { ConvertAt::Sender } else { ConvertAt::Receiver };
    let c = sc.convert.as_ref().filter(|c| c.at == at)?;
    let kvb = sc.model.spec.kv_bytes_per_value;
    let value_bytes = if sender { kvb } else { kvb / decoding_pool(sc).kv_format.map_or(1.0, |f| f.ratio_vs_bf16()) };
    Some(StepWork { flops: 0.0, bytes: c.gpu_bytes(prompt_tokens.round() as u64, value_bytes) })
}

/// Work of the sender's (`sender = true`) or the receiver's whole pass for one hand-off of `prompt_tokens`:
/// the compression (or decompression) there plus the conversion there, charged as one pass.
pub fn endpoint_work(sc: &Scenario, prompt_tokens: f64, sender: bool) -> StepWork {
    let base = ModelCost::new(&sc.model.spec, sc.lm_head);
    let kvb = sc.model.spec.kv_bytes_per_value;
    let bytes = prompt_tokens * base.kv_bytes_per_token;
    let mut w = StepWork { flops: 0.0, bytes: 0.0 };
    let compress = match (sc.compression, sender) {
        (Some(f), true) if sc.compress_at == CompressAt::Sender => Some(f),
        (Some(f), false) if sc.decompress_at == DecompressAt::Receiver => Some(f),
        _ => None,
    };
    if let Some(f) = compress {
        w = endpoint_pass(f, kvb, bytes);
    }
    if let Some(c) = convert_work(sc, prompt_tokens, sender) {
        w.bytes += c.bytes;
    }
    w
}
