//! `cost.timing` with a measured source: the core reads the step-time tables it is handed (analytic runs on
//! constant and linear tables), refuses malformed ones naming the field, keeps them out of the echo, and times
//! every engine path (whole prompts, chunked prefill, paged KV, macro-steps) from them.

mod common;

use common::{run, step_by_step_diff, trace};
use kvwire_core::steps::{Phase, StepQuery};
use kvwire_core::{Error, Scenario};
use serde_json::{json, Value};

/// A table over small axes whose value at every point is `f(point)`.
fn table(prefill: impl Fn(f64, f64, f64) -> f64, decode: impl Fn(f64, f64) -> f64) -> Value {
    let (s, q, p) = ([1.0, 4.0, 64.0], [1.0, 100.0, 10_000.0], [0.0, 1000.0]);
    let (b, c) = ([1.0, 16.0, 256.0], [1.0, 100.0, 100_000.0]);
    let mut pv = vec![];
    for &x in &s {
        for &y in &q {
            for &z in &p {
                pv.push(prefill(x, y, z));
            }
        }
    }
    let dv: Vec<f64> = b.iter().flat_map(|&x| c.iter().map(move |&y| (x, y))).map(|(x, y)| decode(x, y)).collect();
    json!({"prefill": {"axes": [s, q, p], "values_s": pv}, "decode": {"axes": [b, c], "values_s": dv}})
}

fn measured(tables: Value) -> Value {
    json!({"source": "aiconfigurator", "system": "test", "tables": tables})
}

fn colocated(t: Value, rows: &[(f64, u32, u32)]) -> Value {
    let mut v = json!({"mode": "colocated", "cost": {"timing": measured(json!({"colocated": t}))}});
    v["workload"] = trace(rows);
    v
}

/// Constant tables: one request's first token comes one prefill step after arrival and each later token one
/// decode step after the one before (TTFT = 0.1 s, TPOT = 0.01 s exactly), whatever its length.
#[test]
fn constant_tables_set_ttft_and_tpot() {
    let t = table(|_, _, _| 0.1, |_, _| 0.01);
    let out = run(&colocated(t, &[(0.0, 3000, 5), (10.0, 20, 9)]));
    let tab = &out.table;
    for i in 0..2 {
        let ttft = tab.first_token_s[i] - tab.arrival_s[i];
        assert!((ttft - 0.1).abs() < 1e-12, "ttft {ttft}");
        let steps = (tab.output_tokens[i] - 1) as f64;
        let tpot = (tab.finish_s[i] - tab.first_token_s[i]) / steps;
        assert!((tpot - 0.01).abs() < 1e-12, "tpot {tpot}");
    }
}

/// Linear tables are reproduced between and beyond their points: `Scenario::step_times` of shapes off the
/// grid equals the formula the table was filled from (to rounding).
#[test]
fn linear_tables_are_exact_off_the_grid() {
    let pf = |s: f64, q: f64, p: f64| 1e-3 + 2e-5 * s + 3e-7 * s * q + 1e-9 * p;
    let df = |b: f64, c: f64| 4e-3 + 1e-5 * b + 2e-9 * b * c;
    let v = json!({"cost": {"timing": measured(json!({"prefill": table(pf, df), "decode": table(pf, df)}))}});
    let sc = Scenario::from_json(&v.to_string(), None).unwrap();
    let rows = [
        StepQuery { phase: Phase::Prefill, batch: 3, prompt_tokens: 777, context_tokens: 0 },
        StepQuery { phase: Phase::Prefill, batch: 100, prompt_tokens: 20_000, context_tokens: 1500 },
        StepQuery { phase: Phase::Decode, batch: 37, prompt_tokens: 0, context_tokens: 4321 },
        StepQuery { phase: Phase::Decode, batch: 999, prompt_tokens: 0, context_tokens: 200_000 },
    ];
    for pool in ["prefill", "decode"] {
        let got = sc.step_times(pool, &rows).unwrap();
        let want = [pf(3.0, 777.0, 0.0), pf(100.0, 20_000.0, 1500.0), df(37.0, 4321.0), df(999.0, 200_000.0)];
        for (g, w) in got.iter().zip(want) {
            assert!((g.time_s - w).abs() <= 1e-12 * w, "{pool}: {} vs {w}", g.time_s);
        }
    }
}

/// A mixed step (chunks beside decode rows) costs the chunks' prefill plus what the rows add to the decode
/// table's first point; chunked prefill and paged KV runs take their times from the table, and macro-steps
/// on and off agree bit for bit.
#[test]
fn every_engine_path_reads_the_table() {
    let t = table(|s, q, _| 0.02 + 1e-6 * s * q, |b, c| 0.005 + 1e-4 * b + 1e-9 * b * c);
    let rows: Vec<(f64, u32, u32)> = (0..40).map(|i| (i as f64 * 0.05, 500 + 37 * i, 20 + i % 7)).collect();
    for extra in [
        json!({}),
        json!({"scheduler": {"policy": "chunked", "max_num_batched_tokens": 512}}),
        json!({"kv": {"policy": "paged"}}),
    ] {
        let v = common::merged(&colocated(t.clone(), &rows), &extra);
        let out = run(&v);
        assert_eq!(step_by_step_diff(&v, &out), None, "{extra}");
        let roofline = {
            let mut r = v.clone();
            r["cost"] = json!({});
            run(&r)
        };
        assert_ne!(out.table.finish_s, roofline.table.finish_s, "{extra}: the table changed nothing");
    }
    // One chunked step's arithmetic: a 600-token prompt alone under a 512-token budget runs as chunks of
    // 512 and 88; its first token comes after both.
    let v = common::merged(
        &colocated(t, &[(0.0, 600, 2)]),
        &json!({"scheduler": {"policy": "chunked", "max_num_batched_tokens": 512}}),
    );
    let out = run(&v);
    let want = (0.02 + 1e-6 * 512.0) + (0.02 + 1e-6 * 88.0);
    assert!((out.table.first_token_s[0] - want).abs() < 1e-12, "{} vs {want}", out.table.first_token_s[0]);
}

