//! What a user can name in a scenario: every preset (with its source) and every hand-off format (with its
//! computed ratio), as JSON for the Python API and the `kvwire presets` command.

use serde_json::{json, Map, Value};

use crate::cost::model::{LmHead, ModelCost};
use crate::cost::presets::{device_facts, device_presets, link_presets, model_presets};
use crate::quant::formats::{ALIASES, FORMATS};

fn keyed<T: serde::Serialize>(rows: Vec<(&'static str, T)>, extra: impl Fn(&T) -> Value) -> Value {
    let mut m = Map::new();
    for (k, spec) in rows {
        let mut v = serde_json::to_value(&spec).unwrap_or(Value::Null);
        if let (Value::Object(o), Value::Object(e)) = (&mut v, extra(&spec)) {
            o.extend(e);
        }
        m.insert(k.to_string(), v);
    }
    Value::Object(m)
}

/// `{"models": {key: {...}}, "devices": {...}, "links": {...}, "formats": {...}}`. Models carry their
/// derived parameter counts and KV bytes per token; formats their bits per value and ratio against BF16.
pub fn catalog_json() -> Value {
    json!({
        "models": keyed(model_presets(), |m| {
            let c = ModelCost::new(m, LmHead::Last);
            json!({
                "params": c.total_params as f64,
                "matmul_params": c.matmul_params as f64,
                "kv_bytes_per_token": c.kv_bytes_per_token,
                "resident_weight_bytes": c.resident_weight_bytes(),
            })
        }),
        "devices": keyed(device_presets(), |d| {
            // The descriptive facts (FP8 peak, scale-up link, memory kind, illustrative) beside each spec.
            let facts = device_presets().into_iter().zip(device_facts()).find(|((_, p), _)| p == d);
            facts.map_or(json!({}), |(_, (_, f))| serde_json::to_value(f).unwrap_or(json!({})))
        }),
        "links": keyed(link_presets(), |_| json!({})),
        "formats": FORMATS.iter().map(|f| (f.name.to_string(), json!({
            "element_bits": f.element_bits(),
            "block": f.block(),
            "scale_type": f.scale_type(),
            "scale_bits_per_block": f.scale_bits_per_block(),
            "tensor_scale_bits": f.tensor_scale_bits(),
            "bits_per_value": f.bits_per_value(),
            "ratio_vs_bf16": f.ratio_vs_bf16(),
            "encode_ops_per_value": f.encode_ops_per_value,
            "description": f.description,
        }))).collect::<Map<String, Value>>(),
        "format_aliases": ALIASES.iter().map(|(a, n)| (a.to_string(), json!(n))).collect::<Map<String, Value>>(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn catalog_lists_every_kind() {
        let c = catalog_json();
        assert_eq!(c["models"]["llama3-8b"]["kv_bytes_per_token"], 131072.0);
        assert_eq!(c["devices"]["h100"]["hbm_gb"], 80.0);
        assert_eq!(c["devices"]["mi300x"]["fp8_peak_tflops"], 2614.9);
        assert_eq!(c["devices"]["wafer-scale"]["illustrative"], true);
        assert_eq!(c["devices"]["h100"]["illustrative"], false);
        assert_eq!(c["links"]["ib-ndr"]["bandwidth_gb_per_s"], 50.0);
        assert_eq!(c["formats"]["fp8_e4m3"]["ratio_vs_bf16"], 2.0);
        assert_eq!(c["format_aliases"]["fp8"], "fp8_e4m3");
        assert!(c["models"]["opt-13b"]["source"].as_str().unwrap().contains("facebook/opt-13b"));
    }
}
