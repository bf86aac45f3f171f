//! Weight and compute formats (issue 24 item 2): the bytes of `model.weights` in the memory fit and the
//! weight reads, and the matmul rate of the compute format at the device's per-format peak, each against a
//! figure written out here from the model's shape and the datasheet peaks.

mod common;

use common::{run, trace};
use kvwire_core::{Error, Scenario};
use serde_json::{json, Value};

/// Llama-3-8B: 32 layers, hidden 4,096, 8 KV heads of 128, MLP 14,336, vocabulary 128,256.
const L: f64 = 32.0;
const D: f64 = 4096.0;
fn layer_params() -> f64 {
    L * (2.0 * D * D + 2.0 * D * 1024.0 + 3.0 * D * 14336.0)
}

/// A single 2,048-token prompt with one output token on one device, no TDP roof (plain roofline).
fn one_prefill(model: Value, device: &str) -> Value {
    json!({
        "model": model,
        "prefill": {"device": device},
        "decode": {"device": device},
        "cost": {"enforce_tdp": false},
        "workload": trace(&[(0.0, 2048, 1)]),
    })
}

fn prefill_busy(v: &Value) -> f64 {
    let out = run(v);
    assert_eq!(out.stats.instances[0].steps, 1);
    out.stats.instances[0].busy_s
}

/// The compute-bound prefill step: matmul FLOPs (2·P_L·T plus the LM head once, 2·V·d) at the compute
/// format's derated peak, attention FLOPs (L·4d·T(T+1)/2) at BF16's, plus the 0.5 ms overhead.
fn prefill_s(matmul_peak_tflops: f64) -> f64 {
    let t = 2048.0;
    let matmul = 2.0 * layer_params() * t + 2.0 * 128256.0 * D;
    let attention = L * 4.0 * D * t * (t + 1.0) / 2.0;
    matmul / (matmul_peak_tflops * 1e12 * 0.55) + attention / (989e12 * 0.55) + 0.0005
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * b.abs()
}

/// BF16 (the default): every FLOP at 989 TFLOP/s. W8A8 on H100: the matmuls at its 1,979 dense FP8 peak.
/// W8A16 (FP8 weights, BF16 activations) keeps BF16 matmuls. FP4 on H100 (no FP4 tensor cores) falls back to
/// FP8 and says so; on B200 it runs at 9,000.
#[test]
fn matmuls_run_at_the_compute_formats_peak() {
    let bf16 = prefill_busy(&one_prefill(json!("llama3-8b"), "h100"));
    assert!(close(bf16, prefill_s(989.0)), "{bf16} vs {}", prefill_s(989.0));
    let w8a8 = json!({"preset": "llama3-8b", "weights": "fp8", "activations": "fp8"});
    let fp8 = prefill_busy(&one_prefill(w8a8, "h100"));
    assert!(close(fp8, prefill_s(1979.0)), "{fp8} vs {}", prefill_s(1979.0));
    let w8a16 = json!({"preset": "llama3-8b", "weights": "fp8"});
    assert!(close(prefill_busy(&one_prefill(w8a16, "h100")), prefill_s(989.0)));
    let fp4 = json!({"preset": "llama3-8b", "weights": "nvfp4", "activations": "nvfp4"});
    let out = run(&one_prefill(fp4.clone(), "h100"));
    assert!(close(out.stats.instances[0].busy_s, prefill_s(1979.0)));
    assert_eq!(out.stats.instances[0].compute_format, "fp8");
    assert_eq!(out.stats.instances[0].compute_wanted.as_deref(), Some("nvfp4"));
    let b200 = run(&one_prefill(fp4, "b200"));
    let want = {
        let t = 2048.0;
        let matmul = 2.0 * layer_params() * t + 2.0 * 128256.0 * D;
        let attention = L * 4.0 * D * t * (t + 1.0) / 2.0;
        matmul / (9000e12 * 0.55) + attention / (2250e12 * 0.55) + 0.0005
    };
    assert!(close(b200.stats.instances[0].busy_s, want), "{} vs {want}", b200.stats.instances[0].busy_s);
    assert_eq!(b200.stats.instances[0].compute_wanted, None);
}