fn refusal(v: &Value) -> String {
    match Scenario::from_json(&v.to_string(), None) {
        Err(Error::Field { path, .. }) => path,
        other => panic!("expected a field error, got {other:?}"),
    }
}

/// Malformed timing is refused naming the field: an unknown source, a pool without its table, a table for a
/// pool the scenario lacks, tables or provider fields with the roofline, a calibrated source the Python
/// package did not read, a bad grid value, speculative decoding with a measured source.
#[test]
fn bad_timing_is_refused_naming_the_field() {
    let t = table(|_, _, _| 0.1, |_, _| 0.01);
    let cases = [
        (json!({"cost": {"timing": {"source": "guess"}}}), "cost.timing.source"),
        (json!({"cost": {"timing": measured(json!({"prefill": t}))}}), "cost.timing.tables.decode"),
        (
            json!({"cost": {"timing": measured(json!({"prefill": t, "decode": t, "colocated": t}))}}),
            "cost.timing.tables.colocated",
        ),
        (json!({"cost": {"timing": {"source": "aiconfigurator"}}}), "cost.timing.tables"),
        (json!({"cost": {"timing": {"source": "roofline", "tables": {}}}}), "cost.timing.tables"),
        (json!({"cost": {"timing": {"source": "roofline", "system": "h100_sxm"}}}), "cost.timing.system"),
        (json!({"cost": {"timing": {"source": "calibrated", "file": "x.json"}}}), "cost.timing"),
        (json!({"cost": {"timing": {"source": "aiconfigurator", "file": "x.json", "tables": {}}}}), "cost.timing.file"),
    ];
    for (v, path) in cases {
        assert_eq!(refusal(&v), path, "{v}");
    }
    let mut bad = t.clone();
    bad["prefill"]["values_s"][3] = json!(-1.0);
    let v = json!({"cost": {"timing": measured(json!({"prefill": bad, "decode": t}))}});
    assert_eq!(refusal(&v), "cost.timing.tables.prefill.prefill.values_s[3]");
    let v = json!({"cost": {"timing": measured(json!({"prefill": t, "decode": t}))}, "speculative": {"method": "mtp", "tokens": 2, "acceptance": 0.7}});
    assert_eq!(refusal(&v), "speculative");
}

/// The echo shows the source and its provenance but not the tables (a run's scenario stays small), and the
/// roofline named explicitly echoes as the default does.
#[test]
fn echo_leaves_the_tables_out() {
    let t = table(|_, _, _| 0.1, |_, _| 0.01);
    let mut timing = measured(json!({"prefill": t, "decode": t}));
    timing["provenance"] = json!({"provider": "test 1.0"});
    let sc = Scenario::from_json(&json!({"cost": {"timing": timing}}).to_string(), None).unwrap();
    let echo = sc.echo_json();
    assert_eq!(
        echo["cost"]["timing"],
        json!({"source": "aiconfigurator", "system": "test", "provenance": {"provider": "test 1.0"}})
    );
    let plain = Scenario::from_json("{}", None).unwrap().echo_json();
    let named = Scenario::from_json(r#"{"cost": {"timing": {"source": "roofline"}}}"#, None).unwrap().echo_json();
    assert_eq!(named, plain);
    assert!(plain["cost"].get("timing").is_none());
}

/// The ceilings use the table too: with constant tables (prefill 0.1 s, decode 0.01 s a step) a pool of whole
/// prompts of 1,000 tokens under the 8,192-token budget serves 8 prompts a step, 80 req/s; a decode instance
/// of B sequences, each needing 9 steps for 10 output tokens, serves B / (9 · 0.01) req/s.
#[test]
fn ceilings_read_the_table() {
    let t = table(|_, _, _| 0.1, |_, _| 0.01);
    let mut v = json!({"cost": {"timing": measured(json!({"prefill": t, "decode": t}))}});
    v["workload"] = json!({"requests": 50, "prompt_tokens": {"dist": "fixed", "value": 1000},
        "output_tokens": {"dist": "fixed", "value": 10}});
    let sc = Scenario::from_json(&v.to_string(), None).unwrap();
    let c = kvwire_core::ceilings::scenario_ceilings(&sc).unwrap();
    assert!((c.prefill_req_per_s.unwrap() - 80.0).abs() < 1e-9, "{:?}", c.prefill_req_per_s);
    let b = c.decode_batch as f64;
    let want = b / (9.0 * 0.01);
    assert!((c.decode_req_per_s.unwrap() - want).abs() < 1e-9 * want, "{:?} vs {want}", c.decode_req_per_s);
}
