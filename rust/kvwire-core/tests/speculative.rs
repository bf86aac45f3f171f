//! Speculative decoding (issue 24 item 3): the acceptance model against its closed form, the token
//! accounting of a run, the step cost as the verify pass plus the draft passes, α = 0 as plain decoding plus
//! the draft cost, bursty inter-token gaps, determinism, and the refusals.

mod common;

use common::{merged, run, step_by_step_diff, trace};
use kvwire_core::cost::model::LmHead;
use kvwire_core::cost::roofline::StepTimer;
use kvwire_core::cost::table::Shape;
use kvwire_core::{Error, Scenario};
use serde_json::{json, Value};

fn spec(method: &str, tokens: u32, acceptance: Value) -> Value {
    let mut s = json!({"method": method, "tokens": tokens, "acceptance": acceptance});
    if method == "draft" {
        s["draft_model"] = json!("llama3.2-1b");
    }
    s
}

/// Requests with long outputs (so that the last step's truncation hardly matters), enough of them for the
/// mean to settle.
fn long_outputs(speculative: Value) -> Value {
    json!({"workload": {"requests": 200, "output_tokens": {"dist": "fixed", "value": 400},
                        "prompt_tokens": {"dist": "fixed", "value": 256}},
           "speculative": speculative})
}

/// With i.i.d. acceptance α and γ drafts, a sequence gets (1 − α^(γ+1)) / (1 − α) tokens per verify step
/// (the expected number of leading accepted drafts plus one). Over ~30,000 verify steps the measured mean is
/// within 4 standard errors (the per-step count's variance bounded by γ²/4 + 1).
#[test]
fn tokens_per_step_match_the_closed_form() {
    for (alpha, gamma) in [(0.7, 3u32), (0.9, 5), (0.5, 1), (0.8, 8)] {
        let out = run(&long_outputs(spec("mtp", gamma, json!(alpha))));
        let (acc, rows): (u64, u64) =
            out.stats.instances.iter().fold((0, 0), |(a, r), i| (a + i.spec_accepted, r + i.spec_rows));
        let mean = 1.0 + acc as f64 / rows as f64;
        let want = (1.0 - f64::powi(alpha, gamma as i32 + 1)) / (1.0 - alpha);
        let se = ((gamma as f64 * gamma as f64 / 4.0 + 1.0) / rows as f64).sqrt();
        // The last step of a request takes at most what is left: a small downward bias, bounded by the share
        // of final steps (one per request).
        let bias = 200.0 * gamma as f64 / rows as f64;
        assert!(mean <= want + 4.0 * se && mean >= want - 4.0 * se - bias, "α {alpha} γ {gamma}: {mean} vs {want}");
    }
}

/// A per-position acceptance list: P(position i accepted | the ones before were) — [0.9, 0.5, 0.0] gives
/// 1 + 0.9 + 0.45 + 0 = 2.35 tokens per step, and never a third draft.
#[test]
fn per_position_acceptance() {
    let out = run(&long_outputs(spec("eagle", 3, json!([0.9, 0.5, 0.0]))));
    let (acc, rows): (u64, u64) =
        out.stats.instances.iter().fold((0, 0), |(a, r), i| (a + i.spec_accepted, r + i.spec_rows));
    let mean = 1.0 + acc as f64 / rows as f64;
    let se = (1.0 / rows as f64).sqrt();
    assert!((mean - 2.35).abs() < 4.0 * se + 200.0 * 3.0 / rows as f64, "{mean}");
    let max_accepted = *out.table.accepted_tokens.iter().max().unwrap();
    assert!(max_accepted > 0);
}

/// Token accounting: every request still gets exactly its output; its decode steps are output − 1 minus the
/// drafts it accepted, so Σ steps over requests = Σ verified rows; Σ accepted (the per-request column) = the
/// instances' total.
#[test]
fn every_token_is_accounted_for() {
    let out = run(&long_outputs(spec("draft", 4, json!(0.75))));
    let t = &out.table;
    let rows: u64 = out.stats.instances.iter().map(|i| i.spec_rows).sum();
    let accepted: u64 = out.stats.instances.iter().map(|i| i.spec_accepted).sum();
    assert_eq!(t.accepted_tokens.iter().map(|&a| a as u64).sum::<u64>(), accepted);
    let steps: u64 = (0..t.len())
        .filter(|&i| !t.rejected[i])
        .map(|i| t.output_tokens[i] as u64 - 1 - t.accepted_tokens[i] as u64)
        .sum();
    assert_eq!(steps, rows);
    assert!(t.finish_s.iter().zip(&t.rejected).all(|(f, &r)| r || f.is_finite()));
}