/// FP8 weights take one byte: Llama-3-70B (70,552,387,584 parameters) fits on two H100s with KV for
/// ⌊(2·72 GB − 70.55 GB)/327,680 B⌋ tokens where BF16 leaves 8,835; NVFP4 weights take 0.5625 bytes.
#[test]
fn weight_bytes_set_the_memory_fit() {
    let cap = |weights: Option<&str>| {
        let mut m = json!({"preset": "llama3-70b"});
        if let Some(w) = weights {
            m["weights"] = json!(w);
        }
        let v = json!({"model": m, "prefill": {"devices_per_instance": 2}, "decode": {"devices_per_instance": 2},
                       "workload": trace(&[(0.0, 100, 2)])});
        run(&v).stats.instances[1].kv_capacity_tokens.unwrap()
    };
    let p = 70_552_387_584.0_f64;
    let kv = 80.0 * 2.0 * 8.0 * 128.0 * 2.0;
    assert_eq!(cap(None), 8_835);
    assert_eq!(cap(Some("fp8")), ((2.0 * 72e9 - p) / kv).floor() as u64);
    assert_eq!(cap(Some("nvfp4")), ((2.0 * 72e9 - p * 0.5625) / kv).floor() as u64);
}

/// A decode step of one sequence is memory-bound: FP8 weights halve the weight bytes it reads.
#[test]
fn fp8_weights_halve_the_weight_reads() {
    let bytes = |m: Value| {
        let v = json!({"model": m, "workload": trace(&[(0.0, 10, 2)]), "cost": {"enforce_tdp": false}});
        let out = run(&v);
        let dec = &out.stats.instances[1];
        assert_eq!(dec.steps, 1);
        dec.bytes
    };
    let bf16 = bytes(json!("llama3-8b"));
    let fp8 = bytes(json!({"preset": "llama3-8b", "weights": "fp8"}));
    // The step reads every weight once and 12 positions of KV (the 10 prompt tokens, the first token and the
    // one it writes): the KV part is the same in both.
    let kv = 12.0 * L * 2.0 * 1024.0 * 2.0;
    assert!(close(fp8 - kv, (bf16 - kv) / 2.0), "{bf16} {fp8}");
}

fn refused(v: Value) -> Error {
    Scenario::from_json(&v.to_string(), None).expect_err(&v.to_string())
}

/// Unknown names, an integer activation format and a weight size that contradicts the format are refused,
/// naming the field.
#[test]
fn bad_formats_are_refused_by_name() {
    let cases = [
        (json!({"model": {"preset": "llama3-8b", "weights": "fp6"}}), "model.weights"),
        (json!({"model": {"preset": "llama3-8b", "activations": "int4"}}), "model.activations"),
        (
            json!({"model": {"preset": "llama3-8b", "weights": "fp8", "weight_bytes_per_param": 0.5}}),
            "model.weight_bytes_per_param",
        ),
        (json!({"prefill": {"device": {"preset": "h100", "fp8_peak_tflops": -1.0}}}), "prefill.device.fp8_peak_tflops"),
    ];
    for (v, want) in cases {
        match refused(v.clone()) {
            Error::Field { path, .. } => assert_eq!(path, want, "{v}"),
            other => panic!("{v}: {other}"),
        }
    }
}

/// The echo of a scenario with formats validates to the same scenario (the weight bytes it writes agree
/// with the format).
#[test]
fn the_echo_keeps_the_formats() {
    let v = json!({"model": {"preset": "llama3-8b", "weights": "int4", "activations": "fp8"},
                   "workload": {"requests": 20}});
    let sc = Scenario::from_json(&v.to_string(), None).unwrap();
    let echo = serde_json::to_string(&sc.to_spec()).unwrap();
    assert_eq!(Scenario::from_json(&echo, None).unwrap(), sc);
    assert_eq!(sc.model.spec.weight_bytes_per_param, 0.515625);
}
