//! Helpers shared by the integration tests (each test file that needs them says `mod common;`): running a
//! scenario given as JSON, merging scenario fragments, inline request tables, comparing two per-request
//! tables column by column, and comparing a run with the same scenario run step by step.
#![allow(dead_code)] // each test crate uses a different subset

use kvwire_core::metrics::table::RequestTable;
use kvwire_core::{simulate, Scenario, SimOutput};
use serde_json::{json, Value};

/// Validate and run a scenario; a test failure (naming the scenario) if it is refused or the run fails.
pub fn run(v: &Value) -> SimOutput {
    let text = v.to_string();
    let sc = Scenario::from_json(&text, None).unwrap_or_else(|e| panic!("scenario invalid: {e}\n{text}"));
    simulate(sc).unwrap_or_else(|e| panic!("run failed: {e}\n{text}"))
}

/// The first difference between `out` (a run of `v`) and `v` run step by step (`engine.macro_steps` off,
/// which also uses the plain running sets): the per-request table over every column, every instance's
/// totals, the preemption totals, the inter-token-gap quantiles and Little's-law area, floats bit for bit;
/// `None` when they are identical.
pub fn step_by_step_diff(v: &Value, out: &SimOutput) -> Option<String> {
    let mut p = v.clone();
    p["engine"]["macro_steps"] = json!(false);
    let plain = run(&p);
    if let Some(d) = table_diff(&out.table, &plain.table) {
        return Some(d);
    }
    if out.stats.instances != plain.stats.instances {
        return Some(format!("instances: {:?}\nvs {:?}", out.stats.instances, plain.stats.instances));
    }
    let totals = |o: &SimOutput| {
        let q = o.stats.itl_quantiles();
        let s = &o.stats;
        (
            (s.preemptions, s.recompute_tokens, s.swap_bytes.to_bits(), s.population_area.to_bits()),
            (q.count, q.p50.map(f64::to_bits), q.p99.map(f64::to_bits), q.max.map(f64::to_bits)),
            q.mean.map(f64::to_bits),
        )
    };
    let (a, b) = (totals(out), totals(&plain));
    (a != b).then(|| format!("preemptions / Little / inter-token gaps: {a:?} vs {b:?}"))
}

/// `base` with `extra`'s top-level keys laid over it; objects are merged one level deep.
pub fn merged(base: &Value, extra: &Value) -> Value {
    let mut v = base.clone();
    for (k, x) in extra.as_object().expect("an object") {
        match (v.get_mut(k), x) {
            (Some(Value::Object(a)), Value::Object(b)) => {
                for (kk, xx) in b {
                    a.insert(kk.clone(), xx.clone());
                }
            }
            _ => v[k] = x.clone(),
        }
    }
    v
}

/// A `workload` with an inline request table of `(arrival_s, prompt_tokens, output_tokens)` rows.
pub fn trace(rows: &[(f64, u32, u32)]) -> Value {
    json!({"trace": {
        "arrival_s": rows.iter().map(|r| r.0).collect::<Vec<_>>(),
        "prompt_tokens": rows.iter().map(|r| r.1).collect::<Vec<_>>(),
        "output_tokens": rows.iter().map(|r| r.2).collect::<Vec<_>>(),
    }})
}

/// The first difference between two per-request tables, over every column (floats bit for bit, so
/// NaN = NaN), naming the column and the row; `None` when they are identical.
pub fn table_diff(a: &RequestTable, b: &RequestTable) -> Option<String> {
    fn first<T: PartialEq + std::fmt::Debug>(name: &str, x: &[T], y: &[T]) -> Option<String> {
        if x.len() != y.len() {
            return Some(format!("{name}: {} vs {} rows", x.len(), y.len()));
        }
        let i = x.iter().zip(y).position(|(p, q)| p != q)?;
        Some(format!("{name}[{i}] differs: {:?} vs {:?}", x[i], y[i]))
    }
    let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    let floats = [
        ("arrival_s", &a.arrival_s, &b.arrival_s),
        ("prefill_start_s", &a.prefill_start_s, &b.prefill_start_s),
        ("first_token_s", &a.first_token_s, &b.first_token_s),
        ("first_token_seen_s", &a.first_token_seen_s, &b.first_token_seen_s),
        ("kv_start_s", &a.kv_start_s, &b.kv_start_s),
        ("kv_ready_s", &a.kv_ready_s, &b.kv_ready_s),
        ("decode_start_s", &a.decode_start_s, &b.decode_start_s),
        ("finish_s", &a.finish_s, &b.finish_s),
        ("kv_hold_wait_s", &a.kv_hold_wait_s, &b.kv_hold_wait_s),
        ("lost_s", &a.lost_s, &b.lost_s),
    ];
    first("id", &a.id, &b.id)
        .or_else(|| first("prompt_tokens", &a.prompt_tokens, &b.prompt_tokens))
        .or_else(|| first("output_tokens", &a.output_tokens, &b.output_tokens))
        .or_else(|| first("rejected", &a.rejected, &b.rejected))
        .or_else(|| first("measured", &a.measured, &b.measured))
        .or_else(|| first("over_context", &a.over_context, &b.over_context))
        .or_else(|| first("local_decode", &a.local_decode, &b.local_decode))
        .or_else(|| first("prefill_instance", &a.prefill_instance, &b.prefill_instance))
        .or_else(|| first("decode_instance", &a.decode_instance, &b.decode_instance))
        .or_else(|| first("preemptions", &a.preemptions, &b.preemptions))
        .or_else(|| first("cached_tokens", &a.cached_tokens, &b.cached_tokens))
        .or_else(|| first("session", &a.session, &b.session))
        .or_else(|| first("turn", &a.turn, &b.turn))
        .or_else(|| first("accepted_tokens", &a.accepted_tokens, &b.accepted_tokens))
        .or_else(|| first("retries", &a.retries, &b.retries))
        .or_else(|| first("failed", &a.failed, &b.failed))
        .or_else(|| floats.iter().find_map(|(name, x, y)| first(name, &bits(x), &bits(y))))
}