/// One request alone (prompt 100, output 5) with α = 0: four decode steps of one sequence, each the verify
/// pass over γ + 1 = 4 positions at its context (the roofline's step, with its overhead) plus three draft
/// passes of Llama-3.2-1B (element-wise, no overhead) — and the same tokens, steps and first token as without
/// speculation. (The decode instance's busy time is checked against the sum of those step times built from
/// the cost model, which `cost::model` and `cost::roofline` test against the spec's figures.)
#[test]
fn alpha_zero_is_plain_decoding_plus_the_draft_cost() {
    let base = json!({"workload": trace(&[(0.0, 100, 5)])});
    let spec_v = merged(&base, &json!({"speculative": spec("draft", 3, json!(0.0))}));
    let plain = run(&base);
    let sp = run(&spec_v);
    assert_eq!(sp.table.first_token_s, plain.table.first_token_s);
    assert_eq!(sp.stats.instances[1].decode_steps, plain.stats.instances[1].decode_steps);
    assert_eq!(sp.stats.instances[1].decode_steps, 4);
    assert_eq!(sp.table.accepted_tokens, vec![0]);
    let sc = Scenario::from_json(&spec_v.to_string(), None).unwrap();
    let pool = sc.decode_pool();
    let timer: StepTimer = pool.timer(sc.roofline);
    let target = sc.pool_cost(pool);
    let draft = pool.cost(&sc.speculative.as_ref().unwrap().draft_cost(LmHead::Last));
    let (mut want, mut drafts) = (0.0, 0.0);
    for k in 1..=4u64 {
        let ctx = 100 + k; // prompt + tokens so far
        want += timer.step(target.verify(ctx, 1, 3), Shape::decode(4, ctx)).time_s;
        for j in 0..3 {
            drafts += timer.pass(draft.decode(ctx + j, 1)).time_s;
        }
    }
    want += drafts;
    let busy = sp.stats.instances[1].busy_s;
    assert!((busy - want).abs() <= 1e-12 * want, "{busy} vs {want}");
    let draft_s = sp.stats.instances[1].draft_s;
    assert!((draft_s - drafts).abs() <= 1e-12 * drafts, "{draft_s} vs {drafts}");
    assert!(sp.table.finish_s[0] > plain.table.finish_s[0]);
}

/// Accepted drafts arrive with their step's token: a gap of 0 each. At α = 0.9, γ = 4 most gaps are 0 (the
/// median), where plain decoding has none.
#[test]
fn inter_token_gaps_become_bursty() {
    let q = run(&long_outputs(spec("mtp", 4, json!(0.9)))).stats.itl_quantiles();
    assert_eq!(q.p50, Some(0.0));
    assert!(q.p99.unwrap() > 0.0);
    let plain = run(&long_outputs(Value::Null)).stats.itl_quantiles();
    assert!(plain.p50.unwrap() > 0.0);
}

/// Same scenario, same result; the acceptance draws depend on the seed.
#[test]
fn deterministic_with_the_seed() {
    let v = long_outputs(spec("mtp", 3, json!(0.6)));
    let (a, b) = (run(&v), run(&v));
    assert_eq!(a.table.accepted_tokens, b.table.accepted_tokens);
    assert_eq!(a.table.finish_s, b.table.finish_s);
    let mut other = v.clone();
    other["workload"]["seed"] = json!(7);
    assert_ne!(run(&other).table.accepted_tokens, a.table.accepted_tokens);
    let mut plain = v.clone();
    plain["engine"] = json!({"macro_steps": false});
    assert_eq!(run(&plain).table.finish_s, a.table.finish_s);
}

