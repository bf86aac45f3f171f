//! `Scenario::step_times`: single steps of a scenario's pools as the engine charges them, held against the
//! reference simulator's step-cost table (`spec/simulator.md` (b), the printed 4 decimals, ms), and every
//! refusal naming its row and field.

use kvwire_core::steps::{Phase, StepQuery};
use kvwire_core::{Error, Scenario};
use serde_json::json;

fn q(phase: Phase, batch: u64, prompt_tokens: u64, context_tokens: u64) -> StepQuery {
    StepQuery { phase, batch, prompt_tokens, context_tokens }
}

fn sc(v: serde_json::Value) -> Scenario {
    let mut v = v;
    v["cost"] = json!({"prefill_lm_head": "all"});
    Scenario::from_json(&v.to_string(), None).unwrap()
}

/// The reference table's rows, through the scenario's pools: Llama-3-8B on H100 and A100, Llama-3-70B on four
/// H100s acting as one; prefill compute-bound, decode memory-bound.
#[test]
fn step_times_are_the_reference_tables() {
    let rows = [
        q(Phase::Prefill, 1, 2048, 0),
        q(Phase::Prefill, 4, 2048, 0),
        q(Phase::Decode, 1, 0, 2048),
        q(Phase::Decode, 64, 0, 2048),
    ];
    let ms = |t: f64| (t * 1e7).round() / 1e4;
    let h100 = sc(json!({"prefill": {"device": "h100"}, "decode": {"device": "a100"}}));
    let got: Vec<_> = h100.step_times("prefill", &rows).unwrap();
    let want = [(59.0332, "compute"), (234.6328, "compute"), (6.2007, "memory"), (12.5142, "memory")];
    for (g, (w, bound)) in got.iter().zip(want) {
        assert_eq!((ms(g.time_s), g.bound), (w, bound));
        assert_eq!(g.comm_s, 0.0);
    }
    let a100 = h100.step_times("decode", &rows[..1]).unwrap()[0].time_s;
    assert_eq!(ms(a100), 186.0427);
    assert_eq!(ms(h100.step_times("decode", &rows[2..3]).unwrap()[0].time_s), 9.8660);
    let big = sc(
        json!({"model": "llama3-70b", "prefill": {"devices_per_instance": 4}, "decode": {"devices_per_instance": 4}}),
    );
    let got = big.step_times("decode", &rows[..3]).unwrap();
    assert_eq!((ms(got[0].time_s), ms(got[2].time_s)), (133.8667, 13.5294));
    assert!(got[0].flops > 0.0 && got[0].bytes > 0.0);
}

/// A prefill after cached tokens computes only the new ones (less than the whole prompt, more than the new
/// tokens alone, which attend to nothing); a parallel layout reports its collectives.
#[test]
fn cached_prefixes_and_collectives() {
    let s = sc(json!({}));
    let t = |p, c| s.step_times("prefill", &[q(Phase::Prefill, 2, p, c)]).unwrap()[0].time_s;
    assert!(t(1024, 1024) < t(2048, 0));
    assert!(t(1024, 1024) > t(1024, 0));
    let par = sc(json!({"prefill": {"devices_per_instance": 2, "parallel": {"tp": 2}}}));
    let got = par.step_times("prefill", &[q(Phase::Prefill, 1, 512, 0), q(Phase::Decode, 8, 0, 512)]).unwrap();
    assert!(got.iter().all(|a| a.comm_s > 0.0), "{got:?}");
}

/// A batch of b prompts costs b times one prompt's FLOPs (every FLOP is per token), and the KV a cached
/// prefix adds to the bytes read is b times one prompt's (the weights are read once either way); a row's
/// collective time is its own, not the rows' before it.
#[test]
fn batches_scale_per_sequence_and_rows_are_independent() {
    let s = sc(json!({}));
    let one = |b, p, c| s.step_times("prefill", &[q(Phase::Prefill, b, p, c)]).unwrap()[0];
    for (p, c) in [(300, 0), (300, 700), (1, 5000)] {
        let (f1, f4) = (one(1, p, c).flops, one(4, p, c).flops);
        assert!((f4 - 4.0 * f1).abs() <= 1e-12 * f4, "flops {p} after {c}: {f4} vs 4 x {f1}");
    }
    let kv = |b| one(b, 300, 700).bytes - one(b, 300, 0).bytes;
    assert!((kv(4) - 4.0 * kv(1)).abs() <= 1e-9 * kv(4), "{} vs 4 x {}", kv(4), kv(1));
    assert!(kv(1) > 0.0);
    let par = sc(json!({"prefill": {"devices_per_instance": 2, "parallel": {"tp": 2}}}));
    let (a, b) = (q(Phase::Prefill, 1, 4096, 0), q(Phase::Decode, 8, 0, 512));
    let both = par.step_times("prefill", &[a, b]).unwrap();
    let alone = par.step_times("prefill", &[b]).unwrap();
    // (the timer sums collective time over its steps: a row's share is a difference, equal to rounding)
    assert!((both[1].comm_s - alone[0].comm_s).abs() <= 1e-12 * alone[0].comm_s, "{both:?} vs {alone:?}");
    // The token bound is inclusive: 2²⁴ tokens per sequence is allowed.
    assert!(s.step_times("decode", &[q(Phase::Decode, 1, 0, 1 << 24)]).is_ok());
}

/// Bad rows and pools are refused naming the field: no sequences, a prefill of no tokens, more than 2²⁴
/// tokens per sequence, a pool the scenario does not have.
#[test]
fn bad_rows_are_refused_naming_the_field() {
    let s = sc(json!({}));
    let path = |pool: &str, rows: &[StepQuery]| match s.step_times(pool, rows) {
        Err(Error::Field { path, .. }) => path,
        other => panic!("{other:?}"),
    };
    let ok = q(Phase::Decode, 1, 0, 10);
    assert_eq!(path("decode", &[ok, q(Phase::Decode, 0, 0, 10)]), "rows[1].batch");
    assert_eq!(path("decode", &[q(Phase::Decode, (1 << 20) + 1, 0, 10)]), "rows[0].batch");
    assert_eq!(path("decode", &[q(Phase::Prefill, 1, 0, 0)]), "rows[0].prompt_tokens");
    assert_eq!(path("decode", &[q(Phase::Prefill, 1, (1 << 24) + 1, 0)]), "rows[0].prompt_tokens");
    assert_eq!(path("decode", &[q(Phase::Decode, 1, 0, (1 << 24) + 1)]), "rows[0].context_tokens");
    assert_eq!(path("colocated", &[ok]), "pool");
    let col = Scenario::from_json(r#"{"mode": "colocated"}"#, None).unwrap();
    assert!(matches!(col.step_times("prefill", &[ok]), Err(Error::Field { path, .. }) if path == "pool"));
    assert!(col.step_times("colocated", &[ok]).is_ok());
    assert!(s.step_times("decode", &[q(Phase::Prefill, 1 << 20, 1 << 24, 0)]).is_ok());
}