/// The fast speculative running set (macro-steps on, the default) equals the plain one step by step,
/// bit for bit over every column, instance total and inter-token-gap quantile, on scenarios that exercise it:
/// disaggregated and colocated, several decode instances, a draft model, per-position acceptance, random
/// output lengths, a session workload, conditional disaggregation and random seeds.
#[test]
fn fast_speculative_equals_step_by_step() {
    let mtp = spec("mtp", 3, json!(0.7));
    let lists = spec("eagle", 4, json!([0.9, 0.7, 0.5, 0.2]));
    let draft = spec("draft", 2, json!(0.6));
    let generated = |seed: u64| {
        json!({"requests": 400, "arrivals": {"rate_per_s": 30.0}, "seed": seed,
               "output_tokens": {"dist": "lognormal", "mean": 120, "cv": 0.8, "min": 2, "max": 900}})
    };
    let cases = [
        json!({"workload": generated(1), "speculative": mtp}),
        json!({"workload": generated(2), "speculative": lists, "decode": {"instances": 3}}),
        json!({"workload": generated(3), "speculative": draft, "mode": "colocated",
               "colocated": {"instances": 2}}),
        json!({"workload": generated(4), "speculative": mtp,
               "router": {"disaggregate": {"policy": "conditional", "min_prompt_tokens": 600}}}),
        json!({"workload": {"sessions": {"count": 40, "turns": 4, "think_s": 1.0}, "seed": 5},
               "speculative": lists}),
        json!({"workload": generated(6), "speculative": mtp, "mode": "colocated",
               "scheduler": {"policy": "chunked", "max_num_batched_tokens": 512}}),
    ];
    for v in cases {
        let out = run(&v);
        assert!(out.table.accepted_tokens.iter().any(|&a| a > 0), "{v}");
        if let Some(d) = step_by_step_diff(&v, &out) {
            panic!("{v}\n{d}");
        }
    }
}

/// Chunked prefill verifies drafts in its mixed steps: on a colocated instance with a 512-token budget, where
/// most decode steps share a pass with a prompt's chunk, the tokens per verify step still follow the closed
/// form (as `tokens_per_step_match_the_closed_form`), every request gets exactly its output, and Σ accepted
/// per request = the instance's total.
#[test]
fn chunked_prefill_verifies_drafts_in_mixed_steps() {
    let (alpha, gamma) = (0.7, 3u32);
    let v = json!({"mode": "colocated", "colocated": {"instances": 1},
                   "scheduler": {"policy": "chunked", "max_num_batched_tokens": 512},
                   "workload": {"requests": 200, "arrivals": {"rate_per_s": 4.0},
                                "output_tokens": {"dist": "fixed", "value": 300},
                                "prompt_tokens": {"dist": "fixed", "value": 2000}},
                   "speculative": spec("mtp", gamma, json!(alpha))});
    let out = run(&v);
    let inst = &out.stats.instances[0];
    assert!(inst.prefill_steps > 500, "mixed steps: {}", inst.prefill_steps);
    let mean = 1.0 + inst.spec_accepted as f64 / inst.spec_rows as f64;
    let want = (1.0 - f64::powi(alpha, gamma as i32 + 1)) / (1.0 - alpha);
    let se = ((gamma as f64 * gamma as f64 / 4.0 + 1.0) / inst.spec_rows as f64).sqrt();
    let bias = 200.0 * gamma as f64 / inst.spec_rows as f64;
    assert!(mean <= want + 4.0 * se && mean >= want - 4.0 * se - bias, "{mean} vs {want}");
    let t = &out.table;
    assert_eq!(t.accepted_tokens.iter().map(|&a| a as u64).sum::<u64>(), inst.spec_accepted);
    let steps: u64 = (0..t.len()).map(|i| t.output_tokens[i] as u64 - 1 - t.accepted_tokens[i] as u64).sum();
    assert_eq!(steps, inst.spec_rows);
    assert!(inst.draft_s > 0.0);
}

/// A decode row that verifies γ drafts takes γ + 1 tokens of a chunked step's budget: a 630-token prompt
/// beside one long-running decode row under a 64-token budget is prefilled in ⌈630 / 60⌉ = 11 chunks with
/// γ = 3, in ⌈630 / 63⌉ = 10 without speculation (plus the decoding request's own one-chunk prefill).
#[test]
fn a_verifying_row_takes_its_positions_of_the_token_budget() {
    let base = json!({"mode": "colocated", "colocated": {"instances": 1},
                      "scheduler": {"policy": "chunked", "max_num_batched_tokens": 64},
                      "workload": trace(&[(0.0, 10, 3000), (0.01, 630, 2)])});
    let plain = run(&base);
    let sp = run(&merged(&base, &json!({"speculative": spec("mtp", 3, json!(0.5))})));
    assert_eq!(plain.stats.instances[0].prefill_steps, 1 + 10);
    assert_eq!(sp.stats.instances[0].prefill_steps, 1 + 11);
}

/// Paged KV with speculative decoding: a step grows a sequence by every token it gets, block by block. One
/// request (prompt 30, output 200) on 16-token blocks at α = 0.8, γ = 4: the decode instance's blocks in use
/// peak at exactly ⌈(30 + 200)/16⌉ = 15 blocks (its whole sequence, nothing more) and all are returned;
/// the run takes fewer decode steps than without speculation and every token is counted.
#[test]
fn paged_kv_grows_by_the_tokens_a_step_gives() {
    let base = json!({"kv": {"policy": "paged", "block_size": 16}, "workload": trace(&[(0.0, 30, 200)])});
    let plain = run(&base);
    let sp = run(&merged(&base, &json!({"speculative": spec("mtp", 4, json!(0.8))})));
    let d = &sp.stats.instances[1];
    assert_eq!(d.kv_peak_tokens, 15 * 16);
    assert_eq!(d.kv_end_tokens, 0);
    assert_eq!(plain.stats.instances[1].kv_peak_tokens, 15 * 16);
    assert!(d.decode_steps < plain.stats.instances[1].decode_steps / 2, "{}", d.decode_steps);
    assert_eq!(d.decode_steps + sp.table.accepted_tokens[0] as u64, 199);
}

/// Speculation draws fewer, dearer steps: at α = 0.8 with an MTP head the run finishes sooner than plain
/// decoding (decode is memory-bound: the verify pass reads the weights once for γ + 1 positions).
#[test]
fn speculation_speeds_up_memory_bound_decoding() {
    let sp = run(&long_outputs(spec("mtp", 3, json!(0.8))));
    let plain = run(&long_outputs(Value::Null));
    let end = |o: &kvwire_core::SimOutput| o.table.finish_s.iter().cloned().fold(0.0, f64::max);
    assert!(end(&sp) < end(&plain), "{} vs {}", end(&sp), end(&plain));
}

/// What cannot run is refused, naming the field.
#[test]
fn bad_speculation_is_refused() {
    let cases = [
        (json!({"speculative": {"method": "mtp", "tokens": 0, "acceptance": 0.5}}), "speculative.tokens"),
        (json!({"speculative": {"method": "mtp", "tokens": 17, "acceptance": 0.5}}), "speculative.tokens"),
        (json!({"speculative": {"method": "mtp", "tokens": 2, "acceptance": 1.5}}), "speculative.acceptance"),
        (json!({"speculative": {"method": "mtp", "tokens": 2, "acceptance": [0.5]}}), "speculative.acceptance"),
        (json!({"speculative": {"method": "mtp", "tokens": 2, "acceptance": [0.5, "x"]}}), "speculative.acceptance[1]"),
        (json!({"speculative": {"method": "draft", "tokens": 2, "acceptance": 0.5}}), "speculative.draft_model"),
        (
            json!({"speculative": {"method": "mtp", "tokens": 2, "acceptance": 0.5, "draft_model": "llama3.2-1b"}}),
            "speculative.draft_model",
        ),
        (
            json!({"speculative": {"method": "draft", "tokens": 2, "acceptance": 0.5,
                                   "draft_model": {"preset": "llama3.2-1b", "layers": 0}}}),
            "speculative.draft_model.layers",
        ),
    ];
    for (v, want) in cases {
        match Scenario::from_json(&v.to_string(), None) {
            Err(Error::Field { path, .. }) => assert_eq!(path, want, "{v}"),
            other => panic!("{v}: {other:?}"),
        }
    }
}

/// The echo keeps `speculative` (method, tokens, acceptance as given, the draft model expanded) and re-runs
/// identically.
#[test]
fn the_echo_keeps_speculation() {
    let v = long_outputs(spec("draft", 2, json!([0.8, 0.6])));
    let sc = Scenario::from_json(&v.to_string(), None).unwrap();
    let echo = serde_json::to_string(&sc.to_spec()).unwrap();
    assert_eq!(Scenario::from_json(&echo, None).unwrap(), sc);
    let again = run(&serde_json::from_str(&echo).unwrap());
    assert_eq!(again.table.accepted_tokens, run(&v).table.accepted_tokens);
}
